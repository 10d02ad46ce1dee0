"""The routed finite-d seq2seq prediction against the stored *lin T2 seq2seq* simulations.

Reads the simulation rows of a finite-size sweep store (``make validate`` and its
follow-up, docs/validation.rst), recomputes each row's same-instance prediction
``solve_state_evolution(..., target=teacher, task="seq2seq")`` (the exact-Gram channel of
docs/theory.rst §4) and prints, per d, the trained error, the prediction, their gap, the
simulation corrected by SE_∞/SE_d, and the fits of the gap (constant and ``r + c/d``).

Usage::

    python benchmarks/research/seq2seq_followup.py followup.sqlite [--label "lin T2 seq2seq"]
    # writes benchmarks/results/seq2seq_followup.json
    # --quick: a tiny store of the configuration at d = 8 and 12 (made here)
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import warnings

import numpy as np

from _common import add_common_arguments, results_dir, write_result
from skattn.theory import solve_state_evolution
from skattn.validation import FSSConfig, make_teacher


def stored_simulations(store, label):
    """``(config, [(d, seed, test_error), ...])`` of one configuration of a sweep store."""
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    config, rows = None, []
    for params, results, status in conn.execute(
            "select params, results, status from sweep_rows"):
        p = json.loads(params)
        cfg = json.loads(p["config"])
        if cfg["label"] != label or p["kind"] != "simulation" or status != "ok":
            continue
        config = FSSConfig.from_dict(cfg)
        rows.append((p["d"], p["seed"], json.loads(results)["test_error"]))
    if config is None:
        raise ValueError(f"no simulation rows labelled {label!r} in {store}.")
    return config, sorted(rows)


def weighted_fit(x, y, w, design):
    """Weighted least squares: coefficients, their standard errors, χ²."""
    A = np.stack(design(x), axis=1) * np.sqrt(w)[:, None]
    b = y * np.sqrt(w)
    coef = np.linalg.lstsq(A, b, rcond=None)[0]
    cov = np.linalg.inv(A.T @ A)
    return coef, np.sqrt(np.diag(cov)), float(np.sum((A @ coef - b) ** 2))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?", default=None,
                        help="a finite-size sweep store (SQLite)")
    parser.add_argument("--label", default="lin T2 seq2seq")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.quick:
        args.store = quick_store(results_dir(args), args.label)
    elif args.store is None:
        parser.error("the store is required (or --quick)")
    config, rows = stored_simulations(args.store, args.label)
    kw = config.se_kwargs()
    continuum = float(solve_state_evolution(target=config.make_target(), **kw).test_error)
    by_d = {}
    for d, seed, trained in rows:
        teacher = make_teacher(config, d, seed)
        pred = float(solve_state_evolution(target=teacher, **kw).test_error)
        by_d.setdefault(d, []).append((trained, pred))
    print(f"{args.label}: continuum SE {continuum:.6f}")
    ds, gaps, weights = [], [], []
    for d, vals in sorted(by_d.items()):
        v = np.array(vals)
        gap = v[:, 0] / v[:, 1] - 1
        se = gap.std(ddof=1) / np.sqrt(len(gap))
        print(f"d={d:4d} n={len(gap)} trained {v[:, 0].mean():.6f} ± "
              f"{v[:, 0].std(ddof=1) / np.sqrt(len(v)):.6f}  SE_d {v[:, 1].mean():.6f}  "
              f"gap {100 * gap.mean():+.2f} ± {100 * se:.2f} %  corrected "
              f"{np.mean(v[:, 0] / v[:, 1]) * continuum:.6f}")
        ds.append(d)
        gaps.append(gap.mean())
        weights.append(1 / se ** 2)
    x, y, w = 1 / np.array(ds, float), np.array(gaps), np.array(weights)
    fits = {}
    for name, design in (("constant", lambda x: [np.ones_like(x)]),
                         ("r + c/d", lambda x: [np.ones_like(x), x])):
        coef, err, chi2 = weighted_fit(x, y, w, design)
        fits[name] = {"coef": coef.tolist(), "err": err.tolist(), "chi2": chi2}
        print(f"gap fit {name}: r = {100 * coef[0]:+.2f} ± {100 * err[0]:.2f} %, "
              f"χ² = {chi2:.2f} ({len(x) - len(coef)} dof)")
    write_result(args, "seq2seq_followup.json",
                 {"store": str(args.store), "label": args.label, "continuum": continuum,
                  "by_d": {str(d): v for d, v in sorted(by_d.items())}, "fits": fits},
                 script=__file__, argv=argv)


def quick_store(folder, label):
    """A tiny store of the labelled grid configuration: two seeds at d = 8 and 12."""
    from skattn.sweep import run_sweep
    from skattn.validation import VALIDATION_CONFIGS, fss_row

    cfg = next(c for c in VALIDATION_CONFIGS if c.label == label)
    store = folder / "seq2seq_followup_quick.sqlite"
    run_sweep(fss_row, [{"kind": "simulation", "config": cfg.to_json(), "d": d, "seed": seed,
                         "n_test": 200, "same_instance_se": False}
                        for d in (8, 12) for seed in (0, 1)], output=store)
    return store


if __name__ == "__main__":
    main()
