"""Benchmark of the prediction engine (``make bench``): the same-instance prediction at d = 100
against the continuum point of the same configuration and an L-BFGS fit on the same teacher,
as ratios measured in one run.

For each configuration (softmax T = 2 and T = 3 seq2lab, softmax T = 2 seq2seq, linear T = 1
seq2lab; α = 0.3, λ = 0.01, Δ = 0.1, Wishart(0.5)) it times

- the continuum point (``n_features=None``),
- the same-instance prediction (``target=teacher``, ``correction="auto"``) and its core
  alone (``correction="none"``),
- a ``TiedAttentionRegressor`` L-BFGS fit on ``n = α d²`` samples of the same teacher
  (softmax T = 2 and linear T = 1),

each the median of ``--repeat`` runs after one warm-up, and prints the ratios. ``--json FILE``
also writes them (with the command and the date).

Usage: ``python benchmarks/prediction_engine.py [--quick] [--repeat 3] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
import warnings

CONFIGS = [
    dict(name="softmax T=2 seq2lab", attention="softmax", n_tokens=2, task="seq2lab", fit=True),
    dict(name="softmax T=3 seq2lab", attention="softmax", n_tokens=3, task="seq2lab", fit=False),
    dict(name="softmax T=2 seq2seq", attention="softmax", n_tokens=2, task="seq2seq", fit=False),
    dict(name="linear T=1 seq2lab", attention="linear", n_tokens=1, task="seq2lab", fit=True),
]
ALPHA, REG_LAMBDA, NOISE, D = 0.3, 0.01, 0.1, 100


def _median_time(fn, repeat):
    fn()  # warm-up (numba compilation, caches)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run(quick=False, repeat=3):
    from skattn import AttentionIndexedModel, TiedAttentionRegressor, WishartTarget
    from skattn.theory import solve_state_evolution

    d = 60 if quick else D
    rows = []
    for cfg in CONFIGS[:2] if quick else CONFIGS:
        teacher = AttentionIndexedModel(d, n_tokens=cfg["n_tokens"], target=WishartTarget(0.5),
                                        attention=cfg["attention"], noise=NOISE,
                                        random_state=0)
        model = dict(n_tokens=cfg["n_tokens"], attention=cfg["attention"], task=cfg["task"],
                     reg_lambda=REG_LAMBDA)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_cont, _ = _median_time(lambda: solve_state_evolution(
                ALPHA, target=WishartTarget(0.5), noise=NOISE, **model), repeat)
            t_auto, res = _median_time(lambda: solve_state_evolution(
                ALPHA, target=teacher, **model), repeat)
            t_core, _ = _median_time(lambda: solve_state_evolution(
                ALPHA, target=teacher, correction="none", **model), repeat)
        row = dict(config=cfg["name"], d=d, correction=res.correction,
                   continuum_s=t_cont, same_instance_s=t_auto, core_s=t_core,
                   same_instance_over_continuum=t_auto / t_cont)
        if cfg["fit"]:
            X, y = teacher.sample(int(ALPHA * d * d), random_state=1)

            def fit():
                return TiedAttentionRegressor(reg_lambda=REG_LAMBDA, solver="lbfgs",
                                              attention=cfg["attention"],
                                              random_state=0).fit(X, y)

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t_fit, _ = _median_time(fit, repeat)
            row.update(fit_s=t_fit, same_instance_over_fit=t_auto / t_fit)
        rows.append(row)
        print(_format(row), flush=True)
    return rows


def _format(row):
    text = (f"{row['config']:<20} d={row['d']:<4} {row['correction']:<10} continuum "
            f"{row['continuum_s']:6.2f} s  core {row['core_s']:6.2f} s  same-instance "
            f"{row['same_instance_s']:6.2f} s  = {row['same_instance_over_continuum']:4.1f}x "
            "continuum")
    if "fit_s" in row:
        text += f", {row['same_instance_over_fit']:4.2f}x an L-BFGS fit ({row['fit_s']:.2f} s)"
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d = 60, two configurations")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per entry")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = run(quick=args.quick, repeat=max(1, args.repeat))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"command": " ".join(["python", "benchmarks/prediction_engine.py"]
                                           + sys.argv[1:]),
                       "date": datetime.date.today().isoformat(), "rows": rows}, fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
