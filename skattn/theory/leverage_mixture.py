"""Finite-d state evolution with a leverage mixture: attention on token data
(docs: Theory §4, "Leverage mixture").

In the cavity (leave-one-out) form of the fixed point each sample μ enters the output
channel through its own leverage: the K × K matrix ``L_μ = ⟨A_μk, 𝒥[A_μl]⟩`` of its sensing
matrices (docs: Theory §3) under the Jacobian 𝒥 of the spectral denoiser. The Gaussian
state evolution replaces it by ``Σ I_K``: exact for a Gaussian design, where ``L_μ``
concentrates. Token data do not concentrate at finite d: the sensing matrices are quadratic
in the tokens, and ``L_μ`` is a quartic form in them whose relative spread is about 0.15 at
d = 100 (softmax T = 2, token directions). Trained models on token data at small λ sit
above the Gaussian prediction there, and models trained on a Gaussian design with the same
teacher do not (docs: Validation report, "Finite-d predictions of softmax seq2lab" and
"Linear attention at finite d").

This module keeps one scalar of ``L_μ``, its trace on the directions the loss sees
(softmax: the ``K − 1`` that are not the common shift of all logits; linear: all K), as a
per-sample
multiplier ``q_μ`` of Σ (mean 1), and solves the state evolution whose output side is the
average of the Gaussian channel over ``q``:

    m̂ = E_q[q m̂(Σq)],   q̂ = E_q[q q̂(Σq)],   Σ̂ = E_q[q Σ̂(Σq)].

The weights ``q`` (a sample's leverage) keep the degrees-of-freedom identity of penalised
least squares, ``Σ_μ V_μ/(1 + V_μ) = div Ŝ``, that the model with unit weights breaks
(linear T = 1; docs: Changelog, "Evidence moved out of the code"). The law of ``q`` is that of
the token *directions*: each token is rescaled to norm √d before the quartic form is taken.
The per-token scale is a per-sample factor that the exact-Gram channel models exactly and
that moves the prediction by under 1 % (docs: Theory §4, "Finite d"); counted here it
would be taken as independent of the residual, which it is not.

The leverage law depends only on the eigenvalues of the denoiser's input
``M = m̂ S0 + √q̂ Z − 2λ̃ I`` (tokens are isotropic, so their coordinates in the eigenbasis
of M are again standard normal): it is drawn once, at the Gaussian fixed point, with
common random numbers across d (each token coordinate and each column of the GOE draw from
its own stream), and averaged by a Gauss quadrature of its sample (``LEVERAGE_N_BINS`` = 3
nodes).

:func:`~skattn.theory.solve_state_evolution` uses it where the leverage correction says
(:func:`leverage_prediction`); :func:`solve_leverage_state_evolution` gives it beside the
Gaussian prediction on the same nodes.

Pure numpy/scipy (no torch).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from .._validation import check_choice, check_random_state_arg, check_scalar_range
from .channels import GaussianNodes, output_side, seed_minimisers, test_error
from .coords import pair_indices
from .denoisers import relu_divided_differences
from .core import solve_core
from .core.fixed_point_map import FixedPointMap, iterate
from .core.sensitivity import unestimated_effect
from .problem import (DomainWarning, FiniteSizeWarning, StateEvolutionProblem,
                      is_teacher)
from .result import mixed_fraction
from .._warnings import warn

__all__ = ["LeverageStateEvolutionResult", "leverage_multipliers", "leverage_prediction",
           "empirical_gauss_quadrature",
           "solve_leverage_state_evolution"]

#: token counts, by attention, whose predictions were compared with trained models
#: (docs: Where the predictions hold, "Leverage mixture")
LEVERAGE_N_TOKENS = {"softmax": (2, 3), "linear": (1, 2, 3)}
#: below this d the leverage spread passes ~0.25 (T = 2) and is no longer a small correction
LEVERAGE_MIN_D = 40
#: Gauss nodes of the average over the leverage law. Measured at d = 100 (α = 0.3, λ = 0.01,
#: Δ = 0.1, Wishart(0.5), ten token seeds): 3 nodes instead of 4 move the prediction by at most
#: 0.4 % (softmax T = 2) and 5 % (linear T = 1) of the law's Monte Carlo standard deviation
#: over token seeds (3e-4 and 1.3e-3 of the error); 2 nodes by 25 % and 114 % of it.
LEVERAGE_N_BINS = 3


@dataclass
class LeverageStateEvolutionResult:
    """Fixed point of the leverage-mixture state evolution (factored, seq2lab).

    Attributes
    ----------
    alpha, reg_lambda, noise : float
        The problem (``n = α d²`` samples, weight decay λ, label-noise variance Δ).
    n_features, n_tokens : int
        d and T.
    test_error : float
        Predicted ``E Σ_ab (ŷ_ab − y_ab)²`` on fresh noisy samples.
    m, q, sigma : float
        The overlaps ``Tr(S0 Ŝ)/d``, ``Tr Ŝ²/d`` and Σ at the fixed point.
    gaussian_test_error : float
        The Gaussian finite-d state evolution (``q_μ = 1``) on the same nodes.
    leverage_correction : float
        ``test_error / gaussian_test_error − 1``: the effect of the leverage spread.
    leverage_spread : float
        Relative standard deviation of ``q_μ`` at the fixed point.
    converged : bool
    n_iter : int
        Evaluations of the fixed-point map, all solves together.
    message : str
    residual : float
        ``max |map(x) − x|`` at the returned point, in the solver's coordinates.
    """

    alpha: float
    reg_lambda: float
    noise: float
    n_features: int
    n_tokens: int
    test_error: float
    m: float
    q: float
    sigma: float
    gaussian_test_error: float
    leverage_correction: float
    leverage_spread: float
    converged: bool
    n_iter: int
    message: str
    residual: float


def _leverage_matrices(gamma, tokens):
    """``L_μ[k, l] = Σ_ij γ_ij Ã_k,ij Ã_l,ij`` for the sensing matrices of docs: Theory §3.

    ``tokens`` has shape ``(n, T, d)`` in the eigenbasis of γ. With
    ``Ã_k = c_k (sym(x_a x_bᵀ) − δ_ab I)`` (``c_k = 1/√(2d)`` on the diagonal, ``1/√d``
    off it) the sum is, for γ symmetric,
    ``½[B(x_a∘x_c, x_b∘x_e) + B(x_a∘x_e, x_b∘x_c)] − δ_ce g·(x_a∘x_b) − δ_ab g·(x_c∘x_e)
    + δ_ab δ_ce Σ g`` with ``B(u, v) = uᵀγv`` and ``g = diag γ``: O(K² d²) per token
    (O(K² a (d − a)) for the divided differences of a ReLU, a of them active).
    """
    n, T, d = tokens.shape
    pairs = pair_indices(T)
    K = len(pairs)
    g = np.diag(gamma)
    # products x_a ∘ x_b for every a ≤ b, and their images under γ
    prod = {}
    for a in range(T):
        for b in range(a, T):
            prod[a, b] = prod[b, a] = tokens[:, a] * tokens[:, b]
    bilinear = _bilinear_form(gamma, prod)

    scale = np.array([1.0 / np.sqrt(2 * d) if a == b else 1.0 / np.sqrt(d) for a, b in pairs])
    L = np.empty((n, K, K))
    for k, (a, b) in enumerate(pairs):
        for l_, (c, e) in enumerate(pairs[k:], start=k):
            value = 0.5 * (bilinear((a, c), (b, e)) + bilinear((a, e), (b, c)))
            if c == e:
                value = value - prod[a, b] @ g
            if a == b:
                value = value - prod[c, e] @ g
            if a == b and c == e:
                value = value + g.sum()
            L[:, k, l_] = L[:, l_, k] = scale[k] * scale[l_] * value
    return L


def _active_block(gamma):
    """``a`` where ``γ = [[1, C], [Cᵀ, 0]]`` with an ``a × a`` block of ones: the ReLU's
    divided differences on a spectrum sorted in decreasing order (a active eigenvalues,
    :func:`~skattn.theory.denoisers.relu_divided_differences`); None for any other γ."""
    diag = np.diag(gamma)
    a = int(np.count_nonzero(diag == 1.0))
    if not (np.all(diag[:a] == 1.0) and np.all(gamma[:a, :a] == 1.0)
            and np.all(gamma[a:, a:] == 0.0)):
        return None
    return a


def _bilinear_form(gamma, prod):
    """``B(p, r) = prod[p]ᵀ γ prod[r]`` for every sample (rows), keys ``(a, b)`` of ``prod``.

    On γ of :func:`_active_block`'s form,
    ``uᵀγv = (Σ_A u)(Σ_A v) + u_A·(C v_I) + v_A·(C u_I)``: the products with C replace those
    with γ (a (d − a) instead of d² per sample; at most a quarter).
    """
    def key_of(p):
        return p if p[0] <= p[1] else (p[1], p[0])

    keys = [key for key in prod if key[0] <= key[1]]
    a = _active_block(gamma)
    if a is None:
        image = {key: prod[key] @ gamma for key in keys}

        def bilinear(p, r):
            return np.einsum("ni,ni->n", image[key_of(p)], prod[r])
        return bilinear
    C = np.ascontiguousarray(gamma[a:, :a])
    head = {key: prod[key][:, :a] for key in keys}
    sums = {key: head[key].sum(axis=1) for key in keys}
    # (C u_I) for every sample: the inactive coordinates' image on the active ones
    cross = {key: prod[key][:, a:] @ C for key in keys}

    def bilinear(p, r):
        p, r = key_of(p), key_of(r)
        return (sums[p] * sums[r] + np.einsum("ni,ni->n", head[p], cross[r])
                + np.einsum("ni,ni->n", head[r], cross[p]))
    return bilinear


def leverage_multipliers(eigenvalues, n_tokens, attention="softmax", n_samples=4000,
                         random_state=0):
    """Per-sample leverage multipliers ``q_μ`` (mean 1) of token data.

    Parameters
    ----------
    eigenvalues : array-like of shape (d,)
        Eigenvalues of the denoiser's input ``M`` (the threshold already subtracted: the
        active ones are positive).
    n_tokens : int
        T ≥ 1.
    attention : {"softmax", "linear"}, default="softmax"
        Softmax losses do not see the common shift of all logits; its direction is
        projected out of the trace.
    n_samples : int, default=4000
        Tokens drawn (each rescaled to norm √d; module docstring).
    random_state : int or None, default=0
        Seed of the token draws. Token coordinate j (paired with the j-th largest
        eigenvalue) comes from its own stream, so problems that differ only in d share
        their draws (common random numbers: the law moves smoothly with d).

    Returns
    -------
    ndarray of shape (n_samples,)
        ``tr(P L_μ P)`` over its mean, P the projector on the directions the loss sees.
    """
    nu = np.asarray(eigenvalues, dtype=float)
    if nu.ndim != 1 or nu.size < 2 or not np.all(np.isfinite(nu)):
        raise ValueError(f"eigenvalues must be a finite 1-d array of length ≥ 2, got shape "
                         f"{nu.shape}.")
    if not np.any(nu > 0):
        raise ValueError("eigenvalues has no positive (active) entry: the denoiser's output "
                         "is 0 and every leverage vanishes.")
    n_tokens = check_scalar_range(n_tokens, "n_tokens", low=1, integer=True)
    n_samples = check_scalar_range(n_samples, "n_samples", low=2, integer=True)
    check_choice(attention, "attention", ("softmax", "linear"))
    seed = _seed_of(random_state)
    d = nu.size
    nu = np.sort(nu)[::-1]
    gamma = relu_divided_differences(nu)
    L = _leverage_matrices(gamma, _token_directions(seed, n_samples, n_tokens, d))
    trace = np.einsum("nkk->n", L)
    if attention == "softmax" and n_tokens > 1:
        # u-coordinates of the common shift h_ab → h_ab + c: 1/√2 on the diagonal, 1 off it
        shift = np.array([1.0 / np.sqrt(2.0) if a == b else 1.0
                          for a, b in pair_indices(n_tokens)])
        shift /= np.linalg.norm(shift)
        trace = trace - np.einsum("k,nkl,l->n", shift, L, shift)
    return trace / trace.mean()


def empirical_gauss_quadrature(samples, n_points):
    """Nodes and weights of the ``n_points``-point Gauss quadrature of the empirical law of
    ``samples`` (Stieltjes' procedure on the discrete measure, then Golub–Welsch).

    Parameters
    ----------
    samples : ndarray of shape (n,)
        At least ``n_points`` distinct values.
    n_points : int

    Returns
    -------
    nodes, weights : ndarray of shape (n_points,)
        ``Σ_j w_j f(x_j) = mean(f(samples))`` for every polynomial f of degree
        ``≤ 2 n_points − 1``; the weights are positive and sum to 1.
    """
    x = np.asarray(samples, dtype=float)
    centre, scale = x.mean(), x.std()
    if not (scale > 0) or np.unique(x).size < n_points:
        raise ValueError(f"samples must hold at least n_points={n_points} distinct values.")
    z = (x - centre) / scale
    w = np.full(z.size, 1.0 / z.size)
    a, b = np.zeros(n_points), np.zeros(n_points)
    p_prev, p = np.zeros_like(z), np.ones_like(z)
    norm_prev = 1.0
    for k in range(n_points):
        norm = float(np.sum(w * p * p))
        a[k] = float(np.sum(w * z * p * p)) / norm
        if k > 0:
            b[k] = norm / norm_prev
        p_prev, p = p, (z - a[k]) * p - (b[k] if k > 0 else 0.0) * p_prev
        norm_prev = norm
    jacobi = np.diag(a) + np.diag(np.sqrt(b[1:]), 1) + np.diag(np.sqrt(b[1:]), -1)
    nodes, vectors = np.linalg.eigh(jacobi)
    weights = vectors[0] ** 2
    return centre + scale * nodes, weights / weights.sum()


class _MixtureMap(FixedPointMap):
    """The state-evolution map with the output side averaged over the leverage law.

    Each level of the law has its own channel object, so that each keeps its own prox
    minimisers: the iterations of :func:`~skattn.theory.core.fixed_point_map.iterate` then
    start every node of every level from its previous ``z*`` (warm, uncertified), and the
    polish, whose last evaluation is the reported one, starts from them too but keeps a
    minimiser only where the certificate proves it global (``trust_warm=False``: the other
    nodes get the multi-start, as in a cold evaluation).
    """

    # its polish starts every node from its last minimiser (not the multi-start memory)
    remembers_multistarts = False

    def set_leverage(self, multipliers, n_bins, channel_factory=None):
        """The average over the law of ``q``: an ``n_bins``-point Gauss quadrature of the
        drawn sample (:func:`empirical_gauss_quadrature`; exact for polynomials in q up to
        degree ``2 n_bins − 1``). ``channel_factory()`` gives a fresh channel like
        ``self.channel`` (one per level beyond the first; default: share ``self.channel``,
        then without warm starts)."""
        q = np.asarray(multipliers, dtype=float)
        if n_bins == 1 or np.ptp(q) == 0:
            self.levels, self.shares = np.array([q.mean()]), np.ones(1)
        else:
            self.levels, self.shares = empirical_gauss_quadrature(q, n_bins)
        # leverage weights q (module docstring), normalised: Σ_j w_j = E q = 1
        self.level_weights = self.shares * self.levels / np.sum(self.shares * self.levels)
        if channel_factory is None and self.levels.size > 1:
            self.level_channels = [self.channel] * self.levels.size
            self.reuse_minimisers = False    # one z* store cannot serve several levels
        else:
            self.level_channels = [self.channel] + [channel_factory()
                                                    for _ in self.levels[1:]]
            self.reuse_minimisers = bool(getattr(self.channel, "warm_startable", False))
        # a channel without a certificate (linear: closed-form prox) evaluates the same
        # with and without it, so the report reuses the last iterate's evaluation
        self.certifiable = hasattr(self.channel, "certify_budget")

    def step(self, m, q, sigma, t=None, certify=False):
        return super().step(m, q, sigma, t, certify=certify and self.certifiable)

    def hats(self, m, q, sigma, t=None, certify=False):
        # as FixedPointMap.hats, for every level's channel
        budgets = [getattr(ch, "certify_budget", None) for ch in self.level_channels]
        for ch, budget in zip(self.level_channels, budgets):
            if budget is not None:
                ch.certify_budget = budget if certify else 0
        try:
            return self._hats(m, q, sigma, t)
        finally:
            for ch, budget in zip(self.level_channels, budgets):
                if budget is not None:
                    ch.certify_budget = budget

    def _hats(self, m, q, sigma, t=None):
        warm_start = self.warm or self.reuse_minimisers
        outs = [output_side(channel, m=m, q=q, Q0=self.Q0, noise=self.noise,
                            sigma=sigma * level, alpha=self.alpha, nodes=self.nodes,
                            sigma_hat_form=self.sigma_hat_form, warm_start=warm_start,
                            trust_warm=self.warm)
                for channel, level in zip(self.level_channels, self.levels)]

        def mean(name, weights):
            return float(sum(w * getattr(o, name) for w, o in zip(weights, outs)))

        w = self.level_weights
        # the conjugates carry the leverage weights; the training error and the certified
        # share are plain averages over the samples, and so are their bounds
        return SimpleNamespace(
            m_hat=mean("m_hat", w), q_hat=mean("q_hat", w), sigma_hat=mean("sigma_hat", w),
            train_error=mean("train_error", self.shares),
            certified_fraction=mixed_fraction(
                self.shares, [o.certified_fraction for o in outs]), t_hat=None,
            uncertified_bound=_mixture_bound(outs, w, self.shares))


def _mixture_bound(outs, weights, shares):
    """How far the levels' uncertified minimisers can move the mixture: each level's bound
    (:func:`~skattn.theory.channels.common.uncertified_bound`) with its weight, the
    leverage weights for the conjugates and the shares for the train error and the Moreau
    envelope. None where a level has none (the warm iterations); empty for linear levels."""
    bounds = [getattr(o, "uncertified_bound", None) for o in outs]
    if any(b is None for b in bounds):
        return None
    keys = {k for b in bounds for k in b}
    return {k: float(sum((s if k in ("train_error", "moreau") else w) * b.get(k, 0.0)
                         for w, s, b in zip(weights, shares, bounds))) for k in sorted(keys)}


def _input_eigenvalues(eig0, prior_hats, reg_trace, seed):
    """Eigenvalues of ``M = m̂ S0 + √q̂ Z − 2λ̃ I`` for one GOE draw Z (rotation invariance:
    only the eigenvalues of S0 enter). S0's eigenvalues are placed largest first and Z's
    columns come from their own streams, so the draw at d is the leading block of the draw
    at d + 1 (common random numbers across d)."""
    m_hat, q_hat = prior_hats
    d = eig0.size
    g = _goe_normals(seed, d)
    Z = (g + g.T) / np.sqrt(2 * d)
    diag = np.diag(np.sort(eig0)[::-1])
    return np.linalg.eigvalsh(m_hat * diag + np.sqrt(q_hat) * Z) - 2.0 * reg_trace


@functools.lru_cache(maxsize=2)
def _token_directions(seed, n_samples, n_tokens, d):
    """The law's tokens, each rescaled to norm √d: shape ``(n_samples, n_tokens, d)``,
    read-only. Cached (a few MB each): the points of a curve at one d, and repeated
    predictions, draw the same tokens (common random numbers), which cost about as much as
    the rest of the law."""
    tokens = coordinate_normals(seed, 1, (n_samples, n_tokens), d)
    tokens *= np.sqrt(d) / np.linalg.norm(tokens, axis=2, keepdims=True)
    tokens.flags.writeable = False
    return tokens


@functools.lru_cache(maxsize=4)
def _goe_normals(seed, d):
    """The normals of the GOE draw of :func:`_input_eigenvalues`, read-only (cached as
    :func:`_token_directions`)."""
    g = coordinate_normals(seed, 0, (d,), d)
    g.flags.writeable = False
    return g


def coordinate_normals(seed, stream, shape, d):
    """Standard normals of shape ``(*shape, d)`` whose coordinate j is drawn from its own
    stream ``(seed, stream, j)``: the first d coordinates do not depend on d.

    Parameters
    ----------
    seed, stream : int
    shape : tuple of int
    d : int

    Returns
    -------
    ndarray of shape (*shape, d)
    """
    out = np.empty(tuple(shape) + (d,))
    for j in range(d):
        out[..., j] = np.random.default_rng([seed, stream, j]).standard_normal(shape)
    return out


def _seed_of(random_state):
    if random_state is None:
        return 0
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}.")
        return int(random_state)
    # a RandomState/Generator instance: one integer drawn from it
    return int(check_random_state_arg(random_state).randint(0, 2 ** 31 - 1))


@dataclass
class _MixtureSolve:
    """A solved leverage mixture: the map at its fixed point and the law behind it."""

    fixed_point_map: _MixtureMap
    x: np.ndarray
    norm: float
    converged: bool
    n_iter: int
    multipliers: np.ndarray
    eig0: np.ndarray
    Q0: float


def _solve_mixture(problem, alpha, start, *, n_bins, n_tokens_mc, n_nodes, seed, tol,
                   max_iter, state0=None, gaussian=False, alpha_fixed_point=None,
                   secants=None, minimisers=None):
    """The mixture's fixed point, started from the Gaussian result ``start``.

    The leverage law is drawn at the start's conjugates and the mixture solved (module
    docstring). ``gaussian=True``:
    ``q ≡ 1``, the Gaussian finite-d state evolution on the same nodes, in one solve.
    ``secants``: the Gaussian iteration's last ``(dX, dR)``, which start the mixture's
    Anderson mixing (its map is the Gaussian one reweighted); ``minimisers``: its prox
    minimisers on the same Sobol points (a prefix), where every level's first warm
    evaluation starts instead of a cold multi-start.
    """
    law, eig0 = problem.target_law(seed)
    Q0 = float(np.mean(eig0 ** 2))
    channel = problem.channel()
    nodes = GaussianNodes(2 * channel.K, n_points=n_nodes, seed=seed)
    sigma_hat_form = "stein" if problem.attention == "softmax" else "pointwise"
    # the law at the start's conjugates (redrawing it at the mixture's own fixed point is a
    # second-order change of a small correction)
    multipliers = np.ones(2) if gaussian else leverage_multipliers(
        _input_eigenvalues(eig0, (start.m_hat, start.q_hat), problem.reg_trace, seed),
        problem.n_tokens, problem.attention, n_samples=n_tokens_mc, random_state=seed)
    if alpha_fixed_point is None:
        alpha_fixed_point = problem.effective_alpha(alpha)
    fixed_point_map = _MixtureMap(alpha_fixed_point, channel,
                                  problem.denoiser(law, eig0, seed), Q0, problem.noise,
                                  nodes, sigma_hat_form)
    fixed_point_map.set_leverage(multipliers, 1 if gaussian else n_bins, problem.channel)
    if (minimisers is not None and fixed_point_map.reuse_minimisers
            and minimisers.shape[0] >= nodes.n_points and minimisers.shape[1] == channel.K):
        for level_channel in fixed_point_map.level_channels:
            seed_minimisers(level_channel, nodes, minimisers[:nodes.n_points])
    # a state, not the other map's x: iterate may leave a map in other variables
    x = fixed_point_map.to_x(*((start.m, start.q, start.sigma) if state0 is None else state0))
    # warm iterations, then the certified polish (its last evaluation is the reported one)
    x, norm, ok = iterate(fixed_point_map, channel, [x], tol=tol, max_iter=max_iter,
                          damping=0.5, secants=secants, near=True)
    n_iter = fixed_point_map.n_calls
    return _MixtureSolve(fixed_point_map, x, float(norm), bool(ok), n_iter, multipliers,
                         eig0, Q0)


def leverage_prediction(gaussian, *, n_bins=LEVERAGE_N_BINS, n_tokens_mc=4000, n_nodes=4096,
                        tol=1e-7, max_iter=300, random_state=0, alpha_fixed_point=None,
                        secants=None, minimisers=None):
    """The leverage-mixture prediction of :func:`~skattn.theory.solve_state_evolution`.

    Parameters
    ----------
    gaussian : StateEvolutionResult
        The finite-d Gaussian fixed point (``result.problem`` set), the start.
    n_bins, n_tokens_mc, n_nodes, tol, max_iter :
        As in :func:`solve_leverage_state_evolution`.
    random_state : int, default=0
    alpha_fixed_point : float or None, default=None
        The sample ratio of the Gaussian fixed point (``CoreSolution.alpha_fixed_point``:
        between α_eff and α across the rank-cap ramp); None: ``problem.effective_alpha``.
    secants : tuple of ndarray or None, default=None
        ``CoreSolution.secants`` of the Gaussian fixed point: the mixture's iteration
        starts its Anderson mixing with them.
    minimisers : ndarray or None, default=None
        ``CoreSolution.minimisers``: the start of each level's first prox evaluation.

    Returns
    -------
    StateEvolutionResult
        With the mixture's overlaps, conjugates, errors, objective and learned spectrum;
        ``params`` also holds ``leverage_spread`` and ``gaussian_test_error``.
    """
    problem = getattr(gaussian, "problem", None)
    if problem is None or problem.n_features is None:
        raise TypeError("gaussian must be a finite-d StateEvolutionResult with its problem, "
                        f"got {type(gaussian).__name__}.")
    solve = _solve_mixture(problem, gaussian.alpha, gaussian, n_bins=n_bins,
                           n_tokens_mc=n_tokens_mc, n_nodes=n_nodes, seed=int(random_state),
                           tol=tol, max_iter=max_iter, alpha_fixed_point=alpha_fixed_point,
                           secants=secants, minimisers=minimisers)
    fixed_point_map = solve.fixed_point_map
    m, q, sigma = fixed_point_map.from_x(solve.x)
    out, prior = fixed_point_map.step(m, q, sigma, certify=True)
    error = float(test_error(fixed_point_map.channel, m=m, q=q, Q0=solve.Q0,
                             noise=problem.noise, nodes=fixed_point_map.nodes))
    objective = gaussian.alpha * out.train_error + problem.reg_trace * prior.trace
    spectrum = prior.eigenvalues
    if hasattr(fixed_point_map.denoiser, "learned_spectrum"):
        spectrum = fixed_point_map.denoiser.learned_spectrum(prior)
    converged = solve.converged and bool(np.all(np.isfinite([m, q, sigma, error, objective])))
    message = ("converged" if converged else
               f"fixed-point residual {solve.norm:.2e} above tol={tol:.1e}") + \
        " (leverage mixture, skattn.theory.leverage_mixture)"
    return replace(
        gaussian, m=m, q=q, sigma=sigma, m_hat=out.m_hat, q_hat=out.q_hat,
        sigma_hat=out.sigma_hat, test_error=error, train_error=out.train_error,
        train_objective=objective, eta=prior.eta, delta=prior.delta, epsilon=prior.epsilon,
        converged=converged, residual=solve.norm, n_iter=gaussian.n_iter + solve.n_iter,
        finite_eigenvalues=spectrum, message=message,
        certified_fraction=out.certified_fraction,
        # its own bound; its effect through the mixture's fixed point is not estimated
        extras={**gaussian.extras, "uncertified_bound": out.uncertified_bound,
                "uncertified_effect": unestimated_effect(out.uncertified_bound)},
        params={**gaussian.params, "trace": prior.trace,
                "leverage_spread": float(np.std(solve.multipliers)),
                "gaussian_test_error": gaussian.test_error})


def solve_leverage_state_evolution(alpha, *, target, reg_lambda, width_ratio=1.0, beta=1.0,
                                   n_bins=LEVERAGE_N_BINS, n_tokens_mc=4000, n_nodes=4096,
                                   random_state=0, tol=1e-7, max_iter=300):
    """Same-instance prediction with the leverage mixture, beside its Gaussian counterpart.

    For factored seq2lab, softmax with T = 2 and linear with T = 1, this is the prediction
    that :func:`~skattn.theory.solve_state_evolution` returns for ``target=teacher``
    (the leverage correction, :mod:`skattn.theory.corrections.leverage`); here it comes
    with the Gaussian finite-d prediction on the same nodes and their ratio. Softmax T = 3
    and linear T = 2, 3 are compared with trained models but not routed (docs: Where the
    predictions hold, "Leverage mixture").

    Parameters
    ----------
    alpha : float
        Samples per d²: ``n = α d²``; in (0, 100].
    target : AttentionIndexedModel
        The teacher (duck-typed: ``S0_``, ``n_tokens``, ``noise``, ``attention``,
        ``n_features``, ``beta``): softmax attention with T ∈ {2, 3} or linear attention with
        T ∈ {1, 2, 3}, one head, Gaussian tokens. Its own S0, T, β0 and label noise are
        used.
    reg_lambda : float
        Weight decay λ of the factored estimator; > 0.
    width_ratio : float, default=1.0
        κ = p/d of the student, ≥ 1 (a rank cap is not modelled here).
    beta : float, default=1.0
        Inverse temperature β of the student.
    n_bins : int, default=3
        Gauss-quadrature nodes of the average over the leverage law (exact for
        polynomials in q up to degree ``2 n_bins − 1``); ≥ 2.
    n_tokens_mc : int, default=4000
        Tokens drawn for the leverage law; ≥ 100.
    n_nodes : int, default=4096
        Gaussian (Sobol) nodes of the output side; ≥ 64.
    random_state : int, default=0
        Seed of the nodes, the GOE draws and the tokens.
    tol : float, default=1e-7
        Convergence of the fixed point.
    max_iter : int, default=300
        Evaluations of the map per solve.

    Returns
    -------
    LeverageStateEvolutionResult

    Warns
    -----
    DomainWarning
        If d < ``LEVERAGE_MIN_D`` (the leverage spread is then no longer a small
        correction), and the Gaussian start's own domain warnings (a spiky target, say).

    Raises
    ------
    TypeError
        If ``target`` is not a teacher.
    ValueError
        If the teacher's attention, T, heads or tokens are outside the list above, or an
        argument is out of range.
    """
    if not is_teacher(target):
        raise TypeError("target must be a teacher (an AttentionIndexedModel, with S0_, "
                        f"n_tokens, noise, attention, n_features), got {type(target).__name__}.")
    allowed = LEVERAGE_N_TOKENS.get(getattr(target, "attention", None), ())
    if int(target.n_tokens) not in allowed:
        raise ValueError("target must have attention='softmax' with n_tokens in "
                         f"{LEVERAGE_N_TOKENS['softmax']} or attention='linear' with n_tokens "
                         f"in {LEVERAGE_N_TOKENS['linear']} (where the leverage mixture was "
                         f"compared with trained models), got attention={target.attention!r}, "
                         f"n_tokens={target.n_tokens}.")
    if getattr(target, "n_heads", 1) != 1 or getattr(target, "token_covariance", None) \
            is not None or getattr(target, "token_distribution", "gaussian") != "gaussian":
        raise ValueError("target must have one head and isotropic Gaussian tokens "
                         "(n_heads=1, token_covariance=None, token_distribution='gaussian').")
    alpha = check_scalar_range(alpha, "alpha", low=0, low_inclusive=False, high=100)
    reg_lambda = check_scalar_range(reg_lambda, "reg_lambda", low=0, low_inclusive=False)
    width_ratio = check_scalar_range(width_ratio, "width_ratio", low=1)
    n_bins = check_scalar_range(n_bins, "n_bins", low=2, integer=True)
    n_tokens_mc = check_scalar_range(n_tokens_mc, "n_tokens_mc", low=100, integer=True)
    n_nodes = check_scalar_range(n_nodes, "n_nodes", low=64, integer=True)
    tol = check_scalar_range(tol, "tol", low=0, low_inclusive=False)
    max_iter = check_scalar_range(max_iter, "max_iter", low=1, integer=True)
    d = int(target.n_features)
    if d < LEVERAGE_MIN_D:
        warn(f"n_features={d} is below {LEVERAGE_MIN_D}: the leverage spread is no "
             "longer a small correction there (docs: Where the predictions hold).", DomainWarning)
    rng = check_random_state_arg(random_state)
    seed = int(rng.randint(0, 2 ** 31 - 1))

    problem = StateEvolutionProblem.from_teacher(target, reg_lambda=reg_lambda,
                                                 width_ratio=width_ratio, beta=beta)
    with warnings.catch_warnings():
        # the Gaussian start's FiniteSizeWarning is the excess modelled here (its other
        # DomainWarnings, a spiky target say, apply to this prediction too)
        warnings.simplefilter("ignore", FiniteSizeWarning)
        start = solve_core(alpha, problem, dict(random_state=seed)).result
    options = dict(n_bins=n_bins, n_tokens_mc=n_tokens_mc, n_nodes=n_nodes, seed=seed,
                   tol=tol, max_iter=max_iter)
    # the Gaussian counterpart on the same nodes: the mixture with q ≡ 1
    gaussian = _solve_mixture(problem, alpha, start, gaussian=True, **options)
    mixture = _solve_mixture(problem, alpha, start,
                             state0=gaussian.fixed_point_map.from_x(gaussian.x), **options)
    m, q, sigma = mixture.fixed_point_map.from_x(mixture.x)
    m_g, q_g, _ = gaussian.fixed_point_map.from_x(gaussian.x)
    channel = mixture.fixed_point_map.channel
    test_nodes = GaussianNodes(2 * channel.K, n_points=max(n_nodes, 2 ** 15), seed=seed)
    error = float(test_error(channel, m=m, q=q, Q0=mixture.Q0, noise=problem.noise,
                             nodes=test_nodes))
    gaussian_error = float(test_error(channel, m=m_g, q=q_g, Q0=mixture.Q0,
                                      noise=problem.noise, nodes=test_nodes))
    converged = bool(mixture.converged and gaussian.converged)
    residual = float(max(mixture.norm, gaussian.norm))
    message = "converged" if converged else (
        f"not converged: residual {residual:.2e} > tol {tol:.1e} after {max_iter} "
        "evaluations per solve; raise max_iter")
    if not np.isfinite(error):
        raise FloatingPointError("the leverage-mixture fixed point has a non-finite test "
                                 f"error ({message}).")
    return LeverageStateEvolutionResult(
        alpha=alpha, reg_lambda=reg_lambda, noise=problem.noise, n_features=d,
        n_tokens=problem.n_tokens, test_error=error, m=m, q=q, sigma=sigma,
        gaussian_test_error=gaussian_error,
        leverage_correction=error / gaussian_error - 1.0,
        leverage_spread=float(np.std(mixture.multipliers)), converged=converged,
        n_iter=mixture.n_iter + gaussian.n_iter,
        message=message, residual=residual)
