"""Asymptotic theory of single-head tied attention (numpy/scipy only, never torch).

- :mod:`~skattn.theory.laws` — spectral laws of targets;
- :mod:`~skattn.theory.spectral` — free convolution with a semicircle, J, D;
- :mod:`~skattn.theory.channels` — output side (softmax / linear channels, prox);
- :mod:`~skattn.theory.denoisers` — prior side (factored spectral threshold, direct ridge);
- :mod:`~skattn.theory.state_evolution` — the solver and its result.
"""

from .channels import GaussianNodes, LinearChannel, SoftmaxChannel, channel_for
from .denoisers import DirectDenoiser, FactoredDenoiser
from .laws import DiscreteLaw, SpectralLaw, WishartLaw
from .spectral import ConvolvedLaw, free_convolution, semicircle_law
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
    "StateEvolutionResult", "solve_state_evolution", "state_evolution_curve",
    "resolve_target_law",
]
