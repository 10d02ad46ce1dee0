"""Phase diagrams: test and training error over the (α, λ) plane, T = 2 softmax and T = 1.

Theory only: :func:`skattn.theory.solve_phase_diagram` solves every λ row as a warm-started
α path, rows in parallel on both cores.
"""

from __future__ import annotations

import time

import numpy as np

from skattn.data import WishartTarget
from ._common import draw_parameters, figure_dir, save, silent
from skattn.plotting import paper_style
from skattn.theory import interpolation_threshold, solve_phase_diagram

KAPPA0 = 0.5


@draw_parameters(quick="A 6 × 4 grid with 1024 quadrature nodes (seconds) instead of 24 × 12.")
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the phase-diagram figure and save ``phase_diagram.png``.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    n_alpha, n_lambda, n_nodes = (6, 4, 1024) if quick else (24, 12, 4096)
    alphas = np.geomspace(0.05, 1.0, n_alpha)
    lambdas = np.geomspace(1e-3, 1.0, n_lambda)
    target = WishartTarget(KAPPA0)
    with paper_style():
        fig, axes = plt.subplots(2, 2, figsize=(10, 7.5), constrained_layout=True)
        for col, (T, attention) in enumerate(((2, "softmax"), (1, "linear"))):
            t0 = time.perf_counter()
            diagram = solve_phase_diagram(alphas, lambdas, n_tokens=T, target=target,
                                          attention=attention, n_nodes=n_nodes, n_jobs=2)
            n_bad = int((~diagram.converged).sum())
            log(f"T = {T}: {diagram.converged.size} points in "
                f"{time.perf_counter() - t0:.1f} s ({n_bad} not converged)")
            alpha_interp = interpolation_threshold(n_tokens=T, target=target,
                                                   attention=attention)
            for row, quantity in enumerate(("test_error", "train_error")):
                ax = axes[row, col]
                diagram.plot(ax, quantity=quantity, log_alpha=True, cmap="viridis")
                ax.axvline(alpha_interp, color="w", ls=":", lw=1.2)
                ax.set_title(f"T = {T} {attention}: {quantity.replace('_', ' ')}")
        fig.suptitle(f"Tied attention, Wishart κ0 = {KAPPA0}; dotted: "
                     r"$\alpha_{\mathrm{interp}}$ ($\Delta \to 0^+$)")
        return [save(fig, "phase_diagram", out_dir, close=close)]
