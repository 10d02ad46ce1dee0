"""The speed paths of the state evolution give the values of the plain paths.

Coarse-to-fine iteration (docs/theory.rst §4: the same fixed-point equations, solved first
on a prefix of the quadrature nodes), the compiled eigenvalues of the output side and the
node subsets.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import WishartTarget
from skattn.theory import solve_state_evolution
from skattn.theory.channels import GaussianNodes
from skattn.theory.channels import _kernels
from skattn.theory.channels.output import _trace_resolvent_complement

_FIELDS = ("m", "q", "sigma", "m_hat", "q_hat", "sigma_hat", "test_error", "train_error",
           "train_objective")


def _assert_same_point(a, b, rel):
    assert a.converged and b.converged, (a.message, b.message)
    for name in _FIELDS:
        assert getattr(b, name) == pytest.approx(getattr(a, name), rel=rel), name


@pytest.mark.parametrize("kwargs", [
    dict(n_tokens=2, reg_lambda=0.01, alpha=0.3),
    dict(n_tokens=2, reg_lambda=0.01, alpha=0.3, beta=4.0),   # cold (no warm prox) path
])
def test_coarse_to_fine_agrees_with_the_direct_solve(kwargs):
    kwargs = dict(kwargs, target=WishartTarget(0.5))
    alpha = kwargs.pop("alpha")
    fine = dict(n_nodes=4096, tol=1e-10)
    direct = solve_state_evolution(alpha, options=dict(fine, n_coarse_nodes=None), **kwargs)
    coarse = solve_state_evolution(alpha, options=dict(fine, n_coarse_nodes=1024), **kwargs)
    _assert_same_point(direct, coarse, rel=1e-6)


@pytest.mark.parametrize("n_features", [None, 60])
def test_linear_start_stage_agrees_with_the_direct_solve(n_features):
    # T = 1 linear: the start stage runs on all nodes with the sampled prior side; the
    # exact equations then give the direct solve's fixed point
    kw = dict(n_tokens=1, reg_lambda=0.01, target=WishartTarget(0.5), attention="linear",
              noise=0.1, n_features=n_features)
    direct = solve_state_evolution(0.3, options=dict(n_coarse_nodes=None, tol=1e-10), **kw)
    staged = solve_state_evolution(0.3, options=dict(tol=1e-10), **kw)
    assert staged.n_iter != direct.n_iter          # a different path ...
    _assert_same_point(direct, staged, rel=1e-6)   # ... to the same point


def test_coarse_stage_is_off_for_few_nodes_and_the_direct_parametrization():
    kw = dict(n_tokens=1, reg_lambda=0.01, target=WishartTarget(0.5), attention="linear",
              parametrization="direct")
    a = solve_state_evolution(0.3, options=dict(n_coarse_nodes=None), **kw)
    b = solve_state_evolution(0.3, **kw)
    assert (a.m, a.q, a.sigma, a.n_iter) == (b.m, b.q, b.sigma, b.n_iter)
    # fewer than 4 × n_coarse_nodes nodes: no coarse stage
    kw = dict(n_tokens=2, reg_lambda=0.01, target=WishartTarget(0.5))
    a = solve_state_evolution(0.3, options=dict(n_nodes=1024, n_coarse_nodes=None), **kw)
    b = solve_state_evolution(0.3, options=dict(n_nodes=1024, n_coarse_nodes=512), **kw)
    assert (a.m, a.q, a.sigma, a.n_iter) == (b.m, b.q, b.sigma, b.n_iter)


@pytest.mark.parametrize("bad", [0, 8, 2.5, "1024", True])
def test_bad_n_coarse_nodes(bad):
    with pytest.raises((ValueError, TypeError), match="n_coarse_nodes"):
        solve_state_evolution(0.3, n_tokens=2, reg_lambda=0.01, target=WishartTarget(0.5),
                              options=dict(n_coarse_nodes=bad))


@pytest.mark.parametrize("bad", [(1.0, 1.0), (1.0, -1.0, 1.0), (np.nan, 1.0, 1.0), "abc"])
def test_bad_init_raises_before_any_work(bad):
    with pytest.raises(ValueError, match="init"):
        solve_state_evolution(0.3, n_tokens=2, reg_lambda=0.01, target=WishartTarget(0.5),
                              options=dict(init=bad))


def test_node_subset_is_the_prefix():
    nodes = GaussianNodes(6, n_points=4096, seed=3)
    sub = nodes.subset(1024)
    assert sub.n_points == 1024 and sub.dim == 6
    np.testing.assert_array_equal(sub.points, nodes.points[:1024])
    assert sub.weights.sum() == pytest.approx(1.0)
    # a power-of-two Sobol prefix is balanced: its mean is near 0, its variance near 1
    assert np.max(np.abs(sub.mean(sub.points))) < 0.02
    assert np.max(np.abs(sub.mean(sub.points ** 2) - 1)) < 0.05
    for bad in (0, 4097, 1.5):
        with pytest.raises((ValueError, TypeError), match="n_points"):
            nodes.subset(bad)


def _eig_reference(H, sigma):
    lam = np.linalg.eigvalsh(H)
    return np.sum(sigma * lam / np.maximum(1 + sigma * lam, 1e-12), axis=1)


@pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="compiled path needs numba")
@settings(max_examples=40, deadline=None)
@given(K=st.integers(1, 3), log_scale=st.floats(-8, 8), log_sigma=st.floats(-6, 8),
       seed=st.integers(0, 2 ** 16))
def test_compiled_trace_matches_lapack(K, log_scale, log_sigma, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((64, K, K))
    H = (X + X.transpose(0, 2, 1)) * 10.0 ** log_scale
    H[:, :, 0] *= 1e-6        # a near-null direction (the softmax shift) as in the channel
    H[:, 0, :] *= 1e-6
    sigma = 10.0 ** log_sigma
    got = _kernels.trace_resolvent_complement(H, sigma)
    ref = _eig_reference(H, sigma)
    # each eigenvalue to a few ulps of ‖H‖, as LAPACK's: an absolute error of the sum up
    # to K ε Σ‖H‖ / (1 + Σλ)² ≤ K ε Σ‖H‖
    bound = 1e-13 * K * (1 + sigma * np.max(np.abs(H), axis=(1, 2)))
    np.testing.assert_array_less(np.abs(got - ref), bound + 1e-10 * np.abs(ref))


def test_output_side_trace_uses_the_same_formula():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 3, 3))
    H = X + X.transpose(0, 2, 1)
    for sigma in (1e-3, 1.0, 1e6):  # 1e6: the ridgeless regime where a closed form failed
        np.testing.assert_allclose(_trace_resolvent_complement(H, sigma),
                                   _eig_reference(H, sigma), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n_features,width_ratio,t_hat", [
    (None, 1.0, 0.0), (100, 1.0, 0.0), (100, 0.5, 0.0), (100, 1.0, 0.02)])
def test_sampled_start_denoiser_is_close_to_the_exact_one(n_features, width_ratio, t_hat):
    # the start stage's prior side: the same threshold on one fixed draw, within the
    # draw's O(1/n) of the free convolution (n = 100 or the 128 quantiles of the law), and
    # the same numbers for the same seed
    from skattn.theory.denoisers import FactoredDenoiser, SampledDenoiser
    from skattn.theory.laws import WishartLaw
    law = WishartLaw(0.5)
    eig0 = None
    if n_features is not None:
        eig0 = np.linalg.eigvalsh(WishartTarget(0.5).sample(n_features, 0))
    exact = FactoredDenoiser(law, width_ratio=width_ratio, reg_lambda=0.01,
                             n_features=n_features, target_eigenvalues=eig0)
    sampled = SampledDenoiser(exact, random_state=3)
    for hats in ((0.11, 0.002, 0.12), (0.5, 0.4, 0.9), (1.0, 0.05, 2.0)):
        a, b = exact(*hats, t_hat=t_hat), sampled(*hats, t_hat=t_hat)
        for name in ("m", "q", "sigma", "trace"):
            assert getattr(b, name) == pytest.approx(getattr(a, name), rel=0.05), name
        again = SampledDenoiser(exact, random_state=3)(*hats, t_hat=t_hat)
        assert (again.m, again.q, again.sigma) == (b.m, b.q, b.sigma)
    with pytest.raises(TypeError, match="denoiser"):
        SampledDenoiser(object())


def test_fused_output_sums_equal_numpy():
    # the one-pass node averages of output_side against the numpy expressions they replace
    rng = np.random.default_rng(0)
    n, k = 1000, 3
    z, omega, zeta1, zeta2 = (rng.standard_normal((n, k)) for _ in range(4))
    loss, weights, sigma = rng.random(n), rng.dirichlet(np.ones(n)), 0.7
    got = _kernels.stein_sums(z, omega, zeta1, zeta2, loss, weights, sigma)
    g = (z - omega) / sigma
    want = [weights @ np.sum(g * zeta2, axis=1), weights @ np.sum(g * g, axis=1),
            weights @ np.sum(g * zeta1, axis=1), weights @ loss,
            weights @ np.sum((z - omega) ** 2, axis=1)]
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_warm_iterations_carry_no_uncertified_bound():
    # trust_warm evaluations are never reported: no bound; the certified one has it
    from skattn.theory.channels import SoftmaxChannel, output_side
    ch = SoftmaxChannel(2, beta=2.0, target_beta=2.0)
    nodes = GaussianNodes(2 * ch.K, n_points=512, seed=0)
    kw = dict(m=0.6, q=0.8, Q0=1.0, noise=0.1, sigma=3.0, alpha=0.3, nodes=nodes)
    output_side(ch, warm_start=True, **kw)
    assert output_side(ch, warm_start=True, trust_warm=True, **kw).uncertified_bound is None
    assert isinstance(output_side(ch, warm_start=True, **kw).uncertified_bound, dict)


@pytest.mark.parametrize("T", [2, 3, 4, 6])
def test_warm_iterations_in_stein_form_skip_only_the_pointwise_traces(T):
    # a trust_warm evaluation in the Stein form returns no pointwise Σ̂ (its Hessian traces
    # are not computed) and the same conjugates and losses as with them; the pointwise
    # form, or a certified evaluation, still has it
    from skattn.theory.channels import SoftmaxChannel, output_side
    from skattn.theory.channels.common import _loss_and_trace, _losses
    ch = SoftmaxChannel(T, beta=2.0, target_beta=2.0)
    nodes = GaussianNodes(2 * ch.K, n_points=256, seed=1)
    kw = dict(m=0.6, q=0.8, Q0=1.0, noise=0.1, sigma=1.5, alpha=0.3, nodes=nodes)
    output_side(ch, warm_start=True, sigma_hat_form="stein", **kw)     # remembered z*
    fast = output_side(ch, warm_start=True, trust_warm=True, sigma_hat_form="stein", **kw)
    full = output_side(ch, warm_start=True, trust_warm=True, sigma_hat_form="pointwise",
                       **kw)
    assert fast.sigma_hat_pointwise is None and np.isfinite(full.sigma_hat_pointwise)
    for name in ("m_hat", "q_hat", "sigma_hat_stein", "train_error", "moreau"):
        # (the second warm evaluation starts from the first's z*: rounding apart)
        assert fast[name] == pytest.approx(full[name], rel=1e-12), name
    assert fast.sigma_hat == fast.sigma_hat_stein
    certified = output_side(ch, warm_start=True, sigma_hat_form="stein", **kw)
    assert np.isfinite(certified.sigma_hat_pointwise)
    y = np.random.default_rng(0).dirichlet(np.ones(T), size=(50, T))
    z = np.random.default_rng(1).normal(size=(50, ch.K))
    np.testing.assert_array_equal(_losses(ch, y, z, 1.5), _loss_and_trace(ch, y, z, 1.5)[0])
