"""Learned spectra across α: atom at zero, bulk and outliers, trained against predicted."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.estimators import TiedAttentionRegressor
from skattn.figures._common import draw_parameters, figure_dir, save, silent
from skattn.plotting import PALETTE, paper_style, plot_spectrum
from skattn.theory import state_evolution_curve

T, KAPPA0, LAM = 2, 0.5, 0.01
ALPHAS = [0.1, 0.25, 0.5, 0.9]
#: Eigenvalues below this fraction of the largest count as zero.
ZERO_TOL = 1e-3


@draw_parameters(quick="d = 30 and a coarser theory grid, instead of d = 100.", several=True)
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the spectra figures; save ``spectra.png`` and ``spectra_atom_mass.png``.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    d = 30 if quick else 100
    target = WishartTarget(KAPPA0)
    t_start = time.perf_counter()

    # theory along α (warm-started), including the four α of the histograms
    alpha_grid = np.unique(np.concatenate([np.geomspace(0.05, 1.2, 5 if quick else 12),
                                           ALPHAS]))
    curve = state_evolution_curve(alpha_grid, reg_lambda=LAM, n_tokens=T, target=target)
    by_alpha = {round(r.alpha, 10): r for r in curve}

    # one trained model per α
    teacher = AttentionIndexedModel(d, n_tokens=T, target=target, random_state=0)
    eigs = {}
    for i, alpha in enumerate(ALPHAS):
        X, y = teacher.sample(int(round(alpha * d * d)), random_state=10 + i, layout="tokens")
        model = TiedAttentionRegressor(reg_lambda=LAM, device="cpu", random_state=i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
        eigs[alpha] = np.linalg.eigvalsh(model.S_)
    log(f"fits done after {time.perf_counter() - t_start:.0f} s")

    paths = []
    with paper_style():
        fig, axes = plt.subplots(1, len(ALPHAS), figsize=(12.0, 3.0), constrained_layout=True)
        for ax, alpha in zip(axes, ALPHAS):
            plot_spectrum(by_alpha[round(alpha, 10)], eigs[alpha], ax=ax, bins=25)
            ax.set_title(f"α = {alpha:g}")
        for ax in axes[1:]:
            ax.set_ylabel("")
        fig.suptitle(f"Learned spectrum of S (d = {d}, λ = {LAM:g}) against state evolution",
                     fontsize=9)
        paths.append(save(fig, "spectra", out_dir, close=close))

        # the atom at zero along α: fraction of zero eigenvalues against the predicted mass
        fig, ax = plt.subplots(figsize=(4.2, 3.0), constrained_layout=True)
        ax.plot([r.alpha for r in curve], [r.atom_mass for r in curve], "-",
                color=PALETTE[1], label="theory")
        ax.plot(ALPHAS, [np.mean(e <= ZERO_TOL * e.max()) for e in eigs.values()], "o",
                color=PALETTE[0], mfc="white", mew=1.2, label=f"trained, d = {d}")
        ax.axhline(1 - KAPPA0, color="0.5", ls=":", lw=1, label=r"target: $1-\kappa_0$")
        ax.set_xscale("log")
        ax.set_xlabel(r"$\alpha = n/d^2$")
        ax.set_ylabel("mass of the atom at 0")
        ax.legend()
        paths.append(save(fig, "spectra_atom_mass", out_dir, close=close))
    log(f"saved {', '.join(paths)}; total {time.perf_counter() - t_start:.0f} s")
    return paths
