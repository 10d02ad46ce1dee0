"""The warm-iteration rule from the original starts, measured with both choices forced.

Where the fixed-point iteration starts far from the fixed point (no coarse stage: fewer
than 4096 nodes, or a failed handover), ``skattn.theory.core.fixed_point_map.iterates_warm``
decides whether Anderson's iterations run the warm prox (each node from its last
minimiser, uncertified) or the cold multi-start one: at T = 2 warm up to
``WARM_FROM_STARTS_MAX_BETA``, at T ≥ 3 warm at every β. This study solves two
configurations per T over β ∈ [1.5, 4] at 2048 nodes (no coarse stage) twice, with the
choice forced warm and forced cold, and records the seconds and evaluations of each and
the rule's choice. Both choices converge to the same fixed point where both converge (the
polish and the reported evaluation are the same); only the time differs.

Points (teacher at β0 = β): A α = 0.3, λ = 0.05, Δ = 0.1, ``WishartTarget(0.5)``;
B α = 0.5, λ = 0.01, Δ = 0.3, ``WishartTarget(0.8)``.

Usage: ``python benchmarks/research/warm_start_rule.py [--quick] [--max-iter N]
[--results-dir DIR]``; writes ``warm_start_rule.json``. Run it alone on the machine (the
times are wall-clock); a full run takes about 10 minutes on the 2-core machine.
``--quick``: point A at T = 2, β = 2 and 3.5, on 256 nodes.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from unittest import mock

from _common import add_common_arguments, write_result

from skattn.data import WishartTarget
from skattn.theory import solve_state_evolution
from skattn.theory.channels.softmax import SoftmaxChannel
from skattn.theory.core import fixed_point_map

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from run_benchmarks import load_kernels  # noqa: E402

POINTS = {"A": dict(alpha=0.3, reg_lambda=0.05, noise=0.1, kappa=0.5),
          "B": dict(alpha=0.5, reg_lambda=0.01, noise=0.3, kappa=0.8)}
BETAS = [1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
TOKENS = [2, 3]


def _solve(point, n_tokens, beta, n_nodes, max_iter, warm):
    """One solve with the from-starts choice forced: ``(seconds, result)``."""
    def forced(channel, *, near, method="anderson"):
        return getattr(channel, "warm_startable", False) and (near or warm)

    with mock.patch.object(fixed_point_map, "iterates_warm", forced):
        start = time.perf_counter()
        res = solve_state_evolution(point["alpha"], n_tokens=n_tokens,
                                    reg_lambda=point["reg_lambda"], noise=point["noise"],
                                    beta=beta, target_beta=beta,
                                    target=WishartTarget(point["kappa"]),
                                    options={"n_nodes": n_nodes, "max_iter": max_iter})
        return time.perf_counter() - start, res


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-iter", type=int, default=150,
                        help="evaluation cap of each solve (default 150)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    points, tokens, betas, n_nodes = POINTS, TOKENS, BETAS, 2048
    if args.quick:
        points, tokens, betas, n_nodes = {"A": POINTS["A"]}, [2], [2.0, 3.5], 256
    rows = []
    print(f"{'T':>2} {'pt':>3} {'beta':>5} {'warm s':>8} {'evals':>6} {'cold s':>8} "
          f"{'evals':>6}  rule", flush=True)
    for n_tokens in tokens:
        load_kernels(n_tokens)                       # before timing
        for name, point in points.items():
            for beta in betas:
                row = dict(n_tokens=n_tokens, point=name, beta=beta, n_nodes=n_nodes, **point)
                for label, warm in (("warm", True), ("cold", False)):
                    seconds, res = _solve(point, n_tokens, beta, n_nodes, args.max_iter, warm)
                    row[label] = dict(seconds=seconds, n_iter=int(res.n_iter),
                                      converged=bool(res.converged),
                                      test_error=float(res.test_error))
                channel = SoftmaxChannel(n_tokens, beta=beta, target_beta=beta)
                row["rule_warm"] = bool(fixed_point_map.iterates_warm(channel, near=False))
                rows.append(row)
                print(f"{n_tokens:>2} {name:>3} {beta:>5g} {row['warm']['seconds']:>8.2f} "
                      f"{row['warm']['n_iter']:>6} {row['cold']['seconds']:>8.2f} "
                      f"{row['cold']['n_iter']:>6}  {'warm' if row['rule_warm'] else 'cold'}",
                      flush=True)
    write_result(args, "warm_start_rule.json",
                 {"max_iter": args.max_iter,
                  "warm_from_starts_max_beta": fixed_point_map.WARM_FROM_STARTS_MAX_BETA,
                  "rows": rows}, script=__file__, argv=argv)
    return rows


if __name__ == "__main__":
    main()
