"""The correction table at its domain edges: continuity scans and the ordinary teacher with a
large top mode (docs: Finite-size corrections).

Measures, with the default ``correction="auto"``:

- ``d``: adjacent-d changes of the same-instance prediction on a fixed smooth spectrum
  (eigenvalues √3 (i + ½)/d, so only d changes), linear T = 1 and softmax T = 2, Δ = 0.1,
  α = 0.3, λ = 0.05, at d = 39/40/41 and 399/400/401 (the leverage correction's old hard
  edges);
- ``kurtosis``: κ4 = 0 against 1e-12 (softmax T = 2, λ = 0.01, d = 40);
- ``width``: κ = 1 against 0.99999 on a PowerLawTarget(1.0) teacher at d = 40;
- ``alpha_perf``: a noiseless linear T = 1 teacher (Wishart(0.5), d = 100, λ = 1e-3) across
  its perfect-recovery threshold, with the Gaussian core beside it;
- ``wishart38``: the Wishart(0.5) teacher at d = 38 whose top mode carries 28 % of
  ``‖S0‖²_F`` (the old hard 25 % edge sent it to the spiked state evolution): trained L-BFGS
  models against the prediction and the core.

Usage: ``python benchmarks/research/correction_edges.py [--quick] [--results-dir DIR]``;
writes ``correction_edges.json``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import add_common_arguments, write_result

from skattn import AttentionIndexedModel, PowerLawTarget, SpectrumTarget, WishartTarget
from skattn.theory import perfect_recovery_threshold, solve_state_evolution


def _smooth(d):
    return SpectrumTarget(np.sqrt(3) * (np.arange(d) + 0.5) / d)


def _solve(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return solve_state_evolution(*args, **kw)


def scan_d(quick):
    rows = []
    cases = [("linear", 1), ("softmax", 2)]
    ranges = [[39, 40, 41]] if quick else [[39, 40, 41], [399, 400, 401]]
    for attention, n_tokens in cases[:1] if quick else cases:
        for ds in ranges:
            errors = []
            for d in ds:
                res = _solve(0.3, target=_smooth(d), n_features=d, n_tokens=n_tokens,
                             attention=attention, noise=0.1, reg_lambda=0.05)
                errors.append(res.test_error)
                rows.append(dict(kind="d", attention=attention, n_tokens=n_tokens, d=d,
                                 test_error=res.test_error, correction=res.correction,
                                 weight=res.correction_weight))
            steps = np.diff(errors) / np.asarray(errors[:-1])
            rows.append(dict(kind="d_steps", attention=attention, n_tokens=n_tokens,
                             d=ds, max_relative_step=float(np.max(np.abs(steps)))))
    return rows


def pairs(quick):
    rows = []
    d = 40
    kw = dict(n_tokens=2, reg_lambda=0.01, target=_smooth(d), n_features=d)
    a = _solve(0.3, token_kurtosis=0.0, **kw)
    b = _solve(0.3, token_kurtosis=1e-12, **kw)
    rows.append(dict(kind="kurtosis", values=[0.0, 1e-12], test_errors=[a.test_error,
                                                                        b.test_error],
                     relative_change=b.test_error / a.test_error - 1))
    if not quick:
        teacher = AttentionIndexedModel(d, n_tokens=2, target=PowerLawTarget(1.0),
                                        random_state=0)
        a = _solve(0.3, target=teacher, reg_lambda=0.01, width_ratio=1.0)
        b = _solve(0.3, target=teacher, reg_lambda=0.01, width_ratio=0.99999)
        rows.append(dict(kind="width", values=[1.0, 0.99999],
                         test_errors=[a.test_error, b.test_error],
                         relative_change=b.test_error / a.test_error - 1))
    return rows


def alpha_perf(quick):
    d = 40 if quick else 100
    teacher = AttentionIndexedModel(d, n_tokens=1, attention="linear",
                                    target=WishartTarget(0.5), random_state=0)
    ap = perfect_recovery_threshold(target=teacher, n_tokens=1, attention="linear",
                                    n_features=d)
    rows = []
    for f in ((0.99, 1.05) if quick else (0.8, 0.9, 0.99, 0.999, 1.001, 1.05, 1.1, 1.2)):
        res = _solve(f * ap, target=teacher, reg_lambda=1e-3)
        core = _solve(f * ap, target=teacher, reg_lambda=1e-3, correction="none")
        rows.append(dict(kind="alpha_perf", d=d, alpha_over_alpha_perf=f,
                         test_error=res.test_error, core_test_error=core.test_error,
                         correction=res.correction, weight=res.correction_weight))
    return rows


def wishart38(quick):
    from skattn import TiedAttentionRegressor
    from skattn.metrics import attention_error
    from skattn.theory.problem import top_mode_share

    d = 38
    teacher = AttentionIndexedModel(d, n_tokens=2, target=WishartTarget(0.5), random_state=0)
    pred = _solve(0.3, target=teacher, reg_lambda=0.01)
    core = _solve(0.3, target=teacher, reg_lambda=0.01, correction="none")
    n = int(0.3 * d * d)
    trained = []
    for seed in range(2 if quick else 8):
        X, y = teacher.sample(n, random_state=100 + seed)
        Xt, yt = teacher.sample(2000 if quick else 8000, random_state=200 + seed)
        model = TiedAttentionRegressor(reg_lambda=0.01, random_state=seed).fit(X, y)
        trained.append(attention_error(yt, model.predict(Xt)))
    mean = float(np.mean(trained))
    sem = float(np.std(trained, ddof=1) / np.sqrt(len(trained)))
    return [dict(kind="wishart38", d=d, top_mode_share=top_mode_share(
        np.linalg.eigvalsh(teacher.S0_)), trained=trained, trained_mean=mean,
        trained_sem=sem, prediction=pred.test_error, correction=pred.correction,
        core=core.test_error, gap=mean / pred.test_error - 1,
        core_gap=mean / core.test_error - 1)]


def main(argv=None):
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    rows = scan_d(args.quick) + pairs(args.quick) + alpha_perf(args.quick) + \
        wishart38(args.quick)
    write_result(args, "correction_edges.json",
                 {"wall_s": time.perf_counter() - t0, "rows": rows}, script=__file__,
                 argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
