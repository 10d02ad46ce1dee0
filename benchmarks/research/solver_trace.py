"""Where a continuum solve spends its evaluations: every map evaluation of grid points, by stage.

Each point of ``grid_configurations(T, 6, seed)`` (``benchmarks/run_benchmarks.py``, the
speed grid) is solved once by ``solve_state_evolution`` at 8192 nodes, with
``FixedPointMap.step`` and ``FixedPointMap.residual`` wrapped so that every evaluation is
recorded with its stage: the node set (coarse prefix or all nodes), the map object (a fresh
map after a failed handover), warm / multi-start / certified prox, plain or orthogonal
variables, its seconds, state ``(m, q, Σ)`` and residual ``max |r|``. Stages are runs of
consecutive evaluations with the same key.

A row per point (JSON lines, ``solver_trace.jsonl``; a run that stops keeps its rows and
``--append`` goes on where it stopped): the result (seconds, evaluations, converged, the
stall floor, certified fraction, test error), the stages, and the residuals of every
stage, so that a stopping rule (the stall window) can be replayed on them offline
(:func:`replay_stall`). ``q_over_coarse_end`` (``q`` at the reported point over ``q`` at the
coarse stage's end) flags a ghost: a coarse stage that ended far from the fixed point.

Usage: ``python benchmarks/research/solver_trace.py [--quick] [--tokens 2,3,4,5]
[--seeds 0,1] [--points 0,1,2,3,4,5] [--append] [--results-dir DIR]``. The times are
wall-clock: run it alone on the machine. ``--quick``: T = 2, seed 0, points 0 and 1, 256
nodes.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from unittest import mock

import numpy as np
from _common import (add_common_arguments, add_grid_arguments, int_list, open_jsonl,
                     results_dir)

from skattn.theory.core import iteration
from skattn.theory.core.fixed_point_map import FixedPointMap

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from run_benchmarks import grid_configurations, load_kernels, solve_grid_point  # noqa: E402

NAME = "solver_trace.jsonl"


def replay_stall(residuals, window, floor=iteration.STALL_FLOOR,
                 decrease=iteration.STALL_DECREASE):
    """Where the stall test with ``window`` would end a run of ``residuals``.

    The test of :func:`skattn.theory.core.iteration.anderson`: after an evaluation, the
    best residual so far is below ``floor`` and above ``decrease`` times its value
    ``window`` evaluations earlier. Returns ``(evaluations, best residual)`` at the stop,
    or at the end of the run where the test never fires.
    """
    best, history = np.inf, []
    for k, r in enumerate(residuals):
        best = min(best, r)
        history.append(best)
        if len(history) > window and best < floor and best > decrease * history[-1 - window]:
            return k + 1, best
    return len(residuals), best


class _Recorder:
    """Wraps ``FixedPointMap.step`` and ``residual`` to record every evaluation."""

    def __init__(self):
        self.log, self.maps = [], {}
        self._step, self._residual = FixedPointMap.step, FixedPointMap.residual

    def patches(self):
        recorder = self

        def step(fp_map, m, q, sigma, t=None, certify=False):
            calls, start = fp_map.n_calls, time.perf_counter()
            out = recorder._step(fp_map, m, q, sigma, t, certify)
            if fp_map.n_calls > calls:
                number = recorder.maps.setdefault(id(fp_map), len(recorder.maps))
                recorder.log.append(dict(
                    map=number, nodes=int(fp_map.nodes.n_points), warm=bool(fp_map.warm),
                    certified=bool(certify or fp_map.certify),
                    orthogonal=bool(fp_map.orthogonal),
                    seconds=time.perf_counter() - start,
                    state=[float(m), float(q), float(sigma)], residual=None))
            return out

        def residual(fp_map, x):
            r = recorder._residual(fp_map, x)
            if recorder.log and r is not None:
                recorder.log[-1]["residual"] = float(np.max(np.abs(r)))
            return r

        return (mock.patch.object(FixedPointMap, "step", step),
                mock.patch.object(FixedPointMap, "residual", residual))


def _stage_label(entry, n_nodes):
    where = "coarse" if entry["nodes"] < n_nodes else f"fine map {entry['map']}"
    prox = "certified" if entry["certified"] else ("warm" if entry["warm"] else "multi-start")
    return f"{where}, {prox}" + (", orthogonal" if entry["orthogonal"] else "")


def stages(log, n_nodes):
    """Runs of consecutive evaluations with the same stage, with their residuals."""
    out = []
    for entry in log:
        label = _stage_label(entry, n_nodes)
        if not out or out[-1]["stage"] != label:
            out.append(dict(stage=label, evaluations=0, seconds=0.0, residuals=[]))
        stage = out[-1]
        stage["evaluations"] += 1
        stage["seconds"] += entry["seconds"]
        stage["end_state"] = entry["state"]
        if entry["residual"] is not None:
            stage["residuals"].append(float(f"{entry['residual']:.3g}"))
    return out


def trace_point(config, n_nodes):
    """One traced solve of a grid configuration: a row of the result file."""
    recorder = _Recorder()
    first, second = recorder.patches()
    with first, second:
        seconds, res = solve_grid_point(config, n_nodes)
    runs = stages(recorder.log, n_nodes)
    coarse = [s for s in runs if s["stage"].startswith("coarse")]
    ghost = None
    if coarse and res.q > 0:
        ghost = res.q / coarse[-1]["end_state"][1]
    return dict(config=config, n_nodes=n_nodes, seconds=seconds, n_iter=int(res.n_iter),
                converged=bool(res.converged), residual=float(res.residual),
                stall_floor=res.extras.get("stall_floor"),
                certified_fraction=float(res.certified_fraction),
                test_error=float(res.test_error), state=[res.m, res.q, res.sigma],
                q_over_coarse_end=ghost, stages=runs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_grid_arguments(parser, tokens="2,3,4,5", seeds="0,1")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    tokens, seeds, points, n_nodes = (int_list(args.tokens), int_list(args.seeds),
                                      int_list(args.points), 8192)
    if args.quick:
        tokens, seeds, points, n_nodes = [2], [0], [0, 1], 256
    done = set()
    path = results_dir(args) / NAME
    if args.append and path.exists():
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            row = json.loads(line)
            done.add((row["config"]["n_tokens"], row["seed"], row["point"]))
    path, write_row = open_jsonl(args, NAME, script=__file__, argv=argv, append=args.append)
    for n_tokens in tokens:
        load_kernels(n_tokens)                       # before timing
        for seed in seeds:
            configs = grid_configurations(n_tokens, 6, seed)
            for point in points:
                if (n_tokens, seed, point) in done:
                    continue
                row = dict(seed=seed, point=point, **trace_point(configs[point], n_nodes))
                write_row(row)
                print(f"T={n_tokens} seed={seed} point={point}: {row['seconds']:.1f} s, "
                      f"{row['n_iter']} evaluations, converged={row['converged']}, "
                      f"certified {row['certified_fraction']:.4f}, "
                      f"stages {[(s['stage'], s['evaluations']) for s in row['stages']]}",
                      flush=True)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
