"""Interpolation, perfect-recovery and Bayes-optimal thresholds against the target rank.

Theory only (closed forms of :mod:`skattn.theory.thresholds`), for T = 2 and T = 3.
"""

from __future__ import annotations

import time

import numpy as np

from skattn.data import WishartTarget
from ._common import draw_parameters, figure_dir, save, silent
from skattn.plotting import paper_style, plot_thresholds
from skattn.theory.thresholds import (
    bayes_optimal_threshold,
    effective_constraints,
    interpolation_threshold,
    perfect_recovery_threshold,
)

NOISE = 0.5


@draw_parameters(quick="Eight target ranks instead of fifty (a few seconds).")
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the threshold figure and save ``thresholds.png``.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    t_start = time.perf_counter()
    kappas = np.linspace(0.02, 1.0, 8 if quick else 50)
    # The target enters only through its spectral law, the attention only through K_eff.
    curves = {}
    for T in (2, 3):
        curves[T] = {
            r"$\alpha_{\mathrm{interp}}$ ($\Delta \to 0^+$)":
                [interpolation_threshold(n_tokens=T, target=WishartTarget(k)) for k in kappas],
            rf"$\alpha_{{\mathrm{{interp}}}}$ ($\Delta = {NOISE}$)":
                [interpolation_threshold(n_tokens=T, target=WishartTarget(k), noise=NOISE)
                 for k in kappas],
            r"$\alpha_{\mathrm{perf}}$":
                [perfect_recovery_threshold(n_tokens=T, target=WishartTarget(k))
                 for k in kappas],
            r"$\alpha_{\mathrm{BO}}$":
                [bayes_optimal_threshold(n_tokens=T, target=WishartTarget(k)) for k in kappas],
            "direct (any)": np.full(kappas.size, 1 / (2 * effective_constraints(T))),
        }
    log(f"thresholds computed in {time.perf_counter() - t_start:.1f} s")
    for k in (0.2, 0.5, 1.0):
        tg = WishartTarget(k)
        log(f"T = 2, κ0 = {k}: α_interp = {interpolation_threshold(n_tokens=2, target=tg):.4f}, "
            f"α_perf = {perfect_recovery_threshold(n_tokens=2, target=tg):.4f}, "
            f"α_BO = {bayes_optimal_threshold(n_tokens=2, target=tg):.4f}")

    with paper_style():
        fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.3), constrained_layout=True)
        for ax, T in zip(axes, (2, 3)):
            plot_thresholds(kappas, curves[T], ax=ax)
            ax.set_title(f"T = {T} (K_eff = {effective_constraints(T)})")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, None)
        for ax in axes[1:]:
            ax.get_legend().remove()
        fig.suptitle("Tied softmax attention, Wishart target: sample thresholds", fontsize=9)
        paths = [save(fig, "thresholds", out_dir, close=close)]
    log(f"saved {paths[0]}; total {time.perf_counter() - t_start:.0f} s")
    return paths
