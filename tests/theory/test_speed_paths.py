"""The fast paths of the state evolution: threaded prox, warm iterations then cold polish."""

import numpy as np
import pytest

from skattn.data import WishartTarget
from skattn.parallel import map_jobs
from skattn.theory import solve_state_evolution
from skattn.theory.channels import _certify, _kernels
from skattn.theory.channels.output import GaussianNodes, _gaussian_pair
from skattn.theory.channels.softmax import SoftmaxChannel

pytestmark = pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="needs numba")


def _problem(n_tokens, beta, sigma, n_points, seed=0):
    """A batch of non-trivial prox problems: labels of a correlated teacher."""
    channel = SoftmaxChannel(n_tokens, beta=beta, target_beta=beta)
    nodes = GaussianNodes(2 * channel.K, n_points=n_points, seed=seed)
    omega, w, _, _ = _gaussian_pair(0.6, 0.8, 1.0, nodes, channel.K)
    y = channel.labels(w)
    return channel, y, omega, np.full(n_points, sigma), w * (channel.target_beta_ / beta)


def _prox(channel, y, omega, sigma, start, warm, trust_warm, threaded, monkeypatch):
    monkeypatch.setattr(_kernels, "use_parallel", lambda: threaded)
    return channel._prox(y, omega, sigma, start, warm, trust_warm)


@pytest.mark.parametrize("n_tokens, n_points", [(2, 1000), (3, 300)])
@pytest.mark.parametrize("budget", [0, 2000])
@pytest.mark.parametrize("warm_kind", [None, "plain", "trust"])
def test_threaded_prox_equals_serial_exactly(n_tokens, n_points, budget, warm_kind,
                                             monkeypatch, two_numba_threads):
    # β = 4, Σ = 0.5: many non-convex samples, so the multi-start and the certificate run
    channel, y, omega, sigma, start = _problem(n_tokens, 4.0, 0.5, n_points)
    channel.certify_budget = budget
    warm = None
    if warm_kind is not None:
        warm = channel._prox(y, omega, sigma * 1.1, start)[0]
    trust = warm_kind == "trust"
    serial = _prox(channel, y, omega, sigma, start, warm, trust, False, monkeypatch)
    threaded = _prox(channel, y, omega, sigma, start, warm, trust, True, monkeypatch)
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("trust_warm, budget", [(True, 0), (False, 0), (False, 2000)])
@pytest.mark.parametrize("threaded, driver", [(True, "prox2_parallel"), (False, "prox2")])
def test_t2_evaluations_run_threaded_where_threads_are_allowed(trust_warm, budget, threaded,
                                                              driver, monkeypatch):
    # warm, multi-start and certified evaluations alike: the threaded driver where numba
    # has more than one thread, else the serial one (the same values, test above)
    channel, y, omega, sigma, start = _problem(2, 4.0, 0.5, 200)
    channel.certify_budget = budget
    warm = channel._prox(y, omega, sigma * 1.1, start)[0]
    called = []
    for name in ("prox2", "prox2_parallel"):
        kernel = getattr(_certify, name)
        monkeypatch.setattr(_certify, name,
                            lambda *a, _k=kernel, _n=name: called.append(_n) or _k(*a))
    _prox(channel, y, omega, sigma, start, warm, trust_warm, threaded, monkeypatch)
    assert called == [driver]


def test_trusted_warm_start_keeps_its_local_minimum(monkeypatch):
    channel, y, omega, sigma, start = _problem(2, 4.0, 0.5, 1000)
    channel.certify_budget = 0
    z_cold, f_cold, _ = channel._prox(y, omega, sigma, start)
    # warm start at ω: Newton from there alone may end in a worse local minimum
    z_warm, f_warm, cert = channel._prox(y, omega, sigma, start, warm=omega, trust_warm=True)
    convex = channel._prox(y, omega, sigma, start)[2]
    np.testing.assert_array_equal(cert, convex)  # only the provably convex are certified
    assert not np.all(convex)
    assert np.all(f_warm >= f_cold - 1e-9)
    # a NaN warm row means "no warm start": that node gets the cold multi-start, in the
    # fixed-point iterations (trust_warm) without its grid start (the segment alone)
    warm = omega.copy()
    warm[:] = np.nan
    z_nan, f_nan, _ = channel._prox(y, omega, sigma, start, warm=warm)
    np.testing.assert_array_equal(f_nan, f_cold)
    z_seg, f_seg, _ = channel._prox(y, omega, sigma, start, warm=warm, trust_warm=True)
    assert np.all(f_seg >= f_cold - 1e-9)
    np.testing.assert_array_equal(f_seg[convex], f_cold[convex])
    assert np.mean(np.abs(f_seg - f_cold) <= 1e-12) > 0.9


@pytest.mark.parametrize("kwargs", [
    dict(alpha=0.3, n_tokens=2, reg_lambda=0.01, beta=1.0),
    dict(alpha=0.3, n_tokens=2, reg_lambda=0.01, beta=4.0),
    dict(alpha=0.4, n_tokens=2, reg_lambda=0.02, beta=4.0, target_beta=4.0, noise=0.1),
])
def test_warm_iterations_then_polish_equal_cold(kwargs, monkeypatch):
    kwargs = dict(kwargs)
    alpha = kwargs.pop("alpha")
    # tol below the default: the two paths end at the same fixed point from different sides
    common = dict(target=WishartTarget(0.5), options=dict(n_nodes=1024, tol=1e-9), **kwargs)
    fast = solve_state_evolution(alpha, **common)
    monkeypatch.setattr(SoftmaxChannel, "warm_startable", False)  # today's cold iterations
    cold = solve_state_evolution(alpha, **common)
    assert fast.converged and cold.converged
    for key in ("m", "q", "sigma", "m_hat", "q_hat", "sigma_hat", "test_error",
                "train_error"):
        assert getattr(fast, key) == pytest.approx(getattr(cold, key), rel=1e-6), key
    assert fast.certified_fraction == cold.certified_fraction


def _numba_threads(_):
    import numba
    return numba.get_num_threads()


def test_joblib_workers_run_numba_single_threaded():
    # the threaded prox inside n_jobs workers must not oversubscribe the cores
    out = []
    map_jobs(_numba_threads, [(0,), (1,)], backend="joblib", n_jobs=2,
             on_result=lambda index, value: out.append(value))
    assert out == [1, 1]


@pytest.mark.parametrize("beta, polish_certified", [(2.5, True), (3.5, False)])
def test_warm_iterations_at_every_beta_certified_polish_up_to_the_edge(beta, polish_certified,
                                                                        monkeypatch):
    # warm iterations at every β from the coarse stage's point; above
    # CERTIFIED_POLISH_MAX_BETA the polish runs on the multi-start map and only the
    # reported evaluation is certified
    from skattn.theory.core import fixed_point_map as fpm
    assert (beta <= fpm.CERTIFIED_POLISH_MAX_BETA) == polish_certified
    calls = []
    hats = fpm.FixedPointMap.hats

    def record(self, m, q, sigma, t=None, certify=False):
        calls.append((len(self.nodes.weights), self.warm, certify))
        return hats(self, m, q, sigma, t, certify=certify)

    monkeypatch.setattr(fpm.FixedPointMap, "hats", record)
    # 8192 nodes: the coarse stage's point is the start, near the fixed point
    res = solve_state_evolution(0.3, n_tokens=2, reg_lambda=0.05, noise=0.1, beta=beta,
                                target_beta=beta, target=WishartTarget(0.5),
                                options={"n_nodes": 8192})
    assert res.converged and res.certified_fraction == 1.0
    fine = [c for c in calls if c[0] == 8192]
    assert any(warm for _, warm, _ in fine)
    n_certified = sum(cert for _, _, cert in fine)
    assert n_certified >= 1
    if not polish_certified:
        assert n_certified == 1 and fine[-1][2]      # the last evaluation, once


@pytest.mark.parametrize("n_tokens", [2, 3])
def test_certified_evaluation_starts_from_the_remembered_minimisers(n_tokens, monkeypatch):
    # above the edge the fixed point is certified once, in an evaluation of its own: it
    # too starts each node from the remembered z* (kept where certified global), and its
    # values are those of the cold multi-start evaluation at the same state
    from skattn.theory.core import fixed_point_map as fpm
    certified = []
    output_side = fpm.output_side

    def record(channel, **kwargs):
        out = output_side(channel, **kwargs)
        if channel.certify_budget > 0:
            certified.append((channel, kwargs, out))
        return out

    monkeypatch.setattr(fpm, "output_side", record)
    res = solve_state_evolution(0.3, n_tokens=n_tokens, reg_lambda=0.05, noise=0.1, beta=3.5,
                                target_beta=3.5, target=WishartTarget(0.5),
                                options={"n_nodes": 4096})
    assert res.converged and res.certified_fraction >= 0.999
    assert len(certified) == 1
    channel, kwargs, out = certified[0]
    assert kwargs["warm_start"] and not kwargs["trust_warm"]
    cold = output_side(channel, **dict(kwargs, warm_start=False))
    assert cold.certified_fraction == out.certified_fraction
    for key in ("m_hat", "q_hat", "sigma_hat", "train_error"):
        assert getattr(out, key) == pytest.approx(getattr(cold, key), rel=1e-9), key


@pytest.mark.parametrize("n_tokens, beta, near, method, warm", [
    (2, 2.5, False, "anderson", True), (2, 3.5, False, "anderson", False),
    (2, 3.5, True, "anderson", True), (2, 3.5, False, "hybrid", True),
    (3, 3.5, False, "anderson", True), (4, 4.0, False, "anderson", True)])
def test_which_iterations_run_warm(n_tokens, beta, near, method, warm):
    # only Anderson from the original starts at T = 2 above the edge runs cold
    from skattn.theory.core import fixed_point_map as fpm
    channel = SoftmaxChannel(n_tokens, beta=beta, target_beta=beta)
    assert fpm.iterates_warm(channel, near=near, method=method) == warm
    assert (beta > fpm.WARM_FROM_STARTS_MAX_BETA) or fpm.iterates_warm(channel, near=False)


def _record_evaluations(monkeypatch, what):
    """Patch ``FixedPointMap.hats`` to append ``what(fixed_point_map, certify)`` per
    evaluation to the list returned."""
    from skattn.theory.core import fixed_point_map as fpm
    calls = []
    hats = fpm.FixedPointMap.hats

    def record(self, m, q, sigma, t=None, certify=False):
        calls.append(what(self, certify))
        return hats(self, m, q, sigma, t, certify=certify)

    monkeypatch.setattr(fpm.FixedPointMap, "hats", record)
    return calls


def test_t2_iterations_from_the_original_starts_run_cold_above_the_edge(monkeypatch):
    # 2048 nodes have no coarse stage: Anderson from the original starts, where the warm
    # map wandered at β = 3.5 (67 evaluations, against 28 cold; docs: Changelog)
    calls = _record_evaluations(monkeypatch, lambda fp_map, certify: fp_map.warm)
    res = solve_state_evolution(0.3, n_tokens=2, reg_lambda=0.05, noise=0.1, beta=3.5,
                                target_beta=3.5, target=WishartTarget(0.5),
                                options={"n_nodes": 2048})
    assert res.converged and res.certified_fraction == 1.0
    assert calls and not any(calls)


def _recorded_solver(calls, alpha, *, n_tokens, reg_lambda, noise, beta, kappa):
    """A solve of one speed-grid configuration (8192 nodes, tol 1e-9, student and teacher
    at ``beta``, Wishart(``kappa``)) that first empties ``calls``, the list of
    :func:`_record_evaluations`, so that each solve records its own evaluations."""
    def solve():
        calls.clear()
        return solve_state_evolution(alpha, n_tokens=n_tokens, reg_lambda=reg_lambda,
                                     noise=noise, beta=beta, target_beta=beta,
                                     target=WishartTarget(kappa),
                                     options={"n_nodes": 8192, "tol": 1e-9})
    return solve


def test_warm_iterations_that_cycle_give_up_early(monkeypatch):
    # speed-grid seed 1 point 4 at T = 2: the remembered minimisers keep the warm map
    # about 1e-2 off its fixed point; its iterations end after WARM_GIVE_UP_EVALS
    # evaluations without a 10 % gain instead of spending WARM_CALLS, twice (151
    # evaluations before, 63 after), and the fixed point is the same (tol below the
    # default: the two paths end at it from different sides)
    from skattn.theory.core import fixed_point_map as fpm
    calls = _record_evaluations(monkeypatch, lambda fp_map, certify: fp_map.warm)

    solve = _recorded_solver(calls, 0.5723, n_tokens=2, reg_lambda=0.003944, noise=0.3365,
                             beta=2.2867, kappa=0.548)

    fast = solve()
    n_warm_fast = sum(calls)
    monkeypatch.setattr(fpm, "WARM_GIVE_UP_EVALS", None)
    full = solve()
    n_warm_full = sum(calls)
    assert fast.converged and full.converged
    assert fast.certified_fraction == full.certified_fraction == 1.0
    assert n_warm_fast < n_warm_full / 2 and fast.n_iter < full.n_iter / 2
    for key in ("m", "q", "sigma", "test_error", "train_error"):
        assert getattr(fast, key) == pytest.approx(getattr(full, key), rel=1e-6), key


def test_t3_certified_polish_is_one_evaluation_then_the_multistart_map(monkeypatch):
    # speed-grid seed 0 point 5 at T = 3 (β = 1.62, below the certified polish's edge):
    # the warm fixed point is not the certified map's, so the certified polish took four
    # certified evaluations; with the multi-start memory it takes one, the multi-start
    # polish goes on from the warm fixed point, and its end is certified once: two
    # certified evaluations, and the same fixed point (tol below the default)
    from skattn.theory.core import fixed_point_map as fpm
    calls = _record_evaluations(monkeypatch,
                                lambda fp_map, certify: bool(certify or fp_map.certify))

    solve = _recorded_solver(calls, 0.2797, n_tokens=3, reg_lambda=0.001, noise=0.4112,
                             beta=1.6233, kappa=0.3249)

    fast = solve()
    n_certified_fast = sum(calls)
    # without the rule the certified map is polished to the tolerance
    monkeypatch.setattr(fpm, "polishes_certified_once", lambda channel: False)
    full = solve()
    n_certified_full = sum(calls)
    assert fast.converged and full.converged
    assert fast.certified_fraction == full.certified_fraction == 1.0
    assert n_certified_fast == 2 < n_certified_full
    for key in ("m", "q", "sigma", "test_error", "train_error"):
        assert getattr(fast, key) == pytest.approx(getattr(full, key), rel=1e-6), key
