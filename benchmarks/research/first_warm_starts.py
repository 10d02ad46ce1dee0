"""Newton starts of the first warm evaluation on a node set, measured on grid points.

At T ≥ 3 the fixed-point iterations run warm, uncertified prox evaluations: each node's
Newton run starts from its minimiser of the previous evaluation. The first evaluation on a
node set (the coarse stage's, the full set's, a fresh map's) has none, and ran the full
multi-start (``n_starts`` = 5 Newton runs a node), several warm evaluations' cost. With
``SoftmaxChannel.first_warm_starts`` = 1 it runs one, from ω; the certified evaluations
at the fixed point replace any minimiser that is not global, so the reported state should
not move, but more certified polish could be needed. This study solves each grid point
with both and records the seconds, the evaluations, the certified fraction and the state.

Points: ``grid_configurations(T, 6, seed)`` of ``benchmarks/run_benchmarks.py`` at 8192
nodes; one start was chosen on the T = 4, seed 0 points (``fitted``; its ghost, point 2,
left out), the seed-1 points of T = 3–6 are held out (their ghosts included).

Usage: ``python benchmarks/research/first_warm_starts.py [--quick] [--results-dir DIR]``;
writes ``first_warm_starts.json``. About 10 minutes on the 2-core machine; run it alone
(the times are wall-clock). ``--quick``: one T = 3 point on 1024 nodes.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from _common import add_common_arguments, solve_settings, write_result

from skattn.theory.channels import SoftmaxChannel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from run_benchmarks import grid_configurations, load_kernels, solve_grid_point  # noqa: E402

FITTED = [(4, 0, i) for i in (0, 1, 3, 4, 5)]
HELD_OUT = [(T, 1, i) for T in (3, 4, 5, 6) for i in range(6)]
#: the arms: the full multi-start (None) and one start
STARTS = [None, 1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    points = [(p, "fitted") for p in FITTED] + [(p, "held out") for p in HELD_OUT]
    n_nodes = 8192
    if args.quick:
        points, n_nodes = [((3, 1, 1), "held out")], 1024
    rows = solve_settings(points, SoftmaxChannel, "first_warm_starts", STARTS, "starts",
                          load=lambda T: (load_kernels(T, 1.0), load_kernels(T, 3.0)),
                          config_of=lambda T, seed, i: grid_configurations(T, 6, seed)[i],
                          solve=lambda config: solve_grid_point(config, n_nodes=n_nodes))
    write_result(args, "first_warm_starts.json",
                 {"landed_starts": SoftmaxChannel.first_warm_starts, "rows": rows},
                 script=__file__, argv=argv)
    return rows


if __name__ == "__main__":
    main()
