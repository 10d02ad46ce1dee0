"""Same-instance gaps of a validation-grid store at one d (docs/validation.rst).

For every configuration of a ``make validate`` store, the mean over seeds of
``trained test error / same-instance prediction − 1`` at the chosen d (the issue's
"within 3 % at d = 100" check), its standard error, and the ``DomainWarning`` reasons the
predictions raised; for linear T = 1 also the gap over the token-leverage prediction
(``se_token_test_error``). Reads the store only (no training, no solve).

Usage::

    python benchmarks/grid_same_instance_gaps.py out/validate.sqlite [--d 100]
"""

from __future__ import annotations

import argparse
import collections
import json

import numpy as np

from skattn.finite_size import domain_reasons
from skattn.sweep import read_sweep


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
    parser.add_argument("store")
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--limit", type=float, default=0.03,
                        help="the gap to report against (default 3 %%)")
    args = parser.parse_args(argv)
    print(f"{'configuration':44s} T  gap at d={args.d} (mean ± s.e.)  note")
    for label, (T, g, why, token, warned) in same_instance_gaps(args.store, args.d).items():
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


if __name__ == "__main__":
    main()
