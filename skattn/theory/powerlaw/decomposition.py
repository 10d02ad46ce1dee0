"""The split of the excess test error into overfitting, underfitting, approximation and
mismatch (docs: Theory §8), and the irreducible error e0 it is counted from."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..._validation import check_choice, check_scalar_range
from ..channels import GaussianNodes, channel_for, test_error
from ..spectral import free_convolution
from ..spiked import is_spiked_result, spiked_test_error
from ._fixed_point import (
    _check_not_spiked,
    _check_result,
    _interval_index,
    _nodes_above,
    _omega,
    _target_eigenvalues,
)
from .recovery import SpectralRecovery, recovered_modes

__all__ = ["irreducible_error", "spiked_irreducible_error", "error_coefficients", "ErrorDecomposition",
           "error_decomposition"]


def _error_function(attention, n_tokens, beta, target_beta, Q0, noise, n_nodes,
                    random_state):
    """``(m, q) -> e_test`` on fixed quadrature nodes (closed form for linear attention)."""
    if attention == "linear":
        K = n_tokens * (n_tokens + 1) // 2
        return lambda m, q: K * noise + 2 * K * (Q0 - 2 * m + q)
    channel = channel_for(attention, n_tokens, beta, target_beta)
    nodes = GaussianNodes(2 * channel.K, n_points=n_nodes, seed=random_state)
    return lambda m, q: test_error(channel, m=m, q=q, Q0=Q0, noise=noise, nodes=nodes)


def _test_error_function(result, n_nodes, random_state):
    """``(m, q) -> e_test`` for the channel of ``result`` on fixed quadrature nodes."""
    p = result.params
    return _error_function(p.get("attention", "softmax"), int(p["n_tokens"]),
                           p.get("beta", 1.0), p.get("target_beta", 1.0), float(result.Q0),
                           float(p.get("noise", 0.0)), n_nodes, random_state)


def irreducible_error(n_tokens, *, attention="softmax", noise=0.0, beta=1.0,
                      target_beta=1.0, Q0=1.0, n_nodes=8192, random_state=0):
    """The irreducible test error e0 of a configuration: the error of ``S = S0``.

    ``e0 = e_test(S0)`` (docs: Theory §2): the teacher's own matrix, scored on fresh *noisy*
    labels. It is the floor that ``e_test − e0`` of §8 is counted from — the ``e0`` to
    pass to :func:`skattn.scaling.fit_power_law` and the one :func:`error_coefficients`,
    :func:`error_decomposition` and :func:`theory_learning_curve` subtract.

    - Linear attention: ``e0 = K Δ`` with ``K = T(T+1)/2`` (the label noise, summed over
      the K independent entries of ``ξ``); it is also the minimum of the test error over
      every S, so the excess ``2K ‖Ŝ − S0‖²_F/d`` is never negative.
    - Softmax: ``e0 = E Σ_ab (σ_β0(h0 + ξ) − σ_β(h0))²``, zero without noise when
      ``β = β0``. With noise ``Δ > 0`` it exceeds the minimum of the test error along the
      target, ``min_κ e_test(κ S0)``, reached at a κ slightly below 1 (the noise flattens
      the mean label, :func:`error_coefficients`); the excess counted from e0 may
      therefore level off, or turn negative, at very large n.

    Parameters
    ----------
    n_tokens : int
        T ≥ 1.
    attention : {"softmax", "linear"}, default="softmax"
    noise : float, default=0.0
        Label noise Δ ≥ 0.
    beta, target_beta : float, default=1.0
        Inverse temperatures β (student) and β0 (teacher) of the softmax (ignored for
        linear attention).
    Q0 : float, default=1.0
        ``Tr S0²/d > 0``: 1 for :class:`~skattn.data.PowerLawTarget`,
        ``target.second_moment(d)`` in general (``1 + κ0`` for a Wishart target).
    n_nodes : int, default=8192
        Quadrature nodes (softmax).
    random_state : int, default=0
        Seed of the nodes.

    Returns
    -------
    float

    Examples
    --------
    >>> from skattn.theory.powerlaw import irreducible_error
    >>> irreducible_error(2, attention="linear", noise=0.5)
    1.5
    """
    n_tokens = check_scalar_range(n_tokens, "n_tokens", low=1, integer=True)
    check_choice(attention, "attention", ("softmax", "linear"))
    noise = check_scalar_range(noise, "noise", low=0)
    beta = check_scalar_range(beta, "beta", low=0, low_inclusive=False)
    target_beta = check_scalar_range(target_beta, "target_beta", low=0, low_inclusive=False)
    Q0 = check_scalar_range(Q0, "Q0", low=0, low_inclusive=False)
    n_nodes = check_scalar_range(n_nodes, "n_nodes", low=1, integer=True)
    e = _error_function(attention, n_tokens, beta, target_beta, Q0, noise, n_nodes,
                        random_state)
    return float(e(Q0, Q0))


def error_coefficients(result, *, n_nodes=8192, step=1e-3, random_state=0):
    """Irreducible error e0 and the coefficients c1, c2 of the error decomposition.

    The test error depends on Ŝ only through ``m = Tr(S0 Ŝ)/d`` and ``q = Tr Ŝ²/d``.
    Split Ŝ along the target, ``Ŝ = κ S0 + Ŝ⊥`` with ``κ = m/Q0`` (the learned *scale* of
    the target) and ``r = ‖Ŝ⊥‖²_F/d = q − κ² Q0``; then
    ``s = ‖Ŝ − S0‖²_F/d = r + p`` with ``p = (1 − κ)² Q0``, and to first order in r

    ``e_test − e0 ≈ [e(κ S0) − e0] + c1 r = c1 s + c2 p``,

    - ``e0 = e_test(S0)`` (``m = q = Q0``), the irreducible error;
    - ``c1 = ∂e/∂q`` at fixed m, at ``(κ Q0, κ² Q0)``: the cost of errors transverse to
      the target, at the learned scale;
    - ``c2 = [e(κ S0) − e0]/p − c1``: how the error along the target itself departs from
      that transverse cost — zero when the error is quadratic in ``Ŝ − S0`` with constant
      coefficients (linear attention), negative for softmax, whose error saturates along
      the scale, and whose minimum along ``κ S0`` moves below κ = 1 with label noise.

    Linear attention: exactly ``e_test = KΔ + 2K s`` (``e0 = KΔ``, ``c1 = 2K``, ``c2 = 0``,
    ``K = T(T+1)/2``), no quadrature. Softmax: :func:`~skattn.theory.channels.test_error`
    on fixed quasi-Monte-Carlo nodes (common random numbers), ``c1`` by a
    Richardson-extrapolated difference in q. The first-order expansion in r is accurate to
    ~1 % of the excess for T = 2 softmax on power-law targets (0.1 % once a few modes are
    recovered).

    Parameters
    ----------
    result : StateEvolutionResult
        Supplies ``m``, ``Q0`` and the channel parameters (``params``).
    n_nodes : int, default=8192
        Quadrature nodes (softmax).
    step : float, default=1e-3
        Relative finite-difference step h.
    random_state : int, default=0
        Seed of the nodes.

    Returns
    -------
    e0, c1, c2 : float
    """
    p = result.params
    Q0, noise = float(result.Q0), float(p.get("noise", 0.0))
    attention, T = p.get("attention", "softmax"), int(p["n_tokens"])
    K = T * (T + 1) // 2
    if attention == "linear":
        return K * noise, 2.0 * K, 0.0
    _check_not_spiked(result)     # c1, c2 are derivatives of the Gaussian channel
    step = check_scalar_range(step, "step", low=0, high=0.1, low_inclusive=False)
    e = _test_error_function(result, n_nodes, random_state)
    e0 = e(Q0, Q0)
    kappa = float(np.clip(result.m / Q0, -10.0, 10.0))
    m_k, q_k = kappa * Q0, kappa ** 2 * Q0
    e_par = e(m_k, q_k)
    h = step * Q0
    d1 = (e(m_k, q_k + h) - e_par) / h
    d2 = (e(m_k, q_k + h / 2) - e_par) / (h / 2)
    c1 = 2 * d2 - d1
    par = (1 - kappa) ** 2 * Q0
    if par < (step * Q0) ** 2:  # κ ≈ 1: the secant along the scale at κ = 1 − h
        kappa_s = 1 - step
        par = (1 - kappa_s) ** 2 * Q0
        e_par, e_ref = e(kappa_s * Q0, kappa_s ** 2 * Q0), e0
        c2 = (e_par - e_ref) / par - c1
    else:
        c2 = (e_par - e0) / par - c1
    return float(e0), float(c1), float(c2)


@dataclass
class ErrorDecomposition:
    """The split of the excess test error of one fixed point (see :func:`error_decomposition`).

    Attributes
    ----------
    alpha : float
    over, under, approx : float
        ``E_over``, ``E_under``, ``E_approx`` (pieces of ``‖Ŝ − S0‖²_F/d``).
    mismatch : float
        ``E_mismatch = (1 − κ)² Q0 = (Q0 − m)²/Q0``, the error along the target's own
        direction (κ = m/Q0 the learned scale).
    s_error : float
        ``E_over + E_under + E_approx = ‖Ŝ − S0‖²_F/d`` (from the spectral law).
    e0, c1, c2 : float
        See :func:`error_coefficients`.
    m : float
        ``Tr(S0 Ŝ)/d`` from the spectral law (equal to the fixed point's m).
    excess : float
        ``e_test − e0`` of the fixed point (for linear attention ``2K (Q0 − 2m + q)``
        exactly; for softmax on the same quadrature nodes as the coefficients).
    n_recovered : int
    recovery : SpectralRecovery
    """

    alpha: float
    over: float
    under: float
    approx: float
    mismatch: float
    s_error: float
    e0: float
    c1: float
    c2: float
    m: float
    excess: float
    n_recovered: int
    recovery: SpectralRecovery = field(repr=False, default=None)

    @property
    def approximation(self):
        """``c1 (E_over + E_under + E_approx) + c2 E_mismatch`` (exact: linear attention)."""
        return self.c1 * self.s_error + self.c2 * self.mismatch

    @property
    def residual(self):
        """``excess − approximation``: the higher-order terms (zero for linear attention)."""
        return self.excess - self.approximation

    @property
    def contributions(self):
        """The four terms on the scale of the test error, as a dict."""
        return {"over": self.c1 * self.over, "under": self.c1 * self.under,
                "approx": self.c1 * self.approx, "mismatch": self.c2 * self.mismatch}


def error_decomposition(result, target_eigenvalues=None, *, max_cluster=1, n_nodes=8192,
                        random_state=0):
    """Split ``e_test − e0`` into overfitting, underfitting, approximation and mismatch.

    With ``Ŝ ≈ η ReLU(S0 + δZ − ε)`` (eigenpairs ``(s_k, v_k)``), target modes
    ``(λ_i, e_i)`` and the recovered set R of :func:`recovered_modes`, the S-error

    ``‖Ŝ − S0‖²_F/d = (1/d) [Σ_k s_k² − 2 Σ_i λ_i Ŝ_ii + Σ_i λ_i²]``,
    ``Ŝ_ii = ⟨e_i, Ŝ e_i⟩``,

    is split, exactly, into

    - ``E_over = (1/d) Σ_{k ∈ bulk} s_k²`` — **overfitting**: the energy of the learned
      eigenvalues outside the outlier intervals (the thresholded noise bulk, the spurious
      directions); ``η² ∫_bulk (x − ε)₊² dμ_δ``;
    - ``E_under = (1/d) Σ_{i ∉ R} (λ_i² − 2 λ_i Ŝ_ii) + (1/d) Σ_{k ∈ O∖R} s_k²`` —
      **underfitting**: the error along target modes still under the threshold (their
      energy, less what the bulk captures of it, plus the energy of outlier intervals cut
      by ε);
    - ``E_approx = (1/d) Σ_{i ∈ R} (λ_i² − 2 λ_i Ŝ_ii) + (1/d) Σ_{k ∈ O_R} s_k²`` —
      **approximation**: the error along the recovered outliers (for an outlier of
      eigenvalue s aligned with squared overlap c² this is ``(λ² − 2λ s c² + s²)/d``,
      the shrinkage by ε and the eigenvector misalignment);

    with ``Ŝ_ii = η ∫ (x − ε)₊ δ² ρ_δ(x)/|ω(x) − λ_i|² dx`` (notes of
    :mod:`skattn.theory.powerlaw`) and
    ``O_R`` (``O∖R``) the outlier intervals of recovered (not recovered) modes. Also

    - ``E_mismatch = (1 − κ)² Q0 = (Q0 − m)²/Q0`` with ``κ = m/Q0`` — **mismatch**: the
      part of ``‖Ŝ − S0‖²/d`` along the target itself, ``Ŝ = κ S0 + Ŝ⊥`` (the learned
      "saturation level" κ of the target, not at the error's minimum along ``κ S0``).

    The test error is ``e_test − e0 ≈ c1 (E_over + E_under + E_approx) + c2 E_mismatch``
    (coefficients from :func:`error_coefficients`: ``c1`` the transverse curvature of the
    test error at the learned scale, ``c2`` the correction along the target). For **linear
    attention** the test error is quadratic in ``Ŝ − S0`` with constant coefficients:
    ``c1 = 2K``, ``c2 = 0`` and the decomposition is exact (the terms sum to the excess
    error, to quadrature accuracy). For **softmax** it is exact along the target direction
    and first order in the transverse error ``‖Ŝ⊥‖²/d`` (``residual`` holds the
    remainder, about 1 % of the excess for T = 2 on power-law targets); ``c2 < 0`` there:
    the softmax error saturates along the scale of the target, and with label noise its
    minimum along ``κ S0`` lies below κ = 1.

    Parameters
    ----------
    result : StateEvolutionResult
        A factored fixed point with a finite-d target law (e.g. from a
        :class:`~skattn.theory.DiscreteLaw` target).
    target_eigenvalues : array-like of shape (d,), optional
        Defaults to the atoms of ``result.law``.
    max_cluster : int or None, default=1
        See :func:`recovered_modes`.
    n_nodes : int, default=8192
        Quadrature nodes for the softmax coefficients.
    random_state : int, default=0

    Returns
    -------
    ErrorDecomposition
    """
    delta, eps, eta = _check_result(result)
    eig, law = _target_eigenvalues(result, target_eigenvalues)
    d = eig.size
    rec = recovered_modes(result, eig, max_cluster=max_cluster)
    mu = free_convolution(law, delta)
    x, W, R, rho = _nodes_above(mu, eps)
    f = eta * (x - eps)
    omega = _omega(x, R, rho, delta)
    # Ŝ_ii for every mode, in chunks (d × n_nodes)
    Sii = np.empty(d)
    step = max(1, (1 << 22) // max(x.size, 1))
    for s0 in range(0, d, step):
        lam = eig[s0:s0 + step, None]
        kernel = delta ** 2 / np.abs(omega[None, :] - lam) ** 2
        Sii[s0:s0 + step] = (W * f * kernel).sum(axis=1)
    energy = W * f * f
    k = _interval_index(rec.intervals, x)
    out_int = np.unique(rec._mode_interval[rec.outlier])
    rec_int = np.unique(rec._mode_interval[rec.recovered])
    q_all = float(energy.sum())
    q_rec = float(energy[np.isin(k, rec_int)].sum())
    q_out = float(energy[np.isin(k, out_int)].sum())
    per_mode = eig * (eig - 2 * Sii) / d
    under = float(per_mode[~rec.recovered].sum()) + (q_out - q_rec)
    approx = float(per_mode[rec.recovered].sum()) + q_rec
    over = q_all - q_out
    m = float(np.dot(eig, Sii) / d)
    Q0 = float(np.mean(eig ** 2))
    e0, c1, c2 = error_coefficients(result, n_nodes=n_nodes, random_state=random_state)
    # the fixed point's excess error on the same nodes as the coefficients (closed form
    # for linear attention)
    excess = _test_error_function(result, n_nodes, random_state)(result.m, result.q) - e0
    return ErrorDecomposition(
        alpha=float(result.alpha), over=float(over), under=float(under), approx=float(approx),
        mismatch=(Q0 - m) ** 2 / Q0, s_error=float(over + under + approx), e0=e0, c1=c1,
        c2=c2, m=m, excess=float(excess), n_recovered=rec.n_recovered, recovery=rec)


def spiked_irreducible_error(result, *, n_points=8192, n_replicates=8, seed=0):
    """The irreducible error ``e0 = e_test(S0)`` of a result of the spiked route, in its own
    channel (the spikes' projections explicit, as for the test error).

    For ``β = β0`` without noise it is 0; otherwise the spike's non-Gaussian projection
    enters it as it enters the test error (:func:`~skattn.theory.spiked.null_predictor_error` for ``S = 0``); for a result of
    the Gaussian channel see :func:`irreducible_error`.

    Parameters
    ----------
    result : StateEvolutionResult
        From :func:`~skattn.theory.spiked.spiked_prediction`
        (:func:`~skattn.theory.spiked.is_spiked_result`).
    n_points, n_replicates, seed
        As in :func:`~skattn.theory.spiked.spiked_test_error`.

    Returns
    -------
    float
    """
    if not is_spiked_result(result):
        raise ValueError("result must come from the spiked state evolution (params with "
                         "'n_spikes'): use "
                         "irreducible_error for the Gaussian channel.")
    params = result.params
    t = np.asarray(params["target_spike_strengths"], dtype=float)
    channel = channel_for(params["attention"], int(params["n_tokens"]), params["beta"],
                          params["target_beta"])
    bulk_Q0 = float(result.Q0) - float(t @ t)
    return float(spiked_test_error(channel, target_strengths=t, student_strengths=t,
                                   m=bulk_Q0, q=bulk_Q0, bulk_Q0=bulk_Q0,
                                   noise=float(params["noise"]), n_points=n_points,
                                   n_replicates=n_replicates, seed=seed).value)
