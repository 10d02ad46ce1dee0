"""
Emergence: target modes detach from the bulk one by one
=======================================================

A power-law target ``λ_i ∝ √d · i^(−γ)`` is learned *sequentially*. State evolution
predicts the trained matrix as ``Ŝ ≈ η ReLU(S0 + δZ − ε)`` (THEORY.md §4): as n grows the
noise level δ and the threshold ε fall, and each target eigenvalue in turn separates from
the noise bulk of ``S0 + δZ`` — a spectral outlier, a recovered feature — at a sample
size of its own (:func:`~skattn.theory.powerlaw.emergence_alpha`). That is the stepwise
"emergence" of THEORY.md §8, and summing the steps gives the scaling law
(``plot_learning_curves.py``).

Left: the learned spectrum against n from the theory alone (d = 100, γ = 1.25, linear
attention, T = 2, label noise Δ = 0.5, λ = 3√(n/d²)): the shaded band is the learned bulk,
coloured lines the learned outliers (dotted: the target eigenvalues they approach), ticks
on the top axis the predicted emergence sizes; the points are the top eigenvalues of
:class:`~skattn.TiedAttentionRegressor` trained with **Adam** at the same d.
Right: the whole learned spectrum at two sizes, trained (histogram) against the predicted
density, with the predicted outliers as arrows.
"""

# %%
import os
import time
import warnings

import matplotlib

if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")  # headless: draw to files
import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skattn import AttentionIndexedModel, PowerLawTarget, TiedAttentionRegressor
from skattn.plotting import PALETTE, paper_style, plot_emergence, plot_spectrum, save_figure
from skattn.theory.powerlaw import emergence_alpha, recovered_modes, theory_learning_curve

D, T, GAMMA, NOISE, C_LAMBDA = 100, 2, 1.25, 0.5, 3.0
N_TRAIN = [300, 1000, 3000, 8000]
target = PowerLawTarget(GAMMA)
common = dict(target=target, n_features=D, n_tokens=T, attention="linear", noise=NOISE)
t_start = time.perf_counter()

# %%
# Theory along n, and the emergence size of the first modes
# ---------------------------------------------------------
n_grid = np.unique(np.concatenate([np.geomspace(D / 2, D * D, 40), N_TRAIN]))
curve = theory_learning_curve(n_grid, reg_lambda=C_LAMBDA / D, lambda_exponent=0.5,
                              **common)
recs = [recovered_modes(r) for r in curve.results]
with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # mode 1 is out at n = d/2 already
    alphas = emergence_alpha(np.arange(6), reg_lambda=lambda a: C_LAMBDA * np.sqrt(a),
                             alpha_range=(0.5 / D, 1.0), n_grid=20, rtol=1e-3, **common)
n_emerge = alphas * D ** 2
print("emergence n of modes 1-6:", ", ".join("< d/2" if np.isnan(v) else f"{v:.0f}"
                                             for v in n_emerge))
print(f"theory done after {time.perf_counter() - t_start:.1f} s")

# %%
# Adam at the same d
# ------------------
teacher = AttentionIndexedModel(D, n_tokens=T, target=target, noise=NOISE,
                                attention="linear", random_state=0)
trained = {"n": [], "eigenvalues": []}
for i, n in enumerate(N_TRAIN):
    X, y = teacher.sample(n, random_state=10 + i)
    model = TiedAttentionRegressor(width=1.0, reg_lambda=C_LAMBDA * np.sqrt(n) / D,
                                   attention="linear", solver="adam", max_iter=3000,
                                   tol=1e-7, learning_rate_init=0.05, device="cpu",
                                   random_state=i)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    trained["n"].append(n)
    trained["eigenvalues"].append(np.linalg.eigvalsh(model.S_))
print(f"Adam fits done after {time.perf_counter() - t_start:.0f} s")

# %%
# Predicted against trained outliers
# ----------------------------------
by_n = {int(round(n)): rec for n, rec in zip(n_grid, recs)}
for n, ev in zip(trained["n"], trained["eigenvalues"]):
    rec = by_n[n]
    k = rec.n_recovered
    top = np.sort(ev)[::-1][:k + 1]
    print(f"n={n:5d}: {k} predicted outliers {np.round(rec.learned_eigenvalues[:k], 2)}, "
          f"bulk edge {rec.learned_bulk_edge:.2f}; Adam top {np.round(top, 2)}")

# %%
# Figure
# ------
with paper_style():
    fig = plt.figure(figsize=(10.0, 3.6), constrained_layout=True)
    gs = fig.add_gridspec(2, 2, width_ratios=[1.5, 1.0])
    ax = fig.add_subplot(gs[:, 0])
    plot_emergence(n_grid, recs, trained=trained, n_modes=6, ax=ax)
    top = ax.secondary_xaxis("top")
    ok = np.isfinite(n_emerge)
    top.set_xticks(n_emerge[ok], labels=[str(i + 1) for i in np.flatnonzero(ok)])
    top.set_xlabel("emergence of mode i", fontsize=8)
    ax.set_title(f"d = {D}, γ = {GAMMA}, λ = {C_LAMBDA:g}·√n/d", fontsize=9)
    for row, n in enumerate((N_TRAIN[1], N_TRAIN[3])):
        sub = fig.add_subplot(gs[row, 1])
        res = curve.results[int(np.flatnonzero(np.round(n_grid) == n)[0])]
        plot_spectrum(res, trained["eigenvalues"][N_TRAIN.index(n)], ax=sub, bins=40)
        rec = by_n[n]
        for i in rec.recovered_indices:
            sub.annotate("", xy=(rec.learned_eigenvalues[i], 0),
                         xytext=(rec.learned_eigenvalues[i], 0.25),
                         arrowprops=dict(arrowstyle="->", color=PALETTE[i % len(PALETTE)]))
        sub.set_title(f"n = {n}: {rec.n_recovered} predicted outliers", fontsize=8)
        sub.set_ylim(0, 1.2)
    print("saved", save_figure(fig, "emergence"))
print(f"total {time.perf_counter() - t_start:.0f} s")
