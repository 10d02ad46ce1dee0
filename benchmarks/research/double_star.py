"""The certificate's double star, on and off, measured on grid points.

Where every star of the certificate fails and one or two rows failed the row-wise bound,
the double star keeps two rows exact, with their shared entry, and proves the bound by a
branch over that entry (``SoftmaxChannel.double_star``, off by default; docs: Theory,
"Certified global proximal map"). This study solves each grid point with it off and on
and records the seconds and the certified fraction. It changes which nodes are certified,
never the minimisers, so the solves should differ in those two only: each records its
state (m, q, Σ), and the report says whether they are equal.

Points: those of ``star_bound.py``; the centre radii, the tangent shares, the local
pieces' curvatures and box and the estimates' points were chosen on the uncertified
nodes of T = 6, seed 0, point 2 (listed as ``fitted``); the others are held out.

Usage: ``python benchmarks/research/double_star.py [--quick] [--results-dir DIR]``; writes
``double_star.json``. About 6 minutes on the 2-core machine; run it alone (the times are
wall-clock). ``--quick``: one T = 3 point on 1024 nodes.
"""

from __future__ import annotations

from star_bound import run_study


def main(argv=None):
    return run_study(argv, __doc__, "double_star", [False, True], "double",
                     "double_star.json", __file__)


if __name__ == "__main__":
    main()
