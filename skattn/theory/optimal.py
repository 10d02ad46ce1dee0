"""Optimal regularisation: the λ that minimises the predicted test error.

The state evolution predicts the test error of factored or direct ERM at every λ; the
optimal λ* minimises it. The search runs on ``log λ``: a coarse log-spaced scan (solved from
large to small λ, each point warm-started from the previous one, since large λ is the easy
end of the continuation) finds the basin, then :func:`scipy.optimize.minimize_scalar`
(bounded Brent) refines it between the neighbours of the best scan point, warm-starting
every solve from the nearest λ already solved. Unconverged solves count as +∞.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from .._validation import check_choice, check_scalar_range
from .problem import resolve_problem, split_model_keywords
from .core import resolve_options
from .state_evolution import solve_state_evolution

__all__ = ["optimal_reg_lambda"]


def _warm(res):
    """Whether a result can warm-start another solve (converged, not collapsed to S = 0)."""
    return bool(res.converged and res.q > 0 and res.sigma > 0 and np.isfinite(res.sigma))


def optimal_reg_lambda(alpha, problem=None, *, bounds=(1e-3, 10.0), n_grid=7, xatol=0.01,
                       quantity="test_error", init=None, **kwargs):
    """The λ minimising the state-evolution prediction of the test error at one α.

    Parameters
    ----------
    alpha : float
        Sample ratio ``n/d² > 0``.
    problem : StateEvolutionProblem, optional
        The model (its ``reg_lambda`` is ignored: λ is searched), instead of the model
        keywords in ``kwargs``.
    bounds : tuple of float, default=(1e-3, 10.0)
        Search interval ``(λ_min, λ_max)``, ``0 < λ_min < λ_max``. The optimum may lie on a
        bound (noiseless factored ERM: the test error decreases down to λ → 0⁺); when the
        best scan point is a bound and the point halfway to its neighbour is not better,
        the bound is returned without refinement — check ``λ*`` against the bounds.
    n_grid : int, default=7
        Points of the initial log-spaced scan (≥ 3).
    xatol : float, default=0.01
        Absolute tolerance on ``log10 λ*`` of the refinement.
    quantity : {"test_error", "s_error"}, default="test_error"
        The quantity minimised (``s_error = ‖Ŝ − S0‖²_F/d``).
    init : StateEvolutionResult, optional
        Warm start of the first solve (e.g. the optimum at a neighbouring α).
    **kwargs
        Passed to :func:`~skattn.theory.solve_state_evolution`: without a problem,
        ``n_tokens`` and ``target`` (required), ``parametrization`` ("factored", the
        default, or "direct": which model's λ, weight decay on W or ridge on V; docs:
        Theory §2), ``noise``, ``attention``, ``beta``, ``width_ratio``, …;
        ``correction`` and ``options`` (or the solver options
        ``n_nodes``, ``tol``, … as keywords) in any case.

    Returns
    -------
    reg_lambda : float
        λ*.
    result : StateEvolutionResult
        The state evolution at λ*.

    Raises
    ------
    RuntimeError
        If no solve converged.

    Examples
    --------
    >>> from skattn.data import WishartTarget
    >>> from skattn.theory.optimal import optimal_reg_lambda
    >>> lam, res = optimal_reg_lambda(0.2, n_tokens=1, attention="linear",
    ...                               target=WishartTarget(0.5), parametrization="direct")
    >>> res.converged
    True
    """
    alpha = check_scalar_range(alpha, "alpha", low=0, low_inclusive=False)
    if "reg_lambda" in kwargs:
        raise TypeError("optimal_reg_lambda() got an unexpected keyword argument "
                        "'reg_lambda'.")
    model, options = split_model_keywords(kwargs)
    correction = options.pop("correction", "auto")
    options = resolve_options(options.pop("options", None), **options)
    problem = resolve_problem(problem, "optimal_reg_lambda", **model)
    check_choice(quantity, "quantity", ("test_error", "s_error"))
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"bounds must be a pair (λ_min, λ_max), got {bounds!r}.") from None
    if not (0 < lo < hi and np.isfinite(hi)):
        raise ValueError(f"bounds must satisfy 0 < λ_min < λ_max < inf, got {bounds!r}.")
    n_grid = check_scalar_range(n_grid, "n_grid", low=3, integer=True)
    xatol = check_scalar_range(xatol, "xatol", low=0, low_inclusive=False)

    solved = {}  # log10 λ → result

    def solve(loglam):
        loglam = float(loglam)
        if loglam in solved:
            return solved[loglam]
        start = init if init is not None and _warm(init) else None
        if solved:
            near = min((k for k in solved if _warm(solved[k])),
                       key=lambda k: abs(k - loglam), default=None)
            if near is not None:
                start = solved[near]
        point = problem.replace(reg_lambda=10.0 ** loglam)
        res = solve_state_evolution(alpha, point, correction=correction,
                                    options=options.replace(init=start))
        if not res.converged and start is not None:  # warm start failed: try cold
            cold = solve_state_evolution(alpha, point, correction=correction, options=options)
            if cold.converged or cold.residual < res.residual:
                res = cold
        solved[loglam] = res
        return res

    def value(loglam):
        res = solve(loglam)
        v = getattr(res, quantity)
        return float(v) if res.converged and np.isfinite(v) else np.inf

    grid = np.linspace(np.log10(hi), np.log10(lo), n_grid)  # large → small λ
    vals = np.array([value(g) for g in grid])
    if not np.any(np.isfinite(vals)):
        raise RuntimeError(f"the state evolution converged at none of the λ in {bounds} "
                           f"(alpha={alpha}); try other bounds or solver options.")
    k = int(np.argmin(vals))
    a, b = grid[min(k + 1, n_grid - 1)], grid[max(k - 1, 0)]  # grid is decreasing
    on_bound = k in (0, n_grid - 1)
    if on_bound:
        # best scan point on a bound: probe halfway to its neighbour; if that is not
        # better, the minimum over the interval is (within the scan's resolution) the bound
        other = grid[1] if k == 0 else grid[-2]
        on_bound = value(0.5 * (grid[k] + other)) >= vals[k]
    if not on_bound and b > a:
        optimize.minimize_scalar(value, bounds=(a, b), method="bounded",
                                 options={"xatol": xatol})
    best = min((k for k in solved if np.isfinite(value(k))), key=value)
    return 10.0 ** best, solved[best]
