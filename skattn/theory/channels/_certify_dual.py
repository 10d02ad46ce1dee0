"""Row-wise dual bound of the T ≥ 3 certificate (where F is not convex on the ball of
:mod:`._certify_rows`): a branch and bound over each row's *stationary points*, in two
dimensions whatever T is.

1. *Relaxation.* With ``G_a = (h_a − h_a(ω))/(2Σ) + ∇ℓ_a(h_a)`` the row gradients at the
   found point, stationarity in z makes G antisymmetric; for the antisymmetric
   ``ν = −(G − Gᵀ)/2`` and any symmetric h, ``Σ_a ν_aᵀh_a = 0``, so relaxing h to
   independent rows gives ``min F ≥ Σ_a min φ_a``, ``φ_a = ‖h_a − h_a(ω)‖²/(4Σ) + ν_aᵀh_a +
   ℓ_a(h_a)`` (``‖z − ω‖² = ‖h − h(ω)‖²/2``), with equality at the found point. Each φ_a
   splits into a convex quadratic along the ones (its excess at the found point is exact)
   and a problem in the T − 1 coordinates ``t = Qᵀh_a``: ``φ(t) = ‖t − t0‖²/(4Σ) + νᵀt +
   ‖s − y‖²``, ``s = softmax(βQt)``.
2. *Its stationary points in two scalars.* With ``c_b = t0 − 2Σν``, ``b = βQc_b``,
   ``κ = 4Σβ²`` and ``g = Σ_c s_c(s_c − y_c)``, ∇φ = 0 reads ``h = Qc_b − 4Σβ r``,
   ``r_c = s_c(s_c − y_c − g)`` (``Σ r_c = 0``), so each ``v_c = log s_c`` solves
   ``F_c(v_c, g) = v_c + κ e^{v_c}(e^{v_c} − y_c − g) = b_c + μ`` for one scalar μ (minus
   the log-partition), with ``Σ e^{v_c} = 1`` and ``g = Σ e^{v_c}(e^{v_c} − y_c)``; there
   ``φ = V = κ Σ r_c² + ‖s − y‖² + νᵀt0 − Σ‖ν‖²`` (``‖t − c_b‖² = 16Σ²β²‖r‖²``). φ is
   coercive, so its least value is a stationary one: the row is certified when every
   stationary point has ``V ≥ φ(t*) − tol``, except the found one.
3. *Branch and bound over boxes of (μ, g).* F_c decreases in g, so on a box each v_c lies
   in ``S_c = {v : F_c(v, g_hi) ≤ b_c + μ_hi, F_c(v, g_lo) ≥ b_c + μ_lo}``. ``∂_v F_c = 1 +
   κu(2u − y_c − g)`` (``u = e^v``) has at most two zeros per g, so between the critical
   points of both ends F is monotone and S_c is a union of at most five intervals, each
   enclosed outward by bisection (:func:`_coordinate_set`). Each combination of them is
   contracted by the two equations without μ (:func:`_contract`: each ``u_c`` within one
   less the others' sums, then g within the range of ``Σ u(u − y)``), and dropped where
   that empties it or where the least V on it is above the target; otherwise the Krawczyk
   operator K of the (T + 2)-dimensional system (unknowns v, μ, g) over the combination's
   box X (:func:`._stationarity._krawczyk`): ``K ∩ X = ∅`` drops it (no stationary
   point), ``K ⊂ int X`` proves exactly one, and V is bounded on ``K ∩ X``. The found
   stationary point is covered by its own Krawczyk box X*, the largest around ``(log s*,
   μ*, g*)`` that proves one zero (:func:`._stationarity._found_point_box`): the exact
   minimiser of φ in the strongly convex cube around t* (:func:`_convex_cube`: within
   ``2|∇φ(t*)|/curv`` of t*, the cube twice that) is that zero,
   with ``φ ≥ φ(t*) − |∇φ(t*)|²/(2μ)``. A surviving combination's candidate point t below
   the target ends the certificate (the relaxation has a gap there, or x is not global).
4. *Domain.* Every t with ``φ(t) < φ(t*)`` lies in the ball ``‖t − c_b‖ < R`` (ℓ ≥ 0, the
   square completed), where each ``h_b − h_c`` moves by at most ``√2 R`` from its centre:
   the probabilities' exact bounds there give the first brackets of v and the range of g;
   μ is minus a log-partition over the ball.

Before the search, φ convex on the box around the ball and t* certifies at once. Where
the search fails the sample gets more Newton starts (:func:`._proxT.proxT`), then unequal
splits of the quadratic between the rows (:mod:`._certify_split`, which shares the search,
:func:`_search`, with a κ per coordinate); the soundness tests:
tests/theory/test_certify_T3.py, test_certify_dual.py, test_certify_split.py.
"""

from __future__ import annotations

import math

import numpy as np

from ._certify_rows import (BUDGET, CERTIFIED, NONCONVEX, _box_intervals,
                            _interval_lambda, _local_c3, _row_lambda,
                            _row_logits)
from ._kernels import _jit, hold_references, softmax_inplace
from ._stationarity import (_found_point_box, _known_exp, _krawczyk_centre,
                           _krawczyk_image)

# relative precision of the bisections of S_c's ends, against the box's scale in F
_ROOT_PRECISION = 1e-3
# a box's combinations of S_c's intervals are tested one by one up to this many
_MAX_COMBINATIONS = 2048
# the convex cube around t* is _E_MARGIN times the distance it must cover: one test, where
# a search for the largest cube that passes proved the same at a cost (docs: Changelog)
_E_MARGIN = 2.0
# a box whose surviving part (contracted by the Krawczyk images) is narrower than this
# fraction of it, in μ or in g, is replaced by that part instead of halved
_SHRINK = 0.7
# (μ, g) boxes narrower than this (relative) are not split further (rounding)
_MIN_WIDTH = 1e-13


@_jit
def _phi_row(t, t0, nu, sig4, Q, yrow, beta, A, grad):
    """``φ(t) = ‖t − t0‖²/(4Σ) + νᵀt + ‖softmax(βQt) − y‖²`` and its gradient (to grad)."""
    T, d = Q.shape
    _row_logits(t, Q, beta, A)
    softmax_inplace(A)
    val, sbar = 0.0, 0.0
    for c in range(T):
        val += (A[c] - yrow[c]) ** 2
        sbar += (A[c] - yrow[c]) * A[c]
    for i in range(d):
        gi = 2 * (t[i] - t0[i]) / sig4 + nu[i]
        val += (t[i] - t0[i]) ** 2 / sig4 + nu[i] * t[i]
        for c in range(T):
            gi += 2 * beta * A[c] * (A[c] - yrow[c] - sbar) * Q[c, i]
        grad[i] = gi
    return val


# --------------------------------------------------------- enclosures of S_c (docstring 3)
@_jit
def _level(v, kappa, w):
    """``F(v) = v + κ e^v (e^v − w)`` (w = y_c + g)."""
    u = math.exp(v)
    return v + kappa * u * (u - w)


@_jit
def _add_critical_points(kappa, w, a, b, out, n):
    """Append the zeros of ``∂_v F = 1 + κu(2u − w)`` in ``(a, b)`` (v coordinates) to
    ``out[n:]``; returns the new count."""
    disc = kappa * kappa * w * w - 8 * kappa
    # κ > 0: two zeros where w > 0 and disc > 0; κ < 0 (a concave piece of the star's
    # bounded coordinates): one, whatever w is
    if (kappa < 0 or w > 0) and disc > 0:
        root = math.sqrt(disc)
        for sign in (-1.0, 1.0):
            u = (kappa * w + sign * root) / (4 * kappa)
            if u > 0:
                v = math.log(u)
                if a < v < b:
                    out[n] = v
                    n += 1
    return n


@_jit
def _monotone_set(lo, hi, f_lo, f_hi, kappa, w, m, below, prec):
    """``{v ∈ [lo, hi] : F(v) ≤ m}`` (below) or ``{F(v) ≥ m}`` for F monotone on
    [lo, hi] (``f_lo, f_hi``: F at the ends), enclosed outward to within ``prec``; an
    empty set comes back with its lower end above its upper one."""
    sign = 1.0 if below else -1.0
    g_lo = sign * (f_lo - m)
    g_hi = sign * (f_hi - m)
    if g_lo <= 0 and g_hi <= 0:
        return lo, hi
    if g_lo > 0 and g_hi > 0:
        return 1.0, -1.0
    # regula falsi with the Illinois halving, every third step a bisection: a and b keep
    # the signs of g at lo and hi, so the set's end stays between them
    a, b, ga, gb = lo, hi, g_lo, g_hi
    side, step = 0, 0
    while b - a > prec:
        step += 1
        x = 0.5 * (a + b)
        if step % 3 != 0 and gb != ga:
            x = min(max(b - gb * (b - a) / (gb - ga), a + 1e-3 * (b - a)), b - 1e-3 * (b - a))
        gx = sign * (_level(x, kappa, w) - m)
        if (gx <= 0) == (ga <= 0):
            a, ga = x, gx
            if side == -1:
                gb *= 0.5
            side = -1
        else:
            b, gb = x, gx
            if side == 1:
                ga *= 0.5
            side = 1
    return (lo, b) if g_lo <= 0 else (a, hi)


@_jit
def _coordinate_set(a, b, kappa, yc, g_lo, g_hi, m_lo, m_hi, prec, cuts, out):
    """S_c of the docstring (3) within the bracket [a, b] of v: its intervals are written
    to ``out`` (rows lo, hi; ≤ 5) and their number returned (``cuts``: scratch of ≥ 18,
    the cuts, then F at them for both ends of g). For κ < 0, F increases in g: the ends
    of g trade places."""
    if kappa < 0:
        g_lo, g_hi = g_hi, g_lo
    cuts[0] = a
    n = _add_critical_points(kappa, yc + g_hi, a, b, cuts, 1)
    n = _add_critical_points(kappa, yc + g_lo, a, b, cuts, n)
    cuts[n] = b
    n += 1
    for i in range(1, n):            # the ≤ 6 cuts in order: insertion sort
        v, j = cuts[i], i
        while j > 0 and cuts[j - 1] > v:
            cuts[j] = cuts[j - 1]
            j -= 1
        cuts[j] = v
    # F at each cut for g_hi and g_lo (_level's arithmetic, one exponential per cut)
    w_hi, w_lo = yc + g_hi, yc + g_lo
    for i in range(n):
        u = math.exp(cuts[i])
        cuts[6 + i] = cuts[i] + kappa * u * (u - w_hi)
        cuts[12 + i] = cuts[i] + kappa * u * (u - w_lo)
    k = 0
    for i in range(n - 1):
        lo1, hi1 = _monotone_set(cuts[i], cuts[i + 1], cuts[6 + i], cuts[7 + i], kappa, w_hi,
                                 m_hi, True, prec)
        if lo1 > hi1:
            continue
        lo2, hi2 = _monotone_set(cuts[i], cuts[i + 1], cuts[12 + i], cuts[13 + i], kappa,
                                 w_lo, m_lo, False, prec)
        lo, hi = max(lo1, lo2), min(hi1, hi2)
        if lo > hi:
            continue
        if k > 0 and lo <= out[k - 1, 1]:
            out[k - 1, 1] = max(out[k - 1, 1], hi)
        else:
            out[k, 0], out[k, 1] = lo, hi
            k += 1
    return k


@_jit
def _distance_to_zero(lo, hi):
    """The distance from 0 to the interval [lo, hi]."""
    return lo if lo > 0 else (-hi if hi < 0 else 0.0)


@_jit
def _value_floor(xc, r, kappa, yrow, const, known):
    """A lower bound on V (docstring 2) over the box ``xc ± r`` of (v, μ, g); ``kappa``:
    κ_c per coordinate (all equal in this module's row bound; negative for a concave
    piece of :mod:`._certify_star`). ``known``: None, or the exponentials
    :func:`_contract_from_ends` left (:func:`_known_exp`)."""
    T = yrow.shape[0]
    g_lo, g_hi = xc[T + 1] - r[T + 1], xc[T + 1] + r[T + 1]
    val = const
    for c in range(T):
        ul, uh = _known_exp(xc[c] - r[c], c, 0, known), _known_exp(xc[c] + r[c], c, 1, known)
        dr = _distance_to_zero(ul - yrow[c] - g_hi, uh - yrow[c] - g_lo)
        dy = _distance_to_zero(ul - yrow[c], uh - yrow[c])
        if kappa[c] >= 0:
            val += kappa[c] * ul * ul * dr * dr + dy * dy
        else:                       # a concave piece: the largest of u² r² on the box
            dr = max(abs(ul - yrow[c] - g_hi), abs(uh - yrow[c] - g_lo))
            val += kappa[c] * uh * uh * dr * dr + dy * dy
    # less a relative margin for the rounding of these sums
    return val * (1 - 1e-12) - 1e-15 if val > 0 else val * (1 + 1e-12) - 1e-15


@_jit
def _contract(xk, rk, yrow, margin):
    """:func:`_contract_into` with its own scratch."""
    return _contract_into(xk, rk, yrow, margin, np.empty((4, yrow.shape[0])))


@_jit
def _contract_into(xk, rk, yrow, margin, scratch):
    """Hull consistency of a combination's box ``xk ± rk`` of (v, μ, g), in place: each
    ``u_c = e^{v_c}`` within one less the others' least and greatest sums (``Σ u = 1``),
    then g within the range of ``Σ u(u − y)`` on what is left; False where the box empties
    (no stationary point in it). ``margin``: the absolute slack of both equations;
    ``scratch``: 4 × T, reused by the searches (one per combination: no allocation)."""
    T = yrow.shape[0]
    for c in range(T):
        scratch[0, c], scratch[1, c] = math.exp(xk[c] - rk[c]), math.exp(xk[c] + rk[c])
    return _contract_from_ends(xk, rk, yrow, margin, scratch)


@_jit
def _interval_ends(ivs, nc, ends):
    """``ends[c, i] = (e^{v − r}, e^{v + r})`` of each coordinate's intervals ``ivs[c, i]``
    (``v ± r`` their centre and half-width, as a combination's box takes them), for
    :func:`_contract_from_ends`."""
    for c in range(nc.shape[0]):
        for i in range(nc[c]):
            centre = 0.5 * (ivs[c, i, 0] + ivs[c, i, 1])
            half = 0.5 * (ivs[c, i, 1] - ivs[c, i, 0])
            ends[c, i, 0] = math.exp(centre - half)
            ends[c, i, 1] = math.exp(centre + half)


@_jit
def _contract_from_ends(xk, rk, yrow, margin, scratch):
    """:func:`_contract_into` with ``scratch[0, c], scratch[1, c]`` already holding
    ``e^{xk_c ∓ rk_c}`` (a search that meets each coordinate's interval in many
    combinations takes its two exponentials once per interval). Where it returns True,
    ``scratch[2, c], scratch[3, c]`` hold the contracted ends of v_c and ``scratch[0, c],
    scratch[1, c]`` their exponentials, for the tests after it (:func:`_known_exp`).

    One return, where every array is held (:func:`._kernels.hold_references`), and no
    views of them: no reference counting per combination of a search."""
    T = yrow.shape[0]
    total_lo = 0.0
    for c in range(T):
        total_lo += scratch[0, c]
    kept = not total_lo > 1 + margin
    q_lo, q_hi = 0.0, 0.0
    if kept:
        # the others' sums from the sums before and after c (not the total less u_c: a
        # huge u_c would cancel them), each off by at most T ulps of itself; rows 2 and 3
        # of scratch hold them until each coordinate's own ends replace them
        scratch[2, T - 1], scratch[3, T - 1] = 0.0, 0.0
        for c in range(T - 1, 0, -1):
            scratch[2, c - 1] = scratch[2, c] + scratch[0, c]
            scratch[3, c - 1] = scratch[3, c] + scratch[1, c]
        before_lo, before_hi = 0.0, 0.0
        for c in range(T):
            ul, uh = scratch[0, c], scratch[1, c]
            others_lo, others_hi = before_lo + scratch[2, c], before_hi + scratch[3, c]
            before_lo, before_hi = before_lo + ul, before_hi + uh
            cap_lo = 1 - others_hi * (1 + 1e-12) - margin
            cap_hi = 1 - others_lo * (1 - 1e-12) + margin
            lo_v, hi_v = xk[c] - rk[c], xk[c] + rk[c]
            if cap_hi <= 0 or cap_hi < ul or cap_lo > uh:
                kept = False
                break
            # the ends' u, again only where an end moved
            u_lo, u_hi = ul, uh
            if cap_lo > ul:
                lo_v = max(lo_v, math.log(cap_lo) - 1e-13 * (1 + abs(lo_v)))
                u_lo = math.exp(lo_v)
            if cap_hi < uh:
                hi_v = min(hi_v, math.log(cap_hi) + 1e-13 * (1 + abs(hi_v)))
                u_hi = math.exp(hi_v)
            if lo_v > hi_v:
                kept = False
                break
            xk[c], rk[c] = 0.5 * (lo_v + hi_v), 0.5 * (hi_v - lo_v)
            scratch[0, c], scratch[1, c], scratch[2, c], scratch[3, c] = u_lo, u_hi, lo_v, hi_v
            um = min(max(0.5 * yrow[c], u_lo), u_hi)
            q_lo += um * (um - yrow[c])
            q_hi += max(u_lo * (u_lo - yrow[c]), u_hi * (u_hi - yrow[c]))
    if kept:
        # every u is at most 1 + margin here, so each term of q is O(1)
        g_lo = max(xk[T + 1] - rk[T + 1], q_lo - margin)
        g_hi = min(xk[T + 1] + rk[T + 1], q_hi + margin)
        kept = not g_lo > g_hi
        if kept:
            xk[T + 1], rk[T + 1] = 0.5 * (g_lo + g_hi), 0.5 * (g_hi - g_lo)
    hold_references(xk, rk, yrow, scratch)
    return kept


# ------------------------------------------------------------------------ the row bound
@_jit
def _log_sum_exp(values):
    top = -math.inf
    for v in values:
        top = max(top, v)
    total = 0.0
    for v in values:
        total += math.exp(v - top)
    return top + math.log(total)


@_jit
def _domain(stack, mu_lo, mu_hi, b, spread, yrow, A):
    """The first box of the search, to ``stack[0]`` (docstring 4): μ in ``[mu_lo, mu_hi]``,
    each ``v_c = −log Σ_a exp(β(h_a − h_c))`` from the bounds ``b_a − b_c ± √(spread_a² +
    spread_c²)`` of ``β(h_a − h_c)`` over the domain, g from those probabilities; all
    outward by a relative 1e-12 for rounding (``A``: scratch of T)."""
    T = yrow.shape[0]
    stack[0, 0] = mu_lo - 1e-12 * (1 + abs(mu_lo))
    stack[0, 1] = mu_hi + 1e-12 * (1 + abs(mu_hi))
    g_lo, g_hi = 0.0, 0.0
    for c in range(T):
        for sign in (1.0, -1.0):
            for a in range(T):
                k = math.sqrt(spread[a] ** 2 + spread[c] ** 2)
                A[a] = 0.0 if a == c else b[a] - b[c] + sign * k
            v = -_log_sum_exp(A)
            v += -1e-12 * (1 + abs(v)) if sign > 0 else 1e-12 * (1 + abs(v))
            stack[0, (4 if sign > 0 else 5) + 2 * c] = min(v, 0.0)
        ul, uh = math.exp(stack[0, 4 + 2 * c]), math.exp(stack[0, 5 + 2 * c])
        um = min(max(0.5 * yrow[c], ul), uh)
        g_lo += um * (um - yrow[c])
        g_hi += max(ul * (ul - yrow[c]), uh * (uh - yrow[c]))
    stack[0, 2] = g_lo - 1e-12 * (1 + abs(g_lo))
    stack[0, 3] = g_hi + 1e-12 * (1 + abs(g_hi))


@_jit
def _convex_cube(t_star, s, Q, yrow, beta, cap, g2, A, lo, hi, M, widths):
    """``(e, slack, curv0)``: the half-width e of a cube around t* on which φ's curvature
    is at least half of its curvature ``curv0`` at t*, and ``|∇φ(t*)|²/curv0``, φ's least
    on it below φ(t*); e = 0 where φ is not convex at t* or the cube fails.

    e only has to exceed ``2|∇φ(t*)|/curv0`` (within it lies the cube's minimiser): one
    test of the cube _E_MARGIN times that size (the curvature bound only weakens as the
    cube grows, so a larger one passes only where this one does)."""
    curv0 = 1 / (2 * s) + _row_lambda(t_star, Q, yrow, beta, A, M)
    if not curv0 > 0:
        return 0.0, 0.0, curv0
    e = max(_E_MARGIN * 2 * math.sqrt(g2) / curv0, 1e-300)
    lip = beta ** 3 * _local_c3(t_star, e, False, Q, yrow, beta, cap, A, lo, hi, widths)
    if max(curv0 - lip * e * math.sqrt(Q.shape[1]),
           1 / (2 * s) + _interval_lambda(lo, hi, yrow, beta)) < 0.5 * curv0:
        e = 0.0
    return e, g2 / curv0, curv0


@_jit
def _split_around(stack, r_m_lo, r_m_hi, r_g_lo, r_g_hi):
    """Replace the domain box ``stack[0]`` by its parts outside the rectangle ``[r_m_lo,
    r_m_hi] × [r_g_lo, r_g_hi]`` of (μ, g) (up to four strips) and its part inside (the
    found point's, searched last); returns the new stack top. The v brackets are copied."""
    m_lo, m_hi, g_lo, g_hi = stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3]
    a, b = min(max(r_m_lo, m_lo), m_hi), max(min(r_m_hi, m_hi), m_lo)
    c, e = min(max(r_g_lo, g_lo), g_hi), max(min(r_g_hi, g_hi), g_lo)
    parts = ((a, b, c, e), (m_lo, a, g_lo, g_hi), (b, m_hi, g_lo, g_hi), (a, b, g_lo, c),
             (a, b, e, g_hi))
    top = 0
    for k in range(5):
        p0, p1, p2, p3 = parts[k]
        if p1 > p0 and p3 > p2 or k == 0:
            stack[top, 4:] = stack[0, 4:]
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = p0, p1, p2, p3
            top += 1
    return top


@_jit
def _row_dual(t_star, t0, nu, s, Q, yrow, beta, cap, tol, budget):
    """Prove ``φ ≥ φ(t*) − tol`` on all of row space for one row (module docstring).

    Returns ``(code, slack, n_split)``: CERTIFIED with ``slack`` the proved
    ``φ(t*) − min φ`` bound of the found point's neighbourhood (≤ tol/2), BUDGET, or
    NONCONVEX (a point below ``φ(t*) − tol``: the row has a duality gap, or ``x`` is not
    global).
    """
    T, d = Q.shape
    n = T + 2
    sig4 = 4 * s
    A, lo, hi = np.empty(T), np.empty(T), np.empty(T)
    M, grad, widths = np.empty((d, d)), np.empty(d), np.empty(d)
    f_star = _phi_row(t_star, t0, nu, sig4, Q, yrow, beta, A, grad)
    g2 = np.dot(grad, grad)
    nn, nt0 = np.dot(nu, nu), np.dot(nu, t0)
    const = nt0 - s * nn
    R2 = sig4 * (f_star + s * nn - nt0)
    if R2 <= 0.0:
        return CERTIFIED, 0.0, 0
    R = math.sqrt(R2)
    e, slack, curv0 = _convex_cube(t_star, s, Q, yrow, beta, cap, g2, A, lo, hi, M, widths)
    if slack > 0.5 * tol:
        return BUDGET, slack, 0
    target = f_star - tol
    cb = t0 - 2 * s * nu
    # φ convex on the box around the ball and t*: there φ ≥ φ(t*) + ∇φ(t*)ᵀ(t − t*)
    box_c, box_h = np.empty(d), np.empty(d)
    far = 0.0
    for i in range(d):
        low, high = min(cb[i] - R, t_star[i]), max(cb[i] + R, t_star[i])
        box_c[i], box_h[i] = 0.5 * (low + high), 0.5 * (high - low)
        far += (high - low) ** 2
    if math.sqrt(g2 * far) <= 0.5 * tol:
        _box_intervals(box_c, box_h, Q, beta, A, lo, hi)
        if 1 / (2 * s) + _interval_lambda(lo, hi, yrow, beta) >= 0:
            return CERTIFIED, slack, 0
    kappa = 4 * s * beta * beta
    kap = np.full(T, kappa)          # κ_c of the shared helpers, all equal here
    hb = Q @ cb                      # h of the ball's centre
    b = beta * hb
    # the domain (docstring 4): μ minus a log-partition over the ball, each v_c from the
    # probabilities' exact bounds there (in logs: no underflow), g from those
    ncol = 4 + 2 * T
    stack = np.empty((256, ncol))
    row_norm = math.sqrt(1 - 1 / T)
    for c in range(T):
        A[c] = b[c] + beta * R * row_norm
    mu_lo = -_log_sum_exp(A)
    for c in range(T):
        A[c] = b[c] - beta * R * row_norm
    mu_hi = -_log_sum_exp(A)
    _domain(stack, mu_lo, mu_hi, b, np.full(T, beta * R), yrow, A)
    # the found point's Krawczyk box X* (docstring 3), where it is well defined
    work = np.empty((7, n, n))
    xk, rk, Kc, Kr = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    Xlo, Xhi = np.empty(n), np.empty(n)
    has_box = False
    _row_logits(t_star, Q, beta, A)
    softmax_inplace(A)
    if e > 0 and np.all(A > 0):
        g_star = np.dot(A, A - yrow)
        mu_star = 0.0
        for c in range(T):
            xk[c] = math.log(A[c])
            mu_star += (xk[c] + kappa * A[c] * (A[c] - yrow[c] - g_star) - b[c]) / T
        xk[T], xk[T + 1] = mu_star, g_star
        dist = 2 * math.sqrt(g2) / curv0       # the exact minimiser in the convex cube
        if dist < e and _found_point_box(xk.copy(), kap, yrow, b, Xlo, Xhi, rk, Kc, Kr,
                                         work) > 0:
            # its image in (v, μ, g) lies within these moves of x* (softmax Lipschitz)
            move_v, move_g = 2 * beta * dist, 4 * T * beta * dist
            move = np.full(n, 2 * move_v)
            move[T] = 2 * (2 * beta * (1 + 6 * kappa) * dist + kappa * move_g)
            move[T + 1] = 2 * move_g
            has_box = True
            for i in range(n):
                has_box = has_box and Xlo[i] < xk[i] - move[i] and Xhi[i] > xk[i] + move[i]
    top = 1
    if has_box:
        top = _split_around(stack, Xlo[T], Xhi[T], Xlo[T + 1], Xhi[T + 1])
    code, f, n_split, _ = _search(stack, top, kap, yrow, beta, b, const, target, has_box, Xlo,
                                  Xhi, budget, False, t0, nu, Q, np.full(T, 1 / sig4))
    if code == NONCONVEX:
        return NONCONVEX, f_star - f, n_split
    return code, slack, n_split


@_jit
def found_rows(x, omega, y, s, B, index, scale, beta):
    """The found point's rows: H, H0 (those of ω) and the loss gradients ``L_ac =
    ∂_c ℓ_a(H_a)``."""
    T = y.shape[0]
    z = omega + B @ x
    H, H0, L = np.empty((T, T)), np.empty((T, T)), np.empty((T, T))
    A = np.empty(T)
    for a in range(T):
        for c in range(T):
            H[a, c] = z[index[a, c]] * scale[a, c]
            H0[a, c] = omega[index[a, c]] * scale[a, c]
    for a in range(T):
        for c in range(T):
            A[c] = beta * H[a, c]
        softmax_inplace(A)
        sbar = 0.0
        for c in range(T):
            sbar += (A[c] - y[a, c]) * A[c]
        for c in range(T):
            L[a, c] = 2 * beta * A[c] * (A[c] - y[a, c] - sbar)
    return H, H0, L


@_jit
def certify_dual(x, omega, y, s, B, index, scale, beta, Q, c3, tol, budget):
    """Certify ``x`` global for one T ≥ 3 sample through the row-wise dual bound.

    Returns ``(code, n_split)`` (module docstring): the symmetric pre-activation is
    relaxed to independent rows, with the antisymmetric multipliers ``ν = −(G − Gᵀ)/2``
    of the found stationary point, and each row's problem is proved minimal at the
    found row by :func:`_row_dual`; ``budget`` caps the box splits of all rows together.
    """
    T = y.shape[0]
    d = T - 1
    H, H0, L = found_rows(x, omega, y, s, B, index, scale, beta)
    G = (H - H0) / (2 * s) + L
    t_star, t0, nuQ = np.empty(d), np.empty(d), np.empty(d)
    total, n_total = 0.0, 0
    sqT = math.sqrt(T)
    for a in range(T):
        # the part along the ones: a convex quadratic, its excess at the found point exact
        cs, c0, nc = 0.0, 0.0, 0.0
        for c in range(T):
            nu_c = -0.5 * (G[a, c] - G[c, a])
            cs += H[a, c] / sqT
            c0 += H0[a, c] / sqT
            nc += nu_c / sqT
        total += (cs - c0 + 2 * s * nc) ** 2 / (4 * s)
        for i in range(d):
            v1, v0, vn = 0.0, 0.0, 0.0
            for c in range(T):
                v1 += Q[c, i] * H[a, c]
                v0 += Q[c, i] * H0[a, c]
                vn += Q[c, i] * (-0.5 * (G[a, c] - G[c, a]))
            t_star[i], t0[i], nuQ[i] = v1, v0, vn
        code, slack, n_split = _row_dual(t_star, t0, nuQ, s, Q, y[a], beta, c3[a],
                                         tol / (2 * T), budget - n_total)
        n_total += n_split
        if code != CERTIFIED:
            return code, n_total
        total += slack + tol / (2 * T)
    if total > tol:
        return BUDGET, n_total
    return CERTIFIED, n_total


@_jit
def _weighted_value(h, centre, offset, weights, yrow, beta, A):
    """``φ(h) = Σ_c w_c (h_c − c_c)² + offset + ‖softmax(βh) − y‖²``: the row problem in
    all T coordinates with a weight per coordinate (:mod:`._certify_split`; A: scratch)."""
    T = yrow.shape[0]
    val = offset
    for c in range(T):
        val += weights[c] * (h[c] - centre[c]) ** 2
        A[c] = beta * h[c]
    softmax_inplace(A)
    for c in range(T):
        val += (A[c] - yrow[c]) ** 2
    return val


@_jit
def _candidate_value(x, weighted, t0, nu, Q, weights, yrow, beta, point, A, grad):
    """φ at a point of row space read off the (v, μ, g) box centre ``x``, written to
    ``point``: the point with logits v (``weighted`` False: ``t = Qᵀv/β`` of this module's
    row, ``weights`` all ``1/(4Σ)``), or the stationary-point map ``h_c = c_c − β r_c/w_c``
    of the weighted row (``t0``: its centre c, ``nu[0]``: its offset; :func:`_weighted_value`).
    ``A``, ``grad``: scratch of T and of the point's length."""
    T = yrow.shape[0]
    if weighted:
        g = x[T + 1]
        for c in range(T):
            u = math.exp(x[c])
            point[c] = t0[c] - beta * u * (u - yrow[c] - g) / weights[c]
        return _weighted_value(point, t0, nu[0], weights, yrow, beta, A)
    d = Q.shape[1]
    for i in range(d):
        v = 0.0
        for c in range(T):
            v += Q[c, i] * x[c]
        point[i] = v / beta
    return _phi_row(point, t0, nu, 1.0 / weights[0], Q, yrow, beta, A, grad)


@_jit
def _search(stack, top, kappa, yrow, beta, b, const, target, has_box, Xlo, Xhi, budget,
            weighted, t0, nu, Q, weights):
    """The branch and bound over (μ, g) boxes of the docstring (3), from the boxes
    ``stack[:top]`` (μ, g, then each v_c's bracket): every stationary point with V below
    ``target`` outside the found point's box ``[Xlo, Xhi]`` (``has_box``) is ruled out.
    Returns ``(code, f, n_split, point)``: CERTIFIED, BUDGET (more than ``budget``
    splits), or NONCONVEX with ``point`` a point of row space below the target and ``f``
    its value (:func:`_candidate_value`, whose arguments from ``weighted`` on these
    are)."""
    T = yrow.shape[0]
    n = T + 2
    kappa_max = np.max(kappa)
    work = np.empty((7, n, n))
    xk, rk, Kc, Kr = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    point, A, grad = np.empty(t0.shape[0]), np.empty(T), np.empty(t0.shape[0])
    cuts = np.empty(18)
    ivs = np.empty((T, 5, 2))
    ends = np.empty((T, 5, 2))      # e^{v ∓ r} of each interval, once per box
    nc = np.empty(T, np.int64)
    lo_v, hi_v, keep = np.empty(T), np.empty(T), np.empty(4)
    scratch = np.empty((4, T))
    n_split = 0
    while top > 0:
        top -= 1
        m_lo, m_hi, g_lo, g_hi = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        n_comb = 1
        prec_f = _ROOT_PRECISION * ((m_hi - m_lo) + kappa_max * (g_hi - g_lo))
        for c in range(T):
            a_, b_ = stack[top, 4 + 2 * c], stack[top, 5 + 2 * c]
            eps = 1e-12 * (1 + abs(b[c] + m_lo) + abs(b[c] + m_hi) + kappa[c])
            nc[c] = _coordinate_set(a_, b_, kappa[c], yrow[c], g_lo, g_hi, b[c] + m_lo - eps,
                                    b[c] + m_hi + eps, prec_f + 1e-13 * (1 + abs(a_) + abs(b_)),
                                    cuts, ivs[c])
            n_comb *= nc[c]
            if n_comb == 0:
                break
        if n_comb == 0:
            continue
        settled = n_comb <= _MAX_COMBINATIONS    # every combination dropped or covered
        if settled:
            _interval_ends(ivs, nc, ends)
        # the (μ, g) hull of what the surviving combinations leave (contracted by K)
        _reset_keep(keep, settled, m_lo, m_hi, g_lo, g_hi)
        for comb in range(n_comb if settled else 0):
            # the combination's box: v from its intervals, μ and g from the box
            r = comb
            for c in range(T):
                j = r % nc[c]
                r //= nc[c]
                xk[c] = 0.5 * (ivs[c, j, 0] + ivs[c, j, 1])
                rk[c] = 0.5 * (ivs[c, j, 1] - ivs[c, j, 0])
                scratch[0, c], scratch[1, c] = ends[c, j, 0], ends[c, j, 1]
            xk[T], rk[T] = 0.5 * (m_lo + m_hi), 0.5 * (m_hi - m_lo)
            xk[T + 1], rk[T + 1] = 0.5 * (g_lo + g_hi), 0.5 * (g_hi - g_lo)
            # as in _star_search.search_star, kept inline: a helper that called these
            # tests would take references to its arrays per combination (see
            # _krawczyk_rest)
            if not _contract_from_ends(xk, rk, yrow, 1e-12 * T, scratch):
                continue
            if _value_floor(xk, rk, kappa, yrow, const, scratch) >= target:
                continue
            # the Krawczyk test (docstring 3) in its parts, each called from here: see
            # _krawczyk_rest
            if _krawczyk_centre(xk, kappa, yrow, b, None, work):
                if _krawczyk_image(xk, rk, kappa, yrow, Kc, Kr, work, True, scratch):
                    continue        # no stationary point in this combination's box
                if _krawczyk_rest(xk, rk, kappa, yrow, const, target, has_box, Xlo, Xhi, Kc,
                                  Kr, scratch):
                    continue
            settled = False
            # the combination's candidate point: below the target, the certificate fails
            f = _candidate_value(xk, weighted, t0, nu, Q, weights, yrow, beta, point, A, grad)
            if f < target:
                return NONCONVEX, f, n_split, point
            _widen(keep, xk, rk)
            if _hull_full(keep, m_lo, m_hi, g_lo, g_hi):
                break
        if settled:
            continue
        n_split += 1
        top = _split_kept(stack, top, keep, m_lo, m_hi, g_lo, g_hi, nc, ivs, lo_v, hi_v,
                          kappa, n_split, budget)
        if top < 0:
            return BUDGET, 0.0, n_split, point
    return CERTIFIED, 0.0, n_split, point


@_jit
def _reset_keep(keep, settled, m_lo, m_hi, g_lo, g_hi):
    """The (μ, g) hull of a box's surviving combinations, ``keep`` = (μ lo, μ hi, g lo,
    g hi): empty where every combination will be tested, else the whole box."""
    if settled:
        keep[0], keep[1], keep[2], keep[3] = math.inf, -math.inf, math.inf, -math.inf
    else:
        keep[0], keep[1], keep[2], keep[3] = m_lo, m_hi, g_lo, g_hi


@_jit
def _widen(keep, xk, rk):
    """Widen the kept hull to hold the combination's box ``xk ± rk`` of (v, μ, g)."""
    T = xk.shape[0] - 2
    keep[0], keep[1] = min(keep[0], xk[T] - rk[T]), max(keep[1], xk[T] + rk[T])
    keep[2], keep[3] = min(keep[2], xk[T + 1] - rk[T + 1]), max(keep[3], xk[T + 1] + rk[T + 1])


@_jit
def _hull_full(keep, m_lo, m_hi, g_lo, g_hi):
    """Whether the kept hull holds the whole (μ, g) box: the box's children are then fixed
    (:func:`_split_kept`), and the combinations not yet tested are tested there, so the
    loop over them may stop (a candidate below the target among them is found there)."""
    return keep[0] <= m_lo and keep[1] >= m_hi and keep[2] <= g_lo and keep[3] >= g_hi


@_jit
def _split_kept(stack, top, keep, m_lo, m_hi, g_lo, g_hi, nc, ivs, lo_v, hi_v, kappa,
                n_split, budget):
    """Push the children of a box whose combinations were not all settled
    (:func:`_push_children`): every stationary point that matters lies in the hull
    ``keep`` of what survived them (:func:`_widen`), so the (μ, g) box is cut to it, and
    each coordinate's v bracket is the hull of its intervals ``ivs[c, :nc[c]]``
    (``lo_v``, ``hi_v``: scratch). Returns the new top, or −1 where the search must stop:
    over its budget of splits, its stack full, or the kept box too narrow to split
    (rounding)."""
    w_m, w_g = m_hi - m_lo, g_hi - g_lo
    m_lo, m_hi = max(m_lo, keep[0]), min(m_hi, keep[1])
    g_lo, g_hi = max(g_lo, keep[2]), min(g_hi, keep[3])
    if n_split > budget or top + 2 > stack.shape[0] or (
            m_hi - m_lo <= _MIN_WIDTH * (1 + abs(m_lo))
            and g_hi - g_lo <= _MIN_WIDTH * (1 + abs(g_lo))):
        return -1
    for c in range(nc.shape[0]):
        lo_v[c], hi_v[c] = math.inf, -math.inf
        for i in range(nc[c]):
            lo_v[c], hi_v[c] = min(lo_v[c], ivs[c, i, 0]), max(hi_v[c], ivs[c, i, 1])
    return _push_children(stack, top, m_lo, m_hi, g_lo, g_hi, w_m, w_g, lo_v, hi_v, kappa)


@_jit
def _krawczyk_rest(xk, rk, kappa, yrow, const, target, has_box, Xlo, Xhi, Kc, Kr, known):
    """The end of the Krawczyk test of one combination's box ``xk ± rk``, where its image
    ``Kc ± Kr`` (:func:`._stationarity._krawczyk_image`) meets the box: the box contracted
    to ``K ∩ X`` in place (every stationary point lies there); True where its value floor
    reaches ``target``, or where it lies in the found point's box ``[Xlo, Xhi]``
    (``has_box``). ``known``: as :func:`_value_floor`'s.

    The searches call the test's parts themselves (:func:`._stationarity._krawczyk_centre`,
    whose ``b_slack`` is a kink's slack of b, then the image stopping at its first row
    that misses the box, then this): a compiled function that calls another takes a
    reference to each of its arrays on entry (two atomic operations each, per
    combination), where one that calls none, with one return, does not
    (:func:`._kernels.hold_references`). As one function the test cost a third of the
    star search's time (docs: Changelog, "References")."""
    n = xk.shape[0]
    for i in range(n):              # every stationary point lies in K ∩ X
        a_ = max(xk[i] - rk[i], Kc[i] - Kr[i])
        b_ = min(xk[i] + rk[i], Kc[i] + Kr[i])
        xk[i], rk[i] = 0.5 * (a_ + b_), 0.5 * (b_ - a_)
    drops = _value_floor(xk, rk, kappa, yrow, const, known) >= target
    if not drops and has_box:
        drops = True                # the found stationary point, unless outside its box
        for i in range(n):
            if xk[i] - rk[i] < Xlo[i] or xk[i] + rk[i] > Xhi[i]:
                drops = False
                break
    hold_references(xk, rk, kappa, yrow, Xlo, Xhi, Kc, Kr, known)
    return drops


@_jit
def _push_children(stack, top, m_lo, m_hi, g_lo, g_hi, w_m, w_g, lo_v, hi_v, kappa):
    """Push the children of the kept (μ, g) box to ``stack[top:]`` with the v brackets
    ``[lo_v, hi_v]``: the box itself where it is much smaller than the box it came from
    (``w_m × w_g``), else its two halves; returns the new top. F_c moves by κ_c u_c per
    unit of g and by 1 per unit of μ: the dimension that moves the probabilities more is
    halved, g weighted by ``Σ κ_c u_c²/Σ u_c`` at the brackets' middles."""
    T = lo_v.shape[0]
    shrunk = m_hi - m_lo < _SHRINK * w_m or g_hi - g_lo < _SHRINK * w_g
    u1, u2 = 0.0, 0.0
    for c in range(T):
        u = math.exp(0.5 * (lo_v[c] + hi_v[c]))
        u1, u2 = u1 + u, u2 + kappa[c] * u * u
    split_mu = m_hi - m_lo >= u2 / u1 * (g_hi - g_lo)
    for child in range(1 if shrunk else 2):
        stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = m_lo, m_hi, g_lo, g_hi
        if shrunk:
            pass
        elif split_mu:
            stack[top, 1 - child] = 0.5 * (m_lo + m_hi)
        else:
            stack[top, 3 - child] = 0.5 * (g_lo + g_hi)
        for c in range(T):
            stack[top, 4 + 2 * c] = lo_v[c]
            stack[top, 5 + 2 * c] = hi_v[c]
        top += 1
    return top
