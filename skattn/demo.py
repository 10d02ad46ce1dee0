"""The headline demo (``skattn demo``, ``make demo``): theory against gradient training.

T = 2 softmax attention on a Wishart κ0 = 0.5 target: the state-evolution test error and
objective along α, trained models at a few α (mean ± s.e.m. over seeds), and the learned
spectrum against its predicted law; writes a figure and a CSV and returns the table rows.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from .experiments import standard_error, run_fits
from .reporting import format_rows, format_table

__all__ = ["DEMO_SETTINGS", "DEMO_LAMBDAS", "DEMO_COLUMNS", "run_demo", "demo_table"]



DEMO_SETTINGS = {
    "full": dict(n_features=80, theory_alphas=np.geomspace(0.05, 1.0, 12).round(4),
                 sim_alphas=(0.1, 0.2, 0.35, 0.5, 0.75), seeds=(0, 1), n_test=4000,
                 n_nodes=8192, spectrum=(0.01, 0.5)),
    "quick": dict(n_features=32, theory_alphas=np.geomspace(0.05, 1.0, 6).round(4),
                  sim_alphas=(0.2, 0.6), seeds=(0, 1), n_test=1000, n_nodes=2048,
                  spectrum=(0.01, 0.6)),
}
DEMO_LAMBDAS = (0.01, 0.1)
DEMO_COLUMNS = ["alpha", "lambda", "e_test_theory", "e_test_sim", "e_test_sem",
                "obj_theory", "obj_sim", "obj_sem", "theory_converged", "fits_converged"]


def run_demo(out="out", *, quick=False, solver="adam", n_features=None, n_jobs=1,
             log=print):
    """The headline demo: theory vs gradient-trained tied attention (see ``skattn demo``).

    T = 2 softmax, Wishart κ0 = 0.5 target, β = β0 = 1, λ ∈ {0.01, 0.1}: state-evolution
    test error and objective/d² along α, gradient-trained :class:`TiedAttentionRegressor`
    points (mean ± s.e.m. over 2 seeds), and the learned spectrum of one model against the
    predicted density. Writes ``skattn_demo.png`` and ``skattn_demo.csv`` in ``out``.

    Parameters
    ----------
    out : str, default="out"
        Output directory (created if missing).
    quick : bool, default=False
        The small settings of :data:`DEMO_SETTINGS` (d = 32, fewer points).
    solver : {"adam", "lbfgs"}, default="adam"
        Adam, the paper's optimiser, on purpose: the demo shows the paper's claim that
        gradient training from a random start, on a non-convex objective, reaches the
        minimiser the theory describes. ``"lbfgs"`` (the estimators' and ``skattn
        simulate``'s default) reaches the same minimum in fewer iterations.
    n_features : int, optional
        Dimension d of the simulations (default: that of the settings).
    n_jobs : int, default=1
        Parallel fits (see :func:`run_fits`).
    log : callable, default=print
        Receives one progress line at a time.

    Returns
    -------
    rows : list of dict
        One row per simulated (α, λ), with the keys of :data:`DEMO_COLUMNS`; see
        :func:`demo_table`.
    path : str
        The PNG written.
    """
    import matplotlib
    if not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .data import WishartTarget
    from .plotting import MARKERS, PALETTE, paper_style, plot_error_curve, plot_spectrum
    from .theory import state_evolution_curve

    cfg = dict(DEMO_SETTINGS["quick" if quick else "full"])
    if n_features is not None:
        cfg["n_features"] = int(n_features)
    d, T, kappa0 = cfg["n_features"], 2, 0.5
    target = WishartTarget(kappa0)
    t_start = time.perf_counter()
    log(f"skattn demo{' --quick' if quick else ''}: T={T} softmax, Wishart κ0={kappa0}, "
        f"β=β0=1, λ ∈ {list(DEMO_LAMBDAS)}; simulations d={d}, solver={solver}, "
        f"seeds={list(cfg['seeds'])}")

    # theory
    alphas = np.unique(np.concatenate([cfg["theory_alphas"], cfg["sim_alphas"]]))
    curves = {}
    for lam in DEMO_LAMBDAS:
        t0 = time.perf_counter()
        curves[lam] = state_evolution_curve(alphas, reg_lambda=lam, n_tokens=T,
                                            target=target, n_nodes=cfg["n_nodes"])
        n_bad = sum(not r.converged for r in curves[lam])
        log(f"  theory  λ={lam:g}: {alphas.size} state-evolution points in "
            f"{time.perf_counter() - t0:.1f} s" + (f" ({n_bad} not converged)" if n_bad
                                                   else ""))

    # simulations
    jobs = []
    for lam in DEMO_LAMBDAS:
        for a in cfg["sim_alphas"]:
            for s in cfg["seeds"]:
                # one torch thread: these problems are too small for intra-op
                # parallelism, which only slows them down on a busy machine
                jobs.append(dict(estimator="tied", n_features=d, alpha=float(a), n_tokens=T,
                                 reg_lambda=lam, target="wishart", kappa0=kappa0, seed=s,
                                 solver=solver, n_test=cfg["n_test"], device="cpu",
                                 torch_threads=1,
                                 return_eigenvalues=(lam, a) == cfg["spectrum"] and s == 0))
    t0 = time.perf_counter()

    def progress(i, n, job, r):
        log(f"  fit {i:2d}/{n}: α={job['alpha']:<5g} λ={job['reg_lambda']:<5g} "
            f"seed={job['seed']}  test error {r['test_error']:.4g}  "
            f"objective/d² {r['train_objective']:.4g}  ({r['fit_time']:.1f} s)")

    fits = run_fits(jobs, n_jobs=n_jobs, progress=progress)
    log(f"  {len(jobs)} fits in {time.perf_counter() - t0:.1f} s")

    rows, sims, eig = [], {}, None
    for lam in DEMO_LAMBDAS:
        th = {round(r.alpha, 10): r for r in curves[lam]}
        sims[lam] = {"alpha": [], "test_error": ([], []), "train_objective": ([], [])}
        for a in cfg["sim_alphas"]:
            rs = [f for j, f in zip(jobs, fits) if j["reg_lambda"] == lam and j["alpha"] == a]
            for j, f in zip(jobs, fits):
                if "eigenvalues" in f and j["reg_lambda"] == lam and j["alpha"] == a:
                    eig = f["eigenvalues"]
            res = th[round(float(a), 10)]
            row = {"alpha": float(a), "lambda": lam,
                   "e_test_theory": res.test_error,
                   "e_test_sim": float(np.mean([f["test_error"] for f in rs])),
                   "e_test_sem": standard_error([f["test_error"] for f in rs]),
                   "obj_theory": res.train_objective,
                   "obj_sim": float(np.mean([f["train_objective"] for f in rs])),
                   "obj_sem": standard_error([f["train_objective"] for f in rs]),
                   "theory_converged": res.converged,
                   "fits_converged": all(f["converged"] for f in rs)}
            rows.append(row)
            sims[lam]["alpha"].append(float(a))
            for q, key in (("test_error", "e_test"), ("train_objective", "obj")):
                sims[lam][q][0].append(row[key + "_sim"])
                sims[lam][q][1].append(row[key + "_sem"])

    # figure
    lam_s, a_s = cfg["spectrum"]
    spec_res = {round(r.alpha, 10): r for r in curves[lam_s]}[round(float(a_s), 10)]
    os.makedirs(out, exist_ok=True)
    with paper_style():
        fig, axes = plt.subplots(1, 3, figsize=(11.5, 3.5), constrained_layout=True)
        for i, lam in enumerate(DEMO_LAMBDAS):
            for ax, q in zip(axes[:2], ("test_error", "train_objective")):
                plot_error_curve(curves[lam], quantity=q, ax=ax, color=PALETTE[i],
                                 marker=MARKERS[i], logy=True, logx=True,
                                 label=f"theory, λ = {lam:g}",
                                 sim_label=f"{'Adam' if solver == 'adam' else 'L-BFGS'}, "
                                           f"d = {d}, λ = {lam:g}",
                                 simulations={"alpha": sims[lam]["alpha"],
                                              "mean": sims[lam][q][0],
                                              "sem": sims[lam][q][1]})
        axes[0].set_title("(a) test error")
        axes[1].set_title(r"(b) training objective / $d^2$")
        handles, labels = axes[0].get_legend_handles_labels()
        axes[0].legend(handles, labels, fontsize=7, loc="lower left")
        plot_spectrum(spec_res, eig, ax=axes[2], bins=20 if quick else 25)
        axes[2].set_title(f"(c) learned spectrum, α = {a_s:g}, λ = {lam_s:g}, d = {d}")
        fig.suptitle(f"Tied softmax attention, T = {T}, Wishart target κ0 = {kappa0}, "
                     f"β = β0 = 1: state evolution (lines) vs gradient training (points)",
                     fontsize=9)
        path = os.path.join(out, "skattn_demo.png")
        fig.savefig(path, dpi=150)
        plt.close(fig)

    with open(os.path.join(out, "skattn_demo.csv"), "w") as fh:
        fh.write(format_rows(rows, DEMO_COLUMNS, "csv"))
    log(f"  total {time.perf_counter() - t_start:.1f} s; wrote {path} and "
        f"{os.path.join(out, 'skattn_demo.csv')}")
    return rows, path


def demo_table(rows):
    """The demo's rows as the table ``skattn demo`` prints.

    Parameters
    ----------
    rows : list of dict
        As returned by :func:`run_demo` (non-empty).

    Returns
    -------
    str
        Theory next to simulation (mean ± s.e.m.) for the test error and objective/d²;
        a ``*`` marks a point whose state evolution or fits did not converge.

    Raises
    ------
    ValueError
        If ``rows`` is empty.
    """
    if not rows:
        raise ValueError("rows must hold at least one demo row, got none.")

    def pm(mean, sem, precision):
        if math.isfinite(sem):
            return f"{mean:.{precision}g} ± {sem:.1g}"
        return f"{mean:.{precision}g}"

    out = []
    for r in rows:
        flag = "" if r["theory_converged"] and r["fits_converged"] else " *"
        out.append({"α": r["alpha"], "λ": r["lambda"],
                    "e_test theory": r["e_test_theory"],
                    "e_test sim ± sem": pm(r["e_test_sim"], r["e_test_sem"], 4) + flag,
                    "obj/d² theory": r["obj_theory"],
                    "obj/d² sim ± sem": pm(r["obj_sim"], r["obj_sem"], 4)})
    text = format_table(out, list(out[0]))
    if any(not (r["theory_converged"] and r["fits_converged"]) for r in rows):
        text += "* a state-evolution point or a fit did not converge\n"
    return text
