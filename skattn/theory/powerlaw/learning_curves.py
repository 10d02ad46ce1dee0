"""Whole learning curves from the theory alone (docs: Theory §8)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..._validation import check_finite_array, check_scalar_range
from ._solving import _resolve_theory_target, _solve_robust
from ..spiked import is_spiked_result
from .decomposition import error_coefficients, spiked_irreducible_error

__all__ = ["LearningCurve", "theory_learning_curve"]


@dataclass
class LearningCurve:
    """A theory learning curve (see :func:`theory_learning_curve`).

    Attributes
    ----------
    n_samples : ndarray
    alpha : ndarray
        ``n/d²``.
    reg_lambda : ndarray
        λ used at each point.
    test_error, excess : ndarray
        ``e_test`` and ``e_test − e0`` (NaN where the state evolution did not converge).
    e0 : float
    converged : ndarray of bool
    results : list of StateEvolutionResult
    wall_time : float
        Seconds spent.
    """

    n_samples: np.ndarray
    alpha: np.ndarray
    reg_lambda: np.ndarray
    test_error: np.ndarray
    excess: np.ndarray
    e0: float
    converged: np.ndarray
    results: list = field(repr=False, default_factory=list)
    wall_time: float = np.nan


def theory_learning_curve(n_samples, *, target, n_tokens, reg_lambda, n_features=None,
                          lambda_exponent=0.0, **se_kwargs):
    """Excess test error against n from the state evolution alone.

    Uses the deterministic equivalent of the finite-d theory (continuum state evolution
    with the d target eigenvalues, notes of :mod:`skattn.theory.powerlaw`), warm-started
    along n, with a cold restart where a warm start fails.

    Parameters
    ----------
    n_samples : array-like of int
        Sample sizes n (solved in increasing order).
    target : Target, DiscreteLaw or array-like
        E.g. ``PowerLawTarget(1.25)``.
    n_tokens : int
        T.
    reg_lambda : float or callable
        λ (the estimator's ``reg_lambda``), or a function ``n -> λ``. With
        ``lambda_exponent = b`` the value used is ``reg_lambda · n^b`` (as in
        :class:`skattn.estimators.ScaledLambdaRegressor`).
    n_features : int, optional
        d (required with a Target; a law or an eigenvalue array carries it).
    lambda_exponent : float, default=0.0
    **se_kwargs
        Passed to :func:`~skattn.theory.solve_state_evolution` (``attention``, ``noise``,
        ``n_nodes``, ``width_ratio``, ...).

    Returns
    -------
    LearningCurve
    """
    t0 = time.perf_counter()
    law = _resolve_theory_target(target, n_features)
    d = law.n_atoms
    if n_features is not None and int(n_features) != d:
        raise ValueError(f"n_features={n_features} does not match the target's {d} "
                         "eigenvalues.")
    ns = check_finite_array(n_samples, "n_samples", ndim=1)
    if ns.size == 0 or np.any(ns <= 0):
        raise ValueError("n_samples must be a non-empty array of positive sizes.")
    order = np.argsort(ns)
    lambda_exponent = check_scalar_range(lambda_exponent, "lambda_exponent")
    lams = np.array([(reg_lambda(n) if callable(reg_lambda) else reg_lambda)
                     * n ** lambda_exponent for n in ns], dtype=float)
    if np.any(~np.isfinite(lams)) or np.any(lams < 0):
        raise ValueError("reg_lambda must give finite values >= 0.")
    results = [None] * ns.size
    prev = None
    for i in order:
        kw = dict(n_tokens=n_tokens, reg_lambda=float(lams[i]), target=law, **se_kwargs)
        r = _solve_robust(ns[i] / d ** 2, prev, kw)
        results[i] = r
        prev = r if r.converged else prev
    if is_spiked_result(results[0]):   # the spiked route (softmax on a spiky target)
        e0, c1 = spiked_irreducible_error(results[0]), np.nan
    else:
        e0, c1, _ = error_coefficients(results[0])
    linear = se_kwargs.get("attention", "softmax") == "linear"
    te = np.array([r.test_error for r in results])
    exc = np.array([c1 * r.s_error if linear else r.test_error - e0 for r in results])
    if linear:
        te = e0 + exc
    ok = np.array([r.converged for r in results])
    te[~ok] = np.nan
    exc[~ok] = np.nan
    return LearningCurve(n_samples=ns, alpha=ns / d ** 2, reg_lambda=lams, test_error=te,
                         excess=exc, e0=e0, converged=ok, results=results,
                         wall_time=time.perf_counter() - t0)
