"""Factored against direct attention, each at its optimal weight decay, and the Bayes limit."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.estimators import DirectAttentionRegressor, TiedAttentionRegressor
from ._common import draw_parameters, figure_dir, save, silent
from skattn.metrics import attention_error, attention_error_scorer
from skattn.plotting import MARKERS, PALETTE, paper_style
from skattn.theory.bayes import bayes_optimal
from skattn.theory.optimal import optimal_reg_lambda
from skattn.theory.thresholds import bayes_optimal_threshold, perfect_recovery_threshold

T, KAPPA0 = 2, 0.2
LAMBDA_GRID = [1e-3, 1e-2, 1e-1]


@draw_parameters(quick="d = 30 and fewer α, instead of d = 80.")
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the factored-against-direct figure and save ``factored_vs_direct.png``.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    d = 30 if quick else 80
    alpha_sim = [0.1, 0.2] if quick else [0.05, 0.1, 0.2]
    alpha_theory = sorted(set(([0.05] if quick else [0.02, 0.035, 0.075, 0.125, 0.15])
                              + alpha_sim))
    target = WishartTarget(KAPPA0)
    t_start = time.perf_counter()

    # theory: state evolution at the optimal λ, and the Bayes-optimal error
    theory = {"factored": [], "direct": []}
    for par in theory:
        prev = None
        for alpha in alpha_theory:
            lam, res = optimal_reg_lambda(alpha, parametrization=par, n_tokens=T,
                                          target=target,
                                          bounds=(LAMBDA_GRID[0], LAMBDA_GRID[-1]), n_grid=3,
                                          xatol=0.05, n_nodes=4096, init=prev)
            theory[par].append((lam, res.test_error))
            prev = res
    log(f"optimal-λ state evolution done after {time.perf_counter() - t_start:.0f} s")
    alpha_bo_grid = np.linspace(0.01, 0.2, 8 if quick else 25)
    bayes = [bayes_optimal(a, n_tokens=T, target=target, n_nodes=2048) for a in alpha_bo_grid]
    alpha_perf = perfect_recovery_threshold(n_tokens=T, target=target)
    alpha_bo = bayes_optimal_threshold(n_tokens=T, target=target)

    # simulations: GridSearchCV over reg_lambda, refit, fresh test set
    teacher = AttentionIndexedModel(d, n_tokens=T, target=target, random_state=0)
    X_test, y_test = teacher.sample(4000, random_state=1, layout="tokens")
    sims = {"factored": [], "direct": []}
    for i, alpha in enumerate(alpha_sim):
        X, y = teacher.sample(int(round(alpha * d * d)), random_state=10 + i, layout="tokens")
        for par, Est in (("factored", TiedAttentionRegressor),
                         ("direct", DirectAttentionRegressor)):
            search = GridSearchCV(Est(device="cpu", tol=1e-5, random_state=0),
                                  {"reg_lambda": LAMBDA_GRID},
                                  cv=KFold(3, shuffle=True, random_state=0),
                                  scoring=attention_error_scorer, n_jobs=2)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                search.fit(X, y)
            e_test = attention_error(y_test, search.best_estimator_.predict(X_test))
            sims[par].append(dict(alpha=alpha, reg_lambda=search.best_params_["reg_lambda"],
                                  cv_error=-search.best_score_, test_error=e_test))
    log(f"simulations done after {time.perf_counter() - t_start:.0f} s")
    log(f"{'model':9s} {'α':>5s} {'λ_CV':>7s} {'CV error':>9s} {'test':>8s} "
        f"{'λ*':>7s} {'theory':>8s}")
    for par in ("factored", "direct"):
        for s in sims[par]:
            lam_th, e_th = theory[par][alpha_theory.index(s["alpha"])]
            log(f"{par:9s} {s['alpha']:5.2f} {s['reg_lambda']:7.0e} {s['cv_error']:9.4f} "
                f"{s['test_error']:8.4f} {lam_th:7.1e} {e_th:8.4f}")

    def positive(v):  # a log axis cannot show zeros
        return np.where(np.asarray(v) > 0, v, np.nan)

    with paper_style():
        fig, ax = plt.subplots(figsize=(4.8, 3.5), constrained_layout=True)
        for i, (par, label) in enumerate((("factored", "factored (tied)"),
                                          ("direct", "direct (Frobenius)"))):
            err = np.array([e for _, e in theory[par]])
            ax.plot(alpha_theory, err, "-", color=PALETTE[i],
                    label=f"{label}, optimal λ ≥ {LAMBDA_GRID[0]:g}")
            ax.plot(alpha_sim, [s["test_error"] for s in sims[par]], MARKERS[i],
                    color=PALETTE[i], ls="none", label=f"{label}, GridSearchCV, d = {d}")
        ax.plot(alpha_bo_grid, positive([b.test_error for b in bayes]), "-", color=PALETTE[2],
                label="Bayes-optimal")
        ax.plot(alpha_bo_grid, positive([b.predictor_error for b in bayes]), ":",
                color=PALETTE[2])
        ax.axvline(alpha_perf, color=PALETTE[0], ls="--", lw=0.8)
        ax.axvline(alpha_bo, color=PALETTE[2], ls="--", lw=0.8)
        for x, name, color in ((alpha_bo, r"$\alpha_{\mathrm{BO}}$", PALETTE[2]),
                               (alpha_perf, r"$\alpha_{\mathrm{perf}}$", PALETTE[0])):
            ax.text(x * 1.02, 0.97, name, color=color, fontsize=8, va="top",
                    transform=ax.get_xaxis_transform())
        ax.set_yscale("log")
        ax.set_ylim(1e-4, 0.6)
        ax.set_xlabel(r"$\alpha = n/d^2$")
        ax.set_ylabel("test error")
        ax.set_title(f"T = {T}, Wishart κ0 = {KAPPA0}, noiseless", fontsize=9)
        ax.legend(fontsize=7, loc="lower left")
        paths = [save(fig, "factored_vs_direct", out_dir, close=close)]
    log(f"saved {paths[0]}; total {time.perf_counter() - t_start:.0f} s")
    return paths
