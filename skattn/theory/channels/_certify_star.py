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
3. *Its least value* is proved by the compiled search of :mod:`._star_search` at its
   stationary points (the pieces on their segments, and the kinks of Ψ_c).
4. *Domain and found point.* The pieces of the found point (the tangent ones) are below
   Ψ_c, so every u with ``Φ̃(u) < Φ̃(H_a)`` lies in their ellipsoid: the first box, as in
   :mod:`._certify_split`. The found point is a stationary point of the most curved
   pieces at ``H_ac`` (tangent or local), excluded by its Krawczyk box.

5. *Which split.* Under the equal split a second failing row b takes a tangent of
   negative share (docstring 2), which rarely proves enough. Where two or three rows
   fail, the split search of :mod:`._certify_split` runs again with row a left out: a
   split under which every other row holds gives each column row a tangent of share ≥ 0,
   and the star of row a follows under that split. A negative share never takes a piece
   below a tenth of row a's own weight on the entry (``_MIN_WEIGHT``): the search needs
   convex pieces.

6. *Local pieces.* ψ_c is often more curved at ``H_ac`` than any quadratic below it on
   all of R can be (k < W_ca: row c's weight on entry a must stay positive), and where
   row a's own problem is not convex there, the star needs that curvature. A *local
   piece* ``ψ_c(η) ≥ φ_c(H_c) − tol_c − ν_ca η + k (η − H_ac)²`` holds only for η in an
   interval I ∋ ``H_ac``, with any k: it is proved by the search of :mod:`._star_search`
   on row c alone, its entry a boxed in I with weight ``W_ca − k`` (negative where k >
   W_ca; the box keeps the problem bounded). Where the star still shows a lower point
   (the refinement above done), each column row gets, for each radius
   of ``LOCAL_RADII`` times the distance to row a's lower point, the most curved local
   piece of ``LOCAL_FRACTIONS`` of ψ_c''/2 at ``H_ac`` that proves, then pieces that
   cover each new lower point and the line tangent there, for ``LOCAL_ROUNDS`` rounds;
   Ψ_c, the largest piece valid at η, is then not convex, which the search allows. They
   are tried in the star under the equal split where one row fails, and under the split
   where the others hold where two or three do (at most ``_SPLIT_LOCAL_ROUNDS`` rounds
   there).

7. *Off-centre pieces.* Where the star still shows a lower point u after the local
   stage, each column row gets a piece centred at ``p = u_c``: with ``h_p`` row c's least
   with entry a held at p and ``λ = ∂φ_c/∂h_a`` there (``h_p`` is then stationary for
   ``φ_c(h) − λ h_a − k (h_a − p)²``), the search of :mod:`._star_search` proves that
   problem's least on an interval I ∋ p (which leaves out ``H_ac``), so ``ψ_c(η) ≥
   φ_c(h_p) − λ p − tol_c + (λ − ν_ca) η + k (η − p)²`` on I. The local and off-centre
   rounds run only where the column rows' own least values at the lower point lift it
   by enough (``_HOPE_FACTOR``): where they do not, ψ_c itself leaves the star below
   the found value there, and no minorant of it can close the node.

The bound holds with ``tol/T`` for each column row's tangent and ``tol/T`` for row a:
``F ≥ F(x) − tol``. Soundness tests: tests/theory/test_certify_star.py.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._certify_columns import largest_share, prove_boxed
from ._certify_double import certify_double
from ._certify_dual import _weighted_value, found_rows
from ._certify_rows import CERTIFIED, NONCONVEX
from ._certify_split import (MAX_ROUNDS, MIN_SHARE, _descend, _descend_row, _multipliers,
                             _row_dual_weighted, _row_problem, _split_weights,
                             held_response, split_search)
from ._star_search import branches, star_bound

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
# local pieces (docstring 6), where the star still shows a lower point: the intervals
# ``H_ac ± r·d`` (d: the distance to row a's lower point in that entry, at least
# _LOCAL_MIN_DISTANCE), for each r the largest curvature ``f·ψ_c''/2`` of LOCAL_FRACTIONS
# that proves; each round adds pieces that cover the search's new lower point, and the
# line tangent there (the measurements: docs: Validation report, "Local pieces")
LOCAL_RADII = (1.5,)
LOCAL_FRACTIONS = (0.95, 0.8, 0.6, 0.4)
_LOCAL_MIN_DISTANCE = 0.05
# the rounds of the local stage, the default of ``SoftmaxChannel.star_local_rounds``
LOCAL_ROUNDS = 2
# off-centre pieces (docstring 7): rounds after the local stage, each piece's interval
# ``p ± r·|p − H_ac|`` for r = _OFF_CENTRE_RADIUS (kept off ``H_ac ±`` _OFF_CENTRE_MARGIN
# times that distance), its curvature the largest of _OFF_CENTRE_FRACTIONS of ψ_c''/2 at
# p that proves, its proof's budget _OFF_CENTRE_BUDGET of the splits (docs: Validation
# report, "Off-centre pieces")
_OFF_CENTRE_ROUNDS = 1
_OFF_CENTRE_RADIUS = 0.5
_OFF_CENTRE_MARGIN = 0.02
_OFF_CENTRE_FRACTIONS = (0.8, 0.4)
_OFF_CENTRE_BUDGET = 0.25
# a round of the local or off-centre stage runs only where the column rows' own least
# values at the star's lower point (held there by Newton) lift Φ̃ at that point by at
# least this many times its depth below the found value: otherwise no piece of theirs
# can close it (the rule decides the work, not the proof)
_HOPE_FACTOR = 1.5
# where two or three rows fail, the local stage (under the split where the others hold)
# has at most this many rounds: a second certified no more nodes at the fitted point and
# cost at large Σ (docs: Validation report, "Local pieces of the star")
_SPLIT_LOCAL_ROUNDS = 1
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
# a local piece's curvature k keeps this fraction of W away from W (where row c's boxed
# entry has no weight, κ = β²/(W − k) would blow up)
_LOCAL_GAP = 0.05


# ------------------------------------------------------------------ the column rows' pieces
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
        self.locals, self.half_curvature, self._held = [], None, None

    def tangent(self, shares=SHARES):
        """The tangent quadratic with the largest share that proves
        (:func:`._certify_columns.largest_share`); False where none."""
        W, V, a = self.W, self.W_own, self.a
        H, H0 = self.H_row[a], self.H0_row[a]
        share = largest_share(
            self.H0_row, self.nu, self.w, self.y_row, self.beta, self.H_row, (a,), self.H_row,
            np.zeros_like(self.H_row), shares, self.tol, self.budget,
            # the piece must stay convex (docstring 3), by a margin
            admissible=lambda share_: V + share_ * W >= (_MIN_WEIGHT - 1e-9) * V)
        if share is None:
            return False
        k = share * W
        self.pieces = np.array([[V + k, -2 * V * H0 - self.nu[a] - 2 * k * H,
                                 V * H0 ** 2 + k * H ** 2 + self.found - self.tol]])
        return True

    def local(self, k, lo, hi):
        """The tangent quadratic of any curvature k, valid where ``u_c ∈ [lo, hi]`` (∋
        ``H_ac``): ``φ_c(h) − k (h_a − H_ca)² ≥ φ_c(H_c) − tol_c`` for ``h_a ∈ [lo, hi]``,
        proved by :func:`star_bound` on row c with entry a boxed there (its weight ``W −
        k`` may be negative: the box keeps the problem bounded). Returns the piece, or
        None where it is not proved (docstring 6)."""
        W, V, a = self.W, self.W_own, self.a
        H = self.H_row[a]
        if not lo < H < hi or abs(W - k) < _LOCAL_GAP * W or V + k <= 0:
            return None
        return self._boxed_piece(k, H, 0.0, self.H_row, self.found, lo, hi, self.budget)

    def _boxed_piece(self, k, p, lam, h, f, lo, hi, budget):
        """Prove ``φ_c(h) − λ h_a − k (h_a − p)² ≥ f − tol_c`` for ``h_a ∈ [lo, hi]`` by
        :func:`._certify_columns.prove_boxed` (entry a boxed there), from its stationary
        point h of value f (the local pieces: p = ``H_ac``, λ = 0; the off-centre ones,
        docstring 7). Returns the piece of u_c it gives, row a's quadratic added, or
        None."""
        V, a = self.W_own, self.a
        if not prove_boxed(self.w, self.centre, self.offset, self.y_row, self.beta, h,
                           {a: (k, p, lam)}, a, lo, hi, self.tol, budget):
            return None
        H0 = self.H0_row[a]
        return np.array([V + k, -2 * V * H0 + lam - self.nu[a] - 2 * k * p,
                         V * H0 ** 2 + k * p ** 2 + f - self.tol])

    def add_local(self, distance):
        """Add, for each radius of LOCAL_RADII, the most curved local piece (of
        LOCAL_FRACTIONS of ψ_c''/2 at ``H_ac``) on ``H_ac ± r·distance`` that proves and
        is more curved than the tangent."""
        if self.half_curvature is None:
            self.half_curvature = self.half_curvature_at(self.H_row[self.a])
        H = self.H_row[self.a]
        for r in LOCAL_RADII:
            for f in LOCAL_FRACTIONS:
                lo, hi = H - r * distance, H + r * distance
                q = self.local(f * self.half_curvature, lo, hi)
                if q is not None and q[0] > self.pieces[0, 0] * (1 + 1e-3):
                    self.locals.append((q, (lo, hi)))
                    break

    def covered(self):
        """How far from ``H_ac`` the local pieces reach (0 where there are none)."""
        return max([hi - self.H_row[self.a] for _, (_, hi) in self.locals], default=0.0)

    def star_pieces(self):
        """Ψ_c's pieces, the local ones first (the most curved first: the largest at
        ``H_ac``), and their intervals of validity."""
        local = sorted(self.locals, key=lambda item: -item[0][0])
        pieces = np.vstack([q for q, _ in local] + [self.pieces])
        valid = [v for _, v in local] + [(-math.inf, math.inf)] * len(self.pieces)
        return pieces, valid

    def line(self, lam):
        """The line of slope ``λ − ν_ca`` below ψ_c (docstring 2), as a piece, lowered to
        lie ``tol`` below the tangent at ``H_ac``; None where its least is not proved."""
        V, a, beta, y = self.W_own, self.a, self.beta, self.y_row
        nu = self.nu.copy()
        nu[a] -= lam
        centre, offset = _row_problem(self.H0_row, nu, self.w)
        best, f_best = None, math.inf
        for h0 in (self.start, self.H_row):
            h, f = _descend_row(h0, centre, offset, self.w, y, beta, 0)
            if f < f_best:
                best, f_best = h, f
        for _ in range(2):    # a point below it: descend from there and prove again
            code, _, point, _ = _row_dual_weighted(best.copy(), self.H0_row, nu, self.w, y,
                                                   beta, self.tol, self.budget)
            if code != NONCONVEX:
                break
            best, f_best = _descend_row(point, centre, offset, self.w, y, beta, 0)
        if code != CERTIFIED:
            return None
        self.start = best
        H, H0 = self.H_row[a], self.H0_row[a]
        slope = lam - self.nu[a]
        top = self.pieces[0] @ np.array([H ** 2, H, 1.0])
        m = min(f_best - self.tol, top - self.tol - V * (H - H0) ** 2 - slope * H)
        return np.array([V, -2 * V * H0 + slope, V * H0 ** 2 + m])

    def held(self, eta, start=None):
        """Row c's least with ``h_a`` held at η (Newton from ``start``, by default the
        found row) and ``λ = ∂φ_c/∂h_a`` there: the point
        and λ, approximations (they set how tight a piece is, never whether it holds).
        From the found row the last answer is kept: :func:`_hopeless` and the off-centre
        piece ask at the same lower point."""
        if start is None and self._held is not None and self._held[0] == eta:
            return self._held[1].copy(), self._held[2]
        h, lam = held_response(self.H_row if start is None else start, self.centre, self.w,
                               self.y_row, self.beta, self.a, eta)
        if start is None:
            self._held = (eta, h.copy(), lam)
        return h, lam

    def slope_at(self, eta):
        """``λ`` of the line tangent to ψ_c at η (:meth:`held`)."""
        return self.held(eta)[1]

    def half_curvature_at(self, eta, start=None):
        """ψ_c''(η)/2 by a central difference of its slope (it sets a piece's k only)."""
        eps = 1e-4
        return (self.held(eta + eps, start)[1] - self.held(eta - eps, start)[1]) / (4 * eps)

    def response(self, eta):
        """ψ_c(η) plus row a's own quadratic, at row c's least held at η (:meth:`held`;
        an upper estimate: a local least)."""
        h, _ = self.held(eta)
        a = self.a
        return (_weighted_value(h, self.centre, self.offset, self.w, self.y_row, self.beta,
                                np.empty(h.shape[0]))
                - self.nu[a] * eta + self.W_own * (eta - self.H0_row[a]) ** 2)

    def top(self, eta):
        """Ψ_c(η): the largest of the pieces valid at η (−∞ where none is); the
        order of :meth:`star_pieces` does not matter here, so nothing is sorted."""
        x = np.array([eta * eta, eta, 1.0])
        local = (q @ x for q, (lo, hi) in self.locals if lo <= eta <= hi)
        whole = float(np.max(self.pieces @ x)) if len(self.pieces) else -math.inf
        return max(max(local, default=-math.inf), whole)

    def off_centre(self, p, lo, hi, budget):
        """The piece centred at ``p`` (module docstring 7), valid on ``[lo, hi]`` ∋ p: the
        most curved of _OFF_CENTRE_FRACTIONS of ψ_c''/2 at p that proves, or None."""
        W, a = self.W, self.a
        z = self.centre[a]
        h_p, lam = self.held(p)
        half = self.half_curvature_at(p, h_p)
        for fraction in _OFF_CENTRE_FRACTIONS:
            k = fraction * half
            if abs(W - k) < _LOCAL_GAP * W or self.W_own + k <= 0:
                continue
            # φ_c(h) − λ h_a − k (h_a − p)² in the weighted row's form, and its least
            # near h_p (the found point of its proof)
            w, centre = self.w.copy(), self.centre.copy()
            w[a] = W - k
            centre[a] = (2 * W * z + lam - 2 * k * p) / (2 * (W - k))
            offset = self.offset + W * z * z - k * p * p - (W - k) * centre[a] ** 2
            h, f = _descend_row(h_p, centre, offset, w, self.y_row, self.beta, 0)
            if not lo < h[a] < hi or np.max(np.abs(h - h_p)) > 0.1:
                continue
            q = self._boxed_piece(k, p, lam, h, f, lo, hi, budget)
            if q is not None:
                return q
        return None

    def add_off_centre(self, p):
        """Add the piece centred at the star's lower point's entry p (docstring 7), on
        ``p ± _OFF_CENTRE_RADIUS·|p − H_ac|`` less a margin around ``H_ac``."""
        H = self.H_row[self.a]
        distance = abs(p - H)
        lo, hi = p - _OFF_CENTRE_RADIUS * distance, p + _OFF_CENTRE_RADIUS * distance
        if p > H:
            lo = max(lo, H + _OFF_CENTRE_MARGIN * distance)
        else:
            hi = min(hi, H - _OFF_CENTRE_MARGIN * distance)
        q = self.off_centre(p, lo, hi, max(1, int(_OFF_CENTRE_BUDGET * self.budget)))
        if q is not None:
            self.locals.append((q, (lo, hi)))


def _hopeless(columns, point, below, H, a):
    """Whether the column rows' own least values at the star's lower point (their
    :meth:`_Column.response`, an upper estimate) lift Φ̃ there by less than
    ``_HOPE_FACTOR`` times its depth ``−below``: then no minorant of ψ_c is likely to
    close the node (module docstring 7)."""
    lift = sum(max(col.response(point[c]) - col.top(point[c]), 0.0)
               for c, col in columns.items() if abs(point[c] - H[a, c]) > 1e-6)
    return lift < _HOPE_FACTOR * -below


def _prune(pieces, lift):
    """The pieces less the lines that lift Ψ by less than ``lift`` anywhere (the one that
    lifts least first, until none is left below): each adds branches to every box of the
    search, and a line that barely shows cannot close a gap (dropping one stays sound)."""
    while len(pieces) > 1:
        lifts = np.full(len(pieces), -math.inf)    # each line's largest lift
        for p, lo, hi, kink, _ in branches(pieces):
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


def certify_star(H, H0, L, y, Wsplit, beta, a, low, excess, tol, budget,
                 local_rounds=LOCAL_ROUNDS, off_centre_rounds=_OFF_CENTRE_ROUNDS):
    """Certify the sample whose rows H, H0, L (:func:`._certify_dual.found_rows`) fail the
    row-wise bound under the split ``Wsplit`` in row a (the others may fail too), with row
    a's lower point ``low`` and its ``excess`` (< 0) over the found row, by the star bound
    (module docstring). Where the search shows a point below the found value, each column
    row gets the line tangent to its response there and the search runs again (up to
    ``_REFINE`` times); then up to ``local_rounds`` rounds of local pieces (docstring 6)
    and ``off_centre_rounds`` of off-centre ones (docstring 7). Returns True where
    ``F ≥ F(x) − tol`` is proved."""
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

    def search(budget=budget):
        pieces, valid, domain = [], [], []
        for c in range(T):
            p, v = (own, None) if c == a else columns[c].star_pieces()
            pieces.append(p)
            valid.append(v)
            domain.append(own[0] if c == a else columns[c].pieces[0])
        return star_bound(pieces, H[a].copy(), y[a], beta, tol / T, budget, valid, domain)

    def add_lines(point):
        for c, col in columns.items():
            q = col.line(col.slope_at(point[c]))
            if q is not None:
                col.pieces = np.vstack([col.pieces, q])

    for rounds in range(_REFINE + 1):
        code, _, point, below = search()
        if code != NONCONVEX:
            return code == CERTIFIED
        if rounds == _REFINE or below < _REFINE_BELOW * excess:
            break
        add_lines(point)
    for rounds in range(local_rounds):
        if _hopeless(columns, point, below, H, a):
            return False
        for c, col in columns.items():
            if rounds == 0:
                col.add_local(max(abs(low[c] - H[a, c]), _LOCAL_MIN_DISTANCE))
            # a lower point at (or past) the reach of the local pieces: pieces that
            # reach past it
            distance = abs(point[c] - H[a, c])
            if distance > 0.9 * col.covered() and distance > 1e-3:
                col.add_local(1.3 * distance)
        add_lines(point)
        code, _, point, below = search()
        if code != NONCONVEX:
            return code == CERTIFIED
    for rounds in range(off_centre_rounds):
        if _hopeless(columns, point, below, H, a):
            return False
        for c, col in columns.items():
            if abs(point[c] - H[a, c]) > 1e-3:
                col.add_off_centre(point[c])
        add_lines(point)
        code, _, point, below = search()
        if code != NONCONVEX:
            return code == CERTIFIED
    return False


def certify_sample(x, omega, y, s, B, index, scale, beta, tol, budget,
                   max_rounds=MAX_ROUNDS, min_share=MIN_SHARE, star=True,
                   star_rounds=STAR_SPLIT_ROUNDS, local_rounds=LOCAL_ROUNDS,
                   off_centre_rounds=_OFF_CENTRE_ROUNDS, double=False):
    """Certify ``x`` global for one T ≥ 3 sample: the split search of
    :func:`._certify_split.certify_by_split`, then, where every split fails and the equal
    split failed in at most ``_MAX_CENTRES`` rows, the star bound around each of them in
    turn, the largest gap first (``star``; module docstring): under the equal split, then,
    where several rows failed, under a split where every row but the star's holds (the
    split search with that row left out, docstring 5). ``off_centre_rounds`` rounds of
    off-centre pieces (docstring 7) follow in each star, none where ``local_rounds`` is 0.
    Where every star fails and one or two rows failed, ``double`` tries the double star of
    :mod:`._certify_double`: of the two rows, or of the one with each other row in turn.

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
    # where two or three rows fail, local pieces under the split where the others hold
    # only (under the equal split they certified few more nodes, at a cost), and fewer
    # rounds (docs: Validation report, "Local pieces of the star")
    equal_rounds = local_rounds if failed.size == 1 else 0
    split_rounds = min(local_rounds, _SPLIT_LOCAL_ROUNDS)
    off_rounds = off_centre_rounds if local_rounds > 0 else 0
    centres = failed[np.argsort(excesses[failed])]      # the largest gap first
    for a in centres:
        low, excess = _descend(points[a], excesses[a], a, H, H0, L, equal, y[a], beta)
        if certify_star(H, H0, L, y, equal, beta, a, low, excess, tol, budget,
                        equal_rounds, off_rounds):
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
        if certify_star(H, H0, L, y, split, beta, a, low, excess, tol, budget,
                        split_rounds, off_rounds):
            return True, rounds
    if double and failed.size <= 2:
        a = failed[0]
        for b in failed[1:] if failed.size == 2 else np.delete(np.arange(T), a):
            starts = [points[r] if codes[r] == NONCONVEX else H[r] for r in (a, b)]
            if certify_double(H, H0, L, y, s, beta, a, b, starts, tol, budget,
                              local_rounds):
                return True, rounds
    return False, rounds


def certify_nodes(x, omega, y, sigma, B, index, scale, beta, tol, budget, rounds, nodes,
                  n_threads=1, min_share=MIN_SHARE, star=True,
                  star_rounds=STAR_SPLIT_ROUNDS, local_rounds=LOCAL_ROUNDS, double=False):
    """:func:`certify_sample` at the samples ``nodes`` (rows of x, omega, y, sigma);
    returns their certified mask. On ``n_threads`` threads: the compiled row bounds run
    without the GIL, and each sample's search is independent of the others."""
    def one(n):
        return certify_sample(x[n], omega[n], y[n], sigma[n], B, index, scale, beta, tol,
                              budget, rounds, min_share, star, star_rounds,
                              local_rounds, double=double)[0]
    if n_threads <= 1 or len(nodes) < 2 * n_threads:
        return np.array([one(n) for n in nodes], dtype=bool)
    with ThreadPoolExecutor(n_threads) as pool:
        return np.array(list(pool.map(one, nodes)), dtype=bool)
