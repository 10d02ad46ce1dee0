"""The Gaussian core of the state evolution: one fixed point, no finite-size correction.

:func:`solve_core` solves a validated problem at one α: the fixed-point map on the
quadrature nodes, coarse to fine, continuation in λ where a cold start finds no fixed point,
and the collapse to S = 0 under a large trace penalty (docs: Theory §4 "The Gaussian
core"). At finite d it solves at ``α_eff = α d/(d+1)`` (the degrees of freedom of a symmetric
matrix), and at the nominal α where a rank cap binds (the estimator then has rank p, not
d(d+1)/2 degrees of freedom). Every finite-size correction starts from this solution
(:mod:`skattn.theory.corrections`); nothing here knows about them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._validation import channel_memory_bytes, check_memory
from .._blas import with_single_blas_thread
from ..channels import GaussianNodes, remembered_minimisers, test_error
from ..denoisers import FactoredDenoiser, SampledDenoiser
from ..problem import StateEvolutionProblem
from ..result import StateEvolutionResult
from .fixed_point_map import (COARSE_HANDOVER, COARSE_TOL, HANDOVER_CALLS,
                              SECANT_MIN_STEP, FixedPointMap, coarse_calls, coarse_size,
                              get_field, handover_orthogonal_threshold, iterate,
                              iterate_orthogonal, iterates_warm, starts)
from .iteration import solve_or_continue
from .options import SolverOptions, resolve_options
from .progress import SolveReport
from .sensitivity import uncertified_effect, unestimated_effect

__all__ = ["CoreSolution", "RANK_CAP_RAMP", "rank_cap_weight", "solve_core"]


@dataclass
class CoreSolution:
    """The core's fixed point and what the correction table needs to know about it.

    Attributes
    ----------
    result : StateEvolutionResult
        The Gaussian fixed point (``correction == "none"``).
    rank_capped : bool
        Whether a rank cap binds at the fixed point.
    collapsed : bool
        Whether it collapsed to S = 0 (then no correction applies).
    eigenvalues : ndarray of shape (d,) or None
        The target's eigenvalues at d (None in the continuum).
    positive_fraction : float
        Under a rank cap (finite d), the fraction of positive eigenvalues without it (the
        cap binds where this exceeds the width ratio; nan without a cap).
    alpha_fixed_point : float or None
        The sample ratio the fixed point was solved at (α_eff, α, or between them across
        the rank-cap ramp); None for a stand-in.
    secants : tuple of ndarray or None
        The last ``(dX, dR)`` of the iteration in the plain variables
        (:meth:`FixedPointMap.secants`): a correction's map, close to the core's, starts
        its Anderson mixing with them. None where the iteration ended in other variables.
    minimisers : ndarray or None
        The prox minimisers ``z*`` of the last evaluation on the quadrature nodes (the warm
        start of a correction's channel on the same points); None without (linear).
    """

    result: StateEvolutionResult
    rank_capped: bool
    collapsed: bool
    eigenvalues: np.ndarray | None
    positive_fraction: float = np.nan
    alpha_fixed_point: float | None = None
    secants: tuple | None = None
    minimisers: np.ndarray | None = None


@with_single_blas_thread
def solve_core(alpha, problem, options=None):
    """The Gaussian state-evolution fixed point of ``problem`` at ``alpha``.

    Parameters
    ----------
    alpha : float
        Sample ratio α = n/d² (validated by the caller).
    problem : StateEvolutionProblem
    options : SolverOptions or dict or None, default=None

    Returns
    -------
    CoreSolution

    Notes
    -----
    Runs with one BLAS thread (:func:`skattn.theory._blas.single_blas_thread`): woken
    OpenBLAS threads would spin against the compiled prox's threads.
    """
    if not isinstance(problem, StateEvolutionProblem):
        raise TypeError(f"problem must be a StateEvolutionProblem, got "
                        f"{type(problem).__name__}.")
    options = options if isinstance(options, SolverOptions) else resolve_options(options)
    check_memory(channel_memory_bytes(problem.n_tokens, options.n_nodes),
                 f"n_tokens={problem.n_tokens} with n_nodes={options.n_nodes} quadrature "
                 "nodes")
    alpha_eff = problem.effective_alpha(alpha)
    solution = _solve_or_continue(alpha, alpha_eff, problem, options)
    weight = rank_cap_weight(solution.positive_fraction, problem.width_ratio)
    if weight > 0 and alpha_eff != alpha and not solution.collapsed:
        # a binding rank cap: the estimator has rank p, not the d(d+1)/2 degrees of freedom
        # behind α_eff, so the nominal α is used; between the two, a ramp in how far the
        # cap binds (docs: Theory §4 "The Gaussian core"); inside the ramp from the α_eff
        # fixed point nearby, at its end the nominal α solved as it would be alone
        start = solution.result if weight < 1 and solution.result.converged else options.init
        alpha_ramp = alpha_eff + weight * (alpha - alpha_eff)
        solution = _solve_or_continue(alpha, alpha_ramp, problem, options.replace(init=start))
    return solution


#: The ramp from α_eff to α in the ratio of the uncapped positive fraction to the width
#: ratio κ: 0 up to 1 (the cap does not bind), 1 from ``1 + RANK_CAP_RAMP`` on.
RANK_CAP_RAMP = 0.1


def rank_cap_weight(positive_fraction, width_ratio):
    """How far a rank cap binds, in [0, 1]: the C¹ smoothstep of
    ``positive_fraction / width_ratio`` from 1 to ``1 + RANK_CAP_RAMP`` (0 where the
    fraction is unknown, i.e. no cap).

    Parameters
    ----------
    positive_fraction : float
        The fraction of positive eigenvalues without the cap (nan: no cap).
    width_ratio : float
        κ = p/d.

    Returns
    -------
    float
    """
    if not np.isfinite(positive_fraction) or width_ratio >= 1:
        return 0.0
    t = (positive_fraction / width_ratio - 1.0) / RANK_CAP_RAMP
    if t <= 0:
        return 0.0
    if t >= 1:
        return 1.0
    return float(t * t * (3.0 - 2.0 * t))


def _solve_or_continue(alpha, alpha_fixed_point, problem, options):
    """:func:`_solve`; where a cold start finds no fixed point, continuation in λ
    (:func:`~skattn.theory.core.iteration.solve_or_continue`)."""
    solved = []

    def solve(reg_lambda, init):
        point = problem if reg_lambda == problem.reg_lambda else \
            problem.replace(reg_lambda=reg_lambda)
        solved.append(_solve(alpha, alpha_fixed_point, point, options.replace(init=init)))
        return solved[-1].result

    result = solve_or_continue(solve, problem.reg_lambda, options.init)
    return next(out for out in reversed(solved) if out.result is result)


def _solve(alpha, alpha_fixed_point, problem, options):
    """The fixed point of a validated problem, solved at ``alpha_fixed_point``, reported as
    ``options.verbose`` asks (:class:`~skattn.theory.core.progress.SolveReport`).

    Returns a :class:`CoreSolution` (the objective at the nominal ``alpha``).
    """
    report = SolveReport(options.verbose, desc=f"state evolution (alpha={alpha:.4g}, "
                                               f"reg_lambda={problem.reg_lambda:.3g})")
    solution = None
    try:
        solution = _solve_reported(alpha, alpha_fixed_point, problem, options, report)
    finally:
        report.close(None if solution is None else solution.result)
    return solution


def _solve_reported(alpha, alpha_fixed_point, problem, options, report):
    """:func:`_solve`, each evaluation of its maps told to ``report``."""
    init, n_nodes, tol, max_iter = options.init, options.n_nodes, options.tol, options.max_iter
    damping, random_state = options.damping, options.random_state
    sigma_hat_form = options.sigma_hat_form_for(problem.attention)
    law, eig0 = problem.target_law(random_state)
    Q0 = float(np.mean(eig0 ** 2)) if eig0 is not None else law.second_moment()
    channel = problem.channel()
    denoiser = problem.denoiser(law, eig0, random_state)
    nodes = GaussianNodes(2 * channel.K, n_points=n_nodes, seed=random_state)
    noise = problem.noise
    kurtosis = problem.token_kurtosis
    t0 = float(np.mean(eig0)) if eig0 is not None else law.moment(1)  # Tr S0/d

    def at_softmax_floor(fp_map):
        # a softmax stall is the floor of minimisers switching at the quadrature's
        # resolution, the same from any start; linear attention (closed-form prox) stalls
        # near perfect recovery, where the original starts reach the orthogonal variables
        return problem.attention == "softmax" and fp_map.stall_floor is not None

    def make_map(node_set, prior_side=denoiser):
        fp_map = FixedPointMap(alpha_fixed_point, channel, prior_side, Q0, noise, node_set,
                               sigma_hat_form, token_kurtosis=kurtosis, target_trace=t0)
        fp_map.report = report if report.verbose else None
        return fp_map

    fixed_point_map = make_map(nodes)
    # with κ4 ≠ 0 the state carries t = Tr S/d; a start without one takes t ≈ (m/Q0) t0,
    # the trace of the projection of S on S0
    with_t = fixed_point_map.with_trace
    def full(m, q, sigma, t=None):  # noqa: E306
        if not with_t:
            return (m, q, sigma)
        return (m, q, sigma, (m / Q0) * t0 if t is None else t)

    def first_step(fp_map):
        # one state-evolution step from the zero estimator (m = q = 0, Σ → 0⁺): the default
        # start, and the test of the collapsed fixed point S = 0 under a large trace penalty
        return fp_map.step(*full(0.0, 0.0, 1e-10, 0.0))

    n_coarse = coarse_size(n_nodes, options.n_coarse_nodes, problem.attention, init is not None,
                           isinstance(denoiser, FactoredDenoiser))
    other_calls = 0      # evaluations on the coarse nodes and in a failed handover
    converged = False
    if n_coarse:
        # coarse to fine: most iterations on a prefix of the Sobol nodes (a balanced Sobol
        # set itself; all of them for linear attention) with the factored threshold on one
        # fixed draw as prior side (a tenth of the free convolution's cost, O(1/d) off),
        # then the exact equations on all nodes from there; the reported fixed point is the
        # fine one, so only the path changes (tests/theory/test_speed_accuracy.py)
        start_prior = SampledDenoiser(denoiser, random_state=random_state) \
            if isinstance(denoiser, FactoredDenoiser) else denoiser
        coarse_map = make_map(nodes.subset(n_coarse), start_prior)
        _, coarse_prior0 = first_step(coarse_map)
        # Powell's hybrid method: a finite-difference Jacobian costs three coarse
        # evaluations, and where Anderson's steps are rejected (β > 3) it does not creep
        x_c, norm_c, _ = iterate(coarse_map, channel,
                                  starts(coarse_map, init, coarse_prior0, Q0, full),
                                  tol=max(tol, COARSE_TOL),
                                  max_iter=min(max_iter, coarse_calls(problem.attention)),
                                  damping=damping, polish=False,
                                  method="hybrid" if problem.attention == "softmax" else
                                  "anderson")
        if norm_c < COARSE_HANDOVER:
            # in the fine map's variables (the coarse one may end in the orthogonal ones);
            # the coarse Jacobian there stands in for the fine one's at first
            state_c = coarse_map.from_x(x_c)
            coarse_map.orthogonal = False
            x_c = coarse_map.to_x(*state_c)
            secants = coarse_map.jacobian_secants(x_c, warm=iterates_warm(channel, near=True)) \
                if problem.attention == "softmax" \
                else coarse_map.secants(min_step=SECANT_MIN_STEP * tol)
            other_calls = coarse_map.evaluations
            x, res_norm, converged = iterate(
                fixed_point_map, channel, [x_c], tol=tol,
                max_iter=min(max_iter, HANDOVER_CALLS), damping=damping, secants=secants,
                near=True)
            if not converged:
                x, res_norm, converged = _handover_orthogonal(
                    fixed_point_map, x, res_norm, tol=tol, max_iter=max_iter,
                    damping=damping)
        else:
            other_calls = coarse_map.evaluations
        if not converged and not at_softmax_floor(fixed_point_map):
            # the path without the coarse stage, exactly: fresh nodes (same points) leave
            # the prox memory of the handover behind
            other_calls += fixed_point_map.evaluations
            fixed_point_map = make_map(nodes.subset(n_nodes))
    step0 = None
    if not converged and not at_softmax_floor(fixed_point_map):
        # a usable warm start needs no step from the zero estimator (one evaluation of ~10
        # per point on a curve): it is taken only as a fallback start or to test collapse
        warm_usable = isinstance(init, tuple) or (
            isinstance(init, StateEvolutionResult) and init.q > 0 and init.sigma > 0)
        if not warm_usable:
            step0 = first_step(fixed_point_map)
        x, res_norm, converged = iterate(
            fixed_point_map, channel,
            starts(fixed_point_map, init, None if step0 is None else step0[1], Q0, full),
            tol=tol, max_iter=max_iter, damping=damping, near=warm_usable)
        if not converged and step0 is None:
            step0 = first_step(fixed_point_map)
    collapsed = False
    if not converged and step0 is not None and step0[1].q == 0.0:
        # a large trace penalty removes every direction: S = 0 (m = q = 0) is the fixed
        # point, which the log-variables cannot reach
        collapsed, converged, res_norm = True, True, 0.0
    n_calls = fixed_point_map.evaluations + other_calls
    stall_floor = None if converged else fixed_point_map.stall_floor
    if converged:
        message = "converged"
    elif stall_floor is not None:
        message = (f"fixed-point residual {res_norm:.2e} above tol={tol:.1e} after "
                   f"{n_calls} evaluations: the iteration stalled at this floor, where the "
                   "map is discontinuous at the quadrature's resolution (nodes whose prox "
                   "switches between local minimisers); more n_nodes lowers the floor, a "
                   "larger tol accepts it")
    else:
        message = (f"fixed-point residual {res_norm:.2e} above tol={tol:.1e} after "
                   f"{n_calls} evaluations; try continuation (warm start from a "
                   "nearby point), more n_nodes or a larger tol")

    if collapsed:
        m, q, sigma = 0.0, 0.0, 0.0
        state = full(m, q, sigma, 0.0)
        out, prior = step0
        message = ("converged: collapsed to S = 0 (the trace penalty removes every "
                   "direction)")
    else:
        state = fixed_point_map.from_x(x)
        m, q, sigma = state[:3]
        calls = fixed_point_map.n_calls
        out, prior = fixed_point_map.step(*state, certify=True)
        n_calls += fixed_point_map.n_calls - calls
    m_hat, q_hat, sigma_hat = (get_field(out, k) for k in ("m_hat", "q_hat", "sigma_hat"))
    train_error = get_field(out, "train_error")

    def test_error_at(s):
        return test_error(channel, m=s[0], q=s[1], Q0=Q0, noise=noise, nodes=nodes,
                          **fixed_point_map._kurtosis_keywords(s[-1]))

    e_test = test_error_at(state)
    # how far the uncertified nodes can move the conjugates (a bound; empty: no certificate
    # needed), and the prediction to first order (None where not estimated): at the fixed
    # point, or where the iteration stopped at a floor of the quadrature's resolution (as
    # near a fixed point as this node set allows), at its best point
    bound = dict(getattr(out, "uncertified_bound", None) or {})
    effect = unestimated_effect(bound)
    if effect is None and (converged or stall_floor is not None) and not collapsed:
        effect = uncertified_effect(fixed_point_map, state, out, bound, test_error_at) or None
    trace = prior.trace
    if problem.parametrization == "factored":
        objective = alpha * train_error + problem.reg_trace * trace
    else:  # λ‖V‖²_F = λ d ‖S‖²_F → per d²: λ q
        objective = alpha * train_error + problem.reg_lambda * q
    finite_eigenvalues = prior.eigenvalues
    if problem.n_features is not None and hasattr(denoiser, "learned_spectrum"):
        finite_eigenvalues = denoiser.learned_spectrum(prior)
    values = [m, q, sigma, m_hat, q_hat, sigma_hat, e_test, train_error, objective]
    if not np.all(np.isfinite(values)):
        converged = False
        message = "non-finite values at the fixed point: " + message
    result = StateEvolutionResult(
        alpha=alpha, m=m, q=q, sigma=sigma, m_hat=m_hat, q_hat=q_hat, sigma_hat=sigma_hat,
        Q0=Q0, test_error=e_test, train_error=train_error, train_objective=objective,
        eta=prior.eta, delta=prior.delta, epsilon=prior.epsilon, converged=bool(converged),
        n_iter=n_calls, message=message, residual=res_norm,
        parametrization=problem.parametrization,
        params=dict(n_tokens=problem.n_tokens, reg_lambda=problem.reg_lambda,
                    width_ratio=problem.width_ratio, beta=problem.beta,
                    target_beta=problem.target_beta, noise=problem.noise,
                    attention=problem.attention, n_features=problem.n_features, trace=trace,
                    # only for non-Gaussian tokens, so that tables of Gaussian runs keep
                    # their columns
                    **({"token_kurtosis": kurtosis, "t_hat": out.t_hat,
                        "target_trace": t0} if with_t else {})),
        law=law, finite_eigenvalues=finite_eigenvalues, problem=problem,
        certified_fraction=float(get_field(out, "certified_fraction")),
        extras={"uncertified_bound": bound, "uncertified_effect": effect,
                **({"stall_floor": float(stall_floor)} if stall_floor is not None else {})})
    return CoreSolution(result, bool(getattr(prior, "rank_capped", False)), collapsed, eig0,
                        float(getattr(prior, "positive_fraction", np.nan)),
                        float(alpha_fixed_point),
                        None if collapsed or fixed_point_map.orthogonal else
                        fixed_point_map.secants(min_step=SECANT_MIN_STEP * tol),
                        None if collapsed else remembered_minimisers(channel))


def _handover_orthogonal(fixed_point_map, x, res_norm, *, tol, max_iter, damping):
    """After a failed handover close to the edge of perfect recovery, the orthogonal
    variables from its best point before the original starts: ``(x, |r|_max, converged)``.

    Near ``m² = q Q0`` the plain variables are jagged at the clip of m, and the original
    starts (a fresh map from far away) take the longest path back (docs: Changelog, "Why
    the noiseless grid points are slow"). Taken where the handover got within
    :func:`~skattn.theory.core.fixed_point_map.handover_orthogonal_threshold` of a fixed
    point (a larger threshold nearer perfect recovery), with a handover's budget;
    otherwise ``x`` is returned as it is.
    """
    if fixed_point_map.orthogonal \
            or not res_norm < handover_orthogonal_threshold(fixed_point_map, x):
        return x, res_norm, False
    return iterate_orthogonal(fixed_point_map, x, res_norm, tol=tol,
                              max_iter=min(max_iter, fixed_point_map.n_calls + HANDOVER_CALLS),
                              damping=damping)
