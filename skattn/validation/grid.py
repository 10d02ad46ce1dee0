"""The validation grid: simulation against state evolution outside one validated point.

docs: Theory §10 asks that trained models reach the state-evolution test error and ``L/d²``
"within finite-size error". :data:`VALIDATION_CONFIGS` covers the model's axes (T = 1–4,
softmax and linear, noise, β ≠ β0 both ways, seq2seq and seq2lab, width < 1 with the rank
constraint inactive and binding, the direct model, power-law targets, small λ near the
interpolation threshold); :func:`run_validation_grid` runs every configuration through
:func:`skattn.validation.finite_size_scaling` on **one** resumable sweep store and writes a
table and a figure. ``make validate`` calls ``python -m skattn.validation``.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import shlex
import sys
import time

import numpy as np

from .._validation import check_scalar_range
from .finite_size import (
    FSSConfig,
    _analyse,
    _check_run_args,
    _rows_for,
    fss_row,
)

__all__ = ["VALIDATION_CONFIGS", "VALIDATE_D", "VALIDATE_SEEDS", "run_validation_grid",
           "format_table", "plot_gaps", "main"]

#: d values of ``make validate`` (chosen to fit ~60 min on 2 cores; see docs: Validation).
VALIDATE_D = (40, 60, 80, 100)
#: Seeds per d of ``make validate``.
VALIDATE_SEEDS = 3

_W3 = {"family": "wishart", "kappa0": 0.3}
_W1 = {"family": "wishart", "kappa0": 1.0}
_PL15 = {"family": "powerlaw", "gamma": 1.5, "cutoff": None}
_PL10 = {"family": "powerlaw", "gamma": 1.0, "cutoff": None}


def _c(label, **kw):
    return FSSConfig(label=label, **kw)


# Wishart(0.5), α = 0.3, λ = 0.1, T = 2 softmax seq2lab unless stated. Interpolation
# thresholds (docs: Theory §6, skattn.theory.interpolation_threshold, Wishart(0.5)):
# T = 1 linear Δ = 0.1: 0.345; T = 2 softmax Δ = 0.1: 0.1725 (Δ → 0⁺: 0.219).
VALIDATION_CONFIGS = [
    # linear attention, T = 1 (docs: Theory §4 closed form) and T = 2, 3
    _c("lin T1", alpha=0.3, reg_lambda=0.05, n_tokens=1, attention="linear"),
    _c("lin T1 Δ=0.3", alpha=0.3, reg_lambda=0.05, n_tokens=1, attention="linear", noise=0.3),
    _c("lin T1 α=0.6", alpha=0.6, reg_lambda=0.05, n_tokens=1, attention="linear"),
    _c("lin T2", alpha=0.3, reg_lambda=0.05, n_tokens=2, attention="linear"),
    _c("lin T3 Δ=0.1", alpha=0.2, reg_lambda=0.05, n_tokens=3, attention="linear", noise=0.1),
    # softmax T = 2: α × λ
    _c("sm T2 α=0.1 λ=0.01", alpha=0.1, reg_lambda=0.01),
    _c("sm T2 α=0.3 λ=0.01", alpha=0.3, reg_lambda=0.01),
    _c("sm T2 α=0.6 λ=0.01", alpha=0.6, reg_lambda=0.01),
    _c("sm T2 α=0.3 λ=0.1", alpha=0.3, reg_lambda=0.1),
    _c("sm T2 α=0.6 λ=0.1", alpha=0.6, reg_lambda=0.1),
    _c("sm T2 κ0=1", alpha=0.3, reg_lambda=0.1, target=_W1),
    # softmax T = 3, 4 (the header's slow case: T = 4, Wishart(0.3), α = 0.25, λ = 0.02)
    _c("sm T3", alpha=0.3, reg_lambda=0.1, n_tokens=3),
    _c("sm T4 κ0=0.3 α=0.25 λ=0.02", alpha=0.25, reg_lambda=0.02, n_tokens=4, target=_W3),
    _c("sm T4 α=0.2 λ=0.1", alpha=0.2, reg_lambda=0.1, n_tokens=4),
    # label noise
    _c("sm T2 Δ=0.1", alpha=0.3, reg_lambda=0.1, noise=0.1),
    _c("sm T2 Δ=0.5", alpha=0.3, reg_lambda=0.1, noise=0.5),
    _c("sm T3 Δ=0.3", alpha=0.3, reg_lambda=0.1, n_tokens=3, noise=0.3),
    # temperature mismatch, both ways
    _c("sm T2 β=2 β0=1", alpha=0.3, reg_lambda=0.1, beta=2.0, target_beta=1.0),
    _c("sm T2 β=1 β0=2", alpha=0.3, reg_lambda=0.1, beta=1.0, target_beta=2.0),
    _c("sm T2 β=0.5 β0=1 Δ=0.2", alpha=0.3, reg_lambda=0.1, beta=0.5, noise=0.2),
    # seq2seq
    _c("sm T2 seq2seq", alpha=0.3, reg_lambda=0.1, task="seq2seq"),
    _c("sm T3 seq2seq", alpha=0.3, reg_lambda=0.1, n_tokens=3, task="seq2seq"),
    _c("lin T2 seq2seq", alpha=0.3, reg_lambda=0.05, n_tokens=2, attention="linear",
       task="seq2seq"),
    # width < 1: rank constraint inactive (κ above the SE's positive fraction) and binding
    _c("sm T2 κ=0.75 (rank inactive)", alpha=0.3, reg_lambda=0.1, width_ratio=0.75,
       target=_W3),
    _c("sm T2 κ=0.25 (rank binding)", alpha=0.3, reg_lambda=0.01, width_ratio=0.25),
    _c("lin T1 κ=0.75 (rank inactive)", alpha=0.3, reg_lambda=0.05, n_tokens=1,
       attention="linear", width_ratio=0.75, target=_W3),
    _c("lin T1 κ=0.25 (rank binding)", alpha=0.3, reg_lambda=0.01, n_tokens=1,
       attention="linear", width_ratio=0.25),
    # direct (Frobenius) model, docs: Theory §5
    _c("direct sm T2", alpha=0.3, reg_lambda=0.1, estimator="direct"),
    _c("direct lin T1", alpha=0.3, reg_lambda=0.05, n_tokens=1, attention="linear",
       estimator="direct"),
    _c("direct sm T2 Δ=0.3", alpha=0.3, reg_lambda=0.1, noise=0.3, estimator="direct"),
    # power-law targets (finite-d only: the reference is the same-instance SE)
    _c("lin T1 power-law γ=1.5", alpha=0.3, reg_lambda=0.05, n_tokens=1, attention="linear",
       target=_PL15),
    _c("lin T2 power-law γ=1", alpha=0.3, reg_lambda=0.05, n_tokens=2, attention="linear",
       target=_PL10),
    _c("sm T2 power-law γ=1.5", alpha=0.3, reg_lambda=0.1, target=_PL15),  # spiked SE
    # small λ near the interpolation threshold
    _c("sm T2 Δ=0.1 λ=1e-3 α=0.15 (< α_interp)", alpha=0.15, reg_lambda=1e-3, noise=0.1),
    _c("sm T2 Δ=0.1 λ=1e-3 α=0.2 (> α_interp)", alpha=0.2, reg_lambda=1e-3, noise=0.1),
    _c("lin T1 Δ=0.1 λ=1e-3 α=0.3 (< α_interp)", alpha=0.3, reg_lambda=1e-3, n_tokens=1,
       attention="linear", noise=0.1),
]


def _fmt(v, s=None):
    if v is None or not np.isfinite(v):
        return "—"
    return f"{v:.4f}" if s is None else f"{v:.4f} ± {s:.4f}"


def _outside(cfg, r):
    """Outside the stated domain: flagged by the configuration or warned at the largest d."""
    return cfg.outside_gaussian_equivalence or (not isinstance(r, str) and r.outside_domain)


def _domain_flag(cfg, r):
    """`` ⚠ outside domain (reason, share of seeds)`` for the table's label column."""
    reasons = {} if isinstance(r, str) else dict(r.domain_warnings)
    if cfg.outside_gaussian_equivalence and not reasons:
        reasons["outside GE"] = 1.0
    if not reasons:
        return ""
    text = ", ".join(k if v == 1 else f"{k} in {v:.0%} of the seeds"
                     for k, v in reasons.items())
    return f" ⚠ outside domain ({text})"


def format_table(results, *, fmt="markdown", quantity="test_error"):
    """The validation table: label | SE | simulation at each d | extrapolation | verdict.

    Parameters
    ----------
    results : list of (FSSConfig, FiniteSizeResult or str)
        A str stands for a failed configuration (its message goes in the verdict).
    fmt : {"markdown", "rst"}, default="markdown"
        "rst" writes a ``list-table``.
    quantity : {"test_error", "train_objective"}, default="test_error"

    Returns
    -------
    str
    """
    if fmt not in ("markdown", "rst"):
        raise ValueError(f"fmt must be 'markdown' or 'rst', got {fmt!r}.")
    if quantity not in ("test_error", "train_objective"):
        raise ValueError(f"quantity must be 'test_error' or 'train_objective', got "
                         f"{quantity!r}.")
    ds = sorted({int(d) for _, r in results if not isinstance(r, str) for d in r.d})
    head = (["configuration", "SE (continuum)"] + [f"sim d={d}" for d in ds]
            + ["extrapolated (95% CI)", "SE_d (largest d)", "verdict"])
    body = []
    for cfg, r in results:
        label = cfg.describe() + _domain_flag(cfg, r)
        if isinstance(r, str):
            body.append([label, "—"] + ["—"] * len(ds) + ["—", "—", f"FAILED: {r}"])
            continue
        comp = r.test if quantity == "test_error" else r.objective
        per_d = {int(d): (m, s) for d, m, s in zip(comp.d, comp.mean, comp.sem)}
        cont = comp.reference if comp.reference_kind == "continuum" else None
        lo, hi = comp.extrapolated_ci
        body.append([label, _fmt(cont)] + [_fmt(*per_d[d]) if d in per_d else "—" for d in ds]
                    + [f"{comp.extrapolated:.4f} [{lo:.4f}, {hi:.4f}]",
                       _fmt(comp.se_finite_mean[np.argmax(comp.d)]), comp.verdict])
    if fmt == "markdown":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines) + "\n"
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [head] + body:
        lines.append("   * - " + row[0])
        lines += [f"     - {cell}" for cell in row[1:]]
    return "\n".join(lines) + "\n"


def plot_gaps(results, *, ax=None, quantity="test_error"):
    """Relative gap (extrapolated / SE − 1) per configuration with its interval.

    Parameters
    ----------
    results : list of (FSSConfig, FiniteSizeResult or str)
    ax : matplotlib Axes or None
    quantity : {"test_error", "train_objective"}, default="test_error"

    Returns
    -------
    ax : matplotlib Axes
    """
    ok = [(c, r) for c, r in results if not isinstance(r, str)]
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 0.28 * max(len(ok), 4) + 1),
                             constrained_layout=True)
    for i, (cfg, r) in enumerate(ok):
        comp = r.test if quantity == "test_error" else r.objective
        g, (lo, hi) = 100 * comp.relative_gap, comp.relative_gap_ci
        color = ("C3" if _outside(cfg, r) else
                 "C1" if comp.reference_kind == "same-instance" else "C0")
        if np.isfinite(g):
            ax.errorbar([g], [i], xerr=[[g - 100 * lo], [100 * hi - g]], fmt="o",
                        color=color, capsize=2)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(ok)))
    ax.set_yticklabels([c.describe() for c, _ in ok], fontsize="x-small")
    ax.invert_yaxis()
    ax.set_xlabel(f"relative gap of the extrapolated {quantity.replace('_', ' ')} to SE (%)"
                  "\nblue: continuum SE, orange: same-instance SE, red: outside the stated domain")
    return ax


def run_validation_grid(output, d=VALIDATE_D, n_seeds=VALIDATE_SEEDS, *,
                        backend="sequential", n_jobs=1, configs=None, n_test=4000,
                        same_instance_se=True, table=None, figure=None, level=0.95,
                        rtol=0.01, scheduler_address=None, verbose=0, command=None):
    """Run the validation grid on one resumable sweep store; write a table and a figure.

    Parameters
    ----------
    output : str or path-like
        The sweep store (what :func:`skattn.sweep.run_sweep` accepts). Rerunning resumes.
    d : sequence of int, default=VALIDATE_D
        At least 3 distinct values ``>= 8``.
    n_seeds : int, default=VALIDATE_SEEDS
        ``>= 2``.
    backend, n_jobs, scheduler_address, verbose
        Passed to :func:`~skattn.sweep.run_sweep` (one call for the whole grid).
    configs : list of FSSConfig or dict, optional
        Defaults to :data:`VALIDATION_CONFIGS`.
    n_test, same_instance_se, level, rtol
        As in :func:`~skattn.validation.finite_size_scaling`.
    table : str or path-like or None
        Where to write the table (``.rst`` gives a list-table, anything else Markdown);
        default ``<output stem>_table.md`` next to ``output``.
    figure : str or path-like or None
        The gap figure; default ``<output stem>_gaps.png``.
    command : str or None
        The command line that runs the grid; the table ends with it and the UTC date
        (``python -m skattn.validation`` passes its own), so that the validation report can
        name both.

    Returns
    -------
    results : list of (FSSConfig, FiniteSizeResult or str)
        A str is the error of a configuration that could not be analysed (its finished
        rows are in the store).
    """
    from ..sweep import run_sweep

    configs = VALIDATION_CONFIGS if configs is None else [FSSConfig.from_dict(c)
                                                           for c in configs]
    if not configs:
        raise ValueError("configs must be a non-empty list of FSSConfig or dict.")
    d, n_seeds, n_test, level, rtol = _check_run_args(d, n_seeds, n_test, level, rtol)
    out = pathlib.Path(output)
    stem = out.parent / out.name.split(".")[0]
    table = pathlib.Path(table) if table is not None else stem.with_name(stem.name + "_table.md")
    figure = (pathlib.Path(figure) if figure is not None
              else stem.with_name(stem.name + "_gaps.png"))
    t0 = time.perf_counter()
    rows = [row for cfg in configs for row in _rows_for(cfg, d, n_seeds, n_test,
                                                         same_instance_se)]
    # the cheapest rows first, so that a cut run leaves whole configurations behind
    rows.sort(key=lambda r: r.get("d", 0))
    sweep = run_sweep(fss_row, rows, output=output, backend=backend, n_jobs=n_jobs,
                      scheduler_address=scheduler_address, verbose=verbose)
    results = []
    for cfg in configs:
        try:
            results.append((cfg, _analyse(cfg, sweep.rows, d, level, rtol,
                                          output=output)))
        except (ValueError, RuntimeError) as exc:
            results.append((cfg, str(exc)[:300]))
    wall = time.perf_counter() - t0
    text = format_table(results, fmt="rst" if table.suffix == ".rst" else "markdown")
    obj = format_table(results, fmt="rst" if table.suffix == ".rst" else "markdown",
                       quantity="train_objective")
    table.parent.mkdir(parents=True, exist_ok=True)
    import datetime

    date = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    made = (f"*Produced by* ``{command}`` *on* {date}." if command
            else f"Produced on {date}.")
    table.write_text(f"Test error:\n\n{text}\nTraining objective ``L/d²``:\n\n{obj}\n"
                     f"d = {list(map(int, d))}, {n_seeds} seeds, {sweep.n_run} rows run now, "
                     f"{sweep.n_skipped} resumed, {sweep.n_failed} failed; wall time "
                     f"{wall:.0f} s.\n\n{made}\n", encoding="utf-8")
    try:
        import matplotlib

        if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "png"):
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ax = plot_gaps(results)
        ax.figure.savefig(figure, dpi=120)
        plt.close(ax.figure)
    except ImportError:  # pragma: no cover - matplotlib is optional
        figure = None
    print(f"validation grid: {len(configs)} configurations, d={list(map(int, d))}, "
          f"{n_seeds} seeds; {sweep.n_run} rows run, {sweep.n_skipped} resumed, "
          f"{sweep.n_failed} failed; wall time {wall:.1f} s ({wall / 60:.1f} min); "
          f"table {table}" + (f", figure {figure}" if figure else ""))
    return results


def estimate_grid_seconds(seconds_per_row, n_cores=2):
    """Rough wall time of the grid from a mean row time (for planning).

    Parameters
    ----------
    seconds_per_row : dict
        ``d -> mean seconds of one (d, seed) row`` (training plus same-instance SE).
    n_cores : int, default=2

    Returns
    -------
    float
        ``len(VALIDATION_CONFIGS) · VALIDATE_SEEDS · Σ_d t(d) / n_cores``.
    """
    n_cores = check_scalar_range(n_cores, "n_cores", low=1, integer=True)
    total = sum(seconds_per_row[d] for d in VALIDATE_D)
    return len(VALIDATION_CONFIGS) * VALIDATE_SEEDS * total / n_cores


def main(argv=None):
    """``python -m skattn.validation --output validate.csv`` (the ``make validate`` entry)."""
    p = argparse.ArgumentParser(prog="python -m skattn.validation",
                                description=__doc__.splitlines()[0])
    p.add_argument("--output", default="validate.csv",
                   help="sweep store (resumable; .csv, .parquet or what run_sweep accepts)")
    p.add_argument("--d", type=int, nargs="+", default=list(VALIDATE_D),
                   help="token dimensions (>= 3 distinct values >= 8)")
    p.add_argument("--n-seeds", type=int, default=VALIDATE_SEEDS)
    p.add_argument("--backend", default="joblib", choices=("sequential", "joblib", "dask"))
    p.add_argument("--n-jobs", type=int, default=2)
    p.add_argument("--n-test", type=int, default=4000)
    p.add_argument("--labels", nargs="*", default=None,
                   help="run only the configurations whose label contains one of these")
    p.add_argument("--no-same-instance-se", action="store_true",
                   help="skip the per-teacher finite-d SE (halves the time; power-law and "
                        "binding-rank configurations then have no reference)")
    p.add_argument("--table", default=None)
    p.add_argument("--figure", default=None)
    p.add_argument("--scheduler-address", default=None)
    args = p.parse_args(argv)
    configs = VALIDATION_CONFIGS
    if args.labels:
        configs = [c for c in configs if any(s in c.label for s in args.labels)]
        if not configs:
            p.error(f"no configuration label contains any of {args.labels}")
    try:
        run_validation_grid(args.output, d=args.d, n_seeds=args.n_seeds,
                            backend=args.backend, n_jobs=args.n_jobs, configs=configs,
                            n_test=args.n_test, same_instance_se=not args.no_same_instance_se,
                            table=args.table, figure=args.figure,
                            scheduler_address=args.scheduler_address, verbose=1,
                            command=" ".join(["python -m skattn.validation",
                                              *map(shlex.quote, argv if argv is not None
                                                   else sys.argv[1:])]))
    except ValueError as exc:
        p.error(str(exc))
    return 0

