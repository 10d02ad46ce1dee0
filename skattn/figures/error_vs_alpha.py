"""Test and training error against α = n/d²: state evolution against Adam, for several λ."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.estimators import TiedAttentionRegressor
from ._common import draw_parameters, figure_dir, save, silent
from skattn.metrics import attention_error
from skattn.plotting import MARKERS, PALETTE, paper_style, plot_error_curve
from skattn.theory import state_evolution_curve

T, KAPPA0 = 2, 0.5


@draw_parameters(quick="d = 24, two λ and two α, instead of d = 50, three λ and four α.")
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the error-against-α figure and save ``error_vs_alpha.png``.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    if quick:
        d, lambdas, alpha_sim, seeds, n_theory = 24, [0.01, 0.1], [0.2, 0.6], [0, 1], 5
    else:
        d, lambdas, alpha_sim, seeds, n_theory = 50, [0.001, 0.01, 0.1], [0.1, 0.2, 0.35, 0.6], \
            [0, 1], 12
    target = WishartTarget(KAPPA0)
    t_start = time.perf_counter()

    # theory: one warm-started state-evolution curve per λ
    alphas = np.unique(np.concatenate([np.geomspace(0.05, 1.0, n_theory), alpha_sim]))
    curves = {lam: state_evolution_curve(alphas, reg_lambda=lam, n_tokens=T, target=target)
              for lam in lambdas}
    log(f"state evolution: {len(lambdas)} × {alphas.size} points in "
        f"{time.perf_counter() - t_start:.0f} s")

    # simulations: Adam on the sum objective Σ_μ ℓ_μ + λ‖W‖²_F
    sims = {lam: {"test_error": [], "train_error": []} for lam in lambdas}
    for lam in lambdas:
        for alpha in alpha_sim:
            test, train = [], []
            for seed in seeds:
                teacher = AttentionIndexedModel(d, n_tokens=T, target=target, random_state=seed)
                X, y = teacher.sample(int(round(alpha * d * d)), random_state=100 + seed,
                                      layout="tokens")
                X_test, y_test = teacher.sample(2000, random_state=200 + seed, layout="tokens")
                model = TiedAttentionRegressor(reg_lambda=lam, solver="adam", device="cpu",
                                               random_state=seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    model.fit(X, y)
                test.append(attention_error(y_test, model.predict(X_test)))
                train.append(model.train_error_)
            for key, vals in (("test_error", test), ("train_error", train)):
                sims[lam][key].append((np.mean(vals), np.std(vals, ddof=1) / np.sqrt(len(vals))))
    log(f"simulations done after {time.perf_counter() - t_start:.0f} s")

    alpha_bo = (KAPPA0 - KAPPA0 ** 2 / 2) / ((T * T + T - 2) / 2)
    with paper_style():
        fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.3), constrained_layout=True)
        for i, lam in enumerate(lambdas):
            for ax, quantity in zip(axes, ("test_error", "train_error")):
                mean, sem = np.array(sims[lam][quantity]).T
                plot_error_curve(curves[lam], quantity=quantity, ax=ax, color=PALETTE[i],
                                 marker=MARKERS[i], logx=True, logy=True,
                                 label=f"λ = {lam:g}",
                                 simulations={"alpha": alpha_sim, "mean": mean, "sem": sem})
        for ax in axes:
            ax.axvline(alpha_bo, color="0.4", ls=":", lw=1)
        axes[0].text(alpha_bo * 1.05, 0.03, r"$\alpha_{\mathrm{BO}}$", color="0.3",
                     transform=axes[0].get_xaxis_transform(), fontsize=8)
        axes[0].set_title("(a) test error")
        axes[1].set_title("(b) training error")
        axes[1].legend(loc="lower left", title=f"lines: theory; points: Adam, d = {d}",
                       title_fontsize=7)
        fig.suptitle(f"Tied softmax attention, T = {T}, Wishart κ0 = {KAPPA0}", fontsize=9)
        paths = [save(fig, "error_vs_alpha", out_dir, close=close)]
    log(f"saved {paths[0]}; total {time.perf_counter() - t_start:.0f} s")
    return paths
