"""The star bound under unequal splits, on and off, measured on grid points.

Where the row-wise dual bound fails in two or three rows, the star of one of them under
the equal split gives the other failing rows tangents of negative share, which rarely
prove enough. The certificate then searches for a split of the quadratic under which
every row but the star's holds (the split search with that row left out, up to
``SoftmaxChannel.star_split_rounds`` splits) and proves the star of that row under it
(docs: Theory, "Certificate"). This study solves each grid point with those splits on
(the default, 8 rounds) and off (0: the star under the equal split only) and records the
seconds and the certified fraction. The splits change which nodes are certified, never the
minimisers, so the solves should differ in those two only: each records its state (m, q,
Σ), and the report says whether they are equal.

Points: those of ``star_bound.py``; the number of rounds (8) and the star of three
failing rows were chosen on the uncertified nodes of T = 6, seed 0, point 2 (listed as
``fitted``); the others are held out.

Usage: ``python benchmarks/research/star_splits.py [--quick] [--results-dir DIR]``;
writes ``star_splits.json``. About 5 minutes on the 2-core machine; run it alone (the times
are wall-clock). ``--quick``: one T = 3 point on 1024 nodes.
"""

from __future__ import annotations

from star_bound import run_study

from skattn.theory.channels import SoftmaxChannel


def main(argv=None):
    return run_study(argv, __doc__, "star_split_rounds",
                     [0, SoftmaxChannel.star_split_rounds], "rounds", "star_splits.json",
                     __file__)


if __name__ == "__main__":
    main()
