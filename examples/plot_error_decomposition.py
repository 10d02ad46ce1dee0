"""
Where the excess error comes from: overfitting, underfitting, approximation, mismatch
=====================================================================================

On a power-law target the trained ``Ŝ ≈ η ReLU(S0 + δZ − ε)`` has a thresholded noise
bulk, a set of recovered outliers and target modes still hidden in the bulk. Its S-error
splits exactly along these (:func:`~skattn.theory.powerlaw.error_decomposition`):

- ``E_over`` — energy of the learned bulk (spurious directions);
- ``E_under`` — error along the target modes not yet recovered;
- ``E_approx`` — error along the recovered outliers (shrinkage by ε, misalignment);
- ``E_mismatch = (1 − κ)² Q0``, ``κ = m/Q0`` — the part along the target itself,

and ``e_test − e0 ≈ c1 (E_over + E_under + E_approx) + c2 E_mismatch``. For linear
attention the test error is quadratic in ``Ŝ − S0`` (``c1 = 2K``, ``c2 = 0``): the split is
exact. For softmax it is exact along the target and first order across it; ``c2 < 0``
(the softmax error saturates along the scale of the target).

Left and middle: linear attention, T = 2, d = 1000, γ = 1.25, Δ = 0.5, λ = 3√(n/d²), up to
``n = d²`` — as fractions of the excess, and in absolute value (log–log), where
underfitting and approximation decay with the scaling-law exponent while the bulk term
decays like ``d²/n``. Right: T = 2 softmax at d = 200 (λ = 0.3√(n/d²)), with the
approximation against the exact excess. Theory only; runs in well under a minute.
"""

# %%
import os
import time

import matplotlib

if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")  # headless: draw to files
import matplotlib.pyplot as plt
import numpy as np

from skattn import PowerLawTarget
from skattn.plotting import PALETTE, paper_style, plot_error_decomposition, save_figure
from skattn.theory.powerlaw import error_decomposition, theory_learning_curve

GAMMA, NOISE, T = 1.25, 0.5, 2
NAMES = {"over": "overfitting $E_{over}$", "under": "underfitting $E_{under}$",
         "approx": "approximation $E_{approx}$", "mismatch": "mismatch $c_2 E_{mismatch}$"}
t_start = time.perf_counter()


def decompose(d, c, attention, n_max, n_points):
    n = np.geomspace(2 * d, n_max, n_points)
    lc = theory_learning_curve(n, target=PowerLawTarget(GAMMA), n_features=d, n_tokens=T,
                               reg_lambda=c / d, lambda_exponent=0.5, attention=attention,
                               noise=NOISE, n_nodes=2048)
    decs = [error_decomposition(r, n_nodes=4096) for r in lc.results]
    parts = {k: np.array([dec.contributions[k] for dec in decs]) for k in NAMES}
    excess = np.array([dec.excess for dec in decs])
    approx = np.array([dec.approximation for dec in decs])
    print(f"{attention}, d={d}: {n_points} points in {time.perf_counter() - t_start:.1f} s; "
          f"recovered modes {[dec.n_recovered for dec in decs]}; max |residual|/excess "
          f"{np.max(np.abs(excess - approx) / excess):.2e}")
    return n / d, parts, excess, approx


# %%
# Linear attention at d = 1000 and softmax at d = 200
# ---------------------------------------------------
x_lin, parts_lin, exc_lin, _ = decompose(1000, 3.0, "linear", 1000 ** 2, 24)
x_soft, parts_soft, exc_soft, app_soft = decompose(200, 0.3, "softmax", 200 ** 2, 12)

# %%
# Figure
# ------
with paper_style():
    fig, axes = plt.subplots(1, 3, figsize=(12.0, 3.3), constrained_layout=True)
    lin3 = {NAMES[k]: parts_lin[k] / exc_lin for k in ("over", "under", "approx")}
    plot_error_decomposition(x_lin, lin3, ax=axes[0], logx=True, xlabel="$n/d$",
                             ylabel="fraction of $e_{test} - e_0$")
    axes[0].set_ylim(0, 1.02)
    axes[0].set_title("linear attention, d = 1000 (exact split)")

    ax = axes[1]
    for i, k in enumerate(("over", "under", "approx")):
        ax.plot(x_lin, parts_lin[k], "-", color=PALETTE[i], label=NAMES[k])
    ax.plot(x_lin, exc_lin, "k-", lw=2, label="$e_{test} - e_0$")
    ax.plot(x_lin, exc_lin[-1] * (x_lin / x_lin[-1]) ** (-1 + 1 / (2 * GAMMA)), "k:", lw=1,
            label=f"$(n/d)^{{{-1 + 1 / (2 * GAMMA):.1f}}}$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("$n/d$")
    ax.set_ylabel("contribution")
    ax.legend(fontsize=7)
    ax.set_title("linear attention, d = 1000")

    ax = axes[2]
    soft3 = {NAMES[k]: parts_soft[k] for k in ("over", "under", "approx")}
    plot_error_decomposition(x_soft, soft3, ax=ax, logx=True, xlabel="$n/d$",
                             ylabel="contribution to $e_{test} - e_0$")
    ax.plot(x_soft, parts_soft["mismatch"], "-", color=PALETTE[3], label=NAMES["mismatch"])
    ax.plot(x_soft, exc_soft, "k-", lw=2, label="exact $e_{test} - e_0$")
    ax.plot(x_soft, app_soft, "w--", lw=1, label="decomposition (sum)")
    ax.axhline(0, color="0.5", lw=0.6)
    ax.set_ylim(min(0.0, 1.1 * parts_soft["mismatch"].min()), None)
    ax.legend(fontsize=7)
    ax.set_title("softmax, d = 200 (first-order split)")
    print("saved", save_figure(fig, "error_decomposition"))
print(f"total {time.perf_counter() - t_start:.0f} s")
