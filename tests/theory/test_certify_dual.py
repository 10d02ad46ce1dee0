"""The row-wise dual bound of the T ≥ 3 certificate (channels/_certify_dual.py): its
identities, enclosures and Krawczyk test, and that on random row problems it certifies
global minima and never a worse local one."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.theory.channels import (SoftmaxChannel, _certify_dual, _certify_rows, _kernels,
                                    _stationarity)

from certify_samples import assert_set_by_two_scalars, local_minima

pytestmark = pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="certificate needs numba")

TOL = 1e-9 / 12          # the per-row tolerance of certify_dual at T = 6


def _row_problem(seed, T, beta, sigma):
    """A random row problem: (Q, y, t0, ν) and φ with its gradient."""
    rng = np.random.default_rng(seed)
    d = T - 1
    Q = SoftmaxChannel(T, beta=1.0)._row_basis
    y = rng.dirichlet(np.full(T, rng.uniform(0.1, 2.0)))
    t0 = rng.normal(size=d) * rng.uniform(0, 2)
    nu = rng.normal(size=d) * rng.uniform(0, 1)
    A, grad = np.empty(T), np.empty(d)

    def phi(t):
        value = _certify_dual._phi_row(t, t0, nu, 4 * sigma, Q, y, beta, A, grad)
        return value, grad.copy()
    return rng, Q, y, t0, nu, phi


@settings(max_examples=40, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), beta=st.floats(1.0, 4.0),
       log_sigma=st.floats(-1.5, 0.5), seed=st.integers(0, 2 ** 31))
def test_stationary_points_are_set_by_two_scalars(T, beta, log_sigma, seed):
    # at a stationary t of φ each v_c = log s_c solves F_c(v_c, g) = b_c + μ with one μ,
    # Σ r_c = 0, and φ(t) = V(s, g) (module docstring, 2)
    sigma = 10 ** log_sigma
    rng, Q, y, t0, nu, phi = _row_problem(seed, T, beta, sigma)
    cb = t0 - 2 * sigma * nu
    kappa = 4 * sigma * beta ** 2
    b = beta * (Q @ cb)
    const = nu @ t0 - sigma * nu @ nu
    for value, t in local_minima(rng, phi, cb, n_starts=5):
        assert_set_by_two_scalars(beta * (Q @ t), y, kappa, b, const, value)


@settings(max_examples=200, deadline=None)
@given(log_kappa=st.floats(-1, 2), yc=st.floats(0, 1), g_lo=st.floats(-0.25, 1.0),
       log_g_width=st.floats(-8, 0), m_lo=st.floats(-30, 5), log_m_width=st.floats(-8, 1))
def test_coordinate_set_holds_every_solution(log_kappa, yc, g_lo, log_g_width, m_lo,
                                             log_m_width):
    # every v with F(v, g) ∈ [m_lo, m_hi] for some g of the box lies in S_c's intervals,
    # which are sorted, disjoint and at most five
    kappa = 10 ** log_kappa
    g_hi, m_hi = g_lo + 10 ** log_g_width, m_lo + 10 ** log_m_width
    a = m_lo - kappa * max(0.0, 1 - yc - g_lo) - 1.0
    out = np.empty((5, 2))
    k = _certify_dual._coordinate_set(a, 0.0, kappa, yc, g_lo, g_hi, m_lo, m_hi, 1e-6,
                                      np.empty(18), out)
    assert 0 <= k <= 5
    assert np.all(out[:k, 0] <= out[:k, 1])
    assert np.all(out[1:k, 0] > out[:max(k - 1, 0), 1])
    v = np.linspace(a, 0.0, 4001)
    u = np.exp(v)
    level = lambda g: v + kappa * u * (u - yc - g)      # noqa: E731
    feasible = (level(g_hi) <= m_hi) & (level(g_lo) >= m_lo)
    inside = np.zeros_like(feasible)
    for lo, hi in out[:k]:
        inside |= (v >= lo) & (v <= hi)
    assert not np.any(feasible & ~inside)


def _zero(rng, T):
    """A zero (v, μ, g) of the stationarity system with its κ (one per coordinate, as in
    the weighted rows of the split), y and b."""
    y = rng.dirichlet(np.ones(T) * rng.uniform(0.2, 2))
    s = rng.dirichlet(np.ones(T) * rng.uniform(0.2, 2))
    s = np.maximum(s, 1e-9)
    s /= s.sum()
    kappa = 10 ** rng.uniform(-1, 2) * 10 ** rng.uniform(-0.5, 0.5, T)
    g = s @ (s - y)
    mu = rng.normal() * 3
    v = np.log(s)
    b = v + kappa * s * (s - y - g) - mu
    return np.concatenate([v, [mu, g]]), kappa, y, b


def _box_around_zero(seed, T, log_radius):
    """A zero of :func:`_zero` and a random box ``xc ± r`` that holds it."""
    rng = np.random.default_rng(seed)
    x, kappa, y, b = _zero(rng, T)
    r = 10 ** log_radius * rng.uniform(0.1, 1, T + 2) * (1 + np.abs(x))
    xc = x + rng.uniform(-1, 1, T + 2) * r
    return x, kappa, y, b, xc, r


@settings(max_examples=300, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), log_radius=st.floats(-10, 0), seed=st.integers(0, 2 ** 31))
def test_krawczyk_image_holds_the_zero(T, log_radius, seed):
    # every zero in the box lies in its Krawczyk image; so an image disjoint from the box
    # proves there is none
    x, kappa, y, b, xc, r = _box_around_zero(seed, T, log_radius)
    n = T + 2
    Kc, Kr = np.empty(n), np.empty(n)
    if _stationarity._krawczyk(xc, r, kappa, y, b, Kc, Kr, np.empty((7, n, n))):
        assert np.all(np.abs(x - Kc) <= Kr)


@settings(max_examples=300, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), log_kappa=st.floats(-1, 2.5), seed=st.integers(0, 2 ** 31))
def test_arrowhead_inverse_is_the_inverse(T, log_kappa, seed):
    # the Schur-complement inverse of the stationarity Jacobian, where it is used (every
    # diagonal entry of D large enough), is J's inverse as Gauss–Jordan's is
    rng = np.random.default_rng(seed)
    n = T + 2
    x = np.concatenate([np.log(np.maximum(rng.dirichlet(np.ones(T)), 1e-9)),
                        rng.normal(size=2)])
    kappa = rng.normal(size=T) * 10 ** log_kappa
    y = rng.dirichlet(np.ones(T))
    f, ferr, J = np.empty(n), np.empty(n), np.empty((n, n))
    _stationarity._jacobian_point(x, kappa, y, f, ferr, J)
    Y, Y_gj = np.empty((n, n)), np.empty((n, n))
    if _stationarity._invert_arrowhead(J, Y):
        assert _stationarity._invert(J, Y_gj, np.empty((n, n)))
        scale = np.abs(Y_gj).sum(axis=1).max() * np.abs(J).sum(axis=1).max()
        np.testing.assert_allclose(Y, Y_gj, rtol=0, atol=1e-11 * scale * np.abs(Y_gj).max())
    else:
        d = np.abs(np.diag(J)[:T])
        # it declines at a small pivot of D or a nearly singular J only
        assert d.min() < _stationarity._ARROWHEAD_PIVOT * np.abs(J).max() \
            or np.linalg.cond(J) > 1e10


def test_arrowhead_inverse_leaves_a_small_pivot_to_gauss_jordan():
    # a diagonal entry of D at 0 (a coordinate at F_c's turning point): the Schur form
    # declines, and the Krawczyk centre still inverts J by pivoting
    T, n = 4, 6
    y = np.full(T, 0.25)
    x = np.concatenate([np.log(np.full(T, 0.25)), [0.3, 0.0]])
    u = 0.25
    kappa = np.full(T, 2.0)
    kappa[1] = -1.0 / (u * (2 * u - y[1] - x[-1]))     # J[1, 1] = 1 + κ u (2u − y − g) = 0
    f, ferr, J = np.empty(n), np.empty(n), np.empty((n, n))
    _stationarity._jacobian_point(x, kappa, y, f, ferr, J)
    assert abs(J[1, 1]) < 1e-12
    assert not _stationarity._invert_arrowhead(J, np.empty((n, n)))
    work = np.empty((7, n, n))
    assert _stationarity._krawczyk_centre(x, kappa, y, np.zeros(T), None, work)
    np.testing.assert_allclose(work[2] @ J, np.eye(n), atol=1e-10)


def _dense_image(xc, r, kappa, y, work):
    """The Krawczyk image from the whole matrices: ``x̃ − Y f`` and ``|I − Y J(X)|``'s
    bound by numpy products over all entries, J(X) the interval hull of the Jacobian on
    the box by its entries' ranges."""
    T = y.shape[0]
    n = T + 2
    f, J, Y = work[0, 0], work[1], work[2]
    lo, hi = J.copy(), J.copy()
    ul, uh = np.exp(xc[:T] - r[:T]), np.exp(xc[:T] + r[:T])
    g_lo, g_hi = xc[T + 1] - r[T + 1], xc[T + 1] + r[T + 1]
    for c in range(T):
        a = [u * (2 * w - y[c] - g) for u in (ul[c], uh[c]) for w in (ul[c], uh[c])
             for g in (g_lo, g_hi)]
        lo[c, c] = 1 + min(kappa[c] * min(a), kappa[c] * max(a))
        hi[c, c] = 1 + max(kappa[c] * min(a), kappa[c] * max(a))
        lo[c, T + 1], hi[c, T + 1] = sorted((-kappa[c] * ul[c], -kappa[c] * uh[c]))
        lo[T, c], hi[T, c] = ul[c], uh[c]
        a = [u * (2 * w - y[c]) for u in (ul[c], uh[c]) for w in (ul[c], uh[c])]
        lo[T + 1, c], hi[T + 1, c] = min(a), max(a)
    C = np.abs(np.eye(n) - Y @ (0.5 * (lo + hi))) + np.abs(Y) @ (0.5 * (hi - lo))
    return xc - Y @ f, C @ r


@settings(max_examples=300, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), log_radius=st.floats(-10, 0), seed=st.integers(0, 2 ** 31))
def test_krawczyk_image_on_the_arrowhead_is_that_of_the_whole_matrices(T, log_radius, seed):
    # the image sums over the Jacobian's pattern only (rows c, T, T + 1 of column c; the
    # μ and g columns): the same image as the products over every entry
    _, kappa, y, b, xc, r = _box_around_zero(seed, T, log_radius)
    n = T + 2
    Kc, Kr, work = np.empty(n), np.empty(n), np.empty((7, n, n))
    if _stationarity._krawczyk(xc, r, kappa, y, b, Kc, Kr, work):
        centre, spread = _dense_image(xc, r, kappa, y, work)
        scale = np.abs(work[2]) @ (np.abs(work[1]) @ (np.abs(xc) + r) + np.abs(work[0, 0]))
        np.testing.assert_allclose(Kc, centre, rtol=0, atol=1e-12 * (1 + scale.max()))
        # Kr adds the residual's rounding bound and a relative margin to C r
        assert np.all(Kr >= spread * (1 - 1e-9) - 1e-12 * (1 + scale.max()))
        ferr_part = np.abs(work[2]) @ work[0, 1]
        assert np.all(Kr <= (spread + ferr_part) * (1 + 1e-6) + 1e-12 * (1 + scale.max()))


@settings(max_examples=300, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), log_radius=st.floats(-10, 0.5),
       seed=st.integers(0, 2 ** 31))
def test_contraction_keeps_the_zero_and_shrinks_the_box(T, log_radius, seed):
    # hull consistency of Σ e^v = 1 and g = Σ e^v(e^v − y): a box holding a zero keeps
    # it, and what comes back lies inside the box
    x, _, y, _, xc, r = _box_around_zero(seed, T, log_radius)
    xk, rk = xc.copy(), r.copy()
    assert _certify_dual._contract(xk, rk, y, 1e-12 * T)
    assert np.all(np.abs(x - xk) <= rk * (1 + 1e-12) + 1e-15)
    assert np.all(xk - rk >= xc - r - 1e-12 * (1 + np.abs(xc)))
    assert np.all(xk + rk <= xc + r + 1e-12 * (1 + np.abs(xc)))


@pytest.mark.parametrize("T", [3, 4, 6])
def test_contraction_empties_a_box_without_a_zero(T):
    # probabilities that cannot sum to one, and a g range that misses every Σ u(u − y)
    y = np.full(T, 1 / T)
    n = T + 2
    low = np.concatenate([np.full(T, math.log(0.5 / T)), [0.0, 0.0]])
    assert not _certify_dual._contract(low, np.full(n, 1e-3), y, 1e-12 * T)
    xk = np.concatenate([np.full(T, math.log(1 / T)), [0.0, 5.0]])
    assert not _certify_dual._contract(xk, np.full(n, 1e-3), y, 1e-12 * T)
    # one wide coordinate next to narrow ones that sum to 1/2: it shrinks around 1/2, and
    # g to the range of Σ u(u − y) there
    xk = np.concatenate([[math.log(0.1)], np.full(T - 1, math.log(0.5 / (T - 1))), [0, 0]])
    rk = np.concatenate([[2.3], np.full(T - 1, 1e-3), [0, 1]])
    assert _certify_dual._contract(xk, rk, y, 1e-12 * T)
    assert abs(xk[0] - math.log(0.5)) <= rk[0] < 0.01
    assert rk[T + 1] < 0.01


@settings(max_examples=300, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), log_radius=st.floats(-10, 0), seed=st.integers(0, 2 ** 31))
def test_value_floor_is_below_the_value(T, log_radius, seed):
    x, kappa, y, _, xc, r = _box_around_zero(seed, T, log_radius)
    s, g = np.exp(x[:T]), x[T + 1]
    const = np.random.default_rng(seed + 1).normal()
    V = kappa @ (s * (s - y - g)) ** 2 + (s - y) @ (s - y) + const
    assert _certify_dual._value_floor(xc, r, kappa, y, const, None) <= V


@settings(max_examples=60, deadline=None)
@given(T=st.sampled_from([3, 4, 5, 6]), beta=st.floats(2.0, 4.0),
       log_sigma=st.floats(-0.7, 0.7), seed=st.integers(0, 2 ** 31))
def test_row_bound_never_certifies_a_worse_local_minimum(T, beta, log_sigma, seed):
    # row problems with large Σβ² (often several local minima): a stationary point above
    # the lowest one found is never certified
    sigma = 10 ** log_sigma
    rng, Q, y, t0, nu, phi = _row_problem(seed, T, beta, sigma)
    minima = local_minima(rng, phi, t0 - 2 * sigma * nu)
    if not minima:
        return
    cap = _certify_rows.third_derivative_bounds(y[None, None])[0, 0]
    best = minima[0][0]
    for value, t in minima[1:]:
        if value > best + TOL:
            code, _, _ = _certify_dual._row_dual(t, t0, nu, sigma, Q, y, beta, cap, TOL, 3000)
            assert code != _certify_rows.CERTIFIED


@pytest.mark.parametrize("T", [3, 4, 5, 6])
def test_row_bound_certifies_global_minima(T):
    # completeness on the same kind of problems: 40 seeds per T, the lowest minimum found
    # is certified at least 95 % of the time (all of them when this test was written)
    certified, total = 0, 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        beta, sigma = rng.uniform(2, 4), 10 ** rng.uniform(-0.7, 0.7)
        rng, Q, y, t0, nu, phi = _row_problem(seed, T, beta, sigma)
        minima = local_minima(rng, phi, t0 - 2 * sigma * nu, n_starts=20)
        if not minima:
            continue
        cap = _certify_rows.third_derivative_bounds(y[None, None])[0, 0]
        code, slack, _ = _certify_dual._row_dual(minima[0][1], t0, nu, sigma, Q, y, beta,
                                                 cap, TOL, 3000)
        total += 1
        certified += code == _certify_rows.CERTIFIED
        assert slack <= 0.5 * TOL or code != _certify_rows.CERTIFIED
    assert total >= 30
    assert certified >= 0.95 * total


@settings(max_examples=60, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), beta=st.floats(1.0, 4.0),
       log_sigma=st.floats(-1.5, 0.5), log_offset=st.floats(-6, 0),
       seed=st.integers(0, 2 ** 31))
def test_convex_cube_is_convex_and_holds_the_minimiser(T, beta, log_sigma, log_offset, seed):
    # the cube of half-width e around a point near a row minimum (up to 1 away): φ's
    # Hessian (central differences of its gradient) at random points of it is at least
    # half the curvature at the centre, and e exceeds the distance 2|∇φ|/curv0 to the
    # cube's minimiser
    sigma = 10 ** log_sigma
    rng, Q, y, t0, nu, phi = _row_problem(seed, T, beta, sigma)
    minima = local_minima(rng, phi, t0 - 2 * sigma * nu, n_starts=4)
    if not minima:
        return
    d = T - 1
    t_star = minima[0][1] + rng.normal(size=d) * 10 ** log_offset
    _, grad = phi(t_star)
    cap = _certify_rows.third_derivative_bounds(y[None, None])[0, 0]
    A, lo, hi, widths = np.empty(T), np.empty(T), np.empty(T), np.empty(d)
    e, slack, curv0 = _certify_dual._convex_cube(t_star, sigma, Q, y, beta, cap,
                                                 float(grad @ grad), A, lo, hi,
                                                 np.empty((d, d)), widths)
    if e == 0:
        return
    assert e > 2 * np.linalg.norm(grad) / curv0
    assert slack == pytest.approx(float(grad @ grad) / curv0)
    h = 1e-5
    for _ in range(10):
        t = t_star + rng.uniform(-e, e, size=d)
        H = np.array([(phi(t + h * unit)[1] - phi(t - h * unit)[1]) / (2 * h)
                      for unit in np.eye(d)])
        assert np.linalg.eigvalsh(0.5 * (H + H.T))[0] >= 0.5 * curv0 - 1e-4 * (1 + curv0)


def test_found_point_box_proves_one_zero():
    # around a zero, the box found has the zero inside and its Krawczyk image strictly
    # inside it
    rng = np.random.default_rng(4)
    checked = 0
    for _ in range(50):
        T = int(rng.integers(3, 7))
        x, kappa, y, b = _zero(rng, T)
        n = T + 2
        lo, hi, r, Kc, Kr = (np.empty(n) for _ in range(5))
        rho = _stationarity._found_point_box(x.copy(), kappa, y, b, lo, hi, r, Kc, Kr,
                                             np.empty((7, n, n)))
        if rho == 0:
            continue
        assert np.all(lo < x) and np.all(x < hi)
        assert math.isfinite(rho)
        # its image (r, Kc, Kr were scratch) and the box twice as wide, which proves nothing
        work = np.empty((7, n, n))
        assert _stationarity._krawczyk_centre(x, kappa, y, b, None, work)
        w = np.abs(work[2]).sum(axis=1)
        assert rho == 1.0 or not _stationarity._proves_one_zero(x, 2 * rho, w, kappa, y, r,
                                                                Kc, Kr, work)
        assert _stationarity._proves_one_zero(x, rho, w, kappa, y, r, Kc, Kr, work)
        np.testing.assert_allclose(x + r, hi, rtol=0, atol=1e-14 * (1 + np.max(np.abs(x))))
        assert np.all(np.abs(Kc - x) + Kr < r)
        checked += 1
    assert checked >= 20


@settings(max_examples=300, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), log_radius=st.floats(-10, 0.5),
       seed=st.integers(0, 2 ** 31), offset=st.floats(0.0, 3.0))
def test_krawczyk_image_stops_at_the_first_row_that_misses_the_box(T, log_radius, seed,
                                                                  offset):
    # the search's early stop: True exactly where some row of the whole image misses the
    # box, and the rows up to that one are the whole image's, to the last bit (boxes off
    # the zero by ``offset`` radii, so that both answers occur)
    _, kappa, y, b, xc, r = _box_around_zero(seed, T, log_radius)
    xc = xc + offset * r * np.random.default_rng(seed).choice([-1.0, 1.0], T + 2)
    n = T + 2
    work = np.empty((7, n, n))
    if not _stationarity._krawczyk_centre(xc, kappa, y, b, None, work):
        return
    Kc, Kr = np.empty(n), np.empty(n)
    assert not _stationarity._krawczyk_image(xc, r, kappa, y, Kc, Kr, work, False, None)
    missing = np.flatnonzero(np.abs(Kc - xc) > Kr + r)
    Kc2, Kr2 = np.full(n, np.nan), np.full(n, np.nan)
    stopped = _stationarity._krawczyk_image(xc, r, kappa, y, Kc2, Kr2, work, True, None)
    assert stopped == (missing.size > 0)
    rows = missing[0] + 1 if stopped else n
    assert np.array_equal(Kc2[:rows], Kc[:rows]) and np.array_equal(Kr2[:rows], Kr[:rows])


@settings(max_examples=300, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), log_radius=st.floats(-10, 0.5),
       seed=st.integers(0, 2 ** 31), offset=st.floats(0.0, 3.0))
def test_contraction_from_given_ends_is_the_contraction(T, log_radius, seed, offset):
    # the searches take each interval's two exponentials once per box: from them the
    # contraction is the one that computes them, to the last bit (the compiled
    # exponentials, as _known_exp computes them without a memory)
    _, _, y, _, xc, r = _box_around_zero(seed, T, log_radius)
    xc = xc + offset * r * np.random.default_rng(seed).choice([-1.0, 1.0], T + 2)
    xk, rk = xc.copy(), r.copy()
    scratch = np.full((4, T), np.nan)
    kept = _certify_dual._contract_into(xk, rk, y, 1e-12 * T, scratch)
    ends = np.array([[_compiled_exp(xc[c] + side * r[c]) for c in range(T)]
                     for side in (-1, 1)])
    np.testing.assert_allclose(ends, [np.exp(xc[:T] - r[:T]), np.exp(xc[:T] + r[:T])],
                               rtol=1e-15)
    xk2, rk2 = xc.copy(), r.copy()
    scratch2 = np.full((4, T), np.nan)
    scratch2[:2] = ends
    assert _certify_dual._contract_from_ends(xk2, rk2, y, 1e-12 * T, scratch2) == kept
    if kept:
        assert np.array_equal(xk2, xk) and np.array_equal(rk2, rk)
        assert np.array_equal(scratch2, scratch)


def _compiled_exp(v):
    """The compiled exponential of the searches (_known_exp without a memory)."""
    return _stationarity._known_exp(v, 0, 0, None)


@settings(max_examples=300, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), log_radius=st.floats(-10, 0.5),
       seed=st.integers(0, 2 ** 31), offset=st.floats(0.0, 3.0),
       concave=st.booleans())
def test_tests_after_the_contraction_reuse_its_exponentials_exactly(T, log_radius, seed,
                                                                     offset, concave):
    # the contraction leaves its box's ends and their exponentials in its scratch; the
    # value floor and the Krawczyk image take them from there where their argument is
    # that end, and give the numbers they compute without that memory, to the last bit
    _, kappa, y, b, xc, r = _box_around_zero(seed, T, log_radius)
    if concave:
        kappa = kappa * np.where(np.arange(T) % 2, -1.0, 1.0)
    xc = xc + offset * r * np.random.default_rng(seed).choice([-1.0, 1.0], T + 2)
    xk, rk = xc.copy(), r.copy()
    scratch = np.empty((4, T))
    scratch[:2] = [[_compiled_exp(xc[c] + side * r[c]) for c in range(T)] for side in (-1, 1)]
    if not _certify_dual._contract_from_ends(xk, rk, y, 1e-12 * T, scratch):
        return
    for c in range(T):
        # each end left is the contracted box's end, with its compiled exponential
        for side in (0, 1):
            assert scratch[side, c] == _compiled_exp(scratch[2 + side, c])
        assert xk[c] == 0.5 * (scratch[2, c] + scratch[3, c])
        assert rk[c] == 0.5 * (scratch[3, c] - scratch[2, c])
    const = np.random.default_rng(seed + 1).normal()
    assert _certify_dual._value_floor(xk, rk, kappa, y, const, scratch) == \
        _certify_dual._value_floor(xk, rk, kappa, y, const, None)
    n = T + 2
    work = np.empty((7, n, n))
    if not _stationarity._krawczyk_centre(xk, kappa, y, b, None, work):
        return
    images = []
    for known in (scratch, None):
        Kc, Kr = np.empty(n), np.empty(n)
        images.append((_stationarity._krawczyk_image(xk, rk, kappa, y, Kc, Kr, work, False,
                                                     known), Kc, Kr))
    assert images[0][0] == images[1][0]
    assert np.array_equal(images[0][1], images[1][1])
    assert np.array_equal(images[0][2], images[1][2])


@settings(max_examples=200, deadline=None)
@given(T=st.sampled_from([3, 4, 6]), log_radius=st.floats(-10, 0),
       seed=st.integers(0, 2 ** 31), slack_scale=st.floats(0, 1e-2))
def test_centre_with_a_slack_is_the_centre_with_the_slack_added_after(T, log_radius, seed,
                                                                      slack_scale):
    # the star's kinks know b_c only to ± a slack: the centre adds it to the residual's
    # rounding bound, the same sums as adding it after the centre (as the search did)
    _, kappa, y, b, xc, _ = _box_around_zero(seed, T, log_radius)
    slack = slack_scale * np.random.default_rng(seed + 2).uniform(0, 1, T)
    n = T + 2
    plain, with_slack = np.zeros((7, n, n)), np.zeros((7, n, n))
    ok = _stationarity._krawczyk_centre(xc, kappa, y, b, None, plain)
    assert _stationarity._krawczyk_centre(xc, kappa, y, b, slack, with_slack) == ok
    if ok:
        plain[0, 1, :T] += slack
        for k in (0, 1, 2):            # residual and its bound, J, Y
            assert np.array_equal(plain[k], with_slack[k])
