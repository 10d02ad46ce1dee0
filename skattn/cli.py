"""The ``skattn`` command line: demo, theory, simulate, figure, sweep, phase-diagram, validate.

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
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from .demo import demo_table, run_demo
from .experiments import (PHASE_DIAGRAM_COLUMNS, THEORY_RESULT_COLUMNS, parameter_grid,
                          phase_diagram, phase_diagram_rows, simulate_rows, theory_point,
                          theory_rows, theory_sweep_rows)
from .reporting import FORMATS, format_rows, to_jsonable

__all__ = ["main", "build_parser"]

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


def _add_output_options(p, formats=FORMATS):
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=formats, default="table",
                   help="output format (default: table)")
    g.add_argument("--output", "-o", default=None, metavar="FILE",
                   help="write to FILE instead of stdout")
    g.add_argument("--columns", type=_split, default=None, metavar="COLS",
                   help="comma list of columns to output (default: all for csv/json, the "
                        "varying parameters and main results for table)")
    return g


def _theory_param_names():
    return ["n_features"] + [p[0] for p in _MODEL_PARAMS] + ["parametrization"]


def _param_grid(args, names):
    return parameter_grid({n: getattr(args, n) for n in names})


def _user_error(exc):
    """A library ValueError/TypeError as a one-line CLIError naming the option if we can."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for name in sorted(_PARAM_NAMES + ["n_samples", "rank_ratio", "width", "n_nodes"],
                       key=len, reverse=True):
        if msg.startswith((name + " ", name + "=")) or msg.startswith(f"The '{name}' "
                                                                       "parameter"):
            flag = {"rank_ratio": "kappa0", "n_samples": "alpha",
                    "width": "width_ratio"}.get(name, name)
            msg = f"{_flag(flag)}: {msg}"
            break
    return CLIError(msg)


# ----------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------

def _check_columns(args, all_columns):
    if args.columns:
        unknown = [c for c in args.columns if c not in all_columns]
        if unknown:
            raise CLIError(f"--columns: unknown column(s) {', '.join(unknown)}; available: "
                           f"{', '.join(all_columns)}")


def _choose_columns(rows, all_columns, args, main_results, sweep_names):
    if args.columns:
        _check_columns(args, all_columns)
        return list(args.columns)
    if args.format != "table":
        return all_columns
    varying = [n for n in sweep_names
               if len({json.dumps(to_jsonable(r.get(n))) for r in rows}) > 1]
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

def cmd_theory(args):
    names = _theory_param_names()
    all_columns = ["alpha"] + names + list(THEORY_RESULT_COLUMNS)
    _check_columns(args, all_columns)
    groups = _param_grid(args, names)
    try:
        # a curve of several points shows its progress unless --quiet
        show = not args.quiet and (args.verbose or len(groups) * len(set(args.alpha)) > 1)
        rows = theory_rows(groups, args.alpha, n_nodes=args.n_nodes, tol=args.tol,
                           max_iter=args.max_iter, n_jobs=args.n_jobs, verbose=int(show))
    except (ValueError, TypeError) as exc:
        raise _user_error(exc) from None
    columns = _choose_columns(rows, all_columns, args,
                              ["alpha", "test_error", "train_error", "train_objective",
                               "atom_mass", "converged"], names)
    _write(format_rows(rows, columns, args.format), args.output)
    bad = sum(not r["converged"] for r in rows)
    if bad:
        print(f"warning: {bad} of {len(rows)} points did not converge (see the 'converged' "
              f"and 'message' columns)", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------------------
# simulate
# ----------------------------------------------------------------------------------------

def cmd_simulate(args):
    if None in args.n_features:
        raise CLIError("--n-features: simulations need a finite dimension d (e.g. 60)")
    names = _theory_param_names()
    args.parametrization = ["factored"]
    groups = _param_grid(args, names)
    seeds = args.seeds if args.seeds is not None else list(range(args.n_seeds or 2))

    def progress(i, n, job, r):
        if args.verbose:
            print(f"[{i}/{n}] {job['estimator']} d={job['n_features']} α={job['alpha']:g} "
                  f"λ={job['reg_lambda']:g} seed={job['seed']}: test error "
                  f"{r['test_error']:.4g} ({r['fit_time']:.1f} s)", file=sys.stderr)

    try:
        rows = simulate_rows(groups, args.alpha, seeds, estimators=args.estimator,
                             solver=args.solver, max_iter=args.max_iter, n_test=args.n_test,
                             device=args.device, n_jobs=args.n_jobs, per_seed=args.per_seed,
                             theory=args.theory, n_nodes=args.n_nodes,
                             torch_threads=args.threads, progress=progress)
    except (ValueError, TypeError) as exc:
        raise _user_error(exc) from None
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
    _write(format_rows(rows, columns, args.format), args.output)
    return 0


# ----------------------------------------------------------------------------------------
# demo
# ----------------------------------------------------------------------------------------

def cmd_demo(args):
    rows, _ = run_demo(args.out, quick=args.quick, solver=args.solver,
                       n_features=args.n_features, n_jobs=args.n_jobs,
                       log=lambda msg: print(msg, file=sys.stderr, flush=True))
    sys.stdout.write(demo_table(rows))
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

def cmd_sweep(args):
    from .sweep import run_sweep
    groups = _param_grid(args, _theory_param_names())
    try:
        rows = theory_sweep_rows(groups, args.alpha, n_nodes=args.n_nodes, tol=args.tol,
                                 max_iter=args.max_iter)
    except (ValueError, TypeError) as exc:
        raise _user_error(exc) from None
    try:
        res = run_sweep(theory_point, rows, output=args.output, backend=args.backend,
                        n_jobs=args.n_jobs, resume=not args.no_resume, verbose=args.verbose)
    except (ValueError, ImportError, RuntimeError) as exc:
        raise _user_error(exc) from None
    print(f"{len(res.rows)} rows in {res.output}: {res.n_run} run, {res.n_skipped} already "
          f"done, {res.n_failed} failed", file=sys.stderr)
    return 1 if res.n_failed else 0


# ----------------------------------------------------------------------------------------
# phase diagram
# ----------------------------------------------------------------------------------------

def cmd_phase_diagram(args):
    names = [n for n in _theory_param_names() if n != "reg_lambda"]
    groups = _param_grid(args, names)
    if len(groups) != 1:
        raise CLIError("phase-diagram: only --alpha and --reg-lambda may be lists; give one "
                       "value for every other parameter")
    try:
        diagram = phase_diagram(groups[0], args.alpha, args.reg_lambda, n_nodes=args.n_nodes,
                                tol=args.tol, max_iter=args.max_iter, n_jobs=args.n_jobs,
                                verbose=not args.quiet)
    except (ValueError, TypeError) as exc:
        raise _user_error(exc) from None
    rows = phase_diagram_rows(diagram)
    _write(format_rows(rows, list(PHASE_DIAGRAM_COLUMNS), args.format), args.output)
    if args.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4.5))
        diagram.plot(ax, quantity=args.quantity)
        ax.set_title(f"{args.quantity}, T = {groups[0]['n_tokens']}, "
                     f"{groups[0]['attention']}")
        fig.savefig(args.figure, dpi=120, bbox_inches="tight")
        plt.close(fig)
        print(f"wrote {args.figure}", file=sys.stderr)
    bad = int((~diagram.converged).sum())
    if bad:
        print(f"warning: {bad} of {diagram.converged.size} points did not converge (NaN "
              f"in the output; see the 'converged' column)", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------------------
# validation grid
# ----------------------------------------------------------------------------------------

def cmd_validate(args):
    from .validation_grid import main as validation_main

    argv = ["--output", args.output, "--n-seeds", str(args.n_seeds), "--backend",
            args.backend, "--n-jobs", str(args.n_jobs)]
    if args.d:
        argv += ["--d", *map(str, args.d)]
    if args.labels:
        argv += ["--labels", *args.labels]
    if args.no_same_instance_se:
        argv.append("--no-same-instance-se")
    return validation_main(argv)


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


_DESC_PHASE_DIAGRAM = (
    "Solve the state evolution on the grid --alpha × --reg-lambda (each λ row is a "
    "warm-started α path; rows run in parallel with --n-jobs) and print one row per "
    "point; --figure draws it."
)

_EPILOG_PHASE_DIAGRAM = """examples:
  skattn phase-diagram --alpha 0.05:1:32 --reg-lambda 1e-3:1:16:log --n-jobs 2 -o pd.csv \\
      --format csv --figure pd.png
"""

_DESC_VALIDATE = (
    "Train estimators at several d on the validation grid of configurations, extrapolate "
    "d → ∞ (skattn.finite_size) and compare with the state evolution; writes a table and "
    "a figure next to --output. Long (tens of minutes on 2 cores) and resumable: rerun "
    "to continue."
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
    p.add_argument("--verbose", "-v", action="count", default=0,
                   help="progress bar also for a single point")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bar (shown by default for several points)")
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
    g.add_argument("--solver", choices=("lbfgs", "adam"), default="lbfgs",
                   help="optimiser of tied/direct (default: lbfgs, as the estimators)")
    g.add_argument("--max-iter", type=_positive_int, default=5000,
                   help="maximum optimiser iterations (default: 5000)")
    sg = g.add_mutually_exclusive_group()
    sg.add_argument("--seeds", type=_int_list, default=None,
                    help="comma list of seeds (teacher, data and initialisation)")
    sg.add_argument("--n-seeds", type=_positive_int, default=None,
                    help="use seeds 0..N-1 (default: 2)")
    g.add_argument("--n-test", type=_positive_int, default=2000,
                   help="test samples (default: 2000)")
    g.add_argument("--device", default="auto",
                   help="torch device: auto (CUDA when available), cpu, cuda (default: auto)")
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
                   help="*.sqlite store, or *.csv / *.parquet export of the store next to it")
    g.add_argument("--backend", choices=("joblib", "sequential", "dask"), default="joblib",
                   help="execution backend (default: joblib)")
    g.add_argument("--n-jobs", type=_nonzero_int, default=1,
                   help="parallel workers (default: 1)")
    g.add_argument("--no-resume", action="store_true",
                   help="run every row again (rows are appended; the latest wins)")
    g.add_argument("--verbose", "-v", action="count", default=0, help="progress bar")
    p.set_defaults(func=cmd_sweep)

    # phase diagram
    p = sub.add_parser("phase-diagram", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="state evolution over an α × λ grid (warm-started rows)",
                       description=_desc(_DESC_PHASE_DIAGRAM), epilog=_EPILOG_PHASE_DIAGRAM)
    _add_model_params(p, alpha_required=True, n_features_default=[None],
                      n_features_help="'inf' for the continuum (default) or a dimension d")
    _add_solver_options(p)
    p.add_argument("--n-jobs", type=_nonzero_int, default=1,
                   help="parallel λ rows (joblib processes; -1: all CPUs; default: 1)")
    p.add_argument("--figure", default=None, metavar="PNG",
                   help="also draw the diagram into this PNG file")
    p.add_argument("--quantity", default="test_error",
                   choices=PHASE_DIAGRAM_COLUMNS[2:-1],
                   help="quantity drawn by --figure (default: test_error)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _add_output_options(p)
    p.set_defaults(func=cmd_phase_diagram)

    # validation grid
    p = sub.add_parser("validate", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="theory against simulations on the validation grid (long; "
                            "resumable)",
                       description=_desc(_DESC_VALIDATE))
    p.add_argument("--output", "-o", default="validate.sqlite", metavar="FILE",
                   help="sweep store, resumed when it exists (default: validate.sqlite)")
    p.add_argument("--d", type=_int_list, default=None,
                   help="token dimensions, >= 3 distinct values >= 8 (default: 40,60,80,100)")
    p.add_argument("--n-seeds", type=_positive_int, default=3,
                   help="seeds per dimension (default: 3)")
    p.add_argument("--backend", choices=("joblib", "sequential", "dask"), default="joblib",
                   help="execution backend (default: joblib)")
    p.add_argument("--n-jobs", type=_nonzero_int, default=2,
                   help="parallel fits (default: 2)")
    p.add_argument("--labels", type=_split, default=None,
                   help="comma list: run only configurations whose label contains one")
    p.add_argument("--no-same-instance-se", action="store_true",
                   help="skip the per-teacher finite-d state evolution (about half the time)")
    p.set_defaults(func=cmd_validate)
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
    except Exception as exc:  # noqa: BLE001 - a command line prints one line, never a trace
        if args.debug:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"{prog}: error: {type(exc).__name__}: {msg} (rerun with --debug for "
              f"details)", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
