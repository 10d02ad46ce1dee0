"""Certificate that a T ≥ 3 softmax prox minimiser is global (the driver: :mod:`._proxT`).

The prox objective over the complement of the shift is ``F(x) = ‖x‖²/(2Σ) + ℓ(x)``,
``z = ω + Bx``, ``ℓ = Σ_a ℓ_a(h_a)`` with ``ℓ_a(h_a) = ‖softmax(β h_a) − y_a‖²`` the loss of
row a of the symmetric pre-activation ``h(z)`` (docs: Theory §3). The certificate proves
that F is strongly convex on a ball that holds every global minimiser and the found point
``x_best``; a stationary point of a convex function on such a ball is its minimiser there,
hence global.

1. *Ball of the global minimisers.* With ``L`` the map ``z ↦ h`` (``LᵀL = 2I``), the row
   gradients ``∇ℓ_a = 2β J_a(s_a − y_a)`` and ``‖J_a‖ ≤ 1/2`` (Gershgorin:
   ``2 s_c(1 − s_c) ≤ 1/2`` for the softmax Jacobian) give ``‖∇_x ℓ‖² ≤ 2β² ℓ``. A global
   minimiser is stationary, ``x* = −Σ ∇ℓ(x*)``, and ``ℓ(x*) ≤ F_best − ‖x*‖²/(2Σ)`` (ℓ ≥ 0),
   so ``‖x*‖² ≤ r² = 2Σ F_best · β²Σ/(1 + β²Σ)``: the ball ``B(0, r)`` of idea (a), shrunk by
   the stationarity factor. The certified ball is ``B(0, max(r, ‖x_best‖))``.
2. *Row decomposition of the curvature.* For a direction v, with ``w_a = L_a B v`` the row a
   of ``h(Bv)`` (``Σ_a ‖w_a‖² = 2‖v‖²``),
   ``vᵀ∇²F v = Σ_a [‖w_a‖²/(2Σ) + w_aᵀ ∇²ℓ_a w_a] ≥ 2‖v‖² min_a (1/(2Σ) + min(0, λ_a))``,
   where ``λ_a`` bounds below the smallest eigenvalue of ``∇²ℓ_a`` on the complement of
   the all-ones vector (``ℓ_a`` is invariant along it) over the part of row space the ball
   reaches: in orthonormal coordinates ``t = Qᵀh_a`` of that complement, the ball of
   radius ``‖QᵀL_aB‖ r`` around ``Qᵀh_a(ω)``.
3. *Third-derivative bound.* Along a unit direction v of row space (β = 1),
   ``ℓ_a''' = 6 s'·s'' + 2 e·s'''`` with ``e = s − y_a``, ``s' = s∘ṽ``,
   ``s'' = s∘(ṽ² − m₂)``, ``s''' = s∘(ṽ³ − 3m₂ṽ − m₃)``, ``ṽ = v − s·v`` and ``m_k`` the
   s-weighted moments of ṽ. With ``m₂ ≤ 1/2`` and ``|ṽ_c| ≤ min(R, (1 − s_c)R)``,
   ``R = max v − min v ≤ √2``: ``|s'·s''| ≤ R m₂/2``, ``Σ|s'''_c| ≤ 2R m₂ + 3m₂^{3/2}``, and
   since ``Σ s'''_c = 0``, ``|e·s'''| ≤ (range of e)/2 · Σ|s'''_c|`` with
   ``range e ≤ 1 + max y_a − min y_a``. So ``|D³ℓ_a| ≤ β³ c_a``,
   ``c_a = 3/√2 + (1 + max y_a − min y_a)(√2 + 3/(2√2)) ≤ 7.1`` (the numerical supremum is
   1.14), and ``λ_a`` drops by at most ``β³ c_a δ`` within distance δ of a point.
   The same bounds hold with the actual ``m₂`` and ``range e``, so on a region where each
   probability is known to lie in ``[lo_c, hi_c]`` (exact interval bounds of the softmax
   over a cube or ball of row space) ``m₂ ≤ min(1/2, max hi, 2(1 − max lo))`` (``m₂ ≤
   E_s v² ≤ max s`` for a unit v; ``m₂ ≤ E_s (v − v_k)² ≤ (1 − s_k) R²``) and
   ``range e ≤ max(hi − y) − min(lo − y)`` give a local constant (:func:`_local_c3`): a
   fitted or saturated row has a much smaller one, and the branch and bound needs ~20×
   fewer cubes (T = 5, α = 0.3, λ = 0.05, Δ = 0.1, ``WishartTarget(0.5)``: 38 splits per
   node against 810, all nodes certified against 98.4 %).
3b. *Curvature from the probabilities' intervals* (:func:`_interval_lambda`). Along a unit
   v, ``ℓ_a''/(2β²) = Σ_c s_c ṽ_c² (s_c + e_c − ē)`` (the Gauss–Newton part ``Σ s_c²ṽ_c²``
   and the residual part ``Σ e_c s_c (ṽ_c² − m₂)``, with ``ē = Σ_k s_k e_k``). The weights
   ``s_c ṽ_c²`` sum to ``m₂`` and are at most ``2 s_c (1 − s_c)²``; on a region with
   ``s_c ∈ [lo_c, hi_c]``, ``a_c = 2s_c − y_c − ē ≥ 2lo_c − y_c − ē_hi`` with ``ē_hi =
   min(max_c(hi_c − y_c), Σ hi_c² − Σ lo_c y_c)``, so the curvature is at least
   ``2β² max(Σ_{a_c<0} a_c min(m₂, 2hi_c(1 − lo_c)²), m₂ min_c a_c)``. Near a fitted row
   (s ≈ y) this is close to the true curvature on cubes far larger than the
   third-derivative bound allows: both are used, the larger wins.
4. *Branch and bound in row space* (``T − 1 ≤ 5`` dimensions, per row): a cube of
   half-width w around centre t holds ``λ_a ≥ λ(t) − β³ c_a w √(T − 1)`` (c_a the local
   constant of the cube; the test is a Cholesky factorisation, :func:`_exceeds`); cubes are split
   until each bound is at least ``−(1 − η)/(2Σ)`` (so the strong convexity is at least
   ``η/Σ``, η = 1/8); cubes outside the row ball are dropped. A cube centre inside the
   row ball with ``λ(t) < −(1 − η)/(2Σ)`` ends the certificate (F may be non-convex on the
   ball), as does a budget of splits.
5. *Inexact stationarity.* On the ball ``F ≥ F(x_best) − ‖∇F(x_best)‖²/(2μ)``; the
   certificate asks this slack to be at most ``tol``.

6. *Row-wise dual bound.* Where F is not convex on the ball, :mod:`._certify_dual` relaxes
   the symmetric pre-activation to independent rows and proves each row's problem minimal
   at the found row, by a branch and bound over its stationary points in two dimensions.

Where it fails, the sample gets more Newton starts (:func:`proxT`) and a second try;
whatever remains is counted uncertified. Soundness: every step is a proved inequality;
a non-global local minimum in the ball contradicts the strong convexity, so such a point
is never certified (tests/theory/test_certify_T3.py).

Cost (final evaluation of :func:`~skattn.theory.solve_state_evolution`, 8192 nodes):
with the local constant of 3 the T = 5 point α = 0.3, λ = 0.05, Δ = 0.1,
``WishartTarget(0.5)`` needs 38 cube splits per node (810 with the global constant) and
certifies every node (98.4 % before); its certified evaluation went from 64 s to ~4 s.
Where Σβ² is large the prox is genuinely non-convex on the ball (β ≈ 4, Σ ≈ 0.15): the
convexity certificate fails there and the dual bound of 6 takes over. Measurements:
docs: Changelog.
"""

from __future__ import annotations

import math

import numpy as np

from ._kernels import _gradhessT, _jit, cholesky_lower, softmax_inplace

# result codes of the certificate
CERTIFIED, BUDGET, NONCONVEX = 1, 0, -1
# the certified strong convexity is at least _ETA/Σ: cubes are split until each row's
# curvature bound is at least −(1 − _ETA)/(2Σ)
_ETA = 0.125
# below exp(_LOG_TINY) relative to the largest, a probability's bounds are formed term by
# term (the ratios of :func:`_box_intervals` could overflow)
_LOG_TINY = -600.0
# c_a of the module docstring: 3R m₂ and 2R m₂ + 3 m₂^{3/2} at R = √2, m₂ = 1/2
_C3_FIXED = 3.0 / math.sqrt(2.0)
_C3_PER_RANGE = math.sqrt(2.0) + 1.5 / math.sqrt(2.0)


def row_geometry(channel):
    """``(Q, gain)``: an orthonormal basis ``Q`` (T, T − 1) of the complement of the
    all-ones vector of row space, and ``gain_a = ‖QᵀL_aB‖₂`` (T,), the largest move of the
    centred row a of ``h`` per unit move of x."""
    T = channel.n_tokens
    q, _ = np.linalg.qr(np.column_stack([np.ones(T), np.eye(T)]))
    Q = np.ascontiguousarray(q[:, 1:T])
    L = channel._L.reshape(T, T, -1)                       # row a: (T, K)
    gain = np.array([np.linalg.norm(Q.T @ L[a] @ channel.basis, 2) for a in range(T)])
    return Q, np.ascontiguousarray(gain)


def third_derivative_bounds(y):
    """``c`` of shape (N, T): ``|D³ℓ_a| ≤ β³ c_a`` in row space (module docstring, 3)."""
    spread = np.max(y, axis=2) - np.min(y, axis=2)
    return np.ascontiguousarray(_C3_FIXED + (1.0 + spread) * _C3_PER_RANGE)


@_jit
def _row_logits(t, Q, beta, A):
    """``A = β Q t``, the row's logits (written in place)."""
    T, d = Q.shape
    for c in range(T):
        v = 0.0
        for i in range(d):
            v += Q[c, i] * t[i]
        A[c] = beta * v


@_jit
def _row_matrix(t, Q, yrow, beta, A, M):
    """``M`` with ``Qᵀ∇²ℓ_a Q = 2β² M`` at ``h_a = Q t`` (written in place).

    ``A`` (T,) and ``M`` (T − 1, T − 1) are scratch. With ``∇²ℓ_a = 2β²[diag(W) − WAᵀ −
    AWᵀ + ‖A‖² AAᵀ]`` (as in :func:`._kernels._gradhessT`), ``p = QᵀA``, ``q = QᵀW``:
    ``Qᵀ∇²ℓ_a Q = 2β²[Qᵀdiag(W)Q − pqᵀ − qpᵀ + ‖A‖² ppᵀ]``.
    """
    T, d = Q.shape
    _row_logits(t, Q, beta, A)
    softmax_inplace(A)
    sbar, nA = 0.0, 0.0
    for c in range(T):
        sbar += (A[c] - yrow[c]) * A[c]
        nA += A[c] * A[c]
    pv, qv = np.zeros(d), np.zeros(d)
    for i in range(d):
        for j in range(i, d):
            M[i, j] = 0.0
    for c in range(T):
        Wc = A[c] * A[c] + A[c] * (A[c] - yrow[c] - sbar)
        for i in range(d):
            pv[i] += Q[c, i] * A[c]
            qv[i] += Q[c, i] * Wc
            wq = Wc * Q[c, i]
            for j in range(i, d):
                M[i, j] += wq * Q[c, j]
    for i in range(d):
        for j in range(i, d):
            M[i, j] += nA * pv[i] * pv[j] - pv[i] * qv[j] - qv[i] * pv[j]
            M[j, i] = M[i, j]


@_jit
def _row_lambda(t, Q, yrow, beta, A, M):
    """Smallest eigenvalue of ``∇²ℓ_a`` on the complement of the ones, at ``h_a = Q t``
    (``A`` (T,) and ``M`` (T − 1, T − 1) are scratch; :func:`_row_matrix`)."""
    _row_matrix(t, Q, yrow, beta, A, M)
    return _matrix_lambda(M, beta)


@_jit
def _matrix_lambda(M, beta):
    """:func:`_row_lambda` from its matrix ``M`` (:func:`_row_matrix`)."""
    d = M.shape[0]
    b2 = 2 * beta * beta
    if d == 2:  # closed form; the general case goes through LAPACK
        a, b, cc = M[0, 0], M[0, 1], M[1, 1]
        return b2 * (0.5 * (a + cc) - math.sqrt(0.25 * (a - cc) ** 2 + b * b))
    if d == 3:  # trigonometric closed form of the smallest root (Smith 1961)
        q = (M[0, 0] + M[1, 1] + M[2, 2]) / 3
        p1 = M[0, 1] ** 2 + M[0, 2] ** 2 + M[1, 2] ** 2
        p2 = (M[0, 0] - q) ** 2 + (M[1, 1] - q) ** 2 + (M[2, 2] - q) ** 2 + 2 * p1
        if p2 <= 1e-300:
            return b2 * q
        p = math.sqrt(p2 / 6)
        b00, b11, b22 = (M[0, 0] - q) / p, (M[1, 1] - q) / p, (M[2, 2] - q) / p
        b01, b02, b12 = M[0, 1] / p, M[0, 2] / p, M[1, 2] / p
        r = 0.5 * (b00 * (b11 * b22 - b12 * b12) - b01 * (b01 * b22 - b12 * b02)
                   + b02 * (b01 * b12 - b11 * b02))
        phi = math.acos(min(1.0, max(-1.0, r))) / 3
        # less a margin for the rounding of the closed form (~1e-12 relative)
        return b2 * (q + 2 * p * math.cos(phi + 2 * math.pi / 3) - 1e-9 * (abs(q) + p))
    return b2 * np.linalg.eigvalsh(M)[0]


@_jit
def _exceeds(M, tau, L):
    """Whether ``λ_min(M) > tau`` is proved by a Cholesky factorisation of ``M − τ'I``,
    ``τ' = τ + 1e-10 (|τ| + max|M_ij|)`` (the margin covers the rounding of the
    factorisation, ~d ε max|M_ij|); ``L`` is scratch of M's shape. A few dozen flops, where
    the eigenvalue of :func:`_row_lambda` goes through LAPACK from d = 4."""
    d = M.shape[0]
    big = 0.0
    for i in range(d):
        for j in range(d):
            big = max(big, abs(M[i, j]))
    shift = tau + 1e-10 * (abs(tau) + big)
    return cholesky_lower(M, L, shift, 0.0)


@_jit
def _local_c3(t, half, ball, Q, yrow, beta, c3_cap, A, lo, hi, widths):
    """``c`` with ``|D³ℓ_a| ≤ β³ c`` on a region of row space around ``t`` (docstring, 3).

    The region is the cube of half-width ``half`` around t (``ball`` False: row h moves by
    ``|Δ(h_b − h_c)| ≤ half Σ_i |Q_bi − Q_ci|``) or the ball of radius ``half`` (``ball``
    True: ``|Δ(h_b − h_c)| ≤ √2 half``). There each probability lies in ``[lo_c, hi_c]``
    (exact bounds of ``1/(1 + Σ_b exp(β(h_b − h_c)))``, written to lo, hi; ``widths``:
    scratch of length d), and the constant is :func:`_c3_from_intervals` of them."""
    T, d = Q.shape
    if ball:
        _row_logits(t, Q, beta, A)
        k = math.sqrt(2.0) * half
        for c in range(T):
            s_lo, s_hi = 1.0, 1.0
            for b in range(T):
                if b != c:
                    s_lo += math.exp(min(A[b] - A[c] + beta * k, 700.0))
                    s_hi += math.exp(min(A[b] - A[c] - beta * k, 700.0))
            lo[c], hi[c] = 1.0 / s_lo, 1.0 / s_hi
    else:
        widths[:] = half
        _box_intervals(t, widths, Q, beta, A, lo, hi)
    return _c3_from_intervals(lo, hi, yrow, c3_cap)


@_jit
def _c3_from_intervals(lo, hi, yrow, c3_cap):
    """The constant of the docstring (3) on a region where each probability lies in
    ``[lo_c, hi_c]``: ``m₂ ≤ min(1/2, max hi, 2(1 − max lo))`` and ``range e ≤ max(hi − y)
    − min(lo − y)``, capped at the global ``c3_cap``."""
    T = lo.shape[0]
    max_hi, max_lo, e_hi, e_lo = 0.0, 0.0, -math.inf, math.inf
    for c in range(T):
        max_hi, max_lo = max(max_hi, hi[c]), max(max_lo, lo[c])
        e_hi, e_lo = max(e_hi, hi[c] - yrow[c]), min(e_lo, lo[c] - yrow[c])
    m2 = min(0.5, max_hi, 2.0 * (1.0 - max_lo))
    sq2 = math.sqrt(2.0)
    c = 3 * sq2 * m2 + (e_hi - e_lo) * (2 * sq2 * m2 + 3 * m2 * math.sqrt(m2))
    return min(c, c3_cap)


@_jit
def _box_intervals(centre, half, Q, beta, A, lo, hi):
    """Bounds ``[lo_c, hi_c]`` of each probability ``1/(1 + Σ_b exp(β(h_b − h_c)))``
    over the box ``|t − centre| ≤ half`` of row space (written to lo, hi; A is scratch):
    there ``h_b − h_c`` moves by at most ``k_bc = Σ_i |Q_bi − Q_ci| half_i``.

    The terms ``exp(β(h_b − h_c) ± βk_bc)`` are ``E_b/E_c · K_bc^{±1}`` with ``E_b =
    exp(βh_b − max)`` and the symmetric ``K_bc = exp(βk_bc)``: T + T(T − 1)/2 exponentials
    instead of 2T(T − 1). Where some ``E_c`` is below ``exp(_LOG_TINY)`` the ratios could
    overflow, and the terms are formed one by one, clipped as before."""
    T, d = Q.shape
    _row_logits(centre, Q, beta, A)
    top = -math.inf
    for c in range(T):
        top = max(top, A[c])
    direct = False
    for c in range(T):
        direct = direct or A[c] - top < _LOG_TINY
    if direct:
        for c in range(T):
            s_lo, s_hi = 1.0, 1.0
            for b in range(T):
                if b == c:
                    continue
                k = 0.0
                for i in range(d):
                    k += abs(Q[b, i] - Q[c, i]) * half[i]
                diff = A[b] - A[c]
                s_lo += math.exp(min(diff + beta * k, 700.0))
                s_hi += math.exp(min(diff - beta * k, 700.0))
            lo[c], hi[c] = (1.0 - 1e-12) / s_lo, min((1.0 + 1e-12) / s_hi, 1.0)
        return
    for c in range(T):
        A[c] = math.exp(A[c] - top)           # E_c ∈ [exp(_LOG_TINY), 1]
        lo[c], hi[c] = 1.0, 1.0               # the two sums, inverted below
    for c in range(T):
        for b in range(c + 1, T):
            k = 0.0
            for i in range(d):
                k += abs(Q[b, i] - Q[c, i]) * half[i]
            # beyond exp(700) the pair's terms are inf (lo → 0) and 0 (hi stays): both wider
            K = math.exp(beta * k) if beta * k < 700.0 else math.inf
            rbc = A[b] / A[c]
            lo[c] += rbc * K
            hi[c] += rbc / K
            lo[b] += K / rbc
            hi[b] += 1.0 / (rbc * K)
    for c in range(T):
        # widened by a relative 1e-12 for the rounding of the exponentials' arguments
        lo[c], hi[c] = (1.0 - 1e-12) / lo[c], min((1.0 + 1e-12) / hi[c], 1.0)


@_jit
def _interval_lambda(lo, hi, yrow, beta):
    """A lower bound on the smallest eigenvalue of ``∇²ℓ_a`` on a region where each
    probability lies in ``[lo_c, hi_c]`` (as written by :func:`_local_c3`; docstring, 3b).

    Along a unit direction v, ``ℓ_a''/(2β²) = Σ_c s_c ṽ_c² (s_c + e_c − ē)`` with
    ``ē = Σ_k s_k e_k``: the weights ``s_c ṽ_c²`` are at most ``2 s_c (1 − s_c)²`` and
    sum to ``m₂``, so only the negative ``a_c = 2s_c − y_c − ē`` count, each at most its
    weight's bound (or all at the smallest times ``m₂``).
    """
    T = lo.shape[0]
    max_hi, max_lo, e_hi, sq_hi, ly_lo = 0.0, 0.0, -math.inf, 0.0, 0.0
    for c in range(T):
        max_hi, max_lo = max(max_hi, hi[c]), max(max_lo, lo[c])
        e_hi = max(e_hi, hi[c] - yrow[c])
        sq_hi += hi[c] * hi[c]
        ly_lo += lo[c] * yrow[c]
    m2 = min(0.5, max_hi, 2.0 * (1.0 - max_lo))
    ebar_hi = min(e_hi, sq_hi - ly_lo)        # ē is an average of the e_k, and ‖s‖² − s·y
    by_weight, a_min = 0.0, 0.0
    for c in range(T):
        a = 2 * lo[c] - yrow[c] - ebar_hi
        if a < 0:
            a_min = min(a_min, a)
            by_weight += a * min(m2, 2 * hi[c] * (1 - lo[c]) ** 2)
    low = max(by_weight, m2 * a_min)
    # less a relative margin for the rounding of lo, hi and these sums
    return 2 * beta * beta * low * (1 + 1e-12) - 1e-15


@_jit
def _push_children(stack, top, centre, h, d, n_child):
    """Push the ``n_child = 2**d`` sub-cubes of half-width ``h`` around ``centre`` on the
    branch-and-bound stack (rows: centre, then half-width); returns the new top."""
    for k in range(n_child):
        for i in range(d):
            stack[top, i] = centre[i] + (h if (k >> i) & 1 else -h)
        stack[top, d] = h
        top += 1
    return top

@_jit
def _row_floor(t0, rho, Q, yrow, beta, lip, target, budget, stack):
    """Lower bound on the row curvature over the ball ``|t − t0| ≤ rho`` of row space.

    Branch and bound over cubes (module docstring, 4); returns ``(code, bound, n_split)``
    with ``bound ≥ target`` where ``code`` is CERTIFIED. ``lip`` is ``β³ c_a``.
    """
    d = t0.shape[0]
    sd = math.sqrt(d)
    n_child = 1 << d
    T = Q.shape[0]
    A = np.empty(T)
    lo, hi = np.empty(T), np.empty(T)
    M = np.empty((d, d))
    widths = np.empty(d)             # scratch of _local_c3
    b3 = beta * beta * beta
    b2 = 2 * beta * beta
    L = np.empty((d, d))
    cap = lip / b3
    # the whole ball at once: most rows end here
    lam = _row_lambda(t0, Q, yrow, beta, A, M)
    if lam < target:
        return NONCONVEX, lam, 0
    lip_ball = b3 * _local_c3(t0, rho, True, Q, yrow, beta, cap, A, lo, hi, widths)
    low_ball = max(lam - lip_ball * rho, _interval_lambda(lo, hi, yrow, beta))
    if low_ball >= target:
        return CERTIFIED, low_ball, 0
    # cubes of half-diagonal δ certify where λ − lip·δ ≥ target; with the centre's margin,
    # about (lip·rho/margin)^d of them cover the ball: beyond the budget, give up now
    if (lip_ball * rho / (lam - target)) ** d > budget:
        return BUDGET, lam - lip_ball * rho, 0
    # probe the ball along its axes: a non-convex row is usually caught here, before the
    # splits (failing early is always sound)
    tc = np.empty(d)
    for k in range(2 * d):
        for frac in (0.5, 1.0):
            for i in range(d):
                tc[i] = t0[i]
            tc[k // 2] += (frac if k % 2 else -frac) * rho
            lam_k = _row_lambda(tc, Q, yrow, beta, A, M)
            if lam_k < target:
                return NONCONVEX, lam_k, 0
    for i in range(d):
        stack[0, i] = t0[i]
    stack[0, d] = rho
    top, n_split, low = 1, 0, math.inf
    while top > 0:
        top -= 1
        w = stack[top, d]
        dist2, cen2 = 0.0, 0.0
        for i in range(d):
            tc[i] = stack[top, i]
            off = abs(tc[i] - t0[i])
            dist2 += max(off - w, 0.0) ** 2
            cen2 += off * off
        if dist2 > rho * rho:
            continue
        # the box's points in the ball are within w√d (box) and |t − t0| + rho (ball)
        lip_w = b3 * _local_c3(tc, w, False, Q, yrow, beta, cap, A, lo, hi, widths)
        lam_int = _interval_lambda(lo, hi, yrow, beta)
        if lam_int >= target:
            low = min(low, lam_int)
            continue
        drop = lip_w * min(w * sd, math.sqrt(cen2) + rho)
        # λ(centre) − drop ≥ target, i.e. λ_min(M) > (target + drop)/(2β²), by Cholesky
        _row_matrix(tc, Q, yrow, beta, A, M)
        if _exceeds(M, (target + drop) / b2, L):
            low = min(low, target)
            continue
        if cen2 <= rho * rho and not _exceeds(M, target / b2, L):
            return NONCONVEX, target, n_split
        n_split += 1
        if n_split > budget or top + n_child > stack.shape[0]:
            return BUDGET, target - drop, n_split
        top = _push_children(stack, top, tc, 0.5 * w, d, n_child)
    return CERTIFIED, low, n_split


@_jit
def minimiser_ball_radius(f, s, beta):
    """The radius ρ of the ball around the prox's centre that holds every global minimiser
    of one T ≥ 3 sample, from a point of objective ``f`` (Σ = ``s``)."""
    b2s = beta * beta * s
    return math.sqrt(max(2 * s * f * b2s / (1 + b2s), 0.0))


@_jit
def certify_convex(x, f, omega, y, s, B, index, scale, beta, Q, gain, c3, tol, budget,
                   stack):
    """Certify that ``x`` (objective ``f``) is a global minimiser of one T ≥ 3 sample.

    Returns ``(code, n_split)``: CERTIFIED, BUDGET or NONCONVEX (module docstring).
    ``budget`` caps the cube splits of all rows together; ``stack`` is scratch of shape
    ``(≥ 1 + 2^{T−1}, T)``.
    """
    T = y.shape[0]
    d = T - 1
    g, _ = _gradhessT(x, omega, y, s, B, index, scale, beta)
    rad = max(minimiser_ball_radius(f, s, beta), math.sqrt(np.dot(x, x))) * (1 + 1e-9) \
        + 1e-300
    target = -(1 - _ETA) / (2 * s)
    b3 = beta * beta * beta
    t0 = np.empty(d)
    hrow = np.empty(T)
    worst, n_total = math.inf, 0
    for a in range(T):
        for c in range(T):
            hrow[c] = omega[index[a, c]] * scale[a, c]
        for i in range(d):
            v = 0.0
            for c in range(T):
                v += Q[c, i] * hrow[c]
            t0[i] = v
        code, low, n_split = _row_floor(t0, gain[a] * rad, Q, y[a], beta, b3 * c3[a],
                                        target, budget - n_total, stack)
        n_total += n_split
        if code != CERTIFIED:
            return code, n_total
        worst = min(worst, low)
    mu = 2 * (1 / (2 * s) + min(0.0, worst))
    if np.dot(g, g) > 2 * mu * tol:
        return BUDGET, n_total
    return CERTIFIED, n_total
