"""Speed work on the continuum state evolution: what may not move, and what it certifies.

* certified values agree with those of the code before the speed work (commit 11354e1,
  computed there by the same calls and stored in ``tests/theory/reference/``) to 1e-4 relative;
* the fused output-side kernel equals the numpy Hessians and eigenvalues;
* the bound carried by uncertified nodes holds;
* the certified fraction at the worst point of the benchmark grid per T
  (``benchmarks/run_benchmarks.py``, section f).
"""

import json
import pathlib
import sys
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import WishartTarget
from skattn.theory import solve_state_evolution
from skattn.theory.channels import GaussianNodes, SoftmaxChannel, _kernels, output_side
from skattn.theory.channels.common import uncertified_bound
from skattn.theory.channels.output import _trace_resolvent_complement

HERE = pathlib.Path(__file__).parent
REFERENCE = json.loads((HERE / "reference" / "state_evolution_11354e1.json").read_text())
KEYS = ("m", "q", "sigma", "m_hat", "q_hat", "sigma_hat", "test_error", "train_error")


def _solve(p, **kw):
    return solve_state_evolution(p["alpha"], n_tokens=p["n_tokens"],
                                 reg_lambda=p["reg_lambda"], noise=p["noise"],
                                 target=WishartTarget(p["kappa"]), beta=p["beta"],
                                 options={"n_nodes": p["n_nodes"]}, **kw)


def _ref_id(p):
    return f"T{p['n_tokens']}-beta{p['beta']:g}-nodes{p['n_nodes']}"


@pytest.mark.parametrize("ref", [
    pytest.param(p, id=_ref_id(p),
                 marks=[pytest.mark.slow] if p["n_nodes"] * p["n_tokens"] > 10000 else [])
    for p in REFERENCE])
def test_certified_values_match_the_code_before_the_speed_work(ref):
    res = _solve(ref)
    assert res.converged
    # as many nodes certified as before, or more
    assert res.certified_fraction >= ref["certified_fraction"] - 1e-12
    for key in KEYS:
        assert getattr(res, key) == pytest.approx(ref[key], rel=1e-4), key


@pytest.mark.parametrize("T", [3, 4, 6])
@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_fused_loss_and_trace_equal_numpy(T, beta):
    rng = np.random.default_rng(T)
    ch = SoftmaxChannel(T, beta=beta)
    z = rng.standard_normal((300, ch.K))
    y = ch.labels(rng.standard_normal((300, ch.K)))
    loss0, _, H = ch._derivs(y, z)
    for sigma in (1e-10, 0.05, 0.7):
        tr0 = _trace_resolvent_complement(H, sigma)
        loss1, tr1 = _kernels.loss_and_trace(z, y, ch._index, ch._scale, beta, sigma)
        np.testing.assert_allclose(loss1, loss0, rtol=1e-13)
        ok = np.isfinite(tr1)       # nan: I + ΣH near singular, left to the eigenvalues
        assert ok.all() if sigma < 1e-6 else ok.any()
        np.testing.assert_allclose(tr1[ok], tr0[ok], rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_t2_closed_form_loss_and_trace_equal_numpy(beta):
    # the rank-2 closed form of the T = 2 kernel against the numpy Hessians and Jacobi
    # eigenvalues, where I + ΣH is safely positive (as at a global minimiser)
    rng = np.random.default_rng(2)
    ch = SoftmaxChannel(2, beta=beta)
    z = 2 * rng.standard_normal((2000, ch.K))
    y = ch.labels(rng.standard_normal((2000, ch.K)))
    loss0, _, H = ch._derivs(y, z)
    lam_min = np.linalg.eigvalsh(H)[:, 0]
    for sigma in (1e-10, 0.05, 0.7, 5.5, 1e3):
        ok = 1 + sigma * lam_min > 1e-3
        assert ok.sum() > 100
        tr0 = _trace_resolvent_complement(H, sigma)
        loss1, tr1 = _kernels.loss_and_trace2(z, y, beta, sigma)
        np.testing.assert_allclose(loss1, loss0, rtol=1e-13)
        # the trace sums terms Σμ/(1 + Σμ) of either sign, each O(1) at large Σ: both
        # routes carry an absolute rounding error of ~1e-12 of the terms
        np.testing.assert_allclose(tr1[ok], tr0[ok], rtol=1e-8, atol=1e-10)


def test_serial_and_threaded_drivers_have_their_own_compiled_code():
    # numba's disk cache is keyed by qualified name, not by options: the serial and the
    # threaded driver of one function shared one entry, so "serial" could run threaded
    from skattn.theory.channels import _certify, _proxT
    for serial, threaded in ((_certify.prox2, _certify.prox2_parallel),
                             (_proxT.proxT, _proxT.proxT_parallel)):
        assert serial.py_func.__qualname__ != threaded.py_func.__qualname__
        assert not serial.targetoptions.get("parallel")
        assert threaded.targetoptions.get("parallel")


def test_uncertified_bound_holds():
    # T = 3, β = 4, Σ = 0.5: the prox is far from convex; without the certificate (budget
    # 0) only the provably convex nodes count as certified. The
    # bound of the uncertified run must cover its distance to the certified run, and it
    # vanishes where every node is certified.
    ch = SoftmaxChannel(3, beta=4.0, target_beta=4.0)
    nodes = GaussianNodes(2 * ch.K, n_points=256, seed=0)
    kw = dict(m=0.6, q=0.8, Q0=1.0, noise=0.1, sigma=0.5, alpha=0.3, nodes=nodes)
    ch.certify_budget = 0
    rough = output_side(ch, **kw)
    ch.certify_budget = 2000
    fine = output_side(ch, **kw)
    assert rough.certified_fraction < fine.certified_fraction
    for key in ("m_hat", "q_hat", "sigma_hat_stein", "train_error", "moreau"):
        assert rough.uncertified_bound[key] > 0
        assert abs(rough[key] - fine[key]) <= rough.uncertified_bound[key]
        if fine.certified_fraction == 1.0:
            assert fine.uncertified_bound[key] == 0.0
    easy = output_side(SoftmaxChannel(3, beta=1.0), **dict(kw, sigma=0.05))
    assert easy.certified_fraction == 1.0
    assert all(v == 0.0 for v in easy.uncertified_bound.values())



def test_uncertified_bound_with_non_gaussian_tokens():
    # per-component overlaps (κ4 ≠ 0) carry the same bound, with each component's own:
    # it covers the uncertified run's distance to the certified one, and as κ4 → 0 it is
    # the Gaussian path's
    ch = SoftmaxChannel(3, beta=4.0, target_beta=4.0)
    nodes = GaussianNodes(2 * ch.K, n_points=256, seed=0)
    kw = dict(m=0.6, q=0.8, Q0=1.0, noise=0.1, sigma=0.5, alpha=0.3, nodes=nodes,
              sigma_hat_form="stein", trace=0.5, target_trace=0.6)
    ch.certify_budget = 0
    rough = output_side(ch, token_kurtosis=1.0, **kw)
    gaussian = output_side(ch, token_kurtosis=0.0, **kw)
    limit = output_side(ch, token_kurtosis=1e-9, **kw)
    ch.certify_budget = 2000
    fine = output_side(ch, token_kurtosis=1.0, **kw)
    assert rough.certified_fraction < fine.certified_fraction
    for key in ("m_hat", "q_hat", "sigma_hat_stein", "train_error", "moreau"):
        assert 0 < rough.uncertified_bound[key] < np.inf
        assert abs(rough[key] - fine[key]) <= rough.uncertified_bound[key]
        assert limit.uncertified_bound[key] == pytest.approx(
            gaussian.uncertified_bound[key], rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1), sigma=st.floats(0.05, 5.0),
       n_unc=st.integers(1, 6), m=st.floats(-0.8, 0.8), per_component=st.booleans())
def test_uncertified_bound_covers_any_better_point(seed, sigma, n_unc, m, per_component):
    # any replacement of the uncertified minimisers by points of no larger objective (the
    # only thing a global minimiser is known to satisfy) moves each quantity by at most
    # the bound; certified nodes keep theirs; the bounds but the Moreau envelope's are
    # reached. With per_component, m, q and V differ per component (non-Gaussian tokens)
    rng = np.random.default_rng(seed)
    n, K, alpha, q, V = 12, 3, 0.3, 0.7, 0.5
    if per_component:
        m, q, V = (x * np.array([1.0, 0.6, 1.7]) for x in (m, q, V))
    omega, zeta1, zeta2 = (rng.normal(size=(n, K)) for _ in range(3))
    z = omega + rng.normal(size=(n, K)) * rng.uniform(0, 2 * np.sqrt(sigma), size=(n, 1))
    loss = rng.uniform(0, 2, size=n)
    certified = np.arange(n) >= n_unc
    bound = uncertified_bound(certified, z, omega, loss, sigma, zeta1, zeta2, alpha=alpha,
                              m=m, q=q, V=V, mean=np.mean)
    F = np.sum((z - omega) ** 2, axis=1) / (2 * sigma) + loss

    def quantities(z_, loss_):
        g = (z_ - omega) / sigma
        # per component: m̂_k = 2α E[g_k ζ2_k]/√V_k, Σ̂_k = −2α E[g_k ζ1_k]/√q_k + (m_k/q_k) m̂_k
        m_hat_k = 2 * alpha * np.mean(g * zeta2, axis=0) / np.sqrt(V)
        return dict(m_hat=np.sum(m_hat_k),
                    q_hat=2 * alpha * np.mean(np.sum(g * g, axis=1)),
                    sigma_hat_stein=np.sum(-2 * alpha * np.mean(g * zeta1, axis=0)
                                           / np.sqrt(q) + m / q * m_hat_k),
                    train_error=np.mean(loss_),
                    moreau=np.mean(np.sum((z_ - omega) ** 2, axis=1) / (2 * sigma) + loss_))

    found = quantities(z, loss)
    for trial in range(20):
        z_g, loss_g = z.copy(), loss.copy()
        for i in range(n_unc):
            # a point of the ball ‖z_g − ω‖² ≤ 2ΣF (its edge or the centre, at times)
            u = rng.normal(size=K)
            radius = np.sqrt(2 * sigma * F[i]) * (trial % 3 != 0) * rng.uniform() ** 0.1
            z_g[i] = omega[i] + radius * u / np.linalg.norm(u)
            room = F[i] - radius ** 2 / (2 * sigma)
            loss_g[i] = (0.0, room, rng.uniform(0, room))[trial % 3]
        moved = quantities(z_g, loss_g)
        for key, value in moved.items():
            assert abs(value - found[key]) <= bound[key] * (1 + 1e-12) + 1e-12, key
    # m̂ and Σ̂: every uncertified minimiser at the ball's edge along (or against) its
    # node's vector of that average, loss 0, reaches the bound
    r = np.sqrt(2 * sigma * F)
    vectors = dict(m_hat=zeta2 / np.sqrt(V),
                   sigma_hat_stein=-zeta1 / np.sqrt(q) + m / q * zeta2 / np.sqrt(V))
    for key, eta in vectors.items():
        moves = []
        for sign in (1.0, -1.0):
            z_g, loss_g = z.copy(), loss.copy()
            unit = eta[:n_unc] / np.linalg.norm(eta[:n_unc], axis=1, keepdims=True)
            z_g[:n_unc] = omega[:n_unc] + sign * r[:n_unc, None] * unit
            loss_g[:n_unc] = 0.0
            moves.append(abs(quantities(z_g, loss_g)[key] - found[key]))
        assert max(moves) <= bound[key] * (1 + 1e-9) + 1e-12
        assert max(moves) == pytest.approx(bound[key], rel=1e-9)
    # q̂ and the train error: every uncertified minimiser at the ball's edge with loss 0,
    # or at its centre with the whole objective as loss, reaches the larger of the two
    edge, centre = z.copy(), z.copy()
    edge[:n_unc] = omega[:n_unc] + r[:n_unc, None] * zeta2[:n_unc] / np.linalg.norm(
        zeta2[:n_unc], axis=1, keepdims=True)
    centre[:n_unc] = omega[:n_unc]
    loss_edge, loss_centre = loss.copy(), loss.copy()
    loss_edge[:n_unc], loss_centre[:n_unc] = 0.0, F[:n_unc]
    for key in ("q_hat", "train_error"):
        moves = [abs(quantities(z_, loss_)[key] - found[key])
                 for z_, loss_ in ((edge, loss_edge), (centre, loss_centre))]
        assert max(moves) <= bound[key] * (1 + 1e-9) + 1e-12
        assert max(moves) == pytest.approx(bound[key], rel=1e-9)

def _grid():
    sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))
    try:
        from run_benchmarks import grid_configurations
    finally:
        sys.path.pop(0)
    return grid_configurations


# the grid point with the lowest certified fraction per T in the benchmark run reported in
# the README (section f; index into grid_configurations(T)), and that fraction at 8192
# and at 256 nodes with the split search of the certificate at its least share 0.1
# (before the search: T = 4 0.990 and 0.988, T = 5 0.997 and 1.0, T = 6 0.831 and 0.840;
# with it at share 1e-3: T = 4 0.9985, T = 5 0.9999, T = 6 0.936 and 0.922); where it is
# below the goal of 99.9 % the test at that size is an expected failure that says so.
# At T = 4 and 5 every uncapped point is now certified in full: points 3 and 1 stay, the
# worst before. The star bound lifted T = 6 from 0.966 and 0.9375, its unequal splits from
# 0.989 and 0.9805, its local pieces from 0.993 and 0.9844 (and T = 4 from 0.9999), and
# local pieces where two rows fail from 0.9954 at 8192 nodes, off-centre pieces (and the
# local searches' full budget) from 0.9960 there (256 nodes: the same 0.9922), the double
# star (on by default) from 0.9971 (256 nodes: from 0.9922).
WORST_GRID_POINT = {2: (0, 1.0, 1.0), 4: (3, 1.0, 1.0), 5: (1, 1.0, 1.0),
                    6: (2, 0.99902, 1.0)}
GOAL = 0.999


def _worst_cases(slow):
    cases = []
    for T, (index, *measured) in sorted(WORST_GRID_POINT.items()):
        marks = [pytest.mark.slow] if slow else []
        fraction, nodes = (measured[0], 8192) if slow else (measured[1], 256)
        if fraction < GOAL:
            marks.append(pytest.mark.xfail(
                strict=True, reason=f"goal not met: {fraction:.1%} certified at {nodes} nodes"))
        cases.append(pytest.param(T, index, marks=marks, id=f"T{T}-point{index}"))
    return cases


@pytest.mark.parametrize("T, index", _worst_cases(slow=False))
def test_certified_fraction_at_the_worst_grid_point_small(T, index):
    config = _grid()(T)[index]
    res = _solve(dict(config, n_nodes=256), target_beta=config["beta"])
    assert res.certified_fraction >= GOAL


@pytest.mark.parametrize("T, index", _worst_cases(slow=True))
def test_certified_fraction_at_the_worst_grid_point(T, index):
    config = _grid()(T)[index]
    res = _solve(dict(config, n_nodes=8192), target_beta=config["beta"])
    assert res.certified_fraction >= GOAL


def test_star_bound_certifies_more_and_moves_nothing():
    # T = 6 point 2 on 256 nodes: the star bound certifies nodes the splits leave (0.9805
    # against 0.9375 when written), its splits where two or three rows fail more again
    # (0.9844), its local pieces more again, the double star the rest (0.9922 → 1), and
    # none changes a minimiser, so the state is the same
    config = _grid()(6)[2]
    settings = [(False, 0, 0, False), (True, 0, 0, False), (True, 8, 0, False),
                (True, 8, 2, False), (True, 8, 2, True)]
    runs = {}
    for star, rounds, local, double in settings:
        with mock.patch.object(SoftmaxChannel, "star_bound", star), \
                mock.patch.object(SoftmaxChannel, "star_split_rounds", rounds), \
                mock.patch.object(SoftmaxChannel, "star_local_rounds", local), \
                mock.patch.object(SoftmaxChannel, "double_star", double):
            runs[star, rounds, local, double] = _solve(dict(config, n_nodes=256),
                                                       target_beta=config["beta"])
    fractions = [runs[key].certified_fraction for key in settings]
    assert fractions[0] < fractions[1] < fractions[2] < fractions[3] < fractions[4]
    for key in KEYS:
        for setting in settings[1:]:
            assert getattr(runs[setting], key) == getattr(runs[settings[0]], key), key


@pytest.mark.parametrize("name", ["star_split_rounds", "star_local_rounds"])
@pytest.mark.parametrize("value, error", [(-1, ValueError), (1.5, TypeError)])
def test_star_rounds_are_checked(name, value, error):
    ch = SoftmaxChannel(3, beta=2.0)
    setattr(ch, name, value)
    omega = np.random.default_rng(0).normal(size=(4, ch.K))
    with pytest.raises(error, match=name):
        ch.prox(ch.labels(omega), omega, 50.0)


def test_t4_dual_certificate_budget_certifies_grid_point_1():
    # T = 4, β = 1.25, Σ ≈ 3.8: no node is convex on its ball, so the row-wise dual bound
    # certifies; with 500 cube splits per sample about half the nodes ran out (49.7 % at
    # 8192 nodes), with 2000 all of them are certified
    config = _grid()(4)[1]
    res = _solve(dict(config, n_nodes=256), target_beta=config["beta"])
    assert res.converged
    assert res.certified_fraction >= GOAL


def test_t2_grid_point_0_coarse_stage_hands_over():
    # T = 2, β = 3.23, noiseless: damped Anderson on the 1024-node map had its steps
    # rejected and crept (residual 0.07 after 33 evaluations, no handover), and the full
    # node set iterated from the original starts (55 evaluations in all). Powell's hybrid
    # method reaches the coarse tolerance in about 15, and the full set, seeded with the
    # coarse Jacobian, needs about 5
    config = _grid()(2)[0]
    res = _solve(dict(config, n_nodes=8192), target_beta=config["beta"])
    assert res.converged and res.certified_fraction == 1.0
    assert res.n_iter <= 30


@pytest.mark.slow
def test_t2_grid_point_1_stops_at_its_floor():
    # T = 2, β = 2.57, λ = 1.3e-3: the map is discontinuous at the quadrature's resolution
    # near its fixed point (floor ~1e-4). The iterations from the coarse point stall there
    # (the stall seen across stages), and the solve ends: about 50 evaluations. 100–250
    # when the full node set then iterated again from the original starts, to the same floor
    config = _grid()(2)[1]
    res = _solve(dict(config, n_nodes=8192), target_beta=config["beta"])
    assert not res.converged and "stalled" in res.message
    assert res.extras["stall_floor"] < 1e-3
    assert res.n_iter <= 80


def test_uncertified_bound_of_a_wild_iterate_raises_nothing():
    # Σ of 1e200 (a wild Anderson iterate in log Σ at a ghost point): Σ² overflows a
    # Python float; the bound stays a number (the prox is then near ω, the moves tiny)
    rng = np.random.default_rng(0)
    n, K = 8, 3
    omega, zeta1, zeta2 = (rng.normal(size=(n, K)) for _ in range(3))
    z = omega + 1e-3 * rng.normal(size=(n, K))
    bound = uncertified_bound(np.arange(n) >= 2, z, omega, rng.uniform(0, 2, size=n), 1e200,
                              zeta1, zeta2, alpha=0.3, m=0.4, q=0.7, V=0.5, mean=np.mean)
    assert all(np.isfinite(value) and value >= 0 for value in bound.values())
