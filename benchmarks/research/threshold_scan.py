"""Same-instance gaps at d = 100 along α, across a threshold (docs/domain.rst).

``lin``: linear T = 1, λ = 0.05, Wishart(0.5), across the perfect-recovery threshold
α_perf = 0.422. ``sm``: softmax T = 2, Δ = 0.1, λ = 1e-3, Wishart(0.5), across the
interpolation threshold α_interp = 0.1725. ``sm3``: the same for softmax T = 3
(α_interp = 0.069). ``sm-lambda``, ``sm3-lambda`` and ``lin-lambda`` scan λ instead, at the
interpolation peak (softmax T = 2, α = 0.17; T = 3, α = 0.07) and at 0.87 α_interp (linear
T = 1, α = 0.3), all with Δ = 0.1. Eight teachers per point (the validation grid's seeding,
:func:`skattn.validation.simulation_row`), 20 000 test samples; prints the mean gap of the
trained test error over the same-instance prediction, minus 1.

``--token`` (``lin`` only) adds the token-leverage prediction for the same teachers
(:func:`skattn.theory.solve_token_state_evolution`, about 10 s a teacher) and the gap over it.

Usage::

    python benchmarks/research/threshold_scan.py lin     # about 2 min on 2 cores
    python benchmarks/research/threshold_scan.py sm      # about 6 min
    python benchmarks/research/threshold_scan.py sm-lambda
    python benchmarks/research/threshold_scan.py lin --token --alphas 0.3 0.5
    # each writes benchmarks/results/threshold_scan_<scan>[_token].json
"""

import argparse
import warnings

import numpy as np
from _common import add_common_arguments, write_result
from same_instance_d100 import same_instance_gaps  # benchmarks/research/same_instance_d100.py

from skattn.validation import FSSConfig

SCANS = {
    "lin": ([0.3, 0.38, 0.42, 0.46, 0.5, 0.6, 0.8],
            lambda a: FSSConfig(label="scan", alpha=a, reg_lambda=0.05, n_tokens=1,
                                attention="linear")),
    "sm": ([0.1, 0.13, 0.15, 0.17, 0.19, 0.22, 0.3],
           lambda a: FSSConfig(label="scan", alpha=a, reg_lambda=1e-3, noise=0.1)),
    # λ scans: the value scanned is λ
    "sm-lambda": ([1e-3, 3e-3, 1e-2, 3e-2],
                  lambda lam: FSSConfig(label="scan", alpha=0.17, reg_lambda=lam, noise=0.1)),
    # softmax T = 3 (α_interp = 0.069 at Δ = 0.1): the FiniteSizeWarning's other T
    "sm3": ([0.05, 0.06, 0.07, 0.08, 0.1],
            lambda a: FSSConfig(label="scan", alpha=a, reg_lambda=1e-3, noise=0.1,
                                n_tokens=3)),
    "sm3-lambda": ([1e-3, 3e-3, 1e-2, 3e-2],
                   lambda lam: FSSConfig(label="scan", alpha=0.07, reg_lambda=lam, noise=0.1,
                                         n_tokens=3)),
    "lin-lambda": ([1e-3, 3e-3, 1e-2],
                   lambda lam: FSSConfig(label="scan", alpha=0.3, reg_lambda=lam, n_tokens=1,
                                         attention="linear", noise=0.1)),
}


def token_gaps(cfg, d, n_seeds, n_test=20000):
    """Per teacher: trained, Gaussian same-instance and token-leverage test errors."""
    from skattn.theory.token_leverage import solve_token_state_evolution
    from skattn.validation import make_teacher, simulation_row
    rows = []
    for seed in range(n_seeds):
        row = simulation_row(cfg, d, seed, n_test=n_test, same_instance_se=True)
        teacher = make_teacher(cfg, d, seed)
        res = solve_token_state_evolution(cfg.alpha, target=teacher, reg_lambda=cfg.reg_lambda,
                                          width_ratio=cfg.width_ratio,
                                          random_state=seed)  # independent MC errors
        rows.append({"alpha": cfg.alpha, "reg_lambda": cfg.reg_lambda, "seed": seed,
                     "trained": row["test_error"],
                     "gaussian_se": row["se_same_instance_test_error"],
                     "token": res.test_error, "token_mc_se": res.mc_standard_error})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scan", choices=sorted(SCANS), nargs="?", default="lin")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--token", action="store_true")
    parser.add_argument("--alphas", type=float, nargs="+", default=None,
                        help="the values scanned (λ for the *-lambda scans)")
    parser.add_argument("--d", type=int, default=100)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    alphas, make = SCANS[args.scan]
    alphas = args.alphas or alphas
    d, n_test = args.d, 20000
    if args.quick:
        d, n_test, args.seeds, alphas = 12, 500, 2, alphas[:1]
    name_of_file = f"threshold_scan_{args.scan.replace('-', '_')}" + \
        ("_token" if args.token else "") + ".json"
    name = "λ" if args.scan.endswith("lambda") else "α"
    if args.token:
        if not args.scan.startswith("lin"):
            parser.error("--token is for the linear T = 1 scans (lin, lin-lambda)")
        out = []
        for alpha in alphas:
            rows = token_gaps(make(alpha), d, args.seeds, n_test)
            out += rows
            for key in ("gaussian_se", "token"):
                g = np.array([r["trained"] / r[key] - 1 for r in rows])
                print(f"{args.scan} {name}={alpha}: gap over {key:11s} {100 * g.mean():+.1f} ± "
                      f"{100 * g.std(ddof=1) / np.sqrt(g.size):.1f} %", flush=True)
        write_result(args, name_of_file, {"scan": args.scan, "d": d, "rows": out},
                     script=__file__, argv=argv)
        return
    out = []
    for alpha in alphas:
        g, row = same_instance_gaps(make(alpha), d, args.seeds, n_test)
        out.append({"value": alpha, "gaps": g.tolist(), "config": make(alpha).to_dict()})
        print(f"{args.scan} {name}={alpha}: gap {100 * g.mean():+.1f} ± "
              f"{100 * g.std(ddof=1) / np.sqrt(g.size):.1f} %, trained error "
              f"{row['test_error']:.4g} (last seed)", flush=True)
    write_result(args, name_of_file, {"scan": args.scan, "d": d, "scanned": name,
                                      "rows": out}, script=__file__, argv=argv)


if __name__ == "__main__":
    main()
