"""Power-law targets: sequential spectral recovery, emergence and the error decomposition.

docs: Theory §8. At a state-evolution fixed point the learned matrix is, in law,
``Ŝ ≈ η · ReLU(S0 + δ Z − ε I)`` (§4, Claim 4.1). For a target with an explicit finite-d
spectrum ``λ_1 ≥ … ≥ λ_d`` (e.g. :class:`~skattn.data.PowerLawTarget`) this module reads
off that law

- which target modes are *recovered* — outliers of the spectrum of ``S0 + δZ`` that stand
  apart from the noise bulk and survive the threshold ε (:func:`recovered_modes`);
- where the outliers sit and how well their eigenvectors align with the target's;
- the sample ratio α at which mode i emerges (:func:`emergence_alpha`);
- the split of the excess test error into overfitting, underfitting, approximation and
  mismatch parts (:func:`error_decomposition`);
- whole learning curves, from the theory alone (:func:`theory_learning_curve`), and the
  irreducible error e0 they are counted from (:func:`irreducible_error`);
- the asymptotic regimes and exponents of the excess risk (:func:`scaling_regime`,
  :func:`excess_risk_exponent`, :func:`phase_diagram`).

Submodules: :mod:`~skattn.theory.powerlaw.recovery`,
:mod:`~skattn.theory.powerlaw.emergence`, :mod:`~skattn.theory.powerlaw.decomposition`,
:mod:`~skattn.theory.powerlaw.learning_curves`, :mod:`~skattn.theory.powerlaw.regimes`
(the spectrum itself lives in :mod:`skattn.theory.laws`).

Which finite-d theory
---------------------
Everything here uses the *deterministic equivalent* of the finite-d problem: the
continuum state evolution with the target law ``(1/d) Σ_i δ_{λ_i}``
(a :class:`~skattn.theory.DiscreteLaw`; ``solve_state_evolution(..., target=DiscreteLaw(λ),
n_features=None)``), whose spectral side is the free convolution ``μ_δ = μ0 ⊞ SC(δ²)``.
It is deterministic and cheap (about 0.1–1 s per point at d = 1000, against ~30 s per
point at d = 200 for the former finite-d GOE-draw mode, whose cost grew like d³ per
iteration). The two agreed to within the fluctuations of the single GOE draw (docs:
Changelog).

Spectral objects used throughout
--------------------------------
With ``G_δ(x + i0) = Re G_δ(x) − iπ ρ_δ(x)`` the boundary value of the Cauchy transform of
μ_δ and the subordination function ``ω(x) = x − δ² G_δ(x + i0)``:

- the overlap density of target mode i: ``Σ_k ⟨v_k, e_i⟩² δ(x − x_k) ≈ δ² ρ_δ(x) /
  |ω(x) − λ_i|²`` (v_k, x_k the eigenpairs of ``S0 + δZ``; it integrates to one);
- hence the diagonal of the learned matrix in the target eigenbasis,
  ``Ŝ_ii = η ∫ (x − ε)₊ δ² ρ_δ(x) / |ω(x) − λ_i|² dx``, with ``(1/d) Σ_i λ_i Ŝ_ii = m``;
- and the squared overlap of an isolated outlier with its mode,
  ``c_i² = ∫_{I_i} δ² ρ_δ(x) / |ω(x) − λ_i|² dx`` over its support interval ``I_i``
  (for one spike in a semicircle this is the BBP value ``1 − δ²/λ²``).
"""

from __future__ import annotations

from ..laws import powerlaw_law
from .decomposition import (
    ErrorDecomposition,
    error_coefficients,
    error_decomposition,
    irreducible_error,
    spiked_irreducible_error,
)
from .emergence import emergence_alpha
from .learning_curves import LearningCurve, theory_learning_curve
from .recovery import SpectralRecovery, isolation_thresholds, recovered_modes
from .regimes import REGIMES, excess_risk_exponent, phase_diagram, scaling_regime

__all__ = [
    "powerlaw_law",
    "SpectralRecovery",
    "recovered_modes",
    "isolation_thresholds",
    "emergence_alpha",
    "ErrorDecomposition",
    "error_decomposition",
    "error_coefficients",
    "irreducible_error",
    "spiked_irreducible_error",
    "LearningCurve",
    "theory_learning_curve",
    "REGIMES",
    "excess_risk_exponent",
    "scaling_regime",
    "phase_diagram",
]
