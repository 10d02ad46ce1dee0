"""benchmarks/research/solver_rules.py switches each rule off through the library's public
names, and reruns a point only where a rule applied (elsewhere the path is the same)."""

from __future__ import annotations

import numpy as np
import pytest

from skattn.theory.channels import SoftmaxChannel, _kernels
from skattn.theory.core import fixed_point_map, solve
from skattn.theory.core.iteration import STALL_EVALS


@pytest.fixture(scope="module")
def rules(research):
    return research("solver_rules")


class _Map:
    """The part of a fixed-point map the two iteration rules read: plain (m, q)."""

    orthogonal, n_calls, Q0 = False, 70, 1.0

    def from_x(self, x):
        return tuple(x)


def test_each_switch_turns_its_rule_off_and_restores_it(rules):
    near_clip = np.array([np.sqrt(0.99 * 2.0), 2.0])       # m² = 0.99 q Q0
    assert fixed_point_map.polish_stall_window(_Map(), near_clip, True) < STALL_EVALS
    with rules._switched_off("polish_stall_window"):
        assert fixed_point_map.polish_stall_window(_Map(), near_clip, True) == STALL_EVALS
    with rules._switched_off("handover_orthogonal"):
        x = near_clip.copy()
        out = solve._handover_orthogonal(_Map(), x, 1e-6, tol=1e-8, max_iter=100, damping=1)
        assert out[0] is x and out[2] is False               # not taken, however close
    recovery = np.array([np.sqrt(0.995 * 2.0), 2.0])
    at_recovery = fixed_point_map.handover_orthogonal_threshold(_Map(), recovery)
    assert at_recovery > fixed_point_map.HANDOVER_ORTHOGONAL_RESIDUAL
    with rules._switched_off("orthogonal_at_recovery"):
        assert fixed_point_map.handover_orthogonal_threshold(_Map(), recovery) == \
            fixed_point_map.HANDOVER_ORTHOGONAL_RESIDUAL
    with rules._switched_off("shell_starts"):
        assert SoftmaxChannel(3).shell_starts == 0
    assert SoftmaxChannel(3).shell_starts > 0
    with rules._switched_off("split_rounds"):
        assert SoftmaxChannel(4).split_rounds == 0
    assert SoftmaxChannel(4).split_rounds > 0
    with rules._switched_off("multistart_memory"):
        assert not SoftmaxChannel(4).multistart_memorable
    assert SoftmaxChannel(4).multistart_memorable == _kernels.HAVE_NUMBA
    assert solve.handover_orthogonal_threshold(_Map(), near_clip) > 0
    assert fixed_point_map.WARM_GIVE_UP_EVALS is not None
    with rules._switched_off("warm_give_up"):
        assert fixed_point_map.WARM_GIVE_UP_EVALS is None
    assert fixed_point_map.polishes_certified_once(SoftmaxChannel(4)) == _kernels.HAVE_NUMBA
    assert not fixed_point_map.polishes_certified_once(SoftmaxChannel(2))
    with rules._switched_off("one_certified_polish"):
        assert not fixed_point_map.polishes_certified_once(SoftmaxChannel(4))
    with pytest.raises(ValueError, match="rule must be one of"):
        rules._switched_off("warm_start")


@pytest.mark.parametrize("n_tokens, applied, expected", [
    (2, {"handover_orthogonal": 0, "polish_stall_window": 0}, []),
    (2, {"handover_orthogonal": 0, "polish_stall_window": 1}, ["polish_stall_window"]),
    (4, {"handover_orthogonal": 0, "polish_stall_window": 0}, ["shell_starts", "split_rounds"]),
    (6, {"handover_orthogonal": 1, "polish_stall_window": 0},
     ["handover_orthogonal", "split_rounds"]),
    (3, {"handover_orthogonal": 1, "orthogonal_at_recovery": 1},
     ["handover_orthogonal", "orthogonal_at_recovery", "shell_starts", "split_rounds"]),
    (2, {"warm_give_up": 1, "one_certified_polish": 0}, ["warm_give_up"]),
    (6, {"warm_give_up": 0, "one_certified_polish": 2},
     ["one_certified_polish", "split_rounds"]),
])
def test_a_point_is_rerun_only_for_the_rules_that_applied(rules, n_tokens, applied,
                                                          expected):
    assert rules.arms_to_run(n_tokens, {"applied": applied}) == expected
    assert rules.arms_to_run(n_tokens, {"applied": applied}, forced=True) == list(rules.RULES)
    assert "shell_starts" not in rules.arms_to_run(n_tokens, {"applied": applied},
                                                   rules=("handover_orthogonal",))


@pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="needs numba")
@pytest.mark.parametrize("rule, n_tokens, seed, point", [
    ("warm_give_up", 2, 1, 4), ("one_certified_polish", 3, 0, 5)])
def test_the_new_rules_are_seen_to_apply_and_switch_off(rules, rule, n_tokens, seed, point):
    # the grid points each rule was chosen on: the landed arm records it, the arm without
    # it takes more evaluations to the same fixed point
    config = rules.grid_configurations(n_tokens, 6, seed)[point]
    landed = rules.solve_arm(config, "landed", 8192, 150, rules=(rule,))
    off = rules.solve_arm(config, rule, 8192, 150)
    assert set(landed["applied"]) == {rule} and landed["applied"][rule] >= 1
    assert off["applied"] is None
    assert landed["converged"] and off["converged"]
    assert landed["n_iter"] != off["n_iter"]
    assert landed["test_error"] == pytest.approx(off["test_error"], rel=1e-6)
