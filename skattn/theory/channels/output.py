"""Gaussian expectations of the output side (docs: Theory §4).

:class:`GaussianNodes` are fixed quasi-Monte-Carlo Gaussian nodes (common random numbers,
so the state-evolution map is a smooth function of its arguments); :func:`output_side`
gives the conjugates ``m̂, q̂, Σ̂`` (paper's factor 2) and the train error,
:func:`test_error` the asymptotic test error.
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_scalar_range
from . import _kernels
from .base import _squared_norm

# the shared pieces (common.py), re-exported where they used to live
from .common import (GaussianNodes, OutputSide, _check_nodes, _check_overlaps,  # noqa: F401
                     _gaussian_pair, _loss_and_trace, _losses, _trace_resolvent_complement,
                     forget_multistart_memory, prox_at_nodes, remembered_minimisers,
                     seed_minimisers, uncertified_bound)


def output_side(channel, *, m, q, Q0, noise, sigma, alpha, nodes=None,
                sigma_hat_form="pointwise", warm_start=False, token_kurtosis=0.0, trace=None,
                target_trace=None, trust_warm=False, multistart_memory=False):
    """Output side of the state evolution (docs: Theory §4, paper's factor 2).

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
        Which form of Σ̂ is returned as ``sigma_hat``: the pointwise form of docs: Theory §4,
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
    multistart_memory : bool, default=False
        Without ``warm_start``, on an uncertified evaluation (the channel's
        ``certify_budget`` 0; softmax, T ≥ 3, the compiled prox): the nodes whose
        multi-start starts all ended at one point in an earlier such evaluation on the same
        ``channel`` and ``nodes`` (since :func:`forget_multistart_memory`) get one Newton
        run from that point instead of the multi-start. A cheap stand-in for the
        multi-start map near its fixed point, which the fixed-point iteration polishes
        without it afterwards.

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
            multistart_memory=multistart_memory, token_kurtosis=token_kurtosis, trace=trace,
            target_trace=target_trace)
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
    z, certified = prox_at_nodes(channel, nodes, y, omega, sigma, start,
                                 warm_start=warm_start, trust_warm=trust_warm,
                                 multistart_memory=multistart_memory)
    # an uncertified warm evaluation (never reported) in the Stein form of Σ̂ (off the
    # pointwise fallback at q → 0) needs no Hessian traces, only the losses
    pointwise = not (warm_start and trust_warm and sigma_hat_form == "stein"
                     and q > 1e-8 * var0)
    if pointwise:
        loss, tr = _loss_and_trace(channel, y, z, sigma)
    else:
        loss, tr = _losses(channel, y, z, sigma), None
    zeta1 = nodes.blocks(K)[0]
    if _kernels.HAVE_NUMBA:
        mean_gz2, mean_gg, mean_gz1, train, mean_sq = _kernels.stein_sums(
            z, omega, zeta1, zeta2, loss, nodes.weights, float(sigma))
    else:  # pragma: no cover
        g = (z - omega) / sigma
        mean_gz2, mean_gg, mean_gz1 = (float(nodes.mean(np.sum(g * v, axis=1)))
                                       for v in (zeta2, g, zeta1))
        train = float(nodes.mean(loss))
        mean_sq = float(nodes.mean(np.sum((z - omega) ** 2, axis=1)))

    # m̂. docs: Theory §4 writes 2α E[gᵀ(u0 − (m/q)ω)]/(Q0 − m²/q), Stein's lemma on u0 | ω. Since g
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
        m_hat = 2 * alpha * mean_gz2 / float(np.sqrt(V))
    else:
        dz = channel.prox_jacobian_w(w, z, sigma)
        m_hat = 2 * alpha * float(nodes.mean(np.trace(dz, axis1=1, axis2=2))) / sigma
    q_hat = 2 * alpha * mean_gg
    sigma_hat_pw = None if tr is None else 2 * alpha / sigma * float(nodes.mean(tr))
    # Σ̂ = 4α ∂M/∂q = −2α E[div_ω g] (Φ's stationarity in q). With w̃ = w − (m/q)ω
    # independent of ω, d/dω|_w̃ = ∂_ω + (m/q)∂_w, so by Stein on ω and on w̃:
    # E[div_ω g] = E[gᵀω]/q − (m/q) E[gᵀw̃]/V = E[gᵀζ1]/√q − (m/q) m̂/(2α).
    # The pointwise form (docs: Theory §4) misses the jumps of z*(ω) of a non-convex prox.
    if q > 1e-8 * var0:
        sigma_hat_st = -2 * alpha * mean_gz1 / float(np.sqrt(q)) + (m / q) * m_hat
    else:
        sigma_hat_st = sigma_hat_pw
    sigma_hat = sigma_hat_st if sigma_hat_form == "stein" else sigma_hat_pw
    moreau = mean_sq / (2 * sigma) + train
    # the warm iterations' evaluations are never reported: no bound (a tenth of their cost)
    bound = None if warm_start and trust_warm else uncertified_bound(
        certified, z, omega, loss, sigma, zeta1, zeta2, alpha=alpha, m=m, q=q,
        V=V, mean=nodes.mean)
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
