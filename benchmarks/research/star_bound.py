"""The certificate's star bound, on and off, measured on grid points.

Where the row-wise dual bound fails in exactly one row under the equal split of the
quadratic, and no unequal split helps, the certificate keeps that row coupled to the
others: their responses to its entries are bounded below by certified quadratics and lines,
and the branch and bound proves the bound of that star (``SoftmaxChannel.star_bound``;
docs: Theory, "Certificate"). This study solves each grid point with the star on and off
and records the seconds and the certified fraction. The star changes which nodes are
certified, never the minimisers, so the solves should differ in those two only: each
records its state (m, q, Σ), and the report says whether they are equal.

Points: ``grid_configurations(T, 6, seed)`` of ``benchmarks/run_benchmarks.py`` at 8192
nodes; the star's quadratic shares, slopes and pruning were chosen on the uncertified
nodes of T = 6, seed 0, point 2 (listed as ``fitted``); the others are held out (the
points of ``split_share.py``, where the seed-2–5 runs of ``solver_rules.py`` left more
than 1 % of the nodes uncertified).

Usage: ``python benchmarks/research/star_bound.py [--quick] [--results-dir DIR]``; writes
``star_bound.json``. About 5 minutes on the 2-core machine; run it alone (the times are
wall-clock). ``--quick``: one T = 3 point on 1024 nodes.
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


def run_study(argv, doc, attribute, values, key, filename, script):
    """Solve the points (``--quick``: one T = 3 point on 1024 nodes) once per value of
    ``SoftmaxChannel.<attribute>`` and write the rows to ``filename``; returns them."""
    parser = add_common_arguments(argparse.ArgumentParser(description=doc.splitlines()[0]))
    args = parser.parse_args(argv)
    points = [(p, "fitted") for p in FITTED] + [(p, "held out") for p in HELD_OUT]
    n_nodes = 8192
    if args.quick:
        points, n_nodes = [((3, 2, 3), "held out")], 1024
    rows = solve_settings(points, SoftmaxChannel, attribute, values, key, load=load_kernels,
                          config_of=lambda T, seed, i: grid_configurations(T, 6, seed)[i],
                          solve=lambda config: solve_grid_point(config, n_nodes=n_nodes))
    write_result(args, filename, {"rows": rows}, script=script, argv=argv)
    return rows


def main(argv=None):
    return run_study(argv, __doc__, "star_bound", [False, True], "star", "star_bound.json",
                     __file__)


if __name__ == "__main__":
    main()
