"""The replay of the stall test in benchmarks/research/solver_trace.py is the solver's own."""

from __future__ import annotations

import numpy as np
import pytest

from skattn.theory.core import iteration


@pytest.fixture(scope="module")
def trace(research):
    return research("solver_trace")


class _Sequence:
    """A map whose residuals are a given sequence (the iterate moves, the map does not)."""

    def __init__(self, residuals):
        self.residuals, self.n_calls = list(residuals), 0

    def __call__(self, x):
        r = self.residuals[min(self.n_calls, len(self.residuals) - 1)]
        self.n_calls += 1
        return np.array([r])


@pytest.mark.parametrize("window", [8, 20])
def test_replay_stops_where_anderson_stops(trace, window):
    rng = np.random.default_rng(window)
    # a descent to a noisy floor of 2e-4 that never reaches tol
    residuals = list(np.geomspace(0.5, 3e-4, 15)) + list(2e-4 * (1 + rng.random(60)))
    seq = _Sequence(residuals)
    stall = {}
    _, best, converged = iteration.anderson(seq, np.zeros(1), tol=1e-9, max_iter=200,
                                            damping=0.5, depth=0, stall=stall,
                                            stall_evals=window)
    assert not converged and "floor" in stall
    stop, best_replay = trace.replay_stall(residuals, window)
    assert stop == seq.n_calls
    assert best_replay == pytest.approx(best)


def test_replay_does_not_fire_above_the_floor_or_while_descending(trace):
    assert trace.replay_stall([2e-2] * 50, 8) == (50, 2e-2)            # above STALL_FLOOR
    falling = list(np.geomspace(5e-4, 1e-9, 40))
    assert trace.replay_stall(falling, 8)[0] == 40
