"""The finite-d rule α_eff under a rank cap that does not bind, out of sample.

Linear T = 2, Wishart(0.5), α = 0.3, λ = 0.05, width κ = 0.75 (the cap does not bind): the
trained test error (20 000 samples, the validation grid's seeding) over the same-instance
prediction, with the rule (today: α d/(d + 1), the full-width minimiser at λ̃ = √κ λ) and
without it (the fixed point at α, what every rank cap got before 2026-12-01).
docs/theory.rst §4 "Finite d".

Usage::

    python benchmarks/research/inactive_cap_rule.py --d 100 --seeds 8
    # writes benchmarks/results/inactive_cap_rule.json
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from _common import add_common_arguments, write_result
from skattn.theory import solve_state_evolution
from skattn.validation import FSSConfig, make_teacher, simulation_row

CONFIG = FSSConfig(label="lin T2 κ=0.75", alpha=0.3, reg_lambda=0.05, n_tokens=2,
                   attention="linear", width_ratio=0.75)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=8)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    d, c, n_test = args.d, CONFIG, 20000
    if args.quick:
        d, args.seeds, n_test = 12, 2, 500
    with_rule, without, rows = [], [], []
    for seed in range(args.seeds):
        row = simulation_row(c, d, seed, n_test=n_test, same_instance_se=True)
        teacher = make_teacher(c, d, seed)
        # α (d + 1)/d: the fixed point at the nominal α (the test error does not use α)
        at_alpha = solve_state_evolution(c.alpha * (d + 1) / d, target=teacher,
                                         reg_lambda=c.reg_lambda, width_ratio=c.width_ratio,
                                         n_tokens=c.n_tokens, attention=c.attention)
        with_rule.append(row["test_error"] / row["se_same_instance_test_error"] - 1)
        without.append(row["test_error"] / at_alpha.test_error - 1)
        rows.append({"seed": seed, "trained": row["test_error"],
                     "alpha_eff": row["se_same_instance_test_error"],
                     "at_alpha": float(at_alpha.test_error)})
        print(f"seed {seed}: trained {row['test_error']:.6f}, gap {100 * with_rule[-1]:+.1f} % "
              f"(at α: {100 * without[-1]:+.1f} %)", flush=True)
    for name, g in (("α_eff (today)", with_rule), ("α", without)):
        g = np.array(g)
        print(f"{CONFIG.label} d={d}: gap at {name}: {100 * g.mean():+.2f} ± "
              f"{100 * g.std(ddof=1) / np.sqrt(g.size):.2f} %")
    write_result(args, "inactive_cap_rule.json", {"config": c.to_dict(), "d": d, "rows": rows},
                 script=__file__, argv=argv)


if __name__ == "__main__":
    main()
