"""The theory engine's speed over a grid of configurations per T, for the validation report.

Runs section (f) of ``benchmarks/run_benchmarks.py``: continuum points on a Latin-hypercube
grid per T (T = 2, 4, 5, 6; noise, κ0, α, λ, β ≤ 4), each in a fresh process with a
wall-clock cap, timed against the fixed numpy unit of the same run (a scalar unit, a
compiled exp/log loop, is recorded beside it: the solves follow it more than BLAS). Writes
``speed_grid.json``: every point (configuration, seconds, ratio to the unit, certified
fraction, converged, capped) and per T the median and the worst, with the goals of the
speed issue. The README's grid table quotes the latest full run of this file.

Usage: ``python benchmarks/research/speed_grid.py [--quick] [--held-out] [--results-dir
DIR]``; a full run takes about 5 minutes on the quiet 2-core machine (``--quick``: 3 points
at T = 2 and 4). ``--held-out`` runs the grids of seeds 1–3 instead (18 points per T, about
12 minutes, to ``speed_grid_held_out.json``): the same goals on configurations no choice of
the solver was made on. Run it alone on the machine: the times are wall-clock.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from _common import add_common_arguments, write_result

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from run_benchmarks import bench_grid  # noqa: E402


#: The held-out grids (``--held-out``): seeds of the Latin hypercube no solver choice was
#: made on (the engine was tuned on seed 0; its rules were checked on seeds 4 and 5)
HELD_OUT_SEEDS = (1, 2, 3)


def main(argv=None):
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--held-out", action="store_true",
                        help=f"the grids of seeds {HELD_OUT_SEEDS} pooled per T (18 points "
                             "each), to speed_grid_held_out.json")
    args = parser.parse_args(argv)
    seeds = HELD_OUT_SEEDS if args.held_out else (0,)
    seeds = seeds[:1] if args.quick else seeds      # as bench_grid runs them
    t0 = time.perf_counter()
    rows = bench_grid(args.quick, seeds)
    write_result(args, "speed_grid_held_out.json" if args.held_out else "speed_grid.json",
                 {"wall_s": time.perf_counter() - t0, "seeds": list(seeds), "rows": rows},
                 script=__file__, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
