"""The column rows' minorants, shared by the star (:mod:`._certify_star`) and the double
star (:mod:`._certify_double`).

A column row c is the weighted row ``φ_c(h) = Σ_e w_e (h_e − H0_e)² + νᵀh + ℓ_c(h)``
(:func:`._certify_split._row_problem`) whose entries shared with the kept rows (one for the
star, two for the double star) are *lowered*: each such entry e loses ``k_e (h_e − p_e)²``
and a line ``λ_e h_e``. Both certificates prove that the lowered row stays above its value
at a stationary point, less ``tol``:

- on all of R^T (a *tangent*: the weighted row bound,
  :func:`._certify_split._row_dual_weighted`, on the row with weights ``w_e − k_e`` and
  centres moved to keep the same quadratic), by :func:`largest_share` for the largest of a
  list of shares ``k_e = share·w_e``;
- with one lowered entry boxed in an interval (a *local piece*, whose k may exceed ``w_e``:
  the box keeps it bounded), by :func:`prove_boxed` with the search of
  :mod:`._star_search`.

What the proof gives each certificate (a quadratic of the shared entry, or a separable
minorant) is built by its own module.
"""

from __future__ import annotations

import numpy as np

from ._certify_rows import CERTIFIED
from ._certify_split import _row_dual_weighted
from ._star_search import star_bound


def lowered_row(H0_row, nu, w, lowered):
    """The lowered row ``φ(h) − Σ_e [λ_e h_e + k_e (h_e − p_e)²]`` in the weighted row
    form ``(H0, ν, w)``, up to a constant; ``lowered``: ``{e: (k_e, p_e, λ_e)}``."""
    h0, nu, w_low = H0_row.copy(), nu.copy(), w.copy()
    for e, (k, p, lam) in lowered.items():
        w_low[e] = w[e] - k
        h0[e] = (w[e] * H0_row[e] - k * p) / (w[e] - k)
        nu[e] = nu[e] - lam
    return h0, nu, w_low


def largest_share(H0_row, nu, w, yrow, beta, start, entries, touch, slope, shares, tol,
                  budget, admissible=None):
    """The largest of ``shares`` (tried in order) with which the row lowered on
    ``entries`` by ``k_e = share·w_e`` around ``touch`` and by ``slope`` stays above its
    value at ``start`` (a stationary point of it) less ``tol`` on all of R^T; None where
    none proves. ``admissible(share)``: False skips a share."""
    for share in shares:
        if admissible is not None and not admissible(share):
            continue
        lowered = {e: (share * w[e], touch[e], slope[e]) for e in entries}
        if _row_dual_weighted(start.copy(), *lowered_row(H0_row, nu, w, lowered), yrow, beta,
                              tol, budget)[0] == CERTIFIED:
            return share
    return None


def prove_boxed(w, centre, offset, yrow, beta, start, lowered, boxed, lo, hi, tol, budget):
    """Whether the row ``Σ_e w_e (h_e − centre_e)² + offset + ℓ(h)`` lowered as
    ``lowered`` (``{e: (k_e, p_e, λ_e)}``) stays above its value at ``start`` less ``tol``
    wherever ``h_boxed`` lies in ``[lo, hi]`` (the search of :mod:`._star_search`; the
    boxed entry's weight ``w − k`` may be negative)."""
    T = len(w)
    pieces = [np.array([[w[e], -2 * w[e] * centre[e], w[e] * centre[e] ** 2]])
              for e in range(T)]
    for e, (k, p, lam) in lowered.items():
        pieces[e] = np.array([[w[e] - k, -2 * (w[e] * centre[e] - k * p) - lam,
                               w[e] * centre[e] ** 2 - k * p ** 2]])
    pieces[boxed][0, 2] += offset
    valid = [None] * T
    valid[boxed] = [[lo, hi]]
    domain = [q[0] for q in pieces]
    domain[boxed] = None
    return star_bound(pieces, start.copy(), yrow, beta, tol, budget, valid,
                      domain)[0] == CERTIFIED
