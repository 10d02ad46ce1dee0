"""Continuation in λ where a cold start finds no fixed point (skattn.theory.core.iteration)."""

import warnings
from dataclasses import dataclass

import numpy as np
import pytest

from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.theory import solve_state_evolution
from skattn.theory.core.iteration import lambda_continuation, solve_or_continue


@dataclass
class _Point:
    reg_lambda: float
    converged: bool
    n_iter: int = 10
    q: float = 1.0
    sigma: float = 1.0
    message: str = ""


class _FakeSolver:
    """Converges cold only for λ ≥ ``cold_min``, warm from any converged neighbour within a
    factor ``reach``; records the calls."""

    def __init__(self, cold_min, reach=4.0, collapse_above=np.inf):
        self.cold_min, self.reach, self.collapse_above = cold_min, reach, collapse_above
        self.calls = []

    def __call__(self, reg_lambda, init):
        self.calls.append((reg_lambda, None if init is None else init.reg_lambda))
        if reg_lambda > self.collapse_above:
            return _Point(reg_lambda, True, q=0.0, sigma=0.0)
        if init is None:
            return _Point(reg_lambda, reg_lambda >= self.cold_min)
        near = (init.converged and reg_lambda > 0 and init.reg_lambda / reg_lambda <= self.reach
                ) or (reg_lambda == 0 and init.reg_lambda <= 1e-3)
        return _Point(reg_lambda, near)


def test_continuation_walks_down_from_the_first_converged_weight_decay():
    solver = _FakeSolver(cold_min=0.05)
    point = lambda_continuation(solver, 1e-3)
    assert point is not None and point.converged and point.reg_lambda == 1e-3
    lams = [lam for lam, _ in solver.calls]
    assert lams[0] == pytest.approx(0.01) and lams[1] == pytest.approx(0.1)  # 10λ fails
    # then down in steps of at most √10, each from the previous point
    down = solver.calls[2:]
    assert all(init == pytest.approx(prev) for (_, init), (prev, _) in zip(down, solver.calls[1:]))
    ratios = np.array([init / lam for lam, init in down])
    assert np.all(ratios <= np.sqrt(10) * (1 + 1e-9))
    assert point.n_iter == 10 * len(solver.calls) and "continuation" in point.message


def test_continuation_reaches_zero_weight_decay_and_stops_at_a_collapsed_start():
    solver = _FakeSolver(cold_min=1e-3)
    point = lambda_continuation(solver, 0.0)
    assert point is not None and point.reg_lambda == 0.0 and point.converged
    # a start that collapsed to S = 0 is no warm start, and a larger λ would collapse too
    solver = _FakeSolver(cold_min=0.0, collapse_above=0.05)
    assert lambda_continuation(solver, 0.01) is None
    assert solver.calls == [(pytest.approx(0.1), None)]


def test_continuation_gives_up_without_a_converged_path():
    solver = _FakeSolver(cold_min=np.inf)
    assert lambda_continuation(solver, 1e-3) is None
    assert [init for _, init in solver.calls] == [None, None]


def test_solve_or_continue_counts_the_failed_start_and_leaves_warm_starts_alone():
    solver = _FakeSolver(cold_min=0.05)
    point = solve_or_continue(solver, 1e-3)
    assert point.converged and point.reg_lambda == 1e-3
    assert point.n_iter == 10 * len(solver.calls)      # the failed cold start included
    warm = _Point(1e-3, False)
    solver = _FakeSolver(cold_min=0.05)
    assert not solve_or_continue(solver, 1e-3, init=warm).converged   # warm: not continued
    assert len(solver.calls) == 1


def test_solve_state_evolution_rejects_a_non_bool_route_flag():
    for name in ("spiked", "exact_gram"):
        with pytest.raises(TypeError, match=name):
            solve_state_evolution(0.3, n_tokens=2, reg_lambda=0.1,
                                  target=WishartTarget(0.5), **{name: "yes"})


def test_solver_falls_back_to_continuation_and_finds_the_warm_started_fixed_point():
    """Linear T = 1 next to the interpolation threshold at λ = 1e-3 (d = 100): for this
    teacher a cold start stalled at a residual of 3e-2 (test error 3.67, returned with
    converged=False). The answer must be the fixed point reached from λ = 0.01."""
    teacher = AttentionIndexedModel(100, n_tokens=1, target=WishartTarget(0.5), noise=0.1,
                                    attention="linear", random_state=1001)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = solve_state_evolution(0.3, target=teacher, reg_lambda=1e-3)
        start = solve_state_evolution(0.3, target=teacher, reg_lambda=1e-2)
        warm = solve_state_evolution(0.3, target=teacher, reg_lambda=1e-3,
                                     options=dict(init=start))
    assert res.converged and warm.converged
    assert res.test_error == pytest.approx(warm.test_error, rel=1e-5)
    assert res.params["reg_lambda"] == 1e-3
