"""The star bound of the T ≥ 3 certificate (channels/_certify_star.py): the branches of a
maximum of quadratics, the column rows' certified minorants, and that neither the star's
search nor the whole star certificate ever certifies a worse local minimum."""

import itertools
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from skattn.theory.channels import (SoftmaxChannel, _certify_dual, _certify_rows, _kernels,
                                    _stationarity)
from skattn.theory.channels import _certify_split as split
from skattn.theory.channels import _certify_star as star
from skattn.theory.channels import _star_search as search

from certify_samples import local_minima, newton_ends, two_basin_nodes, two_basin_samples

pytestmark = pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="certificate needs numba")

TOL = 1e-9


def _psi(pieces, x):
    """``max_p q_p(x)`` and the piece that attains it."""
    values = pieces @ np.array([x * x, x, 1.0])
    return values.max(), int(values.argmax())


@settings(max_examples=80, deadline=None)
@given(P=st.integers(1, 6), seed=st.integers(0, 2 ** 31))
def test_branches_label_the_largest_piece(P, seed):
    rng = np.random.default_rng(seed)
    pieces = np.column_stack([rng.uniform(0.1, 3, P), rng.normal(size=P) * 3,
                              rng.normal(size=P)])
    out = search.branches(pieces)
    kappa, b, const, h_lo, h_hi, piece, kink, n_branch, _, _ = search.branch_arrays(
        [pieces], beta=2.0)
    for x in np.r_[rng.normal(size=200) * 4, [h for _, lo, hi, _, _ in out for h in (lo, hi)
                                               if np.isfinite(h)]]:
        top, _ = _psi(pieces, x)
        holding = [p for p, lo, hi, is_kink, _ in out if lo <= x <= hi and not is_kink]
        assert holding, "every point lies on a segment"
        # a segment's piece is the largest on it (to the slack of its ends)
        assert any(_psi(pieces[[p]], x)[0] >= top - 1e-6 * (1 + abs(top)) for p in holding)
    for j in range(n_branch[0]):
        lo, hi = h_lo[0, j], h_hi[0, j]
        if kink[0, j]:
            # a kink's constant is below the maximum all over its slack interval
            assert all(const[0, j] <= _psi(pieces, x)[0] for x in np.linspace(lo, hi, 9))
        else:
            # a segment's (κ, b, o) is its piece's β²/w, βz and least value
            a2, a1, a0 = pieces[piece[0, j]]
            assert kappa[0, j] == pytest.approx(4.0 / a2)
            assert b[0, j] == pytest.approx(2.0 * -a1 / (2 * a2))
            assert const[0, j] == pytest.approx(a0 - a1 ** 2 / (4 * a2))


def _softmax_loss(u, y, beta):
    """``‖softmax(βu) − y‖²`` and its gradient."""
    s = np.exp(beta * u - np.max(beta * u))
    s /= s.sum()
    g = s @ (s - y)
    return (s - y) @ (s - y), 2 * beta * s * (s - y - g)


def _random_star(seed, T, beta):
    """A random ``Φ̃(u) = Σ_c max_p q_cp(u_c) + ‖softmax(βu) − y‖²`` (1–3 pieces a
    coordinate, weights 0.03–2, as the row problems' where Σ is large) and Φ̃ with its
    gradient (the largest piece's)."""
    rng = np.random.default_rng(seed)
    y = rng.dirichlet(np.full(T, rng.uniform(0.1, 2.0)))
    pieces = []
    for _ in range(T):
        P = rng.integers(1, 4)
        pieces.append(np.column_stack([10 ** rng.uniform(-1.5, 0.3, P),
                                       rng.normal(size=P) * 0.3, rng.normal(size=P) * 0.1]))

    def phi(u):
        val, grad = _softmax_loss(u, y, beta)
        for c in range(T):
            top, p = _psi(pieces[c], u[c])
            val += top
            grad[c] += 2 * pieces[c][p, 0] * u[c] + pieces[c][p, 1]
        return val, grad
    return rng, y, pieces, phi


def _found_first(pieces, u):
    """The pieces reordered so that the largest at ``u_c`` comes first; None where another
    is within 1e-6 of it (u at a kink: not a smooth stationary point)."""
    out = []
    for q, x in zip(pieces, u):
        values = q @ np.array([x * x, x, 1.0])
        order = np.argsort(-values)
        if len(q) > 1 and values[order[0]] - values[order[1]] < 1e-6:
            return None
        out.append(q[order])
    return out


@settings(max_examples=150, deadline=None)
@given(T=st.sampled_from([3, 4]), beta=st.floats(4.0, 8.0), seed=st.integers(0, 2 ** 31))
def test_star_search_never_certifies_a_worse_local_minimum(T, beta, seed):
    # (at β = 4–8 about one draw in fourteen has a worse smooth local minimum)
    rng, y, pieces, phi = _random_star(seed, T, beta)
    minima = local_minima(rng, phi, np.zeros(T))
    if not minima:
        return
    best = minima[0][0]
    for value, u in minima[1:]:
        ordered = _found_first(pieces, u)
        if value <= best + TOL or ordered is None:
            continue
        code, _, point, below = search.star_bound(ordered, u, y, beta, TOL, 3000)
        assert code != _certify_rows.CERTIFIED
        if code == _certify_rows.NONCONVEX:       # its witness is below the found point
            assert phi(point)[0] < value - TOL
            assert phi(point)[0] - value == pytest.approx(below, abs=1e-9)


@pytest.mark.parametrize("T", [3, 4])
def test_star_search_certifies_global_minima(T):
    # completeness: the lowest smooth minimum that BFGS finds is certified, or the search
    # shows a lower point (a minimum at a kink that BFGS missed), 90 % of the time
    right, total = 0, 0
    for seed in range(150):
        beta = np.random.default_rng(seed).uniform(2, 4)
        rng, y, pieces, phi = _random_star(seed, T, beta)
        minima = local_minima(rng, phi, np.zeros(T), n_starts=20)
        ordered = _found_first(pieces, minima[0][1]) if minima else None
        if ordered is None:
            continue
        total += 1
        code, _, point, _ = search.star_bound(ordered, minima[0][1], y, beta, TOL, 3000)
        right += code == _certify_rows.CERTIFIED or (
            code == _certify_rows.NONCONVEX and phi(point)[0] < minima[0][0] - TOL)
    assert total >= 20
    assert right >= 0.9 * total


def _column_psi(H, H0, L, y, Wsplit, beta, a, c, eta, rng):
    """ψ_c(η) of the module docstring (1) under the split ``Wsplit`` by multi-start BFGS
    over row c's other entries: an upper estimate of the least value."""
    T = y.shape[1]
    nu = split._multipliers(H, H0, L, Wsplit, c)
    w = Wsplit[c].copy()
    centre, offset = H0[c] - nu / (2 * w), float(np.sum(nu * H0[c] - nu ** 2 / (4 * w)))
    keep = [j for j in range(T) if j != a]

    def f(v):
        h = np.empty(T)
        h[keep], h[a] = v, eta
        e = np.exp(beta * h - np.max(beta * h))
        e /= e.sum()
        g = e @ (e - y[c])
        grad = 2 * w * (h - centre) + 2 * beta * e * (e - y[c] - g)
        return w @ (h - centre) ** 2 + offset + (e - y[c]) @ (e - y[c]), grad[keep]
    best = np.inf
    for k in range(8):
        x0 = H[c][keep] + (0 if k == 0 else rng.normal(size=T - 1))
        best = min(best, minimize(f, x0, jac=True, method="BFGS").fun)
    return best - nu[a] * eta


def _random_split(T, sigma, rng):
    """A split of the quadratic (``W_ac + W_ca = 1/(2Σ)``) with shares in [0.1, 0.9]."""
    theta = rng.uniform(0.1, 0.9, T * (T - 1) // 2) / (2 * sigma)
    return split._split_weights(theta, sigma, T)


@pytest.mark.parametrize("T", [3, 4])
@pytest.mark.parametrize("which", ["equal", "random"])
def test_column_pieces_are_minorants_of_the_column_response(T, which):
    # every certified piece (tangent quadratics of positive and negative share, lines of
    # the fan and lines tangent at chosen points) lies below ψ_c + row a's quadratic
    # wherever BFGS can reach, under the equal split and under unequal ones
    ch, omega, y, _ = two_basin_samples(T, n=40)
    sigma, beta = 0.5, ch.beta_
    rng = np.random.default_rng(1)
    checked = negative = 0
    for n in range(0, 40, 4):
        Wsplit = np.full((T, T), 1 / (4 * sigma)) if which == "equal" else \
            _random_split(T, sigma, rng)
        x = newton_ends(ch, omega[n], y[n], sigma, rng)[0][1]
        rows = _certify_dual.found_rows(x, omega[n], y[n], sigma, ch.basis, ch._index,
                                        ch._scale, beta)
        H, H0 = rows[0], rows[1]
        a = n % T
        low = H[a] + rng.normal(size=T)
        for c in range(T):
            if c == a:
                continue
            cols = [star._Column(*rows, y[n], Wsplit, beta, a, c, TOL, 2000)
                    for _ in range(2)]
            cols = [col for col, shares in zip(cols, (star.SHARES, (-0.5,)))
                    if col.tangent(shares)]
            if not cols:
                continue
            col, pieces = cols[0], [col.pieces[0] for col in cols]
            lams = [t * 2 * Wsplit[a, c] * (low[c] - H[a, c]) for t in star.SLOPES]
            lams += [col.slope_at(H[a, c] + d) for d in (-0.5, 0.5)]
            pieces += [q for q in map(col.line, lams) if q is not None]
            for eta in H[a, c] + np.linspace(-2, 2, 7):
                psi = _column_psi(*rows, y[n], Wsplit, beta, a, c, eta, rng)
                top = _psi(np.array(pieces), eta)[0]
                assert top <= psi + Wsplit[a, c] * (eta - H0[a, c]) ** 2 + 1e-7
            checked += len(pieces) > 2
            negative += any(col.pieces[0][0] < Wsplit[a, c] for col in cols)
    assert checked >= 3 and negative >= 1


@pytest.mark.parametrize("T", [3, 4])
def test_star_rejects_a_local_minimum(T):
    # the worse of two Newton ends of one node's prox is never certified by the star of
    # any of its rows, under the equal split or unequal ones, nor by the split search
    # with that row left out followed by its star; the better one is, at some nodes, by
    # the whole certificate
    ch, omega, y, _ = two_basin_samples(T)
    sigma, beta = 0.5, ch.beta_
    rng = np.random.default_rng(0)
    found = better = 0
    for n, ends in two_basin_nodes(ch, omega, y, sigma, rng, limit=6):
        found += 1
        rows = _certify_dual.found_rows(ends[-1][1], omega[n], y[n], sigma, ch.basis,
                                        ch._index, ch._scale, beta)
        for theta in (np.full(T * (T - 1) // 2, 1 / (4 * sigma)),
                      rng.uniform(0.1, 0.9, T * (T - 1) // 2) / (2 * sigma)):
            codes, points, excesses, _ = split.split_rows(*rows, y[n], sigma, beta, theta,
                                                          TOL, 2000)
            Wsplit = split._split_weights(theta, sigma, T)
            for a in range(T):
                low = points[a] if codes[a] == _certify_rows.NONCONVEX else \
                    rows[0][a] + rng.normal(size=T)
                assert not star.certify_star(*rows, y[n], Wsplit, beta, a, low,
                                             min(excesses[a], -1e-3), TOL, 2000)
        for a in range(T):
            held, _, _, (theta, *_) = split.split_search(*rows, y[n], sigma, beta, TOL, 2000,
                                                         8, 0.1, ignore=a)
            assert not held or not star.certify_star(
                *rows, y[n], split._split_weights(theta, sigma, T), beta, a,
                rows[0][a] + rng.normal(size=T), -1e-3, TOL, 2000)
        assert not star.certify_sample(ends[-1][1], omega[n], y[n], sigma, ch.basis,
                                       ch._index, ch._scale, beta, TOL, 2000)[0]
        better += star.certify_sample(ends[0][1], omega[n], y[n], sigma, ch.basis,
                                      ch._index, ch._scale, beta, TOL, 2000)[0]
    assert found >= 3 and better >= 1


def test_star_bound_is_a_checked_flag():
    ch = SoftmaxChannel(3, beta=2.0)
    ch.star_bound = "yes"
    rng = np.random.default_rng(0)
    omega = rng.normal(size=(4, ch.K))
    with pytest.raises(TypeError, match="star_bound"):
        ch.prox(ch.labels(omega), omega, 50.0)


def _krawczyk_drops(xk, rk, kappa, yrow, b, const, target, has_box, Xlo, Xhi, Kc, Kr, work,
                    b_slack, known):
    """The Krawczyk test as the searches run it: its three compiled parts in turn."""
    if not _stationarity._krawczyk_centre(xk, kappa, yrow, b, b_slack, work):
        return False
    if _stationarity._krawczyk_image(xk, rk, kappa, yrow, Kc, Kr, work, True, known):
        return True
    return _certify_dual._krawczyk_rest(xk, rk, kappa, yrow, const, target, has_box, Xlo,
                                        Xhi, Kc, Kr, known)


@settings(max_examples=60, deadline=None)
@given(T=st.integers(3, 6), seed=st.integers(0, 2 ** 31), t=st.floats(-1, 1))
def test_krawczyk_keeps_a_kink_anywhere_in_its_slack(T, seed, t):
    # a zero of the stationarity system whose kink coordinate's centre b_c lies anywhere
    # in b_mid ± slack is never dropped as "no stationary point" when the slack is given;
    # without it, a kink placed off the middle by more than the box is (the test bites)
    rng = np.random.default_rng(seed)
    y = rng.dirichlet(np.ones(T))
    s = rng.dirichlet(np.ones(T))
    v, mu = np.log(s), rng.normal()
    g = s @ (s - y)
    kappa = rng.uniform(0.1, 20, T)
    kappa[0] = 0.0                              # coordinate 0 sits on a kink
    b = v + kappa * s * (s - y - g) - mu       # so that (v, μ, g) is a zero
    slack = np.zeros(T)
    slack[0] = 1e-2
    b_mid = b.copy()
    b_mid[0] -= t * slack[0]
    x0 = np.r_[v, mu, g]
    r = np.full(T + 2, 1e-3)
    work = np.empty((7, T + 2, T + 2))
    Kc, Kr = np.empty(T + 2), np.empty(T + 2)
    args = (y, b_mid, 0.0, np.inf, False, np.zeros(T + 2), np.zeros(T + 2), Kc, Kr, work)
    assert not _krawczyk_drops(x0.copy(), r.copy(), kappa, *args, slack, None)
    if abs(t) > 0.5:
        assert _krawczyk_drops(x0.copy(), r.copy(), kappa, *args, None, None)


# ------------------------------------------------------------------ pieces valid on intervals
@settings(max_examples=40, deadline=None)
@given(P=st.integers(1, 5), seed=st.integers(0, 2 ** 31), bounded=st.booleans())
def test_branches_are_remembered_by_value(P, seed, bounded):
    # branch_arrays remembers the branches of each coordinate's pieces: what it hands out
    # is what branches computes, for these pieces and for pieces one value away
    rng = np.random.default_rng(seed)
    pieces = np.column_stack([rng.uniform(0.1, 3, P), rng.normal(size=P) * 3,
                              rng.normal(size=P)])
    lo = rng.normal(size=P) * 2
    valid = np.column_stack([lo, lo + rng.uniform(0.1, 3, P)]) if bounded else None
    moved = pieces.copy()
    moved[-1, 2] += 0.5
    for q in (pieces, moved, pieces):
        assert list(search._cached_branches(q, valid)) == search.branches(q, valid)


def _psi_valid(pieces, valid, x):
    """``max q_p(x)`` over the pieces valid at x (−∞ where none is)."""
    values = [q @ np.array([x * x, x, 1.0]) for q, (lo, hi) in zip(pieces, valid)
              if lo <= x <= hi]
    return max(values, default=-np.inf)


@settings(max_examples=80, deadline=None)
@given(P=st.integers(1, 5), seed=st.integers(0, 2 ** 31))
def test_branches_of_pieces_valid_on_intervals(P, seed):
    # Ψ = the largest piece valid at η, pieces on random intervals (some bounded, some
    # concave there), one piece valid everywhere or none: every point of the domain lies
    # on a segment whose piece is valid there and at most Ψ (within the kink slack), every
    # kink's constant is at most Ψ on its slack, and no segment reaches outside the domain
    rng = np.random.default_rng(seed)
    pieces = np.column_stack([rng.uniform(-1, 3, P), rng.normal(size=P) * 3,
                              rng.normal(size=P)])
    lo = rng.normal(size=P) * 2
    valid = np.column_stack([lo, lo + rng.uniform(0.1, 3, P)])
    if rng.random() < 0.5:                      # a global piece of positive weight
        pieces[0, 0], valid[0] = abs(pieces[0, 0]) + 0.1, (-np.inf, np.inf)
    out = search.branches(pieces, valid)
    _, _, const, h_lo, h_hi, _, kink, n_branch, _, _ = search.branch_arrays(
        [pieces], 2.0, [valid])
    slack = 1e-6
    for x in np.r_[rng.normal(size=300) * 4, valid[np.isfinite(valid)]]:
        top = _psi_valid(pieces, valid, x)
        holding = [p for p, a, b, is_kink, _ in out if a <= x <= b and not is_kink]
        if top == -np.inf:
            # outside the domain: a segment may reach only its slack past an end
            assert all(min(abs(x - valid[p]).min(), np.inf) <= slack * (1 + abs(x))
                       for p in holding)
            continue
        assert holding, "every point of the domain lies on a segment"
        for p in holding:
            near = valid[p, 0] - slack * (1 + abs(x)) <= x <= valid[p, 1] + slack * (1 + abs(x))
            assert near, "a segment's piece is valid on it"
            if valid[p, 0] <= x <= valid[p, 1]:
                assert pieces[p] @ np.array([x * x, x, 1.0]) <= top + 1e-9 * (1 + abs(top))
    for j in range(n_branch[0]):
        if kink[0, j]:
            for x in np.linspace(h_lo[0, j], h_hi[0, j], 9):
                top = _psi_valid(pieces, valid, x)
                assert top == -np.inf or const[0, j] <= top + 1e-9 * (1 + abs(top))


def _boxed_problem(seed, T, beta, concave=(0.05, 1.0)):
    """A random Φ̃ with coordinate 0 boxed in [lo, hi] and concave there (weight in
    −``concave``), the others one convex quadratic each; Φ̃ with its gradient, and the
    box."""
    rng = np.random.default_rng(seed)
    y = rng.dirichlet(np.full(T, rng.uniform(0.3, 2.0)))
    pieces = [np.array([[10 ** rng.uniform(-1.5, 0.3), rng.normal() * 0.3,
                         rng.normal() * 0.1]]) for _ in range(T)]
    pieces[0][0, 0] = -rng.uniform(*concave)
    lo = rng.normal() * 0.5
    box = (lo, lo + rng.uniform(0.3, 2.0))

    def phi(u):
        val, grad = _softmax_loss(u, y, beta)
        for c in range(T):
            a2, a1, a0 = pieces[c][0]
            val += (a2 * u[c] + a1) * u[c] + a0
            grad[c] += 2 * a2 * u[c] + a1
        return val, grad
    return rng, y, pieces, box, phi


def _boxed_minima(rng, phi, T, box, n_starts=30):
    """Distinct local minima (value, point) of Φ̃ with u_0 inside the box (L-BFGS-B), the
    points strictly inside and stationary; lowest first, and the least value seen."""
    bounds = [box] + [(None, None)] * (T - 1)
    found, least = [], np.inf
    for _ in range(n_starts):
        x0 = np.r_[rng.uniform(*box), rng.normal(size=T - 1)]
        res = minimize(phi, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 3000})
        least = min(least, res.fun)
        inside = box[0] + 1e-6 < res.x[0] < box[1] - 1e-6
        if inside and np.linalg.norm(phi(res.x)[1]) < 1e-9 and all(
                np.linalg.norm(res.x - x) > 1e-4 for _, x in found):
            found.append((float(res.fun), res.x))
    return sorted(found, key=lambda m: m[0]), least


@settings(max_examples=150, deadline=None)
@given(T=st.sampled_from([3, 4]), beta=st.floats(4.0, 8.0), seed=st.integers(0, 2 ** 31))
def test_boxed_concave_coordinate_never_certifies_a_worse_point(T, beta, seed):
    # a coordinate boxed and concave (κ < 0 in the search): a stationary point inside the
    # box above the least value of Φ̃ on the box (a worse local minimum, or one beaten at
    # the box's end) is never certified (about one draw in ten has one)
    rng, y, pieces, box, phi = _boxed_problem(seed, T, beta, concave=(0.01, 0.5))
    minima, least = _boxed_minima(rng, phi, T, box)
    for value, u in minima:
        if value <= least + 1e-7:
            continue
        valid = [[box]] + [None] * (T - 1)
        domain = [None] + [q[0] for q in pieces[1:]]
        code = search.star_bound(pieces, u, y, beta, TOL, 3000, valid, domain)[0]
        assert code != _certify_rows.CERTIFIED


@pytest.mark.parametrize("T", [3, 4])
def test_boxed_concave_coordinate_certifies_the_least_point(T):
    # completeness: where the lowest point found lies inside the box and is stationary,
    # the search certifies it or shows a lower point, 90 % of the time
    right = total = 0
    for seed in range(200):
        beta = np.random.default_rng(seed).uniform(3, 6)
        rng, y, pieces, box, phi = _boxed_problem(seed, T, beta, concave=(0.01, 0.2))
        minima, least = _boxed_minima(rng, phi, T, box, n_starts=20)
        if not minima or minima[0][0] > least + 1e-9:
            continue
        total += 1
        valid = [[box]] + [None] * (T - 1)
        domain = [None] + [q[0] for q in pieces[1:]]
        code, _, point, _ = search.star_bound(pieces, minima[0][1], y, beta, TOL, 3000,
                                              valid, domain)
        right += code == _certify_rows.CERTIFIED or (
            code == _certify_rows.NONCONVEX and phi(point)[0] < least - TOL)
    assert total >= 15
    assert right >= 0.9 * total


def _equal_split_columns(T, rng):
    """Column rows of the star under the equal split whose tangent proves, over one
    node in four of the two-basin samples: ``(rows, yrow, W, a, c, column)``."""
    ch, omega, y, _ = two_basin_samples(T, n=40)
    sigma, beta = 0.5, ch.beta_
    for n in range(0, 40, 4):
        Wsplit = np.full((T, T), 1 / (4 * sigma))
        x = newton_ends(ch, omega[n], y[n], sigma, rng)[0][1]
        rows = _certify_dual.found_rows(x, omega[n], y[n], sigma, ch.basis, ch._index,
                                        ch._scale, beta)
        a = n % T
        for c in range(T):
            if c == a:
                continue
            col = star._Column(*rows, y[n], Wsplit, beta, a, c, TOL, 2000)
            if col.tangent():
                yield rows, y[n], Wsplit, a, c, col


def _below_psi(q, rows, yrow, W, beta, a, c, etas, rng):
    """Whether the piece q lies below ψ_c + row a's quadratic at each η (BFGS's estimate
    of ψ_c)."""
    H0 = rows[1]
    return all(q @ np.array([eta ** 2, eta, 1.0])
               <= _column_psi(*rows, yrow, W, beta, a, c, eta, rng)
               + W[a, c] * (eta - H0[a, c]) ** 2 + 1e-7 for eta in etas)


@pytest.mark.parametrize("T", [3, 4])
def test_local_pieces_are_minorants_on_their_interval(T):
    # a proved local piece lies below ψ_c + row a's quadratic all over its interval
    # (BFGS's estimate of ψ_c), though more curved than W_ca where ψ_c is; and a piece far
    # more curved than ψ_c is never proved (the proof can fail)
    rng = np.random.default_rng(2)
    proved = steep = refused = 0
    for rows, yrow, W, a, c, col in _equal_split_columns(T, rng):
        H = rows[0]
        eps = 1e-4
        half = (col.slope_at(H[a, c] + eps) - col.slope_at(H[a, c] - eps)) / (4 * eps)
        for k, r in ((0.9 * half, 0.3), (0.7 * half, 1.0)):
            q = col.local(k, H[a, c] - r, H[a, c] + r)
            if q is None:
                continue
            proved += 1
            steep += k > col.W
            assert _below_psi(q, rows, yrow, W, col.beta, a, c,
                              H[a, c] + np.linspace(-r, r, 7), rng)
        refused += col.local(4 * abs(half) + 4 * col.W, H[a, c] - 1.0,
                             H[a, c] + 1.0) is None
    assert proved >= 5 and steep >= 1 and refused >= 5


@settings(max_examples=150, deadline=None)
@given(T=st.integers(3, 5), seed=st.integers(0, 2 ** 31))
def test_combination_walk_keeps_every_combination_the_tests_keep(T, seed):
    # the walk prunes on sums over the coordinates; every combination of intervals that
    # the search's own tests keep (contraction, then the value floor below the target)
    # must be among those it returns, and some combinations are pruned (it bites)
    rng = np.random.default_rng(seed)
    y = rng.dirichlet(np.ones(T))
    nc = rng.integers(1, 5, T)
    width = int(nc.max())
    ivs = np.zeros((T, width, 2))
    tags = np.zeros((T, width), np.int64)
    for c in range(T):
        ends = np.sort(rng.uniform(-5, 0, 2 * nc[c]))
        ivs[c, :nc[c]] = ends.reshape(-1, 2)
        tags[c, :nc[c]] = np.arange(nc[c])
    kappa = rng.uniform(-3, 20, (T, width))
    const = rng.normal(size=(T, width)) * 0.1
    g_lo = rng.uniform(-0.3, 0.5)
    g_hi = g_lo + rng.uniform(0.01, 0.5)
    target = rng.uniform(0, 1)
    margin = 1e-12 * T
    out = np.empty((int(np.prod(nc)), T), np.int64)
    # scratch full of garbage: the walk sets what it reads
    scratch = (np.full((5, T, width), np.nan), np.full((5, T + 1), np.nan),
               np.full(T, 7, np.int64), np.full((5, T + 1), np.nan))
    n = search._combinations(nc, ivs, tags, const, kappa, y, g_lo, g_hi, target, margin, out,
                             *scratch)
    walked = {tuple(row) for row in out[:n]}
    kept = 0
    for combo in np.ndindex(*nc):
        xk, rk = np.empty(T + 2), np.empty(T + 2)
        for c, i in enumerate(combo):
            xk[c], rk[c] = ivs[c, i].mean(), 0.5 * np.ptp(ivs[c, i])
        xk[T], rk[T] = 0.0, 1.0
        xk[T + 1], rk[T + 1] = 0.5 * (g_lo + g_hi), 0.5 * (g_hi - g_lo)
        kc = np.array([kappa[c, tags[c, i]] for c, i in enumerate(combo)])
        total = sum(const[c, tags[c, i]] for c, i in enumerate(combo))
        if _certify_dual._contract(xk, rk, y, margin) and \
                _certify_dual._value_floor(xk, rk, kc, y, total, None) < target:
            kept += 1
            assert combo in walked
    assert n >= kept


# one node of T = 6 grid point 2 (8192 nodes; the channel's basis): two rows fail under the
# equal split, and the star of one of them, under the split where the others hold, needs
# local pieces (rounded to 17 digits, which the float64 values round-trip)
_TWO_ROW_NODE = dict(
    beta=3.493784039170011, sigma=0.4337289426027357,
    x=np.array([
        1.901325110077373e-07, -0.38328099929642917, -0.01296309215909629,
        -0.011675747247013202, -0.003281642437497589, -0.012099093231907304,
        0.1592750966863885, -0.00694504670113083, -0.005047013401684583,
        -0.003033446361794641, -0.008063571142967317, 0.007331978977420981,
        -0.008112442058379766, 0.10191233619483597, 0.005500505301532849,
        -0.08342103014256133, -0.11716458992307169, -0.04418518358749154,
        -0.0038468510950462114, 0.07048772397615785]),
    omega=np.array([
        2.935530438943399, 1.6070253774829037, 0.5069376984856433,
        -2.0401067597609375, -0.00190253104652952, 1.842848262217558,
        1.3963523756491567, -0.1963218051060372, 1.2568802698716843,
        -0.08099856534098909, 0.7301281905628394, 1.0189270396839347,
        -1.7100810647233393, 0.46164116790853466, -0.8274986924853134,
        1.1322850016277015, 1.6941866364557494, 0.43444748442038067,
        0.17391602547129456, -1.2178121447948054, 0.5933533127776952]),
    y=np.array([
        0.9999974851638042, 1.1508444859261149e-06, 1.392143087747935e-07,
        1.2074394329140804e-06, 4.736516214182941e-09, 1.2601452098833416e-08,
        0.09900728161406883, 0.05543669045396138, 0.02187294810908453,
        0.0001707081368753526, 0.8234554278499269, 5.6943836083084886e-05,
        0.014600722878642471, 0.02666535133006772, 0.08420489048247748,
        0.02558716858644249, 0.8447885966024006, 0.004153270119969175,
        0.47538049623187467, 0.0007812314740870374, 0.09605229641149668,
        3.0952868930167184e-07, 0.4277657555731182, 1.991078073417551e-05,
        0.00017113669847107976, 0.34583880538812034, 0.29103262817435943,
        0.0392567309100005, 0.0031639959586991285, 0.3205367028703496,
        3.206790801695294e-08, 1.6844039900511856e-09, 1.0077428631618201e-07,
        1.286951917988379e-10, 2.2575827631383755e-05, 0.9999772895170752]).reshape(6, 6))


def test_local_pieces_certify_a_node_where_two_rows_fail():
    node = _TWO_ROW_NODE
    ch = SoftmaxChannel(6, beta=node["beta"])
    args = (node["x"], node["omega"], node["y"], node["sigma"], ch.basis, ch._index,
            ch._scale, node["beta"], 1e-9, 2000)
    rows = _certify_dual.found_rows(*args[:8])
    ok, _, first, _ = split.split_search(*rows, node["y"], node["sigma"], node["beta"], 1e-9,
                                         2000, star.MAX_ROUNDS, star.MIN_SHARE)
    assert not ok and np.sum(first[0] != _certify_rows.CERTIFIED) == 2
    assert not star.certify_sample(*args, local_rounds=0)[0]
    assert star.certify_sample(*args, local_rounds=2)[0]


# another node of T = 6 grid point 2: the stars' local pieces leave a lower point that
# pieces centred there close
_OFF_CENTRE_NODE = dict(
    beta=3.493784039170011, sigma=0.4337289426027357,
    x=np.array([
        -0.00419485543355835, -0.00012352258869800664, -0.08855862367068267,
        -0.0028083958398226632, 0.08475907785807119, 0.01995319607860487,
        0.00042491423234400366, -0.006540948023868086, -0.12327292714568276,
        -0.010077691582123616, 0.04946217190503232, 0.0662530238869131,
        0.001372717844574638, -0.3130803913131799, -0.04348515938852211,
        -0.051694270933090106, -0.011149944805211254, -0.05679399426709331,
        0.32171846780128316, -0.07895549233984941]),
    omega=np.array([
        0.03956834174905479, -0.1716272152029714, 1.6334169798404725, -2.259601966307072,
        0.8063023479029502, 0.043350883932709895, -0.5975206390756893, 0.2854908482556154,
        1.505140463933582, -1.1564875359220468, 0.7977122849673987, 2.6292949005712876,
        -1.041915283893359, 2.011641153510161, -0.9185785624757509, -3.6772160985896334,
        1.462237761898964, 0.16428522061204054, 0.5737354706398874, -2.1309051330440285,
        1.4684558275705764]),
    y=np.array([
        2.2160210654953175e-05, 1.653711730316601e-06, 0.0001763298899211642,
        0.9985215319795133, 2.8548361515274962e-08, 0.0012782956598187418,
        4.699925169630627e-06, 2.2671077383444643e-05, 0.9950212024776907,
        8.728073995357047e-08, 0.004951159166289334, 1.800727268818101e-07,
        0.00046651755844114424, 0.9262820675575135, 0.05470856501517475,
        2.0890541931262664e-10, 0.018398957726376692, 0.00014389193358849795,
        0.5619074529804754, 1.728202548683982e-08, 4.443395867954803e-11,
        4.370605674858683e-09, 0.4380925143964095, 1.0926050028780564e-08,
        3.5991266310628693e-08, 0.0021963001487335597, 0.008767324946826789,
        0.9814640891038493, 0.004279544889971033, 0.00329270491935292, 0.2507342290202094,
        1.2427939096980878e-05, 0.010667845133302595, 3.80836125419907e-06,
        0.5122938998775846, 0.22628778966855223]).reshape(6, 6))


def test_off_centre_pieces_certify_a_node_local_pieces_leave():
    node = _OFF_CENTRE_NODE
    ch = SoftmaxChannel(6, beta=node["beta"])
    args = (node["x"], node["omega"], node["y"], node["sigma"], ch.basis, ch._index,
            ch._scale, node["beta"], 1e-9, 2000)
    assert not star.certify_sample(*args, off_centre_rounds=0)[0]
    assert star.certify_sample(*args, off_centre_rounds=1)[0]
    # no off-centre rounds where the local stage is off
    assert not star.certify_sample(*args, local_rounds=0, off_centre_rounds=1)[0]


@pytest.mark.parametrize("T", [3, 4])
def test_off_centre_pieces_are_minorants_on_their_interval(T):
    # a proved off-centre piece lies below ψ_c + row a's quadratic all over its interval
    # (BFGS's estimate of ψ_c), touches it at its centre, and a piece far more curved
    # than ψ_c is never proved (the proof can fail)
    rng = np.random.default_rng(3)
    proved = refused = 0
    for rows, yrow, W, a, c, col in _equal_split_columns(T, rng):
        H = rows[0]
        for p, r in ((H[a, c] + 0.6, 0.3), (H[a, c] - 0.8, 0.5)):
            q = col.off_centre(p, p - r, p + r, 500)
            if q is None:
                continue
            proved += 1
            assert _below_psi(q, rows, yrow, W, col.beta, a, c, p + np.linspace(-r, r, 7),
                              rng)
            # (held by a penalty of 1e6·W: the centre's value is that close)
            assert abs(q @ np.array([p * p, p, 1.0]) - col.response(p)) < 1e-5
        # ψ_c''/2 + W far exceeded: the piece must fail
        with mock.patch.object(star, "_OFF_CENTRE_FRACTIONS", (40.0,)):
            refused += col.off_centre(H[a, c] + 0.6, H[a, c] + 0.1, H[a, c] + 1.1,
                                      500) is None
    assert proved >= 5 and refused >= 5


def test_held_answer_kept_for_the_same_point_only():
    # the column keeps its last held least from the found row: the same answer as a fresh
    # column's Newton at that point, a copy each time, and never reused at another point
    rng = np.random.default_rng(5)
    for rows, yrow, W, a, c, col in itertools.islice(_equal_split_columns(3, rng), 4):
        fresh = star._Column(*rows, yrow, W, col.beta, a, c, TOL, 2000)
        eta = rows[0][a, c] + 0.4
        h, lam = col.held(eta)
        h[:] = np.nan                              # the caller's copy, not the kept one
        h2, lam2 = col.held(eta)
        h3, lam3 = fresh.held(eta)
        np.testing.assert_array_equal(h2, h3)
        assert lam2 == lam3 == lam
        h2[:] = np.nan
        np.testing.assert_array_equal(col.held(eta)[0], h3)
        other, _ = col.held(eta + 0.1)
        assert other[a] != h2[a]
        np.testing.assert_array_equal(other, fresh.held(eta + 0.1)[0])


@settings(max_examples=60, deadline=None)
@given(n_whole=st.integers(0, 3), n_local=st.integers(0, 4), seed=st.integers(0, 2 ** 31))
def test_column_top_is_the_largest_valid_piece(n_whole, n_local, seed):
    # Ψ_c(η) from the pieces as they are kept (no sorting) equals the largest of
    # star_pieces() valid at η, −∞ where none is
    rng = np.random.default_rng(seed)
    col = object.__new__(star._Column)
    col.pieces = rng.normal(size=(n_whole, 3))
    col.locals = []
    for _ in range(n_local):
        lo = rng.normal()
        col.locals.append((rng.normal(size=3), (lo, lo + rng.uniform(0.1, 2.0))))
    if n_whole == 0 and n_local == 0:
        return
    pieces, valid = (col.star_pieces() if n_whole else
                     (np.array([q for q, _ in col.locals]), [v for _, v in col.locals]))
    for eta in rng.normal(scale=2.0, size=20):
        x = np.array([eta * eta, eta, 1.0])
        expect = max((q @ x for q, (lo, hi) in zip(pieces, valid) if lo <= eta <= hi),
                     default=-np.inf)
        assert col.top(eta) == pytest.approx(expect, rel=1e-12, abs=1e-12) \
            if np.isfinite(expect) else col.top(eta) == -np.inf
