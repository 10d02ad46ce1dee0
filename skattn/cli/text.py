"""Descriptions and examples of the ``skattn`` subcommands (their ``--help`` text)."""

# ----------------------------------------------------------------------------------------
# parser and entry point
# ----------------------------------------------------------------------------------------

EPILOG_THEORY = """examples:
  skattn theory --alpha 0.1,0.3 --reg-lambda 0.01 --n-tokens 2 --kappa0 0.5
  skattn theory --alpha 0.05:1:12:log --reg-lambda 0.01,0.1 --format csv -o curve.csv
  skattn theory --alpha 0.3 --target powerlaw --gamma 1.5 --n-features 200 --format json
"""

EPILOG_SIMULATE = """examples:
  skattn simulate --alpha 0.1,0.3 --n-features 60 --reg-lambda 0.01 --theory
  skattn simulate --alpha 0.3 --estimator tied,direct --solver lbfgs --n-seeds 3 -v
"""


DESC_MAIN = (
    "Single-head tied attention in high dimensions (arXiv:2509.24914): exact "
    "asymptotic predictions and simulations."
)

DESC_DEMO = (
    "T = 2 softmax attention, Wishart κ0 = 0.5 target, β = β0 = 1, λ ∈ {0.01, 0.1}: "
    "state-evolution test error and objective/d² along α, against "
    "TiedAttentionRegressor trained with Adam (mean ± s.e.m. over 2 seeds), and the "
    "learned spectrum against its predicted law. Writes skattn_demo.png and "
    "skattn_demo.csv, prints a table."
)

DESC_THEORY = (
    "Solve the state evolution of factored (or direct) ERM and print test/train "
    "error, objective/d², order parameters and the atom of the learned spectrum."
)

DESC_SIMULATE = (
    "Draw attention-indexed data (n = α d² training samples), fit the estimators, and"
    " report test error, train error and objective/d² (mean and s.e.m. over seeds), "
    "optionally beside the state-evolution prediction."
)

DESC_FIGURE = (
    "Compute and draw a gallery figure (skattn.figures; no source checkout needed) and "
    "print the paths of its PNG(s). They go to --out if given, else to $SKATTN_FIGURE_DIR "
    "if set, else to the current directory. 'skattn figure --list' shows the available "
    "names; NAME 'all' draws every one."
)

DESC_SWEEP = (
    "Like 'skattn theory' but each point is solved independently (no warm start) and "
    "written to --output as soon as it finishes (skattn.sweep.run_sweep); rerunning "
    "skips finished rows."
)


DESC_PHASE_DIAGRAM = (
    "Solve the state evolution on the grid --alpha × --reg-lambda (each λ row is a "
    "warm-started α path; rows run in parallel with --n-jobs) and print one row per "
    "point; --figure draws it."
)

EPILOG_PHASE_DIAGRAM = """examples:
  skattn phase-diagram --alpha 0.05:1:32 --reg-lambda 1e-3:1:16:log --n-jobs 2 -o pd.csv \\
      --format csv --figure pd.png
"""

DESC_VALIDATE = (
    "Train estimators at several d on the validation grid of configurations, extrapolate "
    "d → ∞ (skattn.validation) and compare with the state evolution; writes a table and "
    "a figure next to --output. Long (tens of minutes on 2 cores) and resumable: rerun "
    "to continue."
)

DESC_FINITE_SIZE = (
    "Train the estimator on one configuration at several d (fresh teachers, training and "
    "test sets for each seed), fit e(d) = e_inf + c d^(-1/2) and e_inf + c d^(-1) with "
    "intervals, and compare e_inf with the continuum state evolution (or the per-teacher "
    "finite-d one where there is no continuum): a finite-size effect or a gap of the "
    "theory? With --store the fits are kept in a resumable store."
)
