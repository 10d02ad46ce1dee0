"""
Scaling laws: learning curves on power-law targets
==================================================

For a target with power-law spectrum ``λ_i ∝ √d · i^(−γ)`` the excess test error of
factored attention decays as a power of n (THEORY.md §8): in ``d ≪ n ≪ d²``

``e_test − e0 ≍ (n/d)^(−1 + 1/(2γ))``,

because the modes are recovered one by one, each new mode needing more samples than the
last (:mod:`skattn.theory.powerlaw`). The same exponent holds all along the path
``λ = c √(n/d²)`` of the weight decay (:mod:`skattn.theory.powerlaw.regimes`); here
``c = 10``, which keeps the whole noise bulk below the threshold.

We measure the learning curve with scikit-learn's
:func:`~sklearn.model_selection.learning_curve` on :class:`~skattn.TiedAttentionRegressor` (linear attention, T = 2, label noise Δ = 0.5,
d = 100, three splits), with :class:`~skattn.estimators.ScaledLambdaRegressor` setting
``reg_lambda = c √n / d`` at every training size. For linear attention the excess risk of a
fitted ``S`` is exactly ``2K ‖S − S0‖²_F / d`` (``K = T(T+1)/2``), which we use as the score.

Lines: the finite-d state evolution at the same d = 100 (solid) and at d = 1000 up to
``n = d²`` (dashed, computed from the theory alone in a few seconds).
"""

# %%
import os
import time

import matplotlib

if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")  # headless: draw to files
import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import ShuffleSplit, learning_curve

from skattn import PowerLawTarget, TiedAttentionRegressor, make_attention_indexed
from skattn.plotting import PALETTE, paper_style, plot_phase_diagram, save_figure
from skattn.estimators import ScaledLambdaRegressor
from skattn.scaling import fit_power_law
from skattn.theory.powerlaw import excess_risk_exponent, phase_diagram, theory_learning_curve

D, T, NOISE, C_LAMBDA = 100, 2, 0.5, 10.0
K = T * (T + 1) // 2
GAMMAS = (0.75, 1.25)
SIZES = np.geomspace(4 * D, 40 * D, 6).round().astype(int)  # n/d from 4 to 40
D_BIG = 1000
t_start = time.perf_counter()

# %%
# Simulations: sklearn's learning_curve with λ = c √n / d
# -------------------------------------------------------
sims = {}
for gamma in GAMMAS:
    X, y, S0 = make_attention_indexed(n_samples=int(1.5 * SIZES[-1]), n_features=D,
                                      n_tokens=T, target=PowerLawTarget(gamma), noise=NOISE,
                                      attention="linear", return_target=True, random_state=1)

    def neg_excess(est, X_, y_, S0=S0):
        """Minus the population excess risk, exact for linear attention."""
        return -2 * K * np.sum((est.estimator_.S_ - S0) ** 2) / D

    est = ScaledLambdaRegressor(
        TiedAttentionRegressor(width=1.0, attention="linear", solver="lbfgs", max_iter=2000,
                               tol=1e-8, device="cpu", dtype="float64", random_state=0),
        scale=C_LAMBDA / D, exponent=0.5)
    cv = ShuffleSplit(n_splits=3, train_size=int(SIZES[-1]), test_size=200, random_state=0)
    n, _, test = learning_curve(est, X, y, train_sizes=SIZES, cv=cv, scoring=neg_excess)
    sims[gamma] = (n, -test)
    print(f"gamma={gamma}: simulations done after {time.perf_counter() - t_start:.0f} s")

# %%
# Theory: the same d, and d = 1000 up to n = d²
# ---------------------------------------------
theory, theory_big = {}, {}
for gamma in GAMMAS:
    common = dict(target=PowerLawTarget(gamma), n_tokens=T, lambda_exponent=0.5,
                  attention="linear", noise=NOISE)
    theory[gamma] = theory_learning_curve(np.geomspace(2 * D, D * D / 2, 25), n_features=D,
                                          reg_lambda=C_LAMBDA / D, **common)
    theory_big[gamma] = theory_learning_curve(np.geomspace(2 * D_BIG, D_BIG ** 2, 25),
                                              n_features=D_BIG, reg_lambda=C_LAMBDA / D_BIG,
                                              **common)
    print(f"gamma={gamma}: theory d={D} in {theory[gamma].wall_time:.1f} s, d={D_BIG} up "
          f"to n=d² (25 points) in {theory_big[gamma].wall_time:.1f} s")

# %%
# Fitted exponents
# ----------------
print(f"{'gamma':>6} {'simulation (95% CI)':>28} {'theory d=100':>13} "
      f"{'theory d=1000':>14} {'asymptotic':>11}")
fits = {}
for gamma in GAMMAS:
    n, exc = sims[gamma]
    sim = fit_power_law(n, exc)
    lc = theory_learning_curve(n, n_features=D, target=PowerLawTarget(gamma), n_tokens=T,
                               reg_lambda=C_LAMBDA / D, lambda_exponent=0.5,
                               attention="linear", noise=NOISE)
    th = fit_power_law(n, lc.excess)
    big = theory_big[gamma]
    w = (big.n_samples >= 4 * D_BIG) & (big.n_samples <= 40 * D_BIG)
    thb = fit_power_law(big.n_samples[w], big.excess[w])
    fits[gamma] = sim
    print(f"{gamma:6.2f} {sim.exponent:8.3f} [{sim.ci[0]:.3f}, {sim.ci[1]:.3f}]"
          f"{'':6} {th.exponent:13.3f} {thb.exponent:14.3f} "
          f"{excess_risk_exponent(gamma):11.3f}")

# %%
# Figure
# ------
with paper_style():
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.3), constrained_layout=True)
    for ax, gamma, color in zip(axes, GAMMAS, PALETTE):
        n, exc = sims[gamma]
        ax.errorbar(n / D, exc.mean(axis=1), yerr=exc.std(axis=1), fmt="o", color=color,
                    mfc="white", mew=1.2, label=f"TiedAttentionRegressor, d = {D}")
        lc, big = theory[gamma], theory_big[gamma]
        ax.plot(lc.n_samples / D, lc.excess, "-", color=color, label=f"theory, d = {D}")
        ax.plot(big.n_samples / D_BIG, big.excess, "--", color="0.3", lw=1.2,
                label=f"theory, d = {D_BIG}")
        fit = fits[gamma]
        nn = np.geomspace(n[0], n[-1], 20)
        ax.plot(nn / D, fit.predict(nn), ":", color="k", lw=1,
                label=f"fit: slope {fit.exponent:.2f} (asymptotic "
                      f"{excess_risk_exponent(gamma):.2f})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("$n/d$")
        ax.set_ylabel(r"$e_{\mathrm{test}} - e_0$")
        ax.set_title(f"γ = {gamma}, λ = {C_LAMBDA:g}·√n/d, linear attention, T = {T}")
        ax.legend(fontsize=7)
    print("saved", save_figure(fig, "learning_curves"))

# %%
# The phase diagram of §8
# -----------------------
# Regimes of :func:`skattn.theory.powerlaw.scaling_regime` in the (n, λ) plane at d = 1000 (for
# linear attention, T = 2, Δ = 0.5; crossovers located to within factors of order one),
# with the path λ = c √n/d of the curves above: parallel to the recovery/regularized
# boundary λ ≈ √(4KΔ n/d²), along which both regimes give the same exponent.
log_n = np.linspace(0.5, 3.5, 300)   # log n / log d
log_lam = np.linspace(-2.0, 2.0, 240)  # log λ / log d
regimes, labels = phase_diagram(D_BIG, 1.25, n=D_BIG ** log_n, reg_lambda=D_BIG ** log_lam,
                                n_tokens=T, noise=NOISE)
with paper_style():
    fig, ax = plt.subplots(figsize=(5.2, 3.8), constrained_layout=True)
    plot_phase_diagram(log_n, log_lam, regimes, labels=labels, ax=ax)
    path = np.log(C_LAMBDA * np.sqrt(D_BIG ** log_n) / D_BIG) / np.log(D_BIG)
    ax.plot(log_n, path, "k--", lw=1, label=rf"$\lambda = {C_LAMBDA:g}\sqrt{{n}}/d$")
    window = (log_n >= 1 + np.log10(4) / 3) & (log_n <= 1 + np.log10(40) / 3)
    ax.plot(log_n[window], path[window], "k-", lw=3, label=r"$n/d \in [4, 40]$")
    ax.set_title(f"γ = 1.25, d = {D_BIG}: exponent of $e_{{test}} - e_0$ in n", fontsize=9)
    ax.legend(loc="lower right", fontsize=7)
    print("saved", save_figure(fig, "scaling_phase_diagram"))
print(f"total {time.perf_counter() - t_start:.0f} s")
