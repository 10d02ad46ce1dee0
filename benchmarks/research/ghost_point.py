"""A ghost of the state evolution up close: where the coarse stage stops, what else has a fixed
point there, and what trained models do.

At a few grid points of small λ and β ≈ 3–4 the coarse stage of the solver (1024 nodes, the
sampled prior side, Powell's hybrid method) ends near a point that is not a fixed point (a
residual near 1e-2 that no iteration lowers), while the reported fixed point lies far away
(``solver_trace.py``). This study takes one such point (default: T = 4, grid seed 0, point
2) and records

1. the coarse stage as the solver runs it: its end point and residual;
2. the same coarse map continued in α, from ``--alpha-fractions`` of α up to α, each step
   warm-started from the last (40 evaluations each): where it converges;
3. a Sobol scan of ``--scan`` states of the coarse map (ρ = m/√(q Q0) in [0, 1], q in
   [0.1, 300], Σ in [0.01, 300], log-uniform), and the hybrid method from its four states
   of least residual (30 evaluations each): where else the coarse map has fixed points;
4. the reported continuum fixed point (``solve_state_evolution``, 8192 nodes) and the
   same solve started at the known fixed point (``options={"init": ...}``): where the
   iteration stops when the map is rough at the quadrature's resolution;
5. ``TiedAttentionRegressor`` (float64, its default L-BFGS) trained at each ``--d`` on two
   teachers: test error on 4000 fresh samples, ``m = Tr(S0 S)/d``, ``q = Tr S²/d`` and
   the objective per d².

Usage: ``python benchmarks/research/ghost_point.py [--quick] [--tokens 4 --seed 0 --point 2]
[--d 50,70,90] [--scan 256] [--results-dir DIR]``; about 9 minutes on the 2-core machine. ``--quick``: a
T = 2 point on 256 nodes, d = 20.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np
from scipy.stats import qmc
from _common import add_common_arguments, write_result

from skattn import AttentionIndexedModel, TiedAttentionRegressor, WishartTarget
from skattn.metrics import attention_error
from skattn.theory import StateEvolutionProblem
from skattn.theory.channels import GaussianNodes
from skattn.theory.core.fixed_point_map import (COARSE_CALLS, COARSE_TOL, FixedPointMap,
                                                iterate, starts)
from skattn.theory.denoisers import SampledDenoiser

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from run_benchmarks import grid_configurations, solve_grid_point  # noqa: E402

CONTINUATION_CALLS = 40


def _problem(config):
    return StateEvolutionProblem(n_tokens=config["n_tokens"], reg_lambda=config["reg_lambda"],
                                 noise=config["noise"], beta=config["beta"],
                                 target_beta=config["beta"],
                                 target=WishartTarget(config["kappa"]))


def coarse_rows(config, fractions, n_nodes, n_scan):
    """The coarse stage at α, the coarse map continued in α over ``fractions``, and the
    scan of ``n_scan`` states with the hybrid method from the four best."""
    problem = _problem(config)
    law, eig0 = problem.target_law(0)
    Q0 = law.second_moment()
    channel = problem.channel()
    prior = SampledDenoiser(problem.denoiser(law, eig0, 0), random_state=0)
    nodes = GaussianNodes(2 * channel.K, n_points=n_nodes, seed=0)
    n_coarse = min(1024, n_nodes // 4)

    def full(m, q, sigma, t=None):
        return (m, q, sigma)

    def solve(fraction, start, budget):
        # a fresh node set per map, as each solve has: no remembered minimisers carried
        # from the last step (with them the continuation took another path)
        fp_map = FixedPointMap(config["alpha"] * fraction, channel, prior, Q0, config["noise"],
                               nodes.subset(n_coarse), "stein")
        if start is None:
            _, prior0 = fp_map.step(0.0, 0.0, 1e-10)
            points = starts(fp_map, None, prior0, Q0, full)
        else:
            points = [fp_map.to_x(*start)]
        x, norm, converged = iterate(fp_map, channel, points, tol=COARSE_TOL,
                                     max_iter=budget, damping=0.5, polish=False,
                                     method="hybrid")
        return fp_map.from_x(x)[:3], float(norm), bool(converged), fp_map.n_calls

    state, norm, converged, calls = solve(1.0, None, COARSE_CALLS)
    rows = [dict(kind="coarse stage", alpha_fraction=1.0, state=state, residual=norm,
                 converged=converged, evaluations=calls)]
    start = None
    for fraction in fractions:
        start, norm, converged, calls = solve(fraction, start, CONTINUATION_CALLS)
        rows.append(dict(kind="coarse, continued in α", alpha_fraction=fraction,
                         state=start, residual=norm, converged=converged, evaluations=calls))
    scan = FixedPointMap(config["alpha"], channel, prior, Q0, config["noise"],
                         nodes.subset(n_coarse), "stein")
    scanned = []
    for rho, u_q, u_s in qmc.Sobol(3, scramble=True, rng=0).random(n_scan):
        q = 0.1 * 3000.0 ** u_q
        point = (rho * np.sqrt(q * Q0), q, 0.01 * 3e4 ** u_s)
        r = scan.residual(scan.to_x(*point))
        if r is not None:
            scanned.append((float(np.max(np.abs(r))), point))
    scanned.sort(key=lambda item: item[0])
    for norm0, point in scanned[:4]:
        state, norm, converged, calls = solve(1.0, point, COARSE_CALLS)
        rows.append(dict(kind=f"coarse, from the scan's state {np.round(point, 3).tolist()} "
                              f"(residual {norm0:.1e})", alpha_fraction=1.0, state=state,
                         residual=norm, converged=converged, evaluations=calls))
    return rows


def solve_rows(config, n_nodes):
    """The reported fixed point, and the solve started there."""
    rows, init = [], None
    for label in ("reported (cold start)", "started at the reported point"):
        seconds, res = solve_grid_point(config, n_nodes, init=init)
        rows.append(dict(kind=label, state=[res.m, res.q, res.sigma],
                         residual=float(res.residual), converged=bool(res.converged),
                         evaluations=int(res.n_iter), test_error=float(res.test_error),
                         objective=float(res.train_objective),
                         certified_fraction=float(res.certified_fraction),
                         seconds=seconds))
        init = (res.m, res.q, res.sigma)
    return rows


def trained_rows(config, ds, n_test):
    """Trained tied attention at each d, two teachers."""
    rows = []
    for d in ds:
        for seed in (0, 1):
            teacher = AttentionIndexedModel(d, n_tokens=config["n_tokens"],
                                            target=WishartTarget(config["kappa"]),
                                            beta=config["beta"], noise=config["noise"],
                                            random_state=seed)
            X, y = teacher.sample(int(config["alpha"] * d * d), random_state=10 + seed)
            X_test, y_test = teacher.sample(n_test, random_state=100 + seed)
            start = time.perf_counter()
            model = TiedAttentionRegressor(reg_lambda=config["reg_lambda"], beta=config["beta"],
                                           dtype="float64", random_state=seed).fit(X, y)
            S, S0 = model.S_, teacher.S0_
            rows.append(dict(kind="trained", d=d, seed=seed,
                             state=[float(np.sum(S * S0) / d), float(np.sum(S * S) / d), None],
                             test_error=attention_error(y_test, model.predict(X_test)),
                             objective=float(model.train_objective_),
                             n_iter=int(model.n_iter_), seconds=time.perf_counter() - start))
    return rows


def _floats(text):
    return [float(v) for v in text.split(",") if v.strip()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4, help="T (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="grid seed (default 0)")
    parser.add_argument("--point", type=int, default=2, help="grid point (default 2)")
    parser.add_argument("--alpha-fractions", default="0.3,0.5,0.7,0.78,0.85,0.9,0.94,0.97,1",
                        help="the coarse map's continuation in α, as fractions of α")
    parser.add_argument("--d", default="50,70,90", help="token dimensions of the training")
    parser.add_argument("--scan", type=int, default=256,
                        help="states of the coarse map's scan (default 256)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    tokens, seed, point, n_nodes = args.tokens, args.seed, args.point, 8192
    ds, fractions, n_test = [int(v) for v in _floats(args.d)], _floats(args.alpha_fractions), 4000
    if args.quick:
        tokens, seed, point, n_nodes, ds, fractions, n_test = 2, 1, 4, 256, [20], [0.5, 1.0], 500
        args.scan = 16
    config = grid_configurations(tokens, 6, seed)[point]
    rows = coarse_rows(config, fractions, n_nodes, args.scan)
    rows += solve_rows(config, n_nodes)
    rows += trained_rows(config, ds, n_test)
    for row in rows:
        print(row, flush=True)
    write_result(args, "ghost_point.json",
                 {"config": config, "seed": seed, "point": point, "n_nodes": n_nodes,
                  "n_scan": args.scan, "rows": rows}, script=__file__, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
