"""Solving the state evolution robustly along a path of α (warm starts, cold restarts).

Shared by :mod:`~skattn.theory.powerlaw.emergence` and
:mod:`~skattn.theory.powerlaw.learning_curves`.
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_finite_array, check_scalar_range
from ..laws import DiscreteLaw


def _resolve_theory_target(target, n_features):
    """A DiscreteLaw from a Target (+ n_features), a DiscreteLaw or an eigenvalue array."""
    if isinstance(target, DiscreteLaw):
        return target
    if hasattr(target, "spectral_law") and hasattr(target, "sample"):
        if n_features is None:
            raise ValueError(f"n_features is required with a {type(target).__name__}: the "
                             "power-law theory is a finite-d theory.")
        n_features = check_scalar_range(n_features, "n_features", low=2, integer=True)
        from ..state_evolution import resolve_target_law
        law, _ = resolve_target_law(target, n_features)
        return law
    if isinstance(target, (list, tuple, np.ndarray)):
        return DiscreteLaw(check_finite_array(target, "target", ndim=1))
    raise TypeError("target must be a Target (e.g. PowerLawTarget) with n_features, a "
                    f"DiscreteLaw or an array of eigenvalues, got {type(target).__name__}.")


def _lambda_at(reg_lambda, alpha):
    lam = reg_lambda(alpha) if callable(reg_lambda) else reg_lambda
    return check_scalar_range(lam, "reg_lambda", low=0)


#: cold starts (m/Q0, q/Q0, Σ) tried, in order, when the solver's own start fails
_COLD_STARTS = ((0.5, 0.5, 1.0), (0.9, 0.9, 0.1), (0.05, 0.01, 0.01), (0.3, 0.3, 10.0))


def _finite_d_if_spiky(kwargs, spiked):
    """Softmax on a spiky spectrum (a mode with more than 25 % of ``Σ λ_i²``): solve it as
    the d-dimensional problem it is (``n_features`` = the number of eigenvalues), where
    :func:`~skattn.theory.solve_state_evolution` routes it to the spiked state evolution
    (``spiked`` True) or warns that the Gaussian channel does not apply. The deterministic
    equivalent treats each eigenvalue as a d→∞ eigenspace, for which the Gaussian channel
    holds, and would be several per cent low for T = 2 without a warning (docs: Spiky
    targets)."""
    from ..problem import is_spiky
    law = kwargs.get("target")
    if (kwargs.get("attention", "softmax") == "softmax" and isinstance(law, DiscreteLaw)
            and kwargs.get("n_features") is None
            and is_spiky(law.eigenvalues)):
        return {"correction": "auto" if spiked else "none", **kwargs,
                "n_features": law.n_atoms}
    return kwargs


def _solve_robust(alpha, init, kwargs, spiked=True):
    """solve_state_evolution with a warm start, then its default start, then fixed cold
    starts, then a continuation in λ (from λ/30 up); returns the first converged result
    (else the one with the smallest residual).

    Under a strong trace penalty the fixed-point map is undefined (Ŝ = 0) on most of the
    (m, q, Σ) space, and a start far from the fixed point can fail even where a non-trivial
    fixed point exists. Softmax on a spiky spectrum is solved at finite d
    (:func:`_finite_d_if_spiky`), with the spiked route where ``spiked``.
    """
    from ..problem import split_model_keywords
    from ..state_evolution import solve_state_evolution
    kwargs = _finite_d_if_spiky(kwargs, spiked)

    def attempt(start, kw):
        model, options = split_model_keywords(kw)
        correction = options.pop("correction", "auto")
        try:
            return solve_state_evolution(alpha, correction=correction,
                                         options={**options, "init": start}, **model)
        except (ValueError, FloatingPointError, ZeroDivisionError):
            return None

    best = None
    Q0 = 1.0
    for start in (init, None) + _COLD_STARTS:
        if start is None and init is None and best is not None:
            continue
        if isinstance(start, tuple):
            start = (start[0] * Q0, start[1] * Q0, start[2])
        r = attempt(start, kwargs)
        if r is None:
            continue
        Q0 = float(r.Q0)
        if r.converged:
            return r
        if best is None or r.residual < best.residual:
            best = r
    lam = float(kwargs.get("reg_lambda", 0.0))
    if lam > 0:  # continuation in λ
        prev = None
        for f in np.geomspace(1 / 30, 1, 8):
            r = attempt(prev, dict(kwargs, reg_lambda=lam * f))
            if r is not None and r.converged:
                prev = r
        if prev is not None and prev.params.get("reg_lambda") == lam:
            return prev
    if best is None:
        raise RuntimeError(f"the state evolution failed at alpha={alpha:g} from every start.")
    return best
