"""The multi-start memory of the uncertified T ≥ 3 evaluations (``channels/_proxT.py``,
``channels/common.prox_at_nodes``) and the polish that runs on it first
(``core/fixed_point_map.polish_multistart``)."""

import numpy as np
import pytest

from skattn.data import WishartTarget
from skattn.theory import solve_state_evolution
from skattn.theory.channels import GaussianNodes, SoftmaxChannel, _kernels, output_side
from skattn.theory.channels._prox_newton import _newtonT
from skattn.theory.channels._proxT import AGREE_TOL
from skattn.theory.channels.common import (_multistart_memory, forget_multistart_memory,
                                           prox_at_nodes)
from skattn.theory.channels.output import _gaussian_pair
from skattn.theory.channels.prox import _SoftmaxProblem
from skattn.theory.core import fixed_point_map as fpm

pytestmark = pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="needs numba")

# far from convex (β = 4, Σ = 2): the starts of many nodes end at different minima
STATE = dict(m=0.6, q=0.8, Q0=1.0, noise=0.1, sigma=2.0, alpha=0.3)


def _problem(n_tokens=3, n_points=512):
    channel = SoftmaxChannel(n_tokens, beta=4.0, target_beta=4.0)
    channel.certify_budget = 0
    nodes = GaussianNodes(2 * channel.K, n_points=n_points, seed=3)
    omega, w, _, _ = _gaussian_pair(STATE["m"], STATE["q"], STATE["Q0"] + STATE["noise"] / 2,
                                    nodes, channel.K)
    y = channel.labels(w)
    start = w * (channel.target_beta_ / channel.beta_)
    return channel, nodes, y, omega, start


def _memory_prox(channel, nodes, y, omega, start):
    return prox_at_nodes(channel, nodes, y, omega, STATE["sigma"], start, warm_start=False,
                         trust_warm=False, multistart_memory=True)


@pytest.mark.parametrize("n_tokens", [3, 4])
def test_agreement_marks_the_nodes_whose_starts_end_together(n_tokens):
    channel, nodes, y, omega, start = _problem(n_tokens)
    z, _ = _memory_prox(channel, nodes, y, omega, start)
    _, agree = _multistart_memory(channel, nodes)
    # the starts of the multi-start, one by one (the segment ω → exact fit)
    B, beta = channel.basis, channel.beta_
    x_fit = (start - omega) @ B
    convex = _SoftmaxProblem(channel, y, omega, np.full(len(y), STATE["sigma"])).convex()
    marked = 0
    for i in np.flatnonzero(~convex)[:80]:
        ends = [_newtonT(t * x_fit[i], omega[i], y[i], STATE["sigma"], B, channel._index,
                         channel._scale, beta, channel._radius / beta, channel.max_iter)[0]
                for t in np.linspace(0.0, 1.0, channel.n_starts)]
        spread = max(np.max(np.abs(e - ends[0])) for e in ends)
        assert agree[i] == (spread <= AGREE_TOL)
        # the memory's minimiser is the best end point
        assert np.min([np.max(np.abs(omega[i] + e @ B.T - z[i])) for e in ends]) < 1e-12
        marked += agree[i]
    assert 10 < marked < 80
    assert not agree[convex].any()         # one start: nothing to agree on


@pytest.mark.parametrize("n_tokens", [3, 4])
def test_first_memory_evaluation_is_the_multistart_and_the_second_keeps_it(n_tokens):
    channel, nodes, y, omega, start = _problem(n_tokens)
    plain, _ = prox_at_nodes(channel, nodes, y, omega, STATE["sigma"], start,
                             warm_start=False, trust_warm=False)
    first, _ = _memory_prox(channel, nodes, y, omega, start)
    np.testing.assert_array_equal(first, plain)
    _, agree = _multistart_memory(channel, nodes)
    assert 0.2 < agree.mean() < 1.0          # the memory holds some nodes, not all
    # at the same state the remembered nodes restart at their minimiser and stay there
    second, _ = _memory_prox(channel, nodes, y, omega, start)
    np.testing.assert_allclose(second, plain, rtol=0, atol=1e-8)
    _, agree2 = _multistart_memory(channel, nodes)
    assert np.all(agree2[agree])             # remembered nodes stay remembered


def test_memory_is_tied_to_its_nodes_and_forgotten():
    channel, nodes, y, omega, start = _problem()
    _memory_prox(channel, nodes, y, omega, start)
    assert _multistart_memory(channel, nodes)[0] is not None
    other = GaussianNodes(2 * channel.K, n_points=512, seed=3)     # equal, not the same
    z, agree = _multistart_memory(channel, other)
    assert z is None and not agree.any()
    forget_multistart_memory(channel)
    z, agree = _multistart_memory(channel, nodes)
    assert z is None and not agree.any()


def test_a_wrong_memory_is_what_the_stage_after_it_corrects():
    # remembered minimisers from another state are kept at the memory's nodes: the memory's
    # map differs from the multi-start one there (why the polish ends without it)
    channel, nodes, y, omega, start = _problem()
    plain = output_side(channel, nodes=nodes, sigma_hat_form="stein", **STATE)
    output_side(channel, nodes=nodes, sigma_hat_form="stein", multistart_memory=True,
                **dict(STATE, sigma=0.3))
    stale = output_side(channel, nodes=nodes, sigma_hat_form="stein",
                        multistart_memory=True, **STATE)
    forget_multistart_memory(channel)
    fresh = output_side(channel, nodes=nodes, sigma_hat_form="stein",
                        multistart_memory=True, **STATE)
    assert fresh["q_hat"] == plain["q_hat"]
    assert stale["q_hat"] != plain["q_hat"]


def _solve():
    # above the certified polish's β edge, where the polish runs on the multi-start map
    beta = 3.38
    assert beta > fpm.CERTIFIED_POLISH_MAX_BETA
    return solve_state_evolution(0.125, n_tokens=3, reg_lambda=0.02, noise=0.17, beta=beta,
                                 target_beta=beta, target=WishartTarget(0.43),
                                 options={"n_nodes": 4096})


def _without_memory(monkeypatch):
    monkeypatch.setattr(SoftmaxChannel, "multistart_memorable", property(lambda self: False))


def _counting_memory_evaluations(monkeypatch):
    seen = []
    original = fpm.output_side

    def spy(channel, **kwargs):
        seen.append(kwargs.get("multistart_memory", False))
        return original(channel, **kwargs)

    monkeypatch.setattr(fpm, "output_side", spy)
    return seen


def test_polish_with_memory_ends_at_the_multistart_fixed_point(monkeypatch):
    seen = _counting_memory_evaluations(monkeypatch)
    with_memory = _solve()
    assert any(seen)                          # the memory stage ran
    with monkeypatch.context() as patch:
        _without_memory(patch)
        n_seen = len(seen)
        without = _solve()
        assert not any(seen[n_seen:])
    assert with_memory.converged and without.converged
    for name in ("test_error", "m", "q", "sigma"):
        assert getattr(with_memory, name) == pytest.approx(getattr(without, name), rel=1e-4)


def test_polish_falls_back_where_the_memory_stage_does_not_converge(monkeypatch):
    # one evaluation on the memory: the polish without it from the warm point decides,
    # on the path it takes without the memory
    monkeypatch.setattr(fpm, "MEMORY_CALLS", 1)
    seen = _counting_memory_evaluations(monkeypatch)
    fallen_back = _solve()
    assert any(seen)
    with monkeypatch.context() as patch:
        _without_memory(patch)
        without = _solve()
    assert fallen_back.converged
    for name in ("test_error", "m", "q", "sigma"):
        assert getattr(fallen_back, name) == pytest.approx(getattr(without, name), rel=1e-12)
    # the memory's evaluation is reported, not counted against the budget
    assert fallen_back.n_iter == without.n_iter + 1


def test_path_state_round_trip():
    channel = SoftmaxChannel(3, beta=3.5, target_beta=3.5)
    nodes = GaussianNodes(2 * channel.K, n_points=64, seed=0)

    class Denoiser:
        convolution_start = "panels at the start"

    fp_map = fpm.FixedPointMap(0.3, channel, Denoiser(), 1.0, 0.1, nodes, "stein")
    fp_map.trail = [(np.zeros(3), np.ones(3))]
    saved = fp_map.path_state()
    fp_map.trail.append((np.ones(3), np.zeros(3)))
    fp_map.stall_floor, fp_map.denoiser.convolution_start = 1e-4, "later panels"
    fp_map.restore_path(saved)
    assert len(fp_map.trail) == 1 and fp_map.stall_floor is None
    assert fp_map.denoiser.convolution_start == "panels at the start"
