"""The state-evolution solver of docs/theory.rst §4 (factored) and §5 (direct).

The fixed point of ``(m, q, Σ) → prior(output(m, q, Σ))`` is found by a few damped
iterations followed by Powell's hybrid root finder (scipy) on the three order parameters,
with a fallback to damped iteration and continuation in λ. Gaussian expectations use fixed
quasi-Monte Carlo nodes (common random numbers), so the map is smooth and root-findable.
Nothing is returned silently wrong: the residual of the fixed-point equations is checked,
and ``converged=False`` comes with a message.
"""

from __future__ import annotations

import numpy as np

from .._validation import (MAX_ALPHA, MIN_ALPHA, channel_memory_bytes, check_choice,
                           check_memory, check_scalar_range)
from .channels import GaussianNodes, output_side, test_error
from .fixed_point import robust_fixed_point, solve_or_continue
from .problem import (
    PARAMETRIZATIONS,
    UNSET,
    StateEvolutionProblem,
    _check_model_scalars,
    resolve_problem,
    resolve_target_law,
    split_model_keywords,
    warn_finite_size,
    warn_outside_domain,
)
from .result import StateEvolutionResult
from .spiked import routes_to_spiked, spiked_prediction, spiked_route_covers

__all__ = ["StateEvolutionResult", "StateEvolutionProblem", "solve_state_evolution",
           "state_evolution_curve", "resolve_target_law"]

# PARAMETRIZATIONS and resolve_target_law live in problem.py, StateEvolutionResult in
# result.py; imported here for old imports


def _check_common(alpha, n_tokens, width_ratio, reg_lambda, beta, target_beta, noise,
                  attention, task, parametrization):
    """α and the scalar model parameters, validated (kept for callers without a target)."""
    alpha = check_scalar_range(alpha, "alpha", low=0, low_inclusive=False)
    return (alpha, *_check_model_scalars(n_tokens, width_ratio, reg_lambda, beta, target_beta,
                                         noise, attention, task, parametrization))


class _FixedPointMap:
    """The fixed-point map for one parameter set (channel, denoiser, nodes).

    The state is ``(m, q, Σ)``; for non-Gaussian tokens (``token_kurtosis ≠ 0``) also
    ``t = Tr S/d``, whose conjugate t̂ shifts the spectral threshold (docs/tokens.rst).
    """

    def __init__(self, alpha, channel, denoiser, Q0, noise, nodes, sigma_hat_form,
                 token_kurtosis=0.0, target_trace=None):
        self.sigma_hat_form = sigma_hat_form
        self.alpha, self.channel, self.denoiser = alpha, channel, denoiser
        self.Q0, self.noise, self.nodes = Q0, noise, nodes
        self.token_kurtosis, self.target_trace = token_kurtosis, target_trace
        self.with_trace = token_kurtosis != 0.0
        self.n_calls = 0
        # True: every evaluation certifies its prox minimisers (the polish of the fixed
        # point, whose last evaluation is then the reported one)
        self.certify = False
        # the last evaluation, (state, certify, (out, prior)): the report at the fixed
        # point reuses the polish's evaluation there
        self._last = None
        # True: the prox starts every node from its previous z* and keeps that minimiser
        # uncertified (cheap iterations); the fixed point is then polished with it False
        self.warm = False

    def _kurtosis_keywords(self, t):
        if not self.with_trace:
            return {}
        return dict(token_kurtosis=self.token_kurtosis, trace=t,
                    target_trace=self.target_trace)

    def hats(self, m, q, sigma, t=None, certify=False):
        # The iterations run the multi-start prox; only the evaluation at the fixed point
        # adds the certificate (softmax: branch and bound for T = 2, row-wise strong
        # convexity for T ≥ 3) and reports the certified fraction of the nodes.
        budget = getattr(self.channel, "certify_budget", None)
        if budget is not None:
            self.channel.certify_budget = budget if certify else 0
        try:
            return self._hats(m, q, sigma, t)
        finally:
            if budget is not None:
                self.channel.certify_budget = budget

    def _hats(self, m, q, sigma, t=None):
        out = output_side(self.channel, m=m, q=q, Q0=self.Q0, noise=self.noise, sigma=sigma,
                          alpha=self.alpha, nodes=self.nodes,
                          sigma_hat_form=self.sigma_hat_form, warm_start=self.warm,
                          trust_warm=self.warm, **self._kurtosis_keywords(t))
        return out

    def step(self, m, q, sigma, t=None, certify=False):
        certify = certify or self.certify
        key = (m, q, sigma, t, certify, self.warm)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        self.n_calls += 1
        out = self.hats(m, q, sigma, t, certify=certify)
        hats = (_get(out, "m_hat"), _get(out, "q_hat"), _get(out, "sigma_hat"))
        prior = self.denoiser(*hats, t_hat=out.t_hat) if self.with_trace else \
            self.denoiser(*hats)
        # only a cold evaluation is a function of its state alone (warm ones remember z*)
        self._last = None if self.warm else (key, (out, prior))
        return out, prior

    def state(self, prior):
        """The state variables of a :class:`PriorState`."""
        base = (prior.m, prior.q, prior.sigma)
        return base + (prior.trace,) if self.with_trace else base

    # variables x = (m/√Q0, log q, log Σ[, t/√Q0]): q, Σ > 0; |m| ≤ √(q Q0) and |t| ≤ √q
    # are enforced by clipping
    def to_x(self, m, q, sigma, t=None):
        x = [m / np.sqrt(self.Q0), np.log(max(q, 1e-300)), np.log(max(sigma, 1e-300))]
        if self.with_trace:
            x.append(t / np.sqrt(self.Q0))
        return np.array(x)

    def from_x(self, x):
        q = float(np.exp(np.clip(x[1], -700, 700)))
        sigma = float(np.exp(np.clip(x[2], -700, 700)))
        bound = np.sqrt(q * self.Q0) * (1 - 1e-12)
        m = float(np.clip(x[0] * np.sqrt(self.Q0), -bound, bound))
        if not self.with_trace:
            return m, q, sigma
        # (Tr S/d)² ≤ Tr S²/d for a real S
        t = float(np.clip(x[3] * np.sqrt(self.Q0), -np.sqrt(q), np.sqrt(q)))
        return m, q, sigma, t

    def residual(self, x):
        """``G(x) − x`` in the transformed variables (None where the map is undefined)."""
        state = self.from_x(x)
        try:
            with np.errstate(all="ignore"):
                _, prior = self.step(*state)
        except (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError):
            return None
        if not all(np.isfinite(self.state(prior))) or prior.q <= 0 or prior.sigma <= 0:
            return None
        return self.to_x(*self.state(prior)) - x


# evaluations of the cheap warm map before the polish (the test points need 10 to 35)
_WARM_CALLS = 40
# largest student β at which the fixed-point iterations start each prox from its last z*
_WARM_MAX_BETA = 2.0


def _get(obj, name):
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


# Coarse to fine: the fixed point is first found on this many of the quadrature nodes (a
# prefix of the Sobol sequence), to _COARSE_TOL, and then on all of them from there.
# Measured on the T = 2, 3 test points: the full-node stage then takes 6 to 12 evaluations
# instead of 15 to 45, and a coarse evaluation costs about a third (the denoiser does not
# shrink). The coarse fixed point sits within the quadrature error of 1024 nodes (~2 % in
# Σ) of the fine one, and minimiser jumps make the coarse map rough below ~1e-3 (β = 4),
# so a tighter tolerance gains nothing. Both stages are capped: where the coarse map is
# hard to iterate (β = β0 = 2, or λ = 1e-3: no residual below _COARSE_HANDOVER in
# _COARSE_CALLS) or the fine iteration stalls near the coarse point, the solver goes on as
# without the coarse stage, from the original starts.
_COARSE_NODES = 1024
_COARSE_TOL = 1e-3
_COARSE_HANDOVER = 5e-2
_COARSE_CALLS = 30
_HANDOVER_CALLS = 60


def _coarse_size(n_nodes, n_coarse_nodes, attention, warm):
    """Number of nodes of the coarse stage, or 0 when it would save nothing: fewer than 4×
    as many nodes as the full set, linear attention (its prox is closed-form, so an
    evaluation costs about the same on fewer nodes), or a warm start (``init``: it is
    already near the fine fixed point, and the coarse stage would first move it to the
    coarse one; measured on a 32-point T = 2 curve: 4.97 s without, 5.42 s with)."""
    if n_coarse_nodes is None or 4 * n_coarse_nodes > n_nodes or attention == "linear" \
            or warm:
        return 0
    return int(n_coarse_nodes)


def _starts(fixed_point_map, init, prior0, Q0, full):
    """Starts of the iteration in the map's variables: ``init`` (or the step from the zero
    estimator, ``prior0``), then two fixed fallbacks."""
    if init is None:
        if prior0.q > 0 and np.isfinite(prior0.sigma) and prior0.sigma > 0:
            m, q, sigma = prior0.m, prior0.q, prior0.sigma
            t_start = prior0.trace
        else:
            m, q, sigma = 0.5 * Q0, 0.5 * Q0, 1.0
            t_start = None
    elif isinstance(init, StateEvolutionResult):
        m, q, sigma = init.m, init.q, init.sigma
        t_start = init.trace if np.isfinite(init.trace) else None
        if not (q > 0 and sigma > 0):  # a collapsed (S = 0) point is no warm start
            m, q, sigma = prior0.m, prior0.q, prior0.sigma
            t_start = prior0.trace
            if not (q > 0 and sigma > 0):
                m, q, sigma = 0.5 * Q0, 0.5 * Q0, 1.0
                t_start = None
    else:  # a validated tuple (m, q, sigma)
        m, q, sigma = init
        t_start = None
    return [fixed_point_map.to_x(*start) for start in
            (full(m, q, sigma, t_start), full(0.5 * Q0, 0.5 * Q0, 1.0),
             full(0.05 * Q0, 0.01 * Q0, 0.01))]


def _iterate_starts(fixed_point_map, starts, *, tol, max_calls, damping):
    """:func:`~skattn.theory.fixed_point.robust_fixed_point` from the first start; the next
    ones only where the map is undefined at the previous."""
    x, res_norm, converged = starts[0], np.inf, False
    for start in starts:
        if fixed_point_map.n_calls >= max_calls:
            break
        x_s, norm_s, converged = robust_fixed_point(
            fixed_point_map, start, tol=tol, max_iter=max_calls, damping=damping)
        if norm_s < res_norm:
            x, res_norm = x_s, norm_s
        if converged or np.isfinite(norm_s):
            break
    return x, res_norm, converged


def _iterate(fixed_point_map, channel, starts, *, tol, max_iter, damping, polish=True):
    """The fixed point of the map from ``starts``: ``(x, |r|_max, converged)``.

    ``polish``: after the warm iterations, iterate the certified multi-start map (the one
    reported) to ``tol`` from their point; without it (the coarse stage, a start for the
    fine one) the warm fixed point is returned as it is.

    Measured (T = 2, α = 0.3, λ = 0.01; T = 3, α = 0.25): warm iterations take 0.33 s
    against 0.40 s cold at β = 1 and 1.7 s against 2.7 s at T = 3, but at β = 4 the
    remembered minimisers slow Anderson down (70 evaluations against 31: 1.6 s against
    0.9 s), so they are used only where the prox is close to convex.
    """
    converged = False
    if getattr(channel, "warm_startable", False) and channel.beta_ <= _WARM_MAX_BETA:
        # cheap iterations: each node's prox from its previous z*, uncertified; then the
        # same iteration with the multi-start prox (the map whose fixed point we report)
        # from there, which takes a few evaluations. The warm map remembers its past z*,
        # so near a switch of minimisers it can cycle at the tol level: it gets a capped
        # budget, and the polish starts from its best point anyway.
        fixed_point_map.warm = True
        try:
            x, res_norm, converged = _iterate_starts(
                fixed_point_map, starts, tol=tol, damping=damping,
                max_calls=min(max_iter, _WARM_CALLS))
        except RuntimeError:  # a wild warm iterate broke the prior side: iterate cold
            res_norm = np.inf
        finally:
            fixed_point_map.warm = False
        if converged and not polish:
            return x, res_norm, converged
        if res_norm < 1e-3:  # else the original starts do as well
            # certified: its last evaluation, at the fixed point, is the one reported
            fixed_point_map.certify = True
            try:
                x, res_norm, converged = _iterate_starts(
                    fixed_point_map, [x], tol=tol, max_calls=max_iter, damping=damping)
            finally:
                fixed_point_map.certify = False
    if not converged:  # as without the warm iterations, from the original starts
        x, res_norm, converged = _iterate_starts(fixed_point_map, starts, tol=tol,
                                                 max_calls=max_iter, damping=damping)
    return x, res_norm, converged


def solve_state_evolution(alpha, problem=None, *, n_tokens=UNSET, reg_lambda=UNSET,
                          target=UNSET, width_ratio=UNSET, beta=UNSET, target_beta=UNSET,
                          noise=UNSET, attention=UNSET, task=UNSET, parametrization=UNSET,
                          n_features=UNSET, token_kurtosis=UNSET, n_nodes=8192, tol=1e-7,
                          max_iter=600, damping=0.5, init=None, sigma_hat_form="auto",
                          random_state=0, n_coarse_nodes=_COARSE_NODES, exact_gram=True,
                          spiked=True, leverage=True):
    """Solve the state evolution of factored (or direct) ERM at one point.

    The model is given either as a :class:`~skattn.theory.StateEvolutionProblem` or by its
    keywords (``n_tokens``, ``reg_lambda``, ``target``, …: then the problem is built from
    them), not both.

    Parameters
    ----------
    alpha : float
        Sample ratio α = n/d² in ``[1e-12, 1e6]``.
    problem : StateEvolutionProblem, optional
        The model. Without it, ``n_tokens``, ``reg_lambda`` and ``target`` are required.
    n_tokens : int
        Sequence length T (≥ 2 for softmax, ≥ 1 for linear attention).
    reg_lambda : float
        λ ≥ 0 in ``Σ_μ ℓ_μ + λ‖W‖²_F`` (or ``λ‖V‖²_F`` for ``parametrization="direct"``).
    target : Target, SpectralLaw or AttentionIndexedModel
        The target family (e.g. ``WishartTarget(0.5)``) or its spectral law; or a teacher,
        for the same-instance prediction of its own S0 at its d
        (:meth:`StateEvolutionProblem.from_teacher`: T, ``target_beta``, ``noise``, the
        attention and ``n_features`` are then the teacher's, and an explicit value that
        contradicts it raises ValueError).
    width_ratio : float, default=1.0
        κ = p/d of the factored model; the trace penalty is ``λ̃ = √κ λ``.
    beta, target_beta : float, default=1.0
        Inverse temperatures of the student and of the teacher.
    noise : float, default=0.0
        Label noise Δ ≥ 0.
    attention : {"softmax", "linear"}, default="softmax"
    task : {"seq2lab", "seq2seq"}, default="seq2lab"
        Both have the same limit. Factored seq2seq at finite d (linear, or softmax where no
        rank cap binds), and factored softmax seq2lab at finite d (T ≤ 3, no binding cap,
        no spiky target), use the exact token Gram matrix
        (:func:`skattn.theory.seq2seq.exact_gram_prediction`,
        :func:`~skattn.theory.seq2seq.routes_to_exact_gram`).
    parametrization : {"factored", "direct"}, default="factored"
    n_features : int or None, default=None
        None solves the d → ∞ continuum; an integer d solves the finite-d version on the
        target's d eigenvalues (deterministic; needed for power-law targets and
        width_ratio < 1).
    token_kurtosis : float, default=0.0
        Excess kurtosis ``κ4 = E z⁴ − 3 ≥ −2`` of the i.i.d. token entries (−2 Rademacher,
        ``6/(df − 4)`` Student-t). 0 is today's Gaussian state evolution, exactly; otherwise
        the diagonal pre-activations get the fourth-cumulant covariance ``(κ4/2) t t'``
        (``t = Tr S/d``), ``t`` becomes a fifth order parameter, and its conjugate
        ``t̂`` (``params["t_hat"]``) shifts the threshold to ``ε = (2λ̃ − t̂)/m̂``. Assumes
        S and S0 in a basis independent of the token coordinates (docs/tokens.rst).
    n_nodes : int, default=8192
        Quasi-Monte Carlo nodes for the Gaussian expectations (a power of two is best).
    tol : float, default=1e-7
        Tolerance on the fixed-point residual (relative, on ``m/√(qQ0)``, ``log q``, ``log Σ``).
    max_iter : int, default=600
        Maximum number of evaluations of the fixed-point map.
    damping : float in (0, 1], default=0.5
        Weight of the new iterate in damped iterations.
    init : StateEvolutionResult or tuple (m, q, sigma), optional
        Warm start.
    sigma_hat_form : {"auto", "stein", "pointwise"}, default="auto"
        How Σ̂ is averaged. "pointwise" is docs/theory.rst §4's ``(2α/Σ) E Tr(I − (I+ΣH)⁻¹)``;
        "stein" is ``−2α E[gᵀω]/q + (m/q) m̂``, the q-derivative of the averaged Moreau
        envelope, which stays right when the softmax prox is non-convex and its global
        minimiser jumps between branches (the pointwise Hessian misses the jumps). "auto"
        uses "pointwise" for the convex linear channel (exact, lower quadrature noise) and
        "stein" for softmax.
    random_state : int, default=0
        Seeds the quadrature nodes and the finite-d draws (fixed: the map is deterministic).
    n_coarse_nodes : int or None, default=1024
        Coarse to fine: the fixed point is first iterated on the first ``n_coarse_nodes``
        quadrature nodes (a Sobol prefix) to a residual of ``max(tol, 1e-3)``, then on all
        ``n_nodes`` to ``tol`` from there. The fixed point returned is the one on all nodes
        (the same equations); only the iteration path and the time change. None,
        ``4 n_coarse_nodes > n_nodes``, linear attention or a warm start (``init``)
        iterate on all nodes from the start.
    exact_gram : bool, default=True
        At finite d, solve the exact-Gram channel where it is routed
        (:func:`skattn.theory.seq2seq.routes_to_exact_gram`: factored seq2seq, and factored
        softmax seq2lab with T ≤ 3), started from the Gaussian fixed point. False returns the
        Gaussian seq2lab fixed point itself for every task: 3–10× faster, and 1–2 % below
        trained softmax models at d = 100 (docs/theory.rst §4 "Finite d").
    spiked : bool, default=True
        At finite d, solve factored softmax seq2lab with T ≤ 4 on a spiky target (a mode
        carrying more than 25 % of ``Tr S0²``, e.g. a power law) with the spiked state
        evolution, its top modes as explicit non-Gaussian variables
        (:func:`skattn.theory.spiked.routes_to_spiked`, docs/spiked.rst). Measured at
        d = 100 against trained models: T = 2 within 0–4 % where the Gaussian fixed point is
        9–10 % low (β ≠ β0 either way: within 2.4 %, Gaussian 10 % low); T = 3 and 4 within
        0.1 % (Gaussian: 4.7 % and 0.5 % low). False returns the Gaussian fixed point and
        its DomainWarning.
    leverage : bool, default=True
        At finite ``40 ≤ d ≤ 400``, solve factored seq2lab, softmax with T = 2 or linear
        with T = 1 (noiseless: from α_perf on), with no binding rank cap and Gaussian
        tokens by the leverage mixture: the output side averaged over the spread of the
        per-sample leverage of the token directions
        (:func:`skattn.theory.leverage_mixture.routes_to_leverage`, docs/theory.rst §4
        "Leverage mixture"). Measured at d = 100 against trained models: within 3 % on
        every configuration it applies to, where the former predictions were up to 6 %
        (softmax, next to the interpolation threshold at small λ) and 11 % (linear,
        recovery phase) low.
        About 3–5 s at d = 100 (a Monte Carlo law of the leverage, seeded by
        ``random_state``: the prediction moves by about 0.3 % between seeds). False keeps the exact-Gram (softmax) or Gaussian (linear)
        prediction, and the softmax FiniteSizeWarning.

    Returns
    -------
    StateEvolutionResult

    Raises
    ------
    ValueError
        If a problem and a model keyword are both given (use ``problem.replace``), a
        keyword contradicts the teacher given as ``target``, or the channel at
        ``n_tokens`` and ``n_nodes`` would exceed the memory limit (environment variable
        ``SKATTN_MEMORY_LIMIT_GB``, default 8 GiB).

    Warns
    -----
    DomainWarning
        For a softmax prediction on a spiky target that is not routed to the spiked state
        evolution (or, routed, whose top mode is close to the prior side's noise), or a
        binding rank constraint at small d (see
        :func:`skattn.theory.problem.warn_outside_domain`).
    FiniteSizeWarning
        For factored softmax with T = 2 at finite ``d ≤ 160`` and ``reg_lambda < 0.01``
        where the leverage mixture is not used (``leverage=False``, or outside its rule):
        there trained models were measured several per cent above the Gaussian and
        exact-Gram predictions (see :func:`skattn.theory.problem.warn_finite_size`).

    See Also
    --------
    skattn.theory.solve_leverage_state_evolution : the leverage mixture of ``leverage=True``
        beside its Gaussian counterpart, also for softmax T = 3 and linear T = 2, 3.
    skattn.theory.solve_token_state_evolution : for factored linear attention with one
        token at finite d, the joint Monte Carlo model of the rank-one tokens' leverage
        (trained models at d = 100: within 2.3 % at λ ≥ 0.02, 6 % above them at λ = 1e-3).

    Notes
    -----
    Where no fixed point is found from a cold start (no ``init``), the solver converges at
    10λ (else 100λ; 1e-3 and 1e-2 for λ = 0) and follows that fixed point back down to λ
    in steps of √10, each warm-started from the last
    (:func:`skattn.theory.fixed_point.lambda_continuation`); the message then says so.
    Measured: linear T = 1 at λ = 1e-3 next to the interpolation threshold, d = 100, one
    teacher in thirty stalled at a residual of 3e-2 (a test error of 3.67 against 0.746).
    """
    alpha = check_scalar_range(alpha, "alpha", low=MIN_ALPHA, high=MAX_ALPHA)
    if problem is None and reg_lambda is UNSET:
        raise TypeError("solve_state_evolution() needs a problem or the keyword 'reg_lambda'.")
    problem = resolve_problem(
        problem, "solve_state_evolution", target=target, n_tokens=n_tokens,
        reg_lambda=reg_lambda, width_ratio=width_ratio, beta=beta, target_beta=target_beta,
        noise=noise, attention=attention, task=task, parametrization=parametrization,
        n_features=n_features, token_kurtosis=token_kurtosis)
    tol = check_scalar_range(tol, "tol", low=0, low_inclusive=False)
    max_iter = check_scalar_range(max_iter, "max_iter", low=1, integer=True)
    damping = check_scalar_range(damping, "damping", low=0, high=1, low_inclusive=False)
    n_nodes = check_scalar_range(n_nodes, "n_nodes", low=16, integer=True)
    if n_coarse_nodes is not None:
        n_coarse_nodes = check_scalar_range(n_coarse_nodes, "n_coarse_nodes", low=16,
                                            integer=True)
    if init is not None and not isinstance(init, StateEvolutionResult):
        try:
            init = tuple(float(v) for v in init)
            if len(init) != 3:
                raise ValueError
        except (TypeError, ValueError) as exc:
            raise ValueError("init must be a StateEvolutionResult or a tuple (m, q, sigma) "
                             f"of three finite numbers, got {init!r}.") from exc
        if not (np.isfinite(init).all() and init[1] > 0 and init[2] > 0):
            raise ValueError(f"init must have finite m and q, sigma > 0, got {init!r}.")
    if not (random_state is None or (isinstance(random_state, (int, np.integer))
                                     and 0 <= random_state < 2 ** 32)):
        raise ValueError(f"random_state must be an int in [0, 2**32 - 1] or None (it seeds "
                         f"the fixed quadrature nodes and draws), got {random_state!r}.")
    random_state = 0 if random_state is None else int(random_state)
    check_memory(channel_memory_bytes(problem.n_tokens, n_nodes),
                 f"n_tokens={problem.n_tokens} with n_nodes={n_nodes} quadrature nodes")
    for name, flag in (("exact_gram", exact_gram), ("spiked", spiked), ("leverage", leverage)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be a bool, got {flag!r}.")
    check_choice(sigma_hat_form, "sigma_hat_form", ("auto", "stein", "pointwise"))
    if sigma_hat_form == "auto":
        sigma_hat_form = "pointwise" if problem.attention == "linear" else "stein"
    # the model part of the rule first: the target's eigenvalues only where it can apply
    if spiked and problem.n_features is not None and spiked_route_covers(
            problem.attention, problem.parametrization, problem.task, problem.n_tokens,
            problem.width_ratio, problem.token_kurtosis):
        eigenvalues = problem.target_law(random_state)[1]
        if routes_to_spiked(problem, eigenvalues):
            def solve_spiked(reg_lambda, start):
                return spiked_prediction(
                    alpha, problem.replace(reg_lambda=reg_lambda), eigenvalues,
                    n_nodes=n_nodes, tol=tol, max_iter=max_iter, damping=damping,
                    init=start, random_state=random_state)

            result = solve_or_continue(solve_spiked, problem.reg_lambda, init)
            warn_finite_size(problem)
            return result
    options = dict(init=init, n_nodes=n_nodes, n_coarse_nodes=n_coarse_nodes, tol=tol,
                   max_iter=max_iter, damping=damping, sigma_hat_form=sigma_hat_form,
                   random_state=random_state)
    # finite d: α d/(d+1) (docs/theory.rst §4 "Finite d"); the objective keeps α = n/d²
    result, rank_capped, collapsed, eigenvalues = _solve_or_continue(
        alpha, problem.effective_alpha(alpha), problem, options)
    if rank_capped and problem.alpha_factor != 1.0:
        # a binding rank cap: the estimator has rank p, not the d(d+1)/2 degrees of freedom
        # behind α_eff (measured: keep α there; docs/theory.rst §4 "Finite d")
        result, rank_capped, collapsed, eigenvalues = _solve_or_continue(
            alpha, alpha, problem, options)
    # lazily: both build on this module (docs/theory.rst §4)
    from . import leverage_mixture, seq2seq
    if leverage and not collapsed and leverage_mixture.routes_to_leverage(
            problem, rank_capped, eigenvalues, alpha=alpha):
        return leverage_mixture.leverage_prediction(result, tol=tol, random_state=random_state)
    loss = seq2seq.routes_to_exact_gram(problem, rank_capped, eigenvalues)
    if exact_gram and loss is not None and not collapsed:
        result = seq2seq.exact_gram_prediction(result, loss=loss, n_nodes=n_nodes, tol=tol,
                                               random_state=random_state)
    warn_finite_size(problem)
    return result


def _solve_or_continue(alpha, alpha_fixed_point, problem, options):
    """:func:`_solve`; where a cold start finds no fixed point, continuation in λ
    (:func:`~skattn.theory.fixed_point.solve_or_continue`). Returns :func:`_solve`'s tuple."""
    solved = []

    def solve(reg_lambda, init):
        point = problem if reg_lambda == problem.reg_lambda else \
            problem.replace(reg_lambda=reg_lambda)
        solved.append(_solve(alpha, alpha_fixed_point, point, **{**options, "init": init}))
        return solved[-1][0]

    result = solve_or_continue(solve, problem.reg_lambda, options["init"])
    return next(out for out in reversed(solved) if out[0] is result)


def _solve(alpha, alpha_fixed_point, problem, *, init, n_nodes, n_coarse_nodes, tol, max_iter,
           damping, sigma_hat_form, random_state):
    """The fixed point of a validated problem, solved at ``alpha_fixed_point``.

    Returns ``(result, rank_capped, collapsed, eigenvalues)``: the
    :class:`StateEvolutionResult` (objective at the nominal ``alpha``), whether a rank cap
    binds at the fixed point, whether it collapsed to S = 0, and the target's eigenvalues at
    d (None in the continuum).
    """
    law, eig0 = problem.target_law(random_state)
    Q0 = float(np.mean(eig0 ** 2)) if eig0 is not None else law.second_moment()
    channel = problem.channel()
    denoiser = problem.denoiser(law, eig0, random_state)
    nodes = GaussianNodes(2 * channel.K, n_points=n_nodes, seed=random_state)
    noise = problem.noise
    kurtosis = problem.token_kurtosis
    t0 = float(np.mean(eig0)) if eig0 is not None else law.moment(1)  # Tr S0/d

    def make_map(node_set):
        return _FixedPointMap(alpha_fixed_point, channel, denoiser, Q0, noise, node_set,
                              sigma_hat_form, token_kurtosis=kurtosis, target_trace=t0)

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

    n_coarse = _coarse_size(n_nodes, n_coarse_nodes, problem.attention, init is not None)
    other_calls = 0      # evaluations on the coarse nodes and in a failed handover
    converged = False
    if n_coarse:
        # coarse to fine: most iterations on a prefix of the Sobol nodes (a balanced Sobol
        # set itself), then the same equations on all nodes from there; the reported fixed
        # point is the fine one, so only the path changes (tests/test_speed_accuracy.py)
        coarse_map = make_map(nodes.subset(n_coarse))
        _, coarse_prior0 = first_step(coarse_map)
        x_c, norm_c, _ = _iterate(coarse_map, channel,
                                  _starts(coarse_map, init, coarse_prior0, Q0, full),
                                  tol=max(tol, _COARSE_TOL),
                                  max_iter=min(max_iter, _COARSE_CALLS), damping=damping,
                                  polish=False)
        other_calls = coarse_map.n_calls
        if norm_c < _COARSE_HANDOVER:
            x, res_norm, converged = _iterate(fixed_point_map, channel, [x_c], tol=tol,
                                              max_iter=min(max_iter, _HANDOVER_CALLS),
                                              damping=damping)
        if not converged:
            # the path without the coarse stage, exactly: fresh nodes (same points) leave
            # the prox memory of the handover behind
            other_calls += fixed_point_map.n_calls
            fixed_point_map = make_map(nodes.subset(n_nodes))
    step0 = None
    if not converged:
        # a usable warm start needs no step from the zero estimator (one evaluation of ~10
        # per point on a curve): it is taken only as a fallback start or to test collapse
        warm_usable = isinstance(init, tuple) or (
            isinstance(init, StateEvolutionResult) and init.q > 0 and init.sigma > 0)
        if not warm_usable:
            step0 = first_step(fixed_point_map)
        x, res_norm, converged = _iterate(
            fixed_point_map, channel,
            _starts(fixed_point_map, init, None if step0 is None else step0[1], Q0, full),
            tol=tol, max_iter=max_iter, damping=damping)
        if not converged and step0 is None:
            step0 = first_step(fixed_point_map)
    collapsed = False
    if not converged and step0[1].q == 0.0:
        # a large trace penalty removes every direction: S = 0 (m = q = 0) is the fixed
        # point, which the log-variables cannot reach
        collapsed, converged, res_norm = True, True, 0.0
    n_calls = fixed_point_map.n_calls + other_calls
    message = ("converged" if converged else
               f"fixed-point residual {res_norm:.2e} above tol={tol:.1e} after "
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
    m_hat, q_hat, sigma_hat = (_get(out, k) for k in ("m_hat", "q_hat", "sigma_hat"))
    train_error = _get(out, "train_error")
    e_test = test_error(channel, m=m, q=q, Q0=Q0, noise=noise, nodes=nodes,
                        **fixed_point_map._kurtosis_keywords(state[-1]))
    trace = prior.trace
    if problem.parametrization == "factored":
        objective = alpha * train_error + problem.reg_trace * trace
    else:  # λ‖V‖²_F = λ d ‖S‖²_F → per d²: λ q
        objective = alpha * train_error + problem.reg_lambda * q
    finite_eigenvalues = prior.eigenvalues
    if problem.n_features is not None and hasattr(denoiser, "learned_spectrum"):
        finite_eigenvalues = denoiser.learned_spectrum(prior)
    warn_outside_domain(problem, eig0, rank_capped=getattr(prior, "rank_capped", False),
                        positive_fraction=getattr(prior, "positive_fraction", np.nan))
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
        certified_fraction=float(_get(out, "certified_fraction")))
    return result, bool(getattr(prior, "rank_capped", False)), collapsed, eig0


def _curve_chunk(alphas, problem, reg_lambdas, options):
    return state_evolution_curve(alphas, problem, reg_lambda=reg_lambdas, **options)


def state_evolution_curve(alphas, problem=None, *, reg_lambda=UNSET, n_jobs=None, verbose=0,
                          **kwargs):
    """State evolution along a curve of α (or of λ), warm-started point to point.

    Parameters
    ----------
    alphas : array-like of float
        The α values (solved in the given order; sort them for the best warm starts).
    problem : StateEvolutionProblem, optional
        The model; without it, ``kwargs`` carry the model keywords (``n_tokens``,
        ``target``, …) as for :func:`solve_state_evolution`.
    reg_lambda : float or array-like
        One λ, or one per α (a λ curve at fixed α: pass ``alphas`` constant). Required
        without a problem; with one, it replaces ``problem.reg_lambda`` along the curve.
    n_jobs : int or None
        With n_jobs > 1 the curve is cut into contiguous chunks solved in parallel
        (:func:`skattn.parallel.map_jobs` on joblib), each warm-started along itself.
    verbose : int
        > 0 shows a progress bar.
    **kwargs
        Passed to :func:`solve_state_evolution`.

    Returns
    -------
    list of StateEvolutionResult
    """
    model, options = split_model_keywords(kwargs)
    if problem is None:
        if reg_lambda is UNSET:
            raise TypeError("state_evolution_curve() needs a problem or the keyword "
                            "'reg_lambda'.")
        # λ is validated point by point below; the first one stands in until then
        first = np.ravel(np.asarray(reg_lambda, dtype=float))
        model["reg_lambda"] = float(first[0]) if first.size else 0.0
    problem = resolve_problem(problem, "state_evolution_curve", **model)
    if reg_lambda is UNSET:
        reg_lambda = problem.reg_lambda
    alphas = np.atleast_1d(np.asarray(alphas, dtype=float))
    lams = np.broadcast_to(np.asarray(reg_lambda, dtype=float), alphas.shape)
    if alphas.ndim != 1 or alphas.size == 0:
        raise ValueError(f"alphas must be a non-empty 1-D array, got shape {alphas.shape}.")
    if n_jobs is not None and n_jobs != 1 and alphas.size > 1:
        from ..parallel import map_jobs, n_workers   # lazily: the theory's import graph

        n_chunks = min(alphas.size, n_workers(n_jobs))
        chunks = np.array_split(np.arange(alphas.size), n_chunks)
        parts = map_jobs(_curve_chunk, [(alphas[c], problem, lams[c], options)
                                        for c in chunks],
                         backend="joblib", n_jobs=n_jobs)
        return [r for part in parts for r in part]
    from tqdm.auto import tqdm
    results, prev = [], None
    for a, lam in tqdm(list(zip(alphas, lams)), disable=not verbose, desc="state evolution"):
        point = problem.replace(reg_lambda=lam)
        res = solve_state_evolution(a, point, init=prev, **options)
        if not res.converged and prev is not None:  # warm start failed: try cold
            cold = solve_state_evolution(a, point, **options)
            if cold.converged or cold.residual < res.residual:
                res = cold
        results.append(res)
        prev = res if res.converged else prev
    return results
