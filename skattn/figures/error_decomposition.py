"""Split of the excess error on a power-law target: overfitting, underfitting, approximation,
mismatch (theory only, :func:`skattn.theory.powerlaw.error_decomposition`)."""

from __future__ import annotations

import time

import numpy as np

from skattn.data import PowerLawTarget
from ._common import draw_parameters, figure_dir, save, silent
from skattn.plotting import PALETTE, paper_style, plot_error_decomposition
from skattn.theory.powerlaw import error_decomposition, theory_learning_curve

GAMMA, NOISE, T = 1.25, 0.5, 2
NAMES = {"over": "overfitting $E_{over}$", "under": "underfitting $E_{under}$",
         "approx": "approximation $E_{approx}$", "mismatch": "mismatch $c_2 E_{mismatch}$"}


def _decompose(d, c, attention, n_max, n_points, log, t_start):
    n = np.geomspace(2 * d, n_max, n_points)
    # the mode-by-mode split reads every mode off the Gaussian bulk: correction="none" (for
    # softmax outside the Gaussian channel's domain on this target, docs: Spiky targets)
    lc = theory_learning_curve(n, target=PowerLawTarget(GAMMA), n_features=d, n_tokens=T,
                               reg_lambda=c / d, lambda_exponent=0.5, attention=attention,
                               noise=NOISE, n_nodes=2048, correction="none")
    decs = [error_decomposition(r, n_nodes=4096) for r in lc.results]
    parts = {k: np.array([dec.contributions[k] for dec in decs]) for k in NAMES}
    excess = np.array([dec.excess for dec in decs])
    approx = np.array([dec.approximation for dec in decs])
    log(f"{attention}, d={d}: {n_points} points in {time.perf_counter() - t_start:.1f} s; "
        f"recovered modes {[dec.n_recovered for dec in decs]}; max |residual|/excess "
        f"{np.max(np.abs(excess - approx) / excess):.2e}")
    return n / d, parts, excess, approx


@draw_parameters(quick="d = 200 and 60 with fewer points, instead of d = 1000 and 200.")
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the error-decomposition figure and save ``error_decomposition.png``.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    t_start = time.perf_counter()
    d_lin, d_soft = (200, 60) if quick else (1000, 200)
    x_lin, parts_lin, exc_lin, _ = _decompose(d_lin, 3.0, "linear", d_lin ** 2,
                                              8 if quick else 24, log, t_start)
    x_soft, parts_soft, exc_soft, app_soft = _decompose(d_soft, 0.3, "softmax", d_soft ** 2,
                                                        5 if quick else 12, log, t_start)

    with paper_style():
        fig, axes = plt.subplots(1, 3, figsize=(12.0, 3.3), constrained_layout=True)
        lin3 = {NAMES[k]: parts_lin[k] / exc_lin for k in ("over", "under", "approx")}
        plot_error_decomposition(x_lin, lin3, ax=axes[0], logx=True, xlabel="$n/d$",
                                 ylabel="fraction of $e_{test} - e_0$")
        axes[0].set_ylim(0, 1.02)
        axes[0].set_title(f"linear attention, d = {d_lin} (exact split)")

        ax = axes[1]
        for i, k in enumerate(("over", "under", "approx")):
            ax.plot(x_lin, parts_lin[k], "-", color=PALETTE[i], label=NAMES[k])
        ax.plot(x_lin, exc_lin, "k-", lw=2, label="$e_{test} - e_0$")
        slope = -1 + 1 / (2 * GAMMA)
        ax.plot(x_lin, exc_lin[-1] * (x_lin / x_lin[-1]) ** slope, "k:", lw=1,
                label=f"$(n/d)^{{{slope:.1f}}}$")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("$n/d$")
        ax.set_ylabel("contribution")
        ax.legend(fontsize=7)
        ax.set_title(f"linear attention, d = {d_lin}")

        ax = axes[2]
        soft3 = {NAMES[k]: parts_soft[k] for k in ("over", "under", "approx")}
        plot_error_decomposition(x_soft, soft3, ax=ax, logx=True, xlabel="$n/d$",
                                 ylabel="contribution to $e_{test} - e_0$")
        ax.plot(x_soft, parts_soft["mismatch"], "-", color=PALETTE[3],
                label=NAMES["mismatch"])
        ax.plot(x_soft, exc_soft, "k-", lw=2, label="exact $e_{test} - e_0$")
        ax.plot(x_soft, app_soft, "w--", lw=1, label="decomposition (sum)")
        ax.axhline(0, color="0.5", lw=0.6)
        ax.set_ylim(min(0.0, 1.1 * parts_soft["mismatch"].min()), None)
        ax.legend(fontsize=7)
        ax.set_title(f"softmax, d = {d_soft} (first-order split)")
        paths = [save(fig, "error_decomposition", out_dir, close=close)]
    log(f"saved {paths[0]}; total {time.perf_counter() - t_start:.0f} s")
    return paths
