"""Weighted fits of ``e(d) = e_inf + c · d^(−a)`` (:mod:`skattn.validation`; docs: Theory §10)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from .._validation import MAX_INT, check_scalar_range

__all__ = ["MIN_D", "EXPONENTS", "SEM_FLOOR", "PLAUSIBLE_WEIGHT", "FiniteSizeFit",
           "fit_finite_size", "select_fit", "akaike_weights", "form_robust_verdict",
           "UndecidedVerdictWarning", "undecided_reason", "MIN_DECIDING_SEEDS",
           "MIN_DECIDING_D", "DECIDING_WIDTH"]

#: Smallest d accepted: below it the quadratic forms are far from Gaussian and
#: ``n = α d²`` is a handful of samples.
MIN_D = 8
#: Finite-size exponents fitted: ``d^(−1/2)`` (skewness of the quadratic forms) and
#: ``d^(−1)`` (variance-type corrections).
EXPONENTS = (0.5, 1.0)
#: Floor of the standard errors used as weights, relative to ``|mean|``: a seed spread of
#: exactly zero (e.g. a deterministic solver on identical data) must not get infinite weight.
SEM_FLOOR = 1e-4
#: Akaike weight from which a finite-size form counts as not excluded by the data: its AIC
#: is within ``2 ln 4 ≈ 2.8`` of the best (odds of at most 4 : 1 against it).
PLAUSIBLE_WEIGHT = 0.2


# --------------------------------------------------------------------------------------
# Weighted fits of e(d) = e_inf + c d^(-a)
# --------------------------------------------------------------------------------------

@dataclass
class FiniteSizeFit:
    """Weighted least-squares fit of ``e(d) = e_inf + c · d^(−exponent)``.

    Attributes
    ----------
    exponent : float
    e_inf, c : float
        Extrapolated value and finite-size amplitude.
    e_inf_se, c_se : float
        Their standard errors (scaled up by the reduced χ² when it exceeds 1).
    e_inf_ci, c_ci : tuple of float
        Confidence intervals at ``level``.
    chi2 : float
        Weighted residual ``Σ ((y − fit)/sem)²``.
    dof : int
        Number of d values minus 2.
    aic : float
        ``chi2 + 2 · 2`` (Gaussian errors with known scale).
    level : float
    """

    exponent: float
    e_inf: float
    c: float
    e_inf_se: float
    c_se: float
    e_inf_ci: tuple
    c_ci: tuple
    chi2: float
    dof: int
    aic: float
    level: float

    def predict(self, d):
        """``e_inf + c · d^(−exponent)``."""
        return self.e_inf + self.c * np.asarray(d, dtype=float) ** (-self.exponent)

    @property
    def form(self):
        """``"d^-1/2"`` or ``"d^-1"`` (the exponent as a fraction)."""
        return "d^-1/2" if self.exponent == 0.5 else f"d^-{self.exponent:g}"


def _check_d_values(d, name="d"):
    # Python ints past int64 make an object array, which would be reported as "not
    # integers" (issue #28): name the real fault first
    for v in (d if isinstance(d, (list, tuple)) else ()):
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and int(v) > MAX_INT:
            raise ValueError(f"{name} must hold integers in [{MIN_D}, {MAX_INT}] (2**63 - 1, "
                             f"what numpy and torch can hold), got {int(v)} (too large).")
    try:
        arr = np.asarray(d)
    except Exception as exc:  # pragma: no cover - exotic input
        raise ValueError(f"{name} must be a sequence of integers >= {MIN_D}: {exc}") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of integers >= {MIN_D}, "
                         f"got {d!r}.")
    if not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr))):
            raise ValueError(f"{name} must hold integers >= {MIN_D}, got {d!r}.")
    arr = arr.astype(int)
    if np.any(arr < MIN_D):
        raise ValueError(f"{name} must hold integers >= {MIN_D} (smaller d are too far from "
                         f"the Gaussian limit), got {sorted(set(arr.tolist()))}.")
    if np.unique(arr).size < 3:
        raise ValueError(f"{name} needs at least 3 distinct values for a two-parameter fit "
                         f"with an interval, got {sorted(set(arr.tolist()))}.")
    return arr


def fit_finite_size(d, mean, sem, exponent, *, level=0.95):
    """Fit ``mean(d) ≈ e_inf + c · d^(−exponent)`` by weighted least squares.

    Parameters
    ----------
    d : array-like of int, shape (k,)
        At least 3 distinct values, each ``>= MIN_D``.
    mean, sem : array-like of shape (k,)
        Means over seeds and their standard errors (the weights are ``1/sem²``; a sem below
        ``SEM_FLOOR · |mean|`` is raised to it).
    exponent : float
        > 0, e.g. 0.5 or 1.
    level : float, default=0.95
        Confidence level of the intervals, in (0, 1).

    Returns
    -------
    FiniteSizeFit

    Notes
    -----
    :func:`scipy.optimize.curve_fit` with ``absolute_sigma=True``; when the reduced χ²
    exceeds 1 the covariance is scaled by it (the seed spread under-estimated the scatter,
    common with few seeds), so the interval is never narrower than the data allow. The
    interval uses the normal quantile with absolute errors and Student's t with ``k − 2``
    degrees of freedom once rescaled.
    """
    d = _check_d_values(d)
    mean = np.asarray(mean, dtype=float)
    sem = np.asarray(sem, dtype=float)
    if mean.shape != d.shape or sem.shape != d.shape:
        raise ValueError(f"mean and sem must have the shape of d {d.shape}, got "
                         f"{mean.shape} and {sem.shape}.")
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(sem))):
        raise ValueError("mean and sem must be finite (a NaN mean means a failed run).")
    if np.any(sem < 0):
        raise ValueError("sem must be >= 0.")
    exponent = check_scalar_range(exponent, "exponent", low=0, low_inclusive=False)
    level = check_scalar_range(level, "level", low=0, high=1, low_inclusive=False,
                               high_inclusive=False)
    floor = SEM_FLOOR * max(np.max(np.abs(mean)), 1e-12)
    sigma = np.maximum(sem, floor)
    x = d.astype(float) ** (-exponent)

    def model(x, e_inf, c):
        return e_inf + c * x

    c0 = np.polyfit(x, mean, 1)
    popt, pcov = optimize.curve_fit(model, x, mean, p0=(c0[1], c0[0]), sigma=sigma,
                                    absolute_sigma=True)
    resid = (mean - model(x, *popt)) / sigma
    chi2 = float(resid @ resid)
    dof = d.size - 2
    red = chi2 / dof if dof > 0 else 0.0
    if red > 1:
        pcov = pcov * red
        q = stats.t.ppf(0.5 + level / 2, dof)
    else:
        q = stats.norm.ppf(0.5 + level / 2)
    se = np.sqrt(np.diag(pcov))
    ci = [(float(p - q * s), float(p + q * s)) for p, s in zip(popt, se)]
    return FiniteSizeFit(exponent=exponent, e_inf=float(popt[0]), c=float(popt[1]),
                         e_inf_se=float(se[0]), c_se=float(se[1]), e_inf_ci=ci[0],
                         c_ci=ci[1], chi2=chi2, dof=dof, aic=chi2 + 4.0, level=level)


def select_fit(fits):
    """The fit with the lowest AIC (ties: the first), and its Akaike weight.

    Parameters
    ----------
    fits : sequence of FiniteSizeFit
        Non-empty.

    Returns
    -------
    best : FiniteSizeFit
    weight : float
        ``exp(−AIC_best/2) / Σ exp(−AIC/2)`` in (0, 1]: close to 1/len(fits) means the data
        cannot tell the forms apart.
    """
    fits = list(fits)
    weights = akaike_weights(fits)
    i = int(np.argmax(weights))  # the lowest AIC (ties: the first)
    return fits[i], float(weights[i])


# --------------------------------------------------------------------------------------
# The verdict when the data cannot tell the finite-size forms apart
# --------------------------------------------------------------------------------------

def akaike_weights(fits):
    """Akaike weights ``exp(−ΔAIC/2) / Σ exp(−ΔAIC/2)`` of competing fits.

    Parameters
    ----------
    fits : sequence of FiniteSizeFit
        Non-empty.

    Returns
    -------
    ndarray of shape (len(fits),)
        Non-negative, summing to 1, in the order of ``fits``.
    """
    fits = list(fits)
    if not fits:
        raise ValueError("fits must be a non-empty sequence of FiniteSizeFit.")
    aic = np.array([f.aic for f in fits], dtype=float)
    w = np.exp(-(aic - aic.min()) / 2)
    return w / w.sum()


def _gap_of(fit, target, scale, rtol, n_sigma):
    """(relative gap, z, consistent?) of ``fit.e_inf`` against ``target``."""
    rel = (fit.e_inf - target) / scale
    z = (fit.e_inf - target) / fit.e_inf_se if fit.e_inf_se > 0 else np.inf
    return rel, z, bool(abs(z) <= n_sigma or abs(rel) <= rtol)


def form_robust_verdict(fits, target, scale, *, kind, rtol=0.01, n_sigma=2.0,
                        min_weight=PLAUSIBLE_WEIGHT):
    """A "consistent" verdict carried by a form other than the AIC-best, or None.

    A gap is only demonstrated if every finite-size form the data do not exclude puts
    ``e_inf`` away from ``target``: with a few d the two forms often have Akaike weights
    near 1/2, and their extrapolations differ by more than their intervals (the d^(−1/2)
    fit of a 1/d law overshoots by about ``c · 0.017`` over d = 40–100). This returns a
    verdict when the AIC-best fit is a gap but a fit with Akaike weight ``>= min_weight``
    is consistent; the string names that form and its weight, and gives the AIC-best gap,
    so the reader sees that the agreement depends on the form. Otherwise None: the
    AIC-best verdict stands (it is consistent, or no plausible form is).

    Parameters
    ----------
    fits : sequence of FiniteSizeFit
        The competing fits of one quantity (non-empty; e.g. the values of
        ``FiniteSizeComparison.fits``).
    target : float
        The value ``e_inf`` should reach: the continuum SE, or 0 for a fit of the paired
        gap to the same-instance SE.
    scale : float
        Non-zero; relative gaps are ``(e_inf − target) / scale`` (the SE value).
    kind : str
        The reference's name in the verdict, e.g. ``"continuum SE"``.
    rtol : float, default=0.01
        ``>= 0``; a relative gap within it is consistent whatever its z.
    n_sigma : float, default=2.0
        ``> 0``; ``|z|`` up to it is consistent.
    min_weight : float, default=PLAUSIBLE_WEIGHT
        In (0, 1]: the Akaike weight from which a form counts as plausible.

    Returns
    -------
    str or None
    """
    fits = list(fits)
    weights = akaike_weights(fits)
    target = float(target)
    scale = float(scale)
    if not (np.isfinite(target) and np.isfinite(scale) and scale != 0):
        raise ValueError(f"target and scale must be finite and scale non-zero, got "
                         f"target={target!r}, scale={scale!r}.")
    rtol = check_scalar_range(rtol, "rtol", low=0)
    n_sigma = check_scalar_range(n_sigma, "n_sigma", low=0, low_inclusive=False)
    min_weight = check_scalar_range(min_weight, "min_weight", low=0, high=1,
                                    low_inclusive=False)
    best = int(np.argmax(weights))
    best_rel, best_z, best_ok = _gap_of(fits[best], target, scale, rtol, n_sigma)
    if best_ok:
        return None
    # the plausible alternatives, most probable first
    for i in np.argsort(-weights, kind="stable"):
        if i == best or weights[i] < min_weight:
            continue
        rel, z, ok = _gap_of(fits[i], target, scale, rtol, n_sigma)
        if ok:
            how = f"within {n_sigma:g}σ" if abs(z) <= n_sigma else f"within {rtol:.0%}"
            return (f"consistent {how} under fit {fits[i].form} only (Akaike weight "
                    f"{weights[i]:.2f}; gap {rel:+.1%}, z = {z:+.1f}, {kind}); the "
                    f"AIC-preferred {fits[best].form} gives {best_rel:+.1%} (z = "
                    f"{best_z:+.1f}): the d range cannot tell the forms apart")
    return None


# --------------------------------------------------------------------------------------
# When the data cannot decide
# --------------------------------------------------------------------------------------

#: Fewer seeds at some d than this: the seed standard error, from which the weights, z and
#: the interval follow, has one degree of freedom (with 2 seeds it is off by a factor 2
#: one time in five), so no verdict is drawn.
MIN_DECIDING_SEEDS = 3
#: Fewer distinct d than this: the two-parameter fit keeps one degree of freedom, and its
#: Student-t interval (12.7σ at 95 %) says little.
MIN_DECIDING_D = 4
#: A relative-gap interval within ±this decides whatever the finite-size excess: the grid
#: is to tell a theory error of 10 % or more from a finite-size effect (docs: Validation).
DECIDING_WIDTH = 0.10


class UndecidedVerdictWarning(UserWarning):
    """A finite-size comparison that cannot decide between "consistent" and "gap": too
    few seeds or values of d, or an extrapolation interval wider than the effect it
    should decide (the excess of the simulations at the largest d over the reference)."""


def undecided_reason(verdict, n_seeds, n_d, rel_ci, excess, *, width=DECIDING_WIDTH):
    """Why a finite-size verdict cannot be drawn, or None when it can.

    Parameters
    ----------
    verdict : str
        The verdict the fits give ("consistent ...", "gap of ...").
    n_seeds : int
        The fewest finished seeds at any d.
    n_d : int
        Distinct values of d.
    rel_ci : tuple of float
        The interval of the relative gap of the extrapolation to the reference.
    excess : float
        The relative excess of the simulations at the largest d over the reference: the
        finite-size effect the extrapolation has to tell from a gap.
    width : float, default=DECIDING_WIDTH
        An interval within ±width decides whatever ``excess``.

    Returns
    -------
    str or None
        E.g. ``"2 seeds at some d (a verdict needs >= 3)"``; None when the verdict stands.
        "consistent" needs every rule; a gap only enough seeds and values of d (its
        interval may be wide: it lies away from zero).
    """
    if n_seeds < MIN_DECIDING_SEEDS:
        return f"{n_seeds} seeds at some d (a verdict needs >= {MIN_DECIDING_SEEDS})"
    if n_d < MIN_DECIDING_D:
        return (f"{n_d} values of d (a verdict needs >= {MIN_DECIDING_D}: the two-parameter "
                f"fit keeps one degree of freedom)")
    if not verdict.startswith("consistent"):
        return None
    lo, hi = rel_ci
    half = (hi - lo) / 2
    if not np.isfinite(half):
        return "no finite interval for the extrapolation"
    scale = max(abs(excess), width) if np.isfinite(excess) else width
    if half > scale:
        return (f"the extrapolation's interval [{lo:+.1%}, {hi:+.1%}] is wider than the "
                f"finite-size effect it should decide ({excess:+.1%} at the largest d)")
    return None
