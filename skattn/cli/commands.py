"""The ``skattn`` subcommands: each reads its parsed arguments and calls the library."""

from __future__ import annotations

import os
import sys
import time

from ..demo import demo_table, run_demo
from ..experiments import (PHASE_DIAGRAM_COLUMNS, SPREAD_COLUMNS, THEORY_RESULT_COLUMNS,
                           phase_diagram, phase_diagram_rows, simulate_rows, theory_point,
                           theory_rows, theory_sweep_rows)
from ..reporting import format_rows
from .arguments import (MODEL_PARAMS, CLIError, check_columns, check_output_file,
                        choose_columns, param_grid, theory_param_names, user_error, write)

# ----------------------------------------------------------------------------------------
# theory
# ----------------------------------------------------------------------------------------

def cmd_theory(args):
    names = theory_param_names()
    spread_columns = list(SPREAD_COLUMNS) if args.spread is not None else []
    all_columns = ["alpha"] + names + list(THEORY_RESULT_COLUMNS) + spread_columns
    check_columns(args, all_columns)
    check_output_file(args.output, "--output", create=True)
    groups = param_grid(args, names)
    try:
        # progress (a bar over several points, the elapsed time of one) unless --quiet
        show = not args.quiet
        rows = theory_rows(groups, args.alpha, n_nodes=args.n_nodes, tol=args.tol,
                           max_iter=args.max_iter, n_jobs=args.n_jobs, verbose=int(show),
                           correction=args.correction, spread=args.spread)
    except (ValueError, TypeError) as exc:
        raise user_error(exc) from None
    columns = choose_columns(rows, all_columns, args,
                              ["alpha", "test_error", "train_error", "train_objective",
                               "atom_mass", "converged", "correction_used"] + spread_columns,
                              names)
    write(format_rows(rows, columns, args.format), args.output)
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
    check_output_file(args.output, "--output", create=True)
    names = theory_param_names()
    args.parametrization = ["factored"]
    groups = param_grid(args, names)
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
        raise user_error(exc) from None
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
    columns = choose_columns(rows, all_columns, args, main,
                              ["n_features"] + [p[0] for p in MODEL_PARAMS])
    write(format_rows(rows, columns, args.format), args.output)
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

def figure_name(raw, names):
    """The registry name for NAME, also accepting ``plot_NAME.py`` and dashes."""
    key = raw[:-3] if raw.endswith(".py") else raw
    key = key[len("plot_"):] if key.startswith("plot_") else key
    key = key.replace("-", "_")
    if key not in names:
        raise CLIError(f"unknown figure {raw!r}; available: {', '.join(names)} (or 'all')")
    return key


def cmd_figure(args):
    from ..figures import list_figures, render

    names = list_figures()
    if args.list or args.name is None:
        if args.name is None and not args.list:
            raise CLIError("give a figure NAME or --list; available: " + ", ".join(names))
        width = max(map(len, names), default=0)
        for name, title in names.items():
            print(f"{name.ljust(width)}  {title}")
        return 0
    wanted = list(names) if args.name == "all" else [figure_name(args.name, names)]
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
    from ..sweep import run_sweep
    groups = param_grid(args, theory_param_names())
    try:
        rows = theory_sweep_rows(groups, args.alpha, n_nodes=args.n_nodes, tol=args.tol,
                                 max_iter=args.max_iter, correction=args.correction)
    except (ValueError, TypeError) as exc:
        raise user_error(exc) from None
    try:
        res = run_sweep(theory_point, rows, output=args.output, backend=args.backend,
                        n_jobs=args.n_jobs, resume=not args.no_resume, verbose=args.verbose)
    except (ValueError, ImportError, RuntimeError) as exc:
        raise user_error(exc) from None
    print(f"{len(res.rows)} rows in {res.output}: {res.n_run} run, {res.n_skipped} already "
          f"done, {res.n_failed} failed", file=sys.stderr)
    return 1 if res.n_failed else 0


# ----------------------------------------------------------------------------------------
# phase diagram
# ----------------------------------------------------------------------------------------

def cmd_phase_diagram(args):
    names = [n for n in theory_param_names() if n != "reg_lambda"]
    groups = param_grid(args, names)
    if len(groups) != 1:
        raise CLIError("phase-diagram: only --alpha and --reg-lambda may be lists; give one "
                       "value for every other parameter")
    check_output_file(args.figure, "--figure")
    check_output_file(args.output, "--output", create=True)
    try:
        diagram = phase_diagram(groups[0], args.alpha, args.reg_lambda, n_nodes=args.n_nodes,
                                tol=args.tol, max_iter=args.max_iter, n_jobs=args.n_jobs,
                                verbose=not args.quiet, correction=args.correction)
    except (ValueError, TypeError) as exc:
        raise user_error(exc) from None
    rows = phase_diagram_rows(diagram)
    write(format_rows(rows, list(PHASE_DIAGRAM_COLUMNS), args.format), args.output)
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
    # the grid's own function, not its `python -m` parser: that one prints a usage block
    from ..validation.grid import VALIDATE_D, VALIDATION_CONFIGS, run_validation_grid

    configs = VALIDATION_CONFIGS
    if args.labels:
        configs = [c for c in configs if any(s in c.label for s in args.labels)]
        if not configs:
            raise CLIError(f"--labels: no configuration label contains any of {args.labels}")
    try:
        run_validation_grid(args.output, d=args.d or list(VALIDATE_D), n_seeds=args.n_seeds,
                            backend=args.backend, n_jobs=args.n_jobs, configs=configs,
                            same_instance_se=not args.no_same_instance_se, verbose=1)
    except (ValueError, TypeError) as exc:
        raise user_error(exc) from None
    return 0


# ----------------------------------------------------------------------------------------
# finite-size scaling of one configuration
# ----------------------------------------------------------------------------------------

FINITE_SIZE_COLUMNS = ["quantity", "d", "mean", "sem", "reference", "verdict"]


def cmd_finite_size(args):
    from ..experiments import row_target_spec
    from ..validation import finite_size_scaling

    groups = param_grid(args, [n for n in theory_param_names()
                               if n not in ("n_features", "parametrization")])
    if len(groups) != 1 or len(args.alpha) != 1:
        raise CLIError("finite-size: give one value of every parameter (one configuration)")
    check_output_file(args.figure, "--figure")
    check_output_file(args.output_table, "--output", create=True)
    row = groups[0]
    try:
        target = row_target_spec(row["target"], kappa0=row.get("kappa0"),
                                 gamma=row.get("gamma"))
        config = {"alpha": args.alpha[0], "reg_lambda": row["reg_lambda"],
                  "n_tokens": row["n_tokens"], "attention": row["attention"],
                  "beta": row["beta"], "target_beta": row["target_beta"],
                  "noise": row["noise"], "task": row["task"], "target": target,
                  "estimator": args.estimator, "width_ratio": row["width_ratio"],
                  "solver": args.solver}
        result = finite_size_scaling(config, d=args.d, n_seeds=args.n_seeds,
                                     output=args.output, backend=args.backend,
                                     n_jobs=args.n_jobs, n_test=args.n_test,
                                     same_instance_se=not args.no_same_instance_se,
                                     verbose=not args.quiet, correction=args.correction)
    except (ValueError, TypeError) as exc:
        raise user_error(exc, aliases={"n_features": "d"}) from None
    write(format_rows(result.table_rows(), FINITE_SIZE_COLUMNS, args.format), args.output_table)
    if args.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
        result.plot(axes[0], quantity="test_error")
        result.plot(axes[1], quantity="train_objective")
        fig.savefig(args.figure, dpi=120)
        plt.close(fig)
        print(f"wrote {args.figure}", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------------------
# docs
# ----------------------------------------------------------------------------------------

def cmd_docs(args):
    from ..documentation import PAGES, documentation, format_documentation

    if args.list:
        sys.stdout.write("".join(f"{title}\n" for title in PAGES))
        return 0
    try:
        info = documentation(args.page)
    except ValueError as exc:
        raise user_error(exc) from None
    sys.stdout.write(format_documentation(info))
    return 0
