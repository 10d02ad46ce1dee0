"""Linear attention, one token: the token-leverage prediction against trained models.

``skattn.theory.solve_token_state_evolution`` models the finite-d excess of trained models
on rank-one tokens over the Gaussian state evolution through the per-sample leverage
(docs/theory.rst, "Token leverage"). This script compares it, teacher by teacher, with

- ``stored``: the rank-one-token ERM fits of ``benchmarks/results/gaussian_sensing.json``
  (same teachers; the fits are L-BFGS plus a projected-gradient polish);
- ``grid LABEL ...``: the package's estimators on validation-grid configurations, trained
  as ``make validate`` does (:func:`skattn.validation.simulation_row`, same teachers and draws);
- ``fit``: new configurations (out of sample), fitted here on rank-one tokens with the
  solver of ``benchmarks/research/gaussian_sensing.py``.

For each it prints the gap of the trained test error over the token-leverage prediction and
over the default same-instance prediction (Gaussian state evolution), mean ± s.e. Each
teacher's token-leverage prediction uses its own Monte Carlo seed, so that the standard
error over teachers includes the Monte Carlo error (with one seed for all it would be a
common offset of about 1–2 %).

Usage::

    python benchmarks/research/token_leverage.py stored --keys noisy60 noisy100 recovery60
    python benchmarks/research/token_leverage.py grid "lin T1 Δ=0.3" "lin T1 α=0.6" --d 100 --seeds 3
    python benchmarks/research/token_leverage.py fit --alpha 0.1 --kappa0 1 --noise 0.5 --reg-lambda 0.1 --d 60 --seeds 4
    # each writes benchmarks/results/token_leverage_<mode>.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from _common import RESULTS, add_common_arguments, write_result
from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.theory.token_leverage import solve_token_state_evolution


#: Extra arguments of the token solver (``--quick``: fewer Monte Carlo draws and iterations).
SOLVER = {}


def _summary(label, rows):
    for key in ("token", "gaussian_se"):
        g = np.array([r["trained"] / r[key] - 1 for r in rows])
        sem = g.std(ddof=1) / np.sqrt(g.size) if g.size > 1 else float("nan")
        print(f"{label}: trained over {key:11s} {100 * g.mean():+.2f} ± {100 * sem:.2f} % "
              f"({g.size} teachers)", flush=True)


def stored(keys):
    with open(RESULTS / "gaussian_sensing.json", encoding="utf-8") as fh:
        data = json.load(fh)
    out = {}
    for key in keys:
        block, rows = data[key], []
        for r in block["rows"]:
            teacher = AttentionIndexedModel(r["d"], n_tokens=1,
                                            target=WishartTarget(block["kappa0"]),
                                            noise=block["noise"], attention="linear",
                                            random_state=1000 + r["seed"])
            t0 = time.time()
            res = solve_token_state_evolution(block["alpha"], target=teacher,
                                              reg_lambda=block["reg_lambda"],
                                              random_state=r["seed"], **SOLVER)
            rows.append({"seed": r["seed"], "d": r["d"], "trained": r["rank1"],
                         "gaussian_se": r["prediction"], "token": res.test_error,
                         "token_mc_se": res.mc_standard_error,
                         "token_gaussian": res.gaussian_test_error,
                         "converged": res.converged, "seconds": time.time() - t0})
            print(json.dumps(rows[-1]), flush=True)
        _summary(key, rows)
        out[key] = {k: block[k] for k in ("config", "alpha", "reg_lambda", "noise", "kappa0")}
        out[key]["rows"] = rows
    return out


def grid(labels, d, n_seeds, n_test=20000):
    from skattn.validation import VALIDATION_CONFIGS, make_teacher, simulation_row
    out = {}
    for cfg in VALIDATION_CONFIGS:
        if not any(s in cfg.label for s in labels):
            continue
        rows = []
        for seed in range(n_seeds):
            row = simulation_row(cfg, d, seed, n_test=n_test, same_instance_se=True)
            teacher = make_teacher(cfg, d, seed)
            res = solve_token_state_evolution(cfg.alpha, target=teacher,
                                              reg_lambda=cfg.reg_lambda,
                                              width_ratio=cfg.width_ratio, random_state=seed,
                                              **SOLVER)
            rows.append({"seed": seed, "d": d, "trained": row["test_error"],
                         "gaussian_se": row["se_same_instance_test_error"],
                         "token": res.test_error, "token_mc_se": res.mc_standard_error,
                         "converged": res.converged})
            print(json.dumps(rows[-1]), flush=True)
        _summary(cfg.label, rows)
        out[cfg.label] = rows
    return out


def fit(alpha, kappa0, noise, reg_lambda, d, n_seeds):
    import torch
    from gaussian_sensing import fit_psd_trace, sensing_matrices  # benchmarks/research/

    from skattn.theory import solve_state_evolution
    torch.set_num_threads(1)
    rows = []
    for seed in range(n_seeds):
        teacher = AttentionIndexedModel(d, n_tokens=1, target=WishartTarget(kappa0), noise=noise,
                                        attention="linear", random_state=500 + seed)
        S0, n = teacher.S0_, int(round(alpha * d * d))
        rng = np.random.default_rng(seed)
        A = sensing_matrices("rank1", n, d, rng)
        y = A @ S0.reshape(-1) + np.sqrt(noise) * rng.standard_normal(n)
        S, change = fit_psd_trace(A, y, d, reg_lambda)
        res = solve_token_state_evolution(alpha, target=teacher, reg_lambda=reg_lambda,
                                          random_state=seed, **SOLVER)
        rows.append({"seed": seed, "d": d, "trained": 2 * np.sum((S - S0) ** 2) / d + noise,
                     "polish_change": change,
                     "gaussian_se": float(solve_state_evolution(
                         alpha, target=teacher, reg_lambda=reg_lambda).test_error),
                     "token": res.test_error, "token_mc_se": res.mc_standard_error,
                     "converged": res.converged})
        print(json.dumps(rows[-1]), flush=True)
    label = f"fit α={alpha} κ0={kappa0} Δ={noise} λ={reg_lambda}"
    _summary(label, rows)
    return {label: {"alpha": alpha, "kappa0": kappa0, "noise": noise,
                    "reg_lambda": reg_lambda, "rows": rows}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("stored", "grid", "fit"), nargs="?", default="fit")
    parser.add_argument("labels", nargs="*", help="grid: substrings of configuration labels")
    parser.add_argument("--keys", nargs="+", default=["noisy60", "noisy100", "recovery60"])
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--kappa0", type=float, default=1.0)
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument("--reg-lambda", type=float, default=0.1)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.quick:  # the fit mode at d = 12, two teachers, a coarse token solver
        args.mode, args.d, args.seeds = "fit", 12, 2
        SOLVER.update(n_draws=8, n_tokens_mc=200, max_iter=20)
    if args.mode == "stored":
        result = stored(args.keys)
    elif args.mode == "grid":
        result = grid(args.labels, args.d, args.seeds)
    else:
        result = fit(args.alpha, args.kappa0, args.noise, args.reg_lambda, args.d, args.seeds)
    write_result(args, f"token_leverage_{args.mode}.json", result, script=__file__, argv=argv)


if __name__ == "__main__":
    main()
