"""Gaussian expectations of the output side (docs/theory.rst §4).

:class:`GaussianNodes` are fixed quasi-Monte-Carlo Gaussian nodes (common random numbers,
so the state-evolution map is a smooth function of its arguments); :func:`output_side`
gives the conjugates ``m̂, q̂, Σ̂`` (paper's factor 2) and the train error,
:func:`test_error` the asymptotic test error.
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm, qmc

from ..._validation import check_scalar_range
from . import _kernels
from .base import _squared_norm

# largest K whose Tr(I − (I+ΣH)⁻¹) goes through the compiled Jacobi eigenvalues
_JACOBI_MAX_K = 3


class GaussianNodes:
    """Fixed quasi-Monte-Carlo nodes for expectations over ``N(0, I_dim)``.

    Scrambled Sobol points (``scipy.stats.qmc``), clipped away from 0 and 1 and mapped
    through the normal quantile. Reusing the same nodes (common random numbers) makes the
    state-evolution map a smooth function of the order parameters.

    Parameters
    ----------
    dim : int
    n_points : int, default=8192
        A power of two keeps the Sobol balance properties.
    seed : int, numpy Generator, RandomState or None, default=0
        Seeds the scrambling (``None``: fresh entropy, not reproducible).

    Attributes
    ----------
    points : ndarray of shape (n_points, dim)
    weights : ndarray of shape (n_points,)
        Uniform weights ``1/n_points``.

    Notes
    -----
    Uniforms are clipped to ``[ε, 1 − ε]``, ``ε = 1/(2048 n_points)``, before ``norm.ppf``.
    """

    def __init__(self, dim, n_points=8192, seed=0):
        self.dim = check_scalar_range(dim, "dim", low=1, integer=True)
        self.n_points = check_scalar_range(n_points, "n_points", low=1, integer=True)
        self.seed = seed
        if isinstance(seed, np.random.RandomState):
            seed = seed.randint(2 ** 31)
        try:
            sampler = qmc.Sobol(d=self.dim, scramble=True, rng=seed)
        except TypeError:                       # scipy < 1.15 names the argument ``seed``
            sampler = qmc.Sobol(d=self.dim, scramble=True, seed=seed)
        n = self.n_points
        if n & (n - 1) == 0:
            u = sampler.random_base2(int(np.log2(n)))
        else:
            with warnings.catch_warnings():     # balance warning for n not a power of 2
                warnings.simplefilter("ignore")
                u = sampler.random(n)
        eps = 0.5 / (n * 1024.0)
        u = np.clip(u, eps, 1 - eps)
        self.points = norm.ppf(u)
        self.weights = np.full(n, 1.0 / n)

    def __repr__(self):
        return f"GaussianNodes(dim={self.dim}, n_points={self.n_points}, seed={self.seed!r})"

    def subset(self, n_points):
        """The first ``n_points`` nodes, with uniform weights, as new nodes.

        A power-of-two prefix of a scrambled Sobol sequence is itself a balanced Sobol set;
        the coarse stage of the state-evolution solver iterates on one.

        Parameters
        ----------
        n_points : int
            In ``[1, self.n_points]``.

        Returns
        -------
        GaussianNodes
        """
        n_points = check_scalar_range(n_points, "n_points", low=1, high=self.n_points,
                                      integer=True)
        sub = object.__new__(GaussianNodes)
        sub.dim, sub.n_points, sub.seed = self.dim, n_points, self.seed
        sub.points = self.points[:n_points]
        sub.weights = np.full(n_points, 1.0 / n_points)
        return sub

    def mean(self, values):
        """Weighted mean over the nodes (first axis)."""
        return np.tensordot(self.weights, values, axes=(0, 0))


@dataclass
class OutputSide:
    """Conjugate order parameters and train error from :func:`output_side`.

    Attributes
    ----------
    m_hat, q_hat, sigma_hat : float
        ``m̂, q̂, Σ̂`` (with the paper's factor 2).
    train_error : float
        ``E ℓ(y, z*)``.
    moreau : float
        ``E[‖z* − ω‖²/(2Σ) + ℓ(y, z*)]``, the averaged Moreau envelope ``M(Σ, m, q)``.
    sigma_hat_pointwise : float
        ``(2α/Σ) E Tr(I − (I + ΣH)⁻¹) = −2α E[Σ_k ∂g_k/∂ω_k]`` with the pointwise
        derivative (docs/theory.rst §4).
    sigma_hat_stein : float
        ``−2α E[Σ_k ∂g_k/∂ω_k]`` in Stein form,
        ``−2α E[gᵀω]/q + (m/q) m̂``: the derivative in the sense of distributions, which also
        counts the jumps of the global minimiser z*(ω) of a non-convex prox. It equals
        ``4α ∂M/∂q``, the stationarity condition of the paper's Φ. Falls back to the
        pointwise form when ``q ≤ 1e-8 (Q0 + Δ/2)``.
    t_hat : float
        ``t̂ = −2α ∂M/∂t``, the conjugate of ``t = Tr S/d`` for non-Gaussian tokens
        (``token_kurtosis ≠ 0``); 0 for Gaussian tokens, where M does not depend on t.
    certified_fraction : float
        Fraction of the nodes whose prox minimiser is certified global (provably convex
        prox problem, the branch and bound of :mod:`._certify` for T = 2, or the
        strong-convexity certificate of :mod:`._certify_rows` for T ≥ 3); 1 for linear
        attention.
    uncertified_bound : dict
        How far the nodes that are not certified can move each reported quantity: an
        upper bound on ``|value − value with the global minimiser at those nodes|`` for
        ``m_hat``, ``q_hat``, ``sigma_hat_stein``, ``train_error`` and ``moreau`` (0 where
        every node is certified; :func:`uncertified_bound`). Empty for linear attention.
    """

    m_hat: float
    q_hat: float
    sigma_hat: float
    train_error: float
    moreau: float
    sigma_hat_pointwise: float
    sigma_hat_stein: float
    t_hat: float = 0.0
    certified_fraction: float = 1.0
    uncertified_bound: dict = field(default_factory=dict)

    def __getitem__(self, key):
        return getattr(self, key)

    def keys(self):
        return ("m_hat", "q_hat", "sigma_hat", "train_error", "moreau", "sigma_hat_pointwise",
                "sigma_hat_stein", "t_hat", "certified_fraction")  # the scalars


def uncertified_bound(certified, z, omega, loss, sigma, zeta1, zeta2, *, alpha, m, q, V,
                      mean):
    """Bounds on how much the uncertified nodes can move the output side.

    At a node with objective ``F`` at the found ``z``, every global minimiser lies in the
    ball ``‖z_g − ω‖ ≤ r = √(2ΣF)`` (``‖z_g − ω‖²/(2Σ) ≤ F(z_g) ≤ F``, ℓ ≥ 0), so
    ``‖g_g − g‖ ≤ 2r/Σ``, ``‖g_g‖², ‖g‖² ≤ (r/Σ)²`` and both losses and objectives lie in
    ``[0, F]``. Averaged over the nodes that are not certified (the certified ones already
    hold a global minimiser), with Cauchy–Schwarz on ``gᵀζ``: bounds on the change of
    ``m̂ = 2α E[gᵀζ2]/√V``, ``q̂ = 2α E‖g‖²``, the Stein ``Σ̂``, the train error and the
    Moreau envelope. A node-by-node worst case, so a bound, not an estimate.

    Returns
    -------
    dict
        ``m_hat, q_hat, sigma_hat_stein, train_error, moreau`` (floats ≥ 0).
    """
    unc = ~np.asarray(certified, dtype=bool)
    if not unc.any():
        return dict(m_hat=0.0, q_hat=0.0, sigma_hat_stein=0.0, train_error=0.0, moreau=0.0)
    F = np.sum((z - omega) ** 2, axis=1) / (2 * sigma) + loss
    r = np.sqrt(2 * sigma * np.maximum(F, 0.0)) * unc
    dm = (2 * alpha * float(mean(2 * r / sigma * np.linalg.norm(zeta2, axis=1)))
          / float(np.sqrt(V)) if V > 0 else np.inf)
    dq = 2 * alpha * float(mean((r / sigma) ** 2))
    if q > 0:
        ds = (2 * alpha * float(mean(2 * r / sigma * np.linalg.norm(zeta1, axis=1)))
              / float(np.sqrt(q)) + abs(m / q) * dm)
    else:
        ds = np.inf
    dF = float(mean(np.where(unc, F, 0.0)))
    return dict(m_hat=dm, q_hat=dq, sigma_hat_stein=ds, train_error=dF, moreau=dF)


def _trace_resolvent_complement(H, sigma):
    """``Tr(I − (I + ΣH)⁻¹)`` per sample, with ``1 + Σλ`` floored at 1e-12 (≥ 0 at a
    global minimiser). Through the eigenvalues: a closed form in the minors of ``I + ΣH``
    (tried for K = 3) loses every digit to cancellation when Σ is large (ridgeless limits).
    Up to K = 3 the eigenvalues come from compiled Jacobi rotations (as accurate as
    LAPACK, without its per-matrix overhead: 3.6 ms against 8.6 ms for 8192 3×3 matrices);
    from K = 6 (T = 3) LAPACK's batched eigvalsh is the faster.
    """
    if _kernels.HAVE_NUMBA and H.shape[1] <= _JACOBI_MAX_K:
        return _kernels.trace_resolvent_complement(np.ascontiguousarray(H), float(sigma))
    lam = np.linalg.eigvalsh(H)
    den = np.maximum(1 + sigma * lam, 1e-12)
    return np.sum(sigma * lam / den, axis=1)


def _loss_and_trace(channel, y, z, sigma):
    """Loss and ``Tr(I − (I + ΣH)⁻¹)`` per sample, ``H = ∇²ℓ(y, z*)``.

    Softmax attention with T ≥ 3 on the compiled path: one fused kernel (the Hessian per
    sample and a Cholesky trace, :func:`._kernels.loss_and_trace`; T = 6, 8192 nodes:
    ~5× less time than the numpy Hessians and LAPACK's batched eigenvalues), with the
    eigenvalues of :func:`_trace_resolvent_complement` where ``I + ΣH`` is nearly singular.
    Otherwise the numpy Hessians and :func:`_trace_resolvent_complement`.
    """
    if (_kernels.HAVE_NUMBA and getattr(channel, "compiled", False)
            and getattr(channel, "_index", None) is not None and channel.K > _JACOBI_MAX_K
            and hasattr(channel, "softmax_row_kernel")):
        loss, tr = _kernels.loss_and_trace(np.ascontiguousarray(z), np.ascontiguousarray(y),
                                           channel._index, channel._scale,
                                           float(channel.beta_), float(sigma))
        bad = np.flatnonzero(~np.isfinite(tr))
        if bad.size:
            _, _, H = channel._derivs(y[bad], z[bad])
            tr[bad] = _trace_resolvent_complement(H, sigma)
        return loss, tr
    loss, _, H = channel._derivs(y, z)
    return loss, _trace_resolvent_complement(H, sigma)      # Tr(I − (I + ΣH)⁻¹)


def _check_nodes(channel, nodes):
    if nodes is None:
        nodes = GaussianNodes(2 * channel.K)
    if nodes.dim != 2 * channel.K:
        raise ValueError(f"nodes must have dim 2K = {2 * channel.K} for n_tokens="
                         f"{channel.n_tokens}, got {nodes.dim}.")
    return nodes


def _check_overlaps(m, q, Q0, noise):
    """Validated ``(m, q, Q0, noise)`` of :func:`output_side` and :func:`test_error`."""
    m = float(m)
    q = check_scalar_range(q, "q", low=0)
    Q0 = check_scalar_range(Q0, "Q0", low=0, low_inclusive=False)
    noise = check_scalar_range(noise, "noise", low=0)
    return m, q, Q0, noise


def _gaussian_pair(m, q, var0, nodes, K):
    """``(ω, w)`` per component Gaussian with covariance ``[[q, m], [m, var0]]``.

    Returns ω, w, the residual standard deviation √V of w given ω (V = var0 − m²/q) and the
    standardised residual ζ2 = (w − (m/q) ω)/√V.
    """
    zeta1, zeta2 = nodes.points[:, :K], nodes.points[:, K:]
    if q <= 1e-300:
        omega = np.zeros_like(zeta1)
        V = var0
        w = np.sqrt(V) * zeta2
    else:
        V = max(var0 - m * m / q, 0.0)
        omega = np.sqrt(q) * zeta1
        w = (m / np.sqrt(q)) * zeta1 + np.sqrt(V) * zeta2
    return omega, w, V, zeta2


def _warm_start(channel, nodes, z=None):
    """The ``z*`` of the previous call on the same nodes (stored on the channel), or None.

    Across the fixed-point iterations of one solve the minimisers move little, so the
    previous ``z*`` of a node is a start that needs a few Newton steps; a weak reference
    to the nodes keeps a stale ``z*`` from reaching other nodes.
    """
    if z is not None:
        channel._warm_z = (weakref.ref(nodes), z)
        return None
    ref, prev = getattr(channel, "_warm_z", (None, None))
    if ref is None or ref() is not nodes or prev.shape != (nodes.n_points, channel.K):
        return None
    return prev


def output_side(channel, *, m, q, Q0, noise, sigma, alpha, nodes=None,
                sigma_hat_form="pointwise", warm_start=False, token_kurtosis=0.0, trace=None,
                target_trace=None, trust_warm=False):
    """Output side of the state evolution (docs/theory.rst §4, paper's factor 2).

    Per component ``ω ~ N(0, q)`` and ``w = u0 + ξ̃`` with
    ``w | ω ~ N((m/q) ω, Q0 − m²/q + Δ/2)``; ``y = labels(w)``, ``z* = prox(y, ω, Σ)`` and
    ``g = (z* − ω)/Σ``. Then

    * ``m̂ = 2α E[gᵀ(w − (m/q) ω)] / (Q0 − m²/q + Δ/2)``,
    * ``q̂ = 2α E‖g‖²``,
    * ``Σ̂ = (2α/Σ) E Tr(I − (I + ΣH)⁻¹)``, ``H = ∇²ℓ(y, z*)``,
    * ``train_error = E ℓ(y, z*)``.

    Parameters
    ----------
    channel : SoftmaxChannel or LinearChannel
    m, q : float
        Overlaps ``Tr(S0 S)/d`` and ``Tr S²/d`` (``q ≥ 0``, ``m² ≤ q Q0``).
    Q0 : float
        ``Tr S0²/d``.
    noise : float
        Δ ≥ 0.
    sigma : float
        Σ > 0.
    alpha : float
        ``n/d²``.
    nodes : GaussianNodes of dim 2K, optional
        Default ``GaussianNodes(2K)``.
    sigma_hat_form : {"pointwise", "stein"}, default="pointwise"
        Which form of Σ̂ is returned as ``sigma_hat``: the pointwise form of docs/theory.rst §4,
        ``(2α/Σ) E Tr(I − (I + ΣH)⁻¹)``, or the Stein (distributional) form, which is the
        stationarity condition of Φ also where the prox is non-convex and z* jumps (the
        two agree where the prox is smooth; at β = 4, Σ = 0.5 they differ by ~50 %). Both
        are always available as ``sigma_hat_pointwise`` and ``sigma_hat_stein``.
    warm_start : bool, default=False
        Start the prox of each node from its ``z*`` of the previous call with the same
        ``channel`` and ``nodes`` (the fixed-point iterations of one solve): a few Newton
        steps instead of a multi-start. Where the prox has several local minima the warm
        minimiser is kept only if certified global (:mod:`._certify`, T = 2;
        :mod:`._certify_rows`, T ≥ 3); otherwise the node gets the full multi-start. Without
        the compiled certificate (the numpy path) only the provably convex nodes use it.
    token_kurtosis : float, default=0.0
        Excess kurtosis κ4 ≥ −2 of the token entries. Non-zero: the T diagonal components
        get the overlaps ``m + (κ4/2) t0 t``, ``q + (κ4/2) t²``, ``Q0 + (κ4/2) t0²`` (see
        :func:`component_overlaps`), ``m̂`` and ``Σ̂`` are summed component by component
        and ``t_hat = (κ4/2) Σ_diag (t0 m̂_k − t Σ̂_k)`` is returned.
    trace, target_trace : float, optional
        ``t = Tr S/d`` and ``t0 = Tr S0/d``; required when ``token_kurtosis ≠ 0``.
    trust_warm : bool, default=False
        With ``warm_start``, every node that has a previous ``z*`` keeps the Newton end
        point from it, without multi-start or certificate: a cheap map for the fixed-point
        iterations, whose fixed point is then polished with ``trust_warm=False`` (a node
        may sit in a non-global local minimum). Its nodes count as certified only where
        the prox is provably convex.

    Returns
    -------
    OutputSide
        ``m_hat, q_hat, sigma_hat, train_error, moreau, sigma_hat_pointwise,
        sigma_hat_stein, t_hat, certified_fraction`` (also readable as a mapping).
    """
    if sigma_hat_form not in ("pointwise", "stein"):
        raise ValueError(f"sigma_hat_form must be one of ['pointwise', 'stein'], got "
                         f"{sigma_hat_form!r}.")
    if token_kurtosis != 0.0:
        # per-component overlaps, apart from the Gaussian path (bit-identical at κ4 = 0);
        # imported here because _components builds on this module
        from ._components import _output_side_by_component
        return _output_side_by_component(
            channel, m=m, q=q, Q0=Q0, noise=noise, sigma=sigma, alpha=alpha, nodes=nodes,
            sigma_hat_form=sigma_hat_form, warm_start=warm_start, trust_warm=trust_warm,
            token_kurtosis=token_kurtosis, trace=trace, target_trace=target_trace)
    m, q, Q0, noise = _check_overlaps(m, q, Q0, noise)
    sigma = check_scalar_range(sigma, "sigma", low=0, low_inclusive=False)
    alpha = check_scalar_range(alpha, "alpha", low=0)
    nodes = _check_nodes(channel, nodes)
    K = channel.K
    var0 = Q0 + noise / 2
    omega, w, V, zeta2 = _gaussian_pair(m, q, var0, nodes, K)

    y = channel.labels(w)
    # exact-fit logits of the label at the student's β: a start of the softmax prox
    start = w * (channel.target_beta_ / channel.beta_)
    warm = _warm_start(channel, nodes) if warm_start else None
    z, certified = channel._prox_certified(y, omega, np.full(omega.shape[0], sigma),
                                           start=start, warm=warm, trust_warm=trust_warm)
    if warm_start:
        _warm_start(channel, nodes, z)
    loss, tr = _loss_and_trace(channel, y, z, sigma)
    g = (z - omega) / sigma

    # m̂. docs/theory.rst §4 writes 2α E[gᵀ(u0 − (m/q)ω)]/(Q0 − m²/q), Stein's lemma on u0 | ω. Since g
    # depends on (u0, ξ̃) only through w = u0 + ξ̃, and w | ω ~ N((m/q)ω, V I), V = Q0 − m²/q
    # + Δ/2, Stein's lemma on w gives the same quantity, E[Σ_k ∂g_k/∂w_k]:
    #   E[gᵀ(w − (m/q)ω)]/V = E[gᵀ ζ2]/√V  with  ζ2 = (w − (m/q)ω)/√V  ~ N(0, I).
    # The Stein form is the derivative in the sense of distributions: it also counts the
    # jumps of z*(w) where the global minimiser of the non-convex softmax prox switches
    # branch, which the pointwise derivative (prox_jacobian_w) misses — at β = 4 and
    # Σ ≳ 0.5 the two differ by 25–60 %. When V vanishes (m² = q Q0, Δ = 0) the ratio is
    # 0/0 and we use the pointwise derivative, Tr ∂g/∂w from the implicit function theorem;
    # it is exact at the perfect-recovery point m = q = Q0, β = β0, where z* = ω = w
    # uniquely (and the Stein estimate is stable down to V ≈ 1e-10 Q0 on Sobol nodes).
    if V > 1e-10 * var0:
        m_hat = 2 * alpha * float(nodes.mean(np.sum(g * zeta2, axis=1))) / float(np.sqrt(V))
    else:
        dz = channel.prox_jacobian_w(w, z, sigma)
        m_hat = 2 * alpha * float(nodes.mean(np.trace(dz, axis1=1, axis2=2))) / sigma
    q_hat = 2 * alpha * float(nodes.mean(np.sum(g * g, axis=1)))
    sigma_hat_pw = 2 * alpha / sigma * float(nodes.mean(tr))
    # Σ̂ = 4α ∂M/∂q = −2α E[div_ω g] (Φ's stationarity in q). With w̃ = w − (m/q)ω
    # independent of ω, d/dω|_w̃ = ∂_ω + (m/q)∂_w, so by Stein on ω and on w̃:
    # E[div_ω g] = E[gᵀω]/q − (m/q) E[gᵀw̃]/V = E[gᵀζ1]/√q − (m/q) m̂/(2α).
    # The pointwise form (docs/theory.rst §4) misses the jumps of z*(ω) of a non-convex prox.
    if q > 1e-8 * var0:
        zeta1 = nodes.points[:, :K]
        sigma_hat_st = (-2 * alpha * float(nodes.mean(np.sum(g * zeta1, axis=1)))
                        / float(np.sqrt(q)) + (m / q) * m_hat)
    else:
        sigma_hat_st = sigma_hat_pw
    sigma_hat = sigma_hat_st if sigma_hat_form == "stein" else sigma_hat_pw
    train = float(nodes.mean(loss))
    moreau = float(nodes.mean(np.sum((z - omega) ** 2, axis=1) / (2 * sigma) + loss))
    bound = uncertified_bound(certified, z, omega, loss, sigma, nodes.points[:, :K], zeta2,
                              alpha=alpha, m=m, q=q, V=V, mean=nodes.mean)
    return OutputSide(m_hat=m_hat, q_hat=q_hat, sigma_hat=sigma_hat, train_error=train,
                      moreau=moreau, sigma_hat_pointwise=sigma_hat_pw,
                      sigma_hat_stein=sigma_hat_st,
                      certified_fraction=float(np.mean(certified)), uncertified_bound=bound)


def test_error(channel, *, m, q, Q0, noise, nodes=None, token_kurtosis=0.0, trace=None,
               target_trace=None):
    """Asymptotic test error ``E Σ_ab (labels(v0)_ab − attention(v)_ab)²``.

    Per component ``(v0, v) ~ N(0, [[Q0 + Δ/2, m], [m, q]])``, i.i.d. over the K components
    (``v0`` includes the label noise).

    Parameters
    ----------
    channel : SoftmaxChannel or LinearChannel
    m, q, Q0, noise : float
    nodes : GaussianNodes of dim 2K, optional
    token_kurtosis : float, default=0.0
        Excess kurtosis κ4 ≥ −2 of the token entries: the diagonal components get the
        overlaps of :func:`component_overlaps` (needs ``trace`` and ``target_trace``).
    trace, target_trace : float, optional
        ``t = Tr S/d`` and ``t0 = Tr S0/d``.

    Returns
    -------
    float
    """
    if token_kurtosis != 0.0:
        from ._components import _test_error_by_component
        return _test_error_by_component(channel, m=m, q=q, Q0=Q0, noise=noise, nodes=nodes,
                                        token_kurtosis=token_kurtosis, trace=trace,
                                        target_trace=target_trace)
    m, q, Q0, noise = _check_overlaps(m, q, Q0, noise)
    nodes = _check_nodes(channel, nodes)
    v, v0, _, _ = _gaussian_pair(m, q, Q0 + noise / 2, nodes, channel.K)
    r = channel.labels(v0) - channel.attention(v)
    return float(nodes.mean(_squared_norm(r)))


test_error.__test__ = False  # not a pytest test despite its name
