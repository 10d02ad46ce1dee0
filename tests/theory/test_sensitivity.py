"""The first-order effect of uncertified prox minimisers on the prediction
(skattn/theory/core/sensitivity.py): its sensitivity of the fixed point to the conjugates is
checked against solves with the output side shifted, and its wiring (result extras, the
predictor's warning, the channel's memory) against solves without it."""

import dataclasses
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import skattn.theory.core.fixed_point_map as fixed_point_map_module
import skattn.theory.core.solve as solve_module
from skattn import AsymptoticPredictor
from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.theory import UncertifiedWarning, solve_state_evolution
from skattn.theory.channels import remembered_minimisers
from skattn.theory.core.sensitivity import fixed_point_sensitivity, uncertified_effect
from skattn.theory.problem import warn_uncertified

# T = 2 at β = 1.5: a smooth map (no floor), so that shifted solves resolve first-order moves
MODEL = dict(n_tokens=2, reg_lambda=0.01, noise=0.1, beta=1.5, target_beta=1.5,
             target=WishartTarget(0.5))
OPTIONS = dict(n_nodes=2048, tol=1e-9)
ALPHA = 0.5


@pytest.fixture
def uncertified(monkeypatch, without_certificate):
    """Channels without the certificate (every node uncertified, so the solver estimates
    the effect); the sensitivity is captured."""
    captured = {}

    def effect(fixed_point_map, state, out, bound, test_error_at):
        channel, nodes = fixed_point_map.channel, fixed_point_map.nodes
        captured["memory"] = remembered_minimisers(channel, nodes).copy()
        captured["sensitivity"] = fixed_point_sensitivity(fixed_point_map, state, out,
                                                          test_error_at)
        result = uncertified_effect(fixed_point_map, state, out, bound, test_error_at)
        captured["memory_after"] = remembered_minimisers(channel, nodes)
        return result

    monkeypatch.setattr(solve_module, "uncertified_effect", effect)
    return captured


def _shifted_solve(monkeypatch, base, key, shift):
    """The fixed point with the output side's ``key`` shifted by ``shift`` everywhere."""
    output_side = fixed_point_map_module.output_side

    def shifted(*args, **kwargs):
        out = output_side(*args, **kwargs)
        changes = {key: getattr(out, key) + shift}
        if key == "sigma_hat":
            changes["sigma_hat_stein"] = out.sigma_hat_stein + shift
        return dataclasses.replace(out, **changes)

    with monkeypatch.context() as patch:
        patch.setattr(fixed_point_map_module, "output_side", shifted)
        result = solve_state_evolution(ALPHA, **MODEL, options=dict(OPTIONS, init=base))
    assert result.converged
    return np.array([result.m - base.m, result.q - base.q, result.sigma - base.sigma,
                     result.test_error - base.test_error])


def test_sensitivity_matches_shifted_solves(uncertified, monkeypatch):
    base = solve_state_evolution(ALPHA, **MODEL, options=OPTIONS)
    assert base.converged and base.certified_fraction < 1
    S = uncertified["sensitivity"]
    assert S.shape == (4, 3) and np.all(np.isfinite(S))
    for j, key in enumerate(("m_hat", "q_hat", "sigma_hat")):
        shift = 0.002 * abs(getattr(base, key))
        moved = _shifted_solve(monkeypatch, base, key, shift)
        predicted = S[:, j] * shift
        # m, q, Σ: first order to within the curvature of a 0.2 % shift
        np.testing.assert_allclose(moved[:3], predicted[:3], rtol=0.06)
        # the test error (one of its columns nearly cancels): against the scale of its
        # first-order moves over the three conjugates
        scale = np.max(np.abs(S[3] * 0.002 * np.abs([base.m_hat, base.q_hat,
                                                       base.sigma_hat])))
        assert abs(moved[3] - predicted[3]) <= 0.1 * scale


def test_effect_is_the_bound_through_the_sensitivity(uncertified):
    result = solve_state_evolution(ALPHA, **MODEL, options=OPTIONS)
    bound, effect = result.extras["uncertified_bound"], result.extras["uncertified_effect"]
    b = np.array([bound["m_hat"], bound["q_hat"], bound["sigma_hat_stein"]])
    assert np.all(b > 0)
    expected = np.abs(uncertified["sensitivity"]) @ b
    assert [effect[k] for k in ("m", "q", "sigma", "test_error")] == \
        pytest.approx(expected, rel=1e-5)   # the differences repeat to Newton's tolerance


def test_effect_leaves_the_solve_unchanged(uncertified, monkeypatch):
    # the differences run warm on a prefix of the nodes and restore the channel's memory:
    # the reported fixed point and its values are those of a solve without them
    with_effect = solve_state_evolution(ALPHA, **MODEL, options=OPTIONS)
    monkeypatch.setattr(solve_module, "uncertified_effect", lambda *args: {})
    without = solve_state_evolution(ALPHA, **MODEL, options=OPTIONS)
    for key in ("m", "q", "sigma", "m_hat", "q_hat", "sigma_hat", "test_error",
                "train_error"):
        assert getattr(with_effect, key) == getattr(without, key)
    assert without.extras["uncertified_effect"] is None     # not estimated
    # and the channel remembers the fixed point's minimisers on all nodes, as before
    np.testing.assert_array_equal(uncertified["memory_after"], uncertified["memory"])


def test_certified_results_carry_zero_effect():
    result = solve_state_evolution(ALPHA, **MODEL, options=OPTIONS)
    assert result.certified_fraction == 1.0
    assert result.extras["uncertified_effect"] == {"m": 0.0, "q": 0.0, "sigma": 0.0,
                                                   "test_error": 0.0}
    linear = solve_state_evolution(ALPHA, **dict(MODEL, attention="linear"),
                                   options=OPTIONS)
    assert linear.extras["uncertified_effect"] == result.extras["uncertified_effect"]


def test_effect_edge_cases():
    # ∞ bounds give ∞, zero bounds zero, the pointwise Σ̂ (no bound for its shift) nothing
    stein = dataclasses.make_dataclass("Map", [("sigma_hat_form", str)])("stein")
    pointwise = dataclasses.replace(stein, sigma_hat_form="pointwise")
    zero = dict(m_hat=0.0, q_hat=0.0, sigma_hat_stein=0.0)
    assert uncertified_effect(stein, None, None, zero, None) == \
        {"m": 0.0, "q": 0.0, "sigma": 0.0, "test_error": 0.0}
    assert set(uncertified_effect(stein, None, None, dict(zero, m_hat=np.inf), None)
               .values()) == {np.inf}
    assert uncertified_effect(pointwise, None, None, dict(zero, m_hat=1.0), None) == {}
    assert uncertified_effect(stein, None, None, {"m_hat": 1.0}, None) == {}


def _predictor_fit():
    teacher = AttentionIndexedModel(20, n_tokens=2, target=WishartTarget(0.5), beta=1.5,
                                    noise=0.1, random_state=0)
    X, y = teacher.sample(int(ALPHA * 20 ** 2), random_state=1, layout="tokens")
    predictor = AsymptoticPredictor(n_tokens=2, beta=1.5, target_beta=1.5, noise=0.1,
                                    reg_lambda=0.01, target=WishartTarget(0.5),
                                    correction="none", n_nodes=2048, tol=1e-9)
    return predictor.fit(X, y)


def test_predictor_warns_where_the_effect_is_large(uncertified):
    with pytest.warns(UncertifiedWarning, match="not certified global.*to first order"):
        predictor = _predictor_fit()
    effect = predictor.state_.extras["uncertified_effect"]
    assert effect["test_error"] > 0.01 * predictor.predicted_test_error_


def test_predictor_quiet_where_every_node_is_certified():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncertifiedWarning)
        predictor = _predictor_fit()
    assert predictor.state_.certified_fraction == 1.0


@pytest.mark.parametrize("effect, warns", [(None, False), ({}, False),
                                           ({"test_error": 0.009}, False),
                                           ({"test_error": 0.011}, True),
                                           ({"test_error": np.inf}, True)])
def test_warning_only_where_an_estimated_effect_is_large(effect, warns):
    # silent where no effect was estimated (the exact-Gram multi-start is never certified)
    result = SimpleNamespace(certified_fraction=0.99, test_error=-1.0,
                             extras={"uncertified_effect": effect})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert warn_uncertified(result, "caller") is warns
    assert [w.category for w in caught] == ([UncertifiedWarning] if warns else [])


# T = 3 at β ≈ 3.1 on 1024 nodes: the iteration stops at a floor of the quadrature's
# resolution (minimisers switching between evaluations) with one node uncertified
FLOOR_MODEL = dict(n_tokens=3, reg_lambda=0.01918, noise=0.445, beta=3.082,
                   target_beta=3.082, target=WishartTarget(0.914))
FLOOR_ALPHA = 0.289


def test_the_effect_is_estimated_at_a_floor_not_after_a_spent_budget():
    """A solve that stopped at a floor is as near its fixed point as its nodes allow: its
    uncertified nodes' effect is estimated there. One that ran out of evaluations is not."""
    floor = solve_state_evolution(FLOOR_ALPHA, **FLOOR_MODEL,
                                  options=dict(n_nodes=1024, max_iter=80))
    assert not floor.converged and floor.extras.get("stall_floor") is not None
    assert floor.certified_fraction < 1.0
    effect = floor.extras["uncertified_effect"]
    assert set(effect) == {"m", "q", "sigma", "test_error"}
    assert all(np.isfinite(v) and v >= 0 for v in effect.values())
    assert effect["test_error"] > 0
    spent = solve_state_evolution(FLOOR_ALPHA, **FLOOR_MODEL,
                                  options=dict(n_nodes=1024, max_iter=40))
    assert not spent.converged and "stall_floor" not in spent.extras
    assert spent.certified_fraction < 1.0
    assert spent.extras["uncertified_effect"] is None
