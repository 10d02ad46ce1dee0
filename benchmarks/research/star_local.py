"""The star bound's local pieces, on and off, measured on grid points.

Where the star of one failing row still shows a point below the found value, its column
rows' responses are often more curved there than any bound valid on all of R can be. The
certificate then proves *local pieces*, quadratics as curved as those responses but valid
on an interval only, and searches the star again with them
(``SoftmaxChannel.star_local_rounds``; docs: Theory, "Certificate"). This study solves
each grid point with the local pieces on (the default, 2 rounds) and off (0) and records
the seconds and the certified fraction. They change which nodes are certified, never the
minimisers, so the solves should differ in those two only: each records its state (m, q,
Σ), and the report says whether they are equal.

Points: those of ``star_bound.py``; the radius (1.5 times the distance to the row's lower
point), the curvatures tried, the rounds, the search's budget in them and the cap on a
box's combinations were chosen on the uncertified nodes of T = 6, seed 0, point 2 (listed
as ``fitted``); the others are held out.

Usage: ``python benchmarks/research/star_local.py [--quick] [--results-dir DIR]``; writes
``star_local.json``. About 6 minutes on the 2-core machine; run it alone (the times are
wall-clock). ``--quick``: one T = 3 point on 1024 nodes.
"""

from __future__ import annotations

from star_bound import run_study

from skattn.theory.channels import SoftmaxChannel


def main(argv=None):
    return run_study(argv, __doc__, "star_local_rounds",
                     [0, SoftmaxChannel.star_local_rounds], "rounds", "star_local.json",
                     __file__)


if __name__ == "__main__":
    main()
