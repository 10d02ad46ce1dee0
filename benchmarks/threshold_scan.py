"""Same-instance gaps at d = 100 along α, across a threshold (docs/domain.rst).

``lin``: linear T = 1, λ = 0.05, Wishart(0.5), across the perfect-recovery threshold
α_perf = 0.422. ``sm``: softmax T = 2, Δ = 0.1, λ = 1e-3, Wishart(0.5), across the
interpolation threshold α_interp = 0.1725. Eight teachers per α (the validation grid's
seeding, :func:`skattn.finite_size._fss_row`), 20 000 test samples; prints the mean gap of
the trained test error over the same-instance prediction, minus 1.

Usage::

    python benchmarks/threshold_scan.py lin     # about 2 min on 2 cores
    python benchmarks/threshold_scan.py sm      # about 3 min
"""

import argparse
import warnings

import numpy as np

from skattn.finite_size import FSSConfig

from same_instance_d100 import same_instance_gaps  # benchmarks/same_instance_d100.py

SCANS = {
    "lin": ([0.3, 0.38, 0.42, 0.46, 0.5, 0.6, 0.8],
            lambda a: FSSConfig(label="scan", alpha=a, reg_lambda=0.05, n_tokens=1,
                                attention="linear")),
    "sm": ([0.1, 0.13, 0.15, 0.17, 0.19, 0.22, 0.3],
           lambda a: FSSConfig(label="scan", alpha=a, reg_lambda=1e-3, noise=0.1)),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scan", choices=sorted(SCANS))
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    alphas, make = SCANS[args.scan]
    for alpha in alphas:
        g, row = same_instance_gaps(make(alpha), 100, args.seeds)
        print(f"{args.scan} α={alpha}: gap {100 * g.mean():+.1f} ± "
              f"{100 * g.std(ddof=1) / np.sqrt(g.size):.1f} %, trained error "
              f"{row['test_error']:.4g} (last seed)", flush=True)


if __name__ == "__main__":
    main()
