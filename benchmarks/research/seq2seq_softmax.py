"""Finite-d seq2seq state evolution of factored SOFTMAX attention against trained models.

For each configuration (d, T, teacher seed) a teacher
``AttentionIndexedModel(d, n_tokens=T, target=WishartTarget(0.5),
random_state=seed_for(seed, d, "teacher"))`` (softmax, β = β0 = 1, no label noise) draws
``round(α d²)`` training samples (``seed_for(seed, d, "train")``); the seq2lab labels ``A`` and
the seq2seq labels ``A X`` share the tokens. :class:`~skattn.TiedAttentionRegressor`
(softmax, factored, default L-BFGS, κ = 1, λ = 0.1) is fitted to both. Measured per fit, on
20 000 fresh samples (``seed_for(seed, d, "test")``): the seq2seq test error
``‖(Â − Y) X‖²_F/d`` and the seq2lab form ``Σ_ab (Â − A0)²``.

Predictions, on the teacher's own spectrum (``target=teacher``):

- ``today``: :func:`~skattn.theory.solve_state_evolution` (the finite-d seq2lab softmax
  state evolution, which ``task="seq2seq"`` returned before this module);
- ``bartlett/seq2seq`` and ``bartlett/seq2lab``:
  :func:`~skattn.theory.seq2seq_softmax.solve_seq2seq_softmax_state_evolution` with either
  training loss (exact token Gram matrix, nominal α); its ``test_error`` is the seq2seq
  metric, ``seq2lab_test_error`` the seq2lab form.

Gaps are measured/predicted − 1, mean ± standard error over teachers. The routing rule was
fixed before the measurement (docs/theory.rst §4, "seq2seq state evolution").

Usage::

    PYTHONPATH=. python benchmarks/research/seq2seq_softmax.py            # fits + SE (~30 min)
    PYTHONPATH=. python benchmarks/research/seq2seq_softmax.py --stage fits
    PYTHONPATH=. python benchmarks/research/seq2seq_softmax.py --stage theory

Writes ``benchmarks/results/seq2seq_softmax.json`` (each stage keeps the other's rows).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings

import numpy as np
from _common import add_common_arguments, provenance, reference_seconds, results_dir


ALPHA, REG_LAMBDA, KAPPA0, N_TEST = 0.3, 0.1, 0.5, 20_000
# (d, T, teacher seeds)
CONFIGS = [(60, 2, (0, 1, 2)), (60, 3, (0, 1, 2)), (100, 2, tuple(range(6))),
           (100, 3, tuple(range(6)))]


def _teacher(d, T, seed):
    from skattn.data import AttentionIndexedModel, WishartTarget
    from skattn.validation import seed_for
    return AttentionIndexedModel(d, n_tokens=T, target=WishartTarget(KAPPA0),
                                 random_state=seed_for(seed, d, "teacher"))


def simulate(d, T, seed):
    """Fit seq2lab and seq2seq on one teacher and the same tokens; the measured errors."""
    from skattn import TiedAttentionRegressor
    from skattn.validation import seed_for

    teacher = _teacher(d, T, seed)
    n = int(round(ALPHA * d * d))
    X, A = teacher.sample(n, task="seq2lab", random_state=seed_for(seed, d, "train"),
                          layout="tokens")
    X_test, A_test = teacher.sample(N_TEST, task="seq2lab",
                                    random_state=seed_for(seed, d, "test"), layout="tokens")
    out = {"d": d, "n_tokens": T, "seed": seed, "n_samples": n}
    for task, y in (("seq2lab", A), ("seq2seq", A @ X)):
        start = time.perf_counter()
        est = TiedAttentionRegressor(reg_lambda=REG_LAMBDA, task=task, device="cpu",
                                     random_state=seed_for(seed, d, "estimator"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        A_hat = est.attention_matrix(X_test)
        S = est.S_
        out[task] = {
            "seq2seq_test_error": float(np.mean(np.sum(((A_hat - A_test) @ X_test) ** 2,
                                                       axis=(1, 2)) / d)),
            "seq2lab_test_error": float(np.mean(np.sum((A_hat - A_test) ** 2, axis=(1, 2)))),
            "s_error": float(np.sum((S - teacher.S0_) ** 2) / d),
            "trace": float(np.trace(S) / d), "seconds": time.perf_counter() - start,
        }
    return out


def predict(d, T, seed, n_nodes):
    """Today's seq2lab state evolution and the exact-Gram softmax fixed points."""
    from skattn.theory import solve_state_evolution
    from skattn.theory.seq2seq_softmax import solve_seq2seq_softmax_state_evolution

    teacher = _teacher(d, T, seed)
    today = solve_state_evolution(ALPHA, target=teacher, reg_lambda=REG_LAMBDA)
    out = {"today": {"test_error": float(today.test_error), "s_error": float(today.s_error),
                     "converged": bool(today.converged)}}
    for loss in ("seq2seq", "seq2lab"):
        start = time.perf_counter()
        r = solve_seq2seq_softmax_state_evolution(ALPHA, target=teacher, reg_lambda=REG_LAMBDA,
                                                  loss=loss, n_nodes=n_nodes)
        out[f"bartlett/{loss}"] = {k: (float(v) if isinstance(v, (float, np.floating)) else v)
                                   for k, v in ((k, getattr(r, k)) for k in (
                                       "m", "q", "trace", "s_error", "test_error",
                                       "seq2lab_test_error", "converged", "residual",
                                       "n_calls"))}
        out[f"bartlett/{loss}"]["seconds"] = time.perf_counter() - start
    return out


def _stat(values):
    v = np.asarray(values, float)
    se = float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
    return [float(np.mean(v)), se]


def summary(runs):
    """Per (d, T): trained seq2seq test error over each prediction − 1 (mean ± s.e.)."""
    table = []
    for d, T, _ in CONFIGS:
        group = [r for r in runs if (r["d"], r["n_tokens"]) == (d, T) and "theory" in r]
        if not group:
            continue
        row = {"d": d, "n_tokens": T, "n_teachers": len(group)}
        meas = [r["seq2seq"]["seq2seq_test_error"] for r in group]
        row["gap_today"] = _stat([m / r["theory"]["today"]["test_error"] - 1
                                  for m, r in zip(meas, group)])
        row["gap_bartlett"] = _stat([m / r["theory"]["bartlett/seq2seq"]["test_error"] - 1
                                     for m, r in zip(meas, group)])
        # seq2lab estimator against the Bartlett seq2lab-loss prediction and today's SE
        row["seq2lab_gap_today"] = _stat([r["seq2lab"]["seq2lab_test_error"]
                                          / r["theory"]["today"]["test_error"] - 1
                                          for r in group])
        row["seq2lab_gap_bartlett"] = _stat([
            r["seq2lab"]["seq2lab_test_error"]
            / r["theory"]["bartlett/seq2lab"]["seq2lab_test_error"] - 1 for r in group])
        row["bartlett_seq2lab_over_today"] = _stat([
            r["theory"]["bartlett/seq2lab"]["seq2lab_test_error"]
            / r["theory"]["today"]["test_error"] - 1 for r in group])
        row["excess_measured"] = _stat([r["seq2seq"]["seq2lab_test_error"]
                                        / r["seq2lab"]["seq2lab_test_error"] - 1
                                        for r in group])
        row["excess_bartlett"] = _stat([
            r["theory"]["bartlett/seq2seq"]["seq2lab_test_error"]
            / r["theory"]["bartlett/seq2lab"]["seq2lab_test_error"] - 1 for r in group])
        table.append(row)
    return table


def routing_rule(table):
    """The pre-fixed rule: at d = 100, |mean gap| ≤ 3 % for T = 2 and 3, and no worse in
    absolute value than today's gap for either T."""
    rows = {r["n_tokens"]: r for r in table if r["d"] == 100}
    if set(rows) != {2, 3}:
        return False
    return all(abs(rows[T]["gap_bartlett"][0]) <= 0.03
               and abs(rows[T]["gap_bartlett"][0]) <= abs(rows[T]["gap_today"][0])
               for T in (2, 3))


def _load(path):
    if path.exists():
        return json.loads(path.read_text())
    return {"runs": []}


def _save(path, data):
    path.write_text(json.dumps(data, indent=1, default=float) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("all", "fits", "theory"), default="all")
    parser.add_argument("--n-nodes", type=int, default=8192)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    global CONFIGS, N_TEST  # --quick: one small configuration (the summaries follow)
    if args.quick:
        CONFIGS, N_TEST, args.n_nodes = [(12, 2, (0, 1))], 500, 1024
    path = results_dir(args) / "seq2seq_softmax.json"
    data = _load(path)
    data.update(provenance(__file__, argv), quick=bool(args.quick))  # the last run's
    runs = {(r["d"], r["n_tokens"], r["seed"]): r for r in data["runs"]}
    ref = reference_seconds(args.quick)
    start = time.perf_counter()
    for d, T, seeds in CONFIGS:
        for seed in seeds:
            key = (d, T, seed)
            if args.stage in ("all", "fits") and key not in runs:
                runs[key] = simulate(d, T, seed)
            if args.stage in ("all", "theory") and key in runs:
                runs[key]["theory"] = predict(d, T, seed, args.n_nodes)
            data["runs"] = sorted(runs.values(), key=lambda r: (r["d"], r["n_tokens"],
                                                                r["seed"]))
            _save(path, data)
            print(json.dumps({"d": d, "T": T, "seed": seed,
                              "elapsed": time.perf_counter() - start}), flush=True)
    data["summary"] = summary(data["runs"])
    data["routing_rule_passes"] = routing_rule(data["summary"])
    data["settings"] = {"alpha": ALPHA, "reg_lambda": REG_LAMBDA, "wishart_kappa": KAPPA0,
                        "n_test": N_TEST, "n_nodes": args.n_nodes}
    data["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count(),
                       "load_average": os.getloadavg(), "reference_seconds": ref,
                       "wall_seconds": time.perf_counter() - start,
                       "wall_over_reference": ((time.perf_counter() - start) / ref
                                               if ref else None)}
    _save(path, data)
    print(json.dumps(data["summary"], indent=1))
    print("routing rule passes:", data["routing_rule_passes"])


if __name__ == "__main__":
    main()
