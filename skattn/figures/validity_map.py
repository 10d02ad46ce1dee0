"""Validity map: measured gaps to the Gaussian state evolution on other tokens, teachers
and students (beyond the paper's assumptions).

The prediction is always the tied, single-head, Gaussian-token state evolution
(docs: Theory §4). Measured are L-BFGS students (float64) on teachers that break one
assumption at a time: non-Gaussian or anisotropic tokens, a 2-head teacher, an untied or
a 2-head student. :func:`null_error_prediction` gives the α → 0 end with the
fourth-cumulant correction of the diagonal pre-activation.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.special
from threadpoolctl import threadpool_limits

from skattn.data import AttentionIndexedModel, WishartTarget, attention_map, preactivation
from skattn.estimators import TiedAttentionRegressor, UntiedAttentionRegressor
from skattn.figures._common import draw_parameters, figure_dir, save, silent
from skattn.metrics import attention_error
from skattn.plotting import MARKERS, PALETTE, paper_style
from skattn.theory import solve_state_evolution

T, KAPPA0, LAMBDA = 2, 0.5, 0.05


def anisotropic_covariance(d):
    """Diagonal token covariance with eigenvalues evenly spread in [0.5, 1.5].

    Parameters
    ----------
    d : int
        Token dimension.

    Returns
    -------
    C : ndarray of shape (d, d)
        ``diag(linspace(0.5, 1.5, d))``, so ``Tr C = d``.
    """
    return np.diag(np.linspace(0.5, 1.5, d))


#: teacher name -> keyword arguments of AttentionIndexedModel at dimension d. The same
#: seed gives the same S0 for every single-head teacher, so the token laws are compared
#: on paired targets.
TEACHERS = {
    "Gaussian": lambda d: {},
    "Rademacher": lambda d: {"token_distribution": "rademacher"},
    "Student-t, df=5": lambda d: {"token_distribution": "student_t", "token_df": 5.0},
    "Student-t, df=3": lambda d: {"token_distribution": "student_t", "token_df": 3.0},
    "anisotropic C": lambda d: {"token_covariance": anisotropic_covariance(d)},
    "2-head teacher": lambda d: {"n_heads": 2},
}

#: student name -> estimator at a seed; all share λ, width p = d and the L-BFGS solver.
STUDENTS = {
    "tied": lambda seed: TiedAttentionRegressor(reg_lambda=LAMBDA, solver="lbfgs",
                                                dtype="float64", random_state=seed),
    "untied": lambda seed: UntiedAttentionRegressor(reg_lambda=LAMBDA, solver="lbfgs",
                                                    dtype="float64", random_state=seed),
    "2-head": lambda seed: TiedAttentionRegressor(reg_lambda=LAMBDA, solver="lbfgs",
                                                  dtype="float64", random_state=seed,
                                                  n_heads=2),
}

#: the two panel rows: legend label -> (teacher, student, style index into PALETTE and
#: MARKERS); the tied Gaussian reference and the 2-head teacher keep theirs in both rows
TOKEN_CURVES = {
    "Gaussian tokens": ("Gaussian", "tied", 0),
    "Rademacher": ("Rademacher", "tied", 1),
    "Student-t, df = 5": ("Student-t, df=5", "tied", 2),
    "Student-t, df = 3": ("Student-t, df=3", "tied", 3),
    "anisotropic C": ("anisotropic C", "tied", 4),
    "2-head teacher": ("2-head teacher", "tied", 5),
}
STUDENT_CURVES = {
    "tied student": ("Gaussian", "tied", 0),
    "untied student": ("Gaussian", "untied", 7),
    "2-head student": ("Gaussian", "2-head", 1),
    "2-head student, 2-head teacher": ("2-head teacher", "2-head", 5),
}

#: excess kurtosis κ4 = E z⁴ − 3 of the token entries, for the laws with a finite one
EXCESS_KURTOSIS = {"Gaussian": 0.0, "Rademacher": -2.0, "Student-t, df=5": 6.0,
                   "anisotropic C": 0.0}


def measure(teacher, student, d, alpha, seed, *, n_test=4000):
    """Test error of one fitted student and of the oracle ``S = S0``, on one teacher.

    Parameters
    ----------
    teacher : str
        A key of :data:`TEACHERS`.
    student : str
        A key of :data:`STUDENTS`.
    d : int
        Token dimension.
    alpha : float
        Sample ratio; the student sees ``round(alpha d²)`` samples.
    seed : int
        Seeds the teacher (``seed``), the training set (``1000 + seed``), the test set
        (``2000 + seed``) and the student.
    n_test : int, default=4000
        Test samples.

    Returns
    -------
    test_error : float
        Measured test error of the student.
    oracle_error : float
        Error of the first head's ``S0`` through the student's forward model (centring
        with ``Tr S``): 0 for the paper's model; it shows the centring mismatch of
        anisotropic tokens and the misspecification of the 2-head teacher.
    """
    if teacher not in TEACHERS:
        raise ValueError(f"teacher must be one of {list(TEACHERS)}, got {teacher!r}.")
    if student not in STUDENTS:
        raise ValueError(f"student must be one of {list(STUDENTS)}, got {student!r}.")
    model = AttentionIndexedModel(d, n_tokens=T, target=WishartTarget(KAPPA0),
                                  random_state=seed, **TEACHERS[teacher](d))
    X, y = model.sample(int(round(alpha * d * d)), random_state=1000 + seed, layout="tokens")
    X_test, y_test = model.sample(n_test, random_state=2000 + seed, layout="tokens")
    fitted = STUDENTS[student](seed).fit(X, y)
    S0 = model.S0_ if model.n_heads == 1 else model.S0_[0]
    oracle = attention_error(y_test, attention_map(preactivation(X_test, S0), model.beta))
    return attention_error(y_test, fitted.predict(X_test)), oracle


def null_error_prediction(S0, excess_kurtosis, token_covariance=None, beta=1.0):
    """Error of uniform attention (S = 0) at T = 2, with the fourth-cumulant correction.

    The error is ``4 E (sigmoid(β g) − 1/2)²`` with ``g = h11 − h12`` Gaussian of variance
    ``Var h11 + Var h12``; for tokens ``x = C^{1/2} z`` put ``M = C^{1/2} S0 C^{1/2}``:
    ``Var h12 = Tr M²/d`` and ``Var h11 = (2 Tr M² + κ4 Σ_i M_ii²)/d``, κ4 the excess
    kurtosis of the entries of z.

    Parameters
    ----------
    S0 : ndarray of shape (d, d)
        The teacher's matrix.
    excess_kurtosis : float
        κ4 = E z⁴ − 3 of the token entries (0 Gaussian, −2 Rademacher, 6/(df − 4)
        Student-t); at least −2.
    token_covariance : ndarray of shape (d, d), optional
        Diagonal token covariance C; identity when None.
    beta : float, default=1.0
        The teacher's inverse temperature.

    Returns
    -------
    error : float
        Predicted test error of the null predictor (d → ∞).
    """
    S0 = np.asarray(S0, dtype=float)
    if S0.ndim != 2 or S0.shape[0] != S0.shape[1]:
        raise ValueError(f"S0 must be a square matrix, got shape {S0.shape}.")
    if not np.isfinite(excess_kurtosis) or excess_kurtosis < -2:
        raise ValueError(f"excess_kurtosis must be finite and >= -2, got {excess_kurtosis}.")
    d = S0.shape[0]
    if token_covariance is None:
        root = np.ones(d)
    else:
        C = np.asarray(token_covariance, dtype=float)
        if C.shape != (d, d) or np.any(C != np.diag(np.diag(C))):
            raise ValueError(f"token_covariance must be a diagonal ({d}, {d}) matrix.")
        root = np.sqrt(np.diag(C))
    M = root[:, None] * S0 * root[None, :]
    variance = (3 * np.sum(M ** 2) + excess_kurtosis * np.sum(np.diag(M) ** 2)) / d
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)  # ∫ f dN(0,1) = Σ w f/√(2π)
    gap = scipy.special.expit(beta * np.sqrt(variance) * nodes) - 0.5
    return float(4 * np.sum(weights * gap ** 2) / np.sqrt(2 * np.pi))


def _sem(values):
    return np.std(values, ddof=1) / np.sqrt(len(values))


def _measure_all(dimensions, alphas, seeds, n_test, log, t_start):
    """(teacher, student, d, α) -> (mean, sem, oracle mean) for every curve drawn."""
    pairs = dict.fromkeys(curve[:2] for curve in [*TOKEN_CURVES.values(),
                                                  *STUDENT_CURVES.values()])
    measured = {}
    for teacher, student in pairs:
        for d in dimensions:
            for alpha in alphas:
                runs = np.array([measure(teacher, student, d, alpha, seed, n_test=n_test)
                                 for seed in seeds])
                measured[teacher, student, d, alpha] = (runs[:, 0].mean(), _sem(runs[:, 0]),
                                                        runs[:, 1].mean())
        log(f"{student} student, {teacher}: done after {time.perf_counter() - t_start:.0f} s")
    return measured


def _log_null(d, n_test, log):
    """Print the null predictor's error, κ4-corrected prediction against measurement."""
    log(f"null predictor (S = 0) at d = {d}: predicted (κ4-corrected) vs measured")
    for teacher, kurtosis in EXCESS_KURTOSIS.items():
        model = AttentionIndexedModel(d, n_tokens=T, target=WishartTarget(KAPPA0),
                                      random_state=0, **TEACHERS[teacher](d))
        _, y_test = model.sample(n_test, random_state=1, layout="tokens")
        predicted = null_error_prediction(model.S0_, kurtosis, model.token_covariance,
                                          model.beta)
        measured = attention_error(y_test, np.full_like(y_test, 0.5))
        log(f"  {teacher:<17} predicted {predicted:.4f}  measured {measured:.4f}")


def _log_table(measured, predicted, log):
    log(f"{'student':<7} {'teacher / tokens':<17} {'d':>3} {'α':>5} {'predicted':>10} "
        f"{'measured ± sem':>19} {'gap':>7} {'oracle e0':>10}")
    for (teacher, student, d, alpha), (mean, sem, oracle) in measured.items():
        pred = predicted[alpha]
        log(f"{student:<7} {teacher:<17} {d:>3} {alpha:>5} {pred:>10.5f} {mean:>10.5f} ± "
            f"{sem:<7.5f}{(mean / pred - 1) * 100:>+6.1f}% {oracle:>10.5f}")


def _plot_row(axes, curves, measured, predicted, dimensions, alphas, n_seeds):
    offsets = np.linspace(-0.04, 0.04, len(curves))  # spread the points on the log-x axis
    pred = np.array([predicted[a] for a in alphas])
    for ax, d in zip(axes, dimensions):
        ax.axhspan(-5, 5, color="0.9", zorder=0)
        ax.axhline(0, color="0.4", lw=0.8, label="predicted: tied Gaussian SE (±5 %)")
        for i, (label, (teacher, student, style)) in enumerate(curves.items()):
            stats = np.array([measured[teacher, student, d, a][:2] for a in alphas])
            ax.errorbar(np.array(alphas) * np.exp(offsets[i]), (stats[:, 0] / pred - 1) * 100,
                        yerr=stats[:, 1] / pred * 100, color=PALETTE[style], marker=MARKERS[style],
                        ms=4, capsize=2, lw=1, label=f"measured: {label}")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(alphas, [f"{a:g}" for a in alphas])
        ax.set_xlabel(r"$\alpha = n/d^2$")
        ax.set_title(f"d = {d} (measured: mean ± s.e., {n_seeds} seeds)", fontsize=8)


@draw_parameters(quick="d = 16 and 24, two α, two seeds, instead of d = 40 and 80, three α, "
                       "three seeds.",
                 log="Called with progress messages and the tables (default: silent).")
def draw(out_dir=None, *, quick=False, log=None, close=True):
    """Draw the validity map and save ``validity_map.png``.

    Top row: the tied student on non-Gaussian tokens, anisotropic tokens and a 2-head
    teacher. Bottom row: tied, untied and 2-head students on Gaussian tokens, and the
    2-head student on the 2-head teacher. Each point is the measured relative gap
    ``e_test / e_SE − 1`` to the predicted tied Gaussian state evolution.
    """
    import matplotlib.pyplot as plt

    log = log or silent
    out_dir = figure_dir(out_dir)
    if quick:
        dimensions, alphas, seeds, n_test, n_null = [16, 24], [0.3, 0.6], [0, 1], 1000, 20_000
    else:
        dimensions, alphas, seeds, n_test, n_null = [40, 80], [0.15, 0.3, 0.6], [0, 1, 2], \
            4000, 80_000
    t_start = time.perf_counter()

    predicted = {}
    for alpha in alphas:
        result = solve_state_evolution(alpha, reg_lambda=LAMBDA, n_tokens=T,
                                       target=WishartTarget(KAPPA0))
        if not result.converged:
            raise RuntimeError(f"state evolution did not converge at α={alpha}: "
                               f"{result.message}")
        predicted[alpha] = result.test_error
    log(f"state evolution: {len(alphas)} points in {time.perf_counter() - t_start:.0f} s")

    # at these sizes one thread per fit is fastest (and leaves the other cores free)
    with threadpool_limits(limits=1):
        measured = _measure_all(dimensions, alphas, seeds, n_test, log, t_start)
    _log_null(dimensions[-1], n_null, log)
    _log_table(measured, predicted, log)

    with paper_style():
        fig, axes = plt.subplots(2, len(dimensions), figsize=(8.0, 6.4), sharey="row",
                                 constrained_layout=True)
        _plot_row(axes[0], TOKEN_CURVES, measured, predicted, dimensions, alphas, len(seeds))
        _plot_row(axes[1], STUDENT_CURVES, measured, predicted, dimensions, alphas,
                  len(seeds))
        axes[0, 0].set_ylabel("tied student, other tokens / teacher:\n"
                              "test error vs predicted (%)")
        axes[1, 0].set_ylabel("other students, Gaussian tokens:\n"
                              "test error vs predicted (%)")
        for row in axes:
            row[-1].legend(fontsize=6.5, loc="upper left")
        fig.suptitle(f"T = {T} softmax, Wishart κ0 = {KAPPA0}, λ = {LAMBDA}, L-BFGS: "
                     "measured gap to the predicted tied Gaussian state evolution",
                     fontsize=9)
        paths = [save(fig, "validity_map", out_dir, close=close)]
    log(f"saved {paths[0]}; total {time.perf_counter() - t_start:.0f} s")
    return paths
