"""The uncertified nodes' first-order effect on the prediction: how its estimate depends on
the Jacobians' nodes and step.

Where the certificate leaves nodes uncertified, the solver carries their bound on the
conjugates through the fixed point to first order (``extras["uncertified_effect"]``;
docs: Theory, "Certificate"). The output side's Jacobian is taken on a prefix of the nodes
(``EFFECT_NODES`` of ``skattn.theory.core.sensitivity``, 1024) with a relative step
(``EFFECT_STEP``, 1e-4); both were set a priori, not fitted. This study solves the grid
points of the speed grid that keep uncertified nodes once per setting and records the
effect on m, q, Σ and the test error, its share of the test error, the certified fraction
and the seconds. Near a slow direction of the map (an eigenvalue of its Jacobian near 1)
the estimate is sensitive to small changes of the Jacobian: the spread between settings is
how far to read it.

Points: ``grid_configurations(T, 6, seed)`` of ``benchmarks/run_benchmarks.py`` at 8192
nodes: T = 6 seed 0 points 2 and 5 (the README's grid), and held out T = 4 seed 2 point 2,
T = 5 seed 2 point 2, T = 6 seed 3 point 2.

Usage: ``python benchmarks/research/uncertified_effect.py [--quick] [--results-dir DIR]``;
writes ``uncertified_effect.json``. About 5 minutes on the 2-core machine. ``--quick``:
one T = 3 point on 1024 nodes, two settings.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from unittest import mock

from _common import add_common_arguments, write_result

from skattn.theory.core import sensitivity
from skattn.theory.problem import effect_share

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from run_benchmarks import grid_configurations, load_kernels, solve_grid_point  # noqa: E402

POINTS = [((6, 0, 2), "grid"), ((6, 0, 5), "grid"), ((4, 2, 2), "held out"),
          ((5, 2, 2), "held out"), ((6, 3, 2), "held out")]
#: (EFFECT_NODES, EFFECT_STEP): the landed setting first
SETTINGS = [(1024, 1e-4), (8192, 1e-4), (1024, 1e-3)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    points, settings, n_nodes = POINTS, SETTINGS, 8192
    if args.quick:
        points, settings, n_nodes = [((3, 2, 3), "held out")], SETTINGS[:2], 1024
    for n_tokens in sorted({p[0] for p, _ in points}):
        load_kernels(n_tokens)
    rows = []
    for (n_tokens, seed, index), role in points:
        config = grid_configurations(n_tokens, 6, seed)[index]
        row = dict(n_tokens=n_tokens, seed=seed, point=index, role=role, config=config,
                   arms=[])
        for effect_nodes, step in settings:
            with mock.patch.object(sensitivity, "EFFECT_NODES", effect_nodes), \
                    mock.patch.object(sensitivity, "EFFECT_STEP", step):
                seconds, res = solve_grid_point(config, n_nodes=n_nodes)
            row["arms"].append({
                "effect_nodes": effect_nodes, "step": step, "seconds": seconds,
                "converged": bool(res.converged),
                "certified_fraction": float(res.certified_fraction),
                "test_error": float(res.test_error), "share": effect_share(res),
                "effect": res.extras.get("uncertified_effect")})
            print(f"T={n_tokens} seed={seed} point={index} ({role}) nodes={effect_nodes} "
                  f"step={step:g}: certified {res.certified_fraction:.4f}, effect share "
                  f"{row['arms'][-1]['share']:.3g}, {seconds:.1f} s", flush=True)
        rows.append(row)
    write_result(args, "uncertified_effect.json",
                 {"landed": {"effect_nodes": sensitivity.EFFECT_NODES,
                             "step": sensitivity.EFFECT_STEP}, "rows": rows},
                 script=__file__, argv=argv)
    return rows


if __name__ == "__main__":
    main()
