"""Certificate that a T = 2 softmax prox minimiser is global, and the prox drivers (numba).

For ``F(x) = ‖x‖²/(2Σ) + ℓ(x)`` with ``ℓ ≥ 0``, every global minimiser lies in the ball
``‖x‖ ≤ r = √(2Σ F_best)`` of any found point ``x_best``. A branch and bound over cubes
covering that ball proves ``F ≥ F_best − tol`` on all of it:

* a cube of centre c and half-diagonal h satisfies ``F ≥ F(c) − ‖∇F(c)‖h − M h²/2``,
  with ``−M`` a lower bound on the curvature of F over the cube;
* F is convex on the largest cube around ``x_best`` where the curvature bound is positive,
  so there ``F ≥ F_best − ‖∇F(x_best)‖ h`` (``x_best`` is stationary);
* ``F ≥ dist(0, cube)²/(2Σ) + Σ_i min ℓ_i`` over the intervals of ``a_i`` the cube spans
  (exact 1-D minima: the T = 2 loss is separable in the row differences);
* cubes outside the ball are dropped.

A cube centre below ``F_best − tol`` is returned as a start for Newton (the minimiser was
not global). Before it, :func:`certify_separable` tries a cheaper proof that takes most
samples: F bounded below by two 1-D functions of the row differences, equal to it at the
found point, each proved minimal there by bisection (docs: Theory). Curvature bounds, in the row differences ``a_i = a0_i + D_i·x`` of
:class:`.prox._Softmax2Problem`: on a cube of half-width w, ``a_i`` moves by at most
``‖D_i‖₁ w``, so ``σ = sigmoid(β a_i)`` stays in an interval, and ``ℓ_i''/β²`` is the
quartic ``12σ⁴ − (20 + 4c)σ³ + (8 + 6c)σ² − 2cσ``, ``c = 1 + p_i − r_i``, whose minimum
over that interval is found exactly (its end points and stationary points, the latter by
bisection with a rigorous margin). Only T = 2 is certified this way; T ≥ 3 has its own
certificate (convexity on the ball of global minimisers, proved row by row) in
:mod:`._certify_rows`.
"""

from __future__ import annotations

import math

import numpy as np

from ._kernels import (_expit, _expit_pair, _grid2, _jit, _newton2, _prange, _val2,
                       parallel_twin)

# result codes of the branch and bound
CERTIFIED, BUDGET, BETTER = 1, 0, -1


# ---------------------------------------------------------------------------------- T = 2
@_jit
def _vgc2(x0, x1, a0, p, r, s, D, beta, lpp):
    """F, ∇F at x, and the second derivatives ``ℓ_i''(a_i)`` written to ``lpp``."""
    f = (x0 * x0 + x1 * x1) / (2 * s)
    g0, g1 = x0 / s, x1 / s
    for i in range(2):
        ba = beta * (a0[i] + D[i, 0] * x0 + D[i, 1] * x1)
        s1, s0 = _expit_pair(ba)
        f += (s1 - p[i]) ** 2 + (s0 - r[i]) ** 2
        e = 2 * (s1 - p[i]) - 2 * (s0 - r[i])
        d1 = beta * s1 * s0
        la = e * d1
        lpp[i] = 4 * d1 * d1 + e * beta * d1 * (s0 - s1)
        g0 += la * D[i, 0]
        g1 += la * D[i, 1]
    return f, g0, g1


@_jit
def _h2(c, t):
    """``ℓ_i''/β²`` as a polynomial in ``t = sigmoid(β a_i)``:
    ``4t²(1−t)² + 2(2t − c)t(1−t)(1−2t) = 12t⁴ − (20 + 4c)t³ + (8 + 6c)t² − 2ct``."""
    return ((12.0 * t - (20.0 + 4.0 * c)) * t + (8.0 + 6.0 * c)) * t * t - 2.0 * c * t


@_jit
def _dh2(c, t):
    return ((48.0 * t - 3.0 * (20.0 + 4.0 * c)) * t + 2.0 * (8.0 + 6.0 * c)) * t - 2.0 * c


@_jit
def _hmin2(c, lo, hi):
    """A lower bound on ``min _h2(c, t)`` over ``t ∈ [lo, hi]`` ⊂ [0, 1].

    The end points and the stationary points inside: ``_h2'`` is a cubic, monotone
    between the roots of its derivative (a quadratic), so each monotone piece holds at
    most one root, found by bisection; a margin covers the bisection and rounding.
    """
    best = min(_h2(c, lo), _h2(c, hi))
    # roots of h'' = 144t² − 6(20 + 4c)t + 2(8 + 6c)
    qa, qb, qc = 144.0, -6.0 * (20.0 + 4.0 * c), 2.0 * (8.0 + 6.0 * c)
    disc = qb * qb - 4.0 * qa * qc
    cuts = np.empty(4)
    cuts[0] = lo
    n = 1
    if disc > 0:
        sq = math.sqrt(disc)
        for root in ((-qb - sq) / (2 * qa), (-qb + sq) / (2 * qa)):
            if lo < root < hi:
                cuts[n] = root
                n += 1
    cuts[n] = hi
    n += 1
    for j in range(n - 1):
        u, v = cuts[j], cuts[j + 1]
        du, dv = _dh2(c, u), _dh2(c, v)
        if du == 0.0 or dv == 0.0 or (du < 0.0) != (dv < 0.0):
            for _ in range(16):
                mid = 0.5 * (u + v)
                dm = _dh2(c, mid)
                if (dm < 0.0) == (du < 0.0):
                    u, du = mid, dm
                else:
                    v, dv = mid, dm
            # h' is monotone on [u, v], so |h'| ≤ max(|h'(u)|, |h'(v)|) there
            best = min(best, _h2(c, 0.5 * (u + v)) - max(abs(du), abs(dv)) * 0.5 * (v - u))
    return best - 1e-12 * (1.0 + abs(c))


@_jit
def _curv2_exact(s, x0, x1, w, a0, p, r, D, beta, dn2):
    """Lower bound on ``λ_min(∇²F)`` over the cube of half-width w around x: on it
    ``a_i`` spans ``a_i(x) ± ‖D_i‖₁ w`` and ``ℓ_i'' ≥ β² min _h2`` over the matching
    interval of ``sigmoid(β a_i)`` (exact up to a margin; the loss is separable in a)."""
    lam = 1.0 / s
    for i in range(2):
        ac = a0[i] + D[i, 0] * x0 + D[i, 1] * x1
        span = (abs(D[i, 0]) + abs(D[i, 1])) * w
        lo, hi = _expit(beta * (ac - span)), _expit(beta * (ac + span))
        c = 1.0 + p[i] - r[i]
        lam += min(0.0, beta * beta * _hmin2(c, lo, hi)) * dn2[i]
    return lam


@_jit
def _interval_min2(c0, c1, h, a0, p, r, D, beta):
    """Exact ``Σ_i min ℓ_i`` over the intervals of ``a_i`` that the cube spans.

    ``ℓ_i = (σ − p_i)² + (1 − σ − r_i)²`` is a convex quadratic in ``σ = sigmoid(β a_i)``,
    minimal at ``σ = (1 + p_i − r_i)/2``, and σ is monotone in ``a_i``.
    """
    out = 0.0
    for i in range(2):
        ac = a0[i] + D[i, 0] * c0 + D[i, 1] * c1
        w = (abs(D[i, 0]) + abs(D[i, 1])) * h
        lo, hi = _expit(beta * (ac - w)), _expit(beta * (ac + w))
        sg = min(max(0.5 * (1 + p[i] - r[i]), lo), hi)
        out += (sg - p[i]) ** 2 + (1 - sg - r[i]) ** 2
    return out


@_jit
def bnb2(x0, x1, f_best, a0, p, r, s, D, beta, tol, budget, stack):
    """Branch and bound of one T = 2 sample; returns ``(code, c0, c1, n_cells)``.

    ``code`` is CERTIFIED, BUDGET (more than ``budget`` cubes split) or BETTER, with
    ``(c0, c1)`` a point where ``F < f_best − tol``. Curvature bounds over a cube are
    exact interval minima of ``ℓ_i''`` (:func:`_curv2_exact`).
    """
    sq2 = math.sqrt(2.0)
    lpp = np.empty(2)      # scratch of _vgc2
    dn2 = np.empty(2)
    for i in range(2):
        dn2[i] = D[i, 0] ** 2 + D[i, 1] ** 2
    f_star, g0, g1 = _vgc2(x0, x1, a0, p, r, s, D, beta, lpp)
    gnorm = math.sqrt(g0 * g0 + g1 * g1)
    rad = math.sqrt(2 * s * max(f_best, 0.0)) * (1 + 1e-12) + 1e-300
    # largest cube around x_best on which F is provably convex (bisection on its width)
    e = 0.0
    if _curv2_exact(s, x0, x1, 2 * rad, a0, p, r, D, beta, dn2) > 0:
        e = 2 * rad     # convex on the whole ball (exact interval bound)
    elif _curv2_exact(s, x0, x1, 0.0, a0, p, r, D, beta, dn2) > 0:
        lo, hi = 0.0, 2 * rad
        for _ in range(8):
            mid = 0.5 * (lo + hi)
            if _curv2_exact(s, x0, x1, mid, a0, p, r, D, beta, dn2) > 0:
                lo = mid
            else:
                hi = mid
        e = lo
    # on that cube F ≥ F(x_best) − ‖∇F(x_best)‖ √2 e: keep the slack below tol/2
    if gnorm * e * sq2 > 0.5 * tol:
        e = 0.5 * tol / (gnorm * sq2)
    stack[0, 0], stack[0, 1], stack[0, 2] = 0.0, 0.0, rad
    top, n_split = 1, 0
    while top > 0:
        top -= 1
        c0, c1, h = stack[top, 0], stack[top, 1], stack[top, 2]
        d0, d1 = max(abs(c0) - h, 0.0), max(abs(c1) - h, 0.0)
        if d0 * d0 + d1 * d1 > rad * rad:
            continue
        if abs(c0 - x0) + h <= e and abs(c1 - x1) + h <= e:
            continue
        f, gc0, gc1 = _vgc2(c0, c1, a0, p, r, s, D, beta, lpp)
        if f < f_best - tol:
            return BETTER, c0, c1, n_split
        if (d0 * d0 + d1 * d1) / (2 * s) + _interval_min2(c0, c1, h, a0, p, r, D, beta) \
                >= f_best - tol:
            continue
        hd = h * sq2
        gc = math.sqrt(gc0 * gc0 + gc1 * gc1)
        M = max(0.0, -_curv2_exact(s, c0, c1, h, a0, p, r, D, beta, dn2))
        if f - gc * hd - 0.5 * M * hd * hd >= f_best - tol:
            continue
        n_split += 1
        if n_split > budget or top + 4 > stack.shape[0]:
            return BUDGET, x0, x1, n_split
        h2 = 0.5 * h
        for k0 in (-1.0, 1.0):
            for k1 in (-1.0, 1.0):
                stack[top, 0], stack[top, 1], stack[top, 2] = c0 + k0 * h2, c1 + k1 * h2, h2
                top += 1
    return CERTIFIED, x0, x1, n_split


# --------------------------------------------------- T = 2: the separable (row) bound
# interval splits of each row's 1-D search before the separable bound gives up (the
# branch and bound over the ball, bnb2, then takes the sample)
_SEPARABLE_BUDGET = 64


@_jit
def _row_value(u, A, Bc, a0, p, r, beta):
    """``φ(u) = A u² + B u + ℓ(a0 + u)``, ℓ the T = 2 row loss."""
    s1, s0 = _expit_pair(beta * (a0 + u))
    return A * u * u + Bc * u + (s1 - p) ** 2 + (s0 - r) ** 2


@_jit
def _row_interval_floor(A, Bc, a0, p, r, beta, lo, hi):
    """A lower bound on φ over ``[lo, hi]``: the exact least values of the quadratic and of
    ℓ there (a convex quadratic in the monotone ``σ(β(a0 + u))``), less a rounding margin."""
    um = min(max(-Bc / (2 * A), lo), hi)
    quad = A * um * um + Bc * um
    s_lo, s_hi = _expit(beta * (a0 + lo)), _expit(beta * (a0 + hi))
    sg = min(max(0.5 * (1 + p - r), s_lo), s_hi)
    loss = (sg - p) ** 2 + (1 - sg - r) ** 2
    return quad + loss - 1e-13 * (abs(A * um * um) + abs(Bc * um) + loss + 1e-3)


@_jit
def _d2h2(c, t):
    return (144.0 * t - 6.0 * (20.0 + 4.0 * c)) * t + 2.0 * (8.0 + 6.0 * c)


@_jit
def _h2_pieces(c, out):
    """The pieces of [0, 1] between the roots of ``_h2''(c, ·)`` that hold a local
    minimum of ``_h2`` (``_h2'`` rising through 0 there; a least value over an interval is
    at its ends or at such a point), written to ``out[k] = (u, v, floor, state)`` with
    state 1 (not yet bracketed: ``[u, v]`` is the piece); returns their number (≤ 2).
    :func:`_h2_bracket` narrows a piece when a curvature bound first needs it."""
    qa, qb, qc = 144.0, -6.0 * (20.0 + 4.0 * c), 2.0 * (8.0 + 6.0 * c)
    disc = qb * qb - 4.0 * qa * qc
    r0, r1 = 0.0, 1.0
    if disc > 0:
        sq = math.sqrt(disc)
        r0 = min(max((-qb - sq) / (2 * qa), 0.0), 1.0)
        r1 = min(max((-qb + sq) / (2 * qa), 0.0), 1.0)
    n = 0
    for j in range(3):
        u = 0.0 if j == 0 else (r0 if j == 1 else r1)
        v = r0 if j == 0 else (r1 if j == 1 else 1.0)
        if not v > u:
            continue
        # (the middle piece, where _h2'' < 0, never qualifies: at most two pieces)
        if n < out.shape[0] and _dh2(c, u) <= 0.0 <= _dh2(c, v):
            out[n, 0], out[n, 1], out[n, 2], out[n, 3] = u, v, -math.inf, 1.0
            n += 1
    return n


# Newton steps of a bracket before bisection takes over
_BRACKET_NEWTON = 8


@_jit
def _h2_bracket(c, out, k):
    """Narrow piece ``k`` of :func:`_h2_pieces` to a bracket ``[u, v]`` of its local
    minimum, of width at most 2^-20 of the piece, with ``_h2 ≥ floor`` on it; state 2.

    ``_h2'`` rises on the piece: safeguarded Newton (regula falsi start, bisection where a
    step leaves the bracket) to a point t, then the bracket ``t ± 2^-21·width`` where
    ``_h2'`` changes sign across it; else bisection of what is left. On a bracket where
    ``_h2'`` is monotone, ``|_h2'| ≤ max(|_h2'(u)|, |_h2'(v)|)``, hence the floor."""
    u, v = out[k, 0], out[k, 1]
    half = (v - u) * 2.0 ** -21
    du, dv = _dh2(c, u), _dh2(c, v)
    t = u - du * (v - u) / (dv - du) if dv > du else 0.5 * (u + v)
    for _ in range(_BRACKET_NEWTON):
        d = _dh2(c, t)
        if d == 0.0:
            break
        if d < 0.0:
            u, du = t, d
        else:
            v, dv = t, d
        curv = _d2h2(c, t)
        t_new = t - d / curv if curv > 0.0 else 0.5 * (u + v)
        if not u < t_new < v:
            t_new = 0.5 * (u + v)
        done = abs(t_new - t) < 0.25 * half
        t = t_new
        if done:
            break
    lo_t, hi_t = max(t - half, out[k, 0]), min(t + half, out[k, 1])
    d_lo, d_hi = _dh2(c, lo_t), _dh2(c, hi_t)
    if d_lo <= 0.0 <= d_hi:
        u, v, du, dv = lo_t, hi_t, d_lo, d_hi
    else:
        while v - u > 2.0 * half:
            mid = 0.5 * (u + v)
            dm = _dh2(c, mid)
            if dm < 0.0:
                u, du = mid, dm
            else:
                v, dv = mid, dm
    out[k, 0], out[k, 1] = u, v
    out[k, 2] = _h2(c, 0.5 * (u + v)) - max(abs(du), abs(dv)) * 0.5 * (v - u)
    out[k, 3] = 2.0


@_jit
def _row_curvature(e, ustar, A, a0, p, r, beta, stationary, n_stationary):
    """A lower bound on ``φ'' = 2A + ℓ''`` over ``[u* − e, u* + e]``: ℓ''/β² over the σ
    interval is at least the least of ``_h2`` at its ends and the floors of the
    stationary points whose brackets meet it (:func:`_h2_pieces`, bracketed on first
    need), less :func:`_hmin2`'s margin."""
    c = 1 + p - r
    lo, hi = _expit(beta * (a0 + ustar - e)), _expit(beta * (a0 + ustar + e))
    least = min(_h2(c, lo), _h2(c, hi))
    for k in range(n_stationary):
        if stationary[k, 1] >= lo and stationary[k, 0] <= hi:
            if stationary[k, 3] == 1.0:   # the piece meets the interval: its bracket
                _h2_bracket(c, stationary, k)
                if not (stationary[k, 1] >= lo and stationary[k, 0] <= hi):
                    continue
            least = min(least, stationary[k, 2])
    least -= 1e-12 * (1.0 + abs(c))
    return 2 * A + beta * beta * min(0.0, least)


@_jit
def _sigma_edge(c, theta, s_from, s_to, stationary, n_stationary):
    """Going from ``s_from`` (where ``_h2 > θ``) towards ``s_to``, the last σ before
    ``_h2`` falls to θ or a local minimum's bracket with a floor at or below θ begins
    (:func:`_h2_pieces`; bracketed on first need); ``s_to`` if neither happens.

    Between ``s_from`` and the first such bracket, ``_h2`` can fall to θ only once (to
    come back it would pass a local minimum below θ), so the crossing is bracketed and
    found by regula falsi (Illinois) to rounding."""
    rising = s_to > s_from
    end = s_to
    for k in range(n_stationary):
        lo_k, hi_k = stationary[k, 0], stationary[k, 1]
        if not (hi_k >= min(s_from, end) and lo_k <= max(s_from, end)):
            continue
        if stationary[k, 3] == 1.0:
            _h2_bracket(c, stationary, k)
            lo_k, hi_k = stationary[k, 0], stationary[k, 1]
            if not (hi_k >= min(s_from, end) and lo_k <= max(s_from, end)):
                continue
        if stationary[k, 2] <= theta:
            end = min(end, lo_k) if rising else max(end, hi_k)
    f_end = _h2(c, end) - theta
    if f_end > 0.0:
        return end
    a, b = s_from, end
    fa, fb = _h2(c, a) - theta, f_end
    side = 0
    for _ in range(60):
        if not abs(b - a) > 4e-16 * (abs(a) + abs(b)):
            break
        t = b - fb * (b - a) / (fb - fa)
        if not min(a, b) < t < max(a, b):
            t = 0.5 * (a + b)
        ft = _h2(c, t) - theta
        if ft > 0.0:
            a, fa = t, ft
            if side == 1:
                fb *= 0.5
            side = 1
        else:
            b, fb = t, ft
            if side == -1:
                fa *= 0.5
            side = -1
    return a


@_jit
def _logit(s):
    return math.log(s) - math.log1p(-s)


@_jit
def _convex_reach(ustar, reach, A, a0, p, r, beta, stationary, n_stationary):
    """The largest e ≤ ``reach`` with :func:`_row_curvature` positive on
    ``[u* − e, u* + e]`` (that at 0 positive, at ``reach`` not), or −1 where the edge
    found does not verify.

    The bound is positive while ``_h2`` stays above ``θ = margin − 2A/β²`` on the σ
    interval: each side's edge in σ (:func:`_sigma_edge`, polynomial values only), mapped
    back to u by the logit, then checked with :func:`_row_curvature` itself (shrunk by
    0.1 % up to three times). Replaces a 12-step bisection in u, two logistic values a
    step, with the edge itself rather than a point within reach/4096 below it."""
    c = 1 + p - r
    b2 = beta * beta
    theta = 1e-12 * (1.0 + abs(c)) - 2 * A / b2
    x = beta * (a0 + ustar)
    s_star = _expit(x)
    s_hi, s_lo = _expit(x + beta * reach), _expit(x - beta * reach)
    e = reach
    s_r = _sigma_edge(c, theta, s_star, s_hi, stationary, n_stationary)
    if s_r < s_hi:
        e = min(e, (_logit(s_r) - x) / beta if 0.0 < s_r < 1.0 else 0.0)
    s_l = _sigma_edge(c, theta, s_star, s_lo, stationary, n_stationary)
    if s_l > s_lo:
        e = min(e, (x - _logit(s_l)) / beta if 0.0 < s_l < 1.0 else 0.0)
    for _ in range(4):
        if not e > 0.0:
            return -1.0
        if _row_curvature(e, ustar, A, a0, p, r, beta, stationary, n_stationary) > 0:
            return e
        e *= 0.999
    return -1.0


@_jit
def _row_certify(ustar, A, Bc, a0, p, r, beta, tol, budget, stack, stationary):
    """Prove ``φ(u) ≥ φ(u*) − tol`` for every real u (φ of :func:`_row_value`, A > 0).

    φ < φ(u*) − tol needs ``A u² + B u`` below it (ℓ ≥ 0): a bounded interval. Around u*
    the largest interval on which ``φ'' = 2A + ℓ''`` is provably positive (ℓ''/β² ≥
    :func:`_hmin2` over the σ interval) holds ``φ ≥ φ(u*) − |φ'(u*)| e``, kept ≤ tol/2; the
    rest is searched by bisection with :func:`_row_interval_floor`.
    """
    s1, s0 = _expit_pair(beta * (a0 + ustar))     # φ(u*) and φ'(u*) from one exponential
    f_star = A * ustar * ustar + Bc * ustar + (s1 - p) ** 2 + (s0 - r) ** 2
    target = f_star - tol
    disc = Bc * Bc + 4 * A * target
    if disc <= 0:
        return True
    sq = math.sqrt(disc)
    u_lo, u_hi = (-Bc - sq) / (2 * A), (-Bc + sq) / (2 * A)
    pad = 1e-9 * (abs(u_lo) + abs(u_hi) + 1)
    u_lo, u_hi = u_lo - pad, u_hi + pad
    grad = 2 * A * ustar + Bc + beta * s1 * s0 * (2 * (s1 - p) - 2 * (s0 - r))
    reach = max(u_hi - ustar, ustar - u_lo, 0.0)
    n_st = _h2_pieces(1 + p - r, stationary)
    e = 0.0
    if _row_curvature(reach, ustar, A, a0, p, r, beta, stationary, n_st) > 0:
        e = reach
    elif _row_curvature(0.0, ustar, A, a0, p, r, beta, stationary, n_st) > 0:
        e = _convex_reach(ustar, reach, A, a0, p, r, beta, stationary, n_st)
    if e < 0.0:     # the σ-space edge did not verify: bisection in u
        lo_e, hi_e = 0.0, reach
        for _ in range(12):
            mid = 0.5 * (lo_e + hi_e)
            if _row_curvature(mid, ustar, A, a0, p, r, beta, stationary, n_st) > 0:
                lo_e = mid
            else:
                hi_e = mid
        e = lo_e
    # on the convex interval φ ≥ φ(u*) + φ'(u*)(u − u*) ≥ φ(u*) − |φ'(u*)| e
    if abs(grad) * e > 0.5 * tol:
        e = 0.5 * tol / abs(grad)
    top = 0
    if u_lo < ustar - e:
        stack[top, 0], stack[top, 1] = u_lo, ustar - e
        top += 1
    if ustar + e < u_hi:
        stack[top, 0], stack[top, 1] = ustar + e, u_hi
        top += 1
    n_split = 0
    while top > 0:
        top -= 1
        lo, hi = stack[top, 0], stack[top, 1]
        if _row_interval_floor(A, Bc, a0, p, r, beta, lo, hi) >= target:
            continue
        mid = 0.5 * (lo + hi)
        if _row_value(mid, A, Bc, a0, p, r, beta) < target:
            return False     # a lower point: the ball's branch and bound takes over
        n_split += 1
        if n_split > budget or top + 2 > stack.shape[0]:
            return False
        stack[top, 0], stack[top, 1] = lo, mid
        stack[top + 1, 0], stack[top + 1, 1] = mid, hi
        top += 2
    return True


@_jit
def certify_separable(x0, x1, a0, p, r, s, D, P, beta, tol, budget, stack):
    """Certify ``(x0, x1)`` global through a separable lower bound of F (True: proved).

    In the row differences ``d = D x`` (``‖x‖² = dᵀPd``) the loss is separable. With
    ``δ = λ_min(P)`` (less a relative 1e-9) and ``R = P − δI ⪰ 0``, convexity of ``dᵀRd``
    gives ``dᵀPd ≥ δ‖d‖² + 2d*ᵀRd − d*ᵀRd*``, with equality at the found ``d*``, so
    ``F(d) ≥ Σ_i φ_i(d_i) − d*ᵀRd*/(2Σ)``, ``φ_i(u) = δu²/(2Σ) + (Rd*)_i u/Σ +
    ℓ_i(a0_i + u)``, equal to F at d*. Each φ_i proved minimal at ``d*_i`` to within
    ``tol/2`` (:func:`_row_certify`, 1-D) proves ``F ≥ F(x) − tol`` on the plane.
    """
    p01 = 0.5 * (P[0, 1] + P[1, 0])
    half_gap = math.sqrt(0.25 * (P[0, 0] - P[1, 1]) ** 2 + p01 * p01)
    delta = (0.5 * (P[0, 0] + P[1, 1]) - half_gap) * (1 - 1e-9)
    if not delta > 0:
        return False
    d0 = D[0, 0] * x0 + D[0, 1] * x1
    d1 = D[1, 0] * x0 + D[1, 1] * x1
    A = delta / (2 * s)
    b0 = ((P[0, 0] - delta) * d0 + p01 * d1) / s
    b1 = (p01 * d0 + (P[1, 1] - delta) * d1) / s
    stationary = np.empty((2, 4))
    return (_row_certify(d0, A, b0, a0[0], p[0], r[0], beta, 0.5 * tol, budget, stack,
                         stationary)
            and _row_certify(d1, A, b1, a0[1], p[1], r[1], beta, 0.5 * tol, budget, stack,
                             stationary))


# ----------------------------------------------------------------------- the drivers
@_jit
def _certify2(x0, x1, f, a0, p, r, s, D, P, beta, radius, max_iter, tol, budget, stack):
    """Certify ``(x0, x1)``: the separable bound first, then the branch and bound over the
    ball, with Newton from any better cube centre, up to 4 times."""
    if certify_separable(x0, x1, a0, p, r, s, D, P, beta, tol, _SEPARABLE_BUDGET, stack):
        return True, x0, x1, f
    for _ in range(4):
        code, c0, c1, _n = bnb2(x0, x1, f, a0, p, r, s, D, beta, tol, budget,
                                stack)
        if code != BETTER:
            return code == CERTIFIED, x0, x1, f
        c0, c1, fc = _newton2(c0, c1, a0, p, r, s, D, beta, radius, max_iter)
        if fc < f:
            x0, x1, f = c0, c1, fc
    return False, x0, x1, f


# The drivers loop over samples in chunks: each chunk has its own branch-and-bound stack,
# so the chunks run in parallel (prange) with the same per-sample arithmetic as in serial.
_CHUNK = 64


@_jit
def _prox2_sample(n, a0, p, r, sigma, D, Dinv, P, beta, x_fit, convex, warm, use_warm,
                  trust_warm, n_starts, radius, max_iter, tol, budget, stack,
                  xb, fb, cert):
    """One sample of :func:`prox2`, written to ``xb[n], fb[n], cert[n]``."""
    s = sigma[n]
    has_warm = use_warm and math.isfinite(warm[n, 0]) and math.isfinite(warm[n, 1])
    if convex[n]:
        y0, y1 = (warm[n, 0], warm[n, 1]) if has_warm else (0.0, 0.0)
        y0, y1, f = _newton2(y0, y1, a0[n], p[n], r[n], s, D, beta, radius, max_iter)
        xb[n, 0], xb[n, 1], fb[n], cert[n] = y0, y1, f, True
        return
    if has_warm and trust_warm:  # fixed-point iterations: the warm minimiser, uncertified
        y0, y1, f = _newton2(warm[n, 0], warm[n, 1], a0[n], p[n], r[n], s, D, beta, radius,
                             max_iter)
        # unless a segment start is already lower: after a wild iterate a warm z* can sit
        # in a far local minimum (or plateau) that later iterations would keep
        if f <= min(_val2(0.0, 0.0, a0[n], p[n], r[n], s, D, beta),
                    _val2(x_fit[n, 0], x_fit[n, 1], a0[n], p[n], r[n], s, D, beta)):
            xb[n, 0], xb[n, 1], fb[n], cert[n] = y0, y1, f, False
            return
    best, b0, b1 = math.inf, 0.0, 0.0
    if has_warm and budget > 0:
        y0, y1, f = _newton2(warm[n, 0], warm[n, 1], a0[n], p[n], r[n], s, D, beta,
                             radius, max_iter)
        ok, y0, y1, f = _certify2(y0, y1, f, a0[n], p[n], r[n], s, D, P, beta, radius,
                                  max_iter, tol, budget, stack)
        if ok:
            xb[n, 0], xb[n, 1], fb[n], cert[n] = y0, y1, f, True
            return
        best, b0, b1 = f, y0, y1
    # the grid start costs more than the segment's Newton runs; the fixed-point iterations
    # (trust_warm) start a node without a warm minimiser from the segment alone, and their
    # end point is polished with the full multi-start
    n_grid = 0 if (trust_warm and budget == 0 and not has_warm) else 1
    for k in range(n_starts + n_grid):
        if k < n_starts:
            t = k / (n_starts - 1) if n_starts > 1 else 0.0
            y0, y1 = t * x_fit[n, 0], t * x_fit[n, 1]
        else:
            y0, y1 = _grid2(a0[n], p[n], r[n], s, P, Dinv, beta, x_fit[n, 0],
                            x_fit[n, 1], D)
        y0, y1, f = _newton2(y0, y1, a0[n], p[n], r[n], s, D, beta, radius, max_iter)
        if f < best:
            best, b0, b1 = f, y0, y1
    ok = False
    if budget > 0:  # budget 0: the multi-start alone, uncertified (fixed-point iterations)
        ok, b0, b1, best = _certify2(b0, b1, best, a0[n], p[n], r[n], s, D, P, beta,
                                     radius, max_iter, tol, budget, stack)
    xb[n, 0], xb[n, 1], fb[n], cert[n] = b0, b1, best, ok


def _prox2_py(a0, p, r, sigma, D, Dinv, P, beta, x_fit, convex, warm, use_warm, trust_warm,
              n_starts, radius, max_iter, tol, budget):
    """T = 2 prox over all samples: ``x`` (N, 2), the objective (N,) and the certified mask.

    ``D``, ``Dinv`` and ``P`` (the map to the row differences, its inverse and the metric
    of ``‖x‖²`` in them) have shape (1, 2, 2), shared by all samples (the seq2lab channel),
    or (N, 2, 2), one per sample (the exact-Gram channel's bulk prox,
    :mod:`..seq2seq_softmax`, whose ``M_B`` differs from node to node).

    Provably convex samples: one Newton run (from the warm start if any), certified.
    Others: with a warm start and ``trust_warm``, one Newton run from it, uncertified (the
    fixed-point iterations); with a warm start and ``budget > 0``, Newton from it and the
    certificate; where that fails (or without a warm start), the multi-start of
    :meth:`.softmax.SoftmaxChannel._prox` (the segment ω → fit and the 2-D grid start),
    then the certificate if ``budget > 0``. A warm row with a non-finite entry counts as
    no warm start; in the fixed-point iterations (``trust_warm``, ``budget = 0``) a sample
    without one takes the segment starts alone.
    """
    N = a0.shape[0]
    shared = D.shape[0] == 1
    xb = np.zeros((N, 2))
    fb = np.zeros(N)
    cert = np.zeros(N, dtype=np.bool_)
    n_chunks = (N + _CHUNK - 1) // _CHUNK
    for c in _prange(n_chunks):
        stack = np.empty((4096 if budget > 0 else 1, 3))
        for n in range(c * _CHUNK, min(N, (c + 1) * _CHUNK)):
            k = 0 if shared else n
            _prox2_sample(n, a0, p, r, sigma, D[k], Dinv[k], P[k], beta, x_fit, convex,
                          warm, use_warm, trust_warm, n_starts, radius, max_iter, tol,
                          budget, stack, xb, fb, cert)
    return xb, fb, cert


# serial and parallel (over sample chunks) compilations of the same drivers
prox2 = _jit(_prox2_py)
prox2_parallel = parallel_twin(_prox2_py)
