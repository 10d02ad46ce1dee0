"""Three solver rules fitted on measurements, each switched off on grid points it was not fitted on.

The rules (each was chosen on grid seeds 0–3 or on replays of their points):

* ``handover_orthogonal``: after a failed handover from the coarse stage within
  ``HANDOVER_ORTHOGONAL_RESIDUAL`` of a fixed point near the clip of m, the orthogonal
  variables first (``skattn.theory.core.solve``). Off: that threshold set to 0.
* ``polish_stall_window``: the polish from the warm fixed point stops at a stall over
  ``POLISH_STALL_EVALS`` (8) evaluations rather than ``STALL_EVALS`` (20)
  (``skattn.theory.core.fixed_point_map.polish_stall_window``). Off: both 20.
* ``shell_starts``: at T = 3–5, a node whose first certificate fails gets
  ``SoftmaxChannel.shell_starts`` (8) Newton starts around its found minimiser in the
  second round. Off: 0.

Each point of ``grid_configurations(T, 6, seed)`` (``benchmarks/run_benchmarks.py``) for
the held-out seeds (default 4 and 5) is solved at 8192 nodes with every rule on (the
``landed`` arm), instrumented to record whether each rule applied: the orthogonal
variables were taken after a handover, or a polish run with the short window ended by a
stall. It is then solved again with each rule that applied switched off. Where a rule did
not apply the path is the same by construction: the handover rule was not entered, and a
stall over 20 evaluations implies one over 8 (the best residual never rises), so a polish
that the short window did not stop runs the same with the long one. Whether a node ran
the shell starts cannot be seen from outside the compiled prox, so the ``shell_starts``
arm runs at every T = 3–5 point.

Each solve runs in a child process with a wall-clock cap (``--cap-seconds``; a capped
solve is recorded as such) and the evaluation cap ``--max-iter``, alternating arms point
by point. A row per (point, arm), JSON lines (``solver_rules.jsonl``; ``--append`` goes on
after a stop): seconds, evaluations, converged, residual, the stall floor, certified
fraction, test and train error, the uncertified bound on the test error, and (landed arm)
the rules that applied.

Usage: ``python benchmarks/research/solver_rules.py [--quick] [--tokens 2,3,4,5,6]
[--seeds 4,5] [--max-iter 150] [--cap-seconds 240] [--append] [--results-dir DIR]``. The
times are wall-clock: run it alone on the machine. ``--quick``: T = 3, seed 4, point 0,
256 nodes, every arm forced.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import subprocess
import sys
from unittest import mock

from _common import (add_common_arguments, add_grid_arguments, int_list, open_jsonl,
                     reference_seconds, results_dir)

from skattn.theory.channels import SoftmaxChannel
from skattn.theory.core import fixed_point_map
from skattn.theory.core import solve as solve_module
from skattn.theory.core.iteration import STALL_EVALS

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from run_benchmarks import grid_configurations, solve_grid_point  # noqa: E402

NAME = "solver_rules.jsonl"
RULES = ("handover_orthogonal", "polish_stall_window", "shell_starts")


def _switched_off(rule):
    """The patch that switches ``rule`` off."""
    if rule == "handover_orthogonal":
        return mock.patch.object(solve_module, "HANDOVER_ORTHOGONAL_RESIDUAL", 0.0)
    if rule == "polish_stall_window":
        return mock.patch.object(fixed_point_map, "POLISH_STALL_EVALS", STALL_EVALS)
    if rule == "shell_starts":
        return mock.patch.object(SoftmaxChannel, "shell_starts", 0)
    raise ValueError(f"rule must be one of {RULES} or 'landed', got {rule!r}.")


def solve_arm(config, arm, n_nodes, max_iter):
    """One solve with ``arm`` (``"landed"`` or a rule switched off): a result row, with the
    rules that applied in it."""
    applied = {"handover_orthogonal": 0, "polish_stall_window": 0}
    orthogonal, run = solve_module.iterate_orthogonal, fixed_point_map.iterate_starts

    def counted_orthogonal(*args, **kwargs):
        applied["handover_orthogonal"] += 1
        return orthogonal(*args, **kwargs)

    def counted_run(fp_map, starts, *, stall_evals=STALL_EVALS, **kwargs):
        before = fp_map.stall_floor
        out = run(fp_map, starts, stall_evals=stall_evals, **kwargs)
        if stall_evals < STALL_EVALS and before is None and fp_map.stall_floor is not None:
            applied["polish_stall_window"] += 1
        return out

    patches = [mock.patch.object(solve_module, "iterate_orthogonal", counted_orthogonal),
               mock.patch.object(fixed_point_map, "iterate_starts", counted_run)]
    if arm != "landed":
        patches.append(_switched_off(arm))
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        seconds, res = solve_grid_point(config, n_nodes, max_iter=max_iter)
    bound = res.extras.get("uncertified_bound") or {}
    return dict(seconds=seconds, n_iter=int(res.n_iter), converged=bool(res.converged),
                residual=float(res.residual), stall_floor=res.extras.get("stall_floor"),
                certified_fraction=float(res.certified_fraction),
                test_error=float(res.test_error), train_error=float(res.train_error),
                test_error_bound=bound.get("test_error"), state=[res.m, res.q, res.sigma],
                applied=applied if arm == "landed" else None)


def _child(spec):
    """Entry of a child process: load the kernels of this T, solve, print the row."""
    from skattn.data import WishartTarget
    from skattn.theory import solve_state_evolution
    config = spec["config"]
    solve_state_evolution(0.3, n_tokens=config["n_tokens"], reg_lambda=0.01, noise=0.1,
                          beta=config["beta"], target_beta=config["beta"],
                          target=WishartTarget(0.5), options={"n_nodes": 64, "max_iter": 5})
    row = solve_arm(config, spec["arm"], spec["n_nodes"], spec["max_iter"])
    print(json.dumps(row, default=float))


def run_in_child(config, arm, n_nodes, max_iter, cap_seconds):
    """:func:`solve_arm` in a fresh process, at most ``cap_seconds``: the row, or a row
    with ``capped`` set."""
    spec = json.dumps(dict(config=config, arm=arm, n_nodes=n_nodes, max_iter=max_iter))
    try:
        out = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True,
                             text=True, timeout=cap_seconds, check=True)
    except subprocess.TimeoutExpired:
        return dict(capped=True, seconds=None)
    except subprocess.CalledProcessError as err:
        raise RuntimeError(f"the solve of {arm} at {config} failed:\n{err.stderr}") from err
    return dict(capped=False, **json.loads(out.stdout.strip().splitlines()[-1]))


def arms_to_run(n_tokens, landed, forced=False):
    """The rules to switch off at a point, given its landed row."""
    if forced:
        return list(RULES)
    applied = landed.get("applied") or {}
    arms = [rule for rule in ("handover_orthogonal", "polish_stall_window")
            if applied.get(rule)]
    if 3 <= n_tokens <= 5:
        arms.append("shell_starts")
    return arms


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_grid_arguments(parser, tokens="2,3,4,5,6", seeds="4,5")  # seeds 4, 5: held out
    parser.add_argument("--max-iter", type=int, default=150,
                        help="evaluation cap of each solve (default 150)")
    parser.add_argument("--cap-seconds", type=float, default=240.0,
                        help="wall-clock cap of each solve's process (default 240)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(json.loads(args.child))
        return 0
    tokens, seeds, points, n_nodes = (int_list(args.tokens), int_list(args.seeds),
                                      int_list(args.points), 8192)
    if args.quick:
        tokens, seeds, points, n_nodes = [3], [4], [0], 256
    done = {}
    path = results_dir(args) / NAME
    if args.append and path.exists():
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            row = json.loads(line)
            done[(row["n_tokens"], row["seed"], row["point"], row["arm"])] = row
    path, write_row = open_jsonl(args, NAME, script=__file__, argv=argv, append=args.append)
    if not done:
        write_row(dict(reference_seconds=reference_seconds(args.quick)))
    for n_tokens in tokens:
        for seed in seeds:
            configs = grid_configurations(n_tokens, 6, seed)
            for point in points:
                key = (n_tokens, seed, point)
                landed = done.get(key + ("landed",))
                if landed is None:
                    landed = dict(n_tokens=n_tokens, seed=seed, point=point, arm="landed",
                                  config=configs[point],
                                  **run_in_child(configs[point], "landed", n_nodes,
                                                 args.max_iter, args.cap_seconds))
                    write_row(landed)
                    _report(landed)
                if landed["capped"]:
                    continue
                for arm in arms_to_run(n_tokens, landed, forced=args.quick):
                    if key + (arm,) in done:
                        continue
                    row = dict(n_tokens=n_tokens, seed=seed, point=point, arm=arm,
                               config=configs[point],
                               **run_in_child(configs[point], arm, n_nodes, args.max_iter,
                                              args.cap_seconds))
                    write_row(row)
                    _report(row)
    print(f"wrote {path}")
    return 0


def _report(row):
    where = f"T={row['n_tokens']} seed={row['seed']} point={row['point']} {row['arm']}"
    if row["capped"]:
        print(f"{where}: capped", flush=True)
        return
    print(f"{where}: {row['seconds']:.1f} s, {row['n_iter']} evaluations, "
          f"converged={row['converged']}, certified {row['certified_fraction']:.4f}, "
          f"test {row['test_error']:.6g}, applied {row['applied']}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
