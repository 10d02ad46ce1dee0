"""Experiments: state-evolution rows, simulation rows, resumable sweeps, phase diagrams.

The library behind ``skattn theory``, ``skattn simulate``, ``skattn sweep`` and
``skattn phase-diagram`` (the demo is :mod:`skattn.demo`). A *parameter row* is a dict with the keys of :data:`MODEL_PARAMETERS`
(plus ``parametrization`` for the theory), as :func:`parameter_grid` builds them; a
*target* is named (``"wishart"`` with ``kappa0`` or ``"powerlaw"`` with ``gamma``) so
rows stay plain JSON-able values.

Bad parameters raise ``ValueError`` (or ``TypeError``) naming the parameter, before any
long computation starts.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
import time
import warnings

import numpy as np
from sklearn.utils import check_scalar

from .parallel import map_jobs
from .progress import progress_bar, ticker
from .reporting import format_rows, format_table

__all__ = [
    "MODEL_PARAMETERS", "THEORY_RESULT_COLUMNS", "TARGETS", "ESTIMATORS",
    "parameter_grid", "make_target", "row_target_spec", "theory_rows", "theory_sweep_rows", "theory_point",
    "row_problem", "standard_error", "fit_one", "run_fits", "simulate_rows", "phase_diagram",
    "phase_diagram_rows", "PHASE_DIAGRAM_COLUMNS",
]

#: Keys of a parameter row (``parametrization`` is added for the theory).
MODEL_PARAMETERS = ("n_features", "n_tokens", "reg_lambda", "target", "kappa0", "gamma",
                    "width_ratio", "beta", "target_beta", "noise", "attention", "task")

#: Results of one state-evolution point, as columns of :func:`theory_rows`.
THEORY_RESULT_COLUMNS = ("test_error", "train_error", "train_objective", "s_error",
                         "atom_mass", "m", "q", "sigma", "m_hat", "q_hat", "sigma_hat", "Q0",
                         "eta", "delta", "epsilon", "certified_fraction",
                         "uncertified_effect", "converged", "n_iter", "residual", "message",
                         "correction_used")

#: The quadrature's spread of a point (:func:`theory_rows` with ``spread``): the standard
#: deviation of each quantity over scramblings of the quadrature nodes.
SPREAD_COLUMNS = ("test_error_quadrature_std", "train_error_quadrature_std")

TARGETS = ("wishart", "powerlaw")
ESTIMATORS = ("tied", "direct", "amp")

# keys of a fit job that describe how it was run, not the experiment (left out of rows)
_RUN_SETTINGS = ("n_test", "device", "max_iter", "torch_threads")


def parameter_grid(values):
    """Cartesian product of lists of parameter values, irrelevant parameters set to None.

    Parameters
    ----------
    values : dict of str to list
        Parameter name -> the values to combine (in the order given).

    Returns
    -------
    list of dict
        One row per distinct combination. A Wishart target drops ``gamma``, a power-law
        target drops ``kappa0`` and the direct parametrization drops ``width_ratio``
        (set to None), so combinations that differ only there appear once.

    Raises
    ------
    ValueError
        If a value list is empty.
    """
    for name, options in values.items():
        if len(options) == 0:
            raise ValueError(f"{name} must have at least one value, got an empty list.")
    names = list(values)
    rows, seen = [], set()
    for combo in itertools.product(*values.values()):
        row = dict(zip(names, combo))
        if "target" in row:
            if row["target"] == "wishart":
                row["gamma"] = None
            else:
                row["kappa0"] = None
        if row.get("parametrization") == "direct":
            row["width_ratio"] = None
        key = tuple(row.items())
        if key not in seen:
            seen.add(key)
            rows.append(row)
    return rows


def row_target_spec(target, *, kappa0=None, gamma=None):
    """The target spec of a flat parameter row: the one converter between the two schemas.

    Rows keep the target flat (``target="wishart"``, ``kappa0=0.5``) so that
    :func:`parameter_grid` can combine each key; everywhere else a target is the spec dict of
    :func:`skattn.data.check_target_spec` (``{"family": "wishart", "kappa0": 0.5}``), as in
    :class:`skattn.validation.FSSConfig`.

    Parameters
    ----------
    target : {"wishart", "powerlaw"}
    kappa0 : float, optional
        Rank ratio of a Wishart target (required for ``"wishart"``).
    gamma : float, optional
        Decay exponent of a power-law target (required for ``"powerlaw"``).

    Returns
    -------
    dict
        The checked target spec.

    Raises
    ------
    ValueError
        If ``target`` is not one of :data:`TARGETS`, or its parameter is missing or out of
        range (the message names it).
    """
    from .data import check_target_spec

    if target == "wishart":
        if kappa0 is None:
            raise ValueError("kappa0 is required for target='wishart' (a float > 0).")
        spec = {"family": "wishart", "kappa0": kappa0}
    elif target == "powerlaw":
        if gamma is None:
            raise ValueError("gamma is required for target='powerlaw' (a float > 0).")
        spec = {"family": "powerlaw", "gamma": gamma, "cutoff": None}
    else:
        raise ValueError(f"target must be one of {', '.join(map(repr, TARGETS))}, "
                         f"got {target!r}.")
    return check_target_spec(spec)


def make_target(target, *, kappa0=None, gamma=None):
    """The target of a parameter row: ``WishartTarget(kappa0)`` or ``PowerLawTarget(gamma)``.

    Parameters
    ----------
    target : {"wishart", "powerlaw"}
    kappa0 : float, optional
        Rank ratio of a Wishart target.
    gamma : float, optional
        Decay exponent of a power-law target.

    Returns
    -------
    Target

    Raises
    ------
    ValueError
        As :func:`row_target_spec`.
    """
    from .data import target_from_spec

    return target_from_spec(row_target_spec(target, kappa0=kappa0, gamma=gamma))


def _row_target(params):
    return make_target(params["target"], kappa0=params.get("kappa0"),
                       gamma=params.get("gamma"))


# ----------------------------------------------------------------------------------------
# rows -> validated state-evolution problems
# ----------------------------------------------------------------------------------------

def row_problem(params):
    """The validated :class:`~skattn.theory.StateEvolutionProblem` of one parameter row.

    Raises
    ------
    ValueError or TypeError
        Naming the bad parameter (validation happens once, here).
    """
    from .theory import StateEvolutionProblem

    problem = StateEvolutionProblem(
        target=_row_target(params), n_tokens=params["n_tokens"],
        reg_lambda=params["reg_lambda"], width_ratio=params.get("width_ratio") or 1.0,
        beta=params["beta"], target_beta=params["target_beta"], noise=params["noise"],
        attention=params["attention"], task=params["task"],
        parametrization=params.get("parametrization", "factored"),
        n_features=params["n_features"])
    if problem.parametrization == "direct" and problem.reg_lambda == 0:
        raise ValueError("reg_lambda must be > 0 for the direct parametrization "
                         "(use a small value for the ridgeless limit).")
    return problem


def _check_alpha(alpha):
    check_scalar(alpha, "alpha", numbers.Real, min_val=0, include_boundaries="neither")


def _solver_options(n_nodes, tol, max_iter, correction="auto"):
    # None: the solver's defaults
    return {"correction": correction, "options": {
        "n_nodes": n_nodes, **{k: v for k, v in (("tol", tol), ("max_iter", max_iter))
                               if v is not None}}}


# ----------------------------------------------------------------------------------------
# theory
# ----------------------------------------------------------------------------------------

def _result_values(res, missing):
    from .theory.problem import effect_share

    out = {}
    for c in THEORY_RESULT_COLUMNS:
        try:
            # the correction the result used (a sweep row's "correction" is the one asked for)
            out[c] = (res.correction if c == "correction_used" else
                      effect_share(res) if c == "uncertified_effect" else getattr(res, c))
        except Exception:  # e.g. a spectrum quantity at a non-finite point
            out[c] = missing
    return out


def theory_rows(groups, alphas, *, n_nodes=8192, tol=None, max_iter=None, n_jobs=None,
                verbose=0, correction="auto", spread=None):
    """State evolution on every (parameter group × α); α curves are warm-started.

    Parameters
    ----------
    groups : list of dict
        Parameter rows (keys of :data:`MODEL_PARAMETERS` and ``parametrization``);
        ``n_features`` None is the d → ∞ continuum.
    alphas : list of float
        Sample ratios, solved in increasing order (duplicates once).
    n_nodes : int, default=8192
        Quadrature nodes, passed to :func:`skattn.theory.solve_state_evolution`.
    tol, max_iter : float and int, optional
        Passed to the solver when given (default: the solver's).
    n_jobs : int or None
        Parallel chunks of each α curve (joblib), and the parallel solves of each point's
        ``spread``.
    verbose : int, default=0
        > 0 shows a progress bar over the points (a ticker of the elapsed time for a
        single point), and with ``spread`` one more over the points' spreads.
    correction : str, default="auto"
        The finite-size correction (:func:`skattn.theory.solve_state_evolution`).
    spread : int or None, default=None
        ≥ 2: each point is solved again on ``spread − 1`` other scramblings of its
        quadrature nodes (:func:`skattn.theory.quadrature_spread`, from its fixed point),
        and the rows get :data:`SPREAD_COLUMNS`, the standard deviations over the
        ``spread`` solves (the quadrature's error of one solve).

    Returns
    -------
    list of dict
        One row per point: the parameters and :data:`THEORY_RESULT_COLUMNS`
        (non-computable ones NaN), with ``spread`` also :data:`SPREAD_COLUMNS`.

    Raises
    ------
    ValueError or TypeError
        Naming the bad parameter; every point is checked before any is solved.
    """
    from .theory import state_evolution_curve

    alphas = sorted(set(float(a) for a in alphas))
    for a in alphas:
        _check_alpha(a)
    if spread is not None:
        check_scalar(spread, "spread", numbers.Integral, min_val=2)
    plans = [(params, row_problem(params)) for params in groups]
    options = _solver_options(n_nodes, tol, max_iter, correction)
    rows = []
    single = len(plans) == 1 and len(alphas) == 1
    # the spreads' solves: one bar over every point (not one per point), beside the curves'
    with progress_bar(len(plans) * len(alphas), verbose and spread is not None,
                      "quadrature spread") as spread_bar:
        for params, problem in plans:
            if single:  # one solve (up to a minute): the elapsed time, not a 0/1 bar
                with ticker(verbose, f"state evolution at alpha={alphas[0]:g}"):
                    results = state_evolution_curve(alphas, problem, **options)
            else:
                results = state_evolution_curve(alphas, problem, n_jobs=n_jobs,
                                                verbose=verbose, **options)
            for res in results:
                rows.append({"alpha": res.alpha, **params,
                             **_result_values(res, float("nan")),
                             **({} if spread is None else
                                _spread_values(res, spread, options, n_jobs, spread_bar))})
    return rows


def _spread_values(res, spread, options, n_jobs, bar):
    from .theory import quadrature_spread

    std = quadrature_spread(res, spread, correction=options["correction"],
                            options=options["options"], n_jobs=n_jobs).std
    bar.update()
    return {column: std[column[:-len("_quadrature_std")]] for column in SPREAD_COLUMNS}


def theory_sweep_rows(groups, alphas, *, n_nodes=8192, tol=None, max_iter=None,
                      correction="auto"):
    """The explicit rows of a resumable state-evolution sweep, each point checked.

    Parameters
    ----------
    groups : list of dict
        Parameter rows as for :func:`theory_rows`.
    alphas : list of float
        Sample ratios (in the order given).
    n_nodes, tol, max_iter
        Solver settings, stored in every row.
    correction : str, default="auto"
        The finite-size correction, stored in every row.

    Returns
    -------
    list of dict
        Rows for :func:`skattn.sweep.run_sweep` with :func:`theory_point`.

    Raises
    ------
    ValueError or TypeError
        Naming the bad parameter.
    """
    rows = []
    for params in groups:
        row_problem(params)
        for a in alphas:
            _check_alpha(a)
            rows.append({"alpha": a, **params, "n_nodes": n_nodes, "tol": tol,
                         "max_iter": max_iter, "correction": correction})
    return rows


def theory_point(alpha, n_nodes, tol, max_iter, **params):
    """One state-evolution point, solved cold, as a flat dict of results.

    The function that :func:`skattn.sweep.run_sweep` calls on each row of
    :func:`theory_sweep_rows`.

    Parameters
    ----------
    alpha : float
    n_nodes, tol, max_iter
        Solver settings (``tol``, ``max_iter`` None: the solver's defaults).
    **params
        One parameter row (and optionally ``correction``, default "auto").

    Returns
    -------
    dict
        :data:`THEORY_RESULT_COLUMNS` (None where not computable).
    """
    from .theory import solve_state_evolution

    correction = params.pop("correction", "auto")
    res = solve_state_evolution(alpha, row_problem(params),
                                **_solver_options(n_nodes, tol, max_iter, correction))
    return _result_values(res, None)


# ----------------------------------------------------------------------------------------
# simulations
# ----------------------------------------------------------------------------------------

def fit_one(*, estimator, n_features, alpha, n_tokens, reg_lambda, target, kappa0=None,
            gamma=None, width_ratio=1.0, beta=1.0, target_beta=1.0, noise=0.0,
            attention="softmax", task="seq2lab", seed=0, solver="adam", max_iter=5000,
            n_test=2000, device="auto", torch_threads=None, return_eigenvalues=False):
    """Fit one estimator on one synthetic data set drawn from a teacher.

    The teacher, the training set (``n = round(α d²)`` samples) and the test set are seeded
    by ``seed``, ``10000 + seed`` and ``20000 + seed``, the estimator by ``seed``.

    Parameters
    ----------
    estimator : {"tied", "direct", "amp"}
        :class:`~skattn.TiedAttentionRegressor`, :class:`~skattn.DirectAttentionRegressor`
        or :class:`~skattn.AsymptoticPredictor`.
    n_features, alpha, n_tokens, reg_lambda : int, float, int, float
        Dimension d, sample ratio α, sequence length T and weight decay λ.
    target, kappa0, gamma : str and float
        The target, as for :func:`make_target`.
    width_ratio, beta, target_beta, noise, attention, task
        The rest of the parameter row (``width_ratio`` None means 1).
    seed : int, default=0
    solver : {"adam", "lbfgs"}, default="adam"
        Optimiser of tied/direct.
    max_iter : int, default=5000
        Optimiser iterations of tied/direct.
    n_test : int, default=2000
        Test samples.
    device : str, default="auto"
        Torch device of tied/direct.
    torch_threads : int or None
        Set torch's intra-op threads of this process first (None: leave them).
    return_eigenvalues : bool, default=False
        Add the eigenvalues of the learned ``S_``.

    Returns
    -------
    dict
        ``n_samples``, ``test_error``, ``train_error``, ``train_objective`` (per d²; for
        AMP the factored objective at ``S_``), ``fit_time`` (s), ``converged`` (False if
        the fit warned of non-convergence), ``n_iter`` and optionally ``eigenvalues``.
    """
    from sklearn.exceptions import ConvergenceWarning

    if torch_threads is not None:
        import torch
        torch.set_num_threads(int(torch_threads))
    from .data import AttentionIndexedModel
    from .estimators import (AsymptoticPredictor, DirectAttentionRegressor,
                             TiedAttentionRegressor, resolve_width)
    from .metrics import attention_error

    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(map(repr, ESTIMATORS))}, "
                         f"got {estimator!r}.")
    d = int(n_features)
    teacher = AttentionIndexedModel(d, n_tokens=n_tokens,
                                    target=make_target(target, kappa0=kappa0, gamma=gamma),
                                    beta=target_beta, noise=noise, attention=attention,
                                    random_state=seed)
    n = max(1, int(round(alpha * d * d)))
    X, y = teacher.sample(n, task=task, random_state=10_000 + seed, layout="tokens")
    Xt, yt = teacher.sample(n_test, task=task, random_state=20_000 + seed, layout="tokens")
    width = 1.0 if width_ratio is None else float(width_ratio)
    if estimator == "tied":
        est = TiedAttentionRegressor(width=width, reg_lambda=reg_lambda, beta=beta,
                                     attention=attention, task=task, solver=solver,
                                     max_iter=max_iter, device=device, random_state=seed)
    elif estimator == "direct":
        est = DirectAttentionRegressor(reg_lambda=reg_lambda, beta=beta, attention=attention,
                                       task=task, solver=solver, max_iter=max_iter,
                                       device=device, random_state=seed)
    else:
        est = AsymptoticPredictor(width=width, reg_lambda=reg_lambda, beta=beta,
                                  attention=attention, task=task, random_state=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est.fit(X, y)
    fit_time = time.perf_counter() - t0
    test_error = attention_error(yt, est.predict(Xt), task=task)
    if hasattr(est, "train_objective_"):
        train_error, objective = est.train_error_, est.train_objective_
    else:  # AMP: objective of factored ERM at S_, with the estimator's rank p = κd
        train_error = attention_error(y, est.predict(X), task=task)
        rank = resolve_width(width, d)
        objective = (n * train_error
                     + reg_lambda * math.sqrt(rank * d) * float(np.trace(est.S_))) / d ** 2
    out = dict(n_samples=n, test_error=float(test_error), train_error=float(train_error),
               train_objective=float(objective), fit_time=fit_time,
               converged=bool(getattr(est, "converged_", True)) and not any(
                   issubclass(w.category, ConvergenceWarning) for w in caught),
               n_iter=int(getattr(est, "n_iter_", 0)))
    if return_eigenvalues:
        out["eigenvalues"] = np.linalg.eigvalsh(est.S_)
    return out


def _fit_job(job):
    return fit_one(**job)


def run_fits(jobs, *, n_jobs=1, progress=None):
    """Run :func:`fit_one` on every job, sequentially or in joblib processes.

    Parameters
    ----------
    jobs : list of dict
        Keyword arguments of :func:`fit_one`.
    n_jobs : int or None, default=1
        None or 1: one after the other in this process; otherwise joblib workers
        (``-1``: all CPUs), each fit with one torch thread unless the job sets
        ``torch_threads``, since these problems are too small for intra-op parallelism.
    progress : callable, optional
        ``progress(n_done, n_total, job, result)``, called in this process as each fit
        finishes.

    Returns
    -------
    list of dict
        The results of :func:`fit_one`, in the order of ``jobs``.
    """
    if n_jobs is None or n_jobs == 1:
        backend, n_jobs = "sequential", 1
    else:
        backend = "joblib"
        jobs = [{**job, "torch_threads": job.get("torch_threads") or 1} for job in jobs]
    n_done = 0

    def on_result(index, result):
        nonlocal n_done
        n_done += 1
        if progress:
            progress(n_done, len(jobs), jobs[index], result)

    return map_jobs(_fit_job, [(job,) for job in jobs], backend=backend, n_jobs=n_jobs,
                    on_result=on_result)


def standard_error(values):
    """Standard error of the mean over seeds (NaN for a single seed: no spread to estimate)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    # one seed has no spread to estimate
    return float(stats.sem(values, ddof=1)) if values.size > 1 else float("nan")


def simulate_rows(groups, alphas, seeds, *, estimators, solver="adam", max_iter=5000,
                  n_test=2000, device="auto", n_jobs=1, per_seed=False, theory=False,
                  n_nodes=8192, torch_threads=1, progress=None):
    """Fit estimators on synthetic data for every parameter row, α and seed.

    Parameters
    ----------
    groups : list of dict
        Parameter rows (keys of :data:`MODEL_PARAMETERS`; ``n_features`` an integer).
    alphas : list of float
        Sample ratios (increasing, duplicates once).
    seeds : list of int
    estimators : list of {"tied", "direct", "amp"}
        The direct estimator runs only on rows with ``width_ratio`` None or 1.
    solver, max_iter, n_test, device, torch_threads
        Passed to :func:`fit_one`.
    n_jobs : int or None, default=1
        Passed to :func:`run_fits`.
    per_seed : bool, default=False
        One row per seed instead of means and standard errors over seeds.
    theory : bool, default=False
        Add ``predicted_test_error``, ``predicted_train_error``,
        ``predicted_train_objective`` and ``prediction_converged`` from the state
        evolution (the d → ∞ continuum for Wishart targets, the finite-d one otherwise).
    n_nodes : int, default=8192
        Quadrature nodes of the predictions.
    progress : callable, optional
        Passed to :func:`run_fits`.

    Returns
    -------
    list of dict
        One row per (parameters, α, estimator) with ``n_samples``, ``n_seeds``,
        ``test_error``, ``train_error``, ``train_objective`` (means and ``*_sem``),
        ``fit_time`` and ``converged``; with ``per_seed=True`` one row per seed with the
        results of :func:`fit_one`. Empty if no (row, estimator) pair applies.

    Raises
    ------
    ValueError or TypeError
        Naming the bad parameter; every point is checked before any fit.
    """
    jobs, keys = [], []
    for params in groups:
        if params["n_features"] is None:
            raise ValueError("n_features must be a finite dimension d for simulations "
                             "(e.g. 60), got None.")
        for a in sorted(set(alphas)):
            for est in estimators:
                if est == "direct" and params.get("width_ratio") not in (None, 1.0):
                    continue
                for s in seeds:
                    job = dict(estimator=est, alpha=a, seed=s, solver=solver,
                               max_iter=max_iter, n_test=n_test, device=device,
                               torch_threads=torch_threads,
                               **{k: v for k, v in params.items() if k != "parametrization"})
                    jobs.append(job)
                    keys.append((tuple(params.items()), a, est))
    # cheap checks before the long part
    for job in jobs:
        _check_alpha(job["alpha"])
        row_problem({**job, "parametrization": "factored"})
    results = run_fits(jobs, n_jobs=n_jobs, progress=progress)
    if per_seed:
        rows = [{**{k: v for k, v in job.items() if k not in _RUN_SETTINGS}, **r}
                for job, r in zip(jobs, results)]
    else:
        rows = _mean_over_seeds(jobs, keys, results)
    if theory:
        _add_predictions(rows, n_nodes)
    return rows


def _mean_over_seeds(jobs, keys, results):
    grouped = {}  # insertion-ordered: rows come out in job order
    for job, key, r in zip(jobs, keys, results):
        grouped.setdefault(key, (job, []))[1].append(r)
    rows = []
    for job, rs in grouped.values():
        row = {k: v for k, v in job.items() if k != "seed" and k not in _RUN_SETTINGS}
        row["n_samples"] = rs[0]["n_samples"]
        row["n_seeds"] = len(rs)
        for q in ("test_error", "train_error", "train_objective"):
            row[q] = float(np.mean([r[q] for r in rs]))
            row[q + "_sem"] = standard_error([r[q] for r in rs])
        row["fit_time"] = float(np.mean([r["fit_time"] for r in rs]))
        row["converged"] = all(r["converged"] for r in rs)
        rows.append(row)
    return rows


def _add_predictions(rows, n_nodes):
    from .theory import solve_state_evolution

    cache = {}
    for row in rows:
        par = "direct" if row["estimator"] == "direct" else "factored"
        p = {k: row.get(k) for k in MODEL_PARAMETERS}
        p["parametrization"] = par
        if par == "direct":
            p["width_ratio"] = None
        key = (tuple(p.items()), row["alpha"])
        if key not in cache:
            # Wishart targets have a continuum limit: predict it, not one finite-d draw
            problem = row_problem({**p, "n_features": None if p["target"] == "wishart"
                                   else p["n_features"]})
            cache[key] = solve_state_evolution(row["alpha"], problem,
                                               **_solver_options(n_nodes, None, None))
        res = cache[key]
        row["predicted_test_error"] = res.test_error
        row["predicted_train_error"] = res.train_error
        row["predicted_train_objective"] = res.train_objective
        row["prediction_converged"] = res.converged


# ----------------------------------------------------------------------------------------
# phase diagrams
# ----------------------------------------------------------------------------------------

def phase_diagram(params, alphas, reg_lambdas, *, n_nodes=8192, tol=None, max_iter=None,
                  n_jobs=1, verbose=0, correction="auto"):
    """State-evolution phase diagram of one parameter row over ``alphas × reg_lambdas``.

    Parameters
    ----------
    params : dict
        One parameter row (its ``reg_lambda`` is ignored: the grid sets λ).
    alphas, reg_lambdas : list of float
        The grid.
    n_nodes, tol, max_iter
        Solver settings (``tol``, ``max_iter`` None: the solver's defaults).
    n_jobs : int, default=1
        Workers over the λ rows (1: in this process; else joblib).
    verbose : int, default=0
        > 0 shows a progress bar.
    correction : str, default="auto"
        The finite-size correction (:func:`skattn.theory.solve_state_evolution`).

    Returns
    -------
    PhaseDiagram

    Raises
    ------
    ValueError or TypeError
        Naming the bad parameter, before anything is solved.
    """
    from .theory import solve_phase_diagram

    for a in alphas:
        _check_alpha(a)
    problem = row_problem({**params, "reg_lambda": 0.0})
    return solve_phase_diagram(alphas, reg_lambdas, problem, n_jobs=n_jobs,
                               backend="sequential" if n_jobs == 1 else "joblib",
                               verbose=verbose,
                               **_solver_options(n_nodes, tol, max_iter, correction))


PHASE_DIAGRAM_COLUMNS = ("alpha", "reg_lambda", "test_error", "train_error",
                         "train_objective", "m", "q", "sigma", "certified_fraction",
                         "uncertified_effect", "converged")


def phase_diagram_rows(diagram):
    """One row per grid point of a :class:`~skattn.theory.PhaseDiagram` (``alpha`` fastest).

    Returns
    -------
    list of dict
        Keys :data:`PHASE_DIAGRAM_COLUMNS`.
    """
    rows = []
    for i, lam in enumerate(diagram.reg_lambdas):
        for j, a in enumerate(diagram.alphas):
            row = {"alpha": float(a), "reg_lambda": float(lam)}
            for name in PHASE_DIAGRAM_COLUMNS[2:]:
                value = getattr(diagram, name)[i, j]
                row[name] = bool(value) if name == "converged" else float(value)
            rows.append(row)
    return rows
