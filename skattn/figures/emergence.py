"""Emergence: the modes of a power-law target detach from the noise bulk one by one."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skattn.data import AttentionIndexedModel, PowerLawTarget
from skattn.estimators import TiedAttentionRegressor
from ._common import draw_parameters, figure_dir, save, silent
from skattn.plotting import PALETTE, paper_style, plot_emergence, plot_spectrum
from skattn.theory.powerlaw import emergence_alpha, recovered_modes, theory_learning_curve

T, GAMMA, NOISE, C_LAMBDA = 2, 1.25, 0.5, 3.0


@draw_parameters(quick="d = 40 with fewer Adam iterations, instead of d = 100.")
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the emergence figure and save ``emergence.png``.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    if quick:
        d, n_train, max_iter, n_theory = 40, [60, 200, 500, 1200], 500, 12
    else:
        d, n_train, max_iter, n_theory = 100, [300, 1000, 3000, 8000], 3000, 40
    target = PowerLawTarget(GAMMA)
    common = dict(target=target, n_features=d, n_tokens=T, attention="linear", noise=NOISE)
    t_start = time.perf_counter()

    # theory along n, and the emergence size of the first modes
    n_grid = np.unique(np.concatenate([np.geomspace(d / 2, d * d, n_theory), n_train]))
    curve = theory_learning_curve(n_grid, reg_lambda=C_LAMBDA / d, lambda_exponent=0.5,
                                  **common)
    recs = [recovered_modes(r) for r in curve.results]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mode 1 is out at n = d/2 already
        alphas = emergence_alpha(np.arange(6), reg_lambda=lambda a: C_LAMBDA * np.sqrt(a),
                                 alpha_range=(0.5 / d, 1.0), n_grid=20, rtol=1e-3, **common)
    n_emerge = alphas * d ** 2
    log("emergence n of modes 1-6: " + ", ".join("< d/2" if np.isnan(v) else f"{v:.0f}"
                                                 for v in n_emerge))
    log(f"theory done after {time.perf_counter() - t_start:.1f} s")

    # Adam at the same d
    teacher = AttentionIndexedModel(d, n_tokens=T, target=target, noise=NOISE,
                                    attention="linear", random_state=0)
    trained = {"n": [], "eigenvalues": []}
    for i, n in enumerate(n_train):
        X, y = teacher.sample(n, random_state=10 + i, layout="tokens")
        model = TiedAttentionRegressor(width=1.0, reg_lambda=C_LAMBDA * np.sqrt(n) / d,
                                       attention="linear", solver="adam", max_iter=max_iter,
                                       tol=1e-7, learning_rate_init=0.05, device="cpu",
                                       random_state=i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
        trained["n"].append(n)
        trained["eigenvalues"].append(np.linalg.eigvalsh(model.S_))
    log(f"Adam fits done after {time.perf_counter() - t_start:.0f} s")

    # predicted against trained outliers
    by_n = {int(round(n)): rec for n, rec in zip(n_grid, recs)}
    for n, ev in zip(trained["n"], trained["eigenvalues"]):
        rec = by_n[n]
        k = rec.n_recovered
        top = np.sort(ev)[::-1][:k + 1]
        log(f"n={n:5d}: {k} predicted outliers {np.round(rec.learned_eigenvalues[:k], 2)}, "
            f"bulk edge {rec.learned_bulk_edge:.2f}; Adam top {np.round(top, 2)}")

    with paper_style():
        fig = plt.figure(figsize=(10.0, 3.6), constrained_layout=True)
        gs = fig.add_gridspec(2, 2, width_ratios=[1.5, 1.0])
        ax = fig.add_subplot(gs[:, 0])
        plot_emergence(n_grid, recs, trained=trained, n_modes=6, ax=ax)
        top_axis = ax.secondary_xaxis("top")
        ok = np.isfinite(n_emerge)
        top_axis.set_xticks(n_emerge[ok], labels=[str(i + 1) for i in np.flatnonzero(ok)])
        top_axis.set_xlabel("emergence of mode i", fontsize=8)
        ax.set_title(f"d = {d}, γ = {GAMMA}, λ = {C_LAMBDA:g}·√n/d", fontsize=9)
        for row, n in enumerate((n_train[1], n_train[3])):
            sub = fig.add_subplot(gs[row, 1])
            res = curve.results[int(np.flatnonzero(np.round(n_grid) == n)[0])]
            plot_spectrum(res, trained["eigenvalues"][n_train.index(n)], ax=sub, bins=40)
            rec = by_n[n]
            for i in rec.recovered_indices:
                sub.annotate("", xy=(rec.learned_eigenvalues[i], 0),
                             xytext=(rec.learned_eigenvalues[i], 0.25),
                             arrowprops=dict(arrowstyle="->", color=PALETTE[i % len(PALETTE)]))
            sub.set_title(f"n = {n}: {rec.n_recovered} predicted outliers", fontsize=8)
            sub.set_ylim(0, 1.2)
        paths = [save(fig, "emergence", out_dir, close=close)]
    log(f"saved {paths[0]}; total {time.perf_counter() - t_start:.0f} s")
    return paths
