"""The fixed-point iterations (skattn/theory/core/iteration.py): stall detection, Powell's
hybrid method."""

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import pytest

from skattn.theory.core.fixed_point_map import POLISH_STALL_EVALS
from skattn.theory.core.iteration import (STALL_EVALS, STALL_FLOOR, _gives_up,
                                          forward_differences, powell_hybrid,
                                          robust_fixed_point)


class _FloorMap:
    """``x ↦ x + r(x)`` contracting to ``x_star``, plus a jump of ``jump`` towards it that
    flips at ``x_star``: every point has a residual of at least ``jump`` (the state-evolution
    map where a node's minimiser switches, in miniature)."""

    def __init__(self, jump=2e-4):
        self.x_star = np.array([0.3, -0.7])
        self.jump = jump
        self.n_calls = 0
        self.stall_floor = None

    def residual(self, x):
        self.n_calls += 1
        return 0.5 * (self.x_star - x) + self.jump * np.sign(self.x_star - x)


def test_a_floor_is_found_within_a_small_budget():
    # a budget of 1.8 × STALL_EVALS split over the stages (half to the first, a quarter
    # to the next, ...): no stage alone is long enough to see the floor, all together are
    fp_map = _FloorMap()
    budget = int(1.8 * STALL_EVALS)
    x, norm, converged = robust_fixed_point(fp_map, np.zeros(2), tol=1e-7,
                                            max_iter=budget, damping=0.5)
    assert not converged
    assert fp_map.stall_floor is not None
    assert fp_map.stall_floor == norm < STALL_FLOOR
    assert fp_map.n_calls < budget        # it stopped there, with budget left over
    assert np.max(np.abs(x - fp_map.x_star)) < 1e-3


def test_a_shorter_stall_window_stops_sooner_at_the_same_floor():
    # the certified polish's window (POLISH_STALL_EVALS): fewer evaluations, and the floor
    # it reports is that of the full window within the jump's scale
    full, short = _FloorMap(), _FloorMap()
    robust_fixed_point(full, np.zeros(2), tol=1e-7, max_iter=200, damping=0.5)
    robust_fixed_point(short, np.zeros(2), tol=1e-7, max_iter=200, damping=0.5,
                       stall_evals=POLISH_STALL_EVALS)
    assert full.stall_floor is not None and short.stall_floor is not None
    assert short.n_calls < full.n_calls
    assert short.stall_floor < 2 * full.stall_floor


def test_a_converging_iteration_is_not_cut_by_the_short_window():
    fp_map = _FloorMap(jump=0.0)
    _, norm, converged = robust_fixed_point(fp_map, np.zeros(2), tol=1e-10, max_iter=100,
                                            damping=0.5, stall_evals=POLISH_STALL_EVALS)
    assert converged and norm < 1e-10
    assert fp_map.stall_floor is None


def test_no_stall_without_a_floor():
    fp_map = _FloorMap(jump=0.0)
    _, norm, converged = robust_fixed_point(fp_map, np.zeros(2), tol=1e-10,
                                            max_iter=3 * STALL_EVALS, damping=0.5)
    assert converged and norm < 1e-10
    assert fp_map.stall_floor is None


def test_giving_up_ends_the_stages_at_any_level_without_a_floor():
    # a jump of 2e-2, above STALL_FLOOR: no stall is detected there, so without a
    # give-up window the stages run the whole budget; with one they end after about that
    # many evaluations without progress, and record no floor (the warm map's cycling is
    # no floor of the map whose fixed point is reported)
    budget = 40
    plain, giving_up = _FloorMap(jump=2e-2), _FloorMap(jump=2e-2)
    _, plain_norm, _ = robust_fixed_point(plain, np.zeros(2), tol=1e-7, max_iter=budget,
                                          damping=0.5)
    _, norm, converged = robust_fixed_point(giving_up, np.zeros(2), tol=1e-7,
                                            max_iter=budget, damping=0.5, give_up_evals=10)
    assert plain.n_calls >= budget and plain.stall_floor is None
    assert not converged and norm > STALL_FLOOR
    assert giving_up.stall_floor is None
    assert giving_up.n_calls < budget
    assert norm < 1.1 * plain_norm          # it gave up at the level the full budget reached


def test_giving_up_counts_from_the_first_gain_on_the_start():
    # Anderson's first steps from a good start can rise for a while (a T = 6 grid point:
    # 16 evaluations above its start, then converged): no give-up before the first gain
    assert not _gives_up([1e-3] * 30, 10)
    assert not _gives_up([1e-2] + [5e-3] * 10, 10)          # 9 evaluations since the gain
    assert _gives_up([1e-2] + [5e-3] * 11, 10)
    assert _gives_up([1e-2] * 8 + [5e-3] * 11, 10)
    assert not _gives_up([1e-2] * 8 + [5e-3] * 10 + [4e-3], 10)   # 20 % within the window


@settings(max_examples=50, deadline=None)
@given(st.floats(1e-8, 1.0), st.floats(0.5, 0.98), st.integers(3, 12), st.integers(1, 60))
def test_a_steady_gain_never_gives_up(start, ratio, window, length):
    # a best residual that shrinks by ``ratio`` per evaluation gains 10 % within any
    # window where ratio**window < 0.9
    assume(ratio ** window < 0.9)
    assert not _gives_up(list(start * ratio ** np.arange(length)), window)


@settings(max_examples=20, deadline=None)
@given(st.floats(0.1, 0.9), st.integers(3, 12))
def test_giving_up_does_not_cut_a_converging_iteration(damping, give_up_evals):
    # a contraction by 1 − damping/2 per step gains 10 % within every few evaluations
    fp_map = _FloorMap(jump=0.0)
    _, norm, converged = robust_fixed_point(fp_map, np.zeros(2), tol=1e-10, max_iter=400,
                                            damping=damping, give_up_evals=give_up_evals)
    assert converged and norm < 1e-10


# --- Powell's hybrid method (the coarse stage) ---------------------------------------

class _LinearMap:
    """``residual(x) = (A − I)(x − x_star)``, undefined (None) where ``x[0] < undefined_below``."""

    def __init__(self, A, x_star, undefined_below=-np.inf):
        self.A, self.x_star = np.asarray(A, float), np.asarray(x_star, float)
        self.undefined_below = undefined_below
        self.n_calls = 0

    def residual(self, x):
        self.n_calls += 1
        if x[0] < self.undefined_below:
            return None
        return (self.A - np.eye(len(x))) @ (x - self.x_star)


# x ← x + r(x) diverges (an eigenvalue 2.5 of the map's Jacobian)
_STIFF = np.array([[2.5, 0.4, 0.0], [0.0, 0.9, 0.3], [0.0, 0.0, -0.6]])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=3, max_size=3),
       st.lists(st.floats(-3, 3), min_size=3, max_size=3))
def test_powell_hybrid_solves_a_linear_map_in_a_few_evaluations(x_star, x0):
    # linear: the forward-difference Jacobian is exact, so one Newton step (1 + 3
    # evaluations for the Jacobian, one for the step) lands on the root, also from a
    # start with coordinates at or near 0 (steps relative to max(1, |x_j|))
    fp_map = _LinearMap(_STIFF, x_star)
    x, norm, converged = powell_hybrid(fp_map, np.array(x0), tol=1e-9, max_iter=50)
    assert converged and norm < 1e-9
    np.testing.assert_allclose(x, x_star, atol=1e-8)
    assert fp_map.n_calls <= 8


def test_powell_hybrid_stops_within_its_budget_and_where_the_map_is_undefined():
    fp_map = _LinearMap(_STIFF, [1.0, 2.0, 3.0])
    fp_map.n_calls = 7                  # evaluations already spent count against max_iter
    _, _, converged = powell_hybrid(fp_map, np.zeros(3), tol=1e-9, max_iter=9)
    assert not converged and fp_map.n_calls == 9
    # the root lies where the map is undefined: the best defined point is returned
    fp_map = _LinearMap(_STIFF, [-1.0, 2.0, 3.0], undefined_below=-0.5)
    x, norm, converged = powell_hybrid(fp_map, np.zeros(3), tol=1e-9, max_iter=50)
    assert not converged and np.isfinite(norm) and x[0] >= -0.5
    assert fp_map.n_calls < 50


def test_forward_differences_are_the_jacobian_of_a_linear_map():
    fp_map = _LinearMap(_STIFF, [1.0, 2.0, 3.0])
    x = np.array([0.0, 1e-9, 250.0])        # steps relative to max(1, |x_j|)
    dX, dR = forward_differences(fp_map.residual, x)
    np.testing.assert_allclose(dR @ np.linalg.inv(dX), _STIFF - np.eye(3), atol=1e-6)
    assert dX[2, 2] == pytest.approx(250 * dX[0, 0]) and dX[1, 1] == dX[0, 0]
    # undefined at a shifted point: None
    assert forward_differences(_LinearMap(_STIFF, [0, 0, 0], undefined_below=0.0).residual,
                               np.array([-1e-5, 0.0, 0.0])) is None


def test_the_polish_stall_window_is_short_except_near_the_clip():
    from skattn.theory.channels import SoftmaxChannel
    from skattn.theory.core.fixed_point_map import FixedPointMap, polish_stall_window

    fp_map = FixedPointMap(0.3, SoftmaxChannel(3, beta=3.5), None, 1.0, 0.0, None, "stein")
    off = fp_map.to_x(0.5, 1.0, 1.0)           # overlap m²/(q Q0) = 0.25
    near = fp_map.to_x(0.999, 1.0, 1.0)        # overlap 0.998: the plain variables are jagged
    assert polish_stall_window(fp_map, off, certified=False) == POLISH_STALL_EVALS
    assert polish_stall_window(fp_map, near, certified=False) == STALL_EVALS
    assert polish_stall_window(fp_map, near, certified=True) == POLISH_STALL_EVALS
