"""Are the minimisers the certificate leaves uncertified global? A wide search at each.

Where the T ≥ 3 certificate cannot prove a node's prox minimiser global, the solver keeps
the minimiser its own search found, and the result carries a bound on how far those nodes
can move the prediction (docs: Theory, "Certificate"). The bound is a worst case; this
study asks what the nodes are. It solves each point, runs one certified prox evaluation at
its fixed point on fresh Gaussian nodes (``row_relaxations.fixed_point_nodes``) without
the last shell of starts (``SoftmaxChannel.last_shell_starts = 0``), and at each node left
uncertified runs BFGS on ``‖z − ω‖²/(2Σ) + ℓ(y, z)`` (the channel's public
``loss`` and ``grad``) from many scattered starts: half around the found minimiser, half
around ω, at two scales. It records whether any start ends lower than the found minimiser
(``beaten``: then the solver's value there is wrong, not only unproved) and the gap to the
next local minimum found above it (a near tie is what no certificate can separate). The
same evaluation with the last shell (the default) gives the nodes it leaves uncertified,
how many minimisers it lowered, and how many searched nodes it leaves uncertified at a
value the search beat.

Points: the speed-grid points that keep uncertified nodes (``speed_grid.py``, seed 0 and
``--held-out``; those over the cap aside): the three held-out points certified below 0.999
(T = 4 seeds 1 and 2 point 2, T = 5 seed 2 point 5), then T = 5 seed 2 point 2 and the
T = 6 points (seed 0 point 2, seed 3 points 2 and 3).

Usage: ``python benchmarks/research/uncertified_minimisers.py [--quick] [--max-nodes 40]
[--starts 100] [--results-dir DIR]``; writes ``uncertified_minimisers.json``. About 15
minutes on the 2-core machine. ``--quick``: one T = 3 point on 1024 nodes, at most 3 nodes
and 8 starts.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from unittest import mock

import numpy as np
from _common import add_common_arguments, write_result
from row_relaxations import fixed_point_nodes
from scipy.optimize import minimize

from skattn.theory.channels import SoftmaxChannel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from run_benchmarks import grid_configurations, solve_grid_point  # noqa: E402

POINTS = [(4, 1, 2), (4, 2, 2), (5, 2, 5), (5, 2, 2), (6, 0, 2), (6, 3, 2), (6, 3, 3)]
#: the certificate's tolerance: a start that ends lower by more beats the found minimiser
TOL = 1e-9
#: two end points closer than this in objective are one local minimum
_SAME = 1e-9
#: the start scales, in logit units (half the starts at each)
_SCALES = (0.5, 3.0)


def prox_objective(channel, y, omega, sigma):
    """The prox objective ``‖z − ω‖²/(2Σ) + ℓ(y, z)`` of one node and its gradient, from
    the channel's public ``loss`` and ``grad``."""
    y1 = y[None]

    def objective(z):
        value = channel.loss(y1, z[None])[0] + np.sum((z - omega) ** 2) / (2 * sigma)
        return value, channel.grad(y1, z[None])[0] + (z - omega) / sigma
    return objective


def wide_search(channel, y, omega, sigma, found, n_starts, rng):
    """``(found value, least value, gap to the next minimum above the found one)`` of the
    prox objective at one node, by BFGS from ``n_starts`` scattered starts (the gap is
    NaN where no other minimum was found)."""
    objective = prox_objective(channel, y, omega, sigma)
    f_found = objective(found)[0]
    ends = []
    for k in range(n_starts):
        centre = found if k % 2 == 0 else omega
        scale = _SCALES[(k // 2) % len(_SCALES)]
        res = minimize(objective, centre + scale * rng.standard_normal(found.shape),
                       jac=True, method="BFGS", options={"gtol": 1e-10, "maxiter": 500})
        ends.append(res.fun)
    ends = np.array(ends)
    above = np.sort(ends[ends > f_found + _SAME])
    gap = float(above[0] - f_found) if above.size else float("nan")
    return float(f_found), float(ends.min()), gap


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-nodes", type=int, default=40,
                        help="uncertified nodes searched per point, evenly spaced (default 40)")
    parser.add_argument("--starts", type=int, default=100,
                        help="BFGS starts per node (default 100)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    points, n_nodes, max_nodes, n_starts = POINTS, 8192, args.max_nodes, args.starts
    if args.quick:
        points, n_nodes, max_nodes, n_starts = [(3, 0, 3)], 1024, 3, 8
    rng = np.random.default_rng(0)
    rows = []
    for T, seed, i in points:
        config = grid_configurations(T, 6, seed)[i]
        solve_seconds, res = solve_grid_point(config, n_nodes=n_nodes)
        channel, y, omega, w = fixed_point_nodes(config, res, n_nodes, rng)
        # the same nodes without the last shell, then with it (the default)
        with mock.patch.object(SoftmaxChannel, "last_shell_starts", 0):
            z_first, certified_first = channel.prox(y, omega, res.sigma, start=w,
                                                    return_certified=True)
        z, certified = channel.prox(y, omega, res.sigma, start=w, return_certified=True)
        left = np.flatnonzero(~certified_first)
        chosen = left[np.unique(np.linspace(0, left.size - 1, min(left.size, max_nodes))
                                .astype(int))] if left.size else left
        t = time.perf_counter()
        found, least, gaps, found_last = [], [], [], []
        for n in chosen:
            f, low, gap = wide_search(channel, y[n], omega[n], res.sigma, z_first[n],
                                      n_starts, rng)
            found.append(f)
            least.append(low)
            gaps.append(gap)
            found_last.append(prox_objective(channel, y[n], omega[n], res.sigma)(z[n])[0])
        found, least, gaps, found_last = map(np.array, (found, least, gaps, found_last))
        beaten = found - least > TOL
        # with the last shell: the searched nodes it leaves uncertified whose value the
        # search still beat (every other uncertified node's first minimiser was kept)
        beaten_last = (found_last - least > TOL) & ~certified[chosen]
        rows.append({"n_tokens": T, "seed": seed, "point": i, "config": config,
                     "n_nodes": n_nodes, "sigma": res.sigma,
                     "certified_fraction": res.certified_fraction,
                     "evaluation_certified_fraction": float(certified_first.mean()),
                     "uncertified": int(left.size), "searched": int(chosen.size),
                     "starts": n_starts, "beaten": int(beaten.sum()),
                     "largest_drop": float(np.max(found - least)) if chosen.size else 0.0,
                     "next_minimum_found": int(np.isfinite(gaps).sum()),
                     "smallest_gap": float(np.nanmin(gaps)) if np.isfinite(gaps).any()
                     else None,
                     "median_gap": float(np.nanmedian(gaps)) if np.isfinite(gaps).any()
                     else None,
                     "last_shell_uncertified": int((~certified).sum()),
                     "last_shell_lowered": int(np.sum(np.any(z != z_first, axis=1))),
                     "last_shell_beaten": int(beaten_last.sum()),
                     "solve_seconds": solve_seconds,
                     "search_seconds": time.perf_counter() - t})
        print(f"T={T} seed {seed} point {i}: {left.size} uncertified, {chosen.size} "
              f"searched, {int(beaten.sum())} beaten; with the last shell "
              f"{int((~certified).sum())} uncertified, {int(beaten_last.sum())} beaten",
              flush=True)
    write_result(args, "uncertified_minimisers.json", {"tol": TOL, "rows": rows},
                 script=__file__, argv=argv)
    return rows


if __name__ == "__main__":
    main()
