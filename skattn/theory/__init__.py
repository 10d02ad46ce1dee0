"""Asymptotic theory of single-head tied attention (numpy/scipy only, never torch).

- :mod:`~skattn.theory.laws` — spectral laws of targets;
- :mod:`~skattn.theory.spectral` — free convolution with a semicircle, J, D;
- :mod:`~skattn.theory.coords` — the h ↔ u coordinate maps;
- :mod:`~skattn.theory.channels` — output side (softmax / linear channels, prox);
- :mod:`~skattn.theory.denoisers` — prior side (factored spectral threshold, direct ridge);
- :mod:`~skattn.theory.problem` — a validated state-evolution problem (the model, no α);
- :mod:`~skattn.theory.core` — the Gaussian core: fixed-point map, iteration, options;
- :mod:`~skattn.theory.corrections` — the finite-size corrections and their ordered table;
- :mod:`~skattn.theory.state_evolution` — the solver (core → table → one result), explain;
- :mod:`~skattn.theory.quadrature_spread` — a prediction's spread over scramblings of
  its quadrature nodes;
- :mod:`~skattn.theory.thresholds`, :mod:`~skattn.theory.bayes`,
  :mod:`~skattn.theory.optimal` — thresholds, Bayes-optimal baseline, optimal λ;
- :mod:`~skattn.theory.powerlaw` — spectral recovery, emergence, error decomposition;
- :mod:`~skattn.theory.phase_diagram` — test error over α × λ grids;
- :mod:`~skattn.theory.token_leverage` — finite-d linear T = 1 with the token leverage.
"""

from .bayes import BayesOptimalResult, bayes_optimal
from .laws import DiscreteLaw, SpectralLaw, WishartLaw, power_law_eigenvalues, powerlaw_law
from .optimal import optimal_reg_lambda
from .phase_diagram import PhaseDiagram, solve_phase_diagram
from .powerlaw import (
    ErrorDecomposition,
    LearningCurve,
    SpectralRecovery,
    emergence_alpha,
    error_decomposition,
    irreducible_error,
    isolation_thresholds,
    recovered_modes,
    theory_learning_curve,
)
from .problem import (DomainWarning, FiniteSizeWarning, StateEvolutionProblem,
                      UncertifiedWarning)
from .spectral import ConvolvedLaw, free_convolution, semicircle_law
from .core import SolverOptions
from .corrections import CORRECTION_NAMES, CorrectionDecision
from .state_evolution import (DecisionTable, StateEvolutionResult, explain,
                              solve_state_evolution, state_evolution_curve)
from .quadrature_spread import QuadratureSpread, quadrature_spread
from .thresholds import (
    bayes_optimal_threshold,
    interpolation_threshold,
    perfect_recovery_threshold,
)

# The entry points. The building blocks (channels, denoisers, quadrature nodes, the
# coefficients of the error decomposition, target-law resolution) stay in their submodules.
__all__ = [
    "StateEvolutionProblem", "StateEvolutionResult", "DomainWarning", "FiniteSizeWarning",
    "UncertifiedWarning", "solve_state_evolution", "SolverOptions", "explain", "DecisionTable",
    "CorrectionDecision", "CORRECTION_NAMES",
    "state_evolution_curve", "quadrature_spread", "QuadratureSpread",
    "PhaseDiagram", "solve_phase_diagram",
    "interpolation_threshold", "perfect_recovery_threshold", "bayes_optimal_threshold",
    "bayes_optimal", "BayesOptimalResult", "optimal_reg_lambda",
    "SpectralLaw", "WishartLaw", "DiscreteLaw", "power_law_eigenvalues", "powerlaw_law",
    "ConvolvedLaw", "free_convolution", "semicircle_law",
    "recovered_modes", "SpectralRecovery", "isolation_thresholds", "emergence_alpha",
    "error_decomposition", "ErrorDecomposition", "irreducible_error",
    "theory_learning_curve", "LearningCurve",
]
