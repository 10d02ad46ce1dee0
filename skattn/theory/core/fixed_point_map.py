"""The fixed-point map of the Gaussian state evolution and its iteration (docs: Theory §4).

The state is ``(m, q, Σ)`` (and ``t = Tr S/d`` for non-Gaussian tokens); one evaluation is the
output side (channel) followed by the prior side (denoiser). The iteration runs warm,
uncertified prox evaluations first, then polishes with the certified multi-start prox, whose
last evaluation is the one reported. Corrections build their maps on :class:`FixedPointMap`.
"""

from __future__ import annotations

import time

import numpy as np

from ..channels import output_side
from ..channels.output import forget_multistart_memory
from ..result import StateEvolutionResult
from .iteration import STALL_EVALS, forward_differences, powell_hybrid, robust_fixed_point

__all__ = ["FixedPointMap", "get_field", "coarse_calls", "coarse_size", "starts", "iterate",
           "handover_orthogonal_threshold", "iterate_orthogonal", "iterates_warm",
           "near_the_clip", "polish_multistart",
           "polish_stall_window", "polishes_certified"]


class FixedPointMap:
    """The fixed-point map for one parameter set (channel, denoiser, nodes).

    The state is ``(m, q, Σ)``; for non-Gaussian tokens (``token_kurtosis ≠ 0``) also
    ``t = Tr S/d``, whose conjugate t̂ shifts the spectral threshold (docs: Non-Gaussian tokens).
    """

    def __init__(self, alpha, channel, denoiser, Q0, noise, nodes, sigma_hat_form,
                 token_kurtosis=0.0, target_trace=None):
        self.sigma_hat_form = sigma_hat_form
        self.alpha, self.channel, self.denoiser = alpha, channel, denoiser
        self.Q0, self.noise, self.nodes = Q0, noise, nodes
        self.token_kurtosis, self.target_trace = token_kurtosis, target_trace
        self.with_trace = token_kurtosis != 0.0
        # evaluations counted against the iterations' budgets (max_iter), and those of a
        # stage that was set aside, not counted (polish_multistart); n_iter reports both
        self.n_calls = 0
        self.refunded_calls = 0
        # True: every evaluation certifies its prox minimisers (the polish of the fixed
        # point, whose last evaluation is then the reported one)
        self.certify = False
        # the last evaluation, (state, certify, (out, prior)): the report at the fixed
        # point reuses the polish's evaluation there
        self._last = None
        # True: the prox starts every node from its previous z* and keeps that minimiser
        # uncertified (cheap iterations); the fixed point is then polished with it False
        self.warm = False
        # the last evaluations (x, G(x) − x) in the plain variables: secants for the next
        # stage or a nearby map (secants())
        self.trail = []
        # the residual floor of a stalled iteration (core.iteration.STALL_EVALS), or None
        self.stall_floor = None
        # True: the uncertified multi-start evaluations run on the channel's multi-start
        # memory (output_side's multistart_memory; the first stage of the polish above
        # CERTIFIED_POLISH_MAX_BETA, polished without it afterwards)
        self.multistart_memory = False
        # a SolveReport (SolverOptions.verbose), told of every evaluation, or None
        self.report = None

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
            return self._hats(m, q, sigma, t, certify)
        finally:
            if budget is not None:
                self.channel.certify_budget = budget

    def _hats(self, m, q, sigma, t=None, certify=False):
        out = output_side(self.channel, m=m, q=q, Q0=self.Q0, noise=self.noise, sigma=sigma,
                          alpha=self.alpha, nodes=self.nodes,
                          sigma_hat_form=self.sigma_hat_form,
                          # a certified evaluation (the polish, or the one at the fixed
                          # point; ``certify`` also sets the budget in hats) also starts from
                          # the remembered z*: where the certificate proves it global it is
                          # kept (no multi-start)
                          warm_start=self.warm or certify,
                          trust_warm=self.warm,
                          multistart_memory=self.multistart_memory and not certify,
                          **self._kurtosis_keywords(t))
        return out

    def step(self, m, q, sigma, t=None, certify=False):
        certify = certify or self.certify
        key = (m, q, sigma, t, certify, self.warm, self.multistart_memory)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        self.n_calls += 1
        start = time.perf_counter()
        out = self.hats(m, q, sigma, t, certify=certify)
        hats = (get_field(out, "m_hat"), get_field(out, "q_hat"), get_field(out, "sigma_hat"))
        prior = self.denoiser(*hats, t_hat=out.t_hat) if self.with_trace else \
            self.denoiser(*hats)
        if self.report is not None:
            self.report.evaluation(self, (m, q, sigma) if t is None else (m, q, sigma, t),
                                   prior, certify, time.perf_counter() - start)
        # only a cold evaluation is a function of its state alone (warm ones remember z*,
        # those on the multi-start memory the nodes whose starts agreed)
        self._last = None if self.warm or self.multistart_memory else (key, (out, prior))
        return out, prior

    # whether the polish above CERTIFIED_POLISH_MAX_BETA may first run on the multi-start
    # memory (polish_multistart): a map whose evaluations pass ``multistart_memory``
    remembers_multistarts = True

    @property
    def evaluations(self):
        """All evaluations of this map: :attr:`n_calls` and the refunded ones."""
        return self.n_calls + self.refunded_calls

    def path_state(self):
        """What the next evaluations and iterations depend on besides their states: the
        trail of secants, the stall floor and the denoiser's warm start (its
        ``convolution_start``, where it has one). :meth:`restore_path` sets it back."""
        return (list(self.trail), self.stall_floor,
                getattr(self.denoiser, "convolution_start", None))

    def restore_path(self, path_state):
        """Set back what :meth:`path_state` returned, so that an iteration from an earlier
        point of the path runs as it would have run from there."""
        trail, self.stall_floor, start = path_state
        self.trail = list(trail)
        if hasattr(self.denoiser, "convolution_start"):
            self.denoiser.convolution_start = start

    def state(self, prior):
        """The state variables of a :class:`PriorState`."""
        base = (prior.m, prior.q, prior.sigma)
        return base + (prior.trace,) if self.with_trace else base

    # variables x = (m/√Q0, log q, log Σ[, t/√Q0]): q, Σ > 0; |m| ≤ √(q Q0) and |t| ≤ √q
    # are enforced by clipping. With ``orthogonal`` set, x[1] = log(q − m²/Q0) instead: the
    # part of S orthogonal to S0, which stays well scaled near perfect recovery (m² → q Q0),
    # where log q and m/√Q0 nearly coincide and the clip makes the map jagged
    orthogonal = False

    def to_x(self, m, q, sigma, t=None):
        spread = q - m * m / self.Q0 if self.orthogonal else q
        x = [m / np.sqrt(self.Q0), np.log(max(spread, 1e-300)), np.log(max(sigma, 1e-300))]
        if self.with_trace:
            x.append(t / np.sqrt(self.Q0))
        return np.array(x)

    def from_x(self, x):
        q = float(np.exp(np.clip(x[1], -700, 700)))
        sigma = float(np.exp(np.clip(x[2], -700, 700)))
        if self.orthogonal:
            m = float(x[0] * np.sqrt(self.Q0))
            q += m * m / self.Q0
        else:
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
        r = self.to_x(*self.state(prior)) - x
        if not self.orthogonal:
            self.trail = self.trail[-(SECANT_DEPTH + 1):] + [(np.array(x, dtype=float), r)]
        return r

    def jacobian_secants(self, x, warm=False):
        """``(dX, dR)``: forward differences of the residual at ``x`` along each variable
        (:func:`~skattn.theory.core.iteration.forward_differences`), or None where the map
        is undefined at one of the points. ``warm``: on the warm map (from the remembered
        minimisers of the last evaluations, a fraction of a cold evaluation's cost).

        The coarse stage hands them to the full node set: a full-rank Jacobian of a nearby
        map, so that the fine iteration's first steps are Newton steps
        (:func:`~skattn.theory.core.iteration.anderson` with ``secants``), where the coarse
        iteration's own last differences can span fewer directions.
        """
        was_warm, self.warm = self.warm, warm
        try:
            return forward_differences(self.residual, x)
        finally:
            self.warm = was_warm

    def secants(self, min_step=0.0):
        """``(dX, dR)``: differences of the last evaluations in the plain variables (columns,
        oldest first), those with a step above ``min_step``; None with fewer than one.

        The iteration of a nearby map starts its Anderson mixing with them
        (:func:`~skattn.theory.core.iteration.anderson`): the coarse stage's for the full
        node set, the warm iterations' for the certified polish, the core's for a
        correction's map.
        """
        xs = [x for x, _ in self.trail]
        rs = [r for _, r in self.trail]
        if len(xs) < 2:
            return None
        dX, dR = np.diff(np.array(xs), axis=0).T, np.diff(np.array(rs), axis=0).T
        keep = np.max(np.abs(dX), axis=0) > min_step
        if not np.any(keep):
            return None
        return dX[:, keep][:, -SECANT_DEPTH:], dR[:, keep][:, -SECANT_DEPTH:]


# secants kept for the next stage: the Anderson depth; steps below SECANT_MIN_STEP · tol
# are left out (at that scale the warm map's remembered minimisers make the residual
# differences noise)
SECANT_DEPTH = 4
SECANT_MIN_STEP = 10.0
# evaluations of the cheap warm map before the polish (the test points need 10 to 35)
WARM_CALLS = 40
# ... which end early where their best residual, once below the start's, has gained no
# 10 % in this many: the remembered minimisers can keep the warm map cycling about 1e-2 off
# its fixed point, where the multi-start map converges from their best point (on and off
# at held-out points: docs: Validation report, solver_rules_polish.jsonl)
WARM_GIVE_UP_EVALS = 10
# the stall window of the polish (core.iteration.STALL_EVALS elsewhere): its evaluations
# cost several warm ones, and where it stalls it does so from its first evaluations, at
# the floor of the warm point (polish_stall_window; the measurements: docs: Validation
# report, "Where the continuum solves spend their evaluations", and docs: Changelog)
POLISH_STALL_EVALS = 8
# largest student β at which the warm fixed point is polished on the certified map; above,
# on the multi-start map, certified once at its fixed point (where the prox is far from
# convex the certified map's minimisers switch between evaluations and its polish creeps;
# the measurements behind the edge: docs: Changelog)
CERTIFIED_POLISH_MAX_BETA = 3.0
# largest student β at which Anderson's T = 2 iterations from the original starts (no
# coarse point or warm start near the fixed point) run warm; above, the remembered
# minimisers of a prox far from convex send them astray, and a cold T = 2 evaluation costs
# little more than a warm one. At T ≥ 3 (cold evaluations cost several warm ones), near
# the fixed point, and in the coarse stage's hybrid method they run warm at every β (the
# measurements, both choices forced: docs: Validation report, "The warm-iteration rule").
WARM_FROM_STARTS_MAX_BETA = 3.0


def iterates_warm(channel, *, near, method="anderson"):
    """Whether the iterations on ``channel`` run the warm prox (each node's prox from its
    last minimiser): near the fixed point (``near``), with the hybrid method or at T ≥ 3
    at every β, else (Anderson from the original starts at T = 2) up to
    :data:`WARM_FROM_STARTS_MAX_BETA`."""
    return getattr(channel, "warm_startable", False) and (
        near or method == "hybrid" or channel.n_tokens >= 3
        or channel.beta_ <= WARM_FROM_STARTS_MAX_BETA)


def polish_stall_window(fixed_point_map, x, certified):
    """The stall window of the polish from the warm fixed point ``x``.

    :data:`POLISH_STALL_EVALS` on the certified map, and on the multi-start map off the
    clip (:func:`near_the_clip`); near the clip the multi-start polish keeps
    :data:`~skattn.theory.core.iteration.STALL_EVALS`, as there the plain variables are
    jagged and a pause of the polish is no floor of the quadrature (a noiseless T = 6 point
    paused longer and then converged).

    Parameters
    ----------
    fixed_point_map : FixedPointMap
    x : ndarray
        The warm fixed point, in the map's variables.
    certified : bool
        Whether the polish runs on the certified map.

    Returns
    -------
    int
        The stall window, in evaluations.
    """
    if certified or not near_the_clip(fixed_point_map, x):
        return POLISH_STALL_EVALS
    return STALL_EVALS


def polishes_certified(channel):
    """Whether the warm fixed point is polished on the certified map (up to
    :data:`CERTIFIED_POLISH_MAX_BETA`) rather than on the multi-start one."""
    return channel.beta_ <= CERTIFIED_POLISH_MAX_BETA


def polishes_certified_once(channel):
    """Whether the certified polish is one evaluation, after which (where it does not
    converge) the multi-start polish goes on from the warm fixed point: where the channel
    has a multi-start memory (T ≥ 3).

    Where Σ is large each certified evaluation can take seconds of star searches, and the
    certified polish several of them; the points whose first certified evaluation
    converges take the same path (on and off at held-out points: docs: Validation report,
    solver_rules_polish.jsonl)."""
    return bool(getattr(channel, "multistart_memorable", False))


def get_field(obj, name):
    """``obj[name]`` for a dict, else ``obj.name`` (channels return either)."""
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


# Coarse to fine: the fixed point is first found on this many of the quadrature nodes (a
# prefix of the Sobol sequence) with the prior side on one fixed draw
# (:class:`~skattn.theory.denoisers.SampledDenoiser`, a tenth of the free convolution's
# cost), to COARSE_TOL, and then with the exact map on all nodes from there. On the T = 2,
# 3 test points the full-node stage then takes a few times fewer evaluations (docs:
# Changelog). The coarse fixed point sits within the quadrature error of 1024 nodes (~2 %
# in Σ) and the draw's O(1/d) of the fine one, and minimiser jumps make the coarse map
# rough below ~1e-3 (β = 4),
# so a tighter tolerance gains nothing. Both stages are capped: where the coarse map is
# hard to iterate (β = β0 = 2, or λ = 1e-3: no residual below COARSE_HANDOVER in
# COARSE_CALLS) or the fine iteration stalls near the coarse point, the solver goes on as
# without the coarse stage, from the original starts.
COARSE_TOL = 1e-3
COARSE_HANDOVER = 5e-2
COARSE_CALLS = 30
HANDOVER_CALLS = 60
# Linear attention's start stage is on all nodes (below), where the sampled prior side makes
# an evaluation a fraction of an exact one; its maps creep (Anderson's steps rejected, then
# damped ones) from the default start for longer than the softmax coarse maps (docs:
# Changelog), so it gets twice the cap.
LINEAR_START_CALLS = 2 * COARSE_CALLS


def coarse_calls(attention):
    """The evaluation cap of the coarse (start) stage."""
    return LINEAR_START_CALLS if attention == "linear" else COARSE_CALLS


def coarse_size(n_nodes, n_coarse_nodes, attention, warm, sampled_prior=False):
    """Number of nodes of the coarse stage, or 0 when it would save nothing.

    None with a warm start (``init``: it is already near the fine fixed point, and the
    coarse stage would first move it to the coarse one: a 32-point T = 2 curve was slower
    with it) and with ``n_coarse_nodes=None``. Softmax: ``n_coarse_nodes``, unless that
    is more than a quarter of ``n_nodes``. Linear attention (its prox is closed-form, so
    fewer nodes save little): all ``n_nodes`` where the stage has the sampled prior side
    (``sampled_prior``, the factored parametrization), which is what the cost is there;
    else none.
    """
    if warm or n_coarse_nodes is None:
        return 0
    if attention == "linear":
        return int(n_nodes) if sampled_prior else 0
    if 4 * n_coarse_nodes > n_nodes:
        return 0
    return int(n_coarse_nodes)


def starts(fixed_point_map, init, prior0, Q0, full):
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


def iterate_starts(fixed_point_map, starts, *, tol, max_calls, damping, secants=None,
                   method="anderson", stall_evals=STALL_EVALS, give_up_evals=None):
    """:func:`~skattn.theory.core.iteration.robust_fixed_point` (``method="anderson"``,
    with ``stall_evals``) or :func:`~skattn.theory.core.iteration.powell_hybrid`
    (``"hybrid"``, without ``secants``) from the first start; the next ones only where the
    map is undefined at the previous."""
    x, res_norm, converged = starts[0], np.inf, False
    for start in starts:
        if fixed_point_map.n_calls >= max_calls:
            break
        if method == "hybrid":
            x_s, norm_s, converged = powell_hybrid(fixed_point_map, start, tol=tol,
                                                   max_iter=max_calls)
        else:
            x_s, norm_s, converged = robust_fixed_point(
                fixed_point_map, start, tol=tol, max_iter=max_calls, damping=damping,
                secants=secants, stall_evals=stall_evals, give_up_evals=give_up_evals)
        secants = None
        if norm_s < res_norm:
            x, res_norm = x_s, norm_s
        if converged or np.isfinite(norm_s):
            break
    return x, res_norm, converged


def iterate(fixed_point_map, channel, starts, *, tol, max_iter, damping, polish=True,
            secants=None, method="anderson", near=False):
    """The fixed point of the map from ``starts``: ``(x, |r|_max, converged)``.

    ``secants``: ``(dX, dR)`` of a nearby map (:meth:`FixedPointMap.secants`), for the
    first iteration from ``starts[0]``.

    ``method``: ``"anderson"`` (:func:`~skattn.theory.core.iteration.robust_fixed_point`)
    or ``"hybrid"`` (:func:`~skattn.theory.core.iteration.powell_hybrid`, for every stage:
    the coarse map, whose evaluations are cheap enough for a finite-difference Jacobian).

    ``near``: whether ``starts[0]`` is near the fixed point (a coarse stage's point or a
    warm start), where the iterations run warm at every β (:func:`iterates_warm`).

    ``polish``: after the warm iterations, iterate the multi-start map to ``tol`` from
    their point: the certified one (the one reported) up to
    :data:`CERTIFIED_POLISH_MAX_BETA`, above it the uncertified one, whose fixed point the
    caller certifies in one last evaluation (as without warm iterations). Where the
    channel has a multi-start memory (T ≥ 3), the certified polish is one evaluation: where
    it does not converge, the uncertified polish goes on from the warm fixed point. Without
    ``polish`` (the coarse stage, a start for the fine one) the warm fixed point is
    returned as it is.
    """
    converged, x, res_norm = False, starts[0], np.inf
    warm_tried = iterates_warm(channel, near=near, method=method)
    if warm_tried:
        # cheap iterations: each node's prox from its previous z*, uncertified; then the
        # same iteration with the multi-start prox (the map whose fixed point we report)
        # from there, which takes a few evaluations. The warm map remembers its past z*,
        # so near a switch of minimisers it can cycle at the tol level: it gets a capped
        # budget, and the polish starts from its best point anyway.
        fixed_point_map.warm = True
        try:
            x, res_norm, converged = iterate_starts(
                fixed_point_map, starts, tol=tol, damping=damping,
                max_calls=min(max_iter, WARM_CALLS), secants=secants, method=method,
                give_up_evals=WARM_GIVE_UP_EVALS)
        except RuntimeError:  # a wild warm iterate broke the prior side: iterate cold
            res_norm = np.inf
        finally:
            fixed_point_map.warm = False
        if converged and not polish:
            return x, res_norm, converged
        if res_norm < 1e-3:  # else the original starts do as well
            # certified, its last evaluation (at the fixed point) is the one reported;
            # uncertified (β above the edge), the caller certifies that point once
            certified = polishes_certified(channel)
            if certified:
                one_certified = polishes_certified_once(channel)
                warm_x = x
                fixed_point_map.certify = True
                try:
                    x, res_norm, converged = _polish(
                        fixed_point_map, x, tol=tol, max_iter=max_iter, damping=damping,
                        max_calls=fixed_point_map.n_calls + 1 if one_certified else None)
                finally:
                    fixed_point_map.certify = False
                if one_certified and not converged:
                    x, res_norm, converged = polish_multistart(
                        fixed_point_map, channel, warm_x, tol=tol, max_iter=max_iter,
                        damping=damping)
            else:
                x, res_norm, converged = polish_multistart(
                    fixed_point_map, channel, x, tol=tol, max_iter=max_iter, damping=damping)
        elif res_norm < COARSE_HANDOVER and fixed_point_map.n_calls < max_iter:
            # close, but the warm map crept there (its remembered minimisers): the
            # multi-start map from its best point, before the original starts, which can
            # wander far from it first (docs: Changelog)
            x_h, norm_h, converged = iterate_starts(
                fixed_point_map, [x], tol=tol, damping=damping,
                max_calls=min(max_iter, fixed_point_map.n_calls + HANDOVER_CALLS),
                secants=fixed_point_map.secants(min_step=SECANT_MIN_STEP * tol),
                method=method)
            if converged or norm_h < res_norm:
                x, res_norm = x_h, norm_h
    if not converged and fixed_point_map.stall_floor is None:
        # as without the warm iterations, from the original starts (not after a stall of
        # the polish: the same map has the same floor from any start)
        first_budget = max_iter - max_iter // ORTHOGONAL_SHARE
        x_f, norm_f, converged = iterate_starts(fixed_point_map, starts, tol=tol,
                                                max_calls=first_budget, damping=damping,
                                                secants=None if warm_tried else secants,
                                                method=method)
        # the best point so far (the warm iterations' where the budget left none for this)
        if converged or norm_f <= res_norm:
            x, res_norm = x_f, norm_f
    if not converged and fixed_point_map.n_calls < max_iter and np.isfinite(res_norm) \
            and not _stalled_off_the_clip(fixed_point_map, x):
        x, res_norm, converged = iterate_orthogonal(fixed_point_map, x, res_norm,
                                                    tol=tol, max_iter=max_iter,
                                                    damping=damping, method=method)
    return x, res_norm, converged


def _polish(fixed_point_map, x, *, tol, max_iter, damping, max_calls=None):
    """The polish's iteration from ``x`` on the map as it is set (certified, multi-start
    or its memory), up to ``max_calls`` evaluations in all (``max_iter`` by default)."""
    return iterate_starts(
        fixed_point_map, [x], tol=tol, damping=damping,
        max_calls=max_iter if max_calls is None else min(max_iter, max_calls),
        secants=fixed_point_map.secants(min_step=SECANT_MIN_STEP * tol),
        stall_evals=polish_stall_window(fixed_point_map, x, fixed_point_map.certify))


def polish_multistart(fixed_point_map, channel, x, *, tol, max_iter, damping):
    """The polish on the (uncertified) multi-start map from the warm fixed point ``x``:
    ``(x, |r|_max, converged)``.

    Where the channel has a multi-start memory (``multistart_memorable``), the polish
    first iterates on it (the nodes whose starts all agreed run from their last minimiser
    alone, a fraction of the multi-start's cost) for up to :data:`MEMORY_CALLS`
    evaluations. Where that converges and one evaluation of the multi-start map at its
    point is within ``tol`` too, the memory held: that point is the multi-start map's
    fixed point. Otherwise the polish runs as without the memory, from ``x`` with the
    path state (:meth:`FixedPointMap.restore_path`) and the budget it would have had
    (the stage's evaluations move to :attr:`FixedPointMap.refunded_calls`), so that it
    ends where it would have ended.
    """
    if fixed_point_map.remembers_multistarts and getattr(channel, "multistart_memorable",
                                                          False):
        path, calls = fixed_point_map.path_state(), fixed_point_map.n_calls
        forget_multistart_memory(channel)
        fixed_point_map.multistart_memory = True
        try:
            x_m, _, held = _polish(fixed_point_map, x, tol=tol, max_iter=max_iter,
                                   damping=damping,
                                   max_calls=fixed_point_map.n_calls + MEMORY_CALLS)
        finally:
            fixed_point_map.multistart_memory = False
            forget_multistart_memory(channel)
        if held:
            x_m, norm_m, held = _polish(fixed_point_map, x_m, tol=tol, max_iter=max_iter,
                                        damping=damping,
                                        max_calls=fixed_point_map.n_calls + 1)
            if held:
                return x_m, norm_m, True
        # the polish as it would have run from x: its budget (the stage's evaluations are
        # refunded), its path state (a floor of the memory's map is no floor of the
        # multi-start map; the secants and the denoiser's warm start steer the path)
        fixed_point_map.restore_path(path)
        fixed_point_map.refunded_calls += fixed_point_map.n_calls - calls
        fixed_point_map.n_calls = calls
    return _polish(fixed_point_map, x, tol=tol, max_iter=max_iter, damping=damping)


# The evaluation cap of the multi-start memory's stage of the polish (polish_multistart;
# each of its evaluations costs a few warm ones)
MEMORY_CALLS = 30


# Share of the evaluation budget kept for the orthogonal variables when the plain ones
# fail (they stall near perfect recovery at small λ, and are faster elsewhere).
ORTHOGONAL_SHARE = 3


# The orthogonal variables help where m² → q Q0 (the clip of m makes the plain map jagged
# there); a stall (a floor of the quadrature's resolution) at an overlap
# m²/(q Q0) below this is left as it is: the same map has the same floor in any variables.
CLIP_OVERLAP = 0.9

# A failed handover this close to a fixed point, near the clip, goes on in the orthogonal
# variables before the original starts (:func:`skattn.theory.core.solve._solve`).
HANDOVER_ORTHOGONAL_RESIDUAL = 1e-3
# Nearer perfect recovery (an overlap of at least RECOVERY_OVERLAP) it does so from this
# far: there the plain variables stall the handover short of it, and the orthogonal ones
# converge in fewer evaluations than the original starts; at the ghosts (a lower overlap,
# the fixed point far away) a threshold this large cost evaluations (the measurements,
# both ways: docs: Validation report, "Solver rules, on and off", and docs: Changelog)
RECOVERY_OVERLAP = 0.99
HANDOVER_ORTHOGONAL_RESIDUAL_AT_RECOVERY = 2e-2


def handover_orthogonal_threshold(fixed_point_map, x):
    """The residual below which a failed handover ending at ``x`` goes on in the orthogonal
    variables: :data:`HANDOVER_ORTHOGONAL_RESIDUAL` near the clip (:func:`near_the_clip`),
    :data:`HANDOVER_ORTHOGONAL_RESIDUAL_AT_RECOVERY` at an overlap ``m²/(q Q0)`` of at
    least :data:`RECOVERY_OVERLAP`, else 0 (never)."""
    if overlap(fixed_point_map, x) >= RECOVERY_OVERLAP:
        return HANDOVER_ORTHOGONAL_RESIDUAL_AT_RECOVERY
    return HANDOVER_ORTHOGONAL_RESIDUAL if near_the_clip(fixed_point_map, x) else 0.0


def overlap(fixed_point_map, x):
    """``m²/(q Q0)`` at the point ``x``: 1 at perfect recovery (q > 0 in both sets of variables)."""
    m, q = fixed_point_map.from_x(x)[:2]
    return m * m / (q * fixed_point_map.Q0)


def near_the_clip(fixed_point_map, x):
    """Whether the point ``x`` has an overlap ``m²/(q Q0)`` of at least
    :data:`CLIP_OVERLAP`, where the orthogonal variables help."""
    return overlap(fixed_point_map, x) >= CLIP_OVERLAP


def _stalled_off_the_clip(fixed_point_map, x):
    """Whether the iteration stalled at a point off the clip (:func:`near_the_clip`)."""
    return fixed_point_map.stall_floor is not None and not near_the_clip(fixed_point_map, x)


def iterate_orthogonal(fixed_point_map, x, res_norm, *, tol, max_iter, damping,
                       method="anderson"):
    """The iteration once more from the best point ``x``, in the variables with
    ``log(q − m²/Q0)`` (:meth:`FixedPointMap.to_x`); the map stays in them when this
    improves on ``res_norm`` (its result is then read with the same variables)."""
    state = fixed_point_map.from_x(x)
    fixed_point_map.orthogonal = True
    x_o, norm_o, converged = iterate_starts(fixed_point_map, [fixed_point_map.to_x(*state)],
                                            tol=tol, max_calls=max_iter, damping=damping,
                                            method=method)
    if converged or norm_o < res_norm:
        return x_o, norm_o, converged
    fixed_point_map.orthogonal = False
    return x, res_norm, False
