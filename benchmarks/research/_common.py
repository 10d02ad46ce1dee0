"""What every research script shares: its results folder, provenance and ``--quick``.

Each script of ``benchmarks/research/`` writes one result file under
``benchmarks/results/`` (``--results-dir`` to change it). The file carries the command that
produced it and the UTC date (:func:`write_result`), so the validation report
(:mod:`skattn.validation.report`, rendered at ``make docs``) can name both under every
table. ``--quick`` runs a small version of the study in a few seconds (small d, two seeds,
few test samples); it exists so that ``tests/validation/test_research_scripts.py`` runs every script
and a renamed library function breaks a test, not a study months later. Quick results go
to ``benchmarks/results/quick/`` (ignored by git) unless ``--results-dir`` is given.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import shlex
import sys
import time
from unittest import mock

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
#: The results folder of the research scripts (committed; the report reads it).
RESULTS = HERE.parent / "results"


def add_common_arguments(parser):
    """Add ``--quick`` and ``--results-dir`` to a script's parser."""
    parser.add_argument("--quick", action="store_true",
                        help="a small version of the study in a few seconds (a smoke run; "
                             "its result goes to results/quick/)")
    parser.add_argument("--results-dir", default=None,
                        help="folder of the result file (default benchmarks/results, "
                             "benchmarks/results/quick with --quick)")
    return parser


def add_grid_arguments(parser, *, tokens, seeds):
    """Add ``--tokens``, ``--seeds``, ``--points`` (the points of the speed grid to run,
    comma-separated, with these defaults) and ``--append`` to a script's parser; read them
    with :func:`int_list`."""
    parser.add_argument("--tokens", default=tokens, help=f"values of T (default {tokens})")
    parser.add_argument("--seeds", default=seeds, help=f"grid seeds (default {seeds})")
    parser.add_argument("--points", default="0,1,2,3,4,5",
                        help="indices into each grid of 6 points (default all)")
    parser.add_argument("--append", action="store_true",
                        help="keep the rows of an earlier run and skip what they did")
    return parser


def solve_settings(points, owner, attribute, values, key, *, load, config_of, solve):
    """Solve each grid point once per value of a solver setting, ``owner.attribute``
    (patched).

    ``points``: ``((n_tokens, seed, index), role)``; ``load(n_tokens)`` runs once per T
    first (compiled kernels), ``config_of(n_tokens, seed, index)`` gives the point's
    configuration and ``solve(config)`` its ``(seconds, result)``. Returns one row per
    point, its ``arms`` one per value (``{key: value, "seconds", "n_iter",
    "certified_fraction", "converged", "state": [m, q, Σ]}``), printing each as it ends."""
    for n_tokens in sorted({n_tokens for (n_tokens, _, _), _ in points}):
        load(n_tokens)
    rows = []
    for (n_tokens, seed, index), role in points:
        config = config_of(n_tokens, seed, index)
        row = dict(n_tokens=n_tokens, seed=seed, point=index, role=role, config=config,
                   arms=[])
        for value in values:
            with mock.patch.object(owner, attribute, value):
                seconds, res = solve(config)
            row["arms"].append({key: value, "seconds": seconds, "n_iter": int(res.n_iter),
                                "certified_fraction": float(res.certified_fraction),
                                "converged": bool(res.converged),
                                "state": [float(res.m), float(res.q), float(res.sigma)]})
        rows.append(row)
        print(f"T={n_tokens} seed={seed} point={index} ({role}): " + ", ".join(
            f"{attribute}={a[key]}: {a['certified_fraction']:.4f}, {a['seconds']:.1f} s, "
            f"{a['n_iter']} evaluations" for a in row["arms"]), flush=True)
    return rows


def int_list(text):
    """The integers of a comma-separated option (``"0,1,2"``)."""
    return [int(v) for v in text.split(",") if v.strip()]


def results_dir(args):
    """The folder a run writes into (created)."""
    if args.results_dir is not None:
        out = pathlib.Path(args.results_dir)
    else:
        out = RESULTS / "quick" if args.quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    return out


def provenance(script, argv):
    """``{"command": ..., "date": ...}`` of this run (UTC, ISO 8601, seconds)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = " ".join(["python", f"benchmarks/research/{pathlib.Path(script).name}",
                        *map(shlex.quote, map(str, argv))])
    date = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return {"command": command, "date": date.isoformat()}


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def write_result(args, name, payload, *, script, argv):
    """Write ``payload`` (a dict, or a list of rows) to ``<results>/<name>`` as JSON.

    The file is ``{"command": ..., "date": ..., "quick": bool, **payload}`` (a list goes
    under ``"rows"``). Returns the path.
    """
    meta = provenance(script, argv)
    meta["quick"] = bool(args.quick)
    body = {"rows": payload} if isinstance(payload, list) else dict(payload)
    path = results_dir(args) / name
    path.write_text(json.dumps(_plain({**meta, **body}), indent=1, default=float) + "\n",
                    encoding="utf-8")
    print(f"wrote {path}", flush=True)
    return path


def open_jsonl(args, name, *, script, argv, append=False):
    """A JSON-lines result file whose first line is the provenance; rows are appended one by one
    (a long run that stops keeps its rows). Returns ``(path, write_row)``."""
    path = results_dir(args) / name
    if not (append and path.exists() and path.stat().st_size):
        meta = provenance(script, argv)
        meta["quick"] = bool(args.quick)
        path.write_text(json.dumps(meta) + "\n", encoding="utf-8")

    def write_row(row):
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(_plain(row)) + "\n")

    return path, write_row


def reference_seconds(quick=False):
    """Time of a fixed numpy workload (20 eigh of 400×400), to express the machine's load.

    None with ``quick`` (a smoke run measures nothing, and the workload can take a minute on
    a loaded machine).
    """
    if quick:
        return None
    a = np.random.default_rng(0).standard_normal((400, 400))
    a = a + a.T
    start = time.perf_counter()
    for _ in range(20):
        np.linalg.eigh(a)
    return time.perf_counter() - start
