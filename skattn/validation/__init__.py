"""Validation: simulations against the state evolution, extrapolated in d.

The evidence side of the package. Trained models at several d are compared with the state
evolution (continuum or same-instance); :func:`finite_size_scaling` runs one configuration,
:func:`run_validation_grid` the validation grid (``python -m skattn.validation``, ``make
validate``). The rows of both are public (:func:`fss_row`, :func:`simulation_row`,
:func:`continuum_row`, :func:`make_teacher`, :func:`seed_for`), so a research script
reproduces the grid's teachers and draws with public names only. :mod:`skattn.validation.report`
renders the validation report of the documentation from result files.

This package depends on the estimators and the theory; neither depends on it.
"""

from .config import FSSConfig
from .finite_size import (
    SEED_STREAMS,
    TOKEN_LEVERAGE_MAX_D,
    FiniteSizeComparison,
    FiniteSizeResult,
    continuum_row,
    domain_reasons,
    finite_size_scaling,
    fss_row,
    make_teacher,
    same_instance_se_row,
    seed_for,
    simulation_row,
    token_leverage_row,
)
from .fits import (
    EXPONENTS,
    MIN_D,
    PLAUSIBLE_WEIGHT,
    SEM_FLOOR,
    FiniteSizeFit,
    UndecidedVerdictWarning,
    akaike_weights,
    fit_finite_size,
    form_robust_verdict,
    select_fit,
)
from .grid import (
    VALIDATE_D,
    VALIDATE_SEEDS,
    VALIDATION_CONFIGS,
    estimate_grid_seconds,
    format_table,
    plot_gaps,
    run_validation_grid,
)

__all__ = [
    "FSSConfig", "FiniteSizeFit", "FiniteSizeComparison", "FiniteSizeResult",
    "finite_size_scaling", "fss_row", "simulation_row", "continuum_row", "make_teacher",
    "seed_for", "SEED_STREAMS", "same_instance_se_row", "token_leverage_row",
    "TOKEN_LEVERAGE_MAX_D", "domain_reasons",
    "fit_finite_size", "select_fit", "akaike_weights", "form_robust_verdict",
    "MIN_D", "EXPONENTS", "SEM_FLOOR", "PLAUSIBLE_WEIGHT", "UndecidedVerdictWarning",
    "VALIDATION_CONFIGS", "VALIDATE_D", "VALIDATE_SEEDS", "run_validation_grid",
    "estimate_grid_seconds", "format_table", "plot_gaps",
]
