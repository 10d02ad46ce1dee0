"""Prior side of state evolution (docs: Theory §4 and §5): the spectral denoisers.

Each denoiser maps the conjugate parameters ``(m̂, q̂, Σ̂)`` to the overlaps
``(m, q, Σ)`` of the estimate ``Ŝ`` with the target:

- :class:`FactoredDenoiser` — weight decay on ``W`` is a trace penalty on ``S``:
  ``Ŝ = ReLU(m̂ S0 + √q̂ Z − 2λ̃ I)/Σ̂`` (eigenvalue-wise, the ``p`` largest kept), in the
  d → ∞ continuum (free convolution), or for the spectrum of one d×d target (free
  convolution of its empirical law; under a rank constraint, cut at its upper κ-quantile);
- :class:`DirectDenoiser` — the Frobenius (ridge) baseline ``Ŝ = (m̂ S0 + √q̂ Z)/(Σ̂ + 4λ)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._blas import single_blas_thread
from .._validation import (MAX_TARGET_SCALE, MIN_RANK_RATIO, MIN_TARGET_SCALE,
                           check_random_state_arg, check_scalar_range, check_target_scale)
from .laws import DiscreteLaw, SpectralLaw, WishartLaw
from .spectral import ConvolvedLaw, _compiled, free_convolution
from .spectral.capped import CappedReluIntegrals, capped_relu_integrals

__all__ = ["PriorState", "FactoredDenoiser", "DirectDenoiser", "goe_matrix",
           "relu_divided_differences"]

#: Panel tolerance of the free convolution inside the fixed-point iteration (its default is
#: 1e-10). The Gauss–Kronrod result is far more accurate than the tolerance: on a 32-point
#: T = 2 curve 1e-8 changed no output by more than 4e-11 relative and saved ~5 % of the
#: time, the panels being rebuilt at every new δ.
_FIXED_POINT_RTOL = 1e-8


@dataclass
class PriorState:
    """What the prior side returns, with the spectral parameters behind it."""

    m: float
    q: float
    sigma: float
    eta: float = np.nan      #: m̂/Σ̂, scale of the learned spectrum
    delta: float = np.nan    #: √q̂/m̂, width of the semicircle noise
    epsilon: float = np.nan  #: 2λ̃/m̂ (minus t̂/m̂ for non-Gaussian tokens)
    trace: float = np.nan    #: Tr Ŝ / d
    eigenvalues: np.ndarray | None = None  #: a finite-d spectrum of Ŝ, where one is computed
    rank_capped: bool = False  #: the rank constraint removed positive eigenvalues
    #: where the rank cap binds, the cut τ > ε (upper κ-quantile of μ_δ): Ŝ keeps x > τ
    rank_threshold: float = np.nan
    #: under a rank cap (finite d, κ < 1), ``μ_δ((ε, ∞))``: the fraction of positive
    #: eigenvalues Ŝ would have without the cap (it binds where this exceeds κ)
    positive_fraction: float = np.nan

def relu_divided_differences(eigenvalues):
    """Daleckii–Krein weights of ``f = ReLU`` on a spectrum: the Jacobian of a spectral threshold.

    ``γ_ij = (f(ν_i) − f(ν_j))/(ν_i − ν_j)``, with ``f′(ν_i)`` (1 if ``ν_i > 0``, else 0) on
    the diagonal and between equal eigenvalues. In the eigenbasis of ``M``, the derivative of
    ``ReLU(M)`` along a symmetric E is ``γ ∘ E`` (entrywise).

    Parameters
    ----------
    eigenvalues : ndarray of shape (d,)
        The spectrum ν, the threshold already subtracted.

    Returns
    -------
    ndarray of shape (d, d)
        Symmetric, entries in [0, 1].
    """
    nu = np.asarray(eigenvalues, dtype=float)
    f = np.maximum(nu, 0.0)
    active = (nu > 0).astype(float)
    gap = nu[:, None] - nu[None, :]
    close = np.abs(gap) <= 1e-12 * (1.0 + np.abs(nu[:, None]))
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma = np.where(close, active[:, None], (f[:, None] - f[None, :]) / gap)
    np.fill_diagonal(gamma, active)
    return gamma


def goe_matrix(n_features, random_state=None):
    """GOE(d): symmetric, off-diagonal variance 1/d, diagonal variance 2/d (semicircle on [−2, 2])."""
    rng = check_random_state_arg(random_state)
    g = rng.standard_normal((n_features, n_features))
    return (g + g.T) / np.sqrt(2 * n_features)

def _law_scale_moment(law):
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return law.second_moment()


def _check_law(law):
    """Refuse a target law the state evolution cannot hold in float64 (docs: Errors).

    Only the upper end of the target's scale is checked here: the spiked route builds a
    denoiser on the bulk of a target, which may be zero up to rounding; the lower end is
    named where it bites, when the conjugates underflow (:func:`_check_conjugates`).
    """
    if isinstance(law, WishartLaw) and law.rank_ratio < MIN_RANK_RATIO:
        # Marchenko–Pastur of ratio 1/κ0: its edge search fails below (1e-20: RuntimeError)
        raise ValueError(f"rank_ratio={law.rank_ratio:g} of the Wishart target is below "
                         f"{MIN_RANK_RATIO:g}, where the state evolution's spectral "
                         f"quadrature holds; use rank_ratio >= {MIN_RANK_RATIO:g}.")
    second = _law_scale_moment(law)
    if not second <= MAX_TARGET_SCALE ** 2:
        check_target_scale(second)


def _check_conjugates(m_hat, sigma_hat, law):
    """The prior side needs ``m̂ > 0`` and a finite non-zero ``Σ̂``: otherwise float64 under-
    or overflowed (the old code divided by zero or took NaN into the quadrature)."""
    if m_hat > 0 and np.isfinite(m_hat) and sigma_hat != 0 and np.isfinite(sigma_hat):
        return
    second = _law_scale_moment(law)
    if not second >= MIN_TARGET_SCALE ** 2:
        check_target_scale(second)  # the target's scale underflowed: name it
    raise ValueError(
        f"the state evolution's conjugates left float64 (m̂ = {m_hat:.3g}, Σ̂ = "
        f"{sigma_hat:.3g}): an argument at the edge of its supported range (alpha, beta, "
        "target_beta, the target's scale); see docs: Errors.")


class FactoredDenoiser:
    """Spectral soft threshold of factored (tied) attention.

    Parameters
    ----------
    law : SpectralLaw
        Spectral law of the target S0 (continuum mode) — or, in finite-d mode, the law
        whose atoms are the eigenvalues of the fixed d×d target.
    width_ratio : float
        κ = p/d. Below 1 the rank constraint keeps the p largest eigenvalues (finite-d only).
    reg_lambda : float
        λ ≥ 0 of the objective ``Σ ℓ + λ‖W‖²_F``; the trace penalty is ``λ̃ = √κ λ``.
    n_features : int or None
        None: the d → ∞ continuum. An integer d: the state evolution of one d×d target
        with eigenvalues ``target_eigenvalues``: the free convolution of their empirical
        law with the semicircle (the deterministic equivalent: exact d → ∞ map of that
        spectrum, with no draw). With ``width_ratio < 1`` the map keeps the
        ``p = round(κ d)`` largest positive eigenvalues of ``M = m̂ S0 + √q̂ Z − 2λ̃ I``:
        the convolved law is cut at its upper ``p/d``-quantile τ when ``τ > ε``
        (:func:`~skattn.theory.spectral.capped.capped_relu_integrals`).
    target_eigenvalues : ndarray of shape (d,), optional
        The spectrum of the fixed target in finite-d mode (only its eigenvalues matter, by
        rotation invariance of the GOE); by default the atoms of ``law``.
    random_state : int, default=0
        No effect: the prior is deterministic in every mode (accepted so that callers
        that seeded the former GOE draw keep working).

    Notes
    -----
    Why no GOE draw: a real symmetric draw carries O(1/d) corrections to the semicircle
    (``E Tr Z²/d = 1 + 1/d``, the diagonal term of the divergence in Σ) that the fixed point
    amplifies: on Wishart(0.5), linear T = 1, α = 0.3, λ = 0.05, Δ = 0.3 and the continuum's
    quantile spectrum, one draw gave test error 1.088 at d = 60 and 1.257 at d = 800
    against 1.281 in the continuum; the free convolution of the same spectra gives 1.2804
    and 1.2806 (see tests/test_domain.py). The rank-capped map used one draw until the
    capped free convolution replaced it (docs: Where the predictions hold, tests/test_rank_capped_finite_d.py).
    """

    def __init__(self, law, *, width_ratio=1.0, reg_lambda=0.0, n_features=None,
                 target_eigenvalues=None, random_state=0):
        if not isinstance(law, SpectralLaw):
            raise TypeError(f"law must be a SpectralLaw, got {type(law).__name__}.")
        _check_law(law)
        self.law = law
        self.width_ratio = check_scalar_range(width_ratio, "width_ratio", low=0,
                                              low_inclusive=False)
        self.reg_lambda = check_scalar_range(reg_lambda, "reg_lambda", low=0)
        self.n_features = n_features
        self.random_state = random_state
        if n_features is None:
            if self.width_ratio < 1:
                raise ValueError(
                    "width_ratio < 1 (the rank constraint) needs the finite-d state "
                    "evolution: pass n_features (an integer d)."
                )
            self._eig0 = None
            self._rank_ratio = 1.0
        else:
            d = check_scalar_range(n_features, "n_features", low=2, integer=True)
            if target_eigenvalues is None:
                if not isinstance(law, DiscreteLaw) or law.n_atoms != d:
                    raise ValueError("finite-d mode needs target_eigenvalues of length "
                                     "n_features (or a DiscreteLaw with d atoms).")
                target_eigenvalues = law.eigenvalues
            eig0 = np.asarray(target_eigenvalues, dtype=float)
            if eig0.shape != (d,):
                raise ValueError(f"target_eigenvalues must have shape ({d},), got {eig0.shape}.")
            self._eig0 = eig0
            self._rank = min(d, max(1, int(round(self.width_ratio * d))))
            # the student's p = round(κ d) (at least 1), as a fraction of the d eigenvalues
            self._rank_ratio = self._rank / d
            self._empirical_law = DiscreteLaw(eig0)

    @property
    def reg_trace(self):
        """λ̃ = √κ λ, the trace penalty equivalent to weight decay on W."""
        return np.sqrt(self.width_ratio) * self.reg_lambda

    def __call__(self, m_hat, q_hat, sigma_hat, t_hat=0.0):
        """Return a :class:`PriorState` for conjugates ``(m̂, q̂, Σ̂)`` (m̂, Σ̂ > 0).

        ``t_hat`` (t̂, the conjugate of ``Tr S/d`` for non-Gaussian tokens) adds ``t̂ I`` to
        ``M``: the threshold becomes ``ε = (2λ̃ − t̂)/m̂``.
        """
        if self.n_features is None:
            return self._continuum(m_hat, q_hat, sigma_hat, self.law, t_hat)
        if self._rank_ratio < 1:
            return self._capped(m_hat, q_hat, sigma_hat, t_hat)
        return self._continuum(m_hat, q_hat, sigma_hat, self._empirical_law, t_hat)

    def learned_spectrum(self, state):
        """The d eigenvalues of Ŝ at a :class:`PriorState` of this denoiser (finite-d mode).

        The d quantiles of the predicted law (a typical spectrum), with the rank cap
        applied (all but the p largest set to 0); ``state.eigenvalues`` where the state
        carries them. None in the continuum.
        """
        if state.eigenvalues is not None or self.n_features is None:
            return state.eigenvalues
        if not np.isfinite(state.delta) or not np.isfinite(state.eta):
            return None
        x = free_convolution(self._empirical_law, state.delta).sample_eigenvalues(
            self.n_features, method="quantile")
        spectrum = state.eta * np.maximum(x - state.epsilon, 0.0)
        spectrum[: self.n_features - self._rank] = 0.0  # x is increasing: keep the p largest
        return np.sort(spectrum)

    @property
    def convolution_start(self):
        """The free convolution the next evaluation starts from (its quadrature's panels),
        or None: with the state, what an evaluation depends on. A fixed-point iteration
        that goes back to an earlier point of its path sets it back too."""
        return getattr(self, "_previous_convolved", None)

    @convolution_start.setter
    def convolution_start(self, convolved):
        self._previous_convolved = convolved

    def _convolved(self, law, delta):
        """``μ0 ⊞ SC(δ²)`` at the fixed-point tolerance, warm-started from this denoiser's
        previous evaluation (its quadrature then starts from the previous panels)."""
        previous = getattr(self, "_previous_convolved", None)
        if previous is None or previous.law is not law:
            # its own cold build, not the module's cache: a cached law's quadrature grows
            # with other callers' queries, and its layout would then steer this one's
            mu = ConvolvedLaw(law, delta, rtol=_FIXED_POINT_RTOL)
        else:
            mu = free_convolution(law, delta, rtol=_FIXED_POINT_RTOL, warm_start=previous)
        self._previous_convolved = mu
        return mu

    def _threshold(self, m_hat, t_hat):
        return (2 * self.reg_trace if t_hat == 0.0 else 2 * self.reg_trace - t_hat) / m_hat

    def _continuum(self, m_hat, q_hat, sigma_hat, law, t_hat=0.0):
        _check_conjugates(m_hat, sigma_hat, law)
        delta = np.sqrt(max(q_hat, 0.0)) / m_hat
        eps = self._threshold(m_hat, t_hat)
        eta = m_hat / sigma_hat
        mu = self._convolved(law, delta)
        J = mu.J(eps)
        D = mu.D(eps)
        q = eta ** 2 * J
        m = eta * (mu.x_relu_moment(eps) - delta ** 2 * D)
        sigma = D / sigma_hat
        trace = eta * mu.relu_moment(eps, 1)
        return PriorState(m=m, q=q, sigma=sigma, eta=eta, delta=delta, epsilon=eps,
                          trace=trace)

    def _capped(self, m_hat, q_hat, sigma_hat, t_hat=0.0):
        """Finite d under the rank cap: ``g(x) = (x − ε)₊ 1{x > τ}`` on ``μ_δ``.

        The same formulas as :meth:`_continuum` (docs: Theory §4) with the ReLU
        integrals replaced by those of the capped map g.
        """
        _check_conjugates(m_hat, sigma_hat, self._empirical_law)
        delta = np.sqrt(max(q_hat, 0.0)) / m_hat
        eps = self._threshold(m_hat, t_hat)
        eta = m_hat / sigma_hat
        if delta > 0:
            mu = self._convolved(self._empirical_law, delta)
            capped = capped_relu_integrals(mu, eps, self._rank_ratio)
            positive = mu.mass_above(eps)
        else:  # no noise: μ_δ is the d atoms of S0 themselves
            capped = _capped_atoms(self._eig0, eps, self._rank)
            positive = float(np.mean(self._eig0 > eps))
        return _capped_state(capped, eta, delta, eps, sigma_hat, positive)


def _capped_state(capped, eta, delta, eps, sigma_hat, positive):
    """The :class:`PriorState` of :meth:`FactoredDenoiser._capped` from the capped ReLU
    integrals (docs: Theory §4), whichever law they were taken on."""
    D = capped.divided_difference
    return PriorState(m=eta * (capped.x_first - delta ** 2 * D), q=eta ** 2 * capped.second,
                      sigma=D / sigma_hat, eta=eta, delta=delta, epsilon=eps,
                      trace=eta * capped.first, rank_capped=capped.binding,
                      rank_threshold=capped.threshold if capped.binding else np.nan,
                      positive_fraction=positive)


def _capped_atoms(eigenvalues, eps, rank):
    """:class:`CappedReluIntegrals` of ``d`` atoms of mass ``1/d`` (δ = 0), the ``rank``
    largest kept.

    Pairs of distinct atoms enter ``D`` by their divided difference; coinciding atoms
    (the pair of an atom with itself included, as in :meth:`ConvolvedLaw.D` at δ = 0) by
    the derivative ``1{x > ε}`` averaged over whether the cap keeps each of the two.
    """
    x = np.sort(np.asarray(eigenvalues, dtype=float))
    d = x.size
    kept = np.zeros(d)
    kept[d - rank:] = 1.0
    g = kept * np.maximum(x - eps, 0.0)
    if _compiled.HAVE_NUMBA:  # one pass over the pairs, without the numpy temporaries
        dd = _compiled.divided_differences(x, g, kept, float(eps))
    else:  # pragma: no cover
        diff_x = x[:, None] - x[None, :]
        same = diff_x == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            dd = np.where(same, 0.5 * (kept[:, None] + kept[None, :]) * (x[:, None] > eps),
                          (g[:, None] - g[None, :]) / np.where(same, 1.0, diff_x))
    dd_sum = np.sum(dd)
    above = x > eps
    binding = bool(np.count_nonzero(above) > rank)
    cut = float(max(x[d - rank - 1], eps)) if binding else float(eps)
    return CappedReluIntegrals(threshold=cut, binding=binding,
                               kept_mass=float(np.count_nonzero(g > 0) / d),
                               first=float(np.sum(g) / d), second=float(np.sum(g * g) / d),
                               x_first=float(np.sum(x * g) / d),
                               divided_difference=float(dd_sum / d ** 2))

class SampledDenoiser:
    """A cheap stand-in for a :class:`FactoredDenoiser`, for the start of an iteration only.

    The same formulas as :meth:`FactoredDenoiser._capped`, on the eigenvalues of one fixed
    draw ``Λ + δ Z`` instead of the free convolution ``μ0 ⊞ SC(δ²)``: ``Λ`` holds at most
    ``n_points`` quantiles of the target's spectrum and ``Z`` is a symmetric matrix with
    zero diagonal and off-diagonal variance ``1/(n − 1)`` (so ``Tr Z²/n`` is 1 on average,
    without the ``1/n`` diagonal excess that the fixed point amplifies, see
    :class:`FactoredDenoiser`). One evaluation is an ``n × n`` eigenvalue problem, a tenth of
    the free convolution's adaptive quadrature; its values are off by the draw's O(1/n)
    fluctuations, so a fixed point of a map built on it is a start, never a result.

    Parameters
    ----------
    denoiser : FactoredDenoiser
    n_points : int, default=128
    random_state : int, default=0
    """

    def __init__(self, denoiser, n_points=128, random_state=0):
        if not isinstance(denoiser, FactoredDenoiser):
            raise TypeError(f"denoiser must be a FactoredDenoiser, got "
                            f"{type(denoiser).__name__}.")
        self.base = denoiser
        if denoiser.n_features is None:
            n = int(n_points)
            spectrum = free_convolution(denoiser.law, 0.0).sample_eigenvalues(
                n, method="quantile")
        else:
            eig0 = np.sort(denoiser._eig0)
            n = min(eig0.size, int(n_points))
            spectrum = eig0[np.round((np.arange(n) + 0.5) * eig0.size / n - 0.5).astype(int)]
        self._diag = np.diag(spectrum)                          # increasing
        g = np.random.default_rng([int(random_state), 7]).standard_normal((n, n))
        Z = np.triu(g, 1)
        self._Z = (Z + Z.T) / np.sqrt(n - 1)
        self._rank = max(1, int(round(denoiser._rank_ratio * n)))

    def __call__(self, m_hat, q_hat, sigma_hat, t_hat=0.0):
        _check_conjugates(m_hat, sigma_hat, self.base.law)
        delta = np.sqrt(max(q_hat, 0.0)) / m_hat
        eps = self.base._threshold(m_hat, t_hat)
        eta = m_hat / sigma_hat
        if delta > 0:
            # one BLAS thread: an n ≤ 128 problem gains nothing from more, and woken
            # OpenBLAS threads spin against the prox's numba threads (module ._blas)
            with single_blas_thread():
                x = np.linalg.eigvalsh(self._diag + delta * self._Z)
        else:
            x = np.diag(self._diag).copy()
        return _capped_state(_capped_atoms(x, eps, self._rank), eta, delta, eps, sigma_hat,
                             float(np.mean(x > eps)))


class DirectDenoiser:
    """Ridge denoiser of direct (Frobenius) attention, docs: Theory §5.

    ``Ŝ = (m̂ S0 + √q̂ Z)/(Σ̂ + 4λ)``: ``m = m̂ Q0/(Σ̂+4λ)``, ``q = (m̂² Q0 + q̂)/(Σ̂+4λ)²``,
    ``Σ = 1/(Σ̂+4λ)``. A trace conjugate t̂ (non-Gaussian tokens) adds ``t̂ I`` to the
    numerator.
    """

    def __init__(self, law, *, reg_lambda=0.0):
        if not isinstance(law, SpectralLaw):
            raise TypeError(f"law must be a SpectralLaw, got {type(law).__name__}.")
        _check_law(law)
        self.law = law
        self.reg_lambda = check_scalar_range(reg_lambda, "reg_lambda", low=0)
        self.Q0 = law.second_moment()

    def __call__(self, m_hat, q_hat, sigma_hat, t_hat=0.0):
        a = sigma_hat + 4 * self.reg_lambda
        if t_hat != 0.0:
            # Ŝ = (m̂ S0 + √q̂ Z + t̂ I)/a, and Tr Z/d → 0
            t0 = law_mean(self.law)
            m = (m_hat * self.Q0 + t_hat * t0) / a
            q = (m_hat ** 2 * self.Q0 + q_hat + 2 * m_hat * t_hat * t0 + t_hat ** 2) / a ** 2
            return PriorState(m=m, q=q, sigma=1.0 / a, eta=m_hat / a,
                              delta=np.sqrt(max(q_hat, 0.0)) / m_hat if m_hat > 0 else np.inf,
                              epsilon=-t_hat / m_hat if m_hat > 0 else 0.0,
                              trace=(m_hat * t0 + t_hat) / a)
        return PriorState(m=m_hat * self.Q0 / a, q=(m_hat ** 2 * self.Q0 + q_hat) / a ** 2,
                          sigma=1.0 / a, eta=m_hat / a,
                          delta=np.sqrt(max(q_hat, 0.0)) / m_hat if m_hat > 0 else np.inf,
                          epsilon=0.0, trace=m_hat * law_mean(self.law) / a)

def law_mean(law):
    """``∫ x μ(dx)``."""
    return law.moment(1)
