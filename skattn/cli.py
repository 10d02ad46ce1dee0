"""The ``skattn`` command line: demo, theory, simulate, figure and sweep.

Run ``skattn --help`` (or ``python -m skattn --help``) for the list of commands and
``skattn COMMAND --help`` for their options. Every numeric or categorical parameter of
``theory``, ``simulate`` and ``sweep`` accepts a comma-separated list
(``--alpha 0.1,0.3 --reg-lambda 0.01,0.1``) or a range ``START:STOP:NUM`` (linear) /
``START:STOP:NUM:log`` (geometric); the command runs the cartesian product.

User mistakes (a bad option, a value out of range) print one line on stderr and exit
with a non-zero status; ``--debug`` shows the full traceback instead.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

__all__ = ["main", "build_parser", "run_demo", "theory_rows", "simulate_rows"]

PROG = "skattn"
EXIT_USAGE = 2
EXIT_ERROR = 1


class CLIError(Exception):
    """A user mistake, reported as one line on stderr."""


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line (no usage block) and exit with status 2."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} "
                              f"(see '{self.prog} --help')\n")


# ----------------------------------------------------------------------------------------
# Value parsing: comma lists and ranges
# ----------------------------------------------------------------------------------------

def _split(text):
    items = [t.strip() for t in str(text).split(",")]
    if not items or any(t == "" for t in items):
        raise argparse.ArgumentTypeError(f"empty item in list {text!r}")
    return items


def _range(item, conv):
    parts = item.split(":")
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] not in ("log", "lin")):
        raise argparse.ArgumentTypeError(
            f"bad range {item!r}: expected START:STOP:NUM or START:STOP:NUM:log")
    try:
        start, stop, num = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad range {item!r}: START and STOP must be "
                                         f"numbers and NUM an integer") from None
    if num < 1:
        raise argparse.ArgumentTypeError(f"bad range {item!r}: NUM must be >= 1")
    if len(parts) == 4 and parts[3] == "log":
        if start <= 0 or stop <= 0:
            raise argparse.ArgumentTypeError(f"bad range {item!r}: a log range needs "
                                             f"START, STOP > 0")
        vals = np.geomspace(start, stop, num)
    else:
        vals = np.linspace(start, stop, num)
    return [conv(float(f"{v:.12g}")) for v in vals]


def _float_list(text):
    out = []
    for item in _split(text):
        if ":" in item:
            out.extend(_range(item, float))
            continue
        try:
            v = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a number") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{item!r} is not a finite number")
        out.append(v)
    return out


def _int_list(text):
    out = []
    for item in _split(text):
        try:
            out.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not an integer") from None
    return out


def _opt_int_list(text):
    """Integers, or ``inf``/``none`` for the d → ∞ continuum (None)."""
    out = []
    for item in _split(text):
        if item.lower() in ("inf", "none", "continuum"):
            out.append(None)
            continue
        try:
            out.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not an integer (or 'inf' for the continuum)") from None
    return out


def _choice_list(choices):
    def parse(text):
        items = _split(text)
        for item in items:
            if item not in choices:
                raise argparse.ArgumentTypeError(
                    f"invalid choice {item!r} (choose from {', '.join(choices)})")
        return items
    parse.__name__ = "choice list"
    return parse


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return v


def _dimension(text):
    v = _positive_int(text)
    if v < 2:
        raise argparse.ArgumentTypeError(f"must be >= 2, got {v}")
    return v


def _nonzero_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v == 0:
        raise argparse.ArgumentTypeError("must be a non-zero integer (-1: all CPUs)")
    return v


# ----------------------------------------------------------------------------------------
# Shared parameters
# ----------------------------------------------------------------------------------------

# (name, parser, default, help). Every one of these may be a list (cartesian sweep).
_MODEL_PARAMS = [
    ("n_tokens", _int_list, "2", "sequence length T (>= 2 for softmax, >= 1 for linear)"),
    ("reg_lambda", _float_list, "0.01",
     "weight decay λ >= 0 in Σ_μ ℓ_μ + λ‖W‖²_F (λ‖V‖²_F for the direct model)"),
    ("target", _choice_list(("wishart", "powerlaw")), "wishart",
     "target family: Wishart(κ0) or power law (γ; needs --n-features)"),
    ("kappa0", _float_list, "0.5", "rank ratio κ0 = p0/d of a Wishart target"),
    ("gamma", _float_list, "1.0", "decay exponent γ of a power-law target"),
    ("width_ratio", _float_list, "1.0", "width ratio κ = p/d of the factored student"),
    ("beta", _float_list, "1.0", "inverse temperature β of the student's softmax"),
    ("target_beta", _float_list, "1.0", "inverse temperature β0 of the teacher's softmax"),
    ("noise", _float_list, "0.0", "label noise Δ >= 0 inside the teacher's softmax"),
    ("attention", _choice_list(("softmax", "linear")), "softmax", "attention function"),
    ("task", _choice_list(("seq2lab", "seq2seq")), "seq2lab",
     "seq2lab: y is the T×T attention matrix; seq2seq: y = attention × x"),
]
_PARAM_NAMES = ["alpha", "n_features"] + [p[0] for p in _MODEL_PARAMS] + ["parametrization"]


def _desc(text):
    """Wrap a description paragraph for the raw help formatters."""
    import textwrap
    return textwrap.fill(" ".join(text.split()), width=88)


def _flag(name):
    return "--" + name.replace("_", "-")


def _add_model_params(p, *, alpha_required, n_features_default, n_features_help,
                      parametrization=True):
    g = p.add_argument_group("parameters (each may be a comma list or START:STOP:NUM[:log]; "
                             "the cartesian product is run)")
    g.add_argument("--alpha", type=_float_list, required=alpha_required,
                   default=None if alpha_required else [0.3],
                   help="sample ratio α = n/d² > 0" + ("" if alpha_required else
                                                        " (default: 0.3)"))
    g.add_argument("--n-features", dest="n_features", type=_opt_int_list,
                   default=n_features_default, help=n_features_help)
    for name, conv, default, help_ in _MODEL_PARAMS:
        g.add_argument(_flag(name), dest=name, type=conv, default=conv(default),
                       metavar=name.upper(), help=f"{help_} (default: {default})")
    if parametrization:
        g.add_argument("--parametrization", type=_choice_list(("factored", "direct")),
                       default=["factored"],
                       help="factored S = WWᵀ/√(pd) or direct S = V/√d (default: factored)")
    return g


def _add_output_options(p, formats=("table", "csv", "json")):
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=formats, default="table",
                   help="output format (default: table)")
    g.add_argument("--output", "-o", default=None, metavar="FILE",
                   help="write to FILE instead of stdout")
    g.add_argument("--columns", type=_split, default=None, metavar="COLS",
                   help="comma list of columns to output (default: all for csv/json, the "
                        "varying parameters and main results for table)")
    return g


def _make_target(params):
    from .data import PowerLawTarget, WishartTarget
    if params["target"] == "wishart":
        return WishartTarget(params["kappa0"])
    return PowerLawTarget(params["gamma"])


def _param_grid(args, names):
    """Cartesian product of the list-valued parameters, irrelevant ones set to None."""
    values = [getattr(args, n) for n in names]
    rows, seen = [], set()
    for combo in itertools.product(*values):
        row = dict(zip(names, combo))
        if "target" in row:
            if row["target"] == "wishart":
                row["gamma"] = None
            else:
                row["kappa0"] = None
        if row.get("parametrization") == "direct":
            row["width_ratio"] = None
        key = tuple(row.items())
        if key not in seen:
            seen.add(key)
            rows.append(row)
    return rows


def _user_error(exc):
    """A library ValueError/TypeError as a one-line CLIError naming the option if we can."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for name in sorted(_PARAM_NAMES + ["n_samples", "rank_ratio"], key=len, reverse=True):
        if msg.startswith(name + " ") or msg.startswith(f"The '{name}' parameter"):
            flag = {"rank_ratio": "kappa0", "n_samples": "alpha"}.get(name, name)
            msg = f"{_flag(flag)}: {msg}"
            break
    return CLIError(msg)


def _se_kwargs(params, *, n_nodes, tol, max_iter):
    kw = dict(n_tokens=params["n_tokens"], reg_lambda=params["reg_lambda"],
              target=_make_target(params), beta=params["beta"],
              target_beta=params["target_beta"], noise=params["noise"],
              attention=params["attention"], task=params["task"],
              parametrization=params.get("parametrization", "factored"),
              n_features=params["n_features"], n_nodes=n_nodes)
    # None: the library's defaults
    kw.update({k: v for k, v in (("tol", tol), ("max_iter", max_iter)) if v is not None})
    if params.get("width_ratio") is not None:
        kw["width_ratio"] = params["width_ratio"]
    return kw


def _validate_theory_point(alpha, kw):
    from .theory.state_evolution import PARAMETRIZATIONS, _check_common
    _check_common(alpha, kw["n_tokens"], kw.get("width_ratio", 1.0), kw["reg_lambda"],
                  kw["beta"], kw["target_beta"], kw["noise"], kw["attention"], kw["task"],
                  kw["parametrization"])
    if kw["parametrization"] not in PARAMETRIZATIONS:  # pragma: no cover - argparse checks
        raise ValueError(f"parametrization must be one of {PARAMETRIZATIONS}")
    if kw["parametrization"] == "direct" and kw["reg_lambda"] == 0:
        raise ValueError("reg_lambda must be > 0 for the direct parametrization "
                         "(use a small value for the ridgeless limit).")
    d = kw["n_features"]
    if d is not None and d < 2:
        raise ValueError(f"n_features must be >= 2 (or 'inf'), got {d}.")
    if d is None and getattr(kw["target"], "finite_size_only", False):
        raise ValueError("--target powerlaw has no d → ∞ limit: pass a dimension with "
                         "--n-features (e.g. --n-features 200).")


# ----------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------

_RESULT_COLUMNS = ["test_error", "train_error", "train_objective", "s_error", "atom_mass",
                   "m", "q", "sigma", "m_hat", "q_hat", "sigma_hat", "Q0", "eta", "delta",
                   "epsilon", "converged", "n_iter", "residual", "message"]


def _jsonable(v):
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return v if math.isfinite(v) else None
    return v


def _fmt_cell(v, precision=4):
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "NO"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if not math.isfinite(v):
            return "nan"
        return f"{v:.{precision}g}"
    return str(v)


def format_table(rows, columns, *, headers=None):
    """Rows (dicts) as an aligned plain-text table."""
    headers = headers or columns
    cells = [[_fmt_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines) + "\n"


def _format_rows(rows, columns, fmt):
    if fmt == "json":
        return json.dumps([{c: _jsonable(r.get(c)) for c in columns} for r in rows],
                          indent=2) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            vals = []
            for c in columns:
                v = _jsonable(r.get(c))
                vals.append("" if v is None else (repr(v) if isinstance(v, float) else v))
            w.writerow(vals)
        return buf.getvalue()
    return format_table(rows, columns)


def _choose_columns(rows, all_columns, args, main_results, sweep_names):
    if args.columns:
        _check_columns(args, all_columns)
        return list(args.columns)
    if args.format != "table":
        return all_columns
    varying = [n for n in sweep_names
               if len({json.dumps(_jsonable(r.get(n))) for r in rows}) > 1]
    return varying + [c for c in main_results if c not in varying]


def _write(text, output):
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(output)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}", file=sys.stderr)


# ----------------------------------------------------------------------------------------
# theory
# ----------------------------------------------------------------------------------------

def theory_rows(groups, alphas, *, n_nodes=8192, tol=None, max_iter=None, n_jobs=None,
                verbose=0):
    """State evolution on every (parameter group × α); α curves are warm-started.

    Parameters
    ----------
    groups : list of dict
        Parameter rows (keys ``n_tokens, reg_lambda, target, kappa0, gamma, width_ratio,
        beta, target_beta, noise, attention, task, parametrization, n_features``).
    alphas : list of float
    n_nodes, tol, max_iter : passed to :func:`skattn.theory.solve_state_evolution`
    n_jobs : int or None
        Parallel chunks of each α curve (joblib).
    verbose : int

    Returns
    -------
    list of dict
        One row per point: the parameters and the results (``test_error``,
        ``train_error``, ``train_objective``, order parameters, ``atom_mass``,
        ``converged``, ``message``...).
    """
    from .theory import state_evolution_curve

    alphas = sorted(set(float(a) for a in alphas))
    plans = []
    for params in groups:
        try:
            kw = _se_kwargs(params, n_nodes=n_nodes, tol=tol, max_iter=max_iter)
            for a in alphas:
                _validate_theory_point(a, kw)
        except (ValueError, TypeError) as exc:
            raise _user_error(exc) from None
        plans.append((params, kw))
    rows = []
    for params, kw in plans:
        lam = kw.pop("reg_lambda")
        try:
            results = state_evolution_curve(alphas, reg_lambda=lam, n_jobs=n_jobs,
                                            verbose=verbose, **kw)
        except (ValueError, TypeError) as exc:
            raise _user_error(exc) from None
        for res in results:
            row = {"alpha": res.alpha, **params}
            for c in _RESULT_COLUMNS:
                try:
                    row[c] = getattr(res, c)
                except Exception:  # e.g. a spectrum quantity at a non-finite point
                    row[c] = float("nan")
            rows.append(row)
    return rows


def _theory_param_names():
    return ["n_features"] + [p[0] for p in _MODEL_PARAMS] + ["parametrization"]


def _check_columns(args, all_columns):
    if args.columns:
        unknown = [c for c in args.columns if c not in all_columns]
        if unknown:
            raise CLIError(f"--columns: unknown column(s) {', '.join(unknown)}; available: "
                           f"{', '.join(all_columns)}")


def cmd_theory(args):
    names = _theory_param_names()
    _check_columns(args, ["alpha"] + names + _RESULT_COLUMNS)
    groups = _param_grid(args, names)
    rows = theory_rows(groups, args.alpha, n_nodes=args.n_nodes, tol=args.tol,
                       max_iter=args.max_iter, n_jobs=args.n_jobs, verbose=args.verbose)
    all_columns = ["alpha"] + names + _RESULT_COLUMNS
    columns = _choose_columns(rows, all_columns, args,
                              ["alpha", "test_error", "train_error", "train_objective",
                               "atom_mass", "converged"], names)
    _write(_format_rows(rows, columns, args.format), args.output)
    bad = sum(not r["converged"] for r in rows)
    if bad:
        print(f"warning: {bad} of {len(rows)} points did not converge (see the 'converged' "
              f"and 'message' columns)", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------------------
# simulate
# ----------------------------------------------------------------------------------------

def _fit_one(*, estimator, n_features, alpha, n_tokens, reg_lambda, target, kappa0=None,
             gamma=None, width_ratio=1.0, beta=1.0, target_beta=1.0, noise=0.0,
             attention="softmax", task="seq2lab", seed=0, solver="adam", max_iter=5000,
             n_test=2000, device="cpu", torch_threads=None, return_eigenvalues=False):
    """Fit one estimator on one synthetic data set; returns errors (and eigenvalues of S_)."""
    from sklearn.exceptions import ConvergenceWarning

    if torch_threads is not None:
        import torch
        torch.set_num_threads(int(torch_threads))
    from .data import AttentionIndexedModel
    from .estimators import AsymptoticPredictor, DirectAttentionRegressor, TiedAttentionRegressor
    from .metrics import attention_error

    params = dict(target=target, kappa0=kappa0, gamma=gamma)
    d = int(n_features)
    teacher = AttentionIndexedModel(d, n_tokens=n_tokens, target=_make_target(params),
                                    beta=target_beta, noise=noise, attention=attention,
                                    random_state=seed)
    n = max(1, int(round(alpha * d * d)))
    X, y = teacher.sample(n, task=task, random_state=10_000 + seed)
    Xt, yt = teacher.sample(n_test, task=task, random_state=20_000 + seed)
    width = 1.0 if width_ratio is None else float(width_ratio)
    if estimator == "tied":
        est = TiedAttentionRegressor(width=width, reg_lambda=reg_lambda, beta=beta,
                                     attention=attention, task=task, solver=solver,
                                     max_iter=max_iter, device=device, random_state=seed)
    elif estimator == "direct":
        est = DirectAttentionRegressor(reg_lambda=reg_lambda, beta=beta, attention=attention,
                                       task=task, solver=solver, max_iter=max_iter,
                                       device=device, random_state=seed)
    else:
        est = AsymptoticPredictor(width=width, reg_lambda=reg_lambda, beta=beta,
                                  attention=attention, task=task, random_state=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est.fit(X, y)
    fit_time = time.perf_counter() - t0
    test_error = attention_error(yt, est.predict(Xt), task=task)
    if hasattr(est, "train_objective_"):
        train_error, objective = est.train_error_, est.train_objective_
    else:  # AMP: objective of factored ERM at S_
        train_error = attention_error(y, est.predict(X), task=task)
        p = est._rank(d)
        objective = (n * train_error
                     + reg_lambda * math.sqrt(p * d) * float(np.trace(est.S_))) / d ** 2
    out = dict(n_samples=n, test_error=float(test_error), train_error=float(train_error),
               train_objective=float(objective), fit_time=fit_time,
               converged=bool(getattr(est, "converged_", True)) and not any(
                   issubclass(w.category, ConvergenceWarning) for w in caught),
               n_iter=int(getattr(est, "n_iter_", 0)))
    if return_eigenvalues:
        out["eigenvalues"] = np.linalg.eigvalsh(est.S_)
    return out


def _sem(values):
    v = np.asarray(values, dtype=float)
    return float(np.std(v, ddof=1) / math.sqrt(v.size)) if v.size > 1 else float("nan")


def _run_fits(jobs, n_jobs, progress=None):
    """Run ``_fit_one(**job)`` for every job, in order (joblib when n_jobs != 1)."""
    if n_jobs is None or n_jobs == 1:
        out = []
        for i, job in enumerate(jobs):
            out.append(_fit_one(**job))
            if progress:
                progress(i + 1, len(jobs), job, out[-1])
        return out
    from joblib import Parallel, delayed
    res = Parallel(n_jobs=n_jobs)(
        delayed(_fit_one)(**{**job, "torch_threads": job.get("torch_threads") or 1})
        for job in jobs)
    if progress:
        for i, (job, r) in enumerate(zip(jobs, res)):
            progress(i + 1, len(jobs), job, r)
    return res


def simulate_rows(groups, alphas, seeds, *, estimators, solver="adam", max_iter=5000,
                  n_test=2000, device="cpu", n_jobs=1, per_seed=False, theory=False,
                  n_nodes=8192, torch_threads=1, progress=None):
    """Fit estimators on synthetic data for every parameter row, α and seed.

    Returns one row per (parameters, α, estimator) with means and standard errors over
    seeds (or one row per seed with ``per_seed=True``), plus the state-evolution
    predictions when ``theory=True``.
    """
    jobs, keys = [], []
    for params in groups:
        if params["n_features"] is None:
            raise CLIError("--n-features: simulations need a finite dimension d (e.g. 60)")
        for a in sorted(set(alphas)):
            for est in estimators:
                if est == "direct" and params.get("width_ratio") not in (None, 1.0):
                    continue
                for s in seeds:
                    job = dict(estimator=est, alpha=a, seed=s, solver=solver,
                               max_iter=max_iter, n_test=n_test, device=device,
                               torch_threads=torch_threads,
                               **{k: v for k, v in params.items() if k != "parametrization"})
                    jobs.append(job)
                    keys.append((tuple(params.items()), a, est))
    # validate cheap things before the long part
    for job in jobs:
        try:
            _validate_theory_point(job["alpha"], dict(
                n_tokens=job["n_tokens"], width_ratio=job.get("width_ratio") or 1.0,
                reg_lambda=job["reg_lambda"], beta=job["beta"],
                target_beta=job["target_beta"], noise=job["noise"],
                attention=job["attention"], task=job["task"], parametrization="factored",
                n_features=job["n_features"], target=_make_target(job)))
        except (ValueError, TypeError) as exc:
            raise _user_error(exc) from None
    try:
        results = _run_fits(jobs, n_jobs, progress)
    except (ValueError, TypeError) as exc:
        raise _user_error(exc) from None
    rows = []
    if per_seed:
        for job, r in zip(jobs, results):
            rows.append({**{k: v for k, v in job.items()
                            if k not in ("n_test", "device", "max_iter", "torch_threads")},
                         **r})
    else:
        order = []
        agg = {}
        for job, key, r in zip(jobs, keys, results):
            if key not in agg:
                order.append(key)
                agg[key] = (job, [])
            agg[key][1].append(r)
        for key in order:
            job, rs = agg[key]
            row = {k: v for k, v in job.items()
                   if k not in ("seed", "n_test", "device", "max_iter", "torch_threads")}
            row["n_samples"] = rs[0]["n_samples"]
            row["n_seeds"] = len(rs)
            for q in ("test_error", "train_error", "train_objective"):
                row[q] = float(np.mean([r[q] for r in rs]))
                row[q + "_sem"] = _sem([r[q] for r in rs])
            row["fit_time"] = float(np.mean([r["fit_time"] for r in rs]))
            row["converged"] = all(r["converged"] for r in rs)
            rows.append(row)
    if theory:
        from .theory import solve_state_evolution
        cache = {}
        for row in rows:
            if row["estimator"] == "direct":
                par = "direct"
            else:
                par = "factored"
            p = {k: row.get(k) for k in _theory_param_names() if k != "parametrization"}
            p["parametrization"] = par
            if par == "direct":
                p["width_ratio"] = None
            key = (tuple(p.items()), row["alpha"])
            if key not in cache:
                kw = _se_kwargs({**p, "n_features": None if p["target"] == "wishart"
                                 else p["n_features"]}, n_nodes=n_nodes, tol=None,
                                max_iter=None)
                try:
                    cache[key] = solve_state_evolution(row["alpha"], **kw)
                except (ValueError, TypeError) as exc:
                    raise _user_error(exc) from None
            res = cache[key]
            row["predicted_test_error"] = res.test_error
            row["predicted_train_error"] = res.train_error
            row["predicted_train_objective"] = res.train_objective
            row["prediction_converged"] = res.converged
    return rows


def cmd_simulate(args):
    names = _theory_param_names()
    args.parametrization = ["factored"]
    groups = _param_grid(args, names)
    seeds = args.seeds if args.seeds is not None else list(range(args.n_seeds or 2))

    def progress(i, n, job, r):
        if args.verbose:
            print(f"[{i}/{n}] {job['estimator']} d={job['n_features']} α={job['alpha']:g} "
                  f"λ={job['reg_lambda']:g} seed={job['seed']}: test error "
                  f"{r['test_error']:.4g} ({r['fit_time']:.1f} s)", file=sys.stderr)

    rows = simulate_rows(groups, args.alpha, seeds, estimators=args.estimator,
                         solver=args.solver, max_iter=args.max_iter, n_test=args.n_test,
                         device=args.device, n_jobs=args.n_jobs, per_seed=args.per_seed,
                         theory=args.theory, n_nodes=args.n_nodes,
                         torch_threads=args.threads, progress=progress)
    if not rows:
        raise CLIError("nothing to simulate (the direct estimator ignores --width-ratio "
                       "other than 1)")
    all_columns = list(dict.fromkeys(c for r in rows for c in r))
    main = ["alpha", "n_samples", "estimator", "test_error", "test_error_sem",
            "train_objective", "train_objective_sem"]
    if args.per_seed:
        main = ["alpha", "n_samples", "estimator", "seed", "test_error", "train_objective"]
    if args.theory:
        main += ["predicted_test_error", "predicted_train_objective"]
    main += ["fit_time", "converged"]
    columns = _choose_columns(rows, all_columns, args, main,
                              ["n_features"] + [p[0] for p in _MODEL_PARAMS])
    _write(_format_rows(rows, columns, args.format), args.output)
    return 0


# ----------------------------------------------------------------------------------------
# demo
# ----------------------------------------------------------------------------------------

DEMO_SETTINGS = {
    "full": dict(n_features=80, theory_alphas=np.geomspace(0.05, 1.0, 12).round(4),
                 sim_alphas=(0.1, 0.2, 0.35, 0.5, 0.75), seeds=(0, 1), n_test=4000,
                 n_nodes=8192, spectrum=(0.01, 0.5)),
    "quick": dict(n_features=32, theory_alphas=np.geomspace(0.05, 1.0, 6).round(4),
                  sim_alphas=(0.2, 0.6), seeds=(0, 1), n_test=1000, n_nodes=2048,
                  spectrum=(0.01, 0.6)),
}
DEMO_LAMBDAS = (0.01, 0.1)


def run_demo(out="out", *, quick=False, solver="adam", n_features=None, n_jobs=1,
             log=print):
    """The headline demo: theory vs gradient-trained tied attention (see ``skattn demo``).

    T = 2 softmax, Wishart κ0 = 0.5 target, β = β0 = 1, λ ∈ {0.01, 0.1}: state-evolution
    test error and objective/d² along α, gradient-trained :class:`TiedAttentionRegressor`
    points (mean ± s.e.m. over 2 seeds), and the learned spectrum of one model against the
    predicted density. Writes ``skattn_demo.png`` and ``skattn_demo.csv`` in ``out``.

    Returns
    -------
    rows : list of dict
        The printed table (one row per simulated (α, λ)).
    path : str
        The PNG written.
    """
    import matplotlib
    if not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .data import WishartTarget
    from .plotting import MARKERS, PALETTE, paper_style, plot_error_curve, plot_spectrum
    from .theory import state_evolution_curve

    cfg = dict(DEMO_SETTINGS["quick" if quick else "full"])
    if n_features is not None:
        cfg["n_features"] = int(n_features)
    d, T, kappa0 = cfg["n_features"], 2, 0.5
    target = WishartTarget(kappa0)
    t_start = time.perf_counter()
    log(f"skattn demo{' --quick' if quick else ''}: T={T} softmax, Wishart κ0={kappa0}, "
        f"β=β0=1, λ ∈ {list(DEMO_LAMBDAS)}; simulations d={d}, solver={solver}, "
        f"seeds={list(cfg['seeds'])}")

    # theory
    alphas = np.unique(np.concatenate([cfg["theory_alphas"], cfg["sim_alphas"]]))
    curves = {}
    for lam in DEMO_LAMBDAS:
        t0 = time.perf_counter()
        curves[lam] = state_evolution_curve(alphas, reg_lambda=lam, n_tokens=T,
                                            target=target, n_nodes=cfg["n_nodes"])
        n_bad = sum(not r.converged for r in curves[lam])
        log(f"  theory  λ={lam:g}: {alphas.size} state-evolution points in "
            f"{time.perf_counter() - t0:.1f} s" + (f" ({n_bad} not converged)" if n_bad
                                                   else ""))

    # simulations
    jobs = []
    for lam in DEMO_LAMBDAS:
        for a in cfg["sim_alphas"]:
            for s in cfg["seeds"]:
                # one torch thread: these problems are too small for intra-op
                # parallelism, which only slows them down on a busy machine
                jobs.append(dict(estimator="tied", n_features=d, alpha=float(a), n_tokens=T,
                                 reg_lambda=lam, target="wishart", kappa0=kappa0, seed=s,
                                 solver=solver, n_test=cfg["n_test"], device="cpu",
                                 torch_threads=1,
                                 return_eigenvalues=(lam, a) == cfg["spectrum"] and s == 0))
    t0 = time.perf_counter()

    def progress(i, n, job, r):
        log(f"  fit {i:2d}/{n}: α={job['alpha']:<5g} λ={job['reg_lambda']:<5g} "
            f"seed={job['seed']}  test error {r['test_error']:.4g}  "
            f"objective/d² {r['train_objective']:.4g}  ({r['fit_time']:.1f} s)")

    fits = _run_fits(jobs, n_jobs, progress)
    log(f"  {len(jobs)} fits in {time.perf_counter() - t0:.1f} s")

    rows, sims, eig = [], {}, None
    for lam in DEMO_LAMBDAS:
        th = {round(r.alpha, 10): r for r in curves[lam]}
        sims[lam] = {"alpha": [], "test_error": ([], []), "train_objective": ([], [])}
        for a in cfg["sim_alphas"]:
            rs = [f for j, f in zip(jobs, fits) if j["reg_lambda"] == lam and j["alpha"] == a]
            for j, f in zip(jobs, fits):
                if "eigenvalues" in f and j["reg_lambda"] == lam and j["alpha"] == a:
                    eig = f["eigenvalues"]
            res = th[round(float(a), 10)]
            row = {"alpha": float(a), "lambda": lam,
                   "e_test_theory": res.test_error,
                   "e_test_sim": float(np.mean([f["test_error"] for f in rs])),
                   "e_test_sem": _sem([f["test_error"] for f in rs]),
                   "obj_theory": res.train_objective,
                   "obj_sim": float(np.mean([f["train_objective"] for f in rs])),
                   "obj_sem": _sem([f["train_objective"] for f in rs]),
                   "theory_converged": res.converged,
                   "fits_converged": all(f["converged"] for f in rs)}
            rows.append(row)
            sims[lam]["alpha"].append(float(a))
            for q, key in (("test_error", "e_test"), ("train_objective", "obj")):
                sims[lam][q][0].append(row[key + "_sim"])
                sims[lam][q][1].append(row[key + "_sem"])

    # figure
    lam_s, a_s = cfg["spectrum"]
    spec_res = {round(r.alpha, 10): r for r in curves[lam_s]}[round(float(a_s), 10)]
    os.makedirs(out, exist_ok=True)
    with paper_style():
        fig, axes = plt.subplots(1, 3, figsize=(11.5, 3.5), constrained_layout=True)
        for i, lam in enumerate(DEMO_LAMBDAS):
            for ax, q in zip(axes[:2], ("test_error", "train_objective")):
                plot_error_curve(curves[lam], quantity=q, ax=ax, color=PALETTE[i],
                                 marker=MARKERS[i], logy=True, logx=True,
                                 label=f"theory, λ = {lam:g}",
                                 sim_label=f"{'Adam' if solver == 'adam' else 'L-BFGS'}, "
                                           f"d = {d}, λ = {lam:g}",
                                 simulations={"alpha": sims[lam]["alpha"],
                                              "mean": sims[lam][q][0],
                                              "sem": sims[lam][q][1]})
        axes[0].set_title("(a) test error")
        axes[1].set_title(r"(b) training objective / $d^2$")
        handles, labels = axes[0].get_legend_handles_labels()
        axes[0].legend(handles, labels, fontsize=7, loc="lower left")
        plot_spectrum(spec_res, eig, ax=axes[2], bins=20 if quick else 25)
        axes[2].set_title(f"(c) learned spectrum, α = {a_s:g}, λ = {lam_s:g}, d = {d}")
        fig.suptitle(f"Tied softmax attention, T = {T}, Wishart target κ0 = {kappa0}, "
                     f"β = β0 = 1: state evolution (lines) vs gradient training (points)",
                     fontsize=9)
        path = os.path.join(out, "skattn_demo.png")
        fig.savefig(path, dpi=150)
        plt.close(fig)

    columns = ["alpha", "lambda", "e_test_theory", "e_test_sim", "e_test_sem", "obj_theory",
               "obj_sim", "obj_sem", "theory_converged", "fits_converged"]
    with open(os.path.join(out, "skattn_demo.csv"), "w") as fh:
        fh.write(_format_rows(rows, columns, "csv"))
    log(f"  total {time.perf_counter() - t_start:.1f} s; wrote {path} and "
        f"{os.path.join(out, 'skattn_demo.csv')}")
    return rows, path


def _demo_table(rows):
    def pm(m, s, prec):
        return f"{m:.{prec}g} ± {s:.1g}" if math.isfinite(s) else f"{m:.{prec}g}"
    out = []
    for r in rows:
        flag = "" if r["theory_converged"] and r["fits_converged"] else " *"
        out.append({"α": r["alpha"], "λ": r["lambda"],
                    "e_test theory": r["e_test_theory"],
                    "e_test sim ± sem": pm(r["e_test_sim"], r["e_test_sem"], 4) + flag,
                    "obj/d² theory": r["obj_theory"],
                    "obj/d² sim ± sem": pm(r["obj_sim"], r["obj_sem"], 4)})
    cols = list(out[0])
    text = format_table(out, cols)
    if any(not (r["theory_converged"] and r["fits_converged"]) for r in rows):
        text += "* a state-evolution point or a fit did not converge\n"
    return text


def cmd_demo(args):
    rows, _ = run_demo(args.out, quick=args.quick, solver=args.solver,
                       n_features=args.n_features, n_jobs=args.n_jobs,
                       log=lambda msg: print(msg, file=sys.stderr, flush=True))
    sys.stdout.write(_demo_table(rows))
    return 0


# ----------------------------------------------------------------------------------------
# figure
# ----------------------------------------------------------------------------------------

def _figure_name(raw, names):
    """The registry name for NAME, also accepting ``plot_NAME.py`` and dashes."""
    key = raw[:-3] if raw.endswith(".py") else raw
    key = key[len("plot_"):] if key.startswith("plot_") else key
    key = key.replace("-", "_")
    if key not in names:
        raise CLIError(f"unknown figure {raw!r}; available: {', '.join(names)} (or 'all')")
    return key


def cmd_figure(args):
    from .figures import list_figures, render

    names = list_figures()
    if args.list or args.name is None:
        if args.name is None and not args.list:
            raise CLIError("give a figure NAME or --list; available: " + ", ".join(names))
        width = max(map(len, names), default=0)
        for name, title in names.items():
            print(f"{name.ljust(width)}  {title}")
        return 0
    wanted = list(names) if args.name == "all" else [_figure_name(args.name, names)]
    import matplotlib
    if not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")  # the figures go to files; never open a window
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if args.verbose else None
    for key in wanted:
        print(f"drawing {key}{' (quick)' if args.quick else ''}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            # out_dir=None lets render fall back to $SKATTN_FIGURE_DIR, then the cwd
            paths = render(key, out_dir=args.out, quick=args.quick, log=log)
        except Exception as exc:  # one line per failed figure; --debug shows the traceback
            raise CLIError(f"figure {key!r} failed: {type(exc).__name__}: {exc}") from exc
        for path in paths:
            print(path)
        print(f"done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------------------
# sweep
# ----------------------------------------------------------------------------------------

def _sweep_theory_point(alpha, n_nodes, tol, max_iter, **params):
    """One state-evolution point as a flat dict of results (for :func:`run_sweep`)."""
    from .theory import solve_state_evolution
    res = solve_state_evolution(alpha, **_se_kwargs(params, n_nodes=n_nodes, tol=tol,
                                                    max_iter=max_iter))
    out = {}
    for c in _RESULT_COLUMNS:
        try:
            out[c] = getattr(res, c)
        except Exception:
            out[c] = None
    return out


def cmd_sweep(args):
    from .sweep import run_sweep
    names = _theory_param_names()
    groups = _param_grid(args, names)
    rows = []
    for params in groups:
        for a in args.alpha:
            try:
                kw = _se_kwargs(params, n_nodes=args.n_nodes, tol=args.tol,
                                max_iter=args.max_iter)
                _validate_theory_point(a, kw)
            except (ValueError, TypeError) as exc:
                raise _user_error(exc) from None
            rows.append({"alpha": a, **params, "n_nodes": args.n_nodes, "tol": args.tol,
                         "max_iter": args.max_iter})
    try:
        res = run_sweep(_sweep_theory_point, rows, output=args.output, backend=args.backend,
                        n_jobs=args.n_jobs, resume=not args.no_resume, verbose=args.verbose)
    except (ValueError, ImportError, RuntimeError) as exc:
        raise _user_error(exc) from None
    print(f"{len(res.rows)} rows in {res.output}: {res.n_run} run, {res.n_skipped} already "
          f"done, {res.n_failed} failed", file=sys.stderr)
    return 1 if res.n_failed else 0


# ----------------------------------------------------------------------------------------
# parser and entry point
# ----------------------------------------------------------------------------------------

_EPILOG_THEORY = """examples:
  skattn theory --alpha 0.1,0.3 --reg-lambda 0.01 --n-tokens 2 --kappa0 0.5
  skattn theory --alpha 0.05:1:12:log --reg-lambda 0.01,0.1 --format csv -o curve.csv
  skattn theory --alpha 0.3 --target powerlaw --gamma 1.5 --n-features 200 --format json
"""

_EPILOG_SIMULATE = """examples:
  skattn simulate --alpha 0.1,0.3 --n-features 60 --reg-lambda 0.01 --theory
  skattn simulate --alpha 0.3 --estimator tied,direct --solver lbfgs --n-seeds 3 -v
"""


_DESC_MAIN = (
    "Single-head tied attention in high dimensions (arXiv:2509.24914): exact "
    "asymptotic predictions and simulations."
)

_DESC_DEMO = (
    "T = 2 softmax attention, Wishart κ0 = 0.5 target, β = β0 = 1, λ ∈ {0.01, 0.1}: "
    "state-evolution test error and objective/d² along α, against "
    "TiedAttentionRegressor trained with Adam (mean ± s.e.m. over 2 seeds), and the "
    "learned spectrum against its predicted law. Writes skattn_demo.png and "
    "skattn_demo.csv, prints a table."
)

_DESC_THEORY = (
    "Solve the state evolution of factored (or direct) ERM and print test/train "
    "error, objective/d², order parameters and the atom of the learned spectrum."
)

_DESC_SIMULATE = (
    "Draw attention-indexed data (n = α d² training samples), fit the estimators, and"
    " report test error, train error and objective/d² (mean and s.e.m. over seeds), "
    "optionally beside the state-evolution prediction."
)

_DESC_FIGURE = (
    "Compute and draw a gallery figure (skattn.figures; no source checkout needed) and "
    "print the paths of its PNG(s). They go to --out if given, else to $SKATTN_FIGURE_DIR "
    "if set, else to the current directory. 'skattn figure --list' shows the available "
    "names; NAME 'all' draws every one."
)

_DESC_SWEEP = (
    "Like 'skattn theory' but each point is solved independently (no warm start) and "
    "written to --output as soon as it finishes (skattn.sweep.run_sweep); rerunning "
    "skips finished rows."
)


def _add_solver_options(p):
    g = p.add_argument_group("state-evolution solver")
    g.add_argument("--n-nodes", type=_positive_int, default=8192,
                   help="quasi-Monte Carlo nodes for the Gaussian expectations")
    g.add_argument("--tol", type=_positive_float, default=None,
                   help="tolerance on the fixed-point residual (default: the solver's, "
                        "1e-7)")
    g.add_argument("--max-iter", type=_positive_int, default=None,
                   help="maximum evaluations of the fixed-point map per point (default: "
                        "the solver's)")


def build_parser():
    """The ``skattn`` argument parser (subcommands demo, theory, simulate, figure, sweep)."""
    from . import __version__

    parser = _Parser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_desc(_DESC_MAIN),
        epilog="Run 'skattn COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show full tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    # demo
    p = sub.add_parser("demo", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="headline demo: theory vs gradient training, figure and table",
                       description=_desc(_DESC_DEMO))
    p.add_argument("--quick", action="store_true",
                   help="small version (d = 32, fewer points; under a minute)")
    p.add_argument("--out", default="out", metavar="DIR",
                   help="output directory (default: out)")
    p.add_argument("--solver", choices=("adam", "lbfgs"), default="adam",
                   help="optimiser of the simulations (default: adam)")
    p.add_argument("--n-features", type=_dimension, default=None, metavar="D",
                   help="dimension d of the simulations (default: 80, or 32 with --quick)")
    p.add_argument("--n-jobs", type=_nonzero_int, default=1,
                   help="parallel fits (joblib processes; -1: all CPUs; default: 1)")
    p.set_defaults(func=cmd_demo)

    # theory
    p = sub.add_parser("theory", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="state-evolution predictions (any parameter may be a list)",
                       description=_desc(_DESC_THEORY),
                       epilog=_EPILOG_THEORY)
    _add_model_params(p, alpha_required=True, n_features_default=[None],
                      n_features_help="'inf' for the d → ∞ continuum (default), or a "
                                      "dimension d for the finite-d state evolution "
                                      "(needed for power-law targets)")
    _add_solver_options(p)
    p.add_argument("--n-jobs", type=_nonzero_int, default=None,
                   help="parallel chunks of each α curve (joblib)")
    p.add_argument("--verbose", "-v", action="count", default=0, help="progress bar")
    _add_output_options(p)
    p.set_defaults(func=cmd_theory)

    # simulate
    p = sub.add_parser("simulate", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="fit estimators on synthetic data and report errors",
                       description=_desc(_DESC_SIMULATE),
                       epilog=_EPILOG_SIMULATE)
    _add_model_params(p, alpha_required=True, n_features_default=[60],
                      n_features_help="dimension d (default: 60)", parametrization=False)
    g = p.add_argument_group("simulation")
    g.add_argument("--estimator", type=_choice_list(("tied", "direct", "amp")),
                   default=["tied"],
                   help="comma list of: tied (TiedAttentionRegressor), direct "
                        "(DirectAttentionRegressor), amp (AsymptoticPredictor) "
                        "(default: tied)")
    g.add_argument("--solver", choices=("adam", "lbfgs"), default="adam",
                   help="optimiser of tied/direct (default: adam)")
    g.add_argument("--max-iter", type=_positive_int, default=5000,
                   help="maximum optimiser iterations (default: 5000)")
    sg = g.add_mutually_exclusive_group()
    sg.add_argument("--seeds", type=_int_list, default=None,
                    help="comma list of seeds (teacher, data and initialisation)")
    sg.add_argument("--n-seeds", type=_positive_int, default=None,
                    help="use seeds 0..N-1 (default: 2)")
    g.add_argument("--n-test", type=_positive_int, default=2000,
                   help="test samples (default: 2000)")
    g.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    g.add_argument("--n-jobs", type=_nonzero_int, default=1,
                   help="parallel fits (joblib processes; default: 1)")
    g.add_argument("--threads", type=_positive_int, default=1,
                   help="torch threads per fit (default: 1, fastest at d <= 100)")
    g.add_argument("--per-seed", action="store_true", help="one row per seed")
    g.add_argument("--theory", action="store_true",
                   help="add the state-evolution predictions (continuum for Wishart)")
    g.add_argument("--n-nodes", type=_positive_int, default=8192,
                   help="quadrature nodes of the predictions (default: 8192)")
    g.add_argument("--verbose", "-v", action="count", default=0,
                   help="one line per fit on stderr")
    _add_output_options(p)
    p.set_defaults(func=cmd_simulate)

    # figure
    p = sub.add_parser("figure", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="draw a gallery figure (skattn.figures) into PNG files",
                       description=_desc(_DESC_FIGURE))
    p.add_argument("name", nargs="?", default=None, metavar="NAME",
                   help="figure name, e.g. error_vs_alpha (or plot_error_vs_alpha.py), "
                        "or 'all'")
    p.add_argument("--list", action="store_true", help="list the available figures")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="directory for the PNGs (default: $SKATTN_FIGURE_DIR if set, "
                        "else the current directory)")
    p.add_argument("--quick", action="store_true",
                   help="smaller dimensions and grids: seconds to a minute per figure")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="progress messages of the figure on stderr")
    p.set_defaults(func=cmd_figure)

    # sweep
    p = sub.add_parser("sweep", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="resumable state-evolution sweep written row by row",
                       description=_desc(_DESC_SWEEP))
    _add_model_params(p, alpha_required=True, n_features_default=[None],
                      n_features_help="'inf' for the continuum (default) or a dimension d")
    _add_solver_options(p)
    g = p.add_argument_group("sweep")
    g.add_argument("--output", "-o", required=True, metavar="FILE",
                   help="*.csv file or *.parquet directory")
    g.add_argument("--backend", choices=("joblib", "sequential", "dask"), default="joblib",
                   help="execution backend (default: joblib)")
    g.add_argument("--n-jobs", type=_nonzero_int, default=1,
                   help="parallel workers (default: 1)")
    g.add_argument("--no-resume", action="store_true",
                   help="run every row again (rows are appended; the latest wins)")
    g.add_argument("--verbose", "-v", action="count", default=0, help="progress bar")
    p.set_defaults(func=cmd_sweep)
    return parser


def main(argv=None):
    """Entry point of the ``skattn`` command; returns the exit status.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    status : int
        0 on success, 1 on an error while running, 2 on a usage error.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    prog = f"{PROG} {args.command}"
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        if args.debug:
            raise
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError) as exc:
        if args.debug:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"{prog}: error: {type(exc).__name__}: {msg} (rerun with --debug for "
              f"details)", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
