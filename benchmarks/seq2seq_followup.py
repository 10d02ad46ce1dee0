"""The routed finite-d seq2seq prediction against the stored *lin T2 seq2seq* simulations.

Reads the simulation rows of a finite-size sweep store (``make validate`` and its
follow-up, docs/validation.rst), recomputes each row's same-instance prediction
``solve_state_evolution(..., target=teacher, task="seq2seq")`` (the exact-Gram channel of
docs/theory.rst §4) and prints, per d, the trained error, the prediction, their gap, the
simulation corrected by SE_∞/SE_d, and the fits of the gap (constant and ``r + c/d``).

Usage::

    python benchmarks/seq2seq_followup.py followup.sqlite [--label "lin T2 seq2seq"]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import warnings

import numpy as np

from skattn.finite_size import FSSConfig, _seed_int
from skattn.theory import solve_state_evolution


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
    parser.add_argument("store")
    parser.add_argument("--label", default="lin T2 seq2seq")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from skattn.data import AttentionIndexedModel

    config, rows = stored_simulations(args.store, args.label)
    kw = config.se_kwargs()
    continuum = float(solve_state_evolution(target=config.make_target(), **kw).test_error)
    by_d = {}
    for d, seed, trained in rows:
        teacher = AttentionIndexedModel(d, n_tokens=config.n_tokens,
                                        target=config.make_target(), beta=config.target_beta,
                                        noise=config.noise, attention=config.attention,
                                        random_state=_seed_int(seed, d, 0))
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
    for name, design in (("constant", lambda x: [np.ones_like(x)]),
                         ("r + c/d", lambda x: [np.ones_like(x), x])):
        coef, err, chi2 = weighted_fit(x, y, w, design)
        print(f"gap fit {name}: r = {100 * coef[0]:+.2f} ± {100 * err[0]:.2f} %, "
              f"χ² = {chi2:.2f} ({len(x) - len(coef)} dof)")


if __name__ == "__main__":
    main()
