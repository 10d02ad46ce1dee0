"""After a failed handover near the edge of perfect recovery, the orthogonal variables are
tried before the original starts (``skattn.theory.core.solve._handover_orthogonal``)."""

import sys
import pathlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skattn.theory.core import fixed_point_map
from skattn.theory.core import solve as solve_module
from skattn.theory.core.fixed_point_map import (CLIP_OVERLAP, HANDOVER_CALLS,
                                                HANDOVER_ORTHOGONAL_RESIDUAL,
                                                HANDOVER_ORTHOGONAL_RESIDUAL_AT_RECOVERY,
                                                RECOVERY_OVERLAP,
                                                handover_orthogonal_threshold)
from skattn.theory.channels import _kernels


class _Map:
    """The part of a fixed-point map the rule reads: plain variables are (m, q)."""

    def __init__(self, orthogonal=False, n_calls=70, Q0=1.0):
        self.orthogonal, self.n_calls, self.Q0 = orthogonal, n_calls, Q0

    def from_x(self, x):
        return tuple(x)


@pytest.fixture
def calls(monkeypatch):
    seen = []

    def fake(fp_map, x, res_norm, *, tol, max_iter, damping):
        seen.append(max_iter)
        return np.array([9.0, 9.0]), 0.0, True

    monkeypatch.setattr(solve_module, "iterate_orthogonal", fake)
    return seen


def _x(overlap, q=2.0, Q0=1.0):
    return np.array([np.sqrt(overlap * q * Q0), q])


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_threshold_never_shrinks_nearer_perfect_recovery(a, b):
    # the closer m² is to q Q0, the farther from a fixed point the rule may start; off the
    # clip never
    low, high = sorted((a, b))
    t_low = handover_orthogonal_threshold(_Map(), _x(low))
    assert t_low <= handover_orthogonal_threshold(_Map(), _x(high))
    if low < 0.99 * CLIP_OVERLAP:
        assert t_low == 0.0
    assert RECOVERY_OVERLAP > CLIP_OVERLAP


@pytest.mark.parametrize("overlap, res_norm, orthogonal, taken", [
    (0.95, 0.5 * HANDOVER_ORTHOGONAL_RESIDUAL, False, True),
    (0.95, 2.0 * HANDOVER_ORTHOGONAL_RESIDUAL, False, False),  # not close enough
    (0.995, 0.5 * HANDOVER_ORTHOGONAL_RESIDUAL_AT_RECOVERY, False, True),  # from farther
    (0.995, 2.0 * HANDOVER_ORTHOGONAL_RESIDUAL_AT_RECOVERY, False, False),
    (0.5 * CLIP_OVERLAP, 1e-5, False, False),                   # off the clip
    (0.995, 1e-5, True, False),                                 # already orthogonal
    (0.995, np.nan, False, False),                              # no usable residual
])
def test_rule_takes_the_orthogonal_variables_only_close_and_near_the_clip(
        calls, overlap, res_norm, orthogonal, taken):
    x = _x(overlap)
    out = solve_module._handover_orthogonal(_Map(orthogonal), x, res_norm, tol=1e-7,
                                            max_iter=500, damping=1.0)
    assert bool(calls) == taken
    if taken:
        assert out[2] and calls == [70 + HANDOVER_CALLS]   # a handover's budget more
    else:
        assert out[0] is x and out[2] is False
        assert out[1] is res_norm or (np.isnan(out[1]) and np.isnan(res_norm))


def test_rule_budget_never_exceeds_max_iter(calls):
    solve_module._handover_orthogonal(_Map(n_calls=70), _x(0.99), 1e-5, tol=1e-7,
                                      max_iter=100, damping=1.0)
    assert calls == [100]


@pytest.mark.slow
@pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="needs numba")
def test_noiseless_t6_point_converges_faster_to_the_same_fixed_point(monkeypatch):
    # the grid point that motivated the rule (seed 3, T = 6, the noiseless point 0): its
    # handover fails at a residual ~1e-4 at overlap ~0.999; the original starts took 172
    # evaluations (docs: Changelog)
    sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
    from run_benchmarks import grid_configurations, solve_grid_point

    config = grid_configurations(6, 6, 3)[0]
    _, with_rule = solve_grid_point(config)
    monkeypatch.setattr(solve_module, "_handover_orthogonal",
                        lambda fp_map, x, res_norm, **kw: (x, res_norm, False))
    _, without = solve_grid_point(config)
    assert with_rule.converged and without.converged
    assert with_rule.n_iter < 0.8 * without.n_iter
    for key in ("m", "q", "sigma", "test_error", "train_error"):
        np.testing.assert_allclose(getattr(with_rule, key), getattr(without, key), rtol=1e-5)
    assert with_rule.certified_fraction == without.certified_fraction == 1.0


@pytest.mark.slow
@pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="needs numba")
def test_near_recovery_the_rule_starts_from_farther_and_saves_evaluations(monkeypatch):
    # a noiseless T = 3 point near perfect recovery (overlap 0.998), not one the level was
    # chosen on: its handover fails at ~1.5e-3, above the clip's level; with the recovery
    # level the solve took 109 evaluations, without it 156 (docs: Validation report)
    sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
    from run_benchmarks import solve_grid_point

    config = dict(n_tokens=3, noise=0.0, kappa=0.49, alpha=0.47, reg_lambda=0.0028,
                  beta=2.09)
    _, with_level = solve_grid_point(config)
    monkeypatch.setattr(fixed_point_map, "HANDOVER_ORTHOGONAL_RESIDUAL_AT_RECOVERY",
                        HANDOVER_ORTHOGONAL_RESIDUAL)
    _, without = solve_grid_point(config)
    assert with_level.converged and without.converged
    assert with_level.n_iter < 0.85 * without.n_iter
    for key in ("m", "q", "sigma", "test_error", "train_error"):
        np.testing.assert_allclose(getattr(with_level, key), getattr(without, key), rtol=1e-5)
