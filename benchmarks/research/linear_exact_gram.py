"""Factored linear seq2lab at finite d: Gaussian SE at α_eff against the exact-Gram channel.

For linear attention the same-instance finite-d prediction can be made two ways: the
Gaussian state evolution at ``α_eff = α d/(d+1)`` (today's default) or the exact-Gram
(Bartlett) channel of docs/theory.rst §4 with the seq2lab loss, at the nominal α. This
script trains models (the validation grid's seeding) and prints, per configuration, the
mean gap of the trained test error over each prediction.

Usage::

    python benchmarks/research/linear_exact_gram.py [--seeds 8] [--d 100]
    # writes benchmarks/results/linear_exact_gram.json
"""

import argparse
import warnings

import numpy as np

from _common import add_common_arguments, write_result
from skattn.theory.seq2seq import solve_seq2seq_state_evolution
from skattn.validation import VALIDATION_CONFIGS, FSSConfig, make_teacher, simulation_row

SCAN = [FSSConfig(label=f"lin T1 α={a}", alpha=a, reg_lambda=0.05, n_tokens=1,
                  attention="linear") for a in (0.3, 0.5, 0.6, 0.8)]


def _configs():
    grid = [c for c in VALIDATION_CONFIGS if c.attention == "linear" and c.task == "seq2lab"
            and c.estimator == "tied" and c.width_ratio == 1.0
            and c.target.get("family") == "wishart"]
    return SCAN + [c for c in grid if c.label not in {s.label for s in SCAN}]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--d", type=int, default=100)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    d, rows, n_test, configs = args.d, [], 20000, _configs()
    if args.quick:
        d, args.seeds, n_test, configs = 12, 2, 500, configs[:1]
    for cfg in configs:
        g_gauss, g_gram = [], []
        for seed in range(args.seeds):
            row = simulation_row(cfg, d, seed, n_test=n_test, same_instance_se=True)
            teacher = make_teacher(cfg, d, seed)
            gram = solve_seq2seq_state_evolution(
                cfg.alpha, target=teacher, reg_lambda=cfg.reg_lambda, n_tokens=cfg.n_tokens,
                noise=cfg.noise, loss="seq2lab").seq2lab_test_error
            g_gauss.append(row["test_error"] / row["se_same_instance_test_error"] - 1)
            g_gram.append(row["test_error"] / gram - 1)
            rows.append({"label": cfg.label, "seed": seed, "trained": row["test_error"],
                         "gaussian_alpha_eff": row["se_same_instance_test_error"],
                         "exact_gram": float(gram)})
        a, b = np.array(g_gauss), np.array(g_gram)
        se = np.sqrt(len(a))
        print(f"{cfg.label:34s} gap vs Gaussian α_eff {100 * a.mean():+.1f} ± "
              f"{100 * a.std(ddof=1) / se:.1f} %   vs exact Gram {100 * b.mean():+.1f} ± "
              f"{100 * b.std(ddof=1) / se:.1f} %", flush=True)
    write_result(args, "linear_exact_gram.json", {"d": d, "rows": rows}, script=__file__,
                 argv=argv)


if __name__ == "__main__":
    main()
