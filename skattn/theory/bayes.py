"""Bayes-optimal baseline (docs: Theory §7): the MMSE of S and the best achievable test error.

The information-theoretic limit of learning ``S0`` from ``n = αd²`` attention-indexed samples
when the learner knows the model (the target's spectral law, β0 and Δ). Two facts reduce it
to a scalar equation:

1. *The channel is Gaussian.* The labels are ``y = σ_β0(h(S0) + ξ)`` with symmetric
   logits ``h + ξ``. Softmax rows determine their logits up to a constant per row, and a
   symmetric logit matrix is then fixed up to the single shift ``h → h + c`` of all entries,
   so a label reveals exactly the ``K_eff = K − 1`` combinations ``P(u0 + ξ̃)`` of the
   normalised components orthogonal to the shift (linear attention: all ``K_eff = K``).
   With ``ξ̃ ~ N(0, (Δ/2) I_K)`` this is a linear Gaussian sensing channel with ``K_eff``
   outputs per sample and noise variance ``Δ/2`` per output (noiseless when Δ = 0) —
   for softmax at any T and for linear attention alike.
2. *The prior is rotation invariant.* The scalar denoising problem on the prior side is
   ``Y = S0 + √t Z`` (Z GOE), whose MMSE is ``mmse(t) = t − (4π²/3) t² ∫ ρ_t(x)³ dx``,
   ``ρ_t`` the density of ``μ0 ⊞ SC(t)``.

The replica-symmetric fixed point of the Gaussian channel (Nishimori: ``m = q``,
``m̂ = q̂ = Σ̂``, paper's factor 2) is then

``q̂ = 2 K_eff α / (Q0 − q + Δ/2)``,  ``Q0 − q = mmse(1/q̂)``,

i.e. with ``t = 1/q̂``: ``mmse(t) + Δ/2 = 2 K_eff α t``. For Δ = 0 this is docs: Theory §7;
for the linear channel with noise it is the standard result for Gaussian sensing of a
rotation-invariant matrix with ``K`` outputs of variance Δ/2 (T = 1: one output).

Test errors. ``test_error`` is the plug-in formula of docs: Theory §7: the Gaussian test error of §4
at ``m = q`` (the error of predicting ``σ_β0(h(Ŝ))`` with ``Ŝ`` the posterior mean).
``predictor_error`` is the error of the Bayes-optimal *label* predictor
``E[y | data, x] = E[σ_β0(h(v0)) | v]``, with ``v0 | v ~ N(v, (Q0 + Δ/2 − q) I_K)`` per
component: the lower bound on the test error of every estimator. Both coincide for linear
attention, where they equal ``2K (Q0 + Δ/2 − q)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
from scipy import optimize

from .._validation import check_scalar_range
from .channels import GaussianNodes, channel_for, test_error
from .problem import check_model_keywords, require_gaussian_tokens, resolve_problem
from .spectral import free_convolution
from .thresholds import bayes_optimal_threshold, effective_constraints

__all__ = ["BayesOptimalResult", "bayes_optimal", "denoising_mmse"]


@dataclass
class BayesOptimalResult:
    """The Bayes-optimal fixed point and its errors.

    Attributes
    ----------
    alpha : float
        ``n/d²``.
    mmse : float
        ``lim E‖S0 − E[S0 | data]‖²_F / d = Q0 − q``.
    q : float
        ``Tr Ŝ²/d = Tr(S0 Ŝ)/d`` of the posterior mean Ŝ (``m = q``).
    q_hat : float
        Conjugate ``q̂`` (``inf`` at perfect recovery).
    Q0 : float
        ``Tr S0²/d``.
    test_error : float
        Gaussian test error of §4 at ``m = q`` (plug-in of the posterior mean, docs: Theory §7).
    predictor_error : float
        Test error of the Bayes-optimal label predictor (a lower bound for every estimator).
    K_eff : int
        Directions constrained per sample.
    threshold : float
        ``α_BO`` of :func:`~skattn.theory.thresholds.bayes_optimal_threshold` (noiseless).
    params : dict
        The inputs (n_tokens, attention, noise, target_beta).
    """

    alpha: float
    mmse: float
    q: float
    q_hat: float
    Q0: float
    test_error: float
    predictor_error: float
    K_eff: int
    threshold: float
    params: dict = field(default_factory=dict)

    @property
    def m(self):
        """``Tr(S0 Ŝ)/d`` (= q by the Nishimori identity)."""
        return self.q

    @property
    def s_error(self):
        """``‖Ŝ − S0‖²_F/d``, the MMSE (same name as on StateEvolutionResult)."""
        return self.mmse

    def as_dict(self):
        """The scalar fields as a flat dict."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "params"}
        out.update({k: v for k, v in self.params.items() if np.isscalar(v)})
        return out


def denoising_mmse(law, t):
    """MMSE per d of ``S0`` from ``Y = S0 + √t Z`` (Z GOE, semicircle on [−2, 2]).

    ``mmse(t) = t − (4π²/3) t² ∫ ρ_t(x)³ dx`` with ``ρ_t`` the density of ``μ0 ⊞ SC(t)``
    (for a semicircle prior of variance Q0 it gives ``t Q0/(t + Q0)``).

    Parameters
    ----------
    law : SpectralLaw
        Law of the eigenvalues of S0.
    t : float
        Noise variance ``t > 0``; ``t = 0`` returns 0.

    Returns
    -------
    float
    """
    t = check_scalar_range(t, "t", low=0)
    if t == 0:
        return 0.0
    mu = free_convolution(law, np.sqrt(t))
    return float(t - (4 * np.pi ** 2 / 3) * t * t * mu.density_power_integral(3))


def _solve_t(law, Q0, K_eff, alpha, noise, threshold):
    """Root ``t = 1/q̂`` of ``mmse(t) + Δ/2 = 2 K_eff α t`` (0 at perfect recovery)."""
    c = 2 * K_eff * alpha
    if noise == 0 and alpha >= threshold:
        return 0.0

    def phi(logt):
        t = np.exp(logt)
        return (denoising_mmse(law, t) + noise / 2) / t - c

    # φ decreases from (1 − Σw²) − c > 0 (Δ = 0, α < α_BO) or +∞ (Δ > 0) to −c
    hi = np.log((Q0 + noise / 2) / c * 1.01 + 1e-300)  # mmse ≤ Q0 ⇒ φ(hi) < 0
    lo = hi - np.log(10.0)
    while phi(lo) <= 0:
        lo -= np.log(10.0)
        if lo < np.log(1e-14 * Q0 + 1e-300):
            return 0.0  # within numerical precision of perfect recovery
    return float(np.exp(optimize.brentq(phi, lo, hi, xtol=1e-12, rtol=1e-12)))


def _gauss_hermite(K, n):
    x, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / w.sum()
    grids = np.meshgrid(*([x] * K), indexing="ij")
    pts = np.stack([g.ravel() for g in grids], axis=1)
    wts = np.prod(np.stack(np.meshgrid(*([w] * K), indexing="ij")), axis=0).ravel()
    return pts, wts


def _predictor_error(channel, q, V, nodes, n_inner, seed):
    """``E_v [E‖σ(v0)‖² − ‖E σ(v0)‖² | v]`` with ``v0 | v ~ N(v, V I)``, ``v ~ N(0, q I)``."""
    K = channel.K
    if V <= 0:
        return 0.0
    if K <= 3:
        inner, w_in = _gauss_hermite(K, {1: 64, 2: 24, 3: 12}[K])
    else:
        g = GaussianNodes(K, n_points=n_inner, seed=seed + 1)
        inner, w_in = g.points, g.weights
    outer = np.sqrt(max(q, 0.0)) * nodes.points[:, :K]
    total = 0.0
    chunk = max(1, 2 ** 22 // (inner.shape[0] * channel.n_tokens ** 2))
    for start in range(0, outer.shape[0], chunk):
        v = outer[start:start + chunk]
        v0 = (v[:, None, :] + np.sqrt(V) * inner[None, :, :]).reshape(-1, K)
        A = channel.labels(v0).reshape(v.shape[0], inner.shape[0], -1)
        mean = np.einsum("j,njk->nk", w_in, A)
        second = np.einsum("j,njk->n", w_in, A * A)
        total += float(np.sum(second - np.sum(mean * mean, axis=1)))
    return max(total / outer.shape[0], 0.0)


_MODEL_KEYWORDS = ("n_tokens", "target", "attention", "noise", "target_beta", "n_features")


def bayes_optimal(alpha, problem=None, *, n_nodes=8192, n_inner=1024, random_state=0,
                  **model):
    """Bayes-optimal MMSE of S and test errors at sample ratio α (docs: Theory §7).

    Solves ``mmse(t) + Δ/2 = 2 K_eff α t`` (``t = 1/q̂``, see the module docstring) for
    noiseless or noisy softmax labels at any T and for linear attention, then evaluates the
    test errors. For Δ = 0 the MMSE vanishes for ``α ≥ α_BO = (1 − Σ_i w_i²)/(2 K_eff)``
    (``(κ0 − κ0²/2)/K_eff`` for Wishart(κ0 ≤ 1)).

    Parameters
    ----------
    alpha : float
        Sample ratio ``n/d² > 0``.
    problem : StateEvolutionProblem, optional
        The model, instead of the keywords below. Only its T, target, attention, noise,
        target_beta and n_features are used: the Bayes-optimal learner knows the teacher
        (its β is β0), and has no λ, width or parametrization.
    n_nodes : int, default=8192
        Quasi-Monte Carlo nodes of the outer Gaussian expectations.
    n_inner : int, default=1024
        Inner nodes of the posterior average in ``predictor_error`` when ``K > 3``
        (``K ≤ 3`` uses a Gauss–Hermite product rule).
    random_state : int, default=0
        Seeds the quadrature nodes.
    **model
        Without a problem (not both):

        - ``n_tokens`` (int, required): sequence length T;
        - ``target`` (Target or SpectralLaw, required): the target family (its spectral
          law is the prior);
        - ``attention`` ("softmax" or "linear", default "softmax");
        - ``noise`` (float, default 0): label noise Δ ≥ 0 (inside the softmax, as in the
          data model);
        - ``target_beta`` (float, default 1): the teacher's inverse temperature β0 (it only
          affects the test errors);
        - ``n_features`` (int or None, default None): for finite-size-only targets, the d
          of their law.

    Returns
    -------
    BayesOptimalResult

    Examples
    --------
    >>> from skattn.data import WishartTarget
    >>> from skattn.theory.bayes import bayes_optimal
    >>> bayes_optimal(0.1, n_tokens=2, target=WishartTarget(0.2)).mmse
    0.0
    """
    alpha = check_scalar_range(alpha, "alpha", low=0, low_inclusive=False)
    problem = resolve_problem(problem, "bayes_optimal", **check_model_keywords(
        model, _MODEL_KEYWORDS, "bayes_optimal"))
    require_gaussian_tokens(problem, "bayes_optimal")
    n_tokens, attention, noise = problem.n_tokens, problem.attention, problem.noise
    target_beta = problem.target_beta
    K_eff = effective_constraints(n_tokens, attention)
    n_nodes = check_scalar_range(n_nodes, "n_nodes", low=16, integer=True)
    n_inner = check_scalar_range(n_inner, "n_inner", low=16, integer=True)
    law, _ = problem.target_law()
    Q0 = float(law.second_moment())
    threshold = bayes_optimal_threshold(n_tokens=n_tokens, target=law, attention=attention)

    t = _solve_t(law, Q0, K_eff, alpha, noise, threshold)
    mmse = denoising_mmse(law, t)
    q = Q0 - mmse
    q_hat = np.inf if t == 0 else 1.0 / t

    channel = channel_for(attention, n_tokens, target_beta, target_beta)
    nodes = GaussianNodes(2 * channel.K, n_points=n_nodes, seed=random_state)
    e_test = test_error(channel, m=q, q=q, Q0=Q0, noise=noise, nodes=nodes)
    V = Q0 + noise / 2 - q
    if attention == "linear":
        e_pred = 2 * channel.K * V
    else:
        e_pred = _predictor_error(channel, q, V, nodes, n_inner, random_state)
    return BayesOptimalResult(
        alpha=alpha, mmse=float(mmse), q=float(q), q_hat=float(q_hat), Q0=Q0,
        test_error=float(e_test), predictor_error=float(e_pred), K_eff=K_eff,
        threshold=threshold,
        params=dict(n_tokens=n_tokens, attention=attention, noise=noise,
                    target_beta=target_beta))
