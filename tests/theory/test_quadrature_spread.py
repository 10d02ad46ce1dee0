"""quadrature_spread: the spread of a prediction over scramblings of its quadrature nodes,
checked against the error it claims to measure (the distance to a far finer quadrature)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import WishartTarget
from skattn.theory import QuadratureSpread, quadrature_spread, solve_state_evolution
from skattn.theory.quadrature_spread import SPREAD_QUANTITIES

MODELS = {
    2: dict(n_tokens=2, reg_lambda=0.02, noise=0.1, beta=2.0, target_beta=2.0,
            target=WishartTarget(0.5)),
    3: dict(n_tokens=3, reg_lambda=0.05, noise=0.1, beta=1.5, target_beta=1.5,
            target=WishartTarget(0.5)),
}
ALPHA = 0.3


def _spread(T, n_nodes, n_replicates, **kwargs):
    options = dict(n_nodes=n_nodes)
    result = solve_state_evolution(ALPHA, options=options, **MODELS[T])
    return quadrature_spread(result, n_replicates, options=options, **kwargs)


@pytest.mark.parametrize("T", [2, 3])
def test_the_spread_is_the_error_of_one_solve(T):
    """On 1024 nodes, the root-mean-square distance of the 8 solves to the mean of 4 solves
    on 32768 nodes (whose own error is 20–50 times smaller) is their standard deviation to
    within a factor of two, and the mean lies within 4 standard errors of it."""
    coarse = _spread(T, 1024, 8)
    fine = _spread(T, 32768, 4)
    assert coarse.converged.all() and fine.converged.all()
    for k in ("test_error", "m", "q", "sigma"):
        distance = coarse.values[k] - fine.mean[k]
        rms = np.sqrt(np.mean(distance ** 2))
        assert 0.5 < rms / coarse.std[k] < 2.0, (k, rms, coarse.std[k])
        se = np.hypot(coarse.standard_error[k], fine.standard_error[k])
        assert abs(coarse.mean[k] - fine.mean[k]) < 4 * se, (k, coarse.mean[k], fine.mean[k])


def test_the_spread_shrinks_with_the_nodes():
    """Eight times the nodes: the spread of every quantity falls at least twofold."""
    coarse, fine = _spread(2, 1024, 6), _spread(2, 8192, 6)
    for k in SPREAD_QUANTITIES:
        assert fine.std[k] < 0.5 * coarse.std[k], (k, coarse.std[k], fine.std[k])


def test_replicates_are_the_solves_at_those_scramblings():
    """The first value is the result's own; the others equal cold solves at random_state
    1, 2, … (the warm start changes the path only), on joblib alike."""
    options = dict(n_nodes=1024, random_state=5)
    result = solve_state_evolution(ALPHA, options=options, **MODELS[2])
    spread = quadrature_spread(result, 3, options=options, n_jobs=2)
    assert spread.random_states == (5, 6, 7)
    assert spread.values["test_error"][0] == result.test_error
    for i, state in enumerate(spread.random_states[1:], start=1):
        cold = solve_state_evolution(ALPHA, options=dict(n_nodes=1024, random_state=state),
                                     **MODELS[2])
        for k in SPREAD_QUANTITIES:
            assert spread.values[k][i] == pytest.approx(getattr(cold, k), rel=1e-5)
    sequential = quadrature_spread(result, 3, options=options)
    for k in SPREAD_QUANTITIES:
        np.testing.assert_array_equal(sequential.values[k], spread.values[k])
    assert "3 scramblings" in str(spread)


def test_bad_input_is_named():
    result = solve_state_evolution(ALPHA, options=dict(n_nodes=256), **MODELS[2])
    with pytest.raises(ValueError, match="n_replicates"):
        quadrature_spread(result, 1)
    with pytest.raises(TypeError, match="StateEvolutionResult"):
        quadrature_spread({"test_error": 1.0})
    with pytest.raises(ValueError, match="correction"):
        quadrature_spread(result, correction="bogus")
    with pytest.raises(ValueError, match="random_state"):
        quadrature_spread(result, 4, options=dict(random_state=2 ** 32 - 2))
    with pytest.raises(ValueError, match="unknown solver option"):
        quadrature_spread(result, options=dict(nodes=3))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=12))
def test_statistics_identities(values):
    """mean, std (ddof 1) and standard error = std/√n as numpy has them; the relative
    spread is std/|mean|."""
    n = len(values)
    spread = QuadratureSpread(random_states=tuple(range(n)),
                              values={k: np.array(values) for k in SPREAD_QUANTITIES},
                              converged=np.ones(n, bool), certified_fraction=np.ones(n))
    assert spread.n_replicates == n
    std = np.std(values, ddof=1)
    assert spread.mean["q"] == pytest.approx(np.mean(values))
    assert spread.std["q"] == pytest.approx(std)
    assert spread.standard_error["q"] == pytest.approx(std / np.sqrt(n))
    mean = abs(np.mean(values))
    if mean > 1e-9:
        assert spread.relative_std["m"] == pytest.approx(std / mean)


def test_a_solve_that_does_not_converge_is_kept_and_named():
    """One evaluation per new solve: it cannot converge; the spread keeps it, flags it and
    warns with its random_state."""
    result = solve_state_evolution(ALPHA, options=dict(n_nodes=256), **MODELS[2])
    with pytest.warns(UserWarning, match=r"random_state \[1\] did not converge"):
        spread = quadrature_spread(result, 2, options=dict(n_nodes=256, max_iter=1))
    np.testing.assert_array_equal(spread.converged, [True, False])
    assert spread.values["test_error"][0] == result.test_error
