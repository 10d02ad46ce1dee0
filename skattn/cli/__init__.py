"""The ``skattn`` command line: demo, theory, simulate, figure, sweep, phase-diagram,
validate, finite-size.

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
import sys

from ..experiments import PHASE_DIAGRAM_COLUMNS
from ..theory import CORRECTION_NAMES
from .arguments import (EXIT_ERROR, EXIT_USAGE, PROG, CLIError, Parser, add_model_params,
                        add_output_options, add_solver_options, choice_list, desc, dimension,
                        int_list, nonzero_int, positive_int, replicate_count, split)
from .commands import (cmd_demo, cmd_docs, cmd_figure, cmd_finite_size, cmd_phase_diagram,
                       cmd_simulate, cmd_sweep, cmd_theory, cmd_validate)
from .text import (DESC_DEMO, DESC_FIGURE, DESC_FINITE_SIZE, DESC_MAIN, DESC_PHASE_DIAGRAM,
                   DESC_SIMULATE,
                   DESC_SWEEP, DESC_THEORY, DESC_VALIDATE, EPILOG_PHASE_DIAGRAM,
                   EPILOG_SIMULATE, EPILOG_THEORY)

__all__ = ["main", "build_parser"]



def build_parser():
    """The ``skattn`` argument parser (subcommands demo, theory, simulate, figure, sweep)."""
    from .. import __version__

    parser = Parser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=desc(DESC_MAIN),
        epilog="Run 'skattn COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show full tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    # demo
    p = sub.add_parser("demo", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="headline demo: theory vs gradient training, figure and table",
                       description=desc(DESC_DEMO))
    p.add_argument("--quick", action="store_true",
                   help="small version (d = 32, fewer points; under a minute)")
    p.add_argument("--out", default="out", metavar="DIR",
                   help="output directory (default: out)")
    p.add_argument("--solver", choices=("adam", "lbfgs"), default="adam",
                   help="optimiser of the simulations (default: adam, the paper's: the demo "
                        "shows that gradient training from a random start reaches the "
                        "minimiser the theory describes; lbfgs, the estimators' default, "
                        "reaches the same minimum in fewer iterations)")
    p.add_argument("--n-features", type=dimension, default=None, metavar="D",
                   help="dimension d of the simulations (default: 80, or 32 with --quick)")
    p.add_argument("--n-jobs", type=nonzero_int, default=1,
                   help="parallel fits (joblib processes; -1: all CPUs; default: 1)")
    p.set_defaults(func=cmd_demo)

    # theory
    p = sub.add_parser("theory", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="state-evolution predictions (any parameter may be a list)",
                       description=desc(DESC_THEORY),
                       epilog=EPILOG_THEORY)
    add_model_params(p, alpha_required=True, n_features_default=[None],
                      n_features_help="'inf' for the d → ∞ continuum (default), or a "
                                      "dimension d for the finite-d state evolution "
                                      "(needed for power-law targets)")
    add_solver_options(p)
    p.add_argument("--n-jobs", type=nonzero_int, default=None,
                   help="parallel chunks of each α curve, and the solves of --spread "
                        "(joblib)")
    p.add_argument("--verbose", "-v", action="count", default=0,
                   help="progress (the default unless --quiet; kept for compatibility)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress on stderr (by default: a bar over several points, "
                        "the elapsed time of a single one)")
    p.add_argument("--spread", type=replicate_count, default=None, metavar="N",
                   help="also solve each point on N - 1 other scramblings of its "
                        "quadrature nodes (N >= 2) and report the standard deviations "
                        "over the N solves, the quadrature's error (columns "
                        "test_error_quadrature_std, train_error_quadrature_std)")
    add_output_options(p)
    p.set_defaults(func=cmd_theory)

    # simulate
    p = sub.add_parser("simulate", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="fit estimators on synthetic data and report errors",
                       description=desc(DESC_SIMULATE),
                       epilog=EPILOG_SIMULATE)
    add_model_params(p, alpha_required=True, n_features_default=[60],
                      n_features_help="dimension d (default: 60)", parametrization=False)
    g = p.add_argument_group("simulation")
    g.add_argument("--estimator", type=choice_list(("tied", "direct", "amp")),
                   default=["tied"],
                   help="comma list of: tied (TiedAttentionRegressor), direct "
                        "(DirectAttentionRegressor), amp (AsymptoticPredictor) "
                        "(default: tied)")
    g.add_argument("--solver", choices=("lbfgs", "adam"), default="lbfgs",
                   help="optimiser of tied/direct (default: lbfgs, as the estimators)")
    g.add_argument("--max-iter", type=positive_int, default=5000,
                   help="maximum optimiser iterations (default: 5000)")
    sg = g.add_mutually_exclusive_group()
    sg.add_argument("--seeds", type=int_list, default=None,
                    help="comma list of seeds (teacher, data and initialisation)")
    sg.add_argument("--n-seeds", type=positive_int, default=None,
                    help="use seeds 0..N-1 (default: 2)")
    g.add_argument("--n-test", type=positive_int, default=2000,
                   help="test samples (default: 2000)")
    g.add_argument("--device", default="auto",
                   help="torch device: auto (CUDA when available), cpu, cuda (default: auto)")
    g.add_argument("--n-jobs", type=nonzero_int, default=1,
                   help="parallel fits (joblib processes; default: 1)")
    g.add_argument("--threads", type=positive_int, default=1,
                   help="torch threads per fit (default: 1, fastest at d <= 100)")
    g.add_argument("--per-seed", action="store_true", help="one row per seed")
    g.add_argument("--theory", action="store_true",
                   help="add the state-evolution predictions (continuum for Wishart)")
    g.add_argument("--n-nodes", type=positive_int, default=8192,
                   help="quadrature nodes of the predictions (default: 8192)")
    g.add_argument("--verbose", "-v", action="count", default=0,
                   help="one line per fit on stderr")
    add_output_options(p)
    p.set_defaults(func=cmd_simulate)

    # figure
    p = sub.add_parser("figure", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="draw a gallery figure (skattn.figures) into PNG files",
                       description=desc(DESC_FIGURE))
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
                       description=desc(DESC_SWEEP))
    add_model_params(p, alpha_required=True, n_features_default=[None],
                      n_features_help="'inf' for the continuum (default) or a dimension d")
    add_solver_options(p)
    g = p.add_argument_group("sweep")
    g.add_argument("--output", "-o", required=True, metavar="FILE",
                   help="*.sqlite store, or *.csv / *.parquet export of the store next to it")
    g.add_argument("--backend", choices=("joblib", "sequential", "dask"), default="joblib",
                   help="execution backend (default: joblib)")
    g.add_argument("--n-jobs", type=nonzero_int, default=1,
                   help="parallel workers (default: 1)")
    g.add_argument("--no-resume", action="store_true",
                   help="run every row again (rows are appended; the latest wins)")
    g.add_argument("--verbose", "-v", action="count", default=0, help="progress bar")
    p.set_defaults(func=cmd_sweep)

    # phase diagram
    p = sub.add_parser("phase-diagram", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="state evolution over an α × λ grid (warm-started rows)",
                       description=desc(DESC_PHASE_DIAGRAM), epilog=EPILOG_PHASE_DIAGRAM)
    add_model_params(p, alpha_required=True, n_features_default=[None],
                      n_features_help="'inf' for the continuum (default) or a dimension d")
    add_solver_options(p)
    p.add_argument("--n-jobs", type=nonzero_int, default=1,
                   help="parallel λ rows (joblib processes; -1: all CPUs; default: 1)")
    p.add_argument("--figure", default=None, metavar="PNG",
                   help="also draw the diagram into this PNG file")
    p.add_argument("--quantity", default="test_error",
                   choices=PHASE_DIAGRAM_COLUMNS[2:-1],
                   help="quantity drawn by --figure (default: test_error)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    add_output_options(p)
    p.set_defaults(func=cmd_phase_diagram)

    # validation grid
    p = sub.add_parser("validate", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="theory against simulations on the validation grid (long; "
                            "resumable)",
                       description=desc(DESC_VALIDATE))
    p.add_argument("--output", "-o", default="validate.sqlite", metavar="FILE",
                   help="sweep store, resumed when it exists (default: validate.sqlite)")
    p.add_argument("--d", type=int_list, default=None,
                   help="token dimensions, >= 3 distinct values >= 8 (default: 40,60,80,100)")
    p.add_argument("--n-seeds", type=positive_int, default=3,
                   help="seeds per dimension (default: 3)")
    p.add_argument("--backend", choices=("joblib", "sequential", "dask"), default="joblib",
                   help="execution backend (default: joblib)")
    p.add_argument("--n-jobs", type=nonzero_int, default=2,
                   help="parallel fits (default: 2)")
    p.add_argument("--labels", type=split, default=None,
                   help="comma list: run only configurations whose label contains one")
    p.add_argument("--no-same-instance-se", action="store_true",
                   help="skip the per-teacher finite-d state evolution (about half the time)")
    p.set_defaults(func=cmd_validate)

    # finite-size scaling of one configuration
    p = sub.add_parser("finite-size", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="train at several d, extrapolate d → ∞, compare with the theory",
                       description=desc(DESC_FINITE_SIZE))
    # the dimensions are --d (several); no --n-features here
    add_model_params(p, alpha_required=True, n_features_default=[None],
                     n_features_help=None, parametrization=False, n_features=False)
    g = p.add_argument_group("finite-size scaling")
    g.add_argument("--d", type=int_list, default=[40, 60, 80, 100],
                   help="token dimensions, >= 3 distinct values >= 8 (default: 40,60,80,100)")
    g.add_argument("--n-seeds", type=positive_int, default=3,
                   help="fresh teachers and data sets per d, >= 2 (default: 3)")
    g.add_argument("--estimator", choices=("tied", "direct"), default="tied",
                   help="student (default: tied)")
    g.add_argument("--solver", choices=("lbfgs", "adam"), default="lbfgs",
                   help="optimiser (default: lbfgs)")
    g.add_argument("--n-test", type=positive_int, default=4000,
                   help="test samples per fit (default: 4000)")
    g.add_argument("--store", dest="output", default=None, metavar="FILE",
                   help="sweep store (*.sqlite) to resume from and write to (default: none)")
    g.add_argument("--backend", choices=("sequential", "joblib", "dask"),
                   default="sequential", help="execution backend (default: sequential)")
    g.add_argument("--n-jobs", type=nonzero_int, default=1,
                   help="parallel fits (default: 1)")
    g.add_argument("--no-same-instance-se", action="store_true",
                   help="skip the per-teacher finite-d state evolution")
    g.add_argument("--correction", choices=CORRECTION_NAMES, default="auto",
                   help="finite-size correction of the per-teacher state evolution "
                        "(choices: %(choices)s; default: %(default)s)")
    g.add_argument("--figure", default=None, metavar="PNG",
                   help="draw both quantities against d into this PNG file")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    g.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="output format (default: table)")
    g.add_argument("--output", "-o", dest="output_table", default=None, metavar="FILE",
                   help="write the table to FILE instead of stdout")
    p.set_defaults(func=cmd_finite_size)

    # docs
    p = sub.add_parser("docs", help="where the documentation of this installation lives",
                       description="Print where the documentation is: the built HTML page, "
                                   "its source, the published page; the package's messages "
                                   "cite pages by these titles.")
    p.add_argument("page", nargs="?", default=None,
                   help="a page title, e.g. 'Theory' or 'Where the predictions hold' "
                        "(a unique prefix is enough); --list shows them")
    p.add_argument("--list", action="store_true", help="list the page titles")
    p.set_defaults(func=cmd_docs)
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
