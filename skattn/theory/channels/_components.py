"""Output side for non-Gaussian tokens: per-component overlaps (docs: Non-Gaussian tokens).

Tokens with i.i.d. unit-variance entries of excess kurtosis ``κ4 = E z⁴ − 3`` leave the
off-diagonal pre-activations as they are, but the diagonal ones get
``Cov(u_aa(S), u_aa(S')) = Tr(S S')/d + (κ4/2) Σ_i S_ii S'_ii/d`` (u_aa = h_aa/√2). For S
and S0 in a basis independent of the token coordinates, ``Σ_i S_ii S'_ii/d → t t'`` with
``t = Tr S/d``: the T diagonal components have the overlaps ``(m + (κ4/2) t0 t,
q + (κ4/2) t², Q0 + (κ4/2) t0²)``, the others ``(m, q, Q0)``. The averaged Moreau envelope
then depends on t too; its conjugate ``t̂ = −2α ∂M/∂t`` shifts the spectral threshold.
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_scalar_range
from .base import _squared_norm
from .common import (OutputSide, _check_nodes, _check_overlaps, prox_at_nodes,
                     uncertified_bound)

__all__ = ["component_overlaps"]


def component_overlaps(n_tokens, *, m, q, Q0, trace, target_trace, token_kurtosis):
    """Per-component overlaps ``(m_k, q_k, Q0_k)`` of the K u-coordinates.

    The first ``n_tokens`` components (the diagonal ``u_aa``, in the order of
    :func:`skattn.theory.coords.pair_indices`) get the fourth-cumulant shift
    ``(κ4/2)·(t0 t, t², t0²)``; the off-diagonal ones keep ``(m, q, Q0)``.

    Parameters
    ----------
    n_tokens : int
        T ≥ 1.
    m, q, Q0 : float
        ``Tr(S0 S)/d``, ``Tr S²/d``, ``Tr S0²/d``.
    trace, target_trace : float
        ``t = Tr S/d`` and ``t0 = Tr S0/d``.
    token_kurtosis : float
        κ4 ≥ −2.

    Returns
    -------
    m_k, q_k, Q0_k : ndarray of shape (K,)
    """
    n_tokens = check_scalar_range(n_tokens, "n_tokens", low=1, integer=True)
    kappa4 = check_scalar_range(token_kurtosis, "token_kurtosis", low=-2)
    if trace is None or target_trace is None:
        raise ValueError("token_kurtosis != 0 needs trace (Tr S/d) and target_trace "
                         "(Tr S0/d).")
    t = check_scalar_range(trace, "trace")
    t0 = check_scalar_range(target_trace, "target_trace")
    K = n_tokens * (n_tokens + 1) // 2
    diagonal = np.arange(K) < n_tokens
    shift = 0.5 * kappa4
    m_k = np.where(diagonal, m + shift * t0 * t, m)
    # q + (κ4/2) t² ≥ q − t² ≥ 0 by Cauchy–Schwarz for a real S (κ4 ≥ −2); clip rounding
    q_k = np.maximum(np.where(diagonal, q + shift * t * t, q), 0.0)
    Q0_k = np.where(diagonal, Q0 + shift * t0 * t0, Q0)
    return m_k, q_k, Q0_k


def _component_gaussians(m_k, q_k, var0_k, nodes, K):
    """``(ω, w)`` with per-component covariance ``[[q_k, m_k], [m_k, var0_k]]``.

    Returns ω, w, ``V_k`` (residual variance of w_k given ω_k) and the node blocks ζ1, ζ2.
    A component with ``q_k ≈ 0`` (e.g. Rademacher tokens and S ∝ I) has ω_k = 0.
    """
    zeta1, zeta2 = nodes.blocks(K)
    live = q_k > 1e-300
    safe_q = np.where(live, q_k, 1.0)
    V = np.where(live, np.maximum(var0_k - m_k * m_k / safe_q, 0.0), var0_k)
    omega = np.where(live, np.sqrt(safe_q) * zeta1, 0.0)
    w = np.where(live, (m_k / np.sqrt(safe_q)) * zeta1, 0.0) + np.sqrt(V) * zeta2
    return omega, w, V, zeta1, zeta2


def _output_side_by_component(channel, *, m, q, Q0, noise, sigma, alpha, nodes,
                              sigma_hat_form, warm_start, token_kurtosis, trace,
                              target_trace, trust_warm=False, multistart_memory=False):
    """:func:`output_side` with per-component overlaps (``token_kurtosis ≠ 0``).

    ``m̂ = Σ_k m̂_k`` and ``Σ̂ = Σ_k Σ̂_k`` with the one-component Stein forms
    ``m̂_k = −2α ∂M/∂m_k``, ``Σ̂_k = 4α ∂M/∂q_k``; by the chain rule
    ``t̂ = −2α ∂M/∂t = (κ4/2) Σ_{k diagonal} (t0 m̂_k − t Σ̂_k)``.
    """
    m, q, Q0, noise = _check_overlaps(m, q, Q0, noise)
    sigma = check_scalar_range(sigma, "sigma", low=0, low_inclusive=False)
    alpha = check_scalar_range(alpha, "alpha", low=0)
    nodes = _check_nodes(channel, nodes)
    K, T = channel.K, channel.n_tokens
    m_k, q_k, Q0_k = component_overlaps(T, m=m, q=q, Q0=Q0, trace=trace,
                                        target_trace=target_trace,
                                        token_kurtosis=token_kurtosis)
    var0_k = Q0_k + noise / 2
    omega, w, V_k, zeta1, zeta2 = _component_gaussians(m_k, q_k, var0_k, nodes, K)

    y = channel.labels(w)
    start = w * (channel.target_beta_ / channel.beta_)
    z, certified = prox_at_nodes(channel, nodes, y, omega, sigma, start,
                                 warm_start=warm_start, trust_warm=trust_warm,
                                 multistart_memory=multistart_memory)
    loss, _, H = channel._derivs(y, z)
    g = (z - omega) / sigma

    # m̂_k: Stein's lemma on w_k given ω (as in output_side); the pointwise derivative where
    # the residual variance vanishes
    stein_m = V_k > 1e-10 * var0_k
    m_hat_k = np.empty(K)
    if np.any(stein_m):
        m_hat_k[stein_m] = (2 * alpha * nodes.mean(g * zeta2)[stein_m]
                            / np.sqrt(V_k[stein_m]))
    if not np.all(stein_m):
        dz = channel.prox_jacobian_w(w, z, sigma)
        diag = nodes.mean(np.diagonal(dz, axis1=1, axis2=2))
        m_hat_k[~stein_m] = 2 * alpha * diag[~stein_m] / sigma
    q_hat = 2 * alpha * float(nodes.mean(np.sum(g * g, axis=1)))
    # pointwise Σ̂_k = (2α/Σ) E[(I − (I + ΣH)⁻¹)_kk] from the eigen-decomposition of H
    lam, vec = np.linalg.eigh(H)
    den = np.maximum(1 + sigma * lam, 1e-12)
    pointwise_k = 2 * alpha / sigma * nodes.mean(
        np.einsum("nkj,nj->nk", vec ** 2, sigma * lam / den))
    # Stein Σ̂_k = 4α ∂M/∂q_k = −2α E[g_k ζ1_k]/√q_k + (m_k/q_k) m̂_k (as in output_side)
    stein_s = q_k > 1e-8 * var0_k
    safe_q = np.where(stein_s, q_k, 1.0)
    stein_k = np.where(stein_s, -2 * alpha * nodes.mean(g * zeta1) / np.sqrt(safe_q)
                       + (m_k / safe_q) * m_hat_k, pointwise_k)
    sigma_hat_k = stein_k if sigma_hat_form == "stein" else pointwise_k
    t = float(trace)
    t0 = float(target_trace)
    t_hat = 0.5 * token_kurtosis * float(np.sum(t0 * m_hat_k[:T] - t * sigma_hat_k[:T]))
    train = float(nodes.mean(loss))
    moreau = float(nodes.mean(np.sum((z - omega) ** 2, axis=1) / (2 * sigma) + loss))
    sigma_hat_pw, sigma_hat_st = float(np.sum(pointwise_k)), float(np.sum(stein_k))
    # the bound of output_side with each component's overlaps (a component whose m̂_k or
    # Σ̂_k is the pointwise derivative is passed as V or q = 0: those are unbounded)
    bound = None if warm_start and trust_warm else uncertified_bound(
        certified, z, omega, loss, sigma, zeta1, zeta2, alpha=alpha, m=m_k,
        q=np.where(stein_s, q_k, 0.0), V=np.where(stein_m, V_k, 0.0), mean=nodes.mean)
    return OutputSide(m_hat=float(np.sum(m_hat_k)), q_hat=q_hat,
                      sigma_hat=sigma_hat_st if sigma_hat_form == "stein" else sigma_hat_pw,
                      train_error=train, moreau=moreau, sigma_hat_pointwise=sigma_hat_pw,
                      sigma_hat_stein=sigma_hat_st, t_hat=t_hat,
                      certified_fraction=float(np.mean(certified)), uncertified_bound=bound)


def _test_error_by_component(channel, *, m, q, Q0, noise, nodes, token_kurtosis, trace,
                             target_trace):
    """:func:`test_error` with per-component overlaps (``token_kurtosis ≠ 0``)."""
    m, q, Q0, noise = _check_overlaps(m, q, Q0, noise)
    nodes = _check_nodes(channel, nodes)
    m_k, q_k, Q0_k = component_overlaps(channel.n_tokens, m=m, q=q, Q0=Q0, trace=trace,
                                        target_trace=target_trace,
                                        token_kurtosis=token_kurtosis)
    v, v0, _, _, _ = _component_gaussians(m_k, q_k, Q0_k + noise / 2, nodes, channel.K)
    r = channel.labels(v0) - channel.attention(v)
    return float(nodes.mean(_squared_norm(r)))
