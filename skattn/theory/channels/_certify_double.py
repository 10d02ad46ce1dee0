"""The double star of the T ≥ 3 certificate: where the star of :mod:`._certify_star` fails,
two rows a and b are kept exact, with their shared entry t, and only the pairs between
the other rows are relaxed (``SoftmaxChannel.double_star``, on by default).

1. *The bound.* With the equal split W and the found point's multipliers ν
   (:mod:`._certify_split`, docstring 1), for a symmetric H every pair between the other
   rows (the *columns*) cancels in ``Σ_r ν_r·H_r``, so ``F(H) = A(H_a) + B(H_b) + Σ_c
   φ_c(H_c)`` with ``A(u) = Σ_e W_ae (u_e − H0_ae)² + ℓ_a(u) − Σ_c ν_ca u_c`` and B alike.
2. *The columns' tangents.* Each column row c proves, by the weighted row bound with its
   weights on entries a and b lowered by k (the largest of ``SHARES`` times W that
   proves), ``φ_c(h) ≥ φ_c(H_c) − tol_c + k_a (h_a − H_ca)² + k_b (h_b − H_cb)²`` on all
   of R^T: a minorant *separable* in the two shared entries. Its halves join A and B
   (:class:`_Row`), so that ``F ≥ Σ_c (φ_c(H_c) − tol_c) + min_t [a(t) + b(t)]``, a(t)
   the least of A with ``u_b = t`` and b(t) that of B with ``u_a = t``; at the found point
   the two sides are equal.
3. *The branch over t.* t's reach follows from the pieces' quadratics (ℓ ≥ 0). On an
   interval around the found ``t* = H_ab`` (the first of ``CENTRE_RADII`` that proves,
   with the intervals beyond it; a narrow one first, as the local pieces gathered on a
   wide one that fails crowd the search) the search of :mod:`._star_search` proves each
   row with t boxed there, from the found row, tilted by the slope ``s`` that keeps the
   found row stationary and by a curvature κ moved from the more convex row to the
   other: ``A + s t + κ (t − t*)² ≥ A(H_a) + s t* − tol/2`` and ``B − s t − κ (t −
   t*)² ≥ …``; the tilts cancel in the sum. A row alone can be concave in t where the
   sum is not: hence κ.
4. *The intervals beyond* (to the ends of the reach): a tilt s and a split α of the
   target, from estimates of the rows' least values at ``_ESTIMATE_POINTS`` points of the
   interval (Newton on the pieces active at its start, :func:`._certify_split._descend_row`;
   they set α, never whether it holds), proved with the search's explicit target: ``a(t)
   + s t ≥ α`` and ``b(t) − s t ≥ target − α``; an interval that fails is halved (at most
   ``_HALVINGS`` times). The tangents of docstring 2 are tight at the found row only:
   where the pair's estimate on an interval is below the target, each column's tangent
   is *moved* to the estimate's point p = (its entries a, b there): with ``h_p`` row c's
   least with those entries held at p and ``λ = ∂φ_c/∂h`` there on them (``h_p`` is then
   stationary for ``φ_c − λ·h − Σ_e k_e (h_e − p_e)²``), the weighted row bound proves
   ``φ_c(h) ≥ φ_c(h_p) − λ·p − tol_c + λ·h + Σ_{e=a,b} k_e (h_e − p_e)²``, again
   separable; the target of a(t) + b(t) on that interval rises by ``Σ_c (φ_c(H_c) −
   φ_c(h_p) + λ·p)`` (:class:`_Tangent`). Any separable minorant serves on each interval
   of t. Moved up to ``_RECENTRINGS`` times to the new estimate's point, until the pair's
   estimate there is at the target (else the node fails: below where the tangents
   touch, ψ itself is below); the interval is then proved or halved.
5. *Local pieces.* Where a row fails on the centre interval, its column rows get pieces
   valid on an interval of their entry only, as the star's (:mod:`._certify_star`,
   docstring 6), proved by the search on row c with that entry boxed and the other row's
   share kept, so that the minorant stays separable: ``φ_c(h) − k (h_a − H_ca)² − k_b
   (h_b − H_cb)² ≥ φ_c(H_c) − tol_c`` for ``h_a`` in the box. They stay for the intervals
   beyond. Each centre interval is tried first without them.

The columns' proofs (docstrings 2, 4, 5) are the star's, with two lowered entries
(:mod:`._certify_columns`). The bound holds with ``tol/T`` for each column and ``tol/T``
for the pair: ``F ≥ F(x) − tol``. Where one row fails, each other row is tried as its
partner. Soundness tests: tests/theory/test_certify_double.py; the measurements: docs:
Changelog, "A double star".
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._certify_columns import largest_share, prove_boxed
from ._certify_rows import CERTIFIED, NONCONVEX
from ._certify_dual import _weighted_value
from ._certify_split import (_descend_row, _multipliers, _row_problem,
                             _value_gradient_hessian, held_response)
from ._star_search import star_bound

# the columns' tangent shares of W on both shared entries, tried largest first
SHARES = (0.95, 0.8, 0.6, 0.4, 0.2, 0.0)
# the half-widths of the centre interval of t, in the order tried (docstring 3; chosen on
# T = 6 point 2's nodes: docs: Validation report, "The certificate's double star")
CENTRE_RADII = (0.05, 0.2, 0.01)
# the points of an interval beyond the centre at which the rows' least values are estimated
_ESTIMATE_POINTS = 3
# an interval beyond the centre that fails is halved at most this many times, and at most
# this many intervals are tried in all
_HALVINGS = 10
# the columns' tangents are moved to the pair's point at most this many times in a row
_RECENTRINGS = 3
# the double star's searches get this share of the certificate's budget of splits (where
# Σ is large most of its time went to searches that ran out of the whole budget and
# failed; the measurements: docs: Changelog)
_BUDGET_SHARE = 0.25
_MAX_INTERVALS = 200
# local pieces (docstring 5): their curvature, as fractions of the column's ψ''/2, and
# their box, this many times the distance to the failing search's lower point; rounds
LOCAL_FRACTIONS = (0.95, 0.8, 0.6, 0.4)
_LOCAL_RADIUS = 1.5
LOCAL_ROUNDS = 2
# a local piece's curvature keeps this fraction of W away from W (as the star's)
_LOCAL_GAP = 0.05


def _loss(u, yrow, beta):
    """``ℓ(u) = ‖softmax(βu) − y‖²`` and its gradient."""
    e = np.exp(beta * (u - u.max()))
    s = e / e.sum()
    g = s @ (s - yrow)
    return float(np.sum((s - yrow) ** 2)), 2 * beta * s * (s - yrow - g)


class _Tangent(NamedTuple):
    """A column row's separable tangent (docstrings 2, 4): ``φ_c(h) ≥ φ_c(p) − slope·p −
    tol_c + slope·h + Σ_{e=a,b} share·W_ce (h_e − p_e)²`` on all of R^T, p the row it
    touches; ``lift`` = ``φ_c(H_c) − φ_c(p) + slope·p`` (zero at the found row)."""
    share: float
    nu: np.ndarray
    touch: np.ndarray
    slope: np.ndarray
    lift: float


class _Row:
    """One of the two kept rows: its pieces per coordinate (lists of ``(piece, interval)``,
    a piece ``(A2, A1, A0)`` valid on the interval, None: all of R; the whole-line piece
    first), its shared coordinate o and found row."""

    def __init__(self, r, o, H, H0, W, tangents, columns):
        T = H.shape[0]
        self.r, self.o, self.found = r, o, H[r].copy()
        whole = np.array([[W[r, e], -2 * W[r, e] * H0[r, e], W[r, e] * H0[r, e] ** 2]
                          for e in range(T)])
        for c in columns:
            tangent = tangents[c]
            k, p = tangent.share * W[c, r], tangent.touch[r]
            whole[c] += [k, -2 * k * p - tangent.nu[r] + tangent.slope[r], k * p ** 2]
        self.pieces = [[(whole[e], None)] for e in range(T)]

    def whole(self, e):
        return self.pieces[e][0][0]

    def has_locals(self):
        return any(len(lst) > 1 for lst in self.pieces)

    def value(self, u, yrow, beta):
        """The row's Φ̃ at u (each coordinate's largest valid piece) and its gradient."""
        v, grad = _loss(u, yrow, beta)
        for e, lst in enumerate(self.pieces):
            best, top = -math.inf, None
            for q, iv in lst:
                if iv is None or iv[0] <= u[e] <= iv[1]:
                    val = q[0] * u[e] ** 2 + q[1] * u[e] + q[2]
                    if val > best:
                        best, top = val, q
            v += best
            grad[e] += 2 * top[0] * u[e] + top[1]
        return v, grad

    def least_at(self, t, yrow, beta, starts):
        """An estimate of the row's least with its shared coordinate at t: Newton on the
        pieces active at each start (then at its end, twice more), the best end."""
        T = len(self.pieces)
        best = (math.inf, None)
        for start in starts:
            u = start.copy()
            u[self.o] = t
            for _ in range(3):
                w, centre = np.empty(T), np.empty(T)
                for e, lst in enumerate(self.pieces):
                    active = [q for q, iv in lst if iv is None or iv[0] <= u[e] <= iv[1]]
                    q = max(active, key=lambda q_: q_[0] * u[e] ** 2 + q_[1] * u[e] + q_[2])
                    w[e], centre[e] = q[0], -q[1] / (2 * q[0])
                end, _ = _descend_row(u, centre, 0.0, w, yrow, beta, 1 << self.o)
                moved = np.max(np.abs(end - u))
                u = end
                if moved < 1e-12:
                    break
            v = self.value(u, yrow, beta)[0]
            if v < best[0]:
                best = (v, u)
        return best

    def prove(self, lo, hi, tilt, kappa, centre, u_star, yrow, beta, tol, budget,
              target=None):
        """The search of :mod:`._star_search` on the row with its shared coordinate boxed
        in ``[lo, hi]`` and tilted by ``tilt·t + κ (t − centre)²``."""
        pieces, valid, domain = [], [], []
        for lst in self.pieces:
            # local pieces first, the most curved first (the largest at the found row)
            ordered = sorted(lst[1:], key=lambda item: -item[0][0]) + lst[:1]
            pieces.append(np.array([q for q, _ in ordered]))
            valid.append(None if len(ordered) == 1 else
                         [iv if iv is not None else (-math.inf, math.inf)
                          for _, iv in ordered])
            domain.append(lst[0][0])
        o = self.o
        pieces[o] = pieces[o] + np.array([[kappa, tilt - 2 * kappa * centre,
                                           kappa * centre ** 2]])
        valid[o], domain[o] = [[lo, hi]], None
        return star_bound(pieces, u_star.copy(), yrow, beta, tol, budget, valid, domain,
                          target)


def _column_tangent(H, H0, L, y, W, beta, a, b, c, tol, budget, at=None):
    """Column row c's separable tangent (docstring 2) at the found row, or (``at``: its
    entries a and b) at row c's least with those entries held there (docstring 4): a
    :class:`_Tangent`, None where none proves."""
    nu = _multipliers(H, H0, L, W, c)
    T = y.shape[0]
    touch, slope, lift = H[c].copy(), np.zeros(T), 0.0
    if at is not None:
        w = W[c]
        centre, offset = _row_problem(H0[c], nu, w)
        touch[a], touch[b] = at
        touch, value = _descend_row(touch, centre, offset, w, y[c], beta,
                                    (1 << a) | (1 << b))
        grad, scratch = np.empty(T), np.empty(T)
        _value_gradient_hessian(touch, centre, offset, w, y[c], beta, grad,
                                np.empty((T, T)), scratch)
        slope[a], slope[b] = grad[a], grad[b]
        found = _weighted_value(H[c].copy(), centre, offset, w, y[c], beta, scratch)
        lift = found - value + float(slope @ touch)
    # φ_c − slope·h less share·W on both entries: touch stays stationary
    share = largest_share(H0[c], nu, W[c], y[c], beta, touch, (a, b), touch, slope, SHARES,
                          tol, budget)
    return None if share is None else _Tangent(share, nu, touch, slope, lift)


def _local_piece(H, H0, W, y, beta, row, c, share, nu, k, lo, hi, tol, budget):
    """A local piece (docstring 5) of column c on row ``row.r``'s coordinate c, valid for
    ``u_c`` in ``[lo, hi]``; None where it is not proved."""
    r, o = row.r, row.o
    w = W[c]
    if abs(w[r] - k) < _LOCAL_GAP * w[r]:
        return None
    centre, offset = _row_problem(H0[c], nu, w)
    lowered = {o: (share * w[o], H[c, o], 0.0), r: (k, H[c, r], 0.0)}
    if not prove_boxed(w, centre, offset, y[c], beta, H[c], lowered, r, lo, hi, tol, budget):
        return None
    return np.array([W[r, c] + k, -2 * W[r, c] * H0[r, c] - nu[r] - 2 * k * H[c, r],
                     W[r, c] * H0[r, c] ** 2 + k * H[c, r] ** 2])


def _half_curvature(H, H0, W, y, beta, r, c, nu):
    """ψ''/2 of column c in its entry r (the others free), by a central difference of its
    slope at the found row (it sets a local piece's k only)."""
    w, eps = W[c], 1e-4
    centre, _ = _row_problem(H0[c], nu, w)
    lam = [held_response(H[c], centre, w, y[c], beta, r, H[c, r] + d)[1]
           for d in (-eps, eps)]
    return (lam[1] - lam[0]) / (4 * eps)


def _add_local_pieces(H, H0, W, y, beta, row, columns, tangents, point, tol, budget):
    """Local pieces for each column of ``row`` whose entry of the failing search's lower
    ``point`` lies away from the found row."""
    r = row.r
    for c in columns:
        distance = abs(point[c] - H[r, c])
        if distance < 1e-3:
            continue
        share, nu = tangents[c].share, tangents[c].nu
        half = _half_curvature(H, H0, W, y, beta, r, c, nu)
        lo, hi = H[c, r] - _LOCAL_RADIUS * distance, H[c, r] + _LOCAL_RADIUS * distance
        for fraction in LOCAL_FRACTIONS:
            q = _local_piece(H, H0, W, y, beta, row, c, share, nu, fraction * half, lo,
                             hi, tol, budget)
            if q is not None and q[0] > row.whole(c)[0] * (1 + 1e-3):
                row.pieces[c].append((q, (lo, hi)))
                break


def _centre_curvature(row, yrow, beta):
    """a''(t*) of the row: the Schur complement of its Hessian at the found row (by
    differences of the gradient) on the shared coordinate."""
    T, o, u = len(row.pieces), row.o, row.found
    hess, h = np.empty((T, T)), 1e-6
    for i in range(T):
        e = np.zeros(T)
        e[i] = h
        hess[i] = (row.value(u + e, yrow, beta)[1] - row.value(u - e, yrow, beta)[1]) / (2 * h)
    hess = 0.5 * (hess + hess.T)
    rest = [e for e in range(T) if e != o]
    return hess[o, o] - hess[o, rest] @ np.linalg.solve(hess[np.ix_(rest, rest)],
                                                        hess[rest, o])


def certify_double(H, H0, L, y, sigma, beta, a, b, starts, tol, budget,
                   local_rounds=LOCAL_ROUNDS):
    """Certify the sample whose rows H, H0, L (:func:`._certify_dual.found_rows`) fail the
    star bound, by the double star of rows a and b (module docstring); ``starts``: per
    row, a point to start the estimates from besides the found row (its lower point);
    ``budget``: the certificate's splits per search, of which each search here gets
    ``_BUDGET_SHARE``. Returns True where ``F ≥ F(x) − tol`` is proved."""
    T = y.shape[0]
    W = np.full((T, T), 0.25 / sigma)
    columns = [c for c in range(T) if c not in (a, b)]
    budget = max(1, int(_BUDGET_SHARE * budget))
    tangents = {}
    for c in columns:
        tangents[c] = _column_tangent(H, H0, L, y, W, beta, a, b, c, tol / T, budget)
        if tangents[c] is None:
            return False

    def recentre(ua, ub):
        # the columns' tangents moved to the rows ua, ub (docstring 4): the rows with
        # them and the rise of the target, None where one does not prove
        moved = {}
        for c in columns:
            moved[c] = _column_tangent(H, H0, L, y, W, beta, a, b, c, tol / T, budget,
                                       at=(ua[c], ub[c]))
            if moved[c] is None:
                return None
        return ((_Row(a, b, H, H0, W, moved, columns), _Row(b, a, H, H0, W, moved, columns)),
                sum(tangent.lift for tangent in moved.values()))
    return _double_star(H, H0, W, y, beta, a, b, tangents, columns, starts, tol / T, budget,
                        local_rounds, recentre)


def _double_star(H, H0, W, y, beta, a, b, tangents, columns, starts, tol, budget,
                 local_rounds, recentre=None):
    """Docstrings 3–5 for one pair. At each centre interval the rows with the columns'
    tangents only are tried first; then, where they fail, rows that gather local pieces
    over the intervals (``local_rounds`` rounds at each; none where it is 0). While the
    latter hold no local piece they are the former, and are not tried again."""
    def pair():
        return (_Row(a, b, H, H0, W, tangents, columns),
                _Row(b, a, H, H0, W, tangents, columns))
    rows, gathering = pair(), pair()
    found = [row.value(row.found, y[row.r], beta) for row in rows]
    total = found[0][0] + found[1][0] - tol          # the target of a(t) + b(t)
    t_star = H[a, b]
    slope = -found[0][1][b]                          # row a stationary in t
    # t's reach: ℓ ≥ 0 and each other coordinate's whole-line quadratic at its least
    rest = sum(q[2] - q[1] ** 2 / (4 * q[0]) for row in rows
               for e, q in ((e, row.whole(e)) for e in range(len(row.pieces)))
               if e != row.o)
    qa, qb = rows[0].whole(b), rows[1].whole(a)
    w, lin = qa[0] + qb[0], qa[1] + qb[1]
    reach = total - rest - (qa[2] + qb[2] - lin ** 2 / (4 * w))
    if reach <= 0:
        return True
    t_lo = -lin / (2 * w) - math.sqrt(reach / w)
    t_hi = -lin / (2 * w) + math.sqrt(reach / w)
    kappa = 0.25 * (_centre_curvature(rows[1], y[b], beta)
                    - _centre_curvature(rows[0], y[a], beta))
    tilts = ((slope, kappa), (-slope, -kappa))
    for radius in CENTRE_RADII:
        lo, hi = max(t_lo, t_star - radius), min(t_hi, t_star + radius)
        if lo >= hi:
            continue
        proved = _centre(rows, tilts, lo, hi, t_star, y, beta, H, H0, W, columns, tangents,
                         tol, budget, 0)
        if proved and _beyond(rows, [(t_lo, lo, 0), (hi, t_hi, 0)], total, y, beta,
                              starts, budget, recentre):
            return True
        if local_rounds == 0 or (proved and not any(r.has_locals() for r in gathering)):
            continue
        if _centre(gathering, tilts, lo, hi, t_star, y, beta, H, H0, W, columns, tangents,
                   tol, budget, local_rounds) and \
                _beyond(gathering, [(t_lo, lo, 0), (hi, t_hi, 0)], total, y, beta, starts,
                        budget, recentre):
            return True
    return False


def _centre(rows, tilts, lo, hi, t_star, y, beta, H, H0, W, columns, tangents, tol, budget,
            local_rounds):
    """Docstring 3 (and 5): both rows proved on ``[lo, hi]`` from the found point."""
    for row, (tilt, kappa) in zip(rows, tilts):
        yrow = y[row.r]
        for rounds in range(local_rounds + 1):
            code, _, point, _ = row.prove(lo, hi, tilt, kappa, t_star, row.found, yrow,
                                          beta, tol / 2, budget)
            if code != NONCONVEX or rounds == local_rounds:
                break
            _add_local_pieces(H, H0, W, y, beta, row, columns, tangents, point, tol, budget)
        if code != CERTIFIED:
            return False
    return True


def _estimate(rows, lo, hi, y, beta, from_a, from_b):
    """The least of the estimates of ``a(t) + b(t)`` at ``_ESTIMATE_POINTS`` points of
    ``[lo, hi]``: ``(least, a's part, t, a's row, b's row)``."""
    row_a, row_b = rows
    best = None
    for t in np.linspace(lo, hi, _ESTIMATE_POINTS):
        va, ua = row_a.least_at(t, y[row_a.r], beta, from_a)
        vb, ub = row_b.least_at(t, y[row_b.r], beta, from_b)
        from_a, from_b = [ua], [ub]              # continuation along the interval
        if best is None or va + vb < best[0]:
            best = (va + vb, va, t, ua, ub)
    return best


def _proved(rows, lo, hi, least, va, t, ua, ub, target, y, beta, budget):
    """Docstring 4 on ``[lo, hi]``: the tilt and the split of the target from the estimate
    ``(least, va, t, ua, ub)``, then the two rows' searches."""
    row_a, row_b = rows
    y_a, y_b = y[row_a.r], y[row_b.r]
    step = 1e-6 * (1 + abs(t))
    tilt = -(row_a.least_at(t + step, y_a, beta, [ua])[0]
             - row_a.least_at(t - step, y_a, beta, [ua])[0]) / (2 * step)
    alpha = va + tilt * t - 0.5 * (least - target)
    return row_a.prove(lo, hi, tilt, 0.0, 0.0, ua, y_a, beta, 0.0, budget,
                       alpha)[0] == CERTIFIED and \
        row_b.prove(lo, hi, -tilt, 0.0, 0.0, ub, y_b, beta, 0.0, budget,
                    target - alpha)[0] == CERTIFIED


def _beyond(rows, todo, total, y, beta, starts, budget, recentre=None):
    """Docstring 4 on the intervals ``todo`` of ``(lo, hi, halvings)``; where the pair's
    estimate on one is below the target, the columns' tangents are moved to its point
    (``recentre(ua, ub)``: the rows with them and the target's rise, None where one
    fails)."""
    n_intervals = 0
    while todo:
        lo, hi, halvings = todo.pop()
        if hi <= lo:
            continue
        n_intervals += 1
        if n_intervals > _MAX_INTERVALS:
            return False
        pair, target = rows, total
        least, va, t, ua, ub = _estimate(pair, lo, hi, y, beta, [rows[0].found, starts[0]],
                                         [rows[1].found, starts[1]])
        if least < target:                           # the pair's estimate is below
            if recentre is None:
                return False
            for _ in range(_RECENTRINGS):
                moved = recentre(ua, ub)
                if moved is None:
                    return False
                pair, target = moved[0], total + moved[1]
                (va, ua), (vb, ub) = (row.least_at(t, y[row.r], beta, [u])
                                      for row, u in zip(pair, (ua, ub)))
                if va + vb >= target:
                    break
            else:
                return False                         # below where the tangents touch
            least, va, t, ua, ub = _estimate(pair, lo, hi, y, beta, [ua], [ub])
        if least >= target and _proved(pair, lo, hi, least, va, t, ua, ub, target, y, beta,
                                       budget):
            continue
        if halvings >= _HALVINGS:
            return False
        middle = 0.5 * (lo + hi)
        todo += [(lo, middle, halvings + 1), (middle, hi, halvings + 1)]
    return True
