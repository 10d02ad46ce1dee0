"""Solver rules fitted on measurements, each switched off on points it was not fitted on.

The rules:

* ``handover_orthogonal``: after a failed handover from the coarse stage within
  ``handover_orthogonal_threshold`` of a fixed point near the clip of m, the orthogonal
  variables first (``skattn.theory.core.solve``; chosen on grid seeds 0–3). Off: the
  threshold 0 at every overlap.
* ``orthogonal_at_recovery``: the larger threshold of that rule nearer perfect recovery
  (``HANDOVER_ORTHOGONAL_RESIDUAL_AT_RECOVERY`` at an overlap of at least
  ``RECOVERY_OVERLAP``; chosen on grid seed 5, T = 6, point 0). Off: the clip's threshold
  ``HANDOVER_ORTHOGONAL_RESIDUAL`` there too.
* ``polish_stall_window``: the polish from the warm fixed point stops at a stall over
  ``POLISH_STALL_EVALS`` (8) evaluations rather than ``STALL_EVALS`` (20)
  (``skattn.theory.core.fixed_point_map.polish_stall_window``; chosen on seeds 0–1). Off:
  both 20.
* ``shell_starts``: at T = 3–5, a node whose first certificate fails gets
  ``SoftmaxChannel.shell_starts`` (8) Newton starts around its found minimiser in the
  second round (chosen on replays of two points of seed 0). Off: 0.
* ``split_rounds``: at T ≥ 3, a node whose row-wise dual bound fails under the equal split
  of the quadratic tries up to ``SoftmaxChannel.split_rounds`` (4) unequal splits
  (``skattn.theory.channels``, the certificate; its rounds and trust region chosen on
  seed 0 point 3 at T = 3, seed 0 point 2 and seed 5 point 1 at T = 4, seed 4 point 5 at
  T = 5). Off: 0. It changes which nodes are certified, never the minimisers, so the two
  arms differ in the certified fraction, the bound and the time only.
* ``multistart_memory``: above ``CERTIFIED_POLISH_MAX_BETA`` at T ≥ 3, the polish first
  iterates on the multi-start memory and keeps its point where it converges and one
  multi-start evaluation there is within the tolerance, else runs as without it
  (``skattn.theory.core.fixed_point_map.polish_multistart``; its cap chosen a priori,
  the fallback's path on seeds 0–2). Off: ``SoftmaxChannel.multistart_memorable`` False.
* ``warm_give_up``: the warm iterations end after ``WARM_GIVE_UP_EVALS`` (10) evaluations
  without a 10 % gain of their best residual (counted from its first gain on the start),
  at any level
  (``skattn.theory.core.fixed_point_map.iterate``; chosen on grid seeds 0–3, where three
  points changed). Off: ``WARM_GIVE_UP_EVALS`` None (only ``WARM_CALLS``).
* ``one_certified_polish``: below ``CERTIFIED_POLISH_MAX_BETA`` at T ≥ 3, the certified
  polish is one evaluation, after which the multi-start polish goes on where it did not
  converge (``polishes_certified_once``; chosen on grid seeds 0–3). Off: the certified
  polish to the tolerance.

The points: ``--set grid`` (default), the points of ``grid_configurations(T, 6, seed)``
(``benchmarks/run_benchmarks.py``) for the seeds given (default 4 and 5); ``--set
recovery``, noiseless configurations near perfect recovery (:data:`RECOVERY_CONFIGS`),
where the handover rules apply. Each point is solved at 8192 nodes with every rule on (the
``landed`` arm), instrumented to record whether each rule applied: the orthogonal variables
were taken after a handover (from beyond the clip's threshold: the recovery level), a
polish run with the short window ended by a stall, warm iterations gave up, or the
multi-start polish ran below the edge (after one certified evaluation that did not
converge). It is then solved again with each rule
that applied switched off. Where a rule did not apply the path is the same by
construction: the handover rule was not entered, and a stall over 20 evaluations implies
one over 8 (the best residual never rises), so a polish that the short window did not stop
runs the same with the long one. Warm iterations that did not give up run the same without the
give-up window, and a certified polish whose one evaluation converged is the same
polish as one to the tolerance. Whether a node ran the shell starts cannot be seen from
outside the compiled prox, so the ``shell_starts`` arm runs at every T = 3–5 point, and
the ``split_rounds`` arm at every T ≥ 3 point.

Each solve runs in a child process with a wall-clock cap (``--cap-seconds``; a capped
solve is recorded as such) and the evaluation cap ``--max-iter``, alternating arms point
by point. A row per (point, arm), JSON lines (``solver_rules.jsonl``,
``solver_rules_recovery.jsonl``, or ``--output``; ``--append`` goes on after a
stop): seconds, evaluations, converged, residual, the stall floor, certified fraction,
test and train error, the bound on how far the uncertified nodes can move the conjugates
(``uncertified_bound``; rows before 2026-12-05 20:30 UTC carry ``test_error_bound``, a key
the bound never had, so always null), and (landed arm) the rules that applied.

Usage: ``python benchmarks/research/solver_rules.py [--quick] [--set grid|recovery]
[--tokens 2,3,4,5,6] [--seeds 4,5] [--rules ...] [--min-beta B] [--max-iter 150]
[--cap-seconds 240] [--append] [--output NAME] [--results-dir DIR]``. The times are
wall-clock: run it alone on the machine.
``--quick``: T = 3, seed 4, point 0, 256 nodes, every arm forced.
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
from skattn.theory.core import fixed_point_map, iteration
from skattn.theory.core import solve as solve_module
from skattn.theory.core.iteration import STALL_EVALS

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from run_benchmarks import grid_configurations, load_kernels, solve_grid_point  # noqa: E402

NAMES = {"grid": "solver_rules.jsonl", "recovery": "solver_rules_recovery.jsonl"}
#: the rules whose use cannot be seen from outside the compiled prox: switched off at every
#: point of their T
EVERY_POINT = ("shell_starts", "split_rounds")
RULES = ("handover_orthogonal", "orthogonal_at_recovery", "polish_stall_window",
         "shell_starts", "split_rounds", "multistart_memory", "warm_give_up",
         "one_certified_polish")
#: Noiseless configurations near perfect recovery (overlap m²/(q Q0) > 0.99): variations
#: of grid seed 5's T = 6 point 0 (the one the recovery level was chosen on, first here)
#: in T, κ0, α, λ and β
RECOVERY_CONFIGS = [
    dict(n_tokens=6, noise=0.0, kappa=0.4869445734112373, alpha=0.4695880035713068,
         reg_lambda=0.0028358290827047218, beta=2.092028849072964),
    dict(n_tokens=6, noise=0.0, kappa=0.6, alpha=0.5, reg_lambda=0.002, beta=2.5),
    dict(n_tokens=6, noise=0.0, kappa=0.4, alpha=0.45, reg_lambda=0.004, beta=1.8),
    dict(n_tokens=6, noise=0.0, kappa=0.49, alpha=0.4, reg_lambda=0.0028, beta=2.6),
    dict(n_tokens=6, noise=0.0, kappa=0.8, alpha=0.55, reg_lambda=0.0012, beta=2.0),
    dict(n_tokens=5, noise=0.0, kappa=0.49, alpha=0.47, reg_lambda=0.0028, beta=2.09),
    dict(n_tokens=5, noise=0.0, kappa=0.6, alpha=0.55, reg_lambda=0.0015, beta=2.3),
    dict(n_tokens=4, noise=0.0, kappa=0.49, alpha=0.47, reg_lambda=0.0028, beta=2.09),
    dict(n_tokens=3, noise=0.0, kappa=0.49, alpha=0.47, reg_lambda=0.0028, beta=2.09),
]


def _switched_off(rule):
    """The patch that switches ``rule`` off."""
    if rule == "handover_orthogonal":
        return mock.patch.object(solve_module, "handover_orthogonal_threshold",
                                 lambda fixed_point_map, x: 0.0)
    if rule == "orthogonal_at_recovery":
        return mock.patch.object(fixed_point_map, "HANDOVER_ORTHOGONAL_RESIDUAL_AT_RECOVERY",
                                 fixed_point_map.HANDOVER_ORTHOGONAL_RESIDUAL)
    if rule == "polish_stall_window":
        return mock.patch.object(fixed_point_map, "POLISH_STALL_EVALS", STALL_EVALS)
    if rule == "shell_starts":
        return mock.patch.object(SoftmaxChannel, "shell_starts", 0)
    if rule == "split_rounds":
        return mock.patch.object(SoftmaxChannel, "split_rounds", 0)
    if rule == "multistart_memory":
        return mock.patch.object(SoftmaxChannel, "multistart_memorable",
                                 property(lambda self: False))
    if rule == "warm_give_up":
        return mock.patch.object(fixed_point_map, "WARM_GIVE_UP_EVALS", None)
    if rule == "one_certified_polish":
        return mock.patch.object(fixed_point_map, "polishes_certified_once",
                                 lambda channel: False)
    raise ValueError(f"rule must be one of {RULES} or 'landed', got {rule!r}.")


def solve_arm(config, arm, n_nodes, max_iter, rules=RULES):
    """One solve with ``arm`` (``"landed"`` or a rule switched off): a result row, with
    those of ``rules`` that applied in it."""
    applied = {"handover_orthogonal": 0, "orthogonal_at_recovery": 0,
               "polish_stall_window": 0, "multistart_memory": 0, "warm_give_up": 0,
               "one_certified_polish": 0}
    orthogonal, run = solve_module.iterate_orthogonal, fixed_point_map.iterate_starts
    polish, anderson = fixed_point_map.polish_multistart, iteration.anderson

    def counted_polish(fp_map, channel, x, **kwargs):
        applied["multistart_memory"] += bool(getattr(channel, "multistart_memorable", False))
        # below the edge only after a certified evaluation that did not converge
        applied["one_certified_polish"] += bool(fixed_point_map.polishes_certified(channel))
        return polish(fp_map, channel, x, **kwargs)

    def counted_anderson(residual, x, **kwargs):
        out = anderson(residual, x, **kwargs)
        applied["warm_give_up"] += "gave_up" in (kwargs.get("stall") or {})
        return out

    def counted_orthogonal(fp_map, x, res_norm, **kwargs):
        applied["handover_orthogonal"] += 1
        if res_norm >= fixed_point_map.HANDOVER_ORTHOGONAL_RESIDUAL:
            applied["orthogonal_at_recovery"] += 1
        return orthogonal(fp_map, x, res_norm, **kwargs)

    def counted_run(fp_map, starts, *, stall_evals=STALL_EVALS, **kwargs):
        before = fp_map.stall_floor
        out = run(fp_map, starts, stall_evals=stall_evals, **kwargs)
        if stall_evals < STALL_EVALS and before is None and fp_map.stall_floor is not None:
            applied["polish_stall_window"] += 1
        return out

    patches = [mock.patch.object(solve_module, "iterate_orthogonal", counted_orthogonal),
               mock.patch.object(fixed_point_map, "iterate_starts", counted_run),
               mock.patch.object(fixed_point_map, "polish_multistart", counted_polish),
               mock.patch.object(iteration, "anderson", counted_anderson)]
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
                uncertified_bound=bound or None, state=[res.m, res.q, res.sigma],
                applied={rule: n for rule, n in applied.items() if rule in rules}
                if arm == "landed" else None)


def _child(spec):
    """Entry of a child process: load the kernels of this T, solve, print the row."""
    config = spec["config"]
    load_kernels(config["n_tokens"], config["beta"])
    row = solve_arm(config, spec["arm"], spec["n_nodes"], spec["max_iter"],
                    spec.get("rules", RULES))
    print(json.dumps(row, default=float))


def run_in_child(config, arm, n_nodes, max_iter, cap_seconds, rules=RULES):
    """:func:`solve_arm` in a fresh process, at most ``cap_seconds``: the row, or a row
    with ``capped`` set."""
    spec = json.dumps(dict(config=config, arm=arm, n_nodes=n_nodes, max_iter=max_iter,
                           rules=list(rules)))
    try:
        out = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True,
                             text=True, timeout=cap_seconds, check=True)
    except subprocess.TimeoutExpired:
        return dict(capped=True, seconds=None)
    except subprocess.CalledProcessError as err:
        raise RuntimeError(f"the solve of {arm} at {config} failed:\n{err.stderr}") from err
    return dict(capped=False, **json.loads(out.stdout.strip().splitlines()[-1]))


def arms_to_run(n_tokens, landed, forced=False, rules=RULES):
    """The rules (of ``rules``) to switch off at a point, given its landed row."""
    if forced:
        return list(rules)
    applied = landed.get("applied") or {}
    arms = [rule for rule in rules if rule not in EVERY_POINT and applied.get(rule)]
    if 3 <= n_tokens <= 5 and "shell_starts" in rules:
        arms.append("shell_starts")
    if n_tokens >= 3 and "split_rounds" in rules:
        arms.append("split_rounds")
    return arms


def _points(args):
    """``(n_tokens, seed, point, config)`` of the chosen set (seed None: the recovery set)."""
    if args.set == "recovery":
        points = [(c["n_tokens"], None, k, c) for k, c in enumerate(RECOVERY_CONFIGS)]
        return points[-1:] if args.quick else points
    tokens, seeds, points = int_list(args.tokens), int_list(args.seeds), int_list(args.points)
    if args.quick:
        tokens, seeds, points = [3], [4], [0]
    chosen = [(n_tokens, seed, point, grid_configurations(n_tokens, 6, seed)[point])
              for n_tokens in tokens for seed in seeds for point in points]
    return [p for p in chosen if p[3]["beta"] > args.min_beta]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_grid_arguments(parser, tokens="2,3,4,5,6", seeds="4,5")  # seeds 4, 5: held out
    parser.add_argument("--max-iter", type=int, default=150,
                        help="evaluation cap of each solve (default 150)")
    parser.add_argument("--cap-seconds", type=float, default=240.0,
                        help="wall-clock cap of each solve's process (default 240)")
    parser.add_argument("--set", choices=sorted(NAMES), default="grid",
                        help="the points: the speed grid's (default) or the noiseless ones "
                             "near perfect recovery (RECOVERY_CONFIGS)")
    parser.add_argument("--rules", default=",".join(RULES),
                        help="the rules to switch off (default all)")
    parser.add_argument("--min-beta", type=float, default=0.0,
                        help="only the grid points of larger β (default 0: all)")
    parser.add_argument("--output", default=None,
                        help="the results file's name (default by --set: "
                             + ", ".join(f"{k}: {v}" for k, v in NAMES.items()) + ")")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(json.loads(args.child))
        return 0
    rules = [r for r in args.rules.split(",") if r]
    for rule in rules:
        _switched_off(rule)                          # unknown names fail before any solve
    n_nodes, name = (256 if args.quick else 8192), args.output or NAMES[args.set]
    done = {}
    path = results_dir(args) / name
    if args.append and path.exists():
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            row = json.loads(line)
            if "arm" in row:
                done[(row["n_tokens"], row["seed"], row["point"], row["arm"])] = row
    path, write_row = open_jsonl(args, name, script=__file__, argv=argv, append=args.append)
    if not done:
        write_row(dict(reference_seconds=reference_seconds(args.quick)))
    for n_tokens, seed, point, config in _points(args):
        key = (n_tokens, seed, point)
        landed = done.get(key + ("landed",))
        if landed is None:
            landed = dict(n_tokens=n_tokens, seed=seed, point=point, arm="landed",
                          config=config, **run_in_child(config, "landed", n_nodes,
                                                        args.max_iter, args.cap_seconds,
                                                        rules))
            write_row(landed)
            _report(landed)
        if landed["capped"]:
            continue
        for arm in arms_to_run(n_tokens, landed, forced=args.quick, rules=rules):
            if key + (arm,) in done:
                continue
            row = dict(n_tokens=n_tokens, seed=seed, point=point, arm=arm, config=config,
                       **run_in_child(config, arm, n_nodes, args.max_iter, args.cap_seconds))
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
