"""The star bound of the T ≥ 3 certificate: where the row-wise bound of
:mod:`._certify_split` fails in one to three rows, one of them, a, is kept coupled to the
others.

1. *The star.* Keep row a's entries exact, ``u = H_a``, each ``u_c`` shared with row c's
   entry a, and relax only the pairs between the other rows, by the found point's
   multipliers ν under a split W of the quadratic (:mod:`._certify_split`, docstring 1;
   the equal split ``W = 1/(4Σ)`` first). Then ``min F ≥ min_u Φ(u)``, ``Φ(u) = Σ_c
   W_ac (u_c − H0_ac)² + ℓ_a(u) + Σ_{c≠a} ψ_c(u_c)``, where ``ψ_c(η)`` is the least of row
   c's relaxed problem φ_c (weights ``W_c·``) with its entry a held at η, less ``ν_ca
   η``; at the found point the two sides are equal. Only the pairs between the other rows
   are relaxed, so the split of a pair (a, c) between its two rows does not matter.
2. *Minorants of ψ_c*, each proved by the weighted row bound
   (:func:`._certify_split._row_dual_weighted`):

   - *the tangent quadratic*: ``φ_c(h) − k (h_a − H_ca)² ≥ φ_c(H_c) − tol_c`` for the
     largest k of ``SHARES·W_ca`` that proves (row c's quadratic on entry a loses k; the
     found point stays stationary), so ``ψ_c(η) ≥ φ_c(H_c) − tol_c − ν_ca η + k (η −
     H_ac)²``. A row c that fails itself can still prove a negative k (more weight on
     entry a, where its own gap lies), a concave piece that row a's quadratic ``W_ac``
     keeps convex;
   - *lines*: for a slope λ, ``m = min_h φ_c(h) − λ h_a`` (a local minimiser found by
     Newton, then proved global) gives ``ψ_c(η) ≥ m + (λ − ν_ca) η``. The slopes run from
     the tangent's towards that of row a's own lower point (``SLOPES``); each line is
     lowered where needed to lie ``tol_c`` below the tangent at ``H_ac``. Where the
     search below shows a point under the found value, each column row adds the line
     tangent to ψ_c at that point's entry and the search runs again (``_REFINE``).

   So ``min F ≥ min_u Φ̃(u)``, ``Φ̃(u) = ℓ_a(u) + Σ_c Ψ_c(u_c)`` with ``Ψ_c = max_p q_cp``,
   quadratics ``q_cp(η) = w_p (η − z_p)² + o_p`` of weight ``w_p > 0`` (row a's own
   quadratic included; the diagonal entry has one piece).
3. *Its stationary points.* On a segment of η where piece p is the largest, Φ̃'s
   stationary points solve the row system of :mod:`._certify_dual` (docstring 2) with
   ``κ_c = β²/w_p`` and ``b_c = βz_p``; at a kink η_k of Ψ_c (two pieces equal), ``u_c =
   η_k``: ``v_c = βη_k + μ``, κ_c = 0. Ψ_c is convex and ℓ_a smooth, so Φ̃'s least value
   (Φ̃ is coercive) is at such a point, where ``Φ̃ = V = Σ_c (κ_c r_c² + o_c) + ‖s − y‖²``
   (``o_c = Ψ_c(η_k)`` at a kink). The branch and bound over (μ, g) boxes is that of
   :func:`._certify_dual._search`, with each coordinate's set a union over its *branches*
   (the pieces on their segments, each within ``v ∈ β·segment + μ``, and the kinks), every
   combination tested with its own κ, b and constant. Kinks are located to within a
   relative 1e-9 and enter with that slack: in the Krawczyk test as an interval of
   ``b_c`` (the residual's bound grows by β times the half-width, so the test holds for
   every place of the kink in it), in the value floor through Ψ_c's least on it.
4. *Domain and found point.* The pieces of the found point (the tangent ones) are below
   Ψ_c, so every u with ``Φ̃(u) < Φ̃(H_a)`` lies in their ellipsoid: the first box, as in
   :mod:`._certify_split`. The found point is a stationary point of the tangent pieces'
   system (it is the largest piece near ``H_ac``), excluded by its Krawczyk box.

5. *Which split.* Under the equal split a second failing row b takes a tangent of
   negative share (docstring 2), which rarely proves enough. Where two or three rows
   fail, the split search of :mod:`._certify_split` runs again with row a left out: a
   split under which every other row holds gives each column row a tangent of share ≥ 0,
   and the star of row a follows under that split. A negative share never takes a piece
   below a tenth of row a's own weight on the entry (``_MIN_WEIGHT``): the search needs
   convex pieces.

The bound holds with ``tol/T`` for each column row's tangent and ``tol/T`` for row a:
``F ≥ F(x) − tol``. Soundness tests: tests/theory/test_certify_star.py.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._certify_dual import (_MAX_COMBINATIONS, _ROOT_PRECISION, _contract, _coordinate_set,
                            _domain, _kept_box, _krawczyk_drops, _log_sum_exp, _out_of_room,
                            _push_children, _reset_keep, _split_around, _value_floor,
                            _weighted_value, _widen, found_rows)
from ._certify_rows import BUDGET, CERTIFIED, NONCONVEX
from ._certify_split import (MAX_ROUNDS, MIN_SHARE, _descend, _descend_row,
                             _found_point_excluded, _multipliers, _row_dual_weighted,
                             _split_weights, split_search)
from ._kernels import _jit, softmax_inplace

# the tangent quadratic's share of row c's weight on entry a, tried largest first (0: the
# affine tangent of the row-wise bound, which the failing round proved where row c did not
# fail; a negative share adds weight to entry a, for a row c that fails itself)
SHARES = (0.95, 0.8, 0.6, 0.4, 0.2, 0.0, -0.3, -0.6, -0.9)
# the lines' slopes, as fractions of the way from the tangent's slope at H_ac to the slope
# of row a's own quadratic at its lower point (scratch study: 4 and 9 slopes, and a fan
# to −1…3, closed the same nodes; docs: Changelog)
SLOPES = (0.25, 0.5, 0.75, 1.0)
# a line that lifts Ψ_c by less than this fraction of row a's gap is dropped (_prune)
_LIFT = 0.05
# where the star's search shows a lower point, the rounds of lines tangent there (1, 2
# and 5 rounds certified the same nodes of the fitted point's)
_REFINE = 1
# ... only where that point is less than this fraction of row a's gap below the found
# value: the refinement closes near misses, and costs a round of lines at every node
_REFINE_BELOW = 0.01
# the star is tried around each failing row where at most this many fail (a row that
# fails in a column takes a negative share: see SHARES)
_MAX_CENTRES = 3
# the split search for the star of one failing row, with that row left out, tries this
# many splits, the default of ``SoftmaxChannel.star_split_rounds`` (on the stored nodes of
# the fitted point 4 and 8 rounds certified 18 and 23 of 87 nodes, 12 the same as 8)
STAR_SPLIT_ROUNDS = 8
# a tangent piece keeps at least this fraction of row a's own weight on the entry: a
# negative share may lower it (under the equal split the least share, −0.9, leaves 0.1)
_MIN_WEIGHT = 0.1
# kinks and segment ends are located to within this relative precision
_KINK_SLACK = 1e-9


# ------------------------------------------------------------- Ψ_c: pieces and branches
def _real_roots(a2, a1, a0):
    """The real roots of ``a2 x² + a1 x + a0`` (a line where a2 is negligible)."""
    scale = max(abs(a2), abs(a1), abs(a0), 1e-300)
    if abs(a2) <= 1e-14 * scale:
        return [] if abs(a1) <= 1e-14 * scale else [-a0 / a1]
    disc = a1 * a1 - 4 * a2 * a0
    if disc < 0:
        return []
    root = math.sqrt(disc)
    # the stable pair of roots
    q = -0.5 * (a1 + math.copysign(root, a1))
    return [q / a2] + ([a0 / q] if q != 0 else [])


def branches(pieces):
    """The branches of ``Ψ = max_p q_p`` (docstring 3), ``pieces`` rows ``(A2, A1, A0)`` of
    ``q_p(η) = A2 η² + A1 η + A0``. Returns rows ``(piece, lo, hi, kink)``: each maximal
    segment ``[lo, hi]`` where one piece is the largest (widened by the kink slack), and
    each kink (``lo = hi`` its place ± slack, ``piece`` the piece on its left)."""
    P = len(pieces)
    cuts = []
    for p in range(P):
        for j in range(p + 1, P):
            cuts += _real_roots(*(pieces[p] - pieces[j]))
    cuts = sorted(x for x in cuts if math.isfinite(x))

    def top(x):
        return int(np.argmax(pieces @ np.array([x * x, x, 1.0])))

    if not cuts:
        return [(top(0.0), -math.inf, math.inf, False)]
    probes = [cuts[0] - 1 - abs(cuts[0])] + [0.5 * (l + r) for l, r in zip(cuts, cuts[1:])] \
        + [cuts[-1] + 1 + abs(cuts[-1])]
    runs = []                     # (piece, left end) of each maximal run
    for k, x in enumerate(probes):
        p = top(x)
        if not runs or runs[-1][0] != p:
            runs.append((p, -math.inf if k == 0 else cuts[k - 1]))
    out = []
    for k, (p, left) in enumerate(runs):
        right = runs[k + 1][1] if k + 1 < len(runs) else math.inf
        out.append((p, left - _KINK_SLACK * (1 + abs(left)),
                    right + _KINK_SLACK * (1 + abs(right)), False))
        if k + 1 < len(runs):
            out.append((p, right - _KINK_SLACK * (1 + abs(right)),
                        right + _KINK_SLACK * (1 + abs(right)), True))
    return out


def branch_arrays(pieces_per_coordinate, beta):
    """The compiled search's arrays: per coordinate c and branch j, ``kappa``, ``b``,
    ``const`` (o of the piece, or Ψ_c's least on a kink's slack interval), the ends of its
    segment in h, its piece and whether it is a kink; and the pieces' coefficients."""
    T = len(pieces_per_coordinate)
    per = [branches(np.asarray(q, float)) for q in pieces_per_coordinate]
    nb = max(len(b) for b in per)
    npieces = max(len(q) for q in pieces_per_coordinate)
    kappa, b, const = np.zeros((T, nb)), np.zeros((T, nb)), np.zeros((T, nb))
    h_lo, h_hi = np.zeros((T, nb)), np.zeros((T, nb))
    piece, kink = np.zeros((T, nb), np.int64), np.zeros((T, nb), np.bool_)
    coef = np.zeros((T, npieces, 3))
    n_branch, n_piece = np.zeros(T, np.int64), np.zeros(T, np.int64)
    for c, (q, brs) in enumerate(zip(pieces_per_coordinate, per)):
        q = np.asarray(q, float)
        coef[c, :len(q)] = q
        n_piece[c], n_branch[c] = len(q), len(brs)
        for j, (p, lo, hi, is_kink) in enumerate(brs):
            a2, a1, a0 = q[p]
            piece[c, j], kink[c, j], h_lo[c, j], h_hi[c, j] = p, is_kink, lo, hi
            if is_kink:
                x = 0.5 * (lo + hi)
                # Ψ's least on [lo, hi]: its value at the kink less its largest slope there
                # times the slack, less the quadratic's rise
                vals = q @ np.array([x * x, x, 1.0])
                slope = np.max(np.abs(2 * q[:, 0] * x + q[:, 1]))
                half = 0.5 * (hi - lo)
                const[c, j] = np.max(vals) - slope * half - np.max(q[:, 0]) * half * half
                const[c, j] -= 1e-12 * (1 + abs(const[c, j]))
                b[c, j] = beta * x
            else:
                z = -a1 / (2 * a2)
                kappa[c, j], b[c, j] = beta * beta / a2, beta * z
                const[c, j] = a0 - a1 * a1 / (4 * a2)
    return kappa, b, const, h_lo, h_hi, piece, kink, n_branch, coef, n_piece


# ------------------------------------------------------------------- the compiled search
@_jit
def _star_value(h, coef, n_piece, yrow, beta, A):
    """``Φ̃(h) = Σ_c max_p q_cp(h_c) + ‖softmax(βh) − y‖²`` (A: scratch of T)."""
    T = yrow.shape[0]
    val = 0.0
    for c in range(T):
        best = -math.inf
        for p in range(n_piece[c]):
            best = max(best, (coef[c, p, 0] * h[c] + coef[c, p, 1]) * h[c] + coef[c, p, 2])
        val += best
        A[c] = beta * h[c]
    softmax_inplace(A)
    for c in range(T):
        val += (A[c] - yrow[c]) ** 2
    return val


@_jit
def _coordinate_branches(c, m_lo, m_hi, g_lo, g_hi, lo_v, hi_v, yrow, beta, kappa, b, h_lo,
                         h_hi, kink, n_branch, prec, cuts, tmp, ivs, tags):
    """Coordinate c's set on a (μ, g) box within its bracket ``[lo_v, hi_v]`` of v: the
    union over its branches (docstring 3), to ``ivs[c]``, each interval's branch to
    ``tags[c]``; returns their number."""
    k = 0
    for j in range(n_branch[c]):
        # v = βh + μ on the branch's segment, outward for rounding
        lo = beta * h_lo[c, j] + m_lo
        hi = beta * h_hi[c, j] + m_hi
        lo = max(lo_v, lo - 1e-12 * (1 + abs(lo)))
        hi = min(hi_v, hi + 1e-12 * (1 + abs(hi)))
        if lo > hi:
            continue
        if kink[c, j]:
            ivs[c, k, 0], ivs[c, k, 1], tags[c, k] = lo, hi, j
            k += 1
            continue
        eps = 1e-12 * (1 + abs(b[c, j] + m_lo) + abs(b[c, j] + m_hi) + kappa[c, j])
        n = _coordinate_set(lo, hi, kappa[c, j], yrow[c], g_lo, g_hi, b[c, j] + m_lo - eps,
                            b[c, j] + m_hi + eps, prec + 1e-13 * (1 + abs(lo) + abs(hi)),
                            cuts, tmp)
        for i in range(n):
            ivs[c, k, 0], ivs[c, k, 1], tags[c, k] = tmp[i, 0], tmp[i, 1], j
            k += 1
    return k


@_jit
def search_star(stack, top, yrow, beta, kappa, b, const, h_lo, h_hi, piece, kink, n_branch,
                coef, n_piece, target, has_box, Xlo, Xhi, budget):
    """The branch and bound of docstring 3 from the boxes ``stack[:top]`` (μ, g, then each
    v_c's bracket): every stationary point of Φ̃ with V below ``target``, outside the found
    point's box ``[Xlo, Xhi]`` of the pieces 0 (``has_box``), is ruled out. Returns
    ``(code, f, n_split, point)``: CERTIFIED, BUDGET, or NONCONVEX with ``point`` a point
    below the target and ``f`` its value."""
    T = yrow.shape[0]
    n = T + 2
    nb = kappa.shape[1]
    kappa_top = np.zeros(T)
    for c in range(T):
        for j in range(n_branch[c]):
            kappa_top[c] = max(kappa_top[c], kappa[c, j])
    kappa_max = np.max(kappa_top)
    work = np.empty((7, n, n))
    xk, rk, Kc, Kr = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    kc, bc, bs = np.empty(T), np.empty(T), np.empty(T)
    point, A = np.empty(T), np.empty(T)
    cuts, tmp = np.empty(18), np.empty((5, 2))
    ivs = np.empty((T, 5 * nb, 2))
    tags = np.empty((T, 5 * nb), np.int64)
    nc = np.empty(T, np.int64)
    lo_v, hi_v, keep = np.empty(T), np.empty(T), np.empty(4)
    n_split = 0
    while top > 0:
        top -= 1
        m_lo, m_hi, g_lo, g_hi = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        prec_f = _ROOT_PRECISION * ((m_hi - m_lo) + kappa_max * (g_hi - g_lo))
        n_comb = 1
        for c in range(T):
            nc[c] = _coordinate_branches(c, m_lo, m_hi, g_lo, g_hi, stack[top, 4 + 2 * c],
                                         stack[top, 5 + 2 * c], yrow, beta, kappa, b, h_lo,
                                         h_hi, kink, n_branch, prec_f, cuts, tmp, ivs, tags)
            n_comb *= nc[c]
            if n_comb == 0:
                break
        if n_comb == 0:
            continue
        settled = n_comb <= _MAX_COMBINATIONS
        _reset_keep(keep, settled, m_lo, m_hi, g_lo, g_hi)
        for comb in range(n_comb if settled else 0):
            r = comb
            total, found = 0.0, True
            for c in range(T):
                i = r % nc[c]
                r //= nc[c]
                j = tags[c, i]
                xk[c] = 0.5 * (ivs[c, i, 0] + ivs[c, i, 1])
                rk[c] = 0.5 * (ivs[c, i, 1] - ivs[c, i, 0])
                kc[c], bc[c] = kappa[c, j], b[c, j]
                # a kink's place is known to its slack: b within ± β times its half-width
                bs[c] = 0.5 * beta * (h_hi[c, j] - h_lo[c, j]) if kink[c, j] else 0.0
                total += const[c, j]
                found = found and piece[c, j] == 0 and not kink[c, j]
            xk[T], rk[T] = 0.5 * (m_lo + m_hi), 0.5 * (m_hi - m_lo)
            xk[T + 1], rk[T + 1] = 0.5 * (g_lo + g_hi), 0.5 * (g_hi - g_lo)
            if not _contract(xk, rk, yrow, 1e-12 * T):
                continue
            if _value_floor(xk, rk, kc, yrow, total) >= target:
                continue
            if _krawczyk_drops(xk, rk, kc, yrow, bc, total, target, has_box and found, Xlo,
                               Xhi, Kc, Kr, work, bs):
                continue
            settled = False
            # the combination's candidate: h_c = (b_c − κ_c r_c)/β at the box's centre
            g = xk[T + 1]
            for c in range(T):
                u = math.exp(xk[c])
                point[c] = (bc[c] - kc[c] * u * (u - yrow[c] - g)) / beta
            f = _star_value(point, coef, n_piece, yrow, beta, A)
            if f < target:
                return NONCONVEX, f, n_split, point
            _widen(keep, xk, rk)
        if settled:
            continue
        n_split += 1
        m_lo, m_hi, g_lo, g_hi, w_m, w_g = _kept_box(keep, m_lo, m_hi, g_lo, g_hi)
        if _out_of_room(n_split, budget, top, stack, m_lo, m_hi, g_lo, g_hi):
            return BUDGET, 0.0, n_split, point
        for c in range(T):        # the children's brackets: the hull of what survived
            lo_v[c], hi_v[c] = math.inf, -math.inf
            for i in range(nc[c]):
                lo_v[c], hi_v[c] = min(lo_v[c], ivs[c, i, 0]), max(hi_v[c], ivs[c, i, 1])
        top = _push_children(stack, top, m_lo, m_hi, g_lo, g_hi, w_m, w_g, lo_v, hi_v,
                             kappa_top)
    return CERTIFIED, 0.0, n_split, point


def star_bound(pieces_per_coordinate, u_star, yrow, beta, tol, budget):
    """Prove ``Φ̃ ≥ Φ̃(u*) − tol`` on all of R^T (docstrings 3, 4), where piece 0 of every
    coordinate is the largest at ``u*_c`` and ``u*`` is stationary for them.

    Returns ``(code, n_split, point, excess)``: CERTIFIED, BUDGET, or NONCONVEX with a
    point below the target and its ``excess`` (< 0) over ``Φ̃(u*)``."""
    T = yrow.shape[0]
    arrays = branch_arrays(pieces_per_coordinate, beta)
    kappa, b, const, h_lo, h_hi, piece, kink, n_branch, coef, n_piece = arrays
    A = np.empty(T)
    f_star = _star_value(u_star, coef, n_piece, yrow, beta, A)
    target = f_star - tol
    # the found pieces' quadratics: weights, centres and least values (docstring 4)
    q0 = np.array([q[0] for q in pieces_per_coordinate], float)
    if np.any(np.asarray([np.min(np.asarray(q)[:, 0]) for q in pieces_per_coordinate]) <= 0):
        raise ValueError("every piece of the star bound needs a positive weight")
    w0, z0 = q0[:, 0], -q0[:, 1] / (2 * q0[:, 0])
    o0 = q0[:, 2] - q0[:, 1] ** 2 / (4 * q0[:, 0])
    R2 = f_star - o0.sum()
    if R2 <= 0:
        return CERTIFIED, 0, u_star.copy(), 0.0
    spread = beta * math.sqrt(R2) / np.sqrt(w0)
    b0, k0 = beta * z0, beta * beta / w0
    stack = np.empty((256, 4 + 2 * T))
    mu_lo, mu_hi = -_log_sum_exp(b0 + spread), -_log_sum_exp(b0 - spread)
    _domain(stack, mu_lo, mu_hi, b0, spread, yrow, A)
    Xlo, Xhi = np.empty(T + 2), np.empty(T + 2)
    has_box = _found_point_excluded(u_star, k0, b0, yrow, beta, o0.sum(), target, Xlo, Xhi)
    top = _split_around(stack, Xlo[T], Xhi[T], Xlo[T + 1], Xhi[T + 1]) if has_box else 1
    code, f, n_split, point = search_star(stack, top, yrow, beta, kappa, b, const, h_lo, h_hi,
                                          piece, kink, n_branch, coef, n_piece, target,
                                          has_box, Xlo, Xhi, budget)
    return code, n_split, point.copy(), (f - f_star if code == NONCONVEX else 0.0)


# ------------------------------------------------------------------ the column rows' pieces
def _row_problem(H0_row, nu, w):
    """The centre and offset of a weighted row ``Σ w (h − H0)² + νᵀh + ℓ``
    (:func:`._certify_split._weighted_value`)."""
    return H0_row - nu / (2 * w), float(np.sum(nu * H0_row - nu ** 2 / (4 * w)))


class _Column:
    """Row c of the star of row a (docstring 2): its relaxed problem under the split
    ``Wsplit`` (:func:`._certify_split._split_weights`) and its certified minorants of
    ψ_c, as quadratics of u_c with row a's own quadratic on that entry added: ``pieces``
    rows ``(A2, A1, A0)``, the tangent first."""

    def __init__(self, H, H0, L, y, Wsplit, beta, a, c, tol, budget):
        # W: row c's weight on entry a; W_own: row a's on entry c (their sum is 1/(2Σ))
        self.W, self.W_own = Wsplit[c, a], Wsplit[a, c]
        self.a, self.tol, self.budget, self.beta = a, tol, budget, beta
        self.H_row, self.H0_row, self.y_row = H[c].copy(), H0[c].copy(), y[c]
        self.nu = _multipliers(H, H0, L, Wsplit, c)
        self.w = Wsplit[c].copy()
        self.centre, self.offset = _row_problem(self.H0_row, self.nu, self.w)
        self.found = _weighted_value(self.H_row, self.centre, self.offset, self.w, y[c], beta,
                                     np.empty(y.shape[0]))
        self.pieces, self.start = np.empty((0, 3)), self.H_row

    def tangent(self, shares=SHARES):
        """The tangent quadratic with the largest share that proves; False where none."""
        W, V, a = self.W, self.W_own, self.a
        H, H0 = self.H_row[a], self.H0_row[a]
        for share in shares:
            k = share * W
            if V + k < (_MIN_WEIGHT - 1e-9) * V:
                continue    # the piece must stay convex (docstring 3), by a margin
            w_k, h0_k = self.w.copy(), self.H0_row.copy()
            w_k[a] = W - k
            h0_k[a] = (W * H0 - k * H) / (W - k)
            if _row_dual_weighted(self.H_row.copy(), h0_k, self.nu, w_k, self.y_row,
                                  self.beta, self.tol, self.budget)[0] == CERTIFIED:
                self.pieces = np.array([[V + k, -2 * V * H0 - self.nu[a] - 2 * k * H,
                                         V * H0 ** 2 + k * H ** 2 + self.found - self.tol]])
                return True
        return False

    def line(self, lam):
        """The line of slope ``λ − ν_ca`` below ψ_c (docstring 2), as a piece, lowered to
        lie ``tol`` below the tangent at ``H_ac``; None where its least is not proved."""
        V, a, beta, y = self.W_own, self.a, self.beta, self.y_row
        nu = self.nu.copy()
        nu[a] -= lam
        centre, offset = _row_problem(self.H0_row, nu, self.w)
        best, f_best = None, math.inf
        for h0 in (self.start, self.H_row):
            h, f = _descend_row(h0, centre, offset, self.w, y, beta)
            if f < f_best:
                best, f_best = h, f
        for _ in range(2):    # a point below it: descend from there and prove again
            code, _, point, _ = _row_dual_weighted(best.copy(), self.H0_row, nu, self.w, y,
                                                   beta, self.tol, self.budget)
            if code != NONCONVEX:
                break
            best, f_best = _descend_row(point, centre, offset, self.w, y, beta)
        if code != CERTIFIED:
            return None
        self.start = best
        H, H0 = self.H_row[a], self.H0_row[a]
        slope = lam - self.nu[a]
        top = self.pieces[0] @ np.array([H ** 2, H, 1.0])
        m = min(f_best - self.tol, top - self.tol - V * (H - H0) ** 2 - slope * H)
        return np.array([V, -2 * V * H0 + slope, V * H0 ** 2 + m])

    def slope_at(self, eta):
        """``λ`` of the line tangent to ψ_c at η: ``∂φ_c/∂h_a`` at row c's least with
        ``h_a`` held at η (held by a weight 1e6 times W there; an approximation, which
        changes only how tight the line is)."""
        a, beta, y = self.a, self.beta, self.y_row
        w, centre = self.w.copy(), self.centre.copy()
        w[a], centre[a] = 1e6 * self.W, eta
        h0 = self.H_row.copy()
        h0[a] = eta
        h, _ = _descend_row(h0, centre, 0.0, w, y, beta)
        e = np.exp(beta * (h - h.max()))
        e /= e.sum()
        g = e @ (e - y)
        return 2 * self.W * (h[a] - self.centre[a]) + 2 * beta * e[a] * (e[a] - y[a] - g)


def _prune(pieces, lift):
    """The pieces less the lines that lift Ψ by less than ``lift`` anywhere (the one that
    lifts least first, until none is left below): each adds branches to every box of the
    search, and a line that barely shows cannot close a gap (dropping one stays sound)."""
    while len(pieces) > 1:
        lifts = np.full(len(pieces), -math.inf)    # each line's largest lift
        for p, lo, hi, kink in branches(pieces):
            if p == 0 or kink:
                continue
            grid = np.linspace(max(lo, -1e6), min(hi, 1e6), 33)
            values = pieces @ np.stack([grid ** 2, grid, np.ones_like(grid)])
            others = np.delete(values, p, axis=0).max(axis=0)
            lifts[p] = max(lifts[p], np.max(values[p] - others))
        lifts[0] = math.inf
        worst = int(np.argmin(lifts))
        if lifts[worst] >= lift:
            break
        pieces = np.delete(pieces, worst, axis=0)
    return pieces


def certify_star(H, H0, L, y, Wsplit, beta, a, low, excess, tol, budget):
    """Certify the sample whose rows H, H0, L (:func:`._certify_dual.found_rows`) fail the
    row-wise bound under the split ``Wsplit`` in row a (the others may fail too), with row
    a's lower point ``low`` and its ``excess`` (< 0) over the found row, by the star bound
    (module docstring). Where the search shows a point below the found value, each column
    row gets the line tangent to its response there and the search runs again (up to
    ``_REFINE`` times). Returns True where ``F ≥ F(x) − tol`` is proved."""
    T = y.shape[0]
    columns = {}
    for c in range(T):
        if c == a:
            continue
        col = columns[c] = _Column(H, H0, L, y, Wsplit, beta, a, c, tol / T, budget)
        if not col.tangent():
            return False
        lines = [col.line(t * 2 * Wsplit[a, c] * (low[c] - H[a, c])) for t in SLOPES]
        col.pieces = _prune(np.vstack([col.pieces] + [q for q in lines if q is not None]),
                            _LIFT * abs(excess))
    W = Wsplit[a, a]
    own = np.array([[W, -2 * W * H0[a, a], W * H0[a, a] ** 2]])
    for rounds in range(_REFINE + 1):
        pieces = [own if c == a else columns[c].pieces for c in range(T)]
        code, _, point, below = star_bound(pieces, H[a].copy(), y[a], beta, tol / T, budget)
        if code != NONCONVEX or rounds == _REFINE or below < _REFINE_BELOW * excess:
            return code == CERTIFIED
        for c, col in columns.items():
            q = col.line(col.slope_at(point[c]))
            if q is not None:
                col.pieces = np.vstack([col.pieces, q])
    return False


def certify_sample(x, omega, y, s, B, index, scale, beta, tol, budget,
                   max_rounds=MAX_ROUNDS, min_share=MIN_SHARE, star=True,
                   star_rounds=STAR_SPLIT_ROUNDS):
    """Certify ``x`` global for one T ≥ 3 sample: the split search of
    :func:`._certify_split.certify_by_split`, then, where every split fails and the equal
    split failed in at most ``_MAX_CENTRES`` rows, the star bound around each of them in
    turn, the largest gap first (``star``; module docstring): under the equal split, then,
    where several rows failed, under a split where every row but the star's holds (the
    split search with that row left out, docstring 5).

    Returns ``(certified, rounds)``: True where ``F ≥ F(x) − tol`` is proved everywhere;
    ``rounds`` the splits tried."""
    rows = found_rows(x, omega, y, s, B, index, scale, beta)
    ok, rounds, first, _ = split_search(*rows, y, s, beta, tol, budget, max_rounds,
                                        min_share)
    if ok or not star or first is None:
        return ok, rounds
    codes, points, excesses = first
    failed = np.flatnonzero(codes != CERTIFIED)
    if failed.size > _MAX_CENTRES or np.any(codes[failed] != NONCONVEX):
        return False, rounds
    T = y.shape[0]
    H, H0, L = rows
    equal = np.full((T, T), 0.25 / s)
    centres = failed[np.argsort(excesses[failed])]      # the largest gap first
    for a in centres:
        low, excess = _descend(points[a], excesses[a], a, H, H0, L, equal, y[a], beta)
        if certify_star(H, H0, L, y, equal, beta, a, low, excess, tol, budget):
            return True, rounds
    for a in centres if failed.size > 1 and star_rounds > 0 else ():
        held, n, _, (theta, codes, points, excesses) = split_search(
            *rows, y, s, beta, tol, budget, star_rounds, min_share, ignore=a)
        rounds += n
        if held and codes[a] == CERTIFIED:         # every row holds under that split
            return True, rounds
        if not held or codes[a] != NONCONVEX:
            continue
        split = _split_weights(theta, s, T)
        low, excess = _descend(points[a], excesses[a], a, H, H0, L, split, y[a], beta)
        if certify_star(H, H0, L, y, split, beta, a, low, excess, tol, budget):
            return True, rounds
    return False, rounds


def certify_nodes(x, omega, y, sigma, B, index, scale, beta, tol, budget, rounds, nodes,
                  n_threads=1, min_share=MIN_SHARE, star=True,
                  star_rounds=STAR_SPLIT_ROUNDS):
    """:func:`certify_sample` at the samples ``nodes`` (rows of x, omega, y, sigma);
    returns their certified mask. On ``n_threads`` threads: the compiled row bounds run
    without the GIL, and each sample's search is independent of the others."""
    def one(n):
        return certify_sample(x[n], omega[n], y[n], sigma[n], B, index, scale, beta, tol,
                              budget, rounds, min_share, star, star_rounds)[0]
    if n_threads <= 1 or len(nodes) < 2 * n_threads:
        return np.array([one(n) for n in nodes], dtype=bool)
    with ThreadPoolExecutor(n_threads) as pool:
        return np.array(list(pool.map(one, nodes)), dtype=bool)
