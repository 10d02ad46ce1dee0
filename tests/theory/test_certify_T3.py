"""The T ≥ 3 certificate that the softmax prox minimiser is global (_certify_rows.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import WishartTarget
from skattn.theory import solve_state_evolution
from skattn.theory.channels import GaussianNodes, SoftmaxChannel, output_side
from skattn.theory.channels import _certify_dual, _certify_rows, _kernels, _prox_newton
from skattn.theory.channels.output import _gaussian_pair

from certify_samples import two_basin_nodes, two_basin_samples

pytestmark = pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="certificate needs numba")

# converged (m, q, Σ, Q0) of solve_state_evolution(α, n_tokens=T, reg_lambda=λ,
# target=WishartTarget(w), beta=β): T = 3: (0.3, 0.1, 0.5); T = 4: (0.25, 0.02, 0.3)
FIXED_POINTS = [
    (3, 1.0, 0.9975432099771133, 0.6884451401937095, 0.8047414514903071, 1.5),
    (3, 4.0, 0.3262918286434406, 0.07132675612019457, 0.0899992432493491, 1.5),
    (4, 1.0, 1.2211629202984036, 1.147818888571489, 0.7811703365580664, 1.3),
    (4, 4.0, 0.31972353239687124, 0.0786364847807201, 0.052867966122675004, 1.3),
]


def _certify(ch, x, f, omega, y, sigma, budget=2000):
    c3 = _certify_rows.third_derivative_bounds(y[None])[0]
    stack = np.empty((4096, ch.n_tokens))
    return _certify_rows.certify_convex(x, f, omega, y, sigma, ch.basis, ch._index,
                                        ch._scale, ch.beta_, ch._row_basis, ch._row_gain, c3,
                                        1e-9, budget, stack)[0]


@pytest.mark.parametrize("T, beta, m, q, sigma, Q0", FIXED_POINTS)
def test_certified_fraction_at_fixed_points(T, beta, m, q, sigma, Q0):
    ch = SoftmaxChannel(T, beta=beta)
    out = output_side(ch, m=m, q=q, Q0=Q0, noise=0.0, sigma=sigma, alpha=0.3,
                      nodes=GaussianNodes(2 * ch.K, n_points=2048))
    assert out.certified_fraction >= 0.9999
    # without the certificate only the (crudely) provably convex nodes count: none here
    ch.certify_budget = 0
    out0 = output_side(ch, m=m, q=q, Q0=Q0, noise=0.0, sigma=sigma, alpha=0.3,
                       nodes=GaussianNodes(2 * ch.K, n_points=2048))
    assert out0.certified_fraction < 0.5
    assert out0.m_hat == out.m_hat


@pytest.mark.slow
@pytest.mark.parametrize("T, alpha, reg_lambda, width", [(3, 0.3, 0.1, 0.5),
                                                          (4, 0.25, 0.02, 0.3)])
@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_certified_fraction_of_full_solve(T, alpha, reg_lambda, width, beta):
    res = solve_state_evolution(alpha, n_tokens=T, reg_lambda=reg_lambda,
                                target=WishartTarget(width), beta=beta)
    assert res.converged
    assert res.certified_fraction >= 0.9999


@pytest.mark.parametrize("T", [3, 4, 6])
def test_certificate_rejects_a_local_minimum(T):
    ch, omega, y, w = two_basin_samples(T)
    sigma, beta = 0.5, ch.beta_
    rng = np.random.default_rng(0)
    found = 0
    # Newton from scattered starts: two end points with clearly different objectives
    for n, ends in two_basin_nodes(ch, omega, y, sigma, rng, limit=5):
        f_low, _ = ends[0]
        f_high, x_high = ends[-1]
        found += 1
        # the worse local minimum is never certified, by either certificate
        assert _certify(ch, x_high, f_high, omega[n], y[n], sigma) != _certify_rows.CERTIFIED
        c3 = _certify_rows.third_derivative_bounds(y[n][None])[0]
        code, _ = _certify_dual.certify_dual(x_high, omega[n], y[n], sigma, ch.basis,
                                             ch._index, ch._scale, beta, ch._row_basis, c3,
                                             1e-9, 20000)
        assert code != _certify_rows.CERTIFIED
        # and the prox driver, started in the worse basin, ends at least as low as the
        # better one wherever it certifies its answer
        z, fb, cert = ch._prox(y[n:n + 1], omega[n:n + 1], np.array([sigma]),
                               (omega[n] + ch.basis @ x_high)[None])
        if cert[0]:
            assert fb[0] <= f_low + 1e-9
    assert found >= 3


@settings(max_examples=25, deadline=None)
@given(T=st.sampled_from([3, 4]), beta=st.floats(0.5, 4.0), log_sigma=st.floats(-3.0, 0.5),
       seed=st.integers(0, 2 ** 31 - 1))
def test_certified_points_are_never_beaten(T, beta, log_sigma, seed):
    rng = np.random.default_rng(seed)
    ch = SoftmaxChannel(T, beta=beta, target_beta=beta)
    sigma = float(np.exp(log_sigma))
    w = rng.standard_normal((1, ch.K))
    omega = rng.standard_normal((1, ch.K))
    y = ch.labels(w)
    z, f, cert = ch._prox(y, omega, np.array([sigma]), w)
    if not cert[0]:
        return
    # dense random search over the ball of global minimisers, then Newton from the best
    r = np.sqrt(2 * sigma * f[0])
    u = rng.standard_normal((20000, ch.K_eff))
    u *= (r * rng.uniform(size=(20000, 1)) ** (1 / ch.K_eff)
          / np.linalg.norm(u, axis=1, keepdims=True))
    zs = omega + u @ ch.basis.T
    vals = np.sum(u * u, axis=1) / (2 * sigma) + ch.loss(np.repeat(y, len(u), axis=0), zs)
    assert vals.min() >= f[0] - 1e-9
    for k in np.argsort(vals)[:5]:
        _, fk = _prox_newton._newtonT(u[k], omega[0], y[0], sigma, ch.basis, ch._index,
                                  ch._scale, ch.beta_, ch._radius / ch.beta_, 100)
        assert fk >= f[0] - 1e-9


def test_third_derivative_bound_holds_numerically():
    # finite differences of the row curvature along random segments stay below β³ c_a
    rng = np.random.default_rng(1)
    for T in (3, 4, 5):
        ch = SoftmaxChannel(T, beta=1.0)
        Q = ch._row_basis
        A, M = np.empty(T), np.empty((T - 1, T - 1))
        for _ in range(300):
            yrow = rng.dirichlet(np.ones(T))
            c3 = _certify_rows.third_derivative_bounds(yrow[None, None])[0, 0]
            t = rng.standard_normal(T - 1) * 2
            d = rng.standard_normal(T - 1)
            d *= 1e-3 / np.linalg.norm(d)
            lam0 = _certify_rows._row_lambda(t, Q, yrow, 1.0, A, M)
            lam1 = _certify_rows._row_lambda(t + d, Q, yrow, 1.0, A, M)
            assert abs(lam1 - lam0) <= c3 * 1e-3 * (1 + 1e-6) + 1e-12


def test_local_third_derivative_bound_holds_numerically():
    # the local constant of a cube (or ball) of row space bounds the change of the row
    # curvature along segments inside it; it is never above the global constant
    rng = np.random.default_rng(2)
    for T in (3, 5, 6):
        ch = SoftmaxChannel(T, beta=1.0)
        Q = ch._row_basis
        d = T - 1
        A, M = np.empty(T), np.empty((d, d))
        lo, hi = np.empty(T), np.empty(T)
        for k in range(300):
            beta = float(rng.choice([1.0, 2.0, 4.0]))
            # labels near the fitted row or anywhere on the simplex
            yrow = rng.dirichlet(np.ones(T) * rng.choice([0.3, 3.0]))
            cap = _certify_rows.third_derivative_bounds(yrow[None, None])[0, 0]
            t = rng.standard_normal(d) * 2
            half = 10 ** rng.uniform(-3, 0)
            ball = bool(k % 2)
            c_loc = _certify_rows._local_c3(t, half, ball, Q, yrow, beta, cap, A, lo, hi,
                                              np.empty(Q.shape[1]))
            assert 0 <= c_loc <= cap
            # a point of the region, and a short step that stays in it
            u = rng.standard_normal(d)
            if ball:
                p = t + u / np.linalg.norm(u) * half * rng.uniform(0, 0.9)
            else:
                p = t + rng.uniform(-0.9, 0.9, d) * half
            step = rng.standard_normal(d)
            step *= 0.05 * half / np.linalg.norm(step)
            lam0 = _certify_rows._row_lambda(p, Q, yrow, beta, A, M)
            lam1 = _certify_rows._row_lambda(p + step, Q, yrow, beta, A, M)
            assert abs(lam1 - lam0) <= beta ** 3 * c_loc * np.linalg.norm(step) * (1 + 1e-6) \
                + 1e-12


@settings(max_examples=150, deadline=None)
@given(T=st.sampled_from([3, 5, 6]), beta=st.sampled_from([1.0, 2.0, 4.0]),
       concentration=st.sampled_from([0.3, 3.0]), log_half=st.floats(-3, 0.5),
       ball=st.booleans(), seed=st.integers(0, 2 ** 31))
def test_interval_curvature_bounds_the_row_hessian(T, beta, concentration, log_half, ball,
                                                   seed):
    # the curvature bound from the probabilities' intervals holds at points of the region
    rng = np.random.default_rng(seed)
    ch = SoftmaxChannel(T, beta=1.0)
    Q = ch._row_basis
    d = T - 1
    A, M = np.empty(T), np.empty((d, d))
    lo, hi = np.empty(T), np.empty(T)
    yrow = rng.dirichlet(np.ones(T) * concentration)
    t = rng.standard_normal(d) * 2
    half = 10 ** log_half
    _certify_rows._local_c3(t, half, ball, Q, yrow, beta, 100.0, A, lo, hi, np.empty(Q.shape[1]))
    bound = _certify_rows._interval_lambda(lo, hi, yrow, beta)
    for _ in range(20):
        u = rng.standard_normal(d)
        p = t + (u / np.linalg.norm(u) * half * rng.uniform(0, 1) if ball
                 else rng.uniform(-1, 1, d) * half)
        assert _certify_rows._row_lambda(p, Q, yrow, beta, A, M) >= bound - 1e-12


@settings(max_examples=100, deadline=None)
@given(T=st.sampled_from([3, 5, 6]), beta=st.sampled_from([1.0, 4.0]),
       seed=st.integers(0, 2 ** 31))
def test_box_intervals_hold_and_match_the_cube_ones(T, beta, seed):
    # the probabilities at points of a box lie in its intervals; on a cube, the intervals
    # of the ball that holds it (_local_c3's other case) contain them
    rng = np.random.default_rng(seed)
    ch = SoftmaxChannel(T, beta=1.0)
    Q = ch._row_basis
    d = T - 1
    A = np.empty(T)
    lo, hi, lo_c, hi_c = (np.empty(T) for _ in range(4))
    centre = rng.standard_normal(d)
    half = 10 ** rng.uniform(-2, 0.5, d)
    _certify_rows._box_intervals(centre, half, Q, beta, A, lo, hi)
    for _ in range(20):
        h = Q @ (centre + rng.uniform(-1, 1, d) * half) * beta
        p = np.exp(h - h.max())
        p /= p.sum()
        assert np.all(p >= lo * (1 - 1e-12)) and np.all(p <= hi * (1 + 1e-12))
    w = float(half[0])
    _certify_rows._box_intervals(centre, np.full(d, w), Q, beta, A, lo, hi)
    _certify_rows._local_c3(centre, w * np.sqrt(d), True, Q, np.full(T, 1 / T), beta, 100.0,
                            A, lo_c, hi_c, np.empty(d))
    assert np.all(lo_c <= lo * (1 + 1e-12)) and np.all(hi <= hi_c * (1 + 1e-12))


def _box_intervals_term_by_term(centre, half, Q, beta):
    # the definition: each exponential on its own, clipped (the reference of the ratio form)
    h = beta * Q @ centre
    T = len(h)
    lo, hi = np.empty(T), np.empty(T)
    for c in range(T):
        others = np.arange(T) != c
        k = np.abs(Q - Q[c]) @ half
        lo[c] = 1 / (1 + np.exp(np.minimum(h - h[c] + beta * k, 700))[others].sum())
        hi[c] = 1 / (1 + np.exp(np.minimum(h - h[c] - beta * k, 700))[others].sum())
    return lo, hi


@settings(max_examples=150, deadline=None)
@given(T=st.sampled_from([3, 4, 5, 6]), beta=st.floats(0.5, 5.0),
       log_scale=st.floats(-2, 3), log_half=st.floats(-4, 2.5), seed=st.integers(0, 2 ** 31))
def test_box_intervals_ratio_form_matches_the_term_by_term_one(T, beta, log_scale, log_half,
                                                              seed):
    # E_b/E_c · K^{±1} against the exponentials one by one, far logits (the term-by-term
    # branch) and huge boxes (K overflowing) included; the ratio form only ever widens
    rng = np.random.default_rng(seed)
    Q = SoftmaxChannel(T, beta=1.0)._row_basis
    centre = rng.standard_normal(T - 1) * 10 ** log_scale
    half = rng.uniform(0.1, 1.0, T - 1) * 10 ** log_half
    A, lo, hi = np.empty(T), np.empty(T), np.empty(T)
    _certify_rows._box_intervals(centre, half, Q, beta, A, lo, hi)
    lo_ref, hi_ref = _box_intervals_term_by_term(centre, half, Q, beta)
    assert np.all(lo <= lo_ref * (1 + 1e-11)) and np.all(hi >= hi_ref * (1 - 1e-11))
    # equal up to rounding, except where a pair's exp(βk_bc) overflows: there lo_c may drop
    # to 0 (documented, still a lower bound) while the term-by-term one is a positive double
    k = np.abs(Q[:, None, :] - Q[None, :, :]) @ half
    big = (lo_ref > 1e-290) & (beta * k.max(axis=1) < 700)
    np.testing.assert_allclose(lo[big], lo_ref[big], rtol=1e-10)
    big = hi_ref > 1e-290
    np.testing.assert_allclose(hi[big], hi_ref[big], rtol=1e-10)


def test_cholesky_test_agrees_with_the_eigenvalue():
    rng = np.random.default_rng(3)
    for d in (2, 4, 5):
        L = np.empty((d, d))
        for _ in range(200):
            G = rng.standard_normal((d, d))
            M = G @ G.T - rng.uniform(0, 3) * np.eye(d)
            lam = np.linalg.eigvalsh(M)[0]
            tau = lam + rng.choice([-1, 1]) * 10 ** rng.uniform(-6, 0)
            assert _certify_rows._exceeds(M, tau, L) == (lam > tau)


def test_t6_retry_reaches_lower_minima_than_the_multistart_alone():
    # T = 6, β = 4, Σ = 2, 512 nodes: the retry after a failed certificate, from x* ±
    # radius along the four least curved directions of the Hessian (8 Newton runs),
    # lowers the mean prox objective by 2.6e-4 (the ±radius/2 starts along the 21 axes,
    # 42 runs, lowered it by 7.8e-5 when T = 6 had no dual bound); the dual bound now
    # certifies 54 % of the nodes, none without the certificates
    ch = SoftmaxChannel(6, beta=4.0, target_beta=4.0)
    nodes = GaussianNodes(2 * ch.K, n_points=512, seed=0)
    kw = dict(m=0.6, q=0.8, Q0=1.0, noise=0.1, sigma=2.0, alpha=0.3, nodes=nodes)
    ch.certify_budget = 0
    multistart = output_side(ch, **kw)
    ch.certify_budget = 2000
    retried = output_side(ch, **kw)
    assert multistart.certified_fraction == 0.0
    assert retried.certified_fraction > 0.5
    assert multistart["moreau"] - retried["moreau"] > 1.5e-4


@pytest.mark.parametrize("T", [3, 4])
def test_certified_prox_from_a_warm_start_agrees_with_the_cold_one(T):
    # the certified evaluation tries a node's previous minimiser first (channels/_proxT.py):
    # from the cold minimisers it must certify the same minima; from poor warm starts
    # (far along ω → fit and beyond) a certified node must still hold the global minimum
    ch = SoftmaxChannel(T, beta=4.0, target_beta=4.0)
    nodes = GaussianNodes(2 * ch.K, n_points=256, seed=1)
    omega, w, _, _ = _gaussian_pair(0.6, 0.8, 1.0, nodes, ch.K)
    y, sigma, start = ch.labels(w), np.full(256, 0.5), w
    z_cold, f_cold, c_cold = ch._prox(y, omega, sigma, start)
    assert np.mean(c_cold) > 0.5        # many nodes reach the certificates
    z_warm, f_warm, c_warm = ch._prox(y, omega, sigma, start, warm=z_cold)
    np.testing.assert_array_equal(c_warm, c_cold)
    np.testing.assert_allclose(f_warm, f_cold, rtol=1e-9, atol=1e-12)
    far = omega + 3.0 * (start - omega)
    _, f_far, c_far = ch._prox(y, omega, sigma, start, warm=far)
    both = c_far & c_cold
    assert np.mean(both) > 0.5
    np.testing.assert_allclose(f_far[both], f_cold[both], rtol=1e-7, atol=1e-9)
