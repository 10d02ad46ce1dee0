"""The Gaussian core of the state evolution (docs: Theory §4 "The Gaussian core").

- :mod:`~skattn.theory.core.options` — :class:`SolverOptions`, the numerical knobs;
- :mod:`~skattn.theory.core.iteration` — Anderson and damped iteration, continuation in λ;
- :mod:`~skattn.theory.core.fixed_point_map` — the map ``(m, q, Σ) → prior(output(·))``;
- :mod:`~skattn.theory.core.solve` — :func:`solve_core`: one fixed point, no correction.
"""

from .options import OPTION_NAMES, SolverOptions, resolve_options
from .solve import CoreSolution, solve_core

__all__ = ["SolverOptions", "resolve_options", "OPTION_NAMES", "CoreSolution", "solve_core"]
