"""StateEvolutionProblem: validated once, replace, pickling, and problem vs keyword calls."""

import dataclasses
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import PowerLawTarget, WishartTarget
from skattn.theory import (
    DiscreteLaw,
    StateEvolutionProblem,
    bayes_optimal,
    bayes_optimal_threshold,
    interpolation_threshold,
    optimal_reg_lambda,
    perfect_recovery_threshold,
    solve_state_evolution,
    state_evolution_curve,
)

BASE = dict(target=WishartTarget(0.5), n_tokens=2, reg_lambda=0.01)


@pytest.mark.parametrize("changes, name, error", [
    (dict(n_tokens=1), "n_tokens", ValueError),               # softmax needs T ≥ 2
    (dict(n_tokens=2.5), "n_tokens", TypeError),
    (dict(reg_lambda=-1.0), "reg_lambda", ValueError),
    (dict(reg_lambda=np.nan), "reg_lambda", ValueError),
    (dict(width_ratio=0.0), "width_ratio", ValueError),
    (dict(beta=0.0), "beta", ValueError),
    (dict(target_beta=-1.0), "target_beta", ValueError),
    (dict(noise=-0.1), "noise", ValueError),
    (dict(attention="relu"), "attention", ValueError),
    (dict(task="auto"), "task", ValueError),
    (dict(parametrization="lowrank"), "parametrization", ValueError),
    (dict(n_features=1), "n_features", ValueError),
    (dict(target="wishart"), "target", TypeError),
    (dict(target=PowerLawTarget(1.0)), "n_features", ValueError),   # no d → ∞ law
    (dict(target=DiscreteLaw([1.0, 2.0]), n_features=3), "n_features", ValueError),
])
def test_validation_names_the_argument(changes, name, error):
    with pytest.raises(error, match=name):
        StateEvolutionProblem(**{**BASE, **changes})


def test_values_are_stored_as_python_numbers():
    problem = StateEvolutionProblem(WishartTarget(0.5), n_tokens=np.int64(3),
                                    reg_lambda=np.float32(0.5), n_features=np.int64(40))
    assert type(problem.n_tokens) is int and type(problem.n_features) is int
    assert type(problem.reg_lambda) is float and problem.reg_lambda == 0.5


def test_frozen_and_replace_revalidates():
    problem = StateEvolutionProblem(**BASE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.noise = 0.1
    changed = problem.replace(noise=0.1, attention="linear", n_tokens=1)
    assert (changed.noise, changed.attention, changed.n_tokens) == (0.1, "linear", 1)
    assert problem.noise == 0.0  # the original is untouched
    with pytest.raises(ValueError, match="noise"):
        problem.replace(noise=-1.0)
    with pytest.raises(ValueError, match="n_tokens"):
        problem.replace(n_tokens=1)
    with pytest.raises(ValueError, match="n_tokens"):
        changed.replace(attention="softmax")  # T = 1 is valid for linear only
    with pytest.raises(ValueError, match="alpha"):
        problem.replace(alpha=0.3)  # α is not part of the problem


def test_repr_equality_hash():
    problem = StateEvolutionProblem(**BASE)
    text = repr(problem)
    assert text.startswith("StateEvolutionProblem(target=WishartTarget(")
    assert "reg_lambda=0.01" in text and "noise" not in text  # defaults left out
    assert "noise=0.2" in repr(problem.replace(noise=0.2))
    same = StateEvolutionProblem(WishartTarget(0.5), n_tokens=2, reg_lambda=0.01)
    assert problem == same and hash(problem) == hash(same)
    assert problem != problem.replace(reg_lambda=0.02)
    assert len({problem, same, problem.replace(beta=2.0)}) == 2


@pytest.mark.parametrize("target", [WishartTarget(0.5), PowerLawTarget(1.0, cutoff=5)])
def test_pickle_round_trip(target):
    problem = StateEvolutionProblem(target, n_tokens=3, reg_lambda=0.1, n_features=20,
                                    attention="linear", noise=0.05)
    back = pickle.loads(pickle.dumps(problem))
    assert back == problem and repr(back) == repr(problem)


def test_pieces():
    problem = StateEvolutionProblem(**BASE, width_ratio=4.0)
    assert problem.reg_trace == pytest.approx(2 * 0.01)
    assert problem.replace(parametrization="direct").reg_trace == 0.01
    assert problem.channel().K == 3
    law, eig = problem.target_law()
    assert eig is None and law.second_moment() == pytest.approx(1.5)
    with pytest.raises(ValueError, match="reg_lambda"):
        problem.replace(parametrization="direct", reg_lambda=0.0).denoiser(law)


def _same_result(a, b):
    assert a.as_dict() == b.as_dict()
    assert a.problem == b.problem


@pytest.mark.parametrize("model", [
    dict(n_tokens=1, attention="linear", reg_lambda=0.05, noise=0.1),
    dict(n_tokens=2, reg_lambda=0.01, beta=2.0),
    dict(n_tokens=2, reg_lambda=0.1, parametrization="direct"),
])
def test_problem_and_keywords_give_identical_results(model):
    target = WishartTarget(0.5)
    by_keywords = solve_state_evolution(0.3, target=target, options=dict(n_nodes=1024),
                                        **model)
    problem = StateEvolutionProblem(target, **model)
    by_problem = solve_state_evolution(0.3, problem, options=dict(n_nodes=1024))
    _same_result(by_keywords, by_problem)
    assert by_problem.problem == problem
    assert by_problem.params["reg_lambda"] == model["reg_lambda"]


def test_curve_with_problem_and_lambda_curve():
    problem = StateEvolutionProblem(WishartTarget(0.5), n_tokens=1, attention="linear",
                                    reg_lambda=0.05)
    fast = dict(n_nodes=1024)
    kw = dict(n_tokens=1, attention="linear", target=WishartTarget(0.5), options=fast)
    for a, b in zip(state_evolution_curve([0.2, 0.4], problem, options=fast),
                    state_evolution_curve([0.2, 0.4], reg_lambda=0.05, **kw)):
        _same_result(a, b)
    lams = [0.1, 0.02]
    curve = state_evolution_curve([0.3, 0.3], problem, reg_lambda=lams, options=fast)
    assert [r.problem.reg_lambda for r in curve] == lams
    with pytest.raises(ValueError, match="reg_lambda"):
        state_evolution_curve([0.3], problem, reg_lambda=-1.0, options=fast)


def test_thresholds_and_bayes_accept_a_problem():
    target = WishartTarget(0.3)
    problem = StateEvolutionProblem(target, n_tokens=3, noise=0.2)
    assert interpolation_threshold(problem) == interpolation_threshold(
        n_tokens=3, target=target, noise=0.2)
    assert perfect_recovery_threshold(problem) == perfect_recovery_threshold(
        n_tokens=3, target=target)
    assert bayes_optimal_threshold(problem) == bayes_optimal_threshold(n_tokens=3,
                                                                       target=target)
    a = bayes_optimal(0.05, problem, n_nodes=256)
    b = bayes_optimal(0.05, n_tokens=3, target=target, noise=0.2, n_nodes=256)
    assert a.as_dict() == b.as_dict()


def test_optimal_reg_lambda_accepts_a_problem():
    kw = dict(n_tokens=1, attention="linear", target=WishartTarget(0.5))
    search = dict(n_grid=3, xatol=0.2, n_nodes=512)
    lam_k, res_k = optimal_reg_lambda(0.2, parametrization="direct", **kw, **search)
    problem = StateEvolutionProblem(**kw, parametrization="direct", reg_lambda=123.0)
    lam_p, res_p = optimal_reg_lambda(0.2, problem, **search)
    assert lam_k == lam_p
    _same_result(res_k, res_p)


@pytest.mark.parametrize("call", [
    lambda p: solve_state_evolution(0.3, p, noise=0.1),
    lambda p: solve_state_evolution(0.3, p, reg_lambda=0.1),
    lambda p: state_evolution_curve([0.3], p, noise=0.1),
    lambda p: interpolation_threshold(p, noise=0.1),
    lambda p: perfect_recovery_threshold(p, attention="linear"),
    lambda p: bayes_optimal_threshold(p, n_tokens=3),
    lambda p: bayes_optimal(0.1, p, noise=0.1),
    lambda p: optimal_reg_lambda(0.1, p, parametrization="direct"),
    lambda p: optimal_reg_lambda(0.1, p, noise=0.1),
])
def test_problem_and_model_keyword_is_an_error(call):
    problem = StateEvolutionProblem(**BASE)
    with pytest.raises(ValueError, match=r"problem\.replace\(\w+="):
        call(problem)


def test_missing_model_keywords():
    with pytest.raises(TypeError, match="reg_lambda"):
        solve_state_evolution(0.3, n_tokens=2, target=WishartTarget(0.5))
    with pytest.raises(TypeError, match="target"):
        solve_state_evolution(0.3, n_tokens=2, reg_lambda=0.1)
    with pytest.raises(TypeError, match="problem"):
        solve_state_evolution(0.3, dict(BASE))


@settings(max_examples=30, deadline=None)
@given(noise=st.floats(0, 10), reg_lambda=st.floats(0, 10), beta=st.floats(0.01, 10),
       n_tokens=st.integers(2, 6))
def test_replace_round_trip(noise, reg_lambda, beta, n_tokens):
    problem = StateEvolutionProblem(WishartTarget(0.5), n_tokens=n_tokens)
    changed = problem.replace(noise=noise, reg_lambda=reg_lambda, beta=beta)
    assert changed == StateEvolutionProblem(WishartTarget(0.5), n_tokens=n_tokens,
                                            noise=noise, reg_lambda=reg_lambda, beta=beta)
    assert changed.replace(noise=0.0, reg_lambda=0.0, beta=1.0) == problem
