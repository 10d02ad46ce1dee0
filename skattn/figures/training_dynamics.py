"""Training dynamics: target modes are learned one by one in time, as they emerge in α."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skattn.data import AttentionIndexedModel, SpectrumTarget
from skattn.estimators import TiedAttentionRegressor
from ._common import draw_parameters, figure_dir, save, silent
from skattn.plotting import PALETTE, paper_style, plot_emergence
from skattn.theory.powerlaw import emergence_alpha, recovered_modes, theory_learning_curve

T, ALPHA, REG_LAMBDA, NOISE = 2, 0.5, 1e-2, 0.0
# four separated spikes (ratio 2), the rest zero; normalised so that Σ λ_i² = d
SPIKES = np.array([1.0, 0.5, 0.25, 0.125])
# a small start makes each mode grow from ~0 at a rate set by its eigenvalue: the modes
# then take off one after the other instead of all at once
INIT_SCALE, LEARNING_RATE = 1e-4, 3e-3


def spiked_eigenvalues(n_features):
    """The target spectrum: :data:`SPIKES` scaled to ``Σ λ_i² = d``, zeros elsewhere."""
    eigenvalues = np.zeros(n_features)
    eigenvalues[:SPIKES.size] = SPIKES
    return eigenvalues * np.sqrt(n_features / np.sum(eigenvalues ** 2))


@draw_parameters(quick="d = 32, fewer Adam epochs and a coarser theory grid, instead of d = 64.")
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the training-dynamics figure and save ``training_dynamics.png``.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    d, max_iter, n_theory = (32, 600, 10) if quick else (64, 1500, 14)
    eigenvalues = spiked_eigenvalues(d)
    target = SpectrumTarget(eigenvalues)
    n_modes = SPIKES.size
    t_start = time.perf_counter()

    # Adam from a small start, the whole trajectory recorded
    teacher = AttentionIndexedModel(d, n_tokens=T, target=target, noise=NOISE,
                                    attention="linear", random_state=0)
    n_train = int(round(ALPHA * d * d))
    X, y = teacher.sample(n_train, random_state=1, layout="tokens")
    model = TiedAttentionRegressor(width=1.0, reg_lambda=REG_LAMBDA, attention="linear",
                                   solver="adam", learning_rate_init=LEARNING_RATE,
                                   init_scale=INIT_SCALE, max_iter=max_iter, tol=1e-8,
                                   device="cpu", dtype="float64", random_state=0,
                                   history={"S0": teacher.S0_, "top_k": n_modes + 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed budget of epochs
        model.fit(X, y)
    history = model.history_
    log(f"Adam: {model.n_iter_} epochs at d={d}, n={n_train} in "
        f"{time.perf_counter() - t_start:.1f} s")

    # the theory along n at the same d and λ, and where each mode emerges
    common = dict(target=target, n_features=d, n_tokens=T, attention="linear", noise=NOISE)
    n_grid = np.unique(np.concatenate([np.geomspace(d / 8, 2 * n_train, n_theory),
                                       [n_train]]))
    curve = theory_learning_curve(n_grid, reg_lambda=REG_LAMBDA, **common)
    recs = [recovered_modes(r) for r in curve.results]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a mode out at the lower end
        alphas = emergence_alpha(np.arange(n_modes), reg_lambda=REG_LAMBDA,
                                 alpha_range=(n_grid[0] / d ** 2, n_grid[-1] / d ** 2),
                                 n_grid=10, rtol=5e-2, **common)
    n_emerge = alphas * d ** 2
    log("emergence n of modes 1-4: " + ", ".join("out of range" if np.isnan(v) else
                                                 f"{v:.0f}" for v in n_emerge))
    log(f"theory done after {time.perf_counter() - t_start:.1f} s")

    with paper_style():
        fig, (ax_t, ax_n) = plt.subplots(1, 2, figsize=(10.0, 3.8), constrained_layout=True)
        it = history["iteration"]
        for i in range(n_modes):
            color = PALETTE[i % len(PALETTE)]
            ax_t.plot(it, history["top"][:, i], color=color, lw=1.6,
                      label=f"$\\hat\\lambda_{i + 1}$")
            ax_t.axhline(eigenvalues[i], color=color, ls=":", lw=0.9)
        ax_t.plot(it, history["top"][:, n_modes:], color="0.6", lw=0.8)
        ax_t.set_xscale("log")
        ax_t.set_xlabel("Adam epoch")
        ax_t.set_ylabel("top eigenvalues of $S$ (dotted: target)")
        ax_t.set_title(f"in time: d = {d}, n = {n_train} (α = {ALPHA:g}), "
                       f"λ = {REG_LAMBDA:g}", fontsize=9)
        ax_obj = ax_t.twinx()
        ax_obj.plot(it, history["objective"], color="k", ls="--", lw=1.0,
                    label="objective / d²")
        ax_obj.set_yscale("log")
        ax_obj.set_ylabel("objective / d² (dashed)")
        ax_t.legend(loc="center left", fontsize=7, frameon=False)

        plot_emergence(n_grid, recs, trained={"n": [n_train],
                                              "eigenvalues": [np.linalg.eigvalsh(model.S_)]},
                       n_modes=n_modes, ax=ax_n)
        ax_n.set_xscale("log")
        ok = np.isfinite(n_emerge)
        top_axis = ax_n.secondary_xaxis("top")
        top_axis.set_xticks(n_emerge[ok], labels=[str(i + 1) for i in np.flatnonzero(ok)])
        top_axis.set_xlabel("predicted emergence of mode i", fontsize=8)
        ax_n.axvline(n_train, color="0.5", lw=0.8, ls="--")
        ax_n.set_title("in α: state evolution (points: the Adam fit at its end)",
                       fontsize=9)
        paths = [save(fig, "training_dynamics", out_dir, close=close)]
    log(f"saved {paths[0]}; total {time.perf_counter() - t_start:.0f} s")
    return paths
