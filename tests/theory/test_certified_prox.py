"""The certificate that the T = 2 softmax prox minimiser is global (channels/_certify.py)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from skattn.theory.channels import GaussianNodes, SoftmaxChannel, output_side
from skattn.theory.channels import _certify, _kernels
from skattn.theory.channels.output import _gaussian_pair
from skattn.theory.channels.prox import _Softmax2Problem

pytestmark = pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="certificate needs numba")

# converged (m, q, Σ) of solve_state_evolution(α, n_tokens=2, target=WishartTarget(0.5)),
# Q0 = 1.5: (α, λ, β) = (0.3, 0.01, 1), (0.3, 0.01, 4), (1.0, 0.001, 4)
FIXED_POINTS = [
    (1.0, 1.2391088124899565, 1.048091800457136, 5.168682009471795),
    (4.0, 0.7594022449639019, 0.4401065415499175, 5.383438073045814),
    (4.0, 1.4670907090419432, 1.4349475132413214, 0.7945415662456075),
]


def _samples(beta, m, q, n=4096, Q0=1.5, seed=0):
    ch = SoftmaxChannel(2, beta=beta, target_beta=beta)
    nodes = GaussianNodes(6, n_points=n, seed=seed)
    omega, w, _, _ = _gaussian_pair(m, q, Q0, nodes, 3)
    return ch, nodes, omega, ch.labels(w), w


@pytest.mark.parametrize("beta, m, q, sigma", FIXED_POINTS)
def test_certified_fraction_at_fixed_points(beta, m, q, sigma):
    ch = SoftmaxChannel(2, beta=beta, target_beta=beta)
    nodes = GaussianNodes(6, n_points=8192)
    kw = dict(m=m, q=q, Q0=1.5, noise=0.0, sigma=sigma, alpha=0.3, nodes=nodes)
    cold = output_side(ch, **kw)
    assert cold.certified_fraction >= 0.9999
    # warm starts from the previous z*: certified again, and the same expectations
    output_side(ch, warm_start=True, **dict(kw, sigma=1.1 * sigma))
    warm = output_side(ch, warm_start=True, **kw)
    assert warm.certified_fraction >= 0.9999
    for key in ("m_hat", "q_hat", "sigma_hat", "moreau", "train_error"):
        assert warm[key] == pytest.approx(cold[key], rel=1e-9)


def _unit_disc(n_side):
    """The points of an ``n_side²`` grid over [−1, 1]² that lie in the unit disc."""
    g = np.linspace(-1.0, 1.0, n_side)
    unit = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2)
    return unit[np.sum(unit ** 2, axis=1) <= 1]


def _objective(prob, n, x):
    return prob.value(np.full(x.shape[0], n), x)


def _solved(beta, m, q, sigma, n, seed=0):
    """The certified prox of ``n`` samples at Σ = sigma: ``(channel, problem, x, F,
    certified)``, x in the coordinates of the problem."""
    ch, _, omega, y, w = _samples(beta, m, q, n=n, seed=seed)
    sig = np.full(omega.shape[0], sigma)
    z, f, cert = ch._prox(y, omega, sig, w)
    return ch, _Softmax2Problem(ch, y, omega, sig), (z - omega) @ ch.basis, f, cert


def test_certificate_rejects_a_local_minimum():
    beta, sigma = 4.0, 0.3      # a small m: ω far from the label's well, several minima
    ch, prob, x_best, f, cert = _solved(beta, 0.1, 1.0, sigma, 512)
    stack = np.empty((4096, 3))
    radius = ch._radius / beta
    found = 0
    for n in np.flatnonzero(cert)[:200]:
        # a local minimum from starts on the sphere of global minimisers' ball
        rad = np.sqrt(2 * sigma * f[n])
        for th in np.linspace(0.0, 2 * np.pi, 12, endpoint=False):
            x0, x1, fl = _kernels._newton2(rad * np.cos(th), rad * np.sin(th), prob.a0[n],
                                           prob.p[n], prob.r[n], sigma, prob.D, beta, radius,
                                           100)
            if fl > f[n] + 1e-4:
                code, c0, c1, _ = _certify.bnb2(x0, x1, fl, prob.a0[n], prob.p[n], prob.r[n],
                                                sigma, prob.D, beta, 1e-9,
                                                2000, stack)
                assert code == _certify.BETTER
                assert _objective(prob, n, np.array([[c0, c1]]))[0] < fl
                # Newton from the better points it returns reaches the global minimum
                ok, _, _, f2 = _certify._certify2(x0, x1, fl, prob.a0[n], prob.p[n],
                                                  prob.r[n], sigma, prob.D, prob.P, beta,
                                                  radius, 100, 1e-9, 2000, stack)
                assert ok and f2 <= f[n] + 1e-9
                found += 1
                break
        # the global one is certified
        code = _certify.bnb2(x_best[n, 0], x_best[n, 1], f[n], prob.a0[n], prob.p[n],
                             prob.r[n], sigma, prob.D, beta, 1e-9, 2000,
                             stack)[0]
        assert code == _certify.CERTIFIED
    assert found > 0
    # a zero budget gives up on a sample that needs a split
    n = np.flatnonzero(cert)[0]
    code = _certify.bnb2(x_best[n, 0], x_best[n, 1], f[n], prob.a0[n], prob.p[n], prob.r[n],
                         sigma, prob.D, beta, 1e-9, 0, stack)[0]
    assert code in (_certify.BUDGET, _certify.CERTIFIED)


@settings(max_examples=15, deadline=None)
@given(beta=st.floats(0.5, 4.0), log_sigma=st.floats(-2.0, 2.5), seed=st.integers(0, 99))
def test_certified_minimiser_beats_a_dense_grid(beta, log_sigma, seed):
    """Certified samples: no point of a dense grid over the ball is lower than F(z*)."""
    sigma = float(np.exp(log_sigma))
    ch, prob, _, f, cert = _solved(beta, 0.5, 0.7, sigma, 32, seed=seed)
    unit = _unit_disc(161)
    for n in np.flatnonzero(cert):
        pts = unit * np.sqrt(2 * sigma * f[n])
        assert np.min(_objective(prob, n, pts)) >= f[n] - 1e-9


def test_state_evolution_reports_certified_fraction():
    from skattn.data import WishartTarget
    from skattn.theory import solve_state_evolution
    res = solve_state_evolution(0.3, n_tokens=2, reg_lambda=0.01, target=WishartTarget(0.5),
                                options=dict(n_nodes=256))
    assert res.converged
    assert res.certified_fraction == 1.0
    lin = solve_state_evolution(0.3, n_tokens=1, attention="linear", reg_lambda=0.01,
                                target=WishartTarget(0.5), options=dict(n_nodes=256))
    assert lin.certified_fraction == 1.0


@settings(max_examples=60, deadline=None)
@given(c=st.floats(-3.0, 5.0), lo=st.floats(0.0, 1.0), width=st.floats(0.0, 1.0))
def test_interval_curvature_minimum_is_a_tight_lower_bound(c, lo, width):
    # ℓ'' / β² as a quartic in σ: its exact minimum over [lo, hi] against a dense grid of
    # the original formula (a bound that could fail: too high, or far too low)
    hi = min(1.0, lo + width)
    t = np.linspace(lo, hi, 20001)
    h = 4 * t ** 2 * (1 - t) ** 2 + 2 * (2 * t - c) * t * (1 - t) * (1 - 2 * t)
    bound = _certify._hmin2(c, lo, hi)
    assert bound <= h.min() + 1e-13
    assert bound >= h.min() - 1e-8 * (1 + abs(c))


@settings(max_examples=60, deadline=None)
@given(c=st.floats(-3.0, 5.0), a0=st.floats(-3.0, 3.0), e=st.floats(0.0, 5.0),
       beta=st.floats(0.5, 4.0), log_a=st.floats(-3.0, 2.0))
def test_row_curvature_from_stationary_points_is_a_tight_lower_bound(c, a0, e, beta, log_a):
    # the separable bound's curvature of φ = A u² + B u + ℓ(a0 + u) over [−e, e], from the
    # stationary points of ℓ''/β² (pieces found once per row, each bracketed on first
    # need), against a dense grid of the formula (it could fail: a bracket that misses a
    # stationary point, or a floor too high)
    p_label, r_label, A = 0.5 * c, 1.0 - 0.5 * c, float(np.exp(log_a))  # 1 + p − r = c
    stationary = np.empty((2, 4))
    n = _certify._h2_pieces(c, stationary)
    bound = _certify._row_curvature(e, 0.0, A, a0, p_label, r_label, beta, stationary, n)
    t = 1 / (1 + np.exp(-beta * (a0 + np.linspace(-e, e, 20001))))
    h = 4 * t ** 2 * (1 - t) ** 2 + 2 * (2 * t - c) * t * (1 - t) * (1 - 2 * t)
    exact = 2 * A + beta ** 2 * min(0.0, h.min())
    assert bound <= exact + 1e-12
    assert bound >= exact - 1e-7 * beta ** 2 * (1 + abs(c))


@settings(max_examples=40, deadline=None)
@given(c=st.floats(-3.0, 5.0), a0=st.floats(-3.0, 3.0),
       es=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=6), beta=st.floats(0.5, 4.0))
def test_row_curvature_is_the_same_whichever_pieces_were_bracketed_before(c, a0, es, beta):
    # a row's bisection over e reuses the brackets of earlier bounds: each bound equals
    # the one from fresh pieces, bit for bit
    p_label, r_label = 0.5 * c, 1.0 - 0.5 * c
    shared = np.empty((2, 4))
    n = _certify._h2_pieces(c, shared)
    for e in es:
        fresh = np.empty((2, 4))
        _certify._h2_pieces(c, fresh)
        assert _certify._row_curvature(e, 0.0, 0.1, a0, p_label, r_label, beta, shared, n) \
            == _certify._row_curvature(e, 0.0, 0.1, a0, p_label, r_label, beta, fresh, n)


@settings(max_examples=80, deadline=None)
@given(c=st.floats(0.0, 2.0), a0=st.floats(-3.0, 3.0), beta=st.floats(0.5, 4.0),
       share=st.floats(0.02, 0.98), beyond=st.floats(0.05, 4.0))
def test_convex_reach_is_verified_and_as_wide_as_the_bisection(c, a0, beta, share, beyond):
    # the row's convex interval from the σ-space edge: positive curvature bound on it (or
    # −1, the bisection's cue), and no narrower than a 12-step bisection in u finds. The
    # row is built to need the search: A puts the bound above zero at 0 and below it far
    # out (a share of the way between), and the reach lies past the edge
    p_label, r_label = 0.5 * c, 1.0 - 0.5 * c
    stationary = np.empty((2, 4))
    n = _certify._h2_pieces(c, stationary)

    def curvature(e, A):
        return _certify._row_curvature(e, 0.0, A, a0, p_label, r_label, beta, stationary, n)

    far = 50.0
    near_dip, far_dip = -min(0.0, curvature(0.0, 0.0)), -min(0.0, curvature(far, 0.0))
    assume(far_dip > near_dip + 1e-9)          # else no A has an edge
    A = 0.5 * (near_dip + share * (far_dip - near_dip))
    lo, hi = 0.0, far
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if curvature(mid, A) > 0 else (lo, mid)
    reach = hi * (1.0 + beyond)
    assert curvature(0.0, A) > 0 and not curvature(reach, A) > 0
    e = _certify._convex_reach(0.0, reach, A, a0, p_label, r_label, beta, stationary, n)
    assert e == -1.0 or 0.0 < e <= reach
    if e > 0:
        assert curvature(e, A) > 0
        lo, hi = 0.0, reach
        for _ in range(12):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if curvature(mid, A) > 0 else (lo, mid)
        assert e >= lo - 2e-3 * reach


@settings(max_examples=20, deadline=None)
@given(beta=st.floats(0.5, 4.0), log_sigma=st.floats(-2.0, 2.5), seed=st.integers(0, 99),
       log_w=st.floats(-3.0, 1.0))
def test_cube_curvature_bound_holds_inside_the_cube(beta, log_sigma, seed, log_w):
    # λ_min of the exact Hessian of F at random points of a cube ≥ the cube's bound
    sigma, w = float(np.exp(log_sigma)), float(np.exp(log_w))
    ch, _, omega, y, _ = _samples(beta, 0.5, 0.7, n=4, seed=seed)
    sig = np.full(omega.shape[0], sigma)
    prob = _Softmax2Problem(ch, y, omega, sig)
    rng = np.random.default_rng(seed)
    dn2 = np.sum(prob.D ** 2, axis=1)
    for n in range(omega.shape[0]):
        x = rng.standard_normal(2)
        bound = _certify._curv2_exact(sigma, x[0], x[1], w, prob.a0[n], prob.p[n],
                                      prob.r[n], prob.D, beta, dn2)
        for u in rng.uniform(-w, w, size=(20, 2)):
            z = x + u
            a = prob.a0[n] + prob.D @ z
            sg = 1 / (1 + np.exp(-beta * a))
            cc = 1 + prob.p[n] - prob.r[n]
            lpp = beta ** 2 * (4 * sg ** 2 * (1 - sg) ** 2
                               + 2 * (2 * sg - cc) * sg * (1 - sg) * (1 - 2 * sg))
            H = np.eye(2) / sigma + prob.D.T @ np.diag(lpp) @ prob.D
            assert np.linalg.eigvalsh(H)[0] >= bound - 1e-9


def _local_minima2(prob, n, sigma, f_best, beta, radius, n_starts=16):
    """Newton end points of sample n from starts on circles inside the ball of the global
    minimisers: ``(x0, x1, F)`` rows."""
    rad = np.sqrt(2 * sigma * f_best)
    out = []
    for scale in (0.3, 0.7, 1.0):
        for th in np.linspace(0.0, 2 * np.pi, n_starts, endpoint=False):
            out.append(_kernels._newton2(scale * rad * np.cos(th), scale * rad * np.sin(th),
                                         prob.a0[n], prob.p[n], prob.r[n], sigma, prob.D,
                                         beta, radius, 100))
    return np.array(out)


@settings(max_examples=12, deadline=None)
@given(beta=st.floats(1.0, 4.0), log_sigma=st.floats(-1.5, 2.5), seed=st.integers(0, 99))
def test_separable_bound_certifies_no_worse_minimum(beta, log_sigma, seed):
    """The separable bound never certifies a local minimum that another Newton run beats,
    and where it certifies the global one no point of a dense grid is lower."""
    sigma = float(np.exp(log_sigma))
    ch, prob, _, f, _ = _solved(beta, 0.1, 1.0, sigma, 24, seed=seed)
    N = f.shape[0]
    radius = ch._radius / beta
    stack = np.empty((4096, 3))
    unit = _unit_disc(121)
    for n in range(N):
        ends = _local_minima2(prob, n, sigma, f[n], beta, radius)
        lowest = ends[:, 2].min()
        for x0, x1, fl in ends:
            ok = _certify.certify_separable(x0, x1, prob.a0[n], prob.p[n], prob.r[n], sigma,
                                            prob.D, prob.P, beta, 1e-9, 64, stack)
            if fl > lowest + 1e-6:
                assert not ok
            elif ok:
                pts = unit * np.sqrt(2 * sigma * fl)
                assert np.min(_objective(prob, n, pts)) >= fl - 1e-9


def test_separable_bound_takes_most_samples():
    """At a fixed point with a large Σ (no sample provably convex) the separable bound
    certifies most minimisers by itself, the ball's branch and bound certifies each of them
    too, and the certified prox counts them all."""
    beta, m, q, sigma = FIXED_POINTS[1]
    ch, prob, x, f, cert = _solved(beta, m, q, sigma, 1024)
    N = x.shape[0]
    stack = np.empty((4096, 3))
    sep = np.array([_certify.certify_separable(x[n, 0], x[n, 1], prob.a0[n], prob.p[n],
                                               prob.r[n], sigma, prob.D, prob.P, beta, 1e-9,
                                               64, stack) for n in range(N)])
    assert not np.any(prob.convex())
    assert sep.mean() > 0.9
    codes = np.array([_certify.bnb2(x[n, 0], x[n, 1], f[n], prob.a0[n], prob.p[n], prob.r[n],
                                    sigma, prob.D, beta, 1e-9, 2000, stack)[0]
                      for n in np.flatnonzero(sep)])
    assert np.all(codes == _certify.CERTIFIED)
    assert np.array_equal(cert, sep | cert)
