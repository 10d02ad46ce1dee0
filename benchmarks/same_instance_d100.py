"""Same-instance gaps at one d for chosen validation-grid configurations, with more seeds.

Trains each configuration of :data:`skattn.validation_grid.VALIDATION_CONFIGS` whose label
contains one of the given strings at ``--d`` for ``--seeds`` teachers (the grid's own rows:
same teachers, training and test draws for seeds the grid ran) and prints the mean gap of
the trained test error over the same-instance prediction (docs/validation.rst).

Usage::

    python benchmarks/same_instance_d100.py "lin T1 α=0.6" "κ=0.75" --seeds 10
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from skattn.finite_size import _fss_row
from skattn.validation_grid import VALIDATION_CONFIGS


def same_instance_gaps(cfg, d, n_seeds, n_test=20000):
    """Trained test error over the same-instance prediction, minus 1, for seeds 0 … n − 1.

    Uses the validation grid's rows (:func:`skattn.finite_size._fss_row`): the same
    teachers, training and test draws as ``make validate`` for the seeds it ran.
    Returns the gaps and the last row.
    """
    gaps, row = [], None
    for seed in range(n_seeds):
        row = _fss_row("simulation", cfg.to_json(), d=d, seed=seed, n_test=n_test,
                       same_instance_se=True)
        gaps.append(row["test_error"] / row["se_same_instance_test_error"] - 1)
    return np.array(gaps), row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labels", nargs="+")
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--n-test", type=int, default=20000)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    for cfg in VALIDATION_CONFIGS:
        if not any(s in cfg.label for s in args.labels):
            continue
        g, _ = same_instance_gaps(cfg, args.d, args.seeds, args.n_test)
        print(f"{cfg.label:40s} d={args.d} seeds={g.size} gap {100 * g.mean():+.2f} ± "
              f"{100 * g.std(ddof=1) / np.sqrt(g.size):.2f} %  (per seed: "
              f"{', '.join(f'{100 * x:+.1f}' for x in g)})", flush=True)


if __name__ == "__main__":
    main()
