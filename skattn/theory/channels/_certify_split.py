"""The row-wise dual bound with an unequal split of the quadratic (T ≥ 3), where the equal
split of :mod:`._certify_dual` has a duality gap.

1. *The split.* With ``H`` the symmetric pre-activation of the found point and ``H0`` that
   of ω, the prox objective is ``F = Σ_{a,c} (H_ac − H0_ac)²/(4Σ) + Σ_a ℓ_a(H_a)``. Any
   weights with ``W_ac + W_ca = 1/(2Σ)`` (a ≠ c) and ``W_aa = 1/(4Σ)`` write the same
   quadratic as ``Σ_a Σ_c W_ac (H_ac − H0_ac)²`` on symmetric matrices, yet each row's
   share differs; :mod:`._certify_dual` is the equal split ``W = 1/(4Σ)``. With the row
   gradients ``G_ac = 2W_ac(H_ac − H0_ac) + ∂_c ℓ_a(H_a)`` and the antisymmetric ``ν = −(G −
   Gᵀ)/2``, relaxing H to independent rows gives ``min F ≥ Σ_a min φ_a``, ``φ_a(h) = Σ_c
   W_ac (h_c − H0_ac)² + ν_aᵀh + ℓ_a(h)``, with equality at the found point, which is
   stationary in every row (its stationarity in z makes G antisymmetric).
2. *One row, all T coordinates.* ``φ(h) = Σ_c w_c (h_c − c_c)² + o + ℓ(h)`` with the
   centre ``c = H0_a − ν_a/(2w)`` and ``o = Σ_c (ν_c H0_ac − ν_c²/(4w_c))``. Its stationary
   points solve the system of :mod:`._certify_dual` with a κ per coordinate, ``κ_c = β²/
   w_c``, and ``b = βc``: ``v_c + κ_c e^{v_c}(e^{v_c} − y_c − g) = b_c + μ``, ``Σ e^v = 1``,
   ``g = Σ e^v(e^v − y)``, mapped back by ``h_c = c_c − β r_c / w_c`` (``r_c = s_c(s_c − y_c −
   g)``), where ``φ = V = Σ_c κ_c r_c² + ‖s − y‖² + o``. Every h below ``φ(h*)`` lies in the
   ellipsoid ``Σ w_c (h_c − c_c)² < R² = φ(h*) − o``, where ``βh_c`` moves by at most
   ``βR/√w_c`` and ``β(h_a − h_c)`` by ``βR √(1/w_a + 1/w_c)``: the first brackets of μ, v
   and g. The branch and bound over (μ, g) boxes is that of :mod:`._certify_dual`
   (:func:`._certify_dual._search`). The found point's box: the Krawczyk box proving one
   zero around ``(log s*, μ*, g*)``, contracted by Krawczyk steps; it is excluded from the
   search where the value floor on the contracted box is above the target (then the one
   stationary point in it is).
3. *The search for a split* (:func:`certify_by_split`): the least row excess ``min_a
   (min φ_a − φ_a(H_a))`` is concave in the split (each φ_a is affine in W at fixed h, ν
   included), and at a fixed point h of row a its excess rises by ``(h_c − H_ac)²`` per
   unit of ``W_ac`` and falls by ``(h_a − H_ca)²`` per unit of ``W_ca`` (ν follows W).
   Cutting planes: each row whose bound fails returns a point below its target, moved
   downhill to a local minimum of the row (:func:`_descend_row`); its excess, affine in
   the split, is a cut. A linear programme gives the split that maximises the least cut
   within a trust region around the best split so far (plain cutting planes jump to the
   box's corners and need many more rounds); the region doubles after a split that did
   better and halves after one that did not. The search stops when every row is
   certified (the node is), after ``max_rounds`` splits, or when the cuts show that no
   split in the whole box brings every row within its tolerance. Where the equal split
   failed in one to three rows, the star bound of :mod:`._certify_star` follows.
"""

from __future__ import annotations

import math
import numpy as np
from scipy.optimize import linprog

from ._certify_dual import (_domain, _log_sum_exp, _search, _split_around, _value_floor,
                            _weighted_value, found_rows)
from ._certify_rows import CERTIFIED, NONCONVEX
from ._kernels import _jit, softmax_inplace
from ._stationarity import _found_point_box, _krawczyk

# Krawczyk steps that contract the found point's box before its value floor is taken
_CONTRACTIONS = 30
# the split's weights stay within this fraction of 1/(2Σ) from 0 and from 1/(2Σ), the
# default of ``SoftmaxChannel.split_min_share``: each row keeps a strongly convex
# quadratic, and its κ_c = β²/W_ac stays within 5× the equal split's. Near the corners
# (1e-3, as first landed) the rows' searches ran out of budget: 0.1 certified more of the
# nodes that reach the split, in less time, on each of seven held-out grid points (the
# measurements: docs: Validation report)
MIN_SHARE = 0.1
# splits tried per node, the default of ``SoftmaxChannel.split_rounds`` (chosen on four
# grid points; the measurements: docs: Changelog, "Unequal splits")
MAX_ROUNDS = 4
# the cutting planes' trust region: its first half-width, as a fraction of 1/(2Σ)
_TRUST = 0.125


@_jit
def _row_dual_weighted(h_star, h0, nu, w, yrow, beta, tol, budget):
    """Prove ``φ ≥ φ(h*) − tol`` on all of R^T for one weighted row (module docstring 2).

    Returns ``(code, n_split, point, excess)``: CERTIFIED, BUDGET, or NONCONVEX with
    ``point`` a point below ``φ(h*) − tol`` and ``excess = φ(point) − φ(h*)`` (< 0).
    """
    T = yrow.shape[0]
    n = T + 2
    A = np.empty(T)
    centre = np.empty(T)
    offset = 0.0
    for c in range(T):
        centre[c] = h0[c] - nu[c] / (2 * w[c])
        offset += nu[c] * h0[c] - nu[c] * nu[c] / (4 * w[c])
    f_star = _weighted_value(h_star, centre, offset, w, yrow, beta, A)
    point = h_star.copy()
    R2 = f_star - offset
    if R2 <= 0.0:
        return CERTIFIED, 0, point, 0.0
    R = math.sqrt(R2)
    target = f_star - tol
    kappa, b = np.empty(T), np.empty(T)
    for c in range(T):
        kappa[c] = beta * beta / w[c]
        b[c] = beta * centre[c]
    # the domain (module docstring 2): βh_c moves by at most βR/√w_c
    stack = np.empty((256, 4 + 2 * T))
    spread = np.empty(T)
    for c in range(T):
        spread[c] = beta * R / math.sqrt(w[c])
        A[c] = b[c] + spread[c]
    mu_lo = -_log_sum_exp(A)
    for c in range(T):
        A[c] = b[c] - spread[c]
    mu_hi = -_log_sum_exp(A)
    _domain(stack, mu_lo, mu_hi, b, spread, yrow, A)
    Xlo, Xhi = np.empty(n), np.empty(n)
    has_box = _found_point_excluded(h_star, kappa, b, yrow, beta, offset, target, Xlo, Xhi)
    top = 1
    if has_box:
        top = _split_around(stack, Xlo[T], Xhi[T], Xlo[T + 1], Xhi[T + 1])
    nu_offset = np.full(T, offset)
    code, f, n_split, found = _search(stack, top, kappa, yrow, beta, b, offset, target,
                                      has_box, Xlo, Xhi, budget, True, centre, nu_offset,
                                      np.empty((T, 1)), w)
    if code == NONCONVEX:
        return NONCONVEX, n_split, found.copy(), f - f_star
    return code, n_split, point, 0.0


@_jit
def _found_point_excluded(h_star, kappa, b, yrow, beta, const, target, Xlo, Xhi):
    """Whether the found point ``h*`` has a Krawczyk box ``[Xlo, Xhi]`` of (v, μ, g) that
    proves one stationary point of the system ``(kappa, b)`` (module docstring 2) and on
    which, contracted by Krawczyk steps, the value floor (constant ``const``) is at least
    ``target``: then that box can be left out of the search."""
    T = yrow.shape[0]
    n = T + 2
    A = np.empty(T)
    for c in range(T):
        A[c] = beta * h_star[c]
    softmax_inplace(A)
    if not np.all(A > 0):
        return False
    work = np.empty((7, n, n))
    xk, rk, Kc, Kr = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    g_star = np.dot(A, A - yrow)
    mu_star = 0.0
    for c in range(T):
        xk[c] = math.log(A[c])
        mu_star += (xk[c] + kappa[c] * A[c] * (A[c] - yrow[c] - g_star) - b[c]) / T
    xk[T], xk[T + 1] = mu_star, g_star
    if not _found_point_box(xk.copy(), kappa, yrow, b, Xlo, Xhi, rk, Kc, Kr, work) > 0:
        return False
    for i in range(n):
        xk[i], rk[i] = 0.5 * (Xlo[i] + Xhi[i]), 0.5 * (Xhi[i] - Xlo[i])
    for _ in range(_CONTRACTIONS):
        if not _krawczyk(xk, rk, kappa, yrow, b, Kc, Kr, work):
            break
        for i in range(n):
            lo_ = max(xk[i] - rk[i], Kc[i] - Kr[i])
            hi_ = min(xk[i] + rk[i], Kc[i] + Kr[i])
            xk[i], rk[i] = 0.5 * (lo_ + hi_), 0.5 * (hi_ - lo_)
    return _value_floor(xk, rk, kappa, yrow, const, None) >= target


@_jit
def _split_weights(theta, s, T):
    """W of the split: ``W_ac = θ_p`` and ``W_ca = 1/(2Σ) − θ_p`` for the p-th pair a < c
    (row-major), ``W_aa = 1/(4Σ)``."""
    W = np.empty((T, T))
    p = 0
    for a in range(T):
        W[a, a] = 1 / (4 * s)
        for c in range(a + 1, T):
            W[a, c], W[c, a] = theta[p], 1 / (2 * s) - theta[p]
            p += 1
    return W


@_jit
def _multipliers(H, H0, L, W, a):
    """ν_a of row a under the split W: ``−(G_a − G_{·a})/2`` with ``G_ac = 2W_ac(H_ac −
    H0_ac) + L_ac`` (module docstring 1)."""
    T = H.shape[0]
    nu = np.empty(T)
    for c in range(T):
        g_ac = 2 * W[a, c] * (H[a, c] - H0[a, c]) + L[a, c]
        g_ca = 2 * W[c, a] * (H[c, a] - H0[c, a]) + L[c, a]
        nu[c] = -0.5 * (g_ac - g_ca)
    return nu


@_jit
def split_rows(H, H0, L, y, s, beta, theta, tol, budget):
    """The weighted row bound of every row of one sample (its rows H, H0, L of
    :func:`._certify_dual.found_rows`) under the split θ.

    Returns ``(codes, points, excesses, n_split)``: per row its code (CERTIFIED, BUDGET or
    NONCONVEX), a point below its target where NONCONVEX and that point's excess over the
    found row (:func:`_row_dual_weighted`; each row gets ``tol/T``); ``budget`` caps the
    splits of each row.
    """
    T = y.shape[0]
    W = _split_weights(theta, s, T)
    codes = np.empty(T, np.int64)
    points = np.empty((T, T))
    excesses = np.zeros(T)
    n_total = 0
    for a in range(T):
        code, n_split, point, excess = _row_dual_weighted(H[a].copy(), H0[a].copy(),
                                                          _multipliers(H, H0, L, W, a),
                                                          W[a].copy(), y[a], beta,
                                                          tol / T, budget)
        codes[a], excesses[a] = code, excess
        points[a] = point
        n_total += n_split
    return codes, points, excesses, n_total


@_jit
def _value_gradient_hessian(h, centre, offset, w, yrow, beta, grad, hess, A):
    """φ of a weighted row (:func:`._certify_dual._weighted_value`), its gradient and
    Hessian (to grad, hess)."""
    T = yrow.shape[0]
    for c in range(T):
        A[c] = beta * h[c]
    softmax_inplace(A)
    val, g, m = offset, 0.0, 0.0
    for c in range(T):
        val += w[c] * (h[c] - centre[c]) ** 2 + (A[c] - yrow[c]) ** 2
        g += A[c] * (A[c] - yrow[c])
        m += A[c] * (2 * A[c] - yrow[c])
    for c in range(T):
        grad[c] = 2 * w[c] * (h[c] - centre[c]) + 2 * beta * A[c] * (A[c] - yrow[c] - g)
        for d in range(T):
            ds = beta * A[c] * ((1.0 if c == d else 0.0) - A[d])   # ∂s_c/∂h_d
            dg = beta * A[d] * (2 * A[d] - yrow[d] - m)             # ∂g/∂h_d
            hess[c, d] = 2 * beta * (ds * (2 * A[c] - yrow[c] - g) - A[c] * dg)
        hess[c, c] += 2 * w[c]
    for c in range(T):        # symmetric in exact arithmetic
        for d in range(c):
            hess[c, d] = hess[d, c] = 0.5 * (hess[c, d] + hess[d, c])
    return val


def held_response(h_start, centre, w, yrow, beta, entry, eta):
    """A weighted row's least with its ``entry`` held at η (Newton from ``h_start``) and
    ``λ = ∂φ/∂h_entry`` there: the point and λ, an estimate (the star's and the double
    star's columns use it to place and shape pieces, never to decide whether one holds)."""
    h0 = h_start.copy()
    h0[entry] = eta
    h, _ = _descend_row(h0, centre, 0.0, w, yrow, beta, 1 << entry)
    e = np.exp(beta * (h - h.max()))
    e /= e.sum()
    g = e @ (e - yrow)
    lam = 2 * w[entry] * (h[entry] - centre[entry]) + 2 * beta * e[entry] * (
        e[entry] - yrow[entry] - g)
    return h, lam


# the Newton steps of _descend_row at most
_NEWTON_STEPS = 60


@_jit
def _descend_row(h, centre, offset, w, yrow, beta, held):
    """Newton with a shifted Hessian and backtracking from h to a local minimiser of the
    weighted row, the entries in the bit mask ``held`` kept at h's (0: none); returns the
    end point and its value. (No default arguments: numba dispatches a call that omits
    one by its slow path; docs: Changelog.)"""
    T = yrow.shape[0]
    grad, hess, A = np.empty(T), np.empty((T, T)), np.empty(T)
    trial_grad, trial_hess = np.empty(T), np.empty((T, T))
    h = h.copy()
    f = _value_gradient_hessian(h, centre, offset, w, yrow, beta, grad, hess, A)
    for _ in range(_NEWTON_STEPS):
        for e in range(T):      # a held entry's Newton step is zero
            if held >> e & 1:
                grad[e] = 0.0
                hess[e, :] = 0.0
                hess[:, e] = 0.0
                hess[e, e] = 1.0
        if np.sqrt(np.dot(grad, grad)) < 1e-13 * (1 + abs(f)):
            break
        shift = max(0.0, -np.linalg.eigvalsh(hess)[0]) + 1e-10 * (1 + np.max(np.abs(hess)))
        step = np.linalg.solve(hess + shift * np.eye(T), -grad)
        slope = np.dot(grad, step)
        t = 1.0
        while t > 1e-12:
            trial = h + t * step
            f_trial = _value_gradient_hessian(trial, centre, offset, w, yrow, beta,
                                              trial_grad, trial_hess, A)
            if f_trial <= f + 1e-4 * t * slope:
                break
            t *= 0.5
        if t <= 1e-12:
            break
        h, f = trial, f_trial
        grad[:], hess[:, :] = trial_grad, trial_hess
    return h, f


def _row_problem(H0_row, nu, w):
    """The centre and offset of a weighted row ``Σ w (h − H0)² + νᵀh + ℓ``
    (:func:`._certify_dual._weighted_value`)."""
    return H0_row - nu / (2 * w), float(np.sum(nu * H0_row - nu ** 2 / (4 * w)))


def _descend(point, excess, a, H, H0, L, W, yrow, beta):
    """The point below row a's target, moved downhill to a local minimiser of the row
    under the split W: the lower its excess, the tighter its cut."""
    T = yrow.shape[0]
    nu = _multipliers(H, H0, L, W, a)
    w = W[a].copy()
    centre, offset = _row_problem(H0[a], nu, w)
    f_star = _weighted_value(H[a].copy(), centre, offset, w, yrow, beta, np.empty(T))
    h, f = _descend_row(point, centre, offset, w, yrow, beta, 0)
    if f - f_star < excess:
        return h, f - f_star
    return point, excess


def _cut(T, row, point, H_row, excess):
    """The cut of one failed row: the excess ``e + Σ_p g_p (θ_p − θ_p⁰)`` of ``point`` as
    an affine function of the pair shares θ (module docstring 3); returns g."""
    grad = np.zeros(T * (T - 1) // 2)
    p = 0
    for a in range(T):
        for c in range(a + 1, T):
            if a == row:
                grad[p] = (point[c] - H_row[c]) ** 2
            elif c == row:
                grad[p] = -(point[a] - H_row[a]) ** 2
            p += 1
    return grad


def _best_split(cuts_g, cuts_e, lower, upper):
    """The split θ in the box [lower, upper] that maximises the least cut ``e_k + g_k·θ``,
    and that least value (a linear programme; one cut, the most frequent case, in closed
    form: each share at the end its slope points to, the lower end where it is 0, the
    vertex HiGHS returns)."""
    n_pairs = lower.size
    if len(cuts_g) == 1:
        theta = np.where(cuts_g[0] > 0, upper, lower)
        return theta, float(cuts_e[0] + cuts_g[0] @ theta)
    G = np.array(cuts_g)
    lp = linprog(np.r_[np.zeros(n_pairs), -1.0],
                 A_ub=np.hstack([-G, np.ones((len(cuts_g), 1))]), b_ub=np.array(cuts_e),
                 bounds=list(zip(lower, upper)) + [(None, None)], method="highs")
    if lp.status != 0:
        return None, -math.inf
    return lp.x[:n_pairs], -lp.fun


def certify_by_split(x, omega, y, s, B, index, scale, beta, tol, budget,
                     max_rounds=MAX_ROUNDS, min_share=MIN_SHARE):
    """Certify ``x`` global for one T ≥ 3 sample by the row-wise dual bound under a split
    of the quadratic found by cutting planes (module docstring 3); each pair's weight stays
    within ``min_share`` of ``1/(2Σ)`` from both ends.

    Returns ``(certified, rounds)``: True where, under the last split tried, every row's
    bound holds (then ``F ≥ F(x) − tol`` everywhere); ``rounds`` the splits tried.
    """
    rows = found_rows(x, omega, y, s, B, index, scale, beta)
    return split_search(*rows, y, s, beta, tol, budget, max_rounds, min_share)[:2]


def split_search(H, H0, L, y, s, beta, tol, budget, max_rounds, min_share, ignore=-1):
    """The cutting-plane search of :func:`certify_by_split` on a sample's rows
    (:func:`._certify_dual.found_rows`); returns ``(certified, rounds, first, last)``,
    ``first`` the equal split's ``(codes, points, excesses)`` of :func:`split_rows` (None
    where no split was tried) and ``last`` the last split's ``(θ, codes, points,
    excesses)``. ``ignore``: a row left out of the search (counted as certified, its cuts
    not taken): the split where every other row holds, for the star bound of that row
    (:mod:`._certify_star`)."""
    T = y.shape[0]
    n_pairs = T * (T - 1) // 2
    half = 1 / (2 * s)
    lower = np.full(n_pairs, min_share * half)
    upper = np.full(n_pairs, (1 - min_share) * half)
    theta = np.full(n_pairs, 0.5 * half)          # the equal split first
    centre, centre_value, radius = theta, -math.inf, _TRUST * half
    cuts_g, cuts_e = [], []
    first = last = None
    for rounds in range(1, max_rounds + 1):
        codes, points, excesses, _ = split_rows(H, H0, L, y, s, beta, theta, tol, budget)
        first = first or (codes, points, excesses)
        last = (theta, codes, points, excesses)
        held = codes == CERTIFIED
        if ignore >= 0:
            held[ignore] = True
        if np.all(held):
            return True, rounds, first, last
        failed = np.flatnonzero(~held & (codes == NONCONVEX))
        if failed.size == 0 or rounds >= max_rounds:
            return False, rounds, first, last
        W = _split_weights(theta, s, T)
        value = 0.0
        for a in failed:
            point, excess = _descend(points[a], excesses[a], a, H, H0, L, W, y[a], beta)
            g = _cut(T, a, point, H[a], excess)
            cuts_g.append(g)
            cuts_e.append(excess - g @ theta)
            value = min(value, excess)
        # a proximal step: the trust region grows around a split that did better, and
        # shrinks after one that did not
        if value > centre_value:
            centre, centre_value, radius = theta, value, min(2 * radius, half)
        else:
            radius *= 0.5
        theta, least = _best_split(cuts_g, cuts_e, np.maximum(lower, centre - radius),
                                   np.minimum(upper, centre + radius))
        # the trust region's best split is below the tolerance: stop where no split at all
        # lifts every known cut to it
        if theta is None or least < -tol / T and \
                _best_split(cuts_g, cuts_e, lower, upper)[1] < -tol / T:
            return False, rounds, first, last
    return False, max_rounds, first, last
