"""The Gaussian core's iteration: near perfect recovery, and the rank-cap ramp in α."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info, threadpool_limits

from skattn import AttentionIndexedModel, WishartTarget
from skattn.theory import perfect_recovery_threshold, solve_state_evolution
from skattn.theory.core.fixed_point_map import FixedPointMap
from skattn.theory.core.solve import RANK_CAP_RAMP, rank_cap_weight, solve_core
from skattn.theory.problem import StateEvolutionProblem


def test_converges_just_above_perfect_recovery_at_small_lambda():
    # noiseless linear T = 1 at λ = 1e-3: in (m/√Q0, log q) the iteration stalled at a
    # residual ~1e-4 for 1.02-1.06 α_perf (converged=False, errors 2-10x off); the
    # variables with log(q − m²/Q0) reach the fixed point, and the error falls with α
    kw = dict(target=WishartTarget(0.5), n_tokens=1, attention="linear", reg_lambda=1e-3)
    ap = perfect_recovery_threshold(target=WishartTarget(0.5), n_tokens=1, attention="linear")
    results = [solve_state_evolution(f * ap, **kw) for f in (1.01, 1.02, 1.03)]
    assert all(r.converged for r in results)
    errors = [r.test_error for r in results]
    assert errors[0] > errors[1] > errors[2] > 0
    # the λ = 1e-3 error there is of order λ-shrinkage: far below the 1e-3 of a stall
    assert errors[1] < 6e-4


@settings(max_examples=50, deadline=None)
@given(fraction=st.floats(0.0, 1.0), width=st.floats(0.05, 0.99))
def test_rank_cap_weight_is_a_c1_ramp(fraction, width):
    w = rank_cap_weight(fraction, width)
    assert 0.0 <= w <= 1.0
    ratio = fraction / width
    if ratio <= 1:
        assert w == 0.0
    elif ratio >= 1 + RANK_CAP_RAMP:
        assert w == 1.0
    h = 1e-7
    assert abs(rank_cap_weight(fraction + h * width, width) - w) <= 3 * h / RANK_CAP_RAMP * 1.5
    assert rank_cap_weight(np.nan, width) == 0.0
    assert rank_cap_weight(fraction, 1.0) == 0.0


def test_no_step_where_a_rank_cap_starts_to_bind():
    # finite-d linear T = 1 under a rank cap: α_eff = α d/(d+1) while the cap does not
    # bind, α where it binds. The switch was a 3.7 % step in λ (d = 40, κ = 0.5); the ramp
    # in positive fraction / κ leaves a smooth curve (max |Δ² log error| 0.038 before)
    teacher = AttentionIndexedModel(40, n_tokens=1, attention="linear",
                                    target=WishartTarget(1.0), noise=0.1, random_state=0)
    lams = np.geomspace(0.60, 0.555, 9)
    cores = [solve_core(0.4, StateEvolutionProblem.from_teacher(
        teacher, width_ratio=0.5, reg_lambda=lam)) for lam in lams]
    assert all(c.result.converged for c in cores)
    log_error = np.log([c.result.test_error for c in cores])
    assert np.max(np.abs(np.diff(log_error, 2))) < 2e-3
    # the scan crosses the onset: not binding at the start, binding at the end
    weights = [rank_cap_weight(c.positive_fraction, 0.5) for c in cores]
    assert weights[0] == 0.0 and not cores[0].rank_capped
    assert weights[-1] > 0.0 and cores[-1].rank_capped


@pytest.mark.slow
def test_rank_cap_ramp_reaches_the_nominal_alpha():
    # well inside the binding region the ramp is at 1: the fixed point at the nominal α
    teacher = AttentionIndexedModel(40, n_tokens=1, attention="linear",
                                    target=WishartTarget(1.0), noise=0.1, random_state=0)
    problem = StateEvolutionProblem.from_teacher(teacher, reg_lambda=0.3, width_ratio=0.5)
    core = solve_core(0.4, problem)
    assert core.rank_capped
    assert rank_cap_weight(core.positive_fraction, 0.5) == 1.0


def test_corrections_fade_out_where_a_rank_cap_starts_to_bind():
    # the leverage correction applied up to the onset of a binding cap and switched off
    # there: a 3.8 % step in λ (d = 60, κ = 0.5); it now fades out over the same ramp as
    # the core's α, and the curve is smooth
    teacher = AttentionIndexedModel(60, n_tokens=1, attention="linear",
                                    target=WishartTarget(1.0), noise=0.1, random_state=0)
    lams = np.geomspace(0.58, 0.50, 7)
    results = [solve_state_evolution(0.4, target=teacher, width_ratio=0.5, reg_lambda=lam)
               for lam in lams]
    weights = [r.correction_weight for r in results]
    assert weights[0] == 1.0 and 0.0 < weights[-1] < 1.0
    assert all(r.correction == "leverage" for r in results)
    assert np.all(np.diff(weights) <= 0)
    log_error = np.log([r.test_error for r in results])
    assert np.max(np.abs(np.diff(log_error, 2))) < 2e-3


def _blas_threads():
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_solve_core_runs_with_one_blas_thread(monkeypatch):
    """Woken BLAS threads spin against the compiled prox's threads: every map evaluation
    of a solve runs with one BLAS thread, and the previous limits come back after it."""
    before = _blas_threads()
    seen = []
    step = FixedPointMap.step

    def recording_step(self, *args, **kwargs):
        seen.append(_blas_threads())
        return step(self, *args, **kwargs)

    monkeypatch.setattr(FixedPointMap, "step", recording_step)
    with threadpool_limits(limits=2, user_api="blas"):
        limited = _blas_threads()
        problem = StateEvolutionProblem(n_tokens=2, reg_lambda=0.1, target=WishartTarget(0.5))
        solve_core(0.3, problem, dict(n_nodes=256))
        assert _blas_threads() == limited
    assert seen and all(threads == [1] * len(threads) for threads in seen)
    assert _blas_threads() == before
