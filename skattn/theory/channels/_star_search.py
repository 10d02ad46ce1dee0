"""The compiled search of the star bound (:mod:`._certify_star`): prove ``Φ̃(u) =
ℓ_a(u) + Σ_c Ψ_c(u_c) ≥ Φ̃(u*) − tol`` on Φ̃'s domain, where ``ℓ_a(u) = ‖softmax(βu) −
y‖²`` and each ``Ψ_c(η)`` is the largest of the quadratics ``q_cp(η) = w_p (η − z_p)² +
o_p`` *valid* at η (each piece on a closed interval, all of R by default; no piece valid:
outside the domain).

1. *Branches.* Ψ_c's line is cut into maximal segments where one piece is the largest,
   and their ends inside the domain, the *kinks* (:func:`branches`). Every point of the
   domain lies on a segment whose piece is at most Ψ_c there, so Φ̃ is at least the
   smooth function of those pieces on each product of segments, whose least value is at
   a stationary point inside or at an end: a segment end is a kink, ``u_c`` held there.
   Ψ_c need not be convex (pieces valid on intervals make it jump down at their ends),
   and a piece valid on a bounded interval may be concave (``w_p < 0``): the domain stays
   bounded in that coordinate.
2. *Stationary points.* On a segment of piece p, Φ̃'s stationary points solve the row
   system of :mod:`._certify_dual` (docstring 2) with ``κ_c = β²/w_p`` (negative for a
   concave piece: F_c then increases in g, and the value floor takes the largest of
   ``u² r²``) and ``b_c = βz_p``; at a kink η_k, ``u_c = η_k``: ``v_c = βη_k + μ``, κ_c =
   0. There ``Φ̃ = V = Σ_c (κ_c r_c² + o_c) + ‖s − y‖²`` (``o_c`` the least of its two
   sides' pieces at a kink). The branch and bound over (μ, g) boxes is that of
   :func:`._certify_dual._search`, with each coordinate's set a union over its branches
   (each piece within ``v ∈ β·segment + μ``, and the kinks), every combination tested
   with its own κ, b and constant. The combinations are walked depth first and pruned
   on the tests that are sums over the coordinates (the value floor, ``Σ u = 1``, ``Σ
   u(u − y) = g``); where too many remain, the coordinate with the most intervals is
   split between two groups of them, or else the (μ, g) box. Kinks are located to within
   a relative 1e-9 and enter with that slack: in the Krawczyk test as an interval of
   ``b_c`` (the residual's bound grows by β times the half-width), in the value floor
   through the least of the pieces on it.
3. *Domain and found point.* A quadratic of positive weight below Ψ_c (the tangent of
   :mod:`._certify_star`) per coordinate, or the hull of a bounded coordinate's
   intervals: every u with ``Φ̃(u) < Φ̃(u*)`` lies in that ellipsoid times box, the first
   box of the search. The found point is a stationary point of the pieces 0 (the largest
   at ``u*``), excluded by its Krawczyk box.

Soundness tests: tests/theory/test_certify_star.py.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._certify_dual import (_ROOT_PRECISION, _contract_from_ends, _coordinate_set,
                            _distance_to_zero, _domain, _hull_full, _interval_ends,
                            _krawczyk_rest, _log_sum_exp, _reset_keep, _split_around,
                            _split_kept, _value_floor, _widen)
from ._certify_rows import BUDGET, CERTIFIED, NONCONVEX
from ._certify_split import _found_point_excluded
from ._kernels import _jit, hold_references, softmax_inplace
from ._stationarity import _krawczyk_centre, _krawczyk_image

# kinks and segment ends are located to within this relative precision
_KINK_SLACK = 1e-9
# the search's stack of (μ, g) boxes
_STACK = 256
# a box's surviving combinations of the coordinates' intervals (after the separable tests
# of _combinations) are tested one by one up to this many; more: the box is split (the
# measurements: docs: Validation report, "Local pieces of the star")
_STAR_COMBINATIONS = 4096


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


def _valid(pieces, valid):
    """Each piece's interval of validity, ``(lo, hi)`` rows (all of R where ``valid`` is
    None)."""
    if valid is None:
        return np.tile([-math.inf, math.inf], (len(pieces), 1))
    return np.asarray(valid, float).reshape(len(pieces), 2)


def _tops(pieces, ranges, xs):
    """The largest valid piece at each of the points ``xs`` (−1 where none is valid); a
    tie (pieces tangent there, or rounding) goes to the most curved: the largest on both
    sides of a point where pieces touch, so that no kink is made there."""
    on = (ranges[:, :1] <= xs) & (xs <= ranges[:, 1:])
    values = np.where(on, pieces @ np.stack([xs * xs, xs, np.ones_like(xs)]), -math.inf)
    best = values.max(axis=0)
    ties = values >= best - 1e-12 * (1 + np.abs(best))
    tops = np.argmax(np.where(ties, pieces[:, :1], -math.inf), axis=0)
    tops[~on.any(axis=0)] = -1
    return tops


def branches(pieces, valid=None):
    """The branches of ``Ψ(η) = max q_p(η)`` over the pieces valid at η (docstring 3),
    ``pieces`` rows ``(A2, A1, A0)`` of ``q_p(η) = A2 η² + A1 η + A0``, ``valid`` rows
    ``(lo, hi)`` of their closed intervals of validity (all of R where None; no piece
    valid: outside the domain). Returns rows ``(piece, lo, hi, kink, right)``: each
    maximal segment ``[lo, hi]`` where one piece is the largest (widened by the kink
    slack), and each end of a segment inside the domain, a *kink* (``lo = hi`` its place
    ± slack, ``piece`` and ``right`` the pieces on its two sides, −1 where the domain
    ends). Every point of the domain lies on a segment whose piece is at most Ψ there
    (at a validity end, Ψ is the larger of its two sides), so Φ̃'s least value is at a
    stationary point of a segment's piece or at a kink."""
    ranges = _valid(pieces, valid)
    P = len(pieces)
    cuts = [x for lo, hi in ranges for x in (lo, hi) if math.isfinite(x)]
    for p in range(P):
        for j in range(p + 1, P):
            a2, a1, a0 = pieces[p] - pieces[j]
            # two pieces tangent to each other (the local ones at the found point) touch
            # at one point, a cut of its own: not two that rounding split around it
            if abs(a1 * a1 - 4 * a2 * a0) > 1e-9 * (a1 * a1 + abs(4 * a2 * a0)):
                cuts += _real_roots(a2, a1, a0)
            elif a2 != 0:
                cuts.append(-a1 / (2 * a2))
    cuts = sorted(set(x for x in cuts if math.isfinite(x)))

    if not cuts:
        p = int(_tops(pieces, ranges, np.zeros(1))[0])
        return [] if p < 0 else [(p, -math.inf, math.inf, False, -1)]
    probes = [cuts[0] - 1 - abs(cuts[0])] + [0.5 * (l + r) for l, r in zip(cuts, cuts[1:])] \
        + [cuts[-1] + 1 + abs(cuts[-1])]
    tops = _tops(pieces, ranges, np.array(probes))
    runs = []                     # (piece, left end) of each maximal run
    for k, p in enumerate(tops.tolist()):
        if not runs or runs[-1][0] != p:
            runs.append((p, -math.inf if k == 0 else cuts[k - 1]))
    out = []

    def slack(x):
        return _KINK_SLACK * (1 + abs(x))

    for k, (p, left) in enumerate(runs):
        right = runs[k + 1][1] if k + 1 < len(runs) else math.inf
        if p >= 0:
            out.append((p, left - slack(left), right + slack(right), False, -1))
        if k + 1 < len(runs) and (p >= 0 or runs[k + 1][0] >= 0):
            out.append((p, right - slack(right), right + slack(right), True, runs[k + 1][0]))
    return out


def _cached_branches(pieces, valid):
    """:func:`branches`, remembered by the pieces' and intervals' values: the double star
    and the star's rounds search one row many times with most coordinates unchanged."""
    ranges = None if valid is None else _valid(pieces, valid)
    return _branches_by_value(pieces.shape[0], pieces.tobytes(),
                              None if ranges is None else ranges.tobytes())


@functools.lru_cache(maxsize=4096)
def _branches_by_value(n_pieces, pieces, ranges):
    """:func:`branches` of the pieces and intervals given by their bytes (a tuple: the
    cache hands the same one to every caller)."""
    return tuple(branches(np.frombuffer(pieces).reshape(n_pieces, 3),
                          None if ranges is None else
                          np.frombuffer(ranges).reshape(n_pieces, 2)))


def branch_arrays(pieces_per_coordinate, beta, valid_per_coordinate=None):
    """The compiled search's arrays: per coordinate c and branch j, ``kappa``, ``b``,
    ``const`` (o of the piece, or the least of its two sides' pieces on a kink's slack
    interval), the ends of its segment in h, its piece and whether it is a kink; and the
    pieces' coefficients with their intervals of validity (``coef[c, p]`` = A2, A1, A0,
    lo, hi). A concave piece (A2 < 0, on a bounded interval) has κ < 0."""
    T = len(pieces_per_coordinate)
    if valid_per_coordinate is None:
        valid_per_coordinate = [None] * T
    per = [_cached_branches(np.asarray(q, float), v)
           for q, v in zip(pieces_per_coordinate, valid_per_coordinate)]
    nb = max(len(b) for b in per)
    npieces = max(len(q) for q in pieces_per_coordinate)
    kappa, b, const = np.zeros((T, nb)), np.zeros((T, nb)), np.zeros((T, nb))
    h_lo, h_hi = np.zeros((T, nb)), np.zeros((T, nb))
    piece, kink = np.zeros((T, nb), np.int64), np.zeros((T, nb), np.bool_)
    coef = np.zeros((T, npieces, 5))
    n_branch, n_piece = np.zeros(T, np.int64), np.zeros(T, np.int64)
    for c, (q, v, brs) in enumerate(zip(pieces_per_coordinate, valid_per_coordinate, per)):
        q = np.asarray(q, float)
        coef[c, :len(q), :3] = q
        coef[c, :len(q), 3:] = _valid(q, v)
        n_piece[c], n_branch[c] = len(q), len(brs)
        for j, (p, lo, hi, is_kink, right) in enumerate(brs):
            piece[c, j], kink[c, j], h_lo[c, j], h_hi[c, j] = p, is_kink, lo, hi
            if is_kink:
                x, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
                # the least on [lo, hi] of either side's piece: its value at the kink less
                # its slope there times the slack, less its curvature's part
                least = math.inf
                for side in (p, right):
                    if side >= 0:
                        a2, a1, a0 = q[side]
                        least = min(least, (a2 * x + a1) * x + a0 - abs(2 * a2 * x + a1) * half
                                    - abs(a2) * half * half)
                const[c, j] = least - 1e-12 * (1 + abs(least))
                b[c, j] = beta * x
            else:
                a2, a1, a0 = q[p]
                z = -a1 / (2 * a2)
                kappa[c, j], b[c, j] = beta * beta / a2, beta * z
                const[c, j] = a0 - a1 * a1 / (4 * a2)
    return kappa, b, const, h_lo, h_hi, piece, kink, n_branch, coef, n_piece


# ------------------------------------------------------------------- the compiled search
@_jit
def _star_value(h, coef, n_piece, yrow, beta, A):
    """``Φ̃(h) = Σ_c max_p q_cp(h_c) + ‖softmax(βh) − y‖²``, each maximum over the pieces
    valid at h_c (∞ outside the domain; A: scratch of T)."""
    T = yrow.shape[0]
    val = 0.0
    for c in range(T):
        best = -math.inf
        for p in range(n_piece[c]):
            if coef[c, p, 3] <= h[c] <= coef[c, p, 4]:
                best = max(best, (coef[c, p, 0] * h[c] + coef[c, p, 1]) * h[c] + coef[c, p, 2])
        if best == -math.inf:
            return math.inf         # outside the domain
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
        eps = 1e-12 * (1 + abs(b[c, j] + m_lo) + abs(b[c, j] + m_hi) + abs(kappa[c, j]))
        n = _coordinate_set(lo, hi, kappa[c, j], yrow[c], g_lo, g_hi, b[c, j] + m_lo - eps,
                            b[c, j] + m_hi + eps, prec + 1e-13 * (1 + abs(lo) + abs(hi)),
                            cuts, tmp)
        for i in range(n):
            ivs[c, k, 0], ivs[c, k, 1], tags[c, k] = tmp[i, 0], tmp[i, 1], j
            k += 1
    return k


@_jit
def _combinations(nc, ivs, tags, const, kappa, yrow, g_lo, g_hi, target, margin, out, per,
                  rest, idx, part):
    """The combinations of the coordinates' intervals (one each) that pass the tests
    separable in the coordinates, to the rows of ``out``, by a depth-first walk that prunes
    on partial sums: ``Σ_c`` of each interval's value floor (its constant and its term of
    :func:`._certify_dual._value_floor`) below ``target``; ``Σ_c e^{lo_c} ≤ 1 + margin ≤
    Σ_c e^{hi_c} + 2 margin``; and the range of ``Σ_c u_c(u_c − y_c)`` meeting [g_lo,
    g_hi] (each a necessary condition of :func:`._certify_dual._contract`, on the
    intervals before it contracts them). Returns their number, or −1 where there are more
    than ``out`` holds. Scratch: ``per`` (5, T, ≥ the intervals of a coordinate), ``rest``
    and ``part`` (5, T + 1), ``idx`` (T, integers). It runs once per box: one return, every
    array held there and no allocation (:func:`._kernels.hold_references`)."""
    T = nc.shape[0]
    # per: each interval's value floor, e^lo, e^hi, least and greatest u(u − y); rest:
    # the suffix sums over the coordinates after c (least floor, least e^lo, greatest
    # e^hi, least and greatest u(u − y)); part: the walk's partial sums; idx: its place
    for m in range(5):
        rest[m, T], part[m, 0] = 0.0, 0.0
    for c in range(T):
        idx[c] = 0
    for c in range(T - 1, -1, -1):
        for m in range(5):          # least of each sum's term, greatest of e^hi and q_hi
            rest[m, c] = -math.inf if m in (2, 4) else math.inf
        for i in range(nc[c]):
            ul, uh = math.exp(ivs[c, i, 0]), math.exp(ivs[c, i, 1])
            k = kappa[c, tags[c, i]]
            dy = _distance_to_zero(ul - yrow[c], uh - yrow[c])
            if k >= 0:
                dr = _distance_to_zero(ul - yrow[c] - g_hi, uh - yrow[c] - g_lo)
                term = k * ul * ul * dr * dr
            else:
                dr = max(abs(ul - yrow[c] - g_hi), abs(uh - yrow[c] - g_lo))
                term = k * uh * uh * dr * dr
            um = min(max(0.5 * yrow[c], ul), uh)
            per[0, c, i] = const[c, tags[c, i]] + term + dy * dy
            per[1, c, i], per[2, c, i] = ul, uh
            per[3, c, i] = um * (um - yrow[c])
            per[4, c, i] = max(ul * (ul - yrow[c]), uh * (uh - yrow[c]))
            for m in range(5):
                rest[m, c] = max(rest[m, c], per[m, c, i]) if m in (2, 4) else \
                    min(rest[m, c], per[m, c, i])
        for m in range(5):
            rest[m, c] += rest[m, c + 1]
    # relative margins, as _value_floor's and _contract's, for the order of the sums
    slack = 1e-10 * (1 + abs(target))
    n, depth = 0, 0
    while depth >= 0:
        if idx[depth] >= nc[depth]:
            idx[depth] = 0
            depth -= 1
            if depth >= 0:
                idx[depth] += 1
            continue
        i = idx[depth]
        f = part[0, depth] + per[0, depth, i] + rest[0, depth + 1]
        lo = part[1, depth] + per[1, depth, i] + rest[1, depth + 1]
        hi = part[2, depth] + per[2, depth, i] + rest[2, depth + 1]
        q_lo = part[3, depth] + per[3, depth, i] + rest[3, depth + 1]
        q_hi = part[4, depth] + per[4, depth, i] + rest[4, depth + 1]
        if f >= target + slack or lo > 1 + margin or hi * (1 + 1e-10) < 1 - 2 * margin \
                or q_lo - 2 * margin > g_hi + 1e-10 or q_hi + 2 * margin < g_lo - 1e-10:
            idx[depth] += 1
            continue
        if depth == T - 1:
            if n >= out.shape[0]:
                n = -1
                break
            for c in range(T):
                out[n, c] = idx[c]
            n += 1
            idx[depth] += 1
            continue
        for m in range(5):
            part[m, depth + 1] = part[m, depth] + per[m, depth, i]
        depth += 1
    hold_references(nc, ivs, tags, const, kappa, yrow, out, per, rest, idx, part)
    return n


@_jit
def _group_split(stack, top, nc, ivs, m_lo, m_hi, g_lo, g_hi):
    """Push to ``stack[top:top + 2]`` the box ``(μ, g)`` with each coordinate's bracket
    the hull of its intervals ``ivs``, the coordinate with the most intervals split
    between its lower and upper half of them; False (nothing pushed) where neither
    half's hull is under 0.9 of the whole (the intervals overlap)."""
    T = nc.shape[0]
    cmax = 0
    for c in range(T):
        if nc[c] > nc[cmax]:
            cmax = c
    half = nc[cmax] // 2
    whole = ivs[cmax, nc[cmax] - 1, 1] - ivs[cmax, 0, 0]
    for child in range(2):
        for c in range(T):
            first, last = 0, nc[c] - 1
            if c == cmax:
                first, last = (0, half - 1) if child == 0 else (half, nc[c] - 1)
            lo, hi = math.inf, -math.inf
            for i in range(first, last + 1):
                lo, hi = min(lo, ivs[c, i, 0]), max(hi, ivs[c, i, 1])
            if c == cmax and hi - lo > 0.9 * whole:
                return False
            stack[top + child, 4 + 2 * c], stack[top + child, 5 + 2 * c] = lo, hi
        stack[top + child, 0], stack[top + child, 1] = m_lo, m_hi
        stack[top + child, 2], stack[top + child, 3] = g_lo, g_hi
    return True


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
            kappa_top[c] = max(kappa_top[c], abs(kappa[c, j]))
    kappa_max = np.max(kappa_top)
    work = np.empty((7, n, n))
    xk, rk, Kc, Kr = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    kc, bc, bs = np.empty(T), np.empty(T), np.empty(T)
    point, A = np.empty(T), np.empty(T)
    cuts, tmp = np.empty(18), np.empty((5, 2))
    ivs = np.empty((T, 5 * nb, 2))
    # e^{v ∓ r} of each interval (v ± r its centre and half-width), once per box
    ends = np.empty((T, 5 * nb, 2))
    tags = np.empty((T, 5 * nb), np.int64)
    nc = np.empty(T, np.int64)
    combos = np.empty((_STAR_COMBINATIONS, T), np.int64)
    walk_per, walk_idx = np.empty((5, T, 5 * nb)), np.empty(T, np.int64)
    walk_rest, walk_part = np.empty((5, T + 1)), np.empty((5, T + 1))
    lo_v, hi_v, keep = np.empty(T), np.empty(T), np.empty(4)
    scratch = np.empty((4, T))
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
        n_comb = _combinations(nc, ivs, tags, const, kappa, yrow, g_lo, g_hi, target,
                               1e-12 * T, combos, walk_per, walk_rest, walk_idx, walk_part)
        if n_comb == 0:
            continue
        if n_comb < 0 and top + 2 <= stack.shape[0] and _group_split(
                stack, top, nc, ivs, m_lo, m_hi, g_lo, g_hi):
            # too many combinations to test (many pieces): the coordinate with the most
            # intervals is split between two groups of them, (μ, g) kept
            top += 2
            n_split += 1
            if n_split > budget:
                return BUDGET, 0.0, n_split, point
            continue
        settled = n_comb >= 0
        if settled:
            _interval_ends(ivs, nc, ends)
        _reset_keep(keep, settled, m_lo, m_hi, g_lo, g_hi)
        for comb in range(n_comb if settled else 0):
            total, found = 0.0, True
            for c in range(T):
                i = combos[comb, c]
                j = tags[c, i]
                xk[c] = 0.5 * (ivs[c, i, 0] + ivs[c, i, 1])
                rk[c] = 0.5 * (ivs[c, i, 1] - ivs[c, i, 0])
                scratch[0, c], scratch[1, c] = ends[c, i, 0], ends[c, i, 1]
                kc[c], bc[c] = kappa[c, j], b[c, j]
                # a kink's place is known to its slack: b within ± β times its half-width
                bs[c] = 0.5 * beta * (h_hi[c, j] - h_lo[c, j]) if kink[c, j] else 0.0
                total += const[c, j]
                found = found and piece[c, j] == 0 and not kink[c, j]
            xk[T], rk[T] = 0.5 * (m_lo + m_hi), 0.5 * (m_hi - m_lo)
            xk[T + 1], rk[T + 1] = 0.5 * (g_lo + g_hi), 0.5 * (g_hi - g_lo)
            # as in _certify_dual._search, kept inline: a helper that called these
            # tests would take references to its arrays per combination (see
            # _krawczyk_rest)
            if not _contract_from_ends(xk, rk, yrow, 1e-12 * T, scratch):
                continue
            if _value_floor(xk, rk, kc, yrow, total, scratch) >= target:
                continue
            # the Krawczyk test in its parts (_certify_dual._krawczyk_rest); the found
            # box's flag first: an "and" among the arguments splits the call's block,
            # and numba then takes references to the arrays passed before it
            in_found_box = has_box and found
            if _krawczyk_centre(xk, kc, yrow, bc, bs, work):
                if _krawczyk_image(xk, rk, kc, yrow, Kc, Kr, work, True, scratch):
                    continue        # no stationary point in this combination's box
                if _krawczyk_rest(xk, rk, kc, yrow, total, target, in_found_box, Xlo, Xhi,
                                  Kc, Kr, scratch):
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
            if _hull_full(keep, m_lo, m_hi, g_lo, g_hi):
                break
        if settled:
            continue
        n_split += 1
        top = _split_kept(stack, top, keep, m_lo, m_hi, g_lo, g_hi, nc, ivs, lo_v, hi_v,
                          kappa_top, n_split, budget)
        if top < 0:
            return BUDGET, 0.0, n_split, point
    return CERTIFIED, 0.0, n_split, point


def star_bound(pieces_per_coordinate, u_star, yrow, beta, tol, budget, valid=None,
               domain=None, target=None):
    """Prove ``Φ̃ ≥ Φ̃(u*) − tol`` on its domain (docstrings 3, 4), where piece 0 of every
    coordinate is the largest at ``u*_c`` and ``u*`` is stationary for them.

    ``valid``: per coordinate, the pieces' intervals of validity (None: all of R); a piece
    valid on an unbounded interval needs a positive weight. ``domain``: per coordinate, a
    quadratic of positive weight below Ψ_c, or None for a coordinate whose pieces are all
    valid on bounded intervals (its bracket is their hull); by default piece 0.
    ``target``: prove ``Φ̃ ≥ target`` instead, where that is lower (u* then need not be
    stationary: it only sets the domain, and its box is left out only where it holds one
    stationary point with V above the target; the intervals of
    :mod:`._certify_double`).

    Returns ``(code, n_split, point, excess)``: CERTIFIED, BUDGET, or NONCONVEX with a
    point below the target and its ``excess`` (< 0) over ``Φ̃(u*)``."""
    T = yrow.shape[0]
    valid = [None] * T if valid is None else valid
    ranges = [_valid(np.asarray(q), v) for q, v in zip(pieces_per_coordinate, valid)]
    for q, r in zip(pieces_per_coordinate, ranges):
        unbounded = ~np.all(np.isfinite(r), axis=1)
        if np.any(np.asarray(q)[unbounded, 0] <= 0):
            raise ValueError("a piece of the star bound valid on an unbounded interval "
                             "needs a positive weight")
    if domain is None:
        domain = [np.asarray(q)[0] for q in pieces_per_coordinate]
    arrays = branch_arrays(pieces_per_coordinate, beta, valid)
    kappa, b, const, h_lo, h_hi, piece, kink, n_branch, coef, n_piece = arrays
    A = np.empty(T)
    f_star = _star_value(u_star, coef, n_piece, yrow, beta, A)
    target = f_star - tol if target is None else min(target, f_star - tol)
    # the domain (docstring 4): every u below Φ̃(u*) has Σ w_c (u_c − z_c)² < R2 over the
    # coordinates with a domain quadratic, the others within their pieces' hull
    centre, spread, least = np.empty(T), np.empty(T), 0.0
    boxed = np.array([q is None for q in domain])
    for c in range(T):
        if boxed[c]:
            lo, hi = ranges[c][:, 0].min(), ranges[c][:, 1].max()
            centre[c], spread[c] = 0.5 * beta * (lo + hi), 0.5 * beta * (hi - lo)
            least += min(_least_on(q, lo_, hi_) for q, (lo_, hi_)
                         in zip(np.asarray(pieces_per_coordinate[c]), ranges[c]))
        else:
            a2, a1, a0 = domain[c]
            if a2 <= 0:
                raise ValueError("a domain quadratic of the star bound needs a positive "
                                 "weight")
            centre[c], least = -beta * a1 / (2 * a2), least + a0 - a1 * a1 / (4 * a2)
    R2 = f_star - least
    if R2 <= 0:
        return CERTIFIED, 0, u_star.copy(), 0.0
    for c in np.flatnonzero(~boxed):
        spread[c] = beta * math.sqrt(R2 / domain[c][0])
    if boxed.any():
        # _domain bounds β(h_a − h_c) by √(spread_a² + spread_c²), right for two
        # coordinates of one ellipsoid; a boxed one's spread grows so that it covers the
        # sum of the two (s² + 2sM ≥ s² + 2s s_c, M the largest spread)
        top_spread = spread.max()
        spread[boxed] = np.sqrt(spread[boxed] ** 2 + 2 * spread[boxed] * top_spread)
    # the found pieces' system (docstring 4)
    q0 = np.array([np.asarray(q)[0] for q in pieces_per_coordinate], float)
    z0 = -q0[:, 1] / (2 * q0[:, 0])
    o0 = q0[:, 2] - q0[:, 1] ** 2 / (4 * q0[:, 0])
    b0, k0 = beta * z0, beta * beta / q0[:, 0]
    stack = np.empty((_STACK, 4 + 2 * T))
    mu_lo, mu_hi = -_log_sum_exp(centre + spread), -_log_sum_exp(centre - spread)
    _domain(stack, mu_lo, mu_hi, centre, spread, yrow, A)
    Xlo, Xhi = np.empty(T + 2), np.empty(T + 2)
    has_box = _found_point_excluded(u_star, k0, b0, yrow, beta, o0.sum(), target, Xlo, Xhi)
    top = _split_around(stack, Xlo[T], Xhi[T], Xlo[T + 1], Xhi[T + 1]) if has_box else 1
    code, f, n_split, point = search_star(stack, top, yrow, beta, kappa, b, const, h_lo, h_hi,
                                          piece, kink, n_branch, coef, n_piece, target,
                                          has_box, Xlo, Xhi, budget)
    return code, n_split, point.copy(), (f - f_star if code == NONCONVEX else 0.0)


def _least_on(q, lo, hi):
    """The least of ``q(η) = A2 η² + A1 η + A0`` on [lo, hi] (bounded)."""
    a2, a1, a0 = q
    xs = [lo, hi] + ([-a1 / (2 * a2)] if a2 > 0 and lo < -a1 / (2 * a2) < hi else [])
    return min((a2 * x + a1) * x + a0 for x in xs) - 1e-12 * (1 + abs(a0))
