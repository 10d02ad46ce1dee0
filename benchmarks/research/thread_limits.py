"""Oversubscription check: a 12-fit GridSearchCV at n_jobs=1 and n_jobs=2, with a CPU load.

The search is ``GridSearchCV(TiedAttentionRegressor(...), {"reg_lambda": 4 values}, cv=3)``
(12 fits, no refit) at d = 20 and d = 80, while a background process spins on numpy
matrix products (its BLAS threads compete for the cores, as another user's job would).
Each row is one thread policy:

- ``n_jobs=1 unlimited``: the main process with torch's default thread count;
- ``n_jobs=1 limit_threads(1)``: the same inside :func:`skattn.limit_threads`;
- ``n_jobs=2 unlimited``: loky workers with ``inner_max_num_threads=cpu_count`` (what a
  search would do if joblib did not limit the threads of its workers);
- ``n_jobs=2 joblib default``: loky workers as joblib starts them, ``cpu_count // 2``
  threads each (what a plain ``GridSearchCV(n_jobs=2)`` does).

Usage: ``python benchmarks/research/thread_limits.py [--dims 20 80] [--alpha 0.1] [--max-iter 20]
[--repeats 1] [--no-load]`` from the repository root (``PYTHONPATH=.`` for a checkout).
Prints wall times and their ratio to ``n_jobs=1 unlimited`` at the same d and writes them
to ``benchmarks/results/thread_limits.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
import warnings

import numpy as np
from _common import add_common_arguments, write_result
from joblib import Parallel, cpu_count, delayed, parallel_config
from sklearn.model_selection import GridSearchCV

import skattn
from skattn import TiedAttentionRegressor, make_attention_indexed

LAMBDAS = [1e-3, 1e-1, 1.0, 10.0]
# a background job: numpy matmuls with its BLAS at its default thread count
LOAD_CODE = ("import numpy as np\n"
             "a = np.random.default_rng(0).standard_normal((400, 400))\n"
             "while True:\n"
             "    a = np.tanh(a @ a / 400)\n")


def _import_torch():
    import torch
    return torch.get_num_threads()


def _search(X, y, n_jobs, max_iter):
    est = TiedAttentionRegressor(width=0.5, max_iter=max_iter, device="cpu", random_state=0)
    search = GridSearchCV(est, {"reg_lambda": LAMBDAS}, cv=3, n_jobs=n_jobs, refit=False,
                          scoring="neg_mean_squared_error")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small max_iter stops fits early: fine here
        start = time.perf_counter()
        search.fit(X, y.reshape(len(y), -1))
        return time.perf_counter() - start


POLICIES = {
    "n_jobs=1 unlimited": (1, contextlib.nullcontext),
    "n_jobs=1 limit_threads(1)": (1, lambda: skattn.limit_threads(1)),
    "n_jobs=2 unlimited": (2, lambda: parallel_config(backend="loky",
                                                      inner_max_num_threads=cpu_count())),
    "n_jobs=2 joblib default": (2, lambda: parallel_config(backend="loky")),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[20, 80])
    parser.add_argument("--alpha", type=float, default=0.1,
                        help="samples per d² (default 0.1)")
    parser.add_argument("--max-iter", type=int, default=20, help="L-BFGS steps per fit")
    parser.add_argument("--repeats", type=int, default=1, help="best of this many runs")
    parser.add_argument("--no-load", action="store_true", help="no background process")
    parser.add_argument("--policies", type=int, nargs="+", default=None,
                        help="run only these rows (0-3, in the order above); ratios are "
                             "then to the first row run")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:  # d = 8, two L-BFGS steps, the in-process policies, no load
        args.dims, args.max_iter, args.no_load, args.policies = [8], 2, True, [0, 1]

    print(f"# {cpu_count()} cores (joblib), background load: {not args.no_load}, "
          f"pid {os.getpid()}")
    print(f"{'d':>4}  {'policy':<28}{'wall s':>8}{'ratio':>8}", flush=True)
    load = None if args.no_load else subprocess.Popen([sys.executable, "-c", LOAD_CODE])
    try:
        time.sleep(0.5)
        rows = []
        for d in args.dims:
            X, y = make_attention_indexed(n_samples=int(args.alpha * d * d), n_features=d,
                                          random_state=0, layout="tokens")
            X = X.reshape(len(X), -1)
            base = None
            for index, (name, (n_jobs, context)) in enumerate(POLICIES.items()):
                if args.policies is not None and index not in args.policies:
                    continue
                times = []
                with context():
                    # start the workers (and their torch import) before timing
                    Parallel(n_jobs=n_jobs)(delayed(_import_torch)() for _ in range(n_jobs))
                    for _ in range(args.repeats):
                        times.append(_search(X, y, n_jobs, args.max_iter))
                wall = min(times)
                base = wall if base is None else base
                rows.append((d, name, wall, wall / base))
                print(f"{d:>4}  {name:<28}{wall:>8.2f}{wall / base:>8.2f}", flush=True)
    finally:
        if load is not None:
            load.kill()
            load.wait()
    write_result(args, "thread_limits.json",
                 {"cpu_count": cpu_count(), "background_load": not args.no_load,
                  "rows": [dict(zip(("d", "policy", "wall_s", "ratio"), r)) for r in rows]},
                 script=__file__, argv=argv)
    return rows


if __name__ == "__main__":
    main()
