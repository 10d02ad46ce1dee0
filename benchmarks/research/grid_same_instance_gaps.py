"""Same-instance gaps of a validation-grid store at one d (docs/validation.rst).

For every configuration of a ``make validate`` store, the mean over seeds of
``trained test error / same-instance prediction − 1`` at the chosen d (the issue's
"within 3 % at d = 100" check), its standard error, and the ``DomainWarning`` reasons the
predictions raised; for linear T = 1 also the gap over the token-leverage prediction
(``se_token_test_error``). Reads the store only (no training, no solve).

Usage::

    python benchmarks/research/grid_same_instance_gaps.py out/validate.sqlite [--d 100]
    # writes benchmarks/results/grid_same_instance_gaps.json
    # --quick: a tiny store of one configuration at d = 12 (made here)
"""

from __future__ import annotations

import argparse
import collections
import json

import numpy as np

from _common import add_common_arguments, results_dir, write_result
from skattn.sweep import read_sweep
from skattn.validation import domain_reasons


def same_instance_gaps(store, d):
    """``label -> (n_tokens, gaps, reasons, token-leverage gaps, finite-size warned)`` for
    the simulation rows of ``store`` at ``d``."""
    gaps = collections.defaultdict(list)
    token_gaps = collections.defaultdict(list)
    reasons = collections.defaultdict(set)
    finite_size = set()
    tokens = {}
    for row in read_sweep(store):
        if row.get("kind") != "simulation" or row.get("d") != d or row["status"] != "ok":
            continue
        cfg = json.loads(row["config"])
        label = cfg["label"]
        tokens[label] = cfg["n_tokens"]
        se = row.get("se_same_instance_test_error")
        if se is not None and np.isfinite(se):
            gaps[label].append(row["test_error"] / se - 1)
        reasons[label].update(domain_reasons(row.get("se_same_instance_domain") or ""))
        if "finite-size effect not modelled" in (row.get("se_same_instance_domain") or ""):
            finite_size.add(label)      # a FiniteSizeWarning (docs/domain.rst)
        token = row.get("se_token_test_error")
        if token is not None and np.isfinite(token):
            token_gaps[label].append(row["test_error"] / token - 1)
    return {k: (tokens[k], np.array(gaps[k]), sorted(reasons[k]), np.array(token_gaps[k]),
                k in finite_size) for k in tokens}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?", default=None,
                        help="a make validate store (default out/validate.sqlite)")
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--limit", type=float, default=0.03,
                        help="the gap to report against (default 3 %%)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.store, args.d = quick_store(results_dir(args)), 12
    elif args.store is None:
        args.store = "out/validate.sqlite"
    out = {}
    print(f"{'configuration':44s} T  gap at d={args.d} (mean ± s.e.)  note")
    for label, (T, g, why, token, warned) in same_instance_gaps(args.store, args.d).items():
        out[label] = {"n_tokens": T, "gaps": g.tolist(), "reasons": why,
                      "token_gaps": token.tolist(), "finite_size_warning": bool(warned)}
        if g.size == 0:
            print(f"{label:44s} {T}  no finite prediction")
            continue
        sem = g.std(ddof=1) / np.sqrt(g.size) if g.size > 1 else np.nan
        note = ("outside the domain: " + ", ".join(why) if why else
                f"above {100 * args.limit:.0f} %" if abs(g.mean()) > args.limit and T <= 3
                else "")
        if warned:
            note += "; FiniteSizeWarning" if note else "FiniteSizeWarning"
        if token.size:  # linear T = 1: the token-leverage prediction too
            tsem = token.std(ddof=1) / np.sqrt(token.size) if token.size > 1 else np.nan
            note = (f"token leverage {100 * token.mean():+.1f} ± {100 * tsem:.1f} % "
                    f"({token.size}); " + note)
        print(f"{label:44s} {T}  {100 * g.mean():+6.1f} ± {100 * sem:4.1f} % ({g.size})  {note}")
    write_result(args, "grid_same_instance_gaps.json",
                 {"store": str(args.store), "d": args.d, "limit": args.limit,
                  "configurations": out}, script=__file__, argv=argv)


def quick_store(folder):
    """A tiny store: two simulation rows of the grid's first configuration at d = 12."""
    import warnings

    from skattn.sweep import run_sweep
    from skattn.validation import VALIDATION_CONFIGS, fss_row

    store = folder / "grid_same_instance_gaps_quick.sqlite"
    rows = [{"kind": "simulation", "config": VALIDATION_CONFIGS[0].to_json(), "d": 12,
             "seed": seed, "n_test": 200, "same_instance_se": True} for seed in (0, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_sweep(fss_row, rows, output=store)
    return store


if __name__ == "__main__":
    main()
