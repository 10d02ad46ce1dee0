"""Power-law fits of learning curves, with confidence intervals (docs: Theory §8).

:func:`fit_power_law` fits ``err − e0 ≈ C · n^b`` to errors observed at several sample
sizes (simulations, or the theory's own curves); :func:`irreducible_error` gives the
``e0`` of a configuration. The asymptotic exponents to compare ``b`` with, and the regime
map they come from, are theory: they live in :mod:`skattn.theory.powerlaw.regimes` and are
re-exported here (:data:`REGIMES`, :func:`excess_risk_exponent`, :func:`scaling_regime`,
:func:`phase_diagram`). The estimator that follows the ``λ ∝ √n`` path of those laws is
:class:`skattn.estimators.ScaledLambdaRegressor`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._validation import check_choice, check_finite_array, check_scalar_range
from .theory.powerlaw import (
    REGIMES,
    excess_risk_exponent,
    irreducible_error,
    phase_diagram,
    scaling_regime,
)
from ._warnings import warn

__all__ = [
    "REGIMES",
    "excess_risk_exponent",
    "scaling_regime",
    "phase_diagram",
    "irreducible_error",
    "PowerLawFit",
    "fit_power_law",
]


@dataclass
class PowerLawFit:
    """Result of :func:`fit_power_law`: ``err − e0 ≈ prefactor · n^exponent``.

    Attributes
    ----------
    exponent : float
        The fitted slope b in log–log coordinates.
    prefactor : float
        ``exp(intercept)``.
    stderr : float
        Standard error of the slope (least squares).
    ci : tuple of float
        Confidence interval of the exponent at level ``confidence``.
    confidence : float
    method : str
        ``"t"`` or ``"bootstrap"``.
    n_points : int
    r2 : float
        Coefficient of determination of the log–log fit.
    residuals : ndarray
        ``log(err − e0) − fitted``.
    """

    exponent: float
    prefactor: float
    stderr: float
    ci: tuple
    confidence: float
    method: str
    n_points: int
    r2: float
    residuals: np.ndarray

    def predict(self, n):
        """``prefactor · n^exponent`` (the fitted ``err − e0``)."""
        return self.prefactor * np.asarray(n, dtype=float) ** self.exponent

    def contains(self, value):
        """Whether ``value`` lies in the confidence interval."""
        return bool(self.ci[0] <= value <= self.ci[1])


def fit_power_law(n, err, e0=0.0, *, confidence=0.95, method="t", n_bootstrap=2000,
                  random_state=None):
    """Fit ``err − e0 = C · n^b`` by least squares in log–log coordinates.

    Parameters
    ----------
    n : array-like of shape (k,)
        Sample sizes (> 0), k ≥ 3.
    err : array-like of shape (k,) or (k, r)
        Errors; with r columns (repetitions, e.g. the ``test_scores`` of sklearn's
        ``learning_curve`` negated), every finite entry is one observation.
    e0 : float, default=0.0
        Irreducible error subtracted before the fit (``err − e0`` must be > 0), e.g. from
        :func:`irreducible_error` (``K Δ`` for linear attention with label noise Δ).
    confidence : float in (0, 1), default=0.95
        Level of the interval on the exponent.
    method : {"t", "bootstrap"}, default="t"
        ``"t"``: Student-t interval ``b ± t_{k−2} · stderr`` (ordinary least squares,
        scipy.stats); ``"bootstrap"``: percentile interval of the slope over
        ``n_bootstrap`` resamplings of the points (pairs bootstrap,
        :func:`scipy.stats.bootstrap` on the point indices; resamples whose points all
        share one n, which have no slope, are left out).
    n_bootstrap : int, default=2000
    random_state : int, Generator or None
        Seed of the bootstrap.

    Returns
    -------
    PowerLawFit

    Warns
    -----
    RuntimeWarning
        When ``log(err − e0)`` is significantly curved in ``log n`` (a quadratic term with
        p < 0.001 that moves the local slope by more than 0.1 across the range): a power
        law is then a poor model, most often because e0 is off — too low when the curve
        flattens (a floor is left in ``err − e0``), too high when it steepens — or
        because the points straddle two regimes.

    Raises
    ------
    ValueError
        When ``err − e0 ≤ 0`` at a point (``e0 ≥ min(err)``: e0 is too high).

    Examples
    --------
    >>> import numpy as np
    >>> from skattn.scaling import fit_power_law
    >>> n = np.array([100., 200., 400., 800.])
    >>> fit = fit_power_law(n, 0.5 + 3 * n ** -0.6, e0=0.5)
    >>> round(fit.exponent, 6)
    -0.6
    """
    n = check_finite_array(n, "n", ndim=1)
    try:
        err = np.asarray(err, dtype=float)  # NaN entries (failed fits) are skipped
    except (TypeError, ValueError) as exc:
        raise TypeError(f"err must be an array of real numbers: {exc}") from exc
    if np.any(np.isinf(err)):
        raise ValueError("err contains infinite values.")
    if err.ndim not in (1, 2):
        raise ValueError(f"err must have 1 or 2 dimensions, got shape {err.shape}.")
    if err.shape[0] != n.size:
        raise ValueError(f"err must have one row per n: n has {n.size} values, err has shape "
                         f"{err.shape}.")
    e0 = check_scalar_range(e0, "e0")
    confidence = check_scalar_range(confidence, "confidence", low=0, high=1,
                                    low_inclusive=False, high_inclusive=False)
    check_choice(method, "method", ("t", "bootstrap"))
    if np.any(n <= 0):
        raise ValueError("n must be > 0.")
    x = np.repeat(np.log(n), 1 if err.ndim == 1 else err.shape[1])
    y = err.ravel() - e0
    keep = np.isfinite(y)
    x, y = x[keep], y[keep]
    if np.any(y <= 0):
        raise ValueError(f"err − e0 must be > 0 to fit in log–log coordinates; "
                         f"{int(np.sum(y <= 0))} value(s) are <= 0 (min err − e0 = "
                         f"{float(np.min(y)):.3g}). Check e0.")
    if x.size < 3 or np.unique(x).size < 2:
        raise ValueError(f"fit_power_law needs at least 3 finite points at 2 or more "
                         f"distinct n, got {x.size}.")
    ly = np.log(y)
    lin = stats.linregress(x, ly)
    b, a = float(lin.slope), float(lin.intercept)
    res = ly - (a + b * x)
    ss_tot = float(np.sum((ly - ly.mean()) ** 2))
    r2 = 1.0 - float(np.sum(res ** 2)) / ss_tot if ss_tot > 0 else 1.0
    k = x.size
    stderr = float(lin.stderr)
    if method == "t":
        t = float(stats.t.ppf(0.5 + confidence / 2, df=k - 2))
        ci = (b - t * stderr, b + t * stderr)
    else:
        n_bootstrap = check_scalar_range(n_bootstrap, "n_bootstrap", low=10, integer=True)
        ci = _bootstrap_slope_interval(x, ly, confidence, n_bootstrap, random_state)
    _warn_if_curved(x, ly, b, e0)
    return PowerLawFit(exponent=b, prefactor=float(np.exp(a)), stderr=stderr,
                       ci=(float(ci[0]), float(ci[1])), confidence=confidence, method=method,
                       n_points=k, r2=r2, residuals=res)


def _bootstrap_slope_interval(x, ly, confidence, n_resamples, random_state):
    """Percentile interval of the least-squares slope over pairs resamplings of (x, ly)."""

    def slope(idx, axis=-1):
        xs, ys = x[idx], ly[idx]
        xc = xs - xs.mean(axis=axis, keepdims=True)
        sxx = np.sum(xc * xc, axis=axis)
        sxy = np.sum(xc * ys, axis=axis)
        with np.errstate(invalid="ignore", divide="ignore"):
            # a resample whose points all share one n has no slope: NaN, left out below
            return np.where(np.ptp(xs, axis=axis) > 0, sxy / sxx, np.nan)

    with warnings.catch_warnings():
        # degenerate resamples make scipy's own interval NaN (and warn): handled below
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap((np.arange(x.size),), slope, n_resamples=n_resamples,
                              vectorized=True, method="percentile",
                              confidence_level=confidence,
                              rng=np.random.default_rng(random_state))
    slopes = res.bootstrap_distribution
    if not np.any(np.isfinite(slopes)):
        raise ValueError("every bootstrap resample put all its points at one n; use "
                         "method='t' or more distinct n.")
    # the percentiles scipy takes, over the resamples that have a slope
    lo, hi = np.nanquantile(slopes, [0.5 - confidence / 2, 0.5 + confidence / 2])
    return float(lo), float(hi)


#: a quadratic term in log n must be this significant (p-value) and move the local slope by
#: at least this much across the fitted range before fit_power_law warns about e0
_CURVATURE_P_VALUE = 1e-3
_CURVATURE_SLOPE_DRIFT = 0.1


def _warn_if_curved(x, ly, slope, e0):
    """Warn when ``log(err − e0)`` bends in ``log n`` (the usual sign of a wrong e0)."""
    if np.unique(x).size < 4 or x.size < 5:
        return  # too few points to tell curvature from noise
    xc = x - x.mean()
    design = np.column_stack([np.ones_like(xc), xc, xc * xc])
    coef, _, rank, _ = np.linalg.lstsq(design, ly, rcond=None)
    if rank < 3:
        return
    dof = x.size - 3
    rss = float(np.sum((ly - design @ coef) ** 2))
    cov = rss / dof * np.linalg.inv(design.T @ design)
    curvature = float(coef[2])
    drift = 2 * curvature * float(np.ptp(x))  # change of the local slope over the range
    if abs(drift) <= _CURVATURE_SLOPE_DRIFT:
        return
    se = float(np.sqrt(cov[2, 2]))
    p_value = 2 * stats.t.sf(abs(curvature) / se, dof) if se > 0 else 0.0
    if p_value >= _CURVATURE_P_VALUE:
        return
    if slope >= 0:
        hint = "the error does not decrease"
    elif drift > 0:  # a decreasing curve that flattens: a floor is left in err − e0
        hint = "e0 may be too low"
    else:
        hint = "e0 may be too high"
    warn(
        f"log(err − e0) is curved in log n (local slope changes by {drift:+.2f} across the "
        f"range, p = {p_value:.1g}) with e0 = {e0:g}: {hint}, or the points straddle two "
        "regimes. Check e0 (irreducible_error gives it for a configuration).",
        RuntimeWarning)
