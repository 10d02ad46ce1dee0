"""Same-instance gaps at one d for chosen validation-grid configurations, with more seeds.

Trains each configuration of :data:`skattn.validation.VALIDATION_CONFIGS` whose label
contains one of the given strings at ``--d`` for ``--seeds`` teachers (the grid's own rows:
same teachers, training and test draws for seeds the grid ran) and prints the mean gap of
the trained test error over the same-instance prediction (docs/validation.rst).

Usage::

    python benchmarks/research/same_instance_d100.py "lin T1 α=0.6" "κ=0.75" --seeds 10
    # writes benchmarks/results/same_instance_d100.json
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from _common import add_common_arguments, write_result
from skattn.validation import VALIDATION_CONFIGS, simulation_row


def same_instance_gaps(cfg, d, n_seeds, n_test=20000):
    """Trained test error over the same-instance prediction, minus 1, for seeds 0 … n − 1.

    Uses the validation grid's rows (:func:`skattn.validation.simulation_row`): the same
    teachers, training and test draws as ``make validate`` for the seeds it ran.
    Returns the gaps and the last row.
    """
    gaps, row = [], None
    for seed in range(n_seeds):
        row = simulation_row(cfg, d, seed, n_test=n_test, same_instance_se=True)
        gaps.append(row["test_error"] / row["se_same_instance_test_error"] - 1)
    return np.array(gaps), row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labels", nargs="*", help="substrings of configuration labels")
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--n-test", type=int, default=20000)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    configs = [c for c in VALIDATION_CONFIGS if any(s in c.label for s in args.labels)]
    if args.quick:
        args.d, args.seeds, args.n_test = 12, 2, 500
        configs = configs[:1] or VALIDATION_CONFIGS[:1]
    elif not configs:
        parser.error(f"no configuration label contains any of {args.labels}")
    out = []
    for cfg in configs:
        g, _ = same_instance_gaps(cfg, args.d, args.seeds, args.n_test)
        out.append({"label": cfg.label, "gaps": g.tolist()})
        print(f"{cfg.label:40s} d={args.d} seeds={g.size} gap {100 * g.mean():+.2f} ± "
              f"{100 * g.std(ddof=1) / np.sqrt(g.size):.2f} %  (per seed: "
              f"{', '.join(f'{100 * x:+.1f}' for x in g)})", flush=True)
    write_result(args, "same_instance_d100.json", {"d": args.d, "n_test": args.n_test,
                                                   "rows": out}, script=__file__, argv=argv)


if __name__ == "__main__":
    main()
