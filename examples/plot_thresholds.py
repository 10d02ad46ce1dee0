"""
Interpolation, perfect-recovery and Bayes-optimal thresholds against the target rank
=====================================================================================

How many samples ``n = α d²`` does single-head tied attention need to learn a Wishart
target of rank ``p0 = κ0 d``? Three thresholds answer it (THEORY.md §6–7, closed forms in
:mod:`skattn.theory.thresholds`), each a multiple of ``1/K_eff`` with
``K_eff = (T² + T − 2)/2`` effective constraints per softmax sample:

- ``α_BO = (κ0 − κ0²/2)/K_eff``: below it no estimator recovers S0 (the degrees of freedom
  of a rank-κ0 d symmetric matrix, per constraint);
- ``α_perf = M*(1 − κ0)/(2 K_eff)``: where factored ERM with vanishing weight decay (trace
  minimisation over PSD matrices) recovers S0 from noiseless labels; ``M*`` is the
  statistical dimension of its descent cone;
- ``α_interp``: beyond it the λ → 0⁺ factored model no longer fits noisy labels exactly —
  ``(1 + 2κ0 − κ0²)/(4 K_eff)`` as the noise Δ → 0⁺, smaller for Δ > 0.

Direct (Frobenius) training needs ``1/(2K_eff)`` for both recovery and interpolation, at
every κ0: it cannot use the low rank. All thresholds meet at κ0 = 1.
"""

# %%
# Setup
# -----
import os
import time

import matplotlib

if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")  # headless: draw to files
import matplotlib.pyplot as plt
import numpy as np

from skattn.data import WishartTarget
from skattn.plotting import paper_style, plot_thresholds, save_figure
from skattn.theory.thresholds import (
    bayes_optimal_threshold,
    effective_constraints,
    interpolation_threshold,
    perfect_recovery_threshold,
)

NOISE = 0.5
kappas = np.linspace(0.02, 1.0, 50)
t_start = time.perf_counter()

# %%
# Thresholds for T = 2 and T = 3
# ------------------------------
# The target enters only through its law, the attention only through K_eff.
curves = {}
for T in (2, 3):
    curves[T] = {
        r"$\alpha_{\mathrm{interp}}$ ($\Delta \to 0^+$)":
            [interpolation_threshold(n_tokens=T, target=WishartTarget(k)) for k in kappas],
        rf"$\alpha_{{\mathrm{{interp}}}}$ ($\Delta = {NOISE}$)":
            [interpolation_threshold(n_tokens=T, target=WishartTarget(k), noise=NOISE)
             for k in kappas],
        r"$\alpha_{\mathrm{perf}}$":
            [perfect_recovery_threshold(n_tokens=T, target=WishartTarget(k)) for k in kappas],
        r"$\alpha_{\mathrm{BO}}$":
            [bayes_optimal_threshold(n_tokens=T, target=WishartTarget(k)) for k in kappas],
        "direct (any)": np.full(kappas.size, 1 / (2 * effective_constraints(T))),
    }
print(f"thresholds computed in {time.perf_counter() - t_start:.1f} s")
for k in (0.2, 0.5, 1.0):
    tg = WishartTarget(k)
    print(f"T = 2, κ0 = {k}: α_interp = {interpolation_threshold(n_tokens=2, target=tg):.4f}, "
          f"α_perf = {perfect_recovery_threshold(n_tokens=2, target=tg):.4f}, "
          f"α_BO = {bayes_optimal_threshold(n_tokens=2, target=tg):.4f}")

# %%
# Figure
# ------
with paper_style():
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.3), constrained_layout=True, sharey=False)
    for ax, T in zip(axes, (2, 3)):
        plot_thresholds(kappas, curves[T], ax=ax)
        ax.set_title(f"T = {T} (K_eff = {effective_constraints(T)})")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, None)
    for ax in axes[1:]:
        ax.get_legend().remove()
    fig.suptitle("Tied softmax attention, Wishart target: sample thresholds", fontsize=9)
    print("saved", save_figure(fig, "thresholds"))
print(f"total {time.perf_counter() - t_start:.0f} s")
