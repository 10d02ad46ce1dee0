"""The result object of the state-evolution solver (docs: Theory §4, §5)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from .laws import SpectralLaw
from .problem import StateEvolutionProblem
from .spectral import free_convolution

__all__ = ["StateEvolutionResult", "mixed_fraction"]

#: A noiseless λ = 0 fixed point with ``‖Ŝ − S0‖²_F/d`` below this fraction of Q0 is the
#: exact recovery Ŝ = S0 (below the interpolation threshold λ = 0 gives the λ → 0⁺ limit,
#: solved at λ > 0 with ε > 0, which is never read as a recovery). The iteration runs in log-variables and
#: cannot reach δ = 0: it stops at a small δ (measured, Wishart(0.5): T = 2 softmax at
#: α = 0.3, δ = 1.7e-6 and s_error = 3e-12; linear T = 1 at α = 0.6, δ = 1.1e-3 and
#: s_error = 1.5e-6), where ``ReLU(S0 + δZ)`` still cuts the null block's semicircle in
#: half (atom w0/2 instead of w0).
_RECOVERY_RTOL = 1e-3
#: Eigenvalues of a finite-d target at or below this fraction of the largest are its zeros
#: (a sampled low-rank S0 has zeros of order 1e-16).
_ZERO_RTOL = 1e-10


def mixed_fraction(weights, fractions):
    """The weighted mean of fractions (weights summing to 1), kept within their range.

    Rounding alone can put ``Σ w_k f_k`` just off it (all ``f_k = 1`` giving
    0.9999999999999999), which would read as an uncertified node.

    Parameters
    ----------
    weights : sequence of float
        Non-negative, summing to 1.
    fractions : sequence of float
        In [0, 1] (nan propagates).

    Returns
    -------
    float
    """
    fractions = np.asarray(fractions, dtype=float)
    value = float(np.dot(np.asarray(weights, dtype=float), fractions))
    if np.isnan(value):
        return value
    return float(np.clip(value, np.min(fractions), np.max(fractions)))


@dataclass
class StateEvolutionResult:
    """Fixed point of the state evolution and the predictions derived from it.

    Like :class:`scipy.optimize.OptimizeResult`, it carries ``converged``, ``n_iter`` and a
    ``message``; ``n_iter`` counts evaluations of the fixed-point map (output side then
    denoiser), over every start and solver stage (Anderson and damped iterations, on the
    coarse node set and on all nodes), with
    the final one at the returned point (none when it collapsed to S = 0) — not
    iterations of one solver. Order parameters: ``m = Tr(S0 Ŝ)/d``, ``q = Tr Ŝ²/d``, ``sigma`` (Σ) and
    their conjugates (with the paper's factor 2). ``eta``, ``delta``, ``epsilon`` give the
    learned spectrum: ``S ≈ eta · ReLU(S0 + delta Z − epsilon I)`` (factored).
    ``problem`` is the :class:`~skattn.theory.StateEvolutionProblem` solved (``params``
    repeats its scalars, with ``trace = Tr Ŝ/d``). ``certified_fraction`` is the fraction
    of quadrature nodes whose prox minimiser was certified global at the final iteration.

    Which finite-size correction produced the numbers (docs: Finite-size
    corrections): ``correction`` is its name (``"none"``: the Gaussian core alone),
    ``correction_weight`` the weight it carries against the rest of the table (1: fully
    applied; between 0 and 1: faded out towards its domain edge), ``correction_reason`` why,
    and ``decisions`` the whole decision table (:class:`~skattn.theory.CorrectionDecision`,
    one per correction, as :func:`skattn.theory.explain` shows it). ``extras`` holds what a
    correction adds beyond the common fields:

    - ``"core_test_error"``: the Gaussian core's test error (any correction);
    - ``"uncertified_bound"``: where some prox minimisers are not certified global, a bound
      on how far they can move m̂, q̂, Σ̂ (``sigma_hat_stein``), the train error and the
      Moreau envelope (a dict; zeros when every node is certified, empty for linear
      attention). With corrections, each term of ``core + Σ_i w_i (corrected_i −
      anchor_i)`` adds its bound times its coefficient's size; None where a correction's
      prox leaves nodes uncertified and has no bound of its own (the exact-Gram correction
      of softmax at T ≥ 3, whose multi-start is not certified: ``certified_fraction`` 0);
    - ``"uncertified_effect"``: how far those nodes can move the prediction, to first order:
      ``m``, ``q``, ``sigma`` and ``test_error``, each the largest move of the fixed point
      over the signs of the conjugates' shifts within ``uncertified_bound`` (an estimate,
      first order in the bound: docs: Theory, "Certificate"; zeros when every node is
      certified, None where it was not estimated: a solve that neither converged nor
      stopped at a floor of the quadrature's resolution, or a term of the blend without
      one);
    - ``"leverage_spread"``: the relative spread of the per-sample leverage (``leverage``);
    - ``"m_hat_identity"``, ``"seq2lab_s_error"``: the identity conjugate and the start's
      ``‖Ŝ − S0‖²_F/d`` (``exact_gram``);
    - ``"n_spikes"``, ``"spike_strengths"``, ``"target_spike_strengths"``: the explicit
      top modes (``spiked``; ``spike_strengths`` also stays in ``params``).
    """

    alpha: float
    m: float
    q: float
    sigma: float
    m_hat: float
    q_hat: float
    sigma_hat: float
    Q0: float
    test_error: float
    train_error: float
    train_objective: float
    eta: float
    delta: float
    epsilon: float
    converged: bool
    n_iter: int
    message: str
    residual: float = np.nan
    parametrization: str = "factored"
    params: dict = field(default_factory=dict)
    law: SpectralLaw | None = field(default=None, repr=False)
    finite_eigenvalues: np.ndarray | None = field(default=None, repr=False)
    problem: StateEvolutionProblem | None = field(default=None, repr=False)
    certified_fraction: float = np.nan
    correction: str = "none"
    correction_weight: float = 0.0
    correction_reason: str = ""
    extras: dict = field(default_factory=dict)
    decisions: tuple = field(default=(), repr=False)

    # ---- derived quantities -------------------------------------------------------------
    @property
    def s_error(self):
        """``‖Ŝ − S0‖²_F / d = Q0 − 2m + q``."""
        return self.Q0 - 2 * self.m + self.q

    @property
    def trace(self):
        """``Tr Ŝ / d``."""
        return self.params.get("trace", np.nan)

    def _convolved(self):
        if self.law is None:
            raise ValueError("this result carries no spectral law.")
        return free_convolution(self.law, 0.0 if self.exact_recovery else self.delta)

    @property
    def exact_recovery(self):
        """Whether the fixed point is the noiseless ridgeless recovery ``Ŝ = S0``.

        Factored, ``reg_lambda = 0`` and ``noise = 0``: a fixed point exists only above the
        interpolation threshold (below it :func:`~skattn.theory.solve_state_evolution`
        returns the λ → 0⁺ limit), where S0 is the unique PSD interpolant. The iteration approaches
        δ = 0 without reaching it; the spectrum is then S0's (δ = 0), not that of the
        last iterate.
        """
        p = self.params
        return bool(self.parametrization == "factored" and p.get("reg_lambda") == 0
                    and p.get("noise") == 0 and self.epsilon == 0 and self.converged
                    and self.s_error <= _RECOVERY_RTOL * self.Q0)

    def _target_eigenvalues(self):
        if self.problem is None or self.problem.n_features is None:
            return None
        eig = np.sort(np.asarray(self.problem.target_law()[1], dtype=float))
        return np.where(eig <= _ZERO_RTOL * max(eig[-1], 0.0), 0.0, eig)

    @property
    def atom_mass(self):
        """Mass of the atom at zero of the learned spectrum: the fraction of eigenvalues of
        Ŝ that are exactly zero (rank collapse), ``μ_δ((−∞, ε])``.

        Eigenvalues of order ``ηδ`` above zero are not in it: where δ is small (λ → 0⁺
        above α_perf) most of the target's zero eigenvalues become such small positive
        ones, and a trained model's "fraction below t · max" estimates
        :meth:`spectrum_cdf` at t · max, which is the atom only for t · max ≪ ηδ
        (docs: Errors, "The atom at zero and λ = 0"). At the noiseless λ = 0 recovery
        (:attr:`exact_recovery`) it is the target's atom.
        """
        if self.exact_recovery:
            eig = self._target_eigenvalues()
            if eig is not None:
                return float(np.mean(eig <= 0))
            return float(self._convolved().mass_below(0.0))
        if self.finite_eigenvalues is not None:
            return float(np.mean(self.finite_eigenvalues <= 0))
        if self.parametrization == "direct":
            return 0.0
        return float(self._convolved().mass_below(self.epsilon))

    def spectrum_cdf(self, s):
        """Fraction of the eigenvalues of the learned S at or below ``s`` (atom included).

        ``μ_δ((−∞, ε + s/η])`` for ``s ≥ 0`` (0 below zero) in the factored model,
        ``μ_δ((−∞, ε + s/η])`` for any s in the direct one; the empirical fraction of the
        finite-d spectrum where the result carries one. ``spectrum_cdf(0) == atom_mass``.
        This is what the fraction of a trained model's eigenvalues below a threshold
        estimates (docs: Errors, "The atom at zero and λ = 0").

        Parameters
        ----------
        s : float or array-like
            Eigenvalue(s) of S (in the units of ``S = WWᵀ/√(pd)``).

        Returns
        -------
        float or ndarray
        """
        s_arr = np.asarray(s, dtype=float)
        if not np.all(np.isfinite(s_arr)):
            raise ValueError("s must be finite.")
        if self.exact_recovery:
            eig = self._target_eigenvalues()
            if eig is not None:
                out = np.mean(eig[None, :] <= s_arr.reshape(-1, 1), axis=1)
            else:
                mu = self._convolved()
                out = np.array([mu.mass_below(v) if v >= 0 else 0.0
                                for v in s_arr.ravel()])
        elif self.finite_eigenvalues is not None:
            out = np.mean(np.asarray(self.finite_eigenvalues)[None, :]
                          <= s_arr.reshape(-1, 1), axis=1)
        else:
            mu = self._convolved()
            out = np.array([
                mu.mass_below(self.epsilon + v / self.eta)
                if (v >= 0 or self.parametrization == "direct") else 0.0
                for v in s_arr.ravel()])
        out = out.reshape(s_arr.shape)
        return float(out) if out.ndim == 0 else out

    def spectrum_density(self, s):
        """Density of the non-zero part of the learned spectrum at ``s`` (the atom excluded).

        ``ρ_S(s) = ρ_δ(ε + s/η)/η`` for the factored model (``ρ_δ(s/η)/η`` direct).
        """
        s = np.asarray(s, dtype=float)
        mu = self._convolved()
        if self.parametrization == "direct":  # ε = −t̂/m̂ (0 for Gaussian tokens)
            return mu.density(self.epsilon + s / self.eta) / abs(self.eta)
        out = np.zeros_like(s)
        pos = s > 0
        out[pos] = mu.density(self.epsilon + s[pos] / self.eta) / self.eta
        return out

    def spectrum_support(self):
        """Intervals of the non-zero part of the learned spectrum (an explicit spike of the
        spiked route, docs: Spiky targets, is a degenerate interval at its eigenvalue)."""
        spikes = [(v, v) for v in np.sqrt(self.params.get("n_features") or 0)
                  * np.asarray(self.params.get("spike_strengths", []), float) if v > 0]
        mu = self._convolved()
        if self.parametrization == "direct":
            return [(self.eta * (a - self.epsilon), self.eta * (b - self.epsilon))
                    for a, b in mu.intervals]
        return [(self.eta * max(a - self.epsilon, 0.0), self.eta * (b - self.epsilon))
                for a, b in mu.intervals if b > self.epsilon] + spikes

    def sample_spectrum(self, n_features, random_state=None):
        """A typical spectrum of the learned ``S`` at size d (quantiles of the predicted law)."""
        if self.exact_recovery:
            eig = self._target_eigenvalues()
            if eig is not None and eig.size == n_features:
                return eig
        elif (self.finite_eigenvalues is not None
                and n_features == self.finite_eigenvalues.size):
            return np.sort(self.finite_eigenvalues)
        x = self._convolved().sample_eigenvalues(n_features, random_state=random_state,
                                                 method="quantile")
        if self.parametrization == "direct":
            return np.sort(self.eta * (x - self.epsilon))
        return np.sort(self.eta * np.maximum(x - self.epsilon, 0.0))

    def as_dict(self):
        """The scalar fields as a flat dict (for tables, CSV and JSON)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, (bool, int, float, str, np.floating, np.integer, np.bool_)):
                out[f.name] = v.item() if hasattr(v, "item") else v
        out.update({k: v for k, v in self.params.items() if np.isscalar(v)})
        out.update({k: v for k, v in self.extras.items()
                    if np.isscalar(v) and k not in out})
        return out
