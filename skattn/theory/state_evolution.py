"""The state-evolution solver: problem → Gaussian core → correction table → one result
(docs: Theory §4 (factored) and §5 (direct); docs: Finite-size
corrections).

:func:`solve_state_evolution` solves the Gaussian core (:mod:`skattn.theory.core`) and then
applies the ordered table of finite-size corrections (:mod:`skattn.theory.corrections`);
the result records which correction produced it and why. :func:`explain` shows the table's
decisions for a problem.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from .._validation import MAX_ALPHA, MIN_ALPHA, broadcast_to_grid, check_scalar_range
from .._warnings import warn
from ._blas import with_single_blas_thread
from .core import OPTION_NAMES, SolverOptions, resolve_options, solve_core
from .corrections import apply_table, check_correction, decide
from .corrections.rules import SPIKY_SHARE_EDGES
from .problem import (
    MODEL_KEYWORDS,
    PARAMETRIZATIONS,
    StateEvolutionProblem,
    resolve_problem,
    resolve_target_law,
    split_model_keywords,
    top_mode_share,
    warn_finite_size,
    warn_outside_domain,
)
from .result import StateEvolutionResult
from .thresholds import ridgeless_below_threshold

__all__ = ["StateEvolutionResult", "StateEvolutionProblem", "SolverOptions", "PARAMETRIZATIONS",
           "solve_state_evolution", "state_evolution_curve", "explain", "DecisionTable",
           "resolve_target_law"]

# PARAMETRIZATIONS and resolve_target_law live in problem.py, StateEvolutionResult in
# result.py; imported here for old imports

#: the route flags of earlier versions, replaced by ``correction=``
_REMOVED_FLAGS = ("exact_gram", "spiked", "leverage")


def _split_call(alpha, problem, correction, options, model, caller):
    """α, the problem, the correction name and the options of a solver call."""
    alpha = check_scalar_range(alpha, "alpha", low=MIN_ALPHA, high=MAX_ALPHA)
    correction = check_correction(correction)
    flags = sorted(set(model) & set(_REMOVED_FLAGS))
    if flags:
        raise TypeError(f"{caller}() got {flags}: the route flags are replaced by "
                        "correction= ('auto', 'none' or a correction's name; "
                        "skattn.theory.explain shows the table).")
    legacy = {k: model.pop(k) for k in list(model) if k in OPTION_NAMES}
    if legacy:
        warn(f"passing {sorted(legacy)} to {caller}() as keywords is deprecated; pass "
             f"options={{...}} (skattn.theory.SolverOptions).", FutureWarning)
    options = resolve_options(options, **legacy)
    if problem is None and "reg_lambda" not in model:
        raise TypeError(f"{caller}() needs a problem or the keyword 'reg_lambda'.")
    unknown = sorted(set(model) - set(MODEL_KEYWORDS))
    if unknown:
        raise TypeError(f"{caller}() got unexpected keyword(s) {unknown}; the model keywords "
                        f"are {list(MODEL_KEYWORDS)} and the options {list(OPTION_NAMES)}.")
    problem = resolve_problem(problem, caller, **model)
    return alpha, problem, correction, options


@with_single_blas_thread
def solve_state_evolution(alpha, problem=None, *, correction="auto", options=None, **model):
    """Solve the state evolution of factored (or direct) ERM at one point.

    The model is given either as a :class:`~skattn.theory.StateEvolutionProblem` or by its
    keywords (``n_tokens``, ``reg_lambda``, ``target``, …: then the problem is built from
    them), not both. The Gaussian core is solved first; at finite d the ordered table of
    finite-size corrections then refines it (docs: Finite-size
    corrections), and the result records which correction was used and why.

    Parameters
    ----------
    alpha : float
        Sample ratio α = n/d² in ``[1e-12, 1e6]``.
    problem : StateEvolutionProblem, optional
        The model. Without it, ``reg_lambda`` (and usually ``n_tokens`` and ``target``) are
        required as keywords.
    correction : str, default="auto"
        "auto" applies the correction table; "none" returns the Gaussian core's fixed point;
        a correction's name ("spiked", "leverage", "exact_gram") forces it (ValueError with
        the reason where its domain excludes the problem). :func:`explain` shows the table.
    options : SolverOptions or dict, optional
        The numerical options (``n_nodes``, ``tol``, ``max_iter``, ``damping``, ``init``,
        ``sigma_hat_form``, ``random_state``, ``n_coarse_nodes``;
        :class:`~skattn.theory.SolverOptions`). Passing them as keywords still works but is
        deprecated (FutureWarning).
    **model
        The problem's fields, for a call without ``problem``:

        - ``n_tokens`` (int): sequence length T (≥ 2 for softmax, ≥ 1 for linear);
        - ``reg_lambda`` (float ≥ 0): λ in ``Σ_μ ℓ_μ + λ‖W‖²_F`` (``λ‖V‖²_F`` direct);
        - ``target``: a Target (``WishartTarget(0.5)``), a SpectralLaw, or a teacher for the
          same-instance prediction of its own S0 at its d
          (:meth:`StateEvolutionProblem.from_teacher`);
        - ``width_ratio`` (κ = p/d, default 1), ``beta``, ``target_beta`` (default 1),
          ``noise`` (Δ ≥ 0, default 0), ``attention`` ("softmax" or "linear"), ``task``
          ("seq2lab" or "seq2seq"), ``parametrization`` ("factored" or "direct"),
          ``n_features`` (d, or None for the d → ∞ continuum), ``token_kurtosis`` (κ4 ≥ −2
          of the token entries, default 0).

    Returns
    -------
    StateEvolutionResult
        ``result.correction``, ``result.correction_weight`` and
        ``result.correction_reason`` say which correction produced it;
        ``result.decisions`` is the whole table.

    Raises
    ------
    ValueError
        If a problem and a model keyword are both given (use ``problem.replace``), a
        keyword contradicts the teacher given as ``target``, ``correction`` is not a known
        name or is forced outside its domain, or the channel at ``n_tokens`` and
        ``n_nodes`` would exceed the memory limit (environment variable
        ``SKATTN_MEMORY_LIMIT_GB``, default 8 GiB).
    TypeError
        For an unknown keyword, or the removed flags ``exact_gram``, ``spiked``,
        ``leverage`` (use ``correction``).

    Warns
    -----
    DomainWarning
        Where the prediction leaves the validated domain (a spiky softmax target that no
        correction models, a binding rank constraint at small d; see
        :func:`skattn.theory.problem.warn_outside_domain`).
    FiniteSizeWarning
        For factored softmax with T = 2 at finite ``d ≤ 160`` and small λ where the leverage
        correction does not carry the prediction (see
        :func:`skattn.theory.problem.warn_finite_size`).

    See Also
    --------
    explain : the correction table's decisions for a problem.

    Notes
    -----
    The solve runs with one BLAS thread (woken OpenBLAS threads spin against the compiled
    prox's threads, which take the cores); the previous limits come back after it.

    Where no fixed point is found from a cold start (no ``init``), the core converges at
    10λ (else 100λ; 1e-3 and 1e-2 for λ = 0) and follows that fixed point back down to λ
    in steps of √10, each warm-started from the last
    (:func:`skattn.theory.core.iteration.lambda_continuation`); the message then says so.

    Factored ``reg_lambda=0`` at or below the interpolation threshold
    (:func:`~skattn.theory.thresholds.ridgeless_below_threshold`) has a whole set of
    minimisers (every PSD interpolant of the training set) and no fixed point (Σ → ∞).
    The result there is the λ → 0⁺ limit, the minimum-trace interpolant that weight decay
    selects: solves at λ = 1e-2, 1e-3, … (each warm-started from the last, Σ scaled by
    the step, as Σ ∝ 1/λ on this branch) until the test error, m, q and the trace change by
    less than 1e-3 (relative) over a decade. ``extras["ridgeless_limit"]`` records the
    path, the last λ and that change; ``sigma`` and ``sigma_hat`` are those of the last λ,
    the objective is the λ = 0 one (docs: Errors, "The atom at zero and λ = 0").
    """
    alpha, problem, correction, options = _split_call(alpha, problem, correction, options,
                                                      model, "solve_state_evolution")
    if ridgeless_below_threshold(alpha, problem):
        return _ridgeless_limit(alpha, problem, correction, options)
    core = _solve_core(alpha, problem, options)
    decisions, anchors = decide(alpha, problem, core, correction)
    result = apply_table(alpha, problem, core, options, decisions, anchors, solve_core)
    _warn(problem, core, decisions)
    return result


#: The λ → 0⁺ limit below the interpolation threshold: the first λ of the path, its step
#: (a decade), the relative change over one step at which the limit is taken, and the
#: smallest λ tried.
RIDGELESS_START = 1e-2
RIDGELESS_STEP = 10.0
RIDGELESS_RTOL = 1e-3
RIDGELESS_MIN_LAMBDA = 1e-12


def _solve_core(alpha, problem, options):
    """:func:`~skattn.theory.core.solve_core`, where a λ → 0⁺ limit given as ``init`` is
    no start: its state (Σ of its last, tiny λ) belongs to another branch."""
    init = options.init
    if init is not None and getattr(init, "extras", {}).get("ridgeless_limit") is not None:
        options = options.replace(init=None)
    return solve_core(alpha, problem, options)


def _limit_quantities(result):
    return np.array([result.test_error, result.m, result.q, result.trace])


def _ridgeless_limit(alpha, problem, correction, options):
    """The λ → 0⁺ limit of the fixed point for factored λ = 0 below the interpolation
    threshold (:func:`solve_state_evolution`, Notes)."""
    init = options.init
    lam, start = RIDGELESS_START, None
    limit = getattr(init, "extras", {}).get("ridgeless_limit") if init is not None else None
    if limit is not None and init.converged:
        # a neighbouring point's limit (a curve): start two decades above its last λ
        lam = limit["reg_lambda"] * RIDGELESS_STEP ** 2
        start = (init.m, init.q, init.sigma / RIDGELESS_STEP ** 2)
    elif init is not None:
        start = init
    path, prev, change, n_iter, sigma_before = [], None, np.inf, 0, np.nan
    # each step's warnings once, at the user's line (the solves at λ > 0 repeat them)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        while lam >= RIDGELESS_MIN_LAMBDA:
            res = solve_state_evolution(alpha, problem.replace(reg_lambda=lam),
                                        correction=correction,
                                        options=options.replace(init=start))
            n_iter += res.n_iter
            if not res.converged:
                break
            path.append((lam, float(res.test_error)))
            if prev is not None:
                old, new = _limit_quantities(prev), _limit_quantities(res)
                change = float(np.max(np.abs(new - old) / np.maximum(np.abs(new), 1e-300)))
            prev = res
            if change < RIDGELESS_RTOL:
                break
            collapsed = not (res.q > 0 and res.sigma > 0)
            # Σ grows like 1/λ on the interpolating branch, more slowly next to the
            # threshold: the next start extrapolates the last decade's growth
            growth = RIDGELESS_STEP if len(path) < 2 else float(np.clip(
                res.sigma / sigma_before, 1.0, RIDGELESS_STEP))
            sigma_before = res.sigma
            start = None if collapsed else (res.m, res.q, res.sigma * growth)
            lam = float(f"{lam / RIDGELESS_STEP:.12g}")
    seen = set()
    for w in caught:
        key = (w.category, str(w.message))
        if key not in seen:
            seen.add(key)
            warn(str(w.message), w.category)
    if prev is None:   # not even the first λ converged: report that solve, λ = 0 named
        res.message += ("; reg_lambda=0 is below the interpolation threshold, where the "
                        f"λ → 0⁺ limit is taken, and no solve of its path converged "
                        f"(first at reg_lambda={lam:g})")
        return res
    converged = change < RIDGELESS_RTOL
    message = (f"converged: the λ → 0⁺ limit (reg_lambda=0 is below the interpolation "
               f"threshold, where the minimiser is not unique), reached at "
               f"reg_lambda={path[-1][0]:.0e} (relative change {change:.1e} over the last "
               "decade)" if converged else
               f"the λ → 0⁺ limit was not reached: relative change {change:.1e} over the "
               f"last decade above {RIDGELESS_RTOL:g}, last converged solve at "
               f"reg_lambda={path[-1][0]:.0e}" + ("" if res is prev else
                                                  f" ({res.message})"))
    params = dict(prev.params, reg_lambda=0.0)
    extras = dict(prev.extras, ridgeless_limit=dict(reg_lambda=path[-1][0],
                                                    relative_change=change,
                                                    path=tuple(path)))
    return replace(prev, problem=problem, params=params, extras=extras,
                   train_objective=alpha * prev.train_error, converged=converged,
                   message=message, n_iter=n_iter)


def _warn(problem, core, decisions):
    weights = {d.name: d.weight for d in decisions}
    spiked = weights.get("spiked", 0.0)
    warn_outside_domain(problem, core.eigenvalues, rank_capped=core.rank_capped,
                        positive_fraction=core.positive_fraction,
                        spiky_modelled=spiked >= 1.0 or (
                            core.eigenvalues is not None and spiked == 0.0
                            and _share(core.eigenvalues) < SPIKY_SHARE_EDGES[0]),
                        stacklevel=4)
    warn_finite_size(problem, modelled=weights.get("leverage", 0.0) >= 0.5, stacklevel=4)


def _share(eigenvalues):
    return top_mode_share(eigenvalues)


class DecisionTable(list):
    """The decisions of the correction table for one problem (a list of
    :class:`~skattn.theory.CorrectionDecision`), printed as a table."""

    def __init__(self, decisions, *, correction, core_test_error):
        super().__init__(decisions)
        self.correction = correction
        self.core_test_error = core_test_error

    @property
    def applied(self):
        """The names of the corrections that enter the prediction."""
        return [d.name for d in self if d.applies]

    def __str__(self):
        rows = [f"correction table (correction={self.correction!r}):"]
        for d in self:
            mark = f"applies, weight {d.weight:.2f}" if d.applies else "does not apply"
            rows.append(f"  {d.name:<11} {mark}: {d.reason}")
        if not self.applied:
            rows.append("  -> the Gaussian core alone")
        return "\n".join(rows)

    def _repr_pretty_(self, printer, cycle):  # IPython
        printer.text(str(self))


def explain(alpha, problem=None, *, correction="auto", options=None, **model):
    """The correction table's decisions for a problem: each correction, whether it applies
    (with its weight) and why or why not.

    The Gaussian core is solved (a binding rank cap or a collapse to S = 0 decide some
    rows); no correction is computed.

    Parameters
    ----------
    alpha, problem, correction, options, **model
        As in :func:`solve_state_evolution`.

    Returns
    -------
    DecisionTable
        A list of :class:`~skattn.theory.CorrectionDecision` that prints as a table.

    Examples
    --------
    >>> from skattn.theory import explain, StateEvolutionProblem
    >>> print(explain(0.3, StateEvolutionProblem(n_tokens=2, reg_lambda=0.1)))
    ... # doctest: +SKIP
    """
    alpha, problem, correction, options = _split_call(alpha, problem, correction, options,
                                                      model, "explain")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        core = _solve_core(alpha, problem, options)
    decisions, _ = decide(alpha, problem, core, correction)
    return DecisionTable(decisions, correction=correction,
                         core_test_error=core.result.test_error)


def _curve_chunk(alphas, problem, reg_lambdas, options, correction):
    return state_evolution_curve(alphas, problem, reg_lambda=reg_lambdas, options=options,
                                 correction=correction)


def state_evolution_curve(alphas, problem=None, *, reg_lambda=None, n_jobs=None, verbose=0,
                          **kwargs):
    """State evolution along a curve of α (or of λ), warm-started point to point.

    Parameters
    ----------
    alphas : array-like of float
        The α values (solved in the given order; sort them for the best warm starts).
    problem : StateEvolutionProblem, optional
        The model; without it, ``kwargs`` carry the model keywords (``n_tokens``,
        ``target``, …) as for :func:`solve_state_evolution`.
    reg_lambda : float or array-like or None, default=None
        One λ, or one per α (a λ curve at fixed α: pass ``alphas`` constant). Required
        without a problem; with one, it replaces ``problem.reg_lambda`` along the curve
        (None: ``problem.reg_lambda``).
    n_jobs : int or None
        With n_jobs > 1 the curve is cut into contiguous chunks solved in parallel
        (:func:`skattn.parallel.map_jobs` on joblib), each warm-started along itself.
    verbose : int
        > 0 shows a progress bar.
    **kwargs
        Passed to :func:`solve_state_evolution` (``correction``, ``options``, or the
        model keywords without a problem).

    Returns
    -------
    list of StateEvolutionResult
    """
    correction = check_correction(kwargs.pop("correction", "auto"))
    options = kwargs.pop("options", None)
    model, legacy = split_model_keywords(kwargs)
    flags = sorted(set(legacy) & set(_REMOVED_FLAGS))
    if flags:
        raise TypeError(f"state_evolution_curve() got {flags}: use correction=.")
    options = resolve_options(options, **legacy)
    if problem is None:
        if reg_lambda is None:
            raise TypeError("state_evolution_curve() needs a problem or the keyword "
                            "'reg_lambda'.")
        # λ is validated point by point below; the first one stands in until then
        first = np.ravel(np.asarray(reg_lambda, dtype=float))
        model["reg_lambda"] = float(first[0]) if first.size else 0.0
    problem = resolve_problem(problem, "state_evolution_curve", **model)
    if reg_lambda is None:
        reg_lambda = problem.reg_lambda
    alphas = np.atleast_1d(np.asarray(alphas, dtype=float))
    lams = broadcast_to_grid(reg_lambda, "reg_lambda", alphas.shape, "alphas")
    if alphas.ndim != 1 or alphas.size == 0:
        raise ValueError(f"alphas must be a non-empty 1-D array, got shape {alphas.shape}.")
    if n_jobs is not None and n_jobs != 1 and alphas.size > 1:
        from ..parallel import map_jobs, n_workers   # lazily: the theory's import graph

        n_chunks = min(alphas.size, n_workers(n_jobs))
        chunks = np.array_split(np.arange(alphas.size), n_chunks)
        parts = map_jobs(_curve_chunk, [(alphas[c], problem, lams[c], options, correction)
                                        for c in chunks],
                         backend="joblib", n_jobs=n_jobs)
        return [r for part in parts for r in part]
    from tqdm.auto import tqdm
    results, prev = [], None
    for a, lam in tqdm(list(zip(alphas, lams)), disable=not verbose, desc="state evolution"):
        point = problem.replace(reg_lambda=lam)
        res = solve_state_evolution(a, point, correction=correction,
                                    options=options.replace(init=prev))
        if not res.converged and prev is not None:  # warm start failed: try cold
            cold = solve_state_evolution(a, point, correction=correction, options=options)
            if cold.converged or cold.residual < res.residual:
                res = cold
        results.append(res)
        prev = res if res.converged else prev
    return results
