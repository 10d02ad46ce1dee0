"""Fit the predicted law of a learned attention spectrum (docs: Theory §4, Claim 4.1).

State evolution predicts the spectrum of the learned matrix ``S`` in law as

``S ≈ η · ReLU(S0 + δ Z − ε I)``,  Z a GOE matrix (semicircle on [−2, 2]),

so the eigenvalue law of ``S`` is the push-forward of ``μ_δ = μ0 ⊞ SC(δ²)`` by
``x ↦ η (x − ε)₊``: an atom at zero of mass ``μ_δ((−∞, ε])`` (rank collapse), a bulk and
outliers. :func:`fit_spectral_law` goes the other way: from the eigenvalues of a learned
``S`` (or from ``W_Q, W_K``) it estimates ``(η, δ, ε)`` and the parameters of the target
family (κ0 for Wishart, γ for a power law), and reports how well the law fits.

Method
------
1. Eigenvalues below ``t = zero_tol × max eigenvalue`` are the atom; its empirical mass
   ``a`` fixes ε given (μ0, δ, η) through ``μ_δ((−∞, ε + t/η]) = a``, i.e. ε + t/η is the
   ``a``-quantile of μ_δ (when no eigenvalue is zero, ε is a free parameter left of the
   support instead).
2. The remaining parameters (family parameters, δ, η; all positive, optimised in
   log-coordinates) minimise the Cramér–von Mises distance between the empirical CDF of
   the non-zero eigenvalues and the predicted CDF of the non-zero part,
   ``F(s) = (μ_δ((−∞, ε + s/η]) − a) / (1 − a)``, a sum of squares
   ``1/(12n) + Σ_i (F(s_(i)) − (2i − 1)/(2n))²`` minimised by
   :func:`scipy.optimize.least_squares` (bounded, trust-region) from the best point of a
   coarse grid. The CDF is read off the quantile
   function of μ_δ (:meth:`~skattn.theory.ConvolvedLaw.sample_eigenvalues` with
   ``method="quantile"``), so a new (μ0, δ) costs one free convolution.
3. Goodness of fit: :func:`scipy.stats.kstest` of the non-zero eigenvalues against the
   fitted ``F`` (exact ``mass_below``). Eigenvalues of a random matrix are not i.i.d. (they
   repel, fluctuating far less than i.i.d. draws) and the parameters were fitted on the same
   data, so the p-value is a conservative guide, not a calibrated test.

This module is numpy/scipy only (matplotlib is imported inside :meth:`SpectralFit.plot`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from ._validation import check_finite_array, check_random_state_arg, check_scalar_range
from .theory.laws import SpectralLaw, WishartLaw
from .theory.powerlaw import powerlaw_law
from .theory.spectral import free_convolution

__all__ = ["SpectralFit", "fit_spectral_law"]

_N_QUANTILES = 20000
_LOG_BOUNDS = {"kappa0": (np.log(1e-3), np.log(1e3)), "gamma": (np.log(1e-2), np.log(20.0)),
               "delta": (np.log(1e-4), np.log(1e2)), "eta": (np.log(1e-8), np.log(1e8))}
_GRIDS = {"kappa0": (0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.5),
          "gamma": (0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
          "delta": (0.1, 0.25, 0.5, 1.0, 2.0)}


# -- the result -------------------------------------------------------------------------


@dataclass
class SpectralFit:
    """Fitted law ``η · ReLU(S0 + δ Z − ε I)`` of a learned spectrum (docs: Theory §4).

    Attributes
    ----------
    family : str
        ``"wishart"``, ``"powerlaw"`` or ``"fixed"`` (a given target law).
    eta, delta, epsilon : float
        The fitted scale η, noise level δ and threshold ε.
    params : dict of str to float
        Fitted parameters of the target family: ``{"kappa0": κ0}`` (Wishart),
        ``{"gamma": γ}`` (power law), ``{}`` for a fixed law.
    law : SpectralLaw
        The fitted target law μ0.
    atom_mass : float
        Empirical fraction of (numerically) zero eigenvalues (at or below
        ``zero_threshold``); the fitted ε reproduces it as
        ``μ_δ((−∞, ε + zero_threshold/η]) = atom_mass`` (the law puts a little mass of the
        non-zero part in ``(0, zero_threshold]``), unless no eigenvalue is zero.
    predicted_atom_mass : float
        ``μ_δ((−∞, ε])`` at the fitted parameters: the rank-collapse atom itself.
    zero_threshold : float
        Eigenvalues at or below it (``zero_tol × max eigenvalue``) count as zero.
    eigenvalues : ndarray of shape (d,)
        The eigenvalues that were fitted, increasing.
    symmetrized : bool
        True when ``S`` was not symmetric and its symmetric part ``(S + Sᵀ)/2`` was fitted.
    ks_statistic, ks_pvalue : float
        :func:`scipy.stats.kstest` of the non-zero eigenvalues against the fitted CDF of the
        non-zero part (the p-value is conservative: see the module notes).
    cvm_statistic : float
        The minimised Cramér–von Mises statistic ``ω² n``.
    bulk_edge : float
        Right edge ``η (b − ε)`` of the bulk (the support component of μ_δ with the most mass).
    outliers : ndarray
        Eigenvalues above ``bulk_edge``, increasing (at finite d a few bulk eigenvalues
        cross the edge by ``O(d^{-2/3})``).
    n_predicted_outliers : float
        ``d × μ_δ((b, ∞))``: how many eigenvalues the law puts beyond the bulk.
    stderr : dict of str to float or None
        Bootstrap standard deviations of ``eta, delta, epsilon`` and of the family
        parameters (None without bootstrap); ``atom_mass`` always gets its binomial one.
    conf_int : dict of str to tuple or None
        95 % percentile bootstrap intervals (None without bootstrap).
    converged : bool
        Whether the optimiser converged inside the parameter bounds to finite parameters
        whose law describes the spectrum (Kolmogorov–Smirnov statistic at most
        :data:`MAX_FIT_KS`, 0.1); ``message`` says why not.
    message : str
        The optimiser's message, plus notes (symmetrised input, bounds hit).
    n_evaluations : int
        Number of objective evaluations.
    """

    family: str
    eta: float
    delta: float
    epsilon: float
    params: dict
    law: SpectralLaw
    atom_mass: float
    predicted_atom_mass: float
    zero_threshold: float
    eigenvalues: np.ndarray = field(repr=False)
    symmetrized: bool
    ks_statistic: float
    ks_pvalue: float
    cvm_statistic: float
    bulk_edge: float
    outliers: np.ndarray = field(repr=False)
    n_predicted_outliers: float
    stderr: dict | None
    conf_int: dict | None
    converged: bool
    message: str
    n_evaluations: int

    @property
    def n_features(self):
        """Number of eigenvalues d."""
        return int(self.eigenvalues.size)

    @property
    def nonzero_eigenvalues(self):
        """The eigenvalues above ``zero_threshold`` (increasing)."""
        return self.eigenvalues[self.eigenvalues > self.zero_threshold]

    def convolved(self):
        """The fitted ``μ_δ = μ0 ⊞ SC(δ²)`` (a :class:`~skattn.theory.ConvolvedLaw`)."""
        return free_convolution(self.law, self.delta)

    def cdf(self, s):
        """Fitted CDF of an eigenvalue of S, atom included: ``μ_δ((−∞, ε + s/η])`` for s ≥ 0."""
        s = np.asarray(s, dtype=float)
        x = self.epsilon + np.maximum(s, 0.0) / self.eta
        out = np.asarray(self.convolved().mass_below(x), dtype=float)
        return np.where(s < 0, 0.0, out)

    def nonzero_cdf(self, s):
        """Fitted CDF of the eigenvalues above ``zero_threshold``: ``(cdf(s) − a)/(1 − a)``
        with ``a = cdf(zero_threshold)`` (equal to ``atom_mass`` by construction)."""
        a = float(self.cdf(self.zero_threshold))
        return np.clip((self.cdf(s) - a) / (1.0 - a), 0.0, 1.0)

    def spectrum_density(self, s):
        """Density of the non-zero part at ``s > 0`` (its integral is ``1 − atom``)."""
        s = np.asarray(s, dtype=float)
        out = self.convolved().density(self.epsilon + np.maximum(s, 0.0) / self.eta) / self.eta
        return np.where(s > 0, out, 0.0)

    def spectrum_support(self):
        """Intervals of the non-zero part of the fitted law."""
        return [(self.eta * max(a - self.epsilon, 0.0), self.eta * (b - self.epsilon))
                for a, b in self.convolved().intervals if b > self.epsilon]

    def sample_spectrum(self, n_features, random_state=None, method="random"):
        """Eigenvalues of size ``n_features`` drawn from the fitted law (increasing)."""
        x = self.convolved().sample_eigenvalues(n_features, random_state=random_state,
                                                method=method)
        return np.sort(self.eta * np.maximum(x - self.epsilon, 0.0))

    def plot(self, ax=None, bins=40):
        """Histogram of the non-zero eigenvalues against the fitted density, and the atom.

        The histogram is normalised to the non-zero fraction (its area is ``1 − atom``);
        the atom at zero is drawn as a hollow bar of height the empirical zero fraction
        beside a stem of height the fitted atom mass. Outliers are marked on the axis.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Axes to draw in (default: a new figure).
        bins : int, default=40
            Number of histogram bins.

        Returns
        -------
        ax : matplotlib Axes
        """
        import matplotlib.pyplot as plt  # lazy: skattn never needs matplotlib to compute

        bins = check_scalar_range(bins, "bins", low=1, integer=True)
        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.5))
        eig, nz = self.eigenvalues, self.nonzero_eigenvalues
        hi = max(float(eig.max(initial=0.0)), self.bulk_edge, 1e-300) * 1.05
        width = hi / bins
        if nz.size:
            ax.hist(nz, bins=bins, range=(0.0, hi), weights=np.full(nz.size, 1 / (eig.size * width)),
                    color="0.6", alpha=0.6, label="eigenvalues")
        s = np.linspace(hi * 1e-4, hi, 800)
        name = ", ".join(f"{k}={v:.3g}" for k, v in self.params.items())
        label = (f"fit: η={self.eta:.3g}, δ={self.delta:.3g}, ε={self.epsilon:.3g}"
                 + (f", {name}" if name else ""))
        ax.plot(s, self.spectrum_density(s), "-", color="C3", label=label)
        bar = 0.6 * width
        ax.bar(-bar, self.atom_mass, width=bar, fill=False, edgecolor="0.3",
               label=f"zero fraction {self.atom_mass:.3f}")
        ax.vlines(0.0, 0.0, self.predicted_atom_mass, color="C3", lw=2)
        ax.plot([0.0], [self.predicted_atom_mass], "o", color="C3",
                label=f"fitted atom {self.predicted_atom_mass:.3f}")
        if self.outliers.size:
            ax.plot(self.outliers, np.zeros_like(self.outliers), "|", color="C0", ms=12,
                    label=f"{self.outliers.size} outlier(s)")
        ax.set_xlabel("eigenvalue of S")
        ax.set_ylabel("density (atom: mass)")
        ax.set_title(f"KS = {self.ks_statistic:.3f} (p = {self.ks_pvalue:.2g})")
        ax.legend(fontsize="small")
        return ax

    def as_dict(self):
        """The scalar results as a flat dict (for tables and logs)."""
        out = {"family": self.family, "eta": self.eta, "delta": self.delta,
               "epsilon": self.epsilon, **self.params, "atom_mass": self.atom_mass,
               "predicted_atom_mass": self.predicted_atom_mass,
               "ks_statistic": self.ks_statistic, "ks_pvalue": self.ks_pvalue,
               "cvm_statistic": self.cvm_statistic, "bulk_edge": self.bulk_edge,
               "n_outliers": int(self.outliers.size), "symmetrized": self.symmetrized,
               "converged": self.converged}
        return out


# -- input handling -------------------------------------------------------------------


def _eigenvalues_of(S, normalization):
    """``(eigenvalues, symmetrized)`` from a matrix, a pair ``(W_Q, W_K)`` or eigenvalues."""
    if isinstance(S, (tuple, list)) and len(S) == 2 and all(np.ndim(w) == 2 for w in S):
        wq = check_finite_array(S[0], "S[0] (W_Q)", ndim=2)
        wk = check_finite_array(S[1], "S[1] (W_K)", ndim=2)
        if wq.shape != wk.shape:
            raise ValueError("S as a pair (W_Q, W_K) needs two arrays of the same shape "
                             f"(d, p), got {wq.shape} and {wk.shape}.")
        d, p = wq.shape
        if normalization is None:
            normalization = np.sqrt(p * d)
        normalization = check_scalar_range(normalization, "normalization", low=0,
                                           low_inclusive=False)
        S = wq @ wk.T / normalization
    elif normalization is not None:
        raise ValueError("normalization only applies to S given as a pair (W_Q, W_K).")
    arr = check_finite_array(S, "S", ndim=(1, 2))
    if arr.ndim == 1:
        return np.sort(arr), False
    if arr.shape[0] != arr.shape[1]:
        raise ValueError(f"S must be a square (d, d) matrix, a pair (W_Q, W_K) of (d, p) "
                         f"arrays or a 1-D array of eigenvalues, got shape {arr.shape}.")
    scale = max(float(np.max(np.abs(arr), initial=0.0)), 1e-300)
    symmetrized = not np.allclose(arr, arr.T, rtol=0.0, atol=1e-10 * scale)
    return np.linalg.eigvalsh((arr + arr.T) / 2), symmetrized


class _Family:
    """A target family: names of its parameters and ``params ↦ SpectralLaw``."""

    def __init__(self, family, n_features):
        self.n_features = n_features
        if isinstance(family, str):
            if family == "wishart":
                self.name, self.names = "wishart", ("kappa0",)
                self._law = lambda k: WishartLaw(k)
                return
            if family == "powerlaw":
                self.name, self.names = "powerlaw", ("gamma",)
                self._law = lambda g: powerlaw_law(g, n_features)
                return
            raise ValueError("family must be 'wishart', 'powerlaw', a SpectralLaw or a "
                             f"skattn Target, got {family!r}.")
        if isinstance(family, SpectralLaw):
            law = family
        elif hasattr(family, "spectral_law") and hasattr(family, "sample"):
            size = n_features if getattr(family, "finite_size_only", False) else None
            law = family.spectral_law(size)
        else:
            raise ValueError("family must be 'wishart', 'powerlaw', a SpectralLaw or a "
                             f"skattn Target, got {type(family).__name__}.")
        self.name, self.names = "fixed", ()
        self._law = lambda: law

    def law(self, values):
        return self._law(*values)


class _Objective:
    """Cramér–von Mises distance of the non-zero eigenvalues to the law at θ (log-coords)."""

    def __init__(self, family, nz, atom, threshold):
        self.family, self.nz, self.atom = family, np.sort(nz), float(atom)
        self.threshold = float(threshold)
        self.names = family.names + ("delta", "eta") + (("eps_gap",) if atom == 0 else ())
        n = self.nz.size
        self.plot_pos = (2 * np.arange(1, n + 1) - 1) / (2 * n)
        self.u = (np.arange(_N_QUANTILES) + 0.5) / _N_QUANTILES
        self._grid = {}
        self.n_eval = 0

    def quantiles(self, fam_values, delta):
        key = (tuple(np.round(fam_values, 12)), round(delta, 12))
        hit = self._grid.get(key)
        if hit is None:
            mu = free_convolution(self.family.law(fam_values), delta)
            hit = mu.sample_eigenvalues(_N_QUANTILES, method="quantile")
            if len(self._grid) > 64:
                self._grid.clear()
            self._grid[key] = hit
        return hit

    def unpack(self, theta):
        k = len(self.family.names)
        vals = np.exp(np.asarray(theta[:k], dtype=float))
        delta, eta = np.exp(theta[k]), np.exp(theta[k + 1])
        gap = np.exp(theta[k + 2]) if self.atom == 0 else None
        return vals, float(delta), float(eta), gap

    def epsilon(self, Q, gap, eta):
        """ε from the zero fraction, ``μ_δ((−∞, ε + threshold/η]) = atom``, or left of the
        support by ``gap``."""
        if gap is None:
            return float(np.interp(self.atom, self.u, Q)) - self.threshold / eta
        return float(Q[0] - gap)

    def cdf_nonzero(self, Q, eps, eta, s):
        a = float(np.interp(eps + self.threshold / eta, Q, self.u, left=0.0, right=1.0))
        F = np.interp(eps + s / eta, Q, self.u, left=0.0, right=1.0)
        return (F - a) / max(1.0 - a, 1e-300)

    def bounds(self):
        """Bounds of θ (log-coordinates) for :func:`scipy.optimize.least_squares`."""
        lo, hi = zip(*[_LOG_BOUNDS.get(name, (-30.0, 10.0)) for name in self.names])
        return np.array(lo), np.array(hi)

    def residuals(self, theta):
        """``F(s_i) − (2i − 1)/(2n)``: the Cramér–von Mises statistic is
        ``1/(12n) + Σ residuals²``."""
        self.n_eval += 1
        vals, delta, eta, gap = self.unpack(theta)
        try:
            Q = self.quantiles(vals, delta)
        except (ValueError, FloatingPointError, ArithmeticError):
            return np.ones_like(self.plot_pos)
        eps = self.epsilon(Q, gap, eta)
        r = self.cdf_nonzero(Q, eps, eta, self.nz) - self.plot_pos
        return r if np.all(np.isfinite(r)) else np.ones_like(self.plot_pos)

    def __call__(self, theta):
        """The Cramér–von Mises statistic at θ."""
        return 1.0 / (12 * self.nz.size) + float(np.sum(self.residuals(theta) ** 2))

    def start(self):
        """Best point of a coarse grid, with η matched on the median non-zero eigenvalue."""
        med = float(np.median(self.nz))
        best = (np.inf, None)
        fam_grid = [np.array(v) for v in np.array(np.meshgrid(
            *[_GRIDS[n] for n in self.family.names], indexing="ij")).reshape(
            len(self.family.names), -1).T] if self.family.names else [np.zeros(0)]
        for vals in fam_grid:
            for delta in _GRIDS["delta"]:
                try:
                    Q = self.quantiles(vals, delta)
                except (ValueError, FloatingPointError, ArithmeticError):
                    continue
                gap = None if self.atom > 0 else 0.1 * max(Q[-1] - Q[0], 1e-12)
                eps = self.epsilon(Q, gap, 1.0)
                x_med = float(np.interp(self.atom + 0.5 * (1 - self.atom), self.u, Q))
                if not x_med > eps:
                    continue
                theta = np.log(np.concatenate([vals, [delta, med / (x_med - eps)]]
                                              + ([[gap]] if gap is not None else [])))
                val = self(theta)
                if val < best[0]:
                    best = (val, theta)
        if best[1] is None:
            raise ValueError("no starting point of the parameter grid gives a law with "
                             "non-zero mass above the atom; check S and family.")
        return best[1]


#: A fit whose Kolmogorov–Smirnov distance to the eigenvalues exceeds this is reported as
#: not converged (``converged=False``, the reason in ``message``): the docstring's example
#: fits to 0.02; a failed optimum sits at 0.3-1.
MAX_FIT_KS = 0.1


def _fit_once(family, eig, threshold, maxiter):
    """One fit: (θ, objective, optimiser result, atom fraction)."""
    nz = eig[eig > threshold]
    atom = 1.0 - nz.size / eig.size
    obj = _Objective(family, nz, atom, threshold)
    theta0 = obj.start()
    lo, hi = obj.bounds()
    theta0 = np.clip(theta0, lo + 1e-9, hi - 1e-9)
    res = optimize.least_squares(obj.residuals, theta0, bounds=(lo, hi), method="trf",
                                 diff_step=1e-4, xtol=1e-10, ftol=1e-12, gtol=1e-10,
                                 max_nfev=maxiter)
    res.fun_value = obj(res.x)
    return obj, res, atom


def fit_spectral_law(S, family="wishart", *, zero_tol=1e-3, normalization=None,
                     n_bootstrap=0, random_state=None, maxiter=500):
    """Fit ``η · ReLU(S0 + δ Z − ε I)`` (docs: Theory §4) to the spectrum of a learned ``S``.

    Parameters
    ----------
    S : array-like of shape (d, d) or (d,), or a pair ``(W_Q, W_K)`` of (d, p) arrays
        A learned attention matrix (e.g. a fitted model's ``S_``), its eigenvalues, or a
        pair of factors meaning ``S = W_Q W_Kᵀ / normalization``. A non-symmetric ``S`` is
        replaced by its symmetric part ``(S + Sᵀ)/2`` (``result.symmetrized`` is True).
    family : {"wishart", "powerlaw"}, SpectralLaw or Target, default="wishart"
        Target family μ0: ``"wishart"`` fits κ0 (:class:`~skattn.theory.WishartLaw`),
        ``"powerlaw"`` fits γ of the finite-d power-law spectrum with ``d`` atoms
        (:func:`~skattn.theory.powerlaw_law`); a law or a Target
        (:class:`~skattn.data.WishartTarget`, ...) is used as is (only η, δ, ε are fitted).
    zero_tol : float in (0, 1), default=1e-3
        Eigenvalues at or below ``zero_tol × max eigenvalue`` form the atom at zero.
    normalization : float, optional
        Only for a pair: ``S = W_Q W_Kᵀ / normalization``, default ``√(p d)`` (the tied
        model's ``S = W Wᵀ/√(pd)``).
    n_bootstrap : int, default=0
        Number of bootstrap refits (eigenvalues resampled with replacement, atom included)
        for ``stderr`` and ``conf_int``; each costs about one fit. I.i.d. resampling ignores
        the rigidity of random-matrix eigenvalues, so the intervals are conservative.
    random_state : None, int or RandomState, default=None
        Seed of the bootstrap.
    maxiter : int, default=500
        Limit on the evaluations of the residuals by :func:`scipy.optimize.least_squares`.

    Returns
    -------
    SpectralFit
        Fitted parameters, goodness of fit, outliers and a ``plot`` method.

    Raises
    ------
    ValueError
        On a malformed ``S`` (wrong shape, NaN, eigenvalues below ``−zero_tol × max``: the
        law is supported on [0, ∞)), fewer than 5 non-zero eigenvalues, or an unknown
        ``family``.

    Examples
    --------
    >>> import numpy as np
    >>> from skattn.theory import WishartLaw, free_convolution
    >>> mu = free_convolution(WishartLaw(0.5), 0.4)
    >>> eps = mu.upper_quantile(0.6)  # 40 % of the spectrum collapses to zero
    >>> eig = 2.0 * np.maximum(mu.sample_eigenvalues(400, method="quantile") - eps, 0)
    >>> fit = fit_spectral_law(eig, WishartLaw(0.5))  # κ0 known: fit η, δ, ε
    >>> round(fit.eta, 1), round(fit.atom_mass, 2), fit.ks_statistic < 0.02
    (2.0, 0.4, True)
    """
    zero_tol = check_scalar_range(zero_tol, "zero_tol", low=0, high=1, low_inclusive=False,
                                  high_inclusive=False)
    n_bootstrap = check_scalar_range(n_bootstrap, "n_bootstrap", low=0, integer=True)
    maxiter = check_scalar_range(maxiter, "maxiter", low=1, integer=True)
    eig, symmetrized = _eigenvalues_of(S, normalization)
    if eig.size == 0:
        raise ValueError("S must have at least one eigenvalue, got an empty array.")
    top = float(eig.max())
    if not top > 0:
        raise ValueError("S has no positive eigenvalue: the law η·ReLU(S0 + δZ − εI) needs a "
                         "non-zero part to fit.")
    threshold = zero_tol * top
    if eig[0] < -threshold:
        raise ValueError(f"S has an eigenvalue {eig[0]:.3g} below −zero_tol × max eigenvalue "
                         f"= {-threshold:.3g}; the fitted law is supported on [0, ∞) (a "
                         "learned tied S is PSD). Raise zero_tol if these are numerical noise.")
    n_nz = int(np.sum(eig > threshold))
    if n_nz < 5:
        raise ValueError(f"S must have at least 5 eigenvalues above zero_tol × max "
                         f"eigenvalue, got {n_nz}.")
    fam = _Family(family, eig.size)

    # in units of the largest eigenvalue: the law's η·ReLU(S0 + δZ − εI) is linear in η,
    # and the optimiser's bounds on log η (and its start, tolerances) are for η of order 1;
    # a spectrum times 1e5 left them (η/c = 4.4 instead of 2), times 1e200 overflowed
    unit = top
    obj, res, atom = _fit_once(fam, eig / unit, threshold / unit, maxiter)
    vals, delta, eta, gap = obj.unpack(res.x)
    eta = eta * unit
    law = fam.law(vals)
    mu = free_convolution(law, delta)
    if atom > 0:  # μ_δ((−∞, ε + threshold/η]) = atom: eigenvalues in (0, threshold] count
        eps = float(mu.upper_quantile(1.0 - atom)) - threshold / eta
    else:
        eps = float(mu.support()[0] - gap)
    params = {n: float(v) for n, v in zip(fam.names, vals)}
    pred_atom = float(mu.mass_below(eps))

    at_bound = [n for n, t in zip(obj.names, res.x)
                if n in _LOG_BOUNDS and min(abs(t - b) for b in _LOG_BOUNDS[n]) < 1e-3]
    message = str(res.message)
    if at_bound:
        message += f" Parameters at their bounds: {at_bound}."
    if symmetrized:
        message += " S was not symmetric: fitted its symmetric part (S + Sᵀ)/2."
    converged = bool(res.success) and not at_bound
    if not np.all(np.isfinite([eta, delta, eps, *vals])):
        converged = False
        message += " Non-finite fitted parameters."

    # the bulk: the support component of μ_δ with the largest mass
    comps = [(b, mu.mass_below(b) - mu.mass_below(a)) for a, b in mu.intervals]
    b_bulk = max(comps, key=lambda c: c[1])[0] if comps else mu.support()[1]
    bulk_edge = eta * max(b_bulk - eps, 0.0)
    outliers = eig[eig > max(bulk_edge, threshold)]
    n_pred_out = eig.size * (1.0 - mu.mass_below(b_bulk))

    fit = SpectralFit(
        family=fam.name, eta=eta, delta=delta, epsilon=eps, params=params, law=law,
        atom_mass=atom, predicted_atom_mass=pred_atom, zero_threshold=threshold,
        eigenvalues=eig, symmetrized=symmetrized, ks_statistic=np.nan, ks_pvalue=np.nan,
        cvm_statistic=float(res.fun_value), bulk_edge=float(bulk_edge), outliers=outliers,
        n_predicted_outliers=float(n_pred_out), stderr=None, conf_int=None,
        converged=converged, message=message, n_evaluations=int(obj.n_eval))
    ks = stats.kstest(fit.nonzero_eigenvalues, fit.nonzero_cdf)
    fit.ks_statistic, fit.ks_pvalue = float(ks.statistic), float(ks.pvalue)
    if not fit.ks_statistic <= MAX_FIT_KS:  # NaN too: an optimum that does not describe S
        fit.converged = False
        fit.message += (f" Poor fit: Kolmogorov-Smirnov statistic {fit.ks_statistic:.3g} > "
                        f"{MAX_FIT_KS} (the fitted law does not describe the spectrum).")
    fit.stderr = {"atom_mass": float(np.sqrt(atom * (1 - atom) / eig.size))}
    if n_bootstrap:
        _bootstrap(fit, fam, n_bootstrap, random_state, maxiter)
    return fit


def _bootstrap(fit, fam, n_bootstrap, random_state, maxiter):
    """Percentile intervals and standard deviations from refits on resampled spectra."""
    rng = check_random_state_arg(random_state)
    names = ("eta", "delta", "epsilon") + fam.names
    draws = []
    for _ in range(n_bootstrap):
        eig = np.sort(rng.choice(fit.eigenvalues, size=fit.eigenvalues.size, replace=True))
        if np.sum(eig > fit.zero_threshold) < 5:
            continue
        unit = float(eig.max())  # scaled units, as in fit_spectral_law
        obj, res, atom = _fit_once(fam, eig / unit, fit.zero_threshold / unit, maxiter)
        vals, delta, eta, gap = obj.unpack(res.x)
        Q = obj.quantiles(vals, delta)
        draws.append([eta * unit, delta, obj.epsilon(Q, gap, eta), *vals])
    if len(draws) < 2:
        return
    draws = np.asarray(draws)
    fit.stderr.update({n: float(np.std(draws[:, i], ddof=1)) for i, n in enumerate(names)})
    fit.conf_int = {n: (float(np.percentile(draws[:, i], 2.5)),
                        float(np.percentile(draws[:, i], 97.5))) for i, n in enumerate(names)}

