"""How far the certificate's unequal splits may go: the least share, measured on grid points.

Where the row-wise dual bound fails under the equal split of the quadratic, the certificate
tries unequal splits (``SoftmaxChannel.split_rounds``), each pair's weight within ``[s, 1 −
s]`` of ``1/(2Σ)`` with ``s = SoftmaxChannel.split_min_share``. A weight near 0 gives its
row a ``κ_c = β²/W_ac`` up to ``1/(2s)`` times the equal split's and a domain as much
wider, where the row's branch and bound can run out of budget. This study solves each grid
point once per least share and records the seconds and the certified fraction. The split
search changes which nodes are certified, never the minimisers, so the solves should
differ in those two only: each records its state (m, q, Σ), and the report says whether
they are equal.

Points: ``grid_configurations(T, 6, seed)`` of ``benchmarks/run_benchmarks.py`` at 8192
nodes; the share 0.1 was chosen on T = 6, seed 0, point 2 (listed as ``fitted``), the
others are held out (points where the seed-2–5 runs of ``solver_rules.py`` left more
than 1 % of the nodes uncertified).

Usage: ``python benchmarks/research/split_share.py [--quick] [--shares 0.001,0.05,0.1,0.2]
[--results-dir DIR]``; writes ``split_share.json``. About 8 minutes on the 2-core machine;
run it alone (the times are wall-clock). ``--quick``: one T = 3 point on 1024 nodes, two
shares.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from _common import add_common_arguments, solve_settings, write_result

from skattn.theory.channels import SoftmaxChannel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from run_benchmarks import grid_configurations, load_kernels, solve_grid_point  # noqa: E402

FITTED = [(6, 0, 2)]
HELD_OUT = [(3, 2, 3), (3, 5, 2), (4, 2, 2), (4, 5, 2), (5, 2, 2), (6, 2, 5), (6, 3, 2)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shares", default="0.001,0.05,0.1,0.2",
                        help="least shares compared (default 0.001,0.05,0.1,0.2)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    shares = [float(v) for v in args.shares.split(",")]
    points = [(p, "fitted") for p in FITTED] + [(p, "held out") for p in HELD_OUT]
    n_nodes = 8192
    if args.quick:
        points, n_nodes, shares = [((3, 2, 3), "held out")], 1024, shares[:2]
    rows = solve_settings(points, SoftmaxChannel, "split_min_share", shares, "share",
                          load=load_kernels,
                          config_of=lambda T, seed, i: grid_configurations(T, 6, seed)[i],
                          solve=lambda config: solve_grid_point(config, n_nodes=n_nodes))
    write_result(args, "split_share.json",
                 {"landed_share": SoftmaxChannel.split_min_share, "rows": rows},
                 script=__file__, argv=argv)
    return rows


if __name__ == "__main__":
    main()
