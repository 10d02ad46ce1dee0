"""Spiked state evolution along a learning curve: trained models against the predictions.

Power-law target (γ = 1.25 and one point at γ = 1.5), T = 2 softmax seq2lab, λ = 0.05,
Δ = 0.2, β = β0 = 1, κ = 1. For each (d, α, seed) a teacher
``AttentionIndexedModel(d, target=PowerLawTarget(γ), noise=Δ, random_state=seed)`` draws
``round(α d²)`` training samples (``random_state=1000 + seed``) and 40 000 test samples
(``random_state=2000 + seed``); :class:`~skattn.TiedAttentionRegressor` is fitted with
L-BFGS in float64 on one thread and scored with :func:`~skattn.metrics.attention_error`.
The predictions are :func:`~skattn.theory.solve_spiked_state_evolution` (default
``n_spikes``) and the Gaussian :func:`~skattn.theory.solve_state_evolution` with
``n_features=d`` — the procedure of docs/spiked.rst, "Trained students".

Usage::

    python benchmarks/research/spiked_learning_curve.py --run     # fits + SE, writes results/spiked_learning_curve.json (~3 min)
    python benchmarks/research/spiked_learning_curve.py           # figure from the cached JSON

The figure goes to ``docs/_static/figures/spiked_learning_curve.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
from _common import RESULTS as RESULTS_DIR
from _common import add_common_arguments, reference_seconds, write_result

HERE = Path(__file__).resolve().parent
RESULTS = RESULTS_DIR / "spiked_learning_curve.json"
FIGURE = HERE.parents[1] / "docs" / "_static" / "figures" / "spiked_learning_curve.png"

NOISE, REG_LAMBDA, N_TEST = 0.2, 0.05, 40_000
ALPHAS = (0.1, 0.2, 0.3, 0.45, 0.7)
SEEDS = (0, 1, 2)
SMALL_ALPHAS = (0.1, 0.2)
# (γ, d, α grid): the learning curve at d = 100 and 60, one γ = 1.5 point at d = 100, and
# the small α (where the gap is largest at d = 60–100) at d = 160 and 250, to see whether
# the gap closes with d
CONFIGS = [(1.25, 100, ALPHAS), (1.25, 60, ALPHAS), (1.5, 100, (0.3,)),
           (1.25, 160, SMALL_ALPHAS), (1.25, 250, SMALL_ALPHAS)]
GAP_DS = (60, 100, 160, 250)
# α grid of the theory lines in the figure (the SE is cheap: < 1 s a point)
LINE_ALPHAS = tuple(np.round(np.geomspace(0.08, 0.8, 15), 4))
LINE_DS = (100, 60)


def _trained_error(gamma, d, alpha, seed):
    from skattn import TiedAttentionRegressor
    from skattn.data import AttentionIndexedModel, PowerLawTarget
    from skattn.metrics import attention_error

    teacher = AttentionIndexedModel(d, target=PowerLawTarget(gamma), noise=NOISE,
                                    random_state=seed)
    X, y = teacher.sample(int(round(alpha * d * d)), random_state=1000 + seed, layout="tokens")
    X_test, y_test = teacher.sample(N_TEST, random_state=2000 + seed, layout="tokens")
    student = TiedAttentionRegressor(reg_lambda=REG_LAMBDA, solver="lbfgs", dtype="float64",
                                     device="cpu", random_state=seed).fit(X, y)
    return float(attention_error(y_test, student.predict(X_test)))


def _predictions(gamma, d, alpha):
    from skattn.data import PowerLawTarget
    from skattn.theory import StateEvolutionProblem, solve_state_evolution
    from skattn.theory.spiked import solve_spiked_state_evolution

    eig = PowerLawTarget(gamma).eigenvalues(d)
    spiked = solve_spiked_state_evolution(alpha, eig, reg_lambda=REG_LAMBDA, noise=NOISE)
    with warnings.catch_warnings():
        # the DomainWarning on spiky softmax targets is the point of the comparison
        warnings.simplefilter("ignore")
        gauss = solve_state_evolution(alpha, StateEvolutionProblem(
            PowerLawTarget(gamma), n_tokens=2, reg_lambda=REG_LAMBDA, noise=NOISE,
            n_features=d))
    # δ = √q̂/m̂, the prior side's noise width: the spiked channel neglects terms of
    # relative order δ/λ_i (docs/spiked.rst, "Limits")
    delta = float(np.sqrt(spiked.q_hat) / spiked.m_hat)
    return {"spiked": float(spiked.test_error.value),
            "spiked_se": float(spiked.test_error.standard_error),
            "n_spikes": int(spiked.n_spikes), "spiked_converged": bool(spiked.converged),
            "gaussian": float(gauss.test_error), "prior_noise_delta": round(delta, 4),
            "delta_over_lambda1": round(delta / float(eig.max()), 4)}


def run(args, argv=None):
    """Fit every (γ, d, α, seed), solve both state evolutions, write the JSON."""
    import torch

    torch.set_num_threads(1)
    start, load_before = time.perf_counter(), os.getloadavg()
    reference = [reference_seconds(args.quick)]
    points = []
    for gamma, d, alphas in CONFIGS:
        for alpha in alphas:
            errors = [_trained_error(gamma, d, alpha, seed) for seed in SEEDS]
            row = {"gamma": gamma, "d": d, "alpha": alpha, "trained": errors,
                   "trained_mean": float(np.mean(errors)),
                   "trained_sem": float(np.std(errors, ddof=1) / np.sqrt(len(errors)))}
            row.update(_predictions(gamma, d, alpha))
            points.append(row)
            print(f"γ={gamma} d={d} α={alpha}: trained {row['trained_mean']:.5f} "
                  f"± {row['trained_sem']:.5f}  spiked {row['spiked']:.5f}  "
                  f"gaussian {row['gaussian']:.5f}", flush=True)
    lines = [{"gamma": 1.25, "d": d, "alpha": [float(a) for a in LINE_ALPHAS],
              "spiked": [], "gaussian": []} for d in LINE_DS]
    for line in lines:
        for alpha in line["alpha"]:
            pred = _predictions(line["gamma"], line["d"], alpha)
            line["spiked"].append(round(pred["spiked"], 6))
            line["gaussian"].append(round(pred["gaussian"], 6))
    reference.append(reference_seconds(args.quick))
    meta = {"measured": time.strftime("%Y-%m-%d"), "wall_s": round(time.perf_counter() - start),
            "loadavg_1min_before_after": [round(load_before[0], 2),
                                          round(os.getloadavg()[0], 2)],
            "numpy_reference_s_before_after": [None if r is None else round(r, 3)
                                               for r in reference],
            "threads": 1, "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "noise": NOISE, "reg_lambda": REG_LAMBDA, "n_test": N_TEST, "seeds": list(SEEDS)}
    return write_result(args, "spiked_learning_curve.json",
                        {"meta": meta, "points": points, "lines": lines},
                        script=__file__, argv=argv)


def plot():
    """Test error against α: trained points (± s.e.), spiked and Gaussian SE lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = json.loads(RESULTS.read_text())
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    axes[1].sharey(axes[0])
    for ax, d in zip(axes[:2], (60, 100)):
        line = next(ln for ln in data["lines"] if ln["d"] == d)
        ax.plot(line["alpha"], line["spiked"], "-", color="C0", label="spiked SE (k = 1)")
        ax.plot(line["alpha"], line["gaussian"], "--", color="C1", label="Gaussian SE")
        pts = [p for p in data["points"] if p["d"] == d and p["gamma"] == 1.25]
        ax.errorbar([p["alpha"] for p in pts], [p["trained_mean"] for p in pts],
                    yerr=[p["trained_sem"] for p in pts], fmt="o", color="k", capsize=3,
                    label="trained (3 seeds, ± s.e.)")
        other = [p for p in data["points"] if p["d"] == d and p["gamma"] != 1.25]
        for p in other:
            # drawn beside the γ = 1.25 point of the same α so that neither hides the other
            x = p["alpha"] * 1.12
            ax.errorbar(x, p["trained_mean"], yerr=p["trained_sem"], fmt="s", color="C3",
                        capsize=3,
                        label=f"trained, γ = {p['gamma']}, α = {p['alpha']} (dashes: its SEs)")
            ax.plot(x, p["spiked"], "_", color="C0", markersize=16, mew=2)
            ax.plot(x, p["gaussian"], "_", color="C1", markersize=16, mew=2)
        ax.set_xscale("log")
        ax.set_xticks(ALPHAS, [str(a) for a in ALPHAS])
        ax.set_xticks([], minor=True)
        ax.set_xlabel("α = n/d²")
        ax.set_title(f"d = {d}, power law γ = 1.25, T = 2 softmax")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("test error")
    axes[1].legend(fontsize=8)
    # relative gap of each prediction to the trained mean against d, at small α
    ax = axes[2]
    for alpha, colour in zip(SMALL_ALPHAS, ("C2", "C4")):
        pts = sorted((p for p in data["points"] if p["gamma"] == 1.25
                      and p["alpha"] == alpha and p["d"] in GAP_DS), key=lambda p: p["d"])
        ds = [p["d"] for p in pts]
        for key, style in (("spiked", "-o"), ("gaussian", "--s")):
            gap = [100 * (p[key] / p["trained_mean"] - 1) for p in pts]
            err = [100 * p[key] * p["trained_sem"] / p["trained_mean"] ** 2 for p in pts]
            ax.errorbar(ds, gap, yerr=err, fmt=style, color=colour, capsize=3,
                        label=f"{key} SE, α = {alpha}")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xticks(GAP_DS, [str(d) for d in GAP_DS])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("d")
    ax.set_ylabel("(SE − trained) / trained  [%]")
    ax.set_title("gap at small α (± s.e. of the trained mean)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    print(f"wrote {FIGURE}")


def main(argv=None):
    global CONFIGS, SEEDS, N_TEST, LINE_ALPHAS, LINE_DS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true",
                        help="fit the models and solve the SE (writes the JSON) first")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:  # one small point and a two-point line; the figure is not redrawn
        CONFIGS, SEEDS, N_TEST = [(1.25, 12, (0.3,))], (0, 1), 500
        LINE_ALPHAS, LINE_DS = (0.2, 0.4), (12,)
        run(args, argv)
        return
    if args.run:
        run(args, argv)
    plot()


if __name__ == "__main__":
    main()
