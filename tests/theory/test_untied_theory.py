"""Does untied ERM on a symmetric (PSD) target learn a symmetric S? (measured)

For each (α, λ, d) the untied and the tied regressors are fitted by L-BFGS in float64 on
the same data (softmax, T = 2, Wishart(0.5) target, no label noise) and compared at their
minima; the tied state evolution (docs/theory.rst §3) gives the predicted test error. The
verdict the slow test asserts, and the whole table, are on docs/dynamics.rst; run this
file as a script (``python tests/theory/test_untied_theory.py [alphas lambdas ds attention]``,
comma-separated lists) to print the full grid.
"""

import functools
import itertools
import sys
import time
import warnings

import numpy as np
import pytest

from skattn import AttentionIndexedModel, WishartTarget
from skattn.estimators import TiedAttentionRegressor, UntiedAttentionRegressor
from skattn.metrics import attention_error
from skattn.theory import solve_state_evolution

T = 2
N_TEST = 4000
FIT = dict(width=1.0, solver="lbfgs", dtype="float64", tol=1e-10, n_iter_no_change=20,
           max_iter=4000, device="cpu")


@functools.lru_cache(maxsize=None)
def _se_test_error(alpha, reg_lambda, attention):
    # the d -> infinity prediction does not depend on d: solve it once per (alpha, lambda)
    return float(solve_state_evolution(alpha, n_tokens=T, reg_lambda=reg_lambda,
                                       target=WishartTarget(0.5),
                                       attention=attention).test_error)


def measure(alpha, reg_lambda, d, seed=0, attention="softmax"):
    """Fit tied and untied on one draw; the symmetry and error statistics as a dict."""
    teacher = AttentionIndexedModel(d, n_tokens=T, target=WishartTarget(0.5),
                                    attention=attention, random_state=seed)
    n = int(round(alpha * d * d))
    X, y = teacher.sample(n, random_state=seed + 1, layout="tokens")
    X_test, y_test = teacher.sample(N_TEST, random_state=seed + 2, layout="tokens")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence is reported in the row instead
        tied = TiedAttentionRegressor(reg_lambda=reg_lambda, attention=attention,
                                      random_state=seed, **FIT)
        tied.fit(X, y)
        untied = UntiedAttentionRegressor(reg_lambda=reg_lambda, attention=attention,
                                          random_state=seed, **FIT)
        untied.fit(X, y)
    S = untied.S_
    sym = (S + S.T) / 2
    eig = np.linalg.eigvalsh(sym)
    return dict(
        alpha=alpha, reg_lambda=reg_lambda, d=d, n=n,
        asym=float(np.linalg.norm(S - S.T) / np.linalg.norm(S)),
        min_eig_sym=float(eig[0]), max_eig_sym=float(eig[-1]),
        neg_mass=float(np.sum(np.abs(eig[eig < 0])) / np.sum(np.abs(eig))),
        obj_untied=untied.train_objective_, obj_tied=tied.train_objective_,
        test_untied=attention_error(y_test, untied.predict(X_test)),
        test_tied=attention_error(y_test, tied.predict(X_test)),
        test_se=_se_test_error(alpha, reg_lambda, attention),
        conv_tied=tied.converged_, conv_untied=untied.converged_,
        iters=(tied.n_iter_, untied.n_iter_),
    )


def _row(r):
    return (f"a={r['alpha']:.1f} lam={r['reg_lambda']:<5g} d={r['d']:3d} "
            f"asym={r['asym']:.3f} mineig(sym)={r['min_eig_sym']:+.3f} "
            f"negmass={r['neg_mass']:.3f} "
            f"obj u-t={r['obj_untied'] - r['obj_tied']:+.2e} (t={r['obj_tied']:.4e}) "
            f"test u={r['test_untied']:.4f} t={r['test_tied']:.4f} se={r['test_se']:.4f} "
            f"conv={r['conv_tied']},{r['conv_untied']} it={r['iters']}")


@pytest.mark.slow
@pytest.mark.parametrize("d", [30, 50])
def test_untied_minimum_on_symmetric_target_is_not_symmetric(d):
    """The measured verdict (docs/dynamics.rst): with softmax the untied minimum is not
    symmetric, its symmetric part is not PSD, it reaches a lower objective than the tied
    one and generalises worse; the asymmetry falls as α grows. Tolerances are a factor
    of ~2 to ~10 inside the measured ranges (asymmetry 0.13–0.99, minimum eigenvalue
    −0.02 to −0.78, objective gap ≥ 1.6 %, untied/tied test error 1.1–4.8)."""
    rows = [measure(alpha, 0.1, d) for alpha in (0.1, 0.6)]
    for r in rows:
        assert r["conv_tied"] and r["conv_untied"], r
        assert r["asym"] > 0.1, r
        assert r["min_eig_sym"] < -0.01, r
        # a relaxation: below the tied minimum by more than the optimisation tolerance
        assert r["obj_untied"] < r["obj_tied"] * (1 - 5e-3), r
        assert r["test_untied"] > 1.05 * r["test_tied"], r
        # the tied state evolution does predict the tied fit
        assert r["test_tied"] == pytest.approx(r["test_se"], rel=0.25), r
    assert rows[1]["asym"] < 0.6 * rows[0]["asym"]


@pytest.mark.slow
def test_untied_minimum_with_linear_attention_is_symmetric():
    """Linear attention (seq2lab): h -> hᵀ is a symmetry and the problem is convex, so the
    minimiser is symmetric; it is the tied one where it is PSD (α = 0.6) and has negative
    eigenvalues, a lower objective and a worse test error where it is not (α = 0.1).
    Measured at d = 30: asymmetry <= 1e-3; at α = 0.6 objectives equal to 1e-12."""
    low, high = (measure(alpha, 0.1, 30, attention="linear") for alpha in (0.1, 0.6))
    for r in (low, high):
        assert r["conv_tied"] and r["conv_untied"], r
        assert r["asym"] < 1e-2, r
    assert high["min_eig_sym"] > -1e-3 * high["max_eig_sym"], high
    assert high["obj_untied"] == pytest.approx(high["obj_tied"], rel=1e-6), high
    assert high["test_untied"] == pytest.approx(high["test_tied"], rel=1e-3, abs=1e-6), high
    assert low["min_eig_sym"] < -0.1, low
    assert low["obj_untied"] < low["obj_tied"] * (1 - 5e-3), low
    assert low["test_untied"] > 1.2 * low["test_tied"], low


if __name__ == "__main__":
    alphas = [float(a) for a in sys.argv[1].split(",")] if len(sys.argv) > 1 else (0.1, 0.3, 0.6)
    lams = [float(a) for a in sys.argv[2].split(",")] if len(sys.argv) > 2 else (0.01, 0.1)
    ds = [int(a) for a in sys.argv[3].split(",")] if len(sys.argv) > 3 else (30, 50, 80)
    attention = sys.argv[4] if len(sys.argv) > 4 else "softmax"
    for d, alpha, lam in itertools.product(ds, alphas, lams):
        t0 = time.perf_counter()
        print(_row(measure(alpha, lam, d, attention=attention)),
              f"{time.perf_counter() - t0:.1f}s", flush=True)
