"""Asymptotic theory of single-head tied attention (numpy/scipy only, never torch).

- :mod:`~skattn.theory.laws` — spectral laws of targets;
- :mod:`~skattn.theory.spectral` — free convolution with a semicircle, J, D;
- :mod:`~skattn.theory.channels` — output side (softmax / linear channels, prox);
- :mod:`~skattn.theory.denoisers` — prior side (factored spectral threshold, direct ridge);
- :mod:`~skattn.theory.problem` — a validated state-evolution problem (the model, no α);
- :mod:`~skattn.theory.state_evolution` — the solver and its result;
- :mod:`~skattn.theory.thresholds`, :mod:`~skattn.theory.bayes`,
  :mod:`~skattn.theory.optimal` — thresholds, Bayes-optimal baseline, optimal λ;
- :mod:`~skattn.theory.powerlaw` — spectral recovery, emergence, error decomposition.
"""

from .channels import GaussianNodes, LinearChannel, SoftmaxChannel, channel_for
from .denoisers import DirectDenoiser, FactoredDenoiser
from .laws import DiscreteLaw, SpectralLaw, WishartLaw
from .thresholds import (
    bayes_optimal_threshold,
    interpolation_threshold,
    perfect_recovery_threshold,
)
from .spectral import ConvolvedLaw, free_convolution, semicircle_law
from .bayes import BayesOptimalResult, bayes_optimal
from .optimal import optimal_reg_lambda
from .powerlaw import (
    ErrorDecomposition,
    LearningCurve,
    SpectralRecovery,
    emergence_alpha,
    error_coefficients,
    error_decomposition,
    isolation_thresholds,
    powerlaw_law,
    recovered_modes,
    theory_learning_curve,
)
from .problem import StateEvolutionProblem
from .state_evolution import (
    StateEvolutionResult,
    resolve_target_law,
    solve_state_evolution,
    state_evolution_curve,
)

__all__ = [
    "SpectralLaw", "WishartLaw", "DiscreteLaw",
    "ConvolvedLaw", "free_convolution", "semicircle_law",
    "SoftmaxChannel", "LinearChannel", "channel_for", "GaussianNodes",
    "FactoredDenoiser", "DirectDenoiser",
    "StateEvolutionProblem", "StateEvolutionResult", "solve_state_evolution",
    "state_evolution_curve",
    "resolve_target_law",
    "interpolation_threshold", "perfect_recovery_threshold", "bayes_optimal_threshold",
    "bayes_optimal", "BayesOptimalResult", "optimal_reg_lambda",
    "powerlaw_law", "recovered_modes", "SpectralRecovery", "isolation_thresholds",
    "emergence_alpha", "error_decomposition", "ErrorDecomposition", "error_coefficients",
    "theory_learning_curve", "LearningCurve",
]
