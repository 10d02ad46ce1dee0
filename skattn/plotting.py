"""Matplotlib figures (nothing else in skattn imports this module).

Every function draws on a given ``ax`` (or a new one) and returns it, so figures compose
into papers' panels. Colours come from the colour-blind-safe Okabe–Ito palette.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PALETTE", "plot_error_curve", "plot_spectrum", "plot_thresholds",
           "plot_learning_curve"]

#: Okabe–Ito colour-blind-safe palette.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442",
           "#000000"]


def _ax(ax):
    if ax is None:
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=(4.5, 3.4), constrained_layout=True)
    return ax


def plot_error_curve(results, *, quantity="test_error", simulations=None, label=None,
                     color=None, ax=None, logy=False):
    """Theory line of a state-evolution curve, with optional simulation error bars.

    Parameters
    ----------
    results : list of StateEvolutionResult
        A curve (e.g. from :func:`skattn.theory.state_evolution_curve`); unconverged points
        are drawn hollow and left out of the line.
    quantity : {"test_error", "train_error", "train_objective"}
    simulations : dict, optional
        ``{"alpha": [...], "mean": [...], "sem": [...]}`` of simulated values.
    label, color : str, optional
    ax : matplotlib Axes, optional
    logy : bool, default=False

    Returns
    -------
    ax : matplotlib Axes
    """
    ax = _ax(ax)
    color = color or PALETTE[0]
    alpha = np.array([r.alpha for r in results])
    val = np.array([getattr(r, quantity) for r in results])
    ok = np.array([r.converged for r in results])
    ax.plot(np.where(ok, alpha, np.nan), np.where(ok, val, np.nan), "-", color=color,
            label=label)
    if np.any(~ok):
        ax.plot(alpha[~ok], val[~ok], "o", mfc="none", color=color, ms=4,
                label="not converged")
    if simulations is not None:
        ax.errorbar(simulations["alpha"], simulations["mean"], yerr=simulations.get("sem"),
                    fmt="o", color=color, ms=4, capsize=2)
    ax.set_xlabel(r"$\alpha = n/d^2$")
    ax.set_ylabel({"test_error": "test error", "train_error": "train error",
                   "train_objective": r"objective $/\,d^2$"}.get(quantity, quantity))
    if logy:
        ax.set_yscale("log")
    return ax


def plot_spectrum(result, eigenvalues=None, *, bins=40, ax=None, color=None):
    """Histogram of learned eigenvalues against the predicted law of the learned ``S``.

    The atom at zero is shown as a bar of its predicted mass beside the empirical fraction
    of (numerically) zero eigenvalues; the non-zero part as a density.

    Parameters
    ----------
    result : StateEvolutionResult
    eigenvalues : array-like, optional
        Eigenvalues of a learned ``S_`` (e.g. from TiedAttentionRegressor).
    bins : int, default=40
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    ax = _ax(ax)
    color = color or PALETTE[1]
    atom = result.atom_mass
    hi = max(b for _, b in result.spectrum_support()) if result.spectrum_support() else 1.0
    if eigenvalues is not None:
        eig = np.asarray(eigenvalues, dtype=float)
        hi = max(hi, float(eig.max()))
        cut = 1e-3 * max(hi, 1e-12)
        nz = eig[eig > cut]
        if nz.size:
            weights = np.full(nz.size, 1.0 / eig.size)
            ax.hist(nz, bins=bins, weights=weights / ((hi * 1.05) / bins), color=PALETTE[5],
                    alpha=0.6, range=(0, hi * 1.05), label="trained $S$")
        ax.bar([0.0], [np.mean(eig <= cut)], width=hi / 60, color=PALETTE[5], alpha=0.6)
    s = np.linspace(hi * 1e-4, hi * 1.05, 600)
    ax.plot(s, result.spectrum_density(s), "-", color=color, label="theory")
    if atom > 0:
        ax.plot([0.0], [atom], "v", color=color, ms=7, label=f"atom at 0: {atom:.2f}")
    ax.set_xlabel("eigenvalue of $S$")
    ax.set_ylabel("density (atom: mass)")
    ax.legend(frameon=False, fontsize=8)
    return ax


def plot_thresholds(kappas, curves, *, ax=None):
    """Threshold curves against the target rank ratio κ0.

    Parameters
    ----------
    kappas : array-like
    curves : dict of label → array-like
        e.g. ``{"α_interp (T=2)": [...], "α_BO (T=2)": [...]}``.
    """
    ax = _ax(ax)
    for i, (label, vals) in enumerate(curves.items()):
        ax.plot(kappas, vals, "-", color=PALETTE[i % len(PALETTE)], label=label)
    ax.set_xlabel(r"$\kappa_0 = p_0/d$")
    ax.set_ylabel(r"$\alpha$")
    ax.legend(frameon=False, fontsize=8)
    return ax


def plot_learning_curve(n, err, *, fit=None, theory=None, ax=None, label=None, color=None):
    """Excess risk vs n on log–log axes, with an optional power-law fit ``(C, exponent)``."""
    ax = _ax(ax)
    color = color or PALETTE[0]
    ax.loglog(n, err, "o", color=color, label=label)
    if theory is not None:
        ax.loglog(theory[0], theory[1], "-", color=color, alpha=0.7)
    if fit is not None:
        c, expo = fit
        nn = np.geomspace(np.min(n), np.max(n), 50)
        ax.loglog(nn, c * nn ** expo, "--", color=color, label=f"slope {expo:.2f}")
    ax.set_xlabel("$n$")
    ax.set_ylabel(r"$e_{test} - e_0$")
    ax.legend(frameon=False, fontsize=8)
    return ax
