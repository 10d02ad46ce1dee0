"""Softmax seq2lab at finite d: the exact-Gram channel against the Gaussian state evolution.

For every softmax seq2lab configuration of the validation grid with T ≤ 3, factored, a rank
cap that does not bind and a target inside the Gaussian-equivalence domain, trains the
grid's own teachers at d = 100 (:func:`skattn.validation.simulation_row`: the same teachers,
training and test draws as ``make validate``; 20 000 test samples) and compares the trained
test error with two same-instance predictions of
:func:`skattn.theory.solve_state_evolution`: the Gaussian fixed point
(``correction="none"``) and the exact-Gram channel with the seq2lab loss (the default since
2026-12-01, :class:`skattn.theory.corrections.exact_gram.ExactGramCorrection`).

The routing rule was fixed before the measurement (as for seq2seq): route if the mean
absolute gap falls and no configuration's absolute gap grows by more than two standard
errors of its Gaussian gap. Prints one line a configuration and writes the per-teacher
rows as JSON (docs/theory.rst §4 "Finite d").

Usage::

    python benchmarks/research/exact_gram_seq2lab.py --seeds 6
    # about 25 min on 2 cores (T = 3 dominates); --labels "α=0.15" for a subset
    # writes benchmarks/results/exact_gram_seq2lab.json
"""

import argparse
import warnings

import numpy as np

from _common import add_common_arguments, write_result
from skattn.theory import solve_state_evolution
from skattn.theory.corrections.exact_gram import EXACT_GRAM_SEQ2LAB_MAX_T
from skattn.validation import VALIDATION_CONFIGS, make_teacher, simulation_row


def eligible(cfg):
    """The grid configurations the softmax seq2lab route applies to."""
    return (cfg.attention == "softmax" and cfg.task == "seq2lab" and cfg.estimator == "tied"
            and cfg.n_tokens <= EXACT_GRAM_SEQ2LAB_MAX_T and cfg.width_ratio in (1.0, 0.75)
            and not cfg.outside_gaussian_equivalence)


def teacher_rows(cfg, n_seeds, d=100, n_test=20000):
    rows = []
    for seed in range(n_seeds):
        sim = simulation_row(cfg, d, seed, n_test=n_test)
        teacher = make_teacher(cfg, d, seed)
        pred, outside = {}, None
        for exact in (False, True):
            try:
                res = solve_state_evolution(target=teacher,
                                            correction="exact_gram" if exact else "none",
                                            **cfg.se_kwargs())
            except ValueError as exc:   # this draw lies outside the correction's domain
                pred[exact], outside = float("nan"), str(exc)
                continue
            pred[exact] = float(res.test_error) if res.converged else float("nan")
        rows.append({"label": cfg.label, "seed": seed, "trained": sim["test_error"],
                     "gaussian": pred[False], "exact_gram": pred[True],
                     **({"outside_domain": outside} if outside else {})})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--labels", nargs="*", default=None)
    parser.add_argument("--d", type=int, default=100)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    d, n_test, configs = args.d, 20000, [c for c in VALIDATION_CONFIGS if eligible(c)]
    if args.labels:
        configs = [c for c in configs if any(s in c.label for s in args.labels)]
    if args.quick:
        d, n_test, args.seeds, configs = 12, 500, 2, configs[:1]
    out = []
    for cfg in configs:
        rows = teacher_rows(cfg, args.seeds, d, n_test)
        out += rows
        text = []
        for key in ("gaussian", "exact_gram"):
            g = np.array([r["trained"] / r[key] - 1 for r in rows])
            g = g[np.isfinite(g)]   # a teacher outside the domain has no prediction
            spread = g.std(ddof=1) / np.sqrt(g.size) if g.size > 1 else float("nan")
            text.append(f"{key} {100 * g.mean():+.2f} ± {100 * spread:.2f} % "
                        f"({g.size} of {len(rows)} teachers)" if g.size else
                        f"{key}: no teacher inside its domain")
        print(f"{cfg.label:42s} " + "   ".join(text), flush=True)
        write_result(args, "exact_gram_seq2lab.json", {"d": d, "rows": out},
                     script=__file__, argv=argv)


if __name__ == "__main__":
    main()
