"""Emergence: the sample ratio α at which a target mode becomes a recovered outlier.

docs: Theory §8 ("stepwise emergence").
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_scalar_range
from ._solving import _lambda_at, _resolve_theory_target, _solve_robust
from .recovery import recovered_modes
from ..._warnings import warn

__all__ = ["emergence_alpha"]


def emergence_alpha(mode_index, *, target, n_tokens, reg_lambda, n_features=None,
                    alpha_range=(1e-3, 1.0), n_grid=25, rtol=1e-3, max_cluster=1,
                    **se_kwargs):
    """The sample ratio α = n/d² at which target mode i emerges as a recovered outlier.

    The state evolution (deterministic equivalent with the target's d eigenvalues, see the
    notes of :mod:`skattn.theory.powerlaw`) is solved on a log grid of α, warm-started
    point to point; for each requested mode the first grid interval where it turns from
    not recovered to recovered (:func:`recovered_modes`) is refined by bisection in log α
    — the root of the recovered/not-recovered indicator — until the bracket ratio is below
    ``1 + rtol``.

    Parameters
    ----------
    mode_index : int or array-like of int
        Mode(s), 0-based in decreasing order of eigenvalue (0 is λ_1).
    target : Target, DiscreteLaw or array-like
        E.g. ``PowerLawTarget(1.25)`` (then ``n_features`` is required), or the law or the
        eigenvalues themselves.
    n_tokens : int
        T.
    reg_lambda : float or callable
        λ, or a function ``alpha -> λ`` (e.g. ``lambda a: 3 * a ** 0.5``).
    n_features : int, optional
        d, for a Target.
    alpha_range : tuple of float, default=(1e-3, 1.0)
        Range of α searched.
    n_grid : int, default=25
        Number of grid points (log-spaced) before refinement.
    rtol : float, default=1e-3
        Relative precision on α.
    max_cluster : int or None, default=1
        See :func:`recovered_modes`.
    **se_kwargs
        Passed to :func:`~skattn.theory.solve_state_evolution` (``attention``, ``noise``,
        ``beta``, ``n_nodes``, ...).

    Returns
    -------
    float or ndarray
        The emergence α per mode; NaN (with a warning) for a mode never recovered in the
        range, or already recovered at its lower end. Where the recovered set is not
        monotone in α (a noisy interpolation peak can make δ grow with α), the first
        emergence is returned.
    """
    law = _resolve_theory_target(target, n_features)
    d = law.n_atoms
    modes = np.atleast_1d(np.asarray(mode_index))
    if modes.dtype.kind not in "iu" or modes.ndim != 1:
        raise TypeError("mode_index must be an int or a 1-D array of ints, got "
                        f"{mode_index!r}.")
    if np.any((modes < 0) | (modes >= d)):
        raise ValueError(f"mode_index must lie in [0, {d - 1}] (d = {d}), got {mode_index!r}.")
    a_lo, a_hi = (check_scalar_range(a, "alpha_range", low=0, low_inclusive=False)
                  for a in alpha_range)
    if not a_lo < a_hi:
        raise ValueError(f"alpha_range must be increasing, got {alpha_range!r}.")
    n_grid = check_scalar_range(n_grid, "n_grid", low=2, integer=True)
    rtol = check_scalar_range(rtol, "rtol", low=0, low_inclusive=False)

    def solve(a, init):
        # a recovered outlier is read off the bulk law (recovered_modes): not routed to
        # the spiked state evolution, whose top modes are explicit (softmax on a spiky
        # target then warns, DomainWarning)
        return _solve_robust(a, init, dict(n_tokens=n_tokens,
                                           reg_lambda=_lambda_at(reg_lambda, a),
                                           target=law, **se_kwargs), spiked=False)

    grid = np.geomspace(a_lo, a_hi, n_grid)
    results, flags, prev = [], [], None
    for a in grid:
        r = solve(a, prev)
        results.append(r)
        flags.append(recovered_modes(r, max_cluster=max_cluster).recovered)
        prev = r if r.converged else prev
    flags = np.array(flags)
    out = np.full(modes.size, np.nan)
    for j, i in enumerate(modes):
        f = flags[:, i]
        hit = np.flatnonzero(f)
        if hit.size == 0:
            warn(f"mode {i} is not recovered for alpha in {alpha_range}.",
                 RuntimeWarning)
            continue
        k = int(hit[0])
        if k == 0:
            warn(f"mode {i} is already recovered at alpha={a_lo:g}; lower "
                 "alpha_range.", RuntimeWarning)
            continue
        lo, hi = grid[k - 1], grid[k]
        r_lo = results[k - 1]
        while hi / lo > 1 + rtol:
            mid = np.sqrt(lo * hi)
            r = solve(mid, r_lo if r_lo.converged else None)
            if recovered_modes(r, max_cluster=max_cluster).recovered[i]:
                hi = mid
            else:
                lo, r_lo = mid, r
        out[j] = np.sqrt(lo * hi)
    return float(out[0]) if np.ndim(mode_index) == 0 else out
