"""State evolution with a few explicit spikes: targets outside Gaussian equivalence.

A power-law target (docs: Theory §1, §8) has top eigenvalues ``λ_i`` of order ``√d``.
Its top mode alone carries ``λ_1²/d`` of ``Q0``, 75 % at γ = 1.25, and its contribution
``λ_1 (x_a·v_1 x_b·v_1 − δ_ab)/√d`` to the pre-activation is an O(1) product of Gaussians
(a centred chi-square on the diagonal), not a Gaussian: the Gaussian state evolution of
docs: Theory §4 does not apply (:class:`~skattn.theory.DomainWarning`).

Here the ``k`` top modes are kept as explicit non-Gaussian variables of the output channel.
With ``g_ai = x_a·v_i ~ N(0, 1)`` (independent over a and i), the teacher's and the student's
normalised components are

.. math::

   u^0 = \\phi(g; t) + w_\\perp,\\qquad u = \\phi(g; s) + \\omega_\\perp,\\qquad
   \\phi(g; s)_{ab} = \\frac{1}{\\sqrt{1+\\delta_{ab}}} \\sum_{i\\le k} s_i
   (g_{ai} g_{bi} - \\delta_{ab}),

with ``t_i = λ_i/√d`` the target's spike strengths, ``s_i = v_iᵀ S v_i/√d`` the student's,
and ``(w_⊥, ω_⊥)`` today's Gaussian bulk pair with the overlaps of the remaining spectrum.
The derivation and the fixed-point equations are in docs: Spiky targets; the comparison
with trained models in docs: Validation report, "Spiky (power-law) targets".

Pure numpy/scipy (no torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import check_finite_array, check_scalar_range
from .channels import GaussianNodes, channel_for
from .channels.base import _squared_norm
from .channels.common import uncertified_bound
from .coords import u_from_h
from .denoisers import FactoredDenoiser
from .laws import DiscreteLaw
from .problem import GAUSSIAN_EQUIVALENCE_MAX_SHARE, DomainWarning
from .result import StateEvolutionResult

#: Largest ``δ/λ_1`` (prior-side noise width over the top eigenvalue) at which the spiked
#: state evolution is validated against trained models; above it, it falls below them (small
#: α or small d; docs: Validation report, "Spiky (power-law) targets").
SPIKE_NOISE_MAX_RATIO = 0.05
from .core.iteration import anderson
from .._warnings import warn

__all__ = [
    "SpikedSplit",
    "spike_count",
    "split_spikes",
    "spike_components",
    "Estimate",
    "spiked_test_error",
    "null_predictor_error",
    "SpikedOutputSide",
    "spiked_output_side",
    "SpikedStateEvolutionResult",
    "solve_spiked_state_evolution",
    "SPIKE_NOISE_MAX_RATIO",
    "SPIKED_ROUTED_N_TOKENS",
    "spiked_route_covers",
    "spiked_prediction",
    "is_spiked_result",
]


# -- the split of the target ----------------------------------------------------------


@dataclass(frozen=True)
class SpikedSplit:
    """A target spectrum split into ``k`` explicit spikes and a Gaussian bulk.

    Attributes
    ----------
    n_features : int
        d.
    strengths : ndarray of shape (k,)
        ``t_i = λ_i/√d`` of the k largest eigenvalues (decreasing).
    bulk_eigenvalues : ndarray of shape (d − k,)
        The remaining eigenvalues.
    bulk_Q0 : float
        ``Σ_{i>k} λ_i²/d``, the bulk's share of ``Q0 = Tr S0²/d``.
    """

    n_features: int
    strengths: np.ndarray
    bulk_eigenvalues: np.ndarray
    bulk_Q0: float

    @property
    def n_spikes(self):
        """k, the number of explicit spikes."""
        return int(self.strengths.size)


def spike_count(eigenvalues, max_share=GAUSSIAN_EQUIVALENCE_MAX_SHARE):
    """The number of modes that each carry more than ``max_share`` of ``Tr S0²``.

    These are the modes that break Gaussian equivalence (the criterion of
    :class:`~skattn.theory.DomainWarning`); the default ``n_spikes`` of
    :func:`solve_spiked_state_evolution`. Treating weaker modes as spikes is not better:
    their eigenvalues are comparable with the noise bulk at finite d (see docs: Spiky targets).

    Parameters
    ----------
    eigenvalues : array-like of shape (d,)
        Non-negative.
    max_share : float, default=GAUSSIAN_EQUIVALENCE_MAX_SHARE
        In ``(0, 1]``.

    Returns
    -------
    int
    """
    eig = check_finite_array(eigenvalues, "eigenvalues", ndim=1)
    max_share = check_scalar_range(max_share, "max_share", low=0, low_inclusive=False, high=1)
    total = float(np.sum(eig ** 2))
    if total == 0:
        return 0
    return int(np.count_nonzero(eig ** 2 / total > max_share))


def split_spikes(eigenvalues, n_spikes):
    """Split a target spectrum into its ``n_spikes`` largest modes and the bulk.

    Parameters
    ----------
    eigenvalues : array-like of shape (d,)
        The eigenvalues of S0 (any order, non-negative).
    n_spikes : int
        k, in ``[0, d − 1]``.

    Returns
    -------
    SpikedSplit
    """
    eig = check_finite_array(eigenvalues, "eigenvalues", ndim=1)
    d = eig.size
    if d < 2:
        raise ValueError(f"eigenvalues must have at least 2 entries, got {d}.")
    if np.min(eig) < 0:
        raise ValueError(f"eigenvalues must be non-negative (S0 is PSD), got min "
                         f"{np.min(eig):.3g}.")
    k = check_scalar_range(n_spikes, "n_spikes", low=0, high=d - 1, integer=True)
    eig = np.sort(eig)[::-1]
    bulk = eig[k:].copy()
    return SpikedSplit(n_features=d, strengths=eig[:k] / np.sqrt(d), bulk_eigenvalues=bulk,
                       bulk_Q0=float(np.sum(bulk ** 2) / d))


def spike_components(projections, strengths):
    """u-coordinates of the spike part ``Σ_i s_i (g_ai g_bi − δ_ab)`` of the pre-activation.

    Parameters
    ----------
    projections : array-like of shape (N, T, k)
        ``g_ai = x_a·v_i``, the tokens' projections on the spike directions.
    strengths : array-like of shape (k,)
        ``s_i = v_iᵀ S v_i/√d`` (the target's: ``λ_i/√d``).

    Returns
    -------
    u : ndarray of shape (N, K)
        ``K = T(T+1)/2`` components in the order of :func:`~skattn.theory.coords.pair_indices`.
    """
    g = check_finite_array(projections, "projections", ndim=3)
    s = check_finite_array(strengths, "strengths", ndim=1)
    if s.size != g.shape[2]:
        raise ValueError(f"strengths must have shape ({g.shape[2]},) to match projections "
                         f"of shape {g.shape}, got {s.shape}.")
    T = g.shape[1]
    h = np.einsum("nai,nbi,i->nab", g, g, s) - np.sum(s) * np.eye(T)
    return u_from_h(h)


def _spike_basis(projections):
    """``φ_i(g)``: u-coordinates of ``g_ai g_bi − δ_ab`` per spike, shape (N, k, K)."""
    N, T, k = projections.shape
    h = np.einsum("nai,nbi->niab", projections, projections) - np.eye(T)
    return u_from_h(h)


# -- expectations over spikes and bulk ------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A randomised quasi-Monte-Carlo estimate.

    Attributes
    ----------
    value : float
        The mean over the replicates.
    standard_error : float
        Standard deviation of the replicate means over √(replicates) (NaN for one).
    """

    value: float
    standard_error: float


def _nodes(channel, n_spikes, n_points, seed):
    """Sobol nodes over the bulk pair (2K) and the spike projections (T k)."""
    return GaussianNodes(2 * channel.K + channel.n_tokens * n_spikes, n_points=n_points,
                         seed=seed)


def _unpack(nodes, K, T, k):
    """``(ζ1, ζ2, g)`` from the node columns: bulk pair, then spike projections."""
    pts = nodes.points
    return pts[:, :K], pts[:, K:2 * K], pts[:, 2 * K:].reshape(pts.shape[0], T, k)


def _bulk_pair(m, q, var0, zeta1, zeta2):
    """``(ω_⊥, w_⊥)`` with covariance ``[[q, m], [m, var0]]`` per component and √V."""
    if q <= 1e-300:
        return np.zeros_like(zeta1), np.sqrt(var0) * zeta2, np.sqrt(var0)
    V = max(var0 - m * m / q, 0.0)
    return np.sqrt(q) * zeta1, (m / np.sqrt(q)) * zeta1 + np.sqrt(V) * zeta2, np.sqrt(V)


def _check_strengths(target_strengths, student_strengths):
    t = np.atleast_1d(np.asarray(target_strengths, dtype=float))
    s = np.atleast_1d(np.asarray(student_strengths, dtype=float))
    if t.ndim != 1 or s.shape != t.shape:
        raise ValueError(f"student_strengths must have the shape of target_strengths "
                         f"{t.shape}, got {s.shape}.")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(s))):
        raise ValueError("target_strengths and student_strengths must be finite.")
    return t, s


def _check_overlaps(m, q, bulk_Q0, noise):
    q = check_scalar_range(q, "q", low=0)
    bulk_Q0 = check_scalar_range(bulk_Q0, "bulk_Q0", low=0)
    noise = check_scalar_range(noise, "noise", low=0)
    m = float(m)
    if not np.isfinite(m) or m * m > q * bulk_Q0 * (1 + 1e-9) + 1e-300:
        raise ValueError(f"m must satisfy m² ≤ q·bulk_Q0 (a covariance), got m={m}, q={q}, "
                         f"bulk_Q0={bulk_Q0}.")
    return m, q, bulk_Q0, noise


def spiked_test_error(channel, *, target_strengths, student_strengths, m, q, bulk_Q0, noise,
                      n_points=8192, n_replicates=8, seed=0):
    """Test error with explicit spikes: ``E Σ_ab (labels(u0 + ξ̃)_ab − attention(u)_ab)²``.

    ``u0 = φ(g; t) + v0_⊥`` and ``u = φ(g; s) + v_⊥`` (see the module docstring), with
    ``g ~ N(0, I_{T×k})`` and the bulk pair ``(v0_⊥ + ξ̃, v_⊥)`` Gaussian with covariance
    ``[[bulk_Q0 + Δ/2, m], [m, q]]`` per component. With no spikes this is
    :func:`skattn.theory.channels.test_error`.

    Parameters
    ----------
    channel : SoftmaxChannel or LinearChannel
    target_strengths, student_strengths : array-like of shape (k,)
        ``t_i = λ_i/√d`` and ``s_i = v_iᵀ S v_i/√d``.
    m, q : float
        Bulk overlaps ``Tr(S0_⊥ S_⊥)/d`` and ``Tr S_⊥²/d``.
    bulk_Q0 : float
        ``Tr S0_⊥²/d``.
    noise : float
        Label noise Δ ≥ 0.
    n_points : int, default=8192
        Sobol nodes per replicate.
    n_replicates : int, default=8
        Independent scramblings; their spread gives the standard error.
    seed : int, default=0
        Seeds the scramblings (replicate r uses ``seed + r``).

    Returns
    -------
    Estimate
    """
    t, s = _check_strengths(target_strengths, student_strengths)
    m, q, bulk_Q0, noise = _check_overlaps(m, q, bulk_Q0, noise)
    n_replicates = check_scalar_range(n_replicates, "n_replicates", low=1, integer=True)
    K, T, k = channel.K, channel.n_tokens, t.size
    means = []
    for r in range(n_replicates):
        nodes = _nodes(channel, k, n_points, seed + r)
        zeta1, zeta2, g = _unpack(nodes, K, T, k)
        v, v0, _ = _bulk_pair(m, q, bulk_Q0 + noise / 2, zeta1, zeta2)
        if k:
            v0 = v0 + spike_components(g, t)
            v = v + spike_components(g, s)
        diff = channel.labels(v0) - channel.attention(v)
        means.append(float(nodes.mean(_squared_norm(diff))))
    se = float(np.std(means, ddof=1) / np.sqrt(n_replicates)) if n_replicates > 1 else np.nan
    return Estimate(float(np.mean(means)), se)


def null_predictor_error(eigenvalues, n_spikes, *, n_tokens=2, target_beta=1.0, noise=0.0,
                         attention="softmax", n_points=8192, n_replicates=8, seed=0):
    """Test error of the predictor ``S = 0`` with ``n_spikes`` explicit modes.

    The teacher alone: the error of the uniform attention map against noisy labels. With
    ``n_spikes = 0`` this is the Gaussian value of docs: Theory §4 (``m = q = 0``); with
    ``n_spikes = d − 1`` only one mode is left Gaussian.

    Parameters
    ----------
    eigenvalues : array-like of shape (d,)
        The target spectrum.
    n_spikes : int
        k in ``[0, d − 1]``.
    n_tokens : int, default=2
    target_beta : float, default=1.0
        β0 of the teacher.
    noise : float, default=0.0
        Δ.
    attention : {"softmax", "linear"}, default="softmax"
    n_points, n_replicates, seed
        See :func:`spiked_test_error`.

    Returns
    -------
    Estimate
    """
    split = split_spikes(eigenvalues, n_spikes)
    channel = channel_for(attention, n_tokens, 1.0, target_beta)
    return spiked_test_error(channel, target_strengths=split.strengths,
                             student_strengths=np.zeros(split.n_spikes), m=0.0, q=0.0,
                             bulk_Q0=split.bulk_Q0, noise=noise, n_points=n_points,
                             n_replicates=n_replicates, seed=seed)


# -- the output side --------------------------------------------------------------------


@dataclass
class SpikedOutputSide:
    """Conjugates of the bulk and the spike residuals from :func:`spiked_output_side`.

    Attributes
    ----------
    m_hat, q_hat, sigma_hat : float
        The bulk conjugates (paper's factor 2; Σ̂ in Stein form).
    spike_residual : ndarray of shape (k,)
        ``E[gᵀ φ_i(g)]``, with ``g = (z* − ω)/Σ`` the output function: minus the mean
        gradient of the training loss along spike i. ERM stationarity sets it to
        ``λ̃/(α√d)``.
    train_error : float
        ``E ℓ(y, z*)``.
    certified_fraction : float
        The share of nodes whose prox minimiser is certified global (as
        :class:`~skattn.theory.channels.OutputSide`).
    uncertified_bound : dict
        How far the uncertified minimisers can move ``m_hat, q_hat, sigma_hat_stein,
        train_error, moreau`` (:func:`~skattn.theory.channels.common.uncertified_bound`: the
        bulk conjugates have the core's Stein forms; the spike residuals are not bounded).
    """

    m_hat: float
    q_hat: float
    sigma_hat: float
    spike_residual: np.ndarray
    train_error: float
    certified_fraction: float = 1.0
    uncertified_bound: dict = field(default_factory=dict)


def spiked_output_side(channel, nodes, *, target_strengths, student_strengths, m, q, bulk_Q0,
                       noise, sigma, alpha, warm=None):
    """Output side of the spiked state evolution (see docs: Spiky targets).

    Per node: ``ω = φ(g; s) + ω_⊥``, ``w = φ(g; t) + w_⊥`` (label noise in ``w_⊥``),
    ``y = labels(w)``, ``z* = prox(y, ω, Σ)``, ``g_out = (z* − ω)/Σ``. Stein's lemma on the
    Gaussian bulk, conditionally on the spike projections, gives

    * ``m̂ = 2α E[g_outᵀ ζ2]/√V``, ``V = bulk_Q0 + Δ/2 − m²/q``,
    * ``q̂ = 2α E‖g_out‖²``,
    * ``Σ̂ = −2α E[g_outᵀ ζ1]/√q + (m/q) m̂`` (Stein form, docs: Theory §4),

    and the spike residuals ``E[g_outᵀ φ_i(g)]``.

    Parameters
    ----------
    channel : SoftmaxChannel or LinearChannel
    nodes : GaussianNodes of dim ``2K + T k``
        Columns: the bulk ζ1, ζ2, then the projections ``g`` (T × k, row-major).
    target_strengths, student_strengths : array-like of shape (k,)
    m, q, bulk_Q0, noise : float
        As in :func:`spiked_test_error` (``q > 0``).
    sigma : float
        Σ > 0.
    alpha : float
        ``n/d²``.
    warm : ndarray of shape (n_points, K), optional
        Previous minimisers of the same nodes: a start for the provably convex nodes.

    Returns
    -------
    out : SpikedOutputSide
    z : ndarray of shape (n_points, K)
        The minimisers (a warm start for the next call).
    """
    t, s = _check_strengths(target_strengths, student_strengths)
    m, q, bulk_Q0, noise = _check_overlaps(m, q, bulk_Q0, noise)
    if q <= 0:
        raise ValueError(f"q must be > 0 for the Stein forms of the output side, got {q}.")
    sigma = check_scalar_range(sigma, "sigma", low=0, low_inclusive=False)
    alpha = check_scalar_range(alpha, "alpha", low=0)
    K, T, k = channel.K, channel.n_tokens, t.size
    if nodes.dim != 2 * K + T * k:
        raise ValueError(f"nodes must have dim 2K + T k = {2 * K + T * k}, got {nodes.dim}.")
    zeta1, zeta2, g = _unpack(nodes, K, T, k)
    omega, w, sqrt_V = _bulk_pair(m, q, bulk_Q0 + noise / 2, zeta1, zeta2)
    phi = _spike_basis(g) if k else np.zeros((nodes.n_points, 0, K))
    omega = omega + np.einsum("nik,i->nk", phi, s)
    w = w + np.einsum("nik,i->nk", phi, t)
    y = channel.labels(w)
    start = w * (channel.target_beta_ / channel.beta_)     # the exact-fit logits
    z, certified = channel._prox_certified(y, omega, np.full(omega.shape[0], sigma),
                                           start=start, warm=warm)
    gout = (z - omega) / sigma
    m_hat = 2 * alpha * float(nodes.mean(np.sum(gout * zeta2, axis=1))) / float(sqrt_V)
    q_hat = 2 * alpha * float(nodes.mean(np.sum(gout * gout, axis=1)))
    sigma_hat = (-2 * alpha * float(nodes.mean(np.sum(gout * zeta1, axis=1))) / np.sqrt(q)
                 + (m / q) * m_hat)
    residual = nodes.mean(np.einsum("nk,nik->ni", gout, phi)) if k else np.zeros(0)
    loss = channel.loss(y, z)
    train = float(nodes.mean(loss))
    bound = uncertified_bound(certified, z, omega, loss, sigma, zeta1, zeta2, alpha=alpha,
                              m=m, q=q, V=float(sqrt_V) ** 2, mean=nodes.mean)
    return SpikedOutputSide(m_hat, q_hat, float(sigma_hat), np.asarray(residual, float),
                            train, float(np.mean(certified)), bound), z


# -- the fixed point --------------------------------------------------------------------


@dataclass
class SpikedStateEvolutionResult:
    """Fixed point of :func:`solve_spiked_state_evolution`.

    Attributes
    ----------
    alpha : float
    n_spikes : int
    m, q, sigma : float
        Bulk order parameters (normalised by d).
    student_strengths : ndarray of shape (k,)
        ``s_i = v_iᵀ Ŝ v_i/√d``; the target's are ``target_strengths``.
    target_strengths : ndarray of shape (k,)
    m_hat, q_hat, sigma_hat : float
    test_error : Estimate
    train_error : float
    train_objective : float
        ``L/d² = α e_train + λ̃ Tr Ŝ/d`` with ``Tr Ŝ/d = (bulk trace) + Σ_i s_i/√d``.
    converged : bool
    residual : float
        Max-norm of the fixed-point residual at the returned point.
    n_calls : int
        Evaluations of the fixed-point map.
    noise_to_spike : float
        ``δ/λ_1``: the prior side's noise width ``δ = √q̂/m̂`` over the top eigenvalue, the
        relative order of the terms the spiked channel neglects (docs: Spiky targets,
        "Limits"); NaN without spikes. Above :data:`SPIKE_NOISE_MAX_RATIO` the solver
        raises :class:`~skattn.theory.DomainWarning`.
    certified_fraction, uncertified_bound
        Of the output side at the returned point (:class:`SpikedOutputSide`).
    """

    alpha: float
    n_spikes: int
    m: float
    q: float
    sigma: float
    student_strengths: np.ndarray
    target_strengths: np.ndarray
    m_hat: float
    q_hat: float
    sigma_hat: float
    test_error: Estimate
    train_error: float
    train_objective: float
    converged: bool
    residual: float
    n_calls: int = 0
    noise_to_spike: float = np.nan
    certified_fraction: float = 1.0
    uncertified_bound: dict = field(default_factory=dict)


class _SpikedMap:
    """``x = (m, log q, log Σ, s_1 … s_k) ↦ F(x) − x`` on fixed nodes."""

    def __init__(self, alpha, channel, split, denoiser, bulk_scale, reg_trace, noise, nodes):
        self.alpha, self.channel, self.split = alpha, channel, split
        self.denoiser, self.bulk_scale = denoiser, bulk_scale
        self.reg_trace, self.noise, self.nodes = reg_trace, noise, nodes
        self.warm, self.n_calls, self.last, self.bulk_trace = None, 0, None, np.nan
        # the penalty's pull on a spike: ∂(λ̃ d Tr S)/∂s_i = λ̃ d^{3/2}, per n = αd² samples
        self.spike_target = reg_trace / (alpha * np.sqrt(split.n_features))

    def evaluate(self, m, q, sigma, s):
        out, z = spiked_output_side(
            self.channel, self.nodes, target_strengths=self.split.strengths,
            student_strengths=s, m=m, q=q, bulk_Q0=self.split.bulk_Q0, noise=self.noise,
            sigma=sigma, alpha=self.alpha, warm=self.warm)
        self.warm = z
        if not (out.m_hat > 0 and out.sigma_hat > 0 and np.isfinite(out.q_hat)):
            return out, None
        r = self.bulk_scale
        # the bulk lives on d − k of the d directions: GOE entries of variance 1/d are
        # a GOE(d − k) scaled by √r, and m, q, Σ are normalised by d, not d − k
        prior = self.denoiser(out.m_hat, r * out.q_hat, out.sigma_hat)
        self.bulk_trace = r * prior.trace
        return out, (r * prior.m, r * prior.q, r * r * prior.sigma)

    def residual(self, x):
        m, q, sigma, s = x[0], np.exp(x[1]), np.exp(x[2]), x[3:]
        self.n_calls += 1
        try:
            out, prior = self.evaluate(m, q, sigma, np.maximum(s, 0.0))
        except ValueError:          # an iterate outside the domain of the map
            return None
        if prior is None or not (prior[1] > 0 and prior[2] > 0):
            return None
        # Newton-like spike update: ∂E[gᵀφ_i]/∂s_i ≈ −Σ̂/(2α) (exact for a Gaussian channel)
        s_new = np.maximum(s + (2 * self.alpha / out.sigma_hat)
                           * (out.spike_residual - self.spike_target), 0.0)
        self.last = out
        return np.concatenate([[prior[0] - m, np.log(prior[1]) - x[1],
                                np.log(prior[2]) - x[2]], s_new - s])


def solve_spiked_state_evolution(alpha, eigenvalues, *, n_spikes=None, n_tokens=2, reg_lambda=0.0,
                                 width_ratio=1.0, beta=1.0, target_beta=1.0, noise=0.0,
                                 attention="softmax", n_points=8192, seed=0, tol=1e-5,
                                 max_iter=200, damping=0.5, init=None, n_replicates=8,
                                 _stacklevel=2):
    """Fixed point of the state evolution with ``n_spikes`` explicit spikes (factored ERM).

    The output side integrates over the spike projections and the Gaussian bulk
    (:func:`spiked_output_side`); the prior side is the finite-d spectral denoiser of
    docs: Theory §4 on the ``d − k`` bulk eigenvalues; each spike strength solves the
    ERM stationarity ``E[g_outᵀ φ_i] = λ̃/(α√d)``. With ``n_spikes = 0`` it is today's
    finite-d state evolution (Stein Σ̂; linear attention at ``α d/(d + 1)`` like
    :func:`~skattn.theory.solve_state_evolution`, the objective at α). Derivation:
    docs: Spiky targets.

    Parameters
    ----------
    alpha : float
        ``n/d²`` > 0.
    eigenvalues : array-like of shape (d,)
        The target spectrum (e.g. ``PowerLawTarget(γ).eigenvalues(d)``).
    n_spikes : int or None, default=None
        k in ``[0, d − 1]``; None: :func:`spike_count` (the modes that carry more than
        25 % of ``Tr S0²`` each).
    n_tokens : int, default=2
    reg_lambda : float, default=0.0
        λ of ``Σ ℓ + λ‖W‖²_F``; the trace penalty is ``λ̃ = √κ λ``.
    width_ratio : float, default=1.0
        κ ≥ 1 (the rank constraint is not supported here).
    beta, target_beta : float, default=1.0
    noise : float, default=0.0
        Δ.
    attention : {"softmax", "linear"}, default="softmax"
    n_points : int, default=8192
        Sobol nodes of the fixed-point map.
    seed : int, default=0
        Seeds the nodes.
    tol : float, default=1e-5
        Max-norm of the residual in ``(m, log q, log Σ, s)``.
    max_iter : int, default=200
        Evaluations of the map.
    damping : float, default=0.5
    init : tuple ``(m, q, sigma)`` or None, default=None
        Bulk start; None: one step from a small estimator.
    n_replicates : int, default=8
        Scramblings of the final test-error estimate.

    Returns
    -------
    SpikedStateEvolutionResult
    """
    alpha = check_scalar_range(alpha, "alpha", low=0, low_inclusive=False)
    if n_spikes is None:
        n_spikes = spike_count(eigenvalues)
    split = split_spikes(eigenvalues, n_spikes)
    width_ratio = check_scalar_range(width_ratio, "width_ratio", low=1)
    reg_lambda = check_scalar_range(reg_lambda, "reg_lambda", low=0)
    noise = check_scalar_range(noise, "noise", low=0)
    channel = channel_for(attention, n_tokens, beta, target_beta)
    d, k = split.n_features, split.n_spikes
    bulk = split.bulk_eigenvalues
    denoiser = FactoredDenoiser(DiscreteLaw(bulk), width_ratio=width_ratio,
                                reg_lambda=reg_lambda, n_features=bulk.size,
                                target_eigenvalues=bulk)
    nodes = _nodes(channel, k, n_points, seed)
    # linear attention at finite d: the sample ratio d(d+1)/2 degrees of freedom see
    # (α d/(d+1), as in solve_state_evolution; docs: Theory §4 "Finite d")
    alpha_fixed_point = alpha * d / (d + 1.0) if attention == "linear" else alpha
    fp = _SpikedMap(alpha_fixed_point, channel, split, denoiser, (d - k) / d,
                    denoiser.reg_trace, noise, nodes)
    if init is None:
        m0, q0, sigma0 = 0.3 * split.bulk_Q0, 0.3 * split.bulk_Q0, 0.5
    else:
        m0, q0, sigma0 = (float(v) for v in init)
    # the student's spikes start at the target's: the Gaussian SE puts them at η t ≈ t
    x0 = np.concatenate([[m0, np.log(max(q0, 1e-8)), np.log(sigma0)], split.strengths])
    x, res_norm, converged = anderson(fp.residual, x0, tol=tol, max_iter=max_iter,
                                       damping=damping, depth=4)
    if not converged:           # plain damped iteration from the best point
        x, res_norm, converged = anderson(fp.residual, x, tol=tol,
                                           max_iter=max_iter, damping=0.3 * damping, depth=0)
    fp.residual(x)              # the output side at the returned point
    m, q, sigma, s = float(x[0]), float(np.exp(x[1])), float(np.exp(x[2])), \
        np.maximum(x[3:], 0.0)
    out = fp.last
    err = spiked_test_error(channel, target_strengths=split.strengths, student_strengths=s,
                            m=m, q=q, bulk_Q0=split.bulk_Q0, noise=noise, n_points=n_points,
                            n_replicates=n_replicates, seed=seed + 1000)
    trace = fp.bulk_trace + float(np.sum(s)) / np.sqrt(d)
    noise_to_spike = np.nan
    if k:
        noise_to_spike = float(np.sqrt(out.q_hat) / out.m_hat
                               / (split.strengths[0] * np.sqrt(d)))
        if noise_to_spike > SPIKE_NOISE_MAX_RATIO:
            warn(
                f"outside the validated domain: spike close to the noise: the prior side's "
                f"noise width δ = √q̂/m̂ is {noise_to_spike:.3f} of the top eigenvalue (above "
                f"{SPIKE_NOISE_MAX_RATIO}); "
                f"the spiked channel neglects terms of relative order δ/λ_1, and trained "
                f"models sit above it there (small α or small d; docs: Spiky targets, "
                f"\"Limits\").", DomainWarning)
    return SpikedStateEvolutionResult(
        alpha=alpha, n_spikes=k, m=m, q=q, sigma=sigma, student_strengths=s,
        target_strengths=split.strengths, m_hat=out.m_hat, q_hat=out.q_hat,
        sigma_hat=out.sigma_hat, test_error=err, train_error=out.train_error,
        train_objective=alpha * out.train_error + denoiser.reg_trace * trace,
        converged=bool(converged), residual=float(res_norm), n_calls=fp.n_calls,
        noise_to_spike=noise_to_spike, certified_fraction=out.certified_fraction,
        uncertified_bound=out.uncertified_bound)


# -- the route from solve_state_evolution ---------------------------------------------------

#: Sequence lengths for which :func:`~skattn.theory.solve_state_evolution` routes spiky
#: softmax targets to the spiked state evolution (validated against trained models there;
#: docs: Spiky targets).
SPIKED_ROUTED_N_TOKENS = (2, 3, 4)


def spiked_route_covers(attention, parametrization, task, n_tokens, width_ratio,
                        token_kurtosis=0.0):
    """The model part of the spiked correction
    (:class:`~skattn.theory.corrections.spiked.SpikedCorrection`): factored softmax seq2lab at a validated
    T (:data:`SPIKED_ROUTED_N_TOKENS`), full width (κ ≥ 1) and Gaussian tokens.

    Parameters
    ----------
    attention : {"softmax", "linear"}
    parametrization : {"factored", "direct"}
    task : {"seq2lab", "seq2seq"}
    n_tokens : int
    width_ratio : float
    token_kurtosis : float, default=0.0

    Returns
    -------
    bool
    """
    return (attention == "softmax" and parametrization == "factored" and task == "seq2lab"
            and int(n_tokens) in SPIKED_ROUTED_N_TOKENS and width_ratio >= 1
            and token_kurtosis == 0)


def is_spiked_result(result):
    """Whether ``result`` is a :class:`~skattn.theory.StateEvolutionResult` of the spiked
    route (:func:`spiked_prediction`: its top modes are explicit, not in ``result.law``).

    Parameters
    ----------
    result : object

    Returns
    -------
    bool
    """
    return "n_spikes" in (getattr(result, "params", None) or {})


def spiked_prediction(alpha, problem, eigenvalues, *, n_nodes=8192, tol=1e-5, max_iter=200,
                      damping=0.5, init=None, random_state=0):
    """:func:`solve_spiked_state_evolution` for ``problem``, as a
    :class:`~skattn.theory.StateEvolutionResult`.

    The overlaps are the whole matrix's: ``m = m⊥ + Σ_i t_i s_i`` and ``q = q⊥ + Σ_i s_i²``
    (the cross terms between spikes and bulk are of order 1/d, docs: Spiky targets), so that
    ``s_error = Q0 − 2m + q``. Σ, the conjugates and ``eta``, ``delta``, ``epsilon`` are
    those of the bulk; ``finite_eigenvalues`` is the bulk's learned spectrum with the
    spikes ``s_i √d`` added; ``params`` also holds ``n_spikes``, ``spike_strengths`` and
    ``test_error_standard_error`` (Monte Carlo). ``init``: a result of this route (its bulk
    order parameters are the warm start), or None.

    Parameters
    ----------
    alpha : float
    problem : StateEvolutionProblem
        Inside the spiked correction's domain.
    eigenvalues : ndarray of shape (d,)
    n_nodes, tol, max_iter, damping, random_state
        As in :func:`solve_spiked_state_evolution` (``n_points``, ``seed``).
    init : StateEvolutionResult or None

    Returns
    -------
    StateEvolutionResult
    """
    bulk_init = None
    if is_spiked_result(init):
        t = init.params["target_spike_strengths"]
        s = init.params["spike_strengths"]
        bulk_init = (init.m - float(np.dot(t, s)), init.q - float(np.dot(s, s)), init.sigma)
        if not (bulk_init[1] > 0 and bulk_init[2] > 0):
            bulk_init = None
    res = solve_spiked_state_evolution(
        alpha, eigenvalues, n_tokens=problem.n_tokens, reg_lambda=problem.reg_lambda,
        width_ratio=problem.width_ratio, beta=problem.beta, target_beta=problem.target_beta,
        noise=problem.noise, attention=problem.attention, n_points=n_nodes, seed=random_state,
        tol=tol, max_iter=max_iter, damping=damping, init=bulk_init,
        _stacklevel=4)  # the caller of solve_state_evolution
    split = split_spikes(eigenvalues, res.n_spikes)
    bulk = split.bulk_eigenvalues
    denoiser = FactoredDenoiser(DiscreteLaw(bulk), width_ratio=problem.width_ratio,
                                reg_lambda=problem.reg_lambda, n_features=bulk.size,
                                target_eigenvalues=bulk)
    ratio = bulk.size / split.n_features
    prior = denoiser(res.m_hat, ratio * res.q_hat, res.sigma_hat)
    s, t = np.asarray(res.student_strengths, float), np.asarray(res.target_strengths, float)
    bulk_spectrum = denoiser.learned_spectrum(prior)
    spectrum = None if bulk_spectrum is None else np.sort(
        np.concatenate([bulk_spectrum, s * np.sqrt(split.n_features)]))
    trace = ratio * prior.trace + float(np.sum(s)) / np.sqrt(split.n_features)  # Tr Ŝ/d
    converged = bool(res.converged) and bool(np.all(np.isfinite(
        [res.m, res.q, res.sigma, res.m_hat, res.q_hat, res.sigma_hat, res.test_error.value,
         res.train_error, res.train_objective])))
    if converged:
        message = (f"converged (spiked state evolution, {res.n_spikes} explicit "
                   f"mode{'s' if res.n_spikes != 1 else ''})")
    elif res.converged:
        message = "spiked state evolution: non-finite values at the fixed point"
    else:
        message = (f"spiked state evolution: residual {res.residual:.2e} above tol={tol:.1e} "
                   f"after {res.n_calls} evaluations")
    return StateEvolutionResult(
        alpha=alpha, m=res.m + float(np.dot(t, s)), q=res.q + float(np.dot(s, s)),
        sigma=res.sigma, m_hat=res.m_hat, q_hat=res.q_hat, sigma_hat=res.sigma_hat,
        Q0=float(np.mean(np.asarray(eigenvalues, float) ** 2)),
        test_error=float(res.test_error.value), train_error=float(res.train_error),
        train_objective=float(res.train_objective), eta=prior.eta, delta=prior.delta,
        epsilon=prior.epsilon, converged=converged, n_iter=int(res.n_calls), message=message,
        residual=float(res.residual), parametrization="factored",
        params=dict(n_tokens=problem.n_tokens, reg_lambda=problem.reg_lambda,
                    width_ratio=problem.width_ratio, beta=problem.beta,
                    target_beta=problem.target_beta, noise=problem.noise,
                    attention=problem.attention, n_features=problem.n_features,
                    trace=float(trace), n_spikes=int(res.n_spikes), spike_strengths=s,
                    target_spike_strengths=t,
                    test_error_standard_error=float(res.test_error.standard_error),
                    noise_to_spike=float(res.noise_to_spike)),
        law=DiscreteLaw(bulk), finite_eigenvalues=spectrum, problem=problem,
        certified_fraction=res.certified_fraction,
        extras={"uncertified_bound": dict(res.uncertified_bound)})

