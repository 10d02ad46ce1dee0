"""State-evolution phase diagrams over an (α, λ) grid, solved along warm-started paths.

Each row of fixed λ is one α path (:func:`state_evolution_curve`: every point starts from
its converged neighbour, so it needs a few fixed-point iterations); the rows are spread
over the workers by :func:`skattn.parallel.map_jobs`. Pure numpy: :meth:`PhaseDiagram.plot`
draws on a matplotlib Axes it is given (the theory layer imports no matplotlib).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problem import (UNCERTIFIED_MAX_SHARE, effect_share, resolve_problem,
                      split_model_keywords)
from .state_evolution import state_evolution_curve

__all__ = ["PhaseDiagram", "solve_phase_diagram"]

_FIELDS = ("test_error", "train_error", "train_objective", "m", "q", "sigma",
           "certified_fraction", "uncertified_effect")


@dataclass
class PhaseDiagram:
    """State-evolution predictions on an (α, λ) grid.

    Attributes
    ----------
    alphas : ndarray of shape (n_alpha,)
    reg_lambdas : ndarray of shape (n_lambda,)
    test_error, train_error, train_objective, m, q, sigma : ndarray of shape (n_lambda, n_alpha)
        Row ``i`` is ``reg_lambdas[i]``, column ``j`` is ``alphas[j]``; NaN where a point
        did not converge.
    certified_fraction : ndarray of shape (n_lambda, n_alpha)
        The share of quadrature nodes whose prox minimiser is certified global (NaN where a
        point did not converge).
    uncertified_effect : ndarray of shape (n_lambda, n_alpha)
        How far the uncertified nodes could move the test error, to first order, as a share
        of it (``extras["uncertified_effect"]``: a worst case; 0 where every node is
        certified, NaN where not estimated or not converged).
    converged : ndarray of bool, shape (n_lambda, n_alpha)
    problem : StateEvolutionProblem or None
        The model (its ``reg_lambda`` is not used: each row has its own).
    """

    alphas: np.ndarray
    reg_lambdas: np.ndarray
    test_error: np.ndarray
    train_error: np.ndarray
    train_objective: np.ndarray
    m: np.ndarray
    q: np.ndarray
    sigma: np.ndarray
    converged: np.ndarray
    problem: object = None
    certified_fraction: np.ndarray = None
    uncertified_effect: np.ndarray = None

    def plot(self, ax, quantity="test_error", log_lambda=True, log_alpha=False,
             log_color=True, mark_uncertified=True, **kwargs):
        """Draw one quantity as a colour map over (α, λ).

        Cells are centred on the grid points (geometric cell edges on a logarithmic λ
        axis); points that did not converge are left blank.

        Parameters
        ----------
        ax : matplotlib Axes
            E.g. ``plt.subplots()[1]``.
        quantity : str, default="test_error"
            One of ``test_error, train_error, train_objective, m, q, sigma,
            certified_fraction, uncertified_effect``.
        log_lambda : bool, default=True
            Logarithmic λ axis.
        log_alpha : bool, default=False
            Logarithmic α axis.
        log_color : bool, default=True
            Logarithmic colour scale (errors span decades); needs positive values.
        mark_uncertified : bool, default=True
            Mark with a cross the points whose uncertified nodes could move the test error
            by more than :data:`~skattn.theory.problem.UNCERTIFIED_MAX_SHARE` of it (to
            first order; ``uncertified_effect``), where the certificate does not pin the
            prediction down.
        **kwargs
            Passed to ``ax.pcolormesh``.

        Returns
        -------
        ax : matplotlib Axes
        """
        if quantity not in _FIELDS:
            raise ValueError(f"quantity must be one of {list(_FIELDS)}, got {quantity!r}.")
        if not hasattr(ax, "pcolormesh"):
            raise ValueError(f"ax must be a matplotlib Axes, got {type(ax).__name__}.")
        if getattr(self, quantity) is None:
            raise ValueError(f"this PhaseDiagram carries no {quantity} (made before it was "
                             "recorded).")
        values = np.ma.masked_invalid(getattr(self, quantity))
        if log_color and np.ma.min(values) is not np.ma.masked and np.ma.min(values) > 0:
            kwargs.setdefault("norm", "log")
        mesh = ax.pcolormesh(_edges(self.alphas, log=log_alpha),
                             _edges(self.reg_lambdas, log=log_lambda), values, **kwargs)
        ax.figure.colorbar(mesh, ax=ax, label=quantity.replace("_", " "))
        if mark_uncertified and self.uncertified_effect is not None:
            rows, cols = np.nonzero(np.nan_to_num(self.uncertified_effect)
                                    > UNCERTIFIED_MAX_SHARE)
            if rows.size:
                ax.scatter(self.alphas[cols], self.reg_lambdas[rows], marker="x", c="k",
                           label=f"uncertified effect > {UNCERTIFIED_MAX_SHARE:.0%}")
                ax.legend(loc="best", fontsize="small")
        if log_lambda:
            ax.set_yscale("log")
        if log_alpha:
            ax.set_xscale("log")
        ax.set_xlabel("α")
        ax.set_ylabel("λ")
        return ax


def _edges(centres, log):
    """Cell edges around sorted-or-not grid points (midpoints; geometric when ``log``)."""
    x = np.sort(np.asarray(centres, dtype=float))
    if log and np.all(x > 0):
        return np.exp(_edges(np.log(x), log=False))
    if x.size == 1:
        half = 0.5 * abs(x[0]) or 0.5
        return np.array([x[0] - half, x[0] + half])
    mid = 0.5 * (x[1:] + x[:-1])
    return np.concatenate([[2 * x[0] - mid[0]], mid, [2 * x[-1] - mid[-1]]])


def _value(result, name):
    return effect_share(result) if name == "uncertified_effect" else getattr(result, name)


def _row(alphas, reg_lambda, problem, kwargs):
    res = state_evolution_curve(alphas, problem, reg_lambda=reg_lambda, **kwargs)
    out = {name: np.array([_value(r, name) if r.converged else np.nan for r in res])
           for name in _FIELDS}
    out["converged"] = np.array([r.converged for r in res], dtype=bool)
    return out


def solve_phase_diagram(alphas, reg_lambdas, problem=None, *, n_jobs=1, backend="joblib",
                        verbose=0, **kwargs):
    """State evolution on the grid ``alphas × reg_lambdas``, warm-started along α.

    Parameters
    ----------
    alphas : array_like of shape (n_alpha,)
        Sample ratios α > 0, solved in increasing order along each row (the result holds
        both axes sorted).
    reg_lambdas : array_like of shape (n_lambda,)
        Regularisations λ ≥ 0, one row each.
    problem : StateEvolutionProblem, optional
        The model (its ``reg_lambda`` is replaced by the grid's); or give the model as
        keywords (``n_tokens``, ``target``, ``beta``, …).
    n_jobs : int, default=1
        Workers (joblib semantics); the rows are spread over them.
    backend : {"sequential", "joblib", "dask"}, default="joblib"
        Passed to :func:`skattn.parallel.map_jobs`.
    verbose : int, default=0
        > 0 shows a progress bar over the λ rows.
    **kwargs
        Model keywords (without ``problem``) and solver options (``n_nodes``, ``tol``,
        ``max_iter``), passed to :func:`state_evolution_curve`.

    Returns
    -------
    PhaseDiagram
        Non-converged points are NaN in every grid and False in ``converged``.
    """
    from tqdm.auto import tqdm

    from ..parallel import map_jobs    # lazily: keeps the import graph of theory flat

    alphas = np.asarray(alphas, dtype=float)
    lams = np.asarray(reg_lambdas, dtype=float)
    if alphas.ndim != 1 or alphas.size == 0 or not np.all(np.isfinite(alphas)) \
            or np.any(alphas <= 0):
        raise ValueError("alphas must be a non-empty 1-D array of finite values > 0.")
    if lams.ndim != 1 or lams.size == 0 or not np.all(np.isfinite(lams)) or np.any(lams < 0):
        raise ValueError("reg_lambdas must be a non-empty 1-D array of finite values ≥ 0.")
    for bad in ("alpha", "reg_lambda", "init"):
        if bad in kwargs:
            raise ValueError(f"{bad} is set by the grid; do not pass it to "
                             "solve_phase_diagram.")
    model, options = split_model_keywords(kwargs)
    problem = resolve_problem(problem, "solve_phase_diagram", **model)
    # the grid is returned sorted: warm starts run along increasing α, and the cells of
    # PhaseDiagram.plot need ordered axes
    alphas, lams = np.sort(alphas), np.sort(lams)
    with tqdm(total=lams.size, disable=not verbose, desc="phase diagram", unit="λ") as bar:
        rows = map_jobs(_row, [(alphas, lam, problem, options) for lam in lams],
                        backend=backend, n_jobs=n_jobs,
                        on_result=lambda index, row: bar.update(1))
    grids = {name: np.stack([row[name] for row in rows]) for name in rows[0]}
    return PhaseDiagram(alphas=alphas, reg_lambdas=lams, problem=problem, **grids)
