"""Every warning skattn raises points at the caller's line, not inside the package.

skattn._warnings.warn walks out of the package's frames; each test triggers one kind of
warning through a public entry point (several frames deep inside skattn) and checks that
the reported file is this test file.
"""

import os
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skattn import (AsymptoticPredictor, AttentionIndexedModel, PowerLawTarget,
                    TiedAttentionRegressor, WishartTarget, make_attention_indexed)
from skattn._warnings import external_stacklevel, warn
from skattn.theory import DomainWarning, FiniteSizeWarning, solve_state_evolution

HERE = os.path.abspath(__file__)


def _caught(fn, category):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    hits = [w for w in caught if issubclass(w.category, category)]
    assert hits, f"no {category.__name__} raised"
    return hits


def _assert_here(fn, category, match=""):
    hits = [w for w in _caught(fn, category) if match in str(w.message)]
    assert hits, f"no {category.__name__} matching {match!r}"
    for w in hits:
        assert os.path.abspath(w.filename) == HERE, (w.filename, w.lineno, str(w.message))


def test_helper_names_the_first_frame_outside_the_package():
    # called from here, the helper's stacklevel is its caller: this file
    assert external_stacklevel() == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn("x", RuntimeWarning)
    assert os.path.abspath(caught[0].filename) == HERE
    assert caught[0].category is RuntimeWarning


def test_domain_warning_of_the_state_evolution():
    _assert_here(lambda: solve_state_evolution(0.3, target=PowerLawTarget(1.25), n_tokens=2,
                                               reg_lambda=0.1, n_features=100,
                                               attention="linear"),
                 DomainWarning, "spiky target")


def test_finite_size_warning():
    from skattn.theory import StateEvolutionProblem
    from skattn.theory.problem import warn_finite_size

    problem = StateEvolutionProblem(WishartTarget(0.5), n_tokens=2, reg_lambda=1e-3,
                                    n_features=100)
    _assert_here(lambda: warn_finite_size(problem), FiniteSizeWarning, "finite-size effect")


def test_spiked_domain_warning():
    from skattn.theory.spiked import solve_spiked_state_evolution

    _assert_here(lambda: solve_spiked_state_evolution(
        0.1, PowerLawTarget(1.25).eigenvalues(60), reg_lambda=0.05, noise=0.2, n_points=512,
        n_tokens=2), DomainWarning, "noise width")


def test_token_leverage_domain_warning():
    from skattn.theory.token_leverage import solve_token_state_evolution

    teacher = AttentionIndexedModel(20, n_tokens=1, attention="linear",
                                    target=WishartTarget(0.5), noise=0.3, random_state=1)
    _assert_here(lambda: solve_token_state_evolution(0.6, target=teacher, reg_lambda=0.05,
                                                     n_draws=16, n_tokens_mc=800),
                 DomainWarning, "n_features=20")


def test_estimator_warnings():
    X, y = make_attention_indexed(60, 5, random_state=0)
    # ConvergenceWarning (inside fit, behind sklearn's decorators and the atomic-fit wrapper)
    _assert_here(lambda: TiedAttentionRegressor(max_iter=2, device="cpu",
                                                random_state=0).fit(X, y),
                 ConvergenceWarning, "max_iter")
    # rows that do not sum to one
    _assert_here(lambda: TiedAttentionRegressor(max_iter=2, device="cpu",
                                                random_state=0).fit(X, 2 * y),
                 UserWarning, "do not sum to one")
    # float32 with large logits
    _assert_here(lambda: TiedAttentionRegressor(beta=200.0, max_iter=2, device="cpu",
                                                random_state=0).fit(X, y),
                 UserWarning, "float32")


def test_asymptotic_predictor_convergence_warning():
    X, y = make_attention_indexed(60, 5, random_state=0)
    _assert_here(lambda: AsymptoticPredictor(max_iter=1).fit(X, y), ConvergenceWarning,
                 "AMP did not converge")


def test_power_law_curvature_warning():
    from skattn.scaling import fit_power_law

    n = np.geomspace(100, 10000, 7)
    err = 0.3 + 2.5 * n ** -0.6
    _assert_here(lambda: fit_power_law(n, err, e0=0.0), RuntimeWarning, "is curved")


def test_sweep_warnings(tmp_path):
    from skattn.sweep import read_sweep, run_sweep

    out = tmp_path / "sweep.csv"
    run_sweep(_square, {"alpha": [0.5, 1.0], "lam": [0.0], "seed": [0]}, output=out,
              backend="sequential")
    with open(out, "ab") as fh:
        fh.write(b"deadbeef,ok,\n")
    _assert_here(lambda: read_sweep(out), RuntimeWarning, "ignored line")
    for file in tmp_path.glob("sweep.sqlite*"):
        file.unlink()
    _assert_here(lambda: run_sweep(_square, {"alpha": [0.5], "lam": [0.0], "seed": [0]},
                                   output=out, backend="sequential"),
                 UserWarning, "imported")


def _square(alpha, lam, seed):
    return {"value": alpha ** 2 + lam + seed}


def test_every_warning_call_in_the_package_goes_through_the_helper():
    """No ``warnings.warn`` left in skattn outside the helper (a new one would point
    inside the package again)."""
    import pathlib

    package = pathlib.Path(HERE).parents[2] / "skattn"
    offenders = [str(p.relative_to(package)) for p in package.rglob("*.py")
                 if p.name != "_warnings.py" and "warnings.warn(" in p.read_text()]
    assert offenders == []
