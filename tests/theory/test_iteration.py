"""The fixed-point iteration's stall detection (skattn/theory/core/iteration.py)."""

import numpy as np

from skattn.theory.core.iteration import STALL_EVALS, STALL_FLOOR, robust_fixed_point


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


def test_no_stall_without_a_floor():
    fp_map = _FloorMap(jump=0.0)
    _, norm, converged = robust_fixed_point(fp_map, np.zeros(2), tol=1e-10,
                                            max_iter=3 * STALL_EVALS, damping=0.5)
    assert converged and norm < 1e-10
    assert fp_map.stall_floor is None
