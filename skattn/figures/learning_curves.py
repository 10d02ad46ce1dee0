"""Scaling laws on power-law targets: sklearn learning curves against the finite-d theory,
and the (n, λ) phase diagram of the excess-risk exponent."""

from __future__ import annotations

import time

import numpy as np
from sklearn.model_selection import ShuffleSplit, learning_curve

from skattn.data import PowerLawTarget, make_attention_indexed
from skattn.estimators import ScaledLambdaRegressor, TiedAttentionRegressor
from skattn.figures._common import draw_parameters, figure_dir, save, silent
from skattn.plotting import PALETTE, paper_style, plot_phase_diagram
from skattn.scaling import excess_risk_exponent, fit_power_law, phase_diagram
from skattn.theory.powerlaw import theory_learning_curve

T, NOISE, C_LAMBDA = 2, 0.5, 10.0
K = T * (T + 1) // 2
GAMMAS = (0.75, 1.25)


def simulated_sizes(d):
    """Training sizes of the simulated learning curves: n/d from 4 to 40."""
    return np.geomspace(4 * d, 40 * d, 6).round().astype(int)


def theory_sizes(d, sizes, n_points):
    """Sample sizes of the theory line at the simulations' d: from 2d to the larger of
    d²/2 and the largest simulated size, so that the line covers every simulated point
    (at d = 40 the simulations reach n/d = 40, i.e. n = d², beyond d²/2)."""
    return np.geomspace(2 * d, max(d * d / 2, float(np.max(sizes))), n_points)


@draw_parameters(quick="d = 40 (theory also at d = 200), instead of d = 100 (theory also at "
                       "d = 1000).", several=True)
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the learning curves and the phase diagram; save ``learning_curves.png`` and
    ``scaling_phase_diagram.png``.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    d, d_big, n_theory = (40, 200, 10) if quick else (100, 1000, 25)
    sizes = simulated_sizes(d)  # n/d from 4 to 40
    t_start = time.perf_counter()

    # simulations: sklearn's learning_curve with λ = c √n / d
    sims = {}
    for gamma in GAMMAS:
        X, y, S0 = make_attention_indexed(n_samples=int(1.5 * sizes[-1]), n_features=d,
                                          n_tokens=T, target=PowerLawTarget(gamma),
                                          noise=NOISE, attention="linear",
                                          return_target=True, random_state=1, layout="tokens")

        def neg_excess(est, X_, y_, S0=S0):
            """Minus the population excess risk, exact for linear attention."""
            return -2 * K * np.sum((est.estimator_.S_ - S0) ** 2) / d

        est = ScaledLambdaRegressor(
            TiedAttentionRegressor(width=1.0, attention="linear", solver="lbfgs",
                                   max_iter=2000, tol=1e-8, device="cpu", dtype="float64",
                                   random_state=0),
            scale=C_LAMBDA / d, exponent=0.5)
        cv = ShuffleSplit(n_splits=3, train_size=int(sizes[-1]), test_size=200, random_state=0)
        n, _, test = learning_curve(est, X, y, train_sizes=sizes, cv=cv, scoring=neg_excess)
        sims[gamma] = (n, -test)
        log(f"gamma={gamma}: simulations done after {time.perf_counter() - t_start:.0f} s")

    # theory: the same d, and a larger d up to n = d²
    theory, theory_big = {}, {}
    for gamma in GAMMAS:
        common = dict(target=PowerLawTarget(gamma), n_tokens=T, lambda_exponent=0.5,
                      attention="linear", noise=NOISE)
        theory[gamma] = theory_learning_curve(theory_sizes(d, sizes, n_theory),
                                              n_features=d, reg_lambda=C_LAMBDA / d, **common)
        theory_big[gamma] = theory_learning_curve(np.geomspace(2 * d_big, d_big ** 2, n_theory),
                                                  n_features=d_big,
                                                  reg_lambda=C_LAMBDA / d_big, **common)
        log(f"gamma={gamma}: theory d={d} in {theory[gamma].wall_time:.1f} s, d={d_big} up "
            f"to n=d² ({n_theory} points) in {theory_big[gamma].wall_time:.1f} s")

    # fitted exponents
    log(f"{'gamma':>6} {'simulation (95% CI)':>28} {'theory d=' + str(d):>13} "
        f"{'theory d=' + str(d_big):>14} {'asymptotic':>11}")
    fits = {}
    for gamma in GAMMAS:
        n, exc = sims[gamma]
        sim = fit_power_law(n, exc)
        lc = theory_learning_curve(n, n_features=d, target=PowerLawTarget(gamma), n_tokens=T,
                                   reg_lambda=C_LAMBDA / d, lambda_exponent=0.5,
                                   attention="linear", noise=NOISE)
        th = fit_power_law(n, lc.excess)
        big = theory_big[gamma]
        w = (big.n_samples >= 4 * d_big) & (big.n_samples <= 40 * d_big)
        thb = fit_power_law(big.n_samples[w], big.excess[w])
        fits[gamma] = sim
        log(f"{gamma:6.2f} {sim.exponent:8.3f} [{sim.ci[0]:.3f}, {sim.ci[1]:.3f}]"
            f"{'':6} {th.exponent:13.3f} {thb.exponent:14.3f} "
            f"{excess_risk_exponent(gamma):11.3f}")

    paths = []
    with paper_style():
        fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.3), constrained_layout=True)
        for ax, gamma, color in zip(axes, GAMMAS, PALETTE):
            n, exc = sims[gamma]
            ax.errorbar(n / d, exc.mean(axis=1), yerr=exc.std(axis=1), fmt="o", color=color,
                        mfc="white", mew=1.2, label=f"TiedAttentionRegressor, d = {d}")
            lc, big = theory[gamma], theory_big[gamma]
            ax.plot(lc.n_samples / d, lc.excess, "-", color=color, label=f"theory, d = {d}")
            ax.plot(big.n_samples / d_big, big.excess, "--", color="0.3", lw=1.2,
                    label=f"theory, d = {d_big}")
            fit = fits[gamma]
            nn = np.geomspace(n[0], n[-1], 20)
            ax.plot(nn / d, fit.predict(nn), ":", color="k", lw=1,
                    label=f"fit: slope {fit.exponent:.2f} (asymptotic "
                          f"{excess_risk_exponent(gamma):.2f})")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("$n/d$")
            ax.set_ylabel(r"$e_{\mathrm{test}} - e_0$")
            ax.set_title(f"γ = {gamma}, λ = {C_LAMBDA:g}·√n/d, linear attention, T = {T}")
            ax.legend(fontsize=7)
        paths.append(save(fig, "learning_curves", out_dir, close=close))

    # regimes of skattn.scaling.scaling_regime in the (n, λ) plane at the larger d, with the
    # path λ = c √n/d of the curves above
    log_n = np.linspace(0.5, 3.5, 300)   # log n / log d
    log_lam = np.linspace(-2.0, 2.0, 240)  # log λ / log d
    regimes, labels = phase_diagram(d_big, 1.25, n=d_big ** log_n,
                                    reg_lambda=d_big ** log_lam, n_tokens=T, noise=NOISE)
    with paper_style():
        fig, ax = plt.subplots(figsize=(5.2, 3.8), constrained_layout=True)
        plot_phase_diagram(log_n, log_lam, regimes, labels=labels, ax=ax)
        path = np.log(C_LAMBDA * np.sqrt(d_big ** log_n) / d_big) / np.log(d_big)
        ax.plot(log_n, path, "k--", lw=1, label=rf"$\lambda = {C_LAMBDA:g}\sqrt{{n}}/d$")
        # the window n/d ∈ [4, 40] of the learning curves, in units of log d_big
        window = ((log_n >= 1 + np.log(4) / np.log(d_big))
                  & (log_n <= 1 + np.log(40) / np.log(d_big)))
        ax.plot(log_n[window], path[window], "k-", lw=3, label=r"$n/d \in [4, 40]$")
        ax.set_title(f"γ = 1.25, d = {d_big}: exponent of $e_{{test}} - e_0$ in n", fontsize=9)
        ax.legend(loc="lower right", fontsize=7)
        paths.append(save(fig, "scaling_phase_diagram", out_dir, close=close))
    log(f"saved {', '.join(paths)}; total {time.perf_counter() - t_start:.0f} s")
    return paths
