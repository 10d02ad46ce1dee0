"""The leverage-mixture prediction against trained models, teacher by teacher.

For each configuration and seed: the trained test error of the validation grid's row
(:func:`skattn.validation.simulation_row`: same teachers, training and test draws as
``make validate`` and ``threshold_scan.py``), the default same-instance
prediction (``solve_state_evolution(..., target=teacher)``) and the leverage-mixture one
(:func:`skattn.theory.solve_leverage_state_evolution`); prints the mean gap of the trained
error over each, minus 1, ± the standard error over teachers (docs/domain.rst, "Leverage
mixture").

Sets (d = 100 unless ``--d``):

- ``scan``: softmax T = 2, Δ = 0.1, Wishart(0.5): α ∈ {0.1 … 0.3} at λ = 1e-3 (across
  α_interp = 0.1725) and λ ∈ {3e-3, 0.01, 0.03} at α = 0.17;
- ``scan3``: the same for T = 3 (α_interp = 0.069);
- ``grid``: the validation grid's factored seq2lab rows at full width with a Wishart
  target (softmax T = 2, 3; linear T = 1, 2, 3);
- ``stored``: no training; the trained errors stored by earlier benchmarks
  (``results/threshold_scan_token.json``, ``threshold_scan_lin_lambda_token.json``: linear
  T = 1 at d = 100; ``gaussian_sensing_softmax.json``: softmax T = 2 at d = 60) against the
  leverage mixture for the same teachers.

Usage::

    python benchmarks/research/leverage_mixture.py scan --seeds 8

Rows are appended to ``benchmarks/results/leverage_mixture.jsonl`` as they finish, after a
line with the command and the date; rows already in the file are not run again (resume).
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
from _common import RESULTS, add_common_arguments, provenance, results_dir
from skattn.theory import solve_state_evolution
from skattn.theory.leverage_mixture import solve_leverage_state_evolution
from skattn.theory.leverage_mixture import LEVERAGE_N_TOKENS
from skattn.validation import VALIDATION_CONFIGS, FSSConfig, make_teacher, simulation_row


def _scan(n_tokens, alphas, alpha_peak, lambdas):
    rows = [FSSConfig(label=f"sm T{n_tokens} α={a:g} λ=1e-3", alpha=a, reg_lambda=1e-3,
                      noise=0.1, n_tokens=n_tokens) for a in alphas]
    rows += [FSSConfig(label=f"sm T{n_tokens} α={alpha_peak:g} λ={lam:g}", alpha=alpha_peak,
                       reg_lambda=lam, noise=0.1, n_tokens=n_tokens) for lam in lambdas]
    return rows


SETS = {
    "scan": _scan(2, [0.1, 0.13, 0.15, 0.17, 0.19, 0.22, 0.3], 0.17, [3e-3, 1e-2, 3e-2]),
    "scan3": _scan(3, [0.05, 0.06, 0.07, 0.08, 0.1], 0.07, [3e-3, 1e-2, 3e-2]),
    "grid": [c for c in VALIDATION_CONFIGS
             if c.estimator == "tied" and c.task == "seq2lab" and c.width_ratio >= 1
             and c.n_tokens in LEVERAGE_N_TOKENS[c.attention]
             and c.target["family"] != "powerlaw"],
}


def _former(cfg):
    """The correction that carried the prediction before the leverage mixture: the exact
    Gram for softmax seq2lab (T <= 3), the Gaussian core for linear attention."""
    return "exact_gram" if cfg.attention == "softmax" and cfg.n_tokens <= 3 else "none"


def one_row(cfg, d, seed, n_test=20000):
    """Trained, former-default and leverage-mixture test errors of one teacher.

    ``default_se`` is the prediction without the leverage mixture (``correction="exact_gram"``
    for softmax, ``"none"`` for linear attention: the
    exact-Gram channel for softmax, the Gaussian state evolution at α_eff for linear
    attention), the default before the mixture was routed.
    """
    row = simulation_row(cfg, d, seed, n_test=n_test)
    teacher = make_teacher(cfg, d, seed)
    former = solve_state_evolution(target=teacher, correction=_former(cfg),
                                   **cfg.se_kwargs())
    res = solve_leverage_state_evolution(cfg.alpha, target=teacher, reg_lambda=cfg.reg_lambda,
                                         beta=cfg.beta, random_state=seed)
    return {"label": cfg.label, "d": d, "seed": seed, "alpha": cfg.alpha,
            "reg_lambda": cfg.reg_lambda, "n_tokens": cfg.n_tokens,
            "trained": row["test_error"], "default_se": former.test_error,
            "leverage": res.test_error, "gaussian": res.gaussian_test_error,
            "leverage_spread": res.leverage_spread, "converged": res.converged}


def stored_rows():
    """The leverage mixture for the teachers of stored trained errors (no training)."""
    def load(name):
        with open(RESULTS / name, encoding="utf-8") as fh:
            return json.load(fh)

    sources = [("lin T1 Δ=0.1", 0.1, load("threshold_scan_lin_lambda_token.json")["rows"]),
               ("lin T1 Δ=0", 0.0, load("threshold_scan_lin_token.json")["rows"])]
    for tag, noise, rows in sources:
        for r in rows:
            lam = r.get("reg_lambda", 0.05)
            cfg = FSSConfig(label=f"{tag} α={r['alpha']:g} λ={lam:g}", alpha=r["alpha"],
                            reg_lambda=lam, noise=noise, n_tokens=1, attention="linear")
            yield cfg, 100, r["seed"], r["trained"], r["gaussian_se"]
    for r in load("gaussian_sensing_softmax.json")["rows"]:
        cfg = FSSConfig(label="sm T2 Δ=0.1 λ=1e-3 α=0.15", alpha=0.15, reg_lambda=1e-3,
                        noise=0.1)
        yield cfg, r["d"], r["seed"], r["tokens"], r["prediction"]


def summarise(rows):
    """``label -> (n, gap over default, s.e., gap over leverage mixture, s.e.)``."""
    out = {}
    for label in dict.fromkeys(r["label"] for r in rows):
        sel = [r for r in rows if r["label"] == label]
        g_def = np.array([r["trained"] / r["default_se"] - 1 for r in sel])
        g_lev = np.array([r["trained"] / r["leverage"] - 1 for r in sel])
        sem = (lambda g: g.std(ddof=1) / np.sqrt(g.size) if g.size > 1 else np.nan)
        out[label] = (len(sel), g_def.mean(), sem(g_def), g_lev.mean(), sem(g_lev))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", choices=sorted(SETS) + ["stored"], nargs="?", default="grid")
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--labels", nargs="*", default=None,
                        help="only the configurations whose label contains one of these")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    n_test, sets = 20000, dict(SETS)
    if args.quick:
        args.set, args.d, args.seeds, n_test = "grid", 12, 2, 500
        sets["grid"] = SETS["grid"][:1]
    output = results_dir(args) / "leverage_mixture.jsonl"
    done = []
    if output.exists():
        with open(output, encoding="utf-8") as fh:
            done = [r for r in map(json.loads, filter(str.strip, fh)) if "command" not in r]
    meta = provenance(__file__, argv)
    meta["quick"] = bool(args.quick)
    with open(output, "a", encoding="utf-8") as fh:  # which run appended the rows below
        fh.write(json.dumps(meta) + "\n")

    def write_row(row):
        with open(output, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    have = {(r["label"], r["d"], r["seed"]) for r in done}
    # one row per (configuration, d, seed): the last one written
    rows = list({(r["label"], r["d"], r["seed"]): r for r in done}.values())
    if args.set == "stored":
        for cfg, d, seed, trained, former in stored_rows():
            if (cfg.label, d, seed) in have:
                continue
            teacher = make_teacher(cfg, d, seed)
            res = solve_leverage_state_evolution(cfg.alpha, target=teacher,
                                                 reg_lambda=cfg.reg_lambda, random_state=seed)
            rows.append({"label": cfg.label, "d": d, "seed": seed, "alpha": cfg.alpha,
                         "reg_lambda": cfg.reg_lambda, "n_tokens": cfg.n_tokens,
                         "trained": trained, "default_se": former,
                         "leverage": res.test_error, "gaussian": res.gaussian_test_error,
                         "leverage_spread": res.leverage_spread,
                         "converged": res.converged})
            print(json.dumps(rows[-1]), flush=True)
            write_row(rows[-1])
    for cfg in sets.get(args.set, []):
        if args.labels and not any(s in cfg.label for s in args.labels):
            continue
        for seed in range(args.seeds):
            if (cfg.label, args.d, seed) in have:
                continue
            rows.append(one_row(cfg, args.d, seed, n_test))
            print(json.dumps(rows[-1]), flush=True)
            write_row(rows[-1])
    print(f"{'configuration':42s} {'n':>3s}  {'gap over default SE':>20s}  "
          f"{'gap over leverage mixture':>26s}")
    names = {c.label for c in sets.get(args.set, [])}
    for label, (n, gd, sd, gl, sl) in summarise(
            [r for r in rows if (r["d"] == args.d and r["label"] in names)
             or args.set == "stored"]).items():
        print(f"{label:42s} {n:3d}  {100 * gd:+7.2f} ± {100 * sd:4.2f} %   "
              f"{100 * gl:+7.2f} ± {100 * sl:4.2f} %")


if __name__ == "__main__":
    main()
