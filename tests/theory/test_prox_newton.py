"""The T ≥ 3 Newton run on a workspace (``channels/_prox_newton.py``): the same runs as
the vectorised numpy Newton of ``channels/prox.py``, an independent implementation
(BLAS products, batched Cholesky and LAPACK eigen-decompositions); its solve with
``|H|⁻¹`` is LAPACK's; a reused workspace carries nothing from one run to the next."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.theory.channels import GaussianNodes, SoftmaxChannel, _kernels
from skattn.theory.channels._prox_newton import (_WS_D, _WS_E, _WS_U, END_POINT_ROW,
                                                 _abs_inverse_solve, _newtonT,
                                                 newton_workspace, newtonT_into)
from skattn.theory.channels.output import _gaussian_pair
from skattn.theory.channels.prox import _newton, _SoftmaxProblem

pytestmark = pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="needs numba")


def _samples(n_tokens, sigma, beta, n_points=64, seed=0):
    channel = SoftmaxChannel(n_tokens, beta=beta, target_beta=beta)
    nodes = GaussianNodes(2 * channel.K, n_points=n_points, seed=seed)
    omega, w, _, _ = _gaussian_pair(0.6, 0.8, 1.05, nodes, channel.K)
    y = channel.labels(w)
    x_fit = (w * (channel.target_beta_ / channel.beta_) - omega) @ channel.basis
    return channel, y, omega, np.full(n_points, sigma), x_fit


@pytest.mark.parametrize("n_tokens", [3, 4, 6])
@pytest.mark.parametrize("sigma, beta", [(0.2, 1.0), (2.0, 4.0), (40.0, 3.0)])
def test_runs_are_the_numpy_newtons(n_tokens, sigma, beta):
    """From ω and from the fit, convex (Σ = 0.2) to far from it (Σ = 40, most Hessians
    indefinite), the compiled run ends where the numpy run ends, with its objective."""
    channel, y, omega, sig, x_fit = _samples(n_tokens, sigma, beta)
    prob = _SoftmaxProblem(channel, y, omega, sig)
    radius = channel._radius / channel.beta_
    rows = np.arange(len(omega))
    for starts in (np.zeros_like(x_fit), x_fit):
        x_np, f_np = _newton(prob, rows, starts, radius, channel.max_iter)
        for n in rows:
            x, f = _newtonT(starts[n].copy(), omega[n], y[n], sig[n], channel.basis,
                            channel._index, channel._scale, channel.beta_, radius,
                            channel.max_iter)
            assert f == pytest.approx(f_np[n], rel=1e-12, abs=1e-14)
            np.testing.assert_allclose(x, x_np[n], rtol=1e-8, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(n_tokens=st.integers(3, 5), log_sigma=st.floats(-2.0, 4.0),
       beta=st.floats(0.5, 4.0), seed=st.integers(0, 2**16))
def test_a_reused_workspace_carries_nothing(n_tokens, log_sigma, beta, seed):
    """Runs on one workspace, one after another, give bit for bit the runs on fresh
    workspaces; a run may start from its workspace's own end-point row."""
    channel, y, omega, sig, x_fit = _samples(n_tokens, float(np.exp(log_sigma)), beta,
                                             n_points=6, seed=seed)
    args = (channel.basis, channel._index, channel._scale, channel.beta_,
            channel._radius / channel.beta_, channel.max_iter)
    shared = newton_workspace(channel.K)
    for n in range(len(omega)):
        fresh = newton_workspace(channel.K)
        f_fresh = newtonT_into(x_fit[n], omega[n], y[n], sig[n], *args, *fresh)
        f_shared = newtonT_into(x_fit[n], omega[n], y[n], sig[n], *args, *shared)
        end = shared[0][END_POINT_ROW, :channel.K_eff]
        assert f_shared == f_fresh
        np.testing.assert_array_equal(end, fresh[0][END_POINT_ROW, :channel.K_eff])
        # again from that end point, in place: a minimiser stays where it is
        end[:] = fresh[0][END_POINT_ROW, :channel.K_eff]
        f_again = newtonT_into(end, omega[n], y[n], sig[n], *args, *shared)
        assert f_again <= f_fresh


def _lapack_abs_inverse(H, g):
    lam, V = np.linalg.eigh(H)
    floor = 1e-12 * np.max(np.abs(lam)) + 1e-300
    return V @ ((V.T @ g) / np.maximum(np.abs(lam), floor))


def _abs_inverse(H, g, record=None):
    vectors, matrices, rotations = newton_workspace(H.shape[0])
    if record is not None:
        rotations = rotations[:, :record].copy()
    out = np.full(H.shape[0], np.nan)
    ok = _abs_inverse_solve(H, g, matrices[2], matrices[3], vectors[_WS_U], vectors[_WS_D],
                            vectors[_WS_E], rotations, out)
    return ok, out


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 21), seed=st.integers(0, 2**16), log_shift=st.floats(-3.0, 3.0),
       kind=st.sampled_from(["random", "signs", "cluster", "diagonal", "graded"]))
def test_abs_inverse_solve_is_lapacks(n, seed, log_shift, kind):
    """Indefinite, with equal or clustered eigenvalues, already (block) diagonal, or graded
    over many orders: ``|H|⁻¹g`` as from LAPACK's eigen-decomposition, to the rounding
    that either makes: an eigenvalue moves by about ``ε‖H‖``, its inverse by that over
    ``λ²``."""
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
    if kind == "random":
        A = rng.normal(size=(n, n))
        H = A + A.T
    elif kind == "signs":
        H = Q @ np.diag(rng.choice([-1.0, 1.0], n)) @ Q.T
    elif kind == "cluster":
        H = Q @ np.diag(1.0 + 1e-9 * rng.normal(size=n) * rng.choice([-1, 1], n)) @ Q.T
    elif kind == "diagonal":
        H = np.diag(rng.normal(size=n))
    else:
        H = Q @ np.diag(np.logspace(-6, 6, n) * rng.choice([-1.0, 1.0], n)) @ Q.T
    H = H * np.exp(log_shift)
    g = rng.normal(size=n)
    ok, got = _abs_inverse(H, g)
    assert ok
    want = _lapack_abs_inverse(H, g)
    lam = np.abs(np.linalg.eigvalsh(H))
    smallest = max(lam.min(), 1e-12 * lam.max())
    np.testing.assert_allclose(got, want, rtol=0,
                               atol=1e-14 * n * np.linalg.norm(g) * lam.max() / smallest**2)


def test_abs_inverse_solve_gives_up_cleanly():
    """A record too short for the QL iteration's rotations: False, the output untouched
    (the caller takes LAPACK's route); with its full record, the same matrix solves."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(12, 12))
    H, g = A + A.T, rng.normal(size=12)
    ok, out = _abs_inverse(H, g, record=3)
    assert not ok and np.isnan(out).all()
    ok, out = _abs_inverse(H, g)
    assert ok
    np.testing.assert_allclose(out, _lapack_abs_inverse(H, g), atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.floats(0.01, 10.0), st.floats(-5.0, 5.0),
       st.integers(0, 2**32 - 1))
def test_the_capped_newton_step_caps_and_reads_its_slope(n, radius, f, seed):
    """The step tests of both compiled Newton runs (``capped_newton_step``): the direction
    keeps its sense and is at most ``radius`` long, its entries past ``n`` untouched; the
    slope is gᵀp of the capped step; ``resolved`` and ``small`` are the documented tests."""
    rng = np.random.default_rng(seed)
    x, g = rng.normal(size=n + 2), rng.normal(size=n + 2)
    p = rng.normal(size=n + 2) * rng.uniform(0.1, 30.0)
    before = p.copy()
    pn, slope, xnorm, noise, resolved, small = _kernels.capped_newton_step(x, g, p, n, f,
                                                                           radius)
    length = np.linalg.norm(before[:n])
    assert pn == pytest.approx(min(length, radius), rel=1e-12)
    assert np.linalg.norm(p[:n]) == pytest.approx(pn, rel=1e-12)
    np.testing.assert_allclose(p[:n], before[:n] * min(1.0, radius / length), rtol=1e-12)
    np.testing.assert_array_equal(p[n:], before[n:])
    assert slope == pytest.approx(float(g[:n] @ p[:n]), rel=1e-9, abs=1e-12)
    assert xnorm == pytest.approx(np.linalg.norm(x[:n]), rel=1e-12)
    assert noise == pytest.approx(4e-15 * (abs(f) + np.sqrt(abs(f))))
    assert resolved == (slope < -noise)
    assert small == (pn <= 1e-12 * xnorm)
