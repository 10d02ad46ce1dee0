"""The token-leverage state evolution (linear attention, one token; docs/theory.rst §4).

Its agreement with trained models is measured by benchmarks/research/token_leverage.py; these tests
check the solver: its Gaussian limit, the leverage spread, the sign of the correction where
it is validated, and its errors.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.theory import DomainWarning, solve_state_evolution
from skattn.theory.token_leverage import solve_token_state_evolution
from skattn.theory.token_leverage import _spectral_threshold

FAST = dict(n_draws=16, n_tokens_mc=800)


def _teacher(d, noise=0.3, **kw):
    """A teacher; below d = 40 the solver warns (DomainWarning), which the tests ignore."""
    kw = {"n_tokens": 1, "attention": "linear", **kw}
    return AttentionIndexedModel(d, target=WishartTarget(0.5), noise=noise, random_state=1, **kw)


@pytest.fixture(scope="module")
def noisy40():
    return solve_token_state_evolution(0.6, target=_teacher(40), reg_lambda=0.05, **FAST)


def test_gaussian_solve_is_the_finite_d_state_evolution(noisy40):
    """With a concentrated leverage the equations are the same-instance Gaussian SE (its
    free-convolution form differs by the Monte Carlo draws and O(1/d))."""
    reference = solve_state_evolution(0.6, target=_teacher(40), reg_lambda=0.05,
                                      correction="none").test_error
    assert noisy40.converged, noisy40.message
    assert noisy40.gaussian_test_error == pytest.approx(reference, rel=0.05)
    # and it follows λ: a strong penalty moves the prediction far, and the solve with it
    strong = solve_state_evolution(0.6, target=_teacher(40), reg_lambda=1.0,
                                   correction="none").test_error
    assert abs(strong / reference - 1) > 0.15
    solved = solve_token_state_evolution(0.6, target=_teacher(40), reg_lambda=1.0, **FAST)
    assert solved.gaussian_test_error == pytest.approx(strong, rel=0.05)


def test_result_is_consistent(noisy40):
    r = noisy40
    assert r.token_correction == pytest.approx(r.test_error / r.gaussian_test_error - 1)
    assert np.isfinite(r.mc_standard_error) and 0 < r.mc_standard_error < 0.05 * r.test_error
    assert 0 < r.train_error < r.test_error  # training residuals shrink by 1/(1 + V_μ)
    assert r.n_features == 40 and r.noise == 0.3


def test_leverage_spread_shrinks_like_inverse_sqrt_d():
    """The relative spread of V_μ is O(1/√d): a quartic form in one Gaussian token."""
    spreads = {d: solve_token_state_evolution(0.3, target=_teacher(d), reg_lambda=0.05,
                                              **FAST).leverage_spread for d in (25, 100)}
    assert 0.2 < spreads[25] < 1.0
    assert spreads[100] / spreads[25] == pytest.approx(0.5, rel=0.2)


def test_correction_is_an_excess_next_to_the_interpolation_threshold():
    """Measured: trained models on tokens sit above the Gaussian SE there (+8.5 % at d = 60)."""
    r = solve_token_state_evolution(0.3, target=_teacher(60), reg_lambda=0.05, n_draws=32,
                                    n_tokens_mc=2000)
    assert r.token_correction > 3 * r.mc_standard_error / r.test_error
    assert r.token_correction > 0.03


def test_reproducible_with_a_seed():
    a = solve_token_state_evolution(0.6, target=_teacher(20), reg_lambda=0.05, **FAST)
    b = solve_token_state_evolution(0.6, target=_teacher(20), reg_lambda=0.05, **FAST)
    c = solve_token_state_evolution(0.6, target=_teacher(20), reg_lambda=0.05,
                                    random_state=3, **FAST)
    assert a.test_error == b.test_error
    assert a.test_error != c.test_error


def test_recovery_phase_correction_is_an_excess():
    """Measured: without label noise trained models sit above the Gaussian SE (+5.9 % at
    d = 100); the weights ν_μ keep the token prediction above it too (without them it fell
    28 % below)."""
    r = solve_token_state_evolution(0.6, target=_teacher(40, noise=0.0), reg_lambda=0.05,
                                    **FAST)
    assert r.converged, r.message
    assert r.token_correction > 0.03


@pytest.mark.parametrize("kwargs, match", [
    (dict(target=WishartTarget(0.5)), "target must be a teacher"),
    (dict(target=_teacher(20, n_tokens=2)), "n_tokens=1"),
    (dict(target=_teacher(20, n_tokens=2, attention="softmax")), "attention='linear'"),
    (dict(reg_lambda=0.0), "reg_lambda"),
    (dict(n_draws=4), "n_draws"),
    (dict(n_tokens_mc=10), "n_tokens_mc"),
    (dict(alpha=-1.0), "alpha"),
    (dict(width_ratio=0.0), "width_ratio"),
])
def test_bad_input_names_the_argument(kwargs, match):
    args = {"alpha": 0.3, "target": _teacher(20), "reg_lambda": 0.05, **kwargs}
    alpha = args.pop("alpha")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DomainWarning)
        with pytest.raises((TypeError, ValueError), match=match):
            solve_token_state_evolution(alpha, **args)


def test_small_lambda_and_small_d_warn():
    with pytest.warns(DomainWarning, match="reg_lambda"):
        solve_token_state_evolution(0.6, target=_teacher(40), reg_lambda=1e-3, **FAST)
    with pytest.warns(DomainWarning, match="n_features=20"):
        solve_token_state_evolution(0.6, target=_teacher(20), reg_lambda=0.05, **FAST)


def test_noiseless_below_perfect_recovery_warns():
    """Wishart(0.5): α_perf = 0.422; the recovery phase above it is validated."""
    with pytest.warns(DomainWarning, match="perfect-recovery threshold"):
        solve_token_state_evolution(0.3, target=_teacher(40, noise=0.0), reg_lambda=0.05,
                                    **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DomainWarning)
        solve_token_state_evolution(0.6, target=_teacher(40, noise=0.0), reg_lambda=0.05,
                                    **FAST)
        solve_token_state_evolution(0.3, target=_teacher(40, noise=0.3), reg_lambda=0.05,
                                    **FAST)


def test_width_is_the_full_width_problem_at_scaled_lambda(noisy40):
    """A width whose cap does not bind has the full-width minimiser at √κ λ: the same
    prediction on the same draws, bit for bit; a binding cap warns."""
    for kappa in (0.9, 4.0):
        width = solve_token_state_evolution(0.6, target=_teacher(40), reg_lambda=0.05,
                                            width_ratio=kappa, **FAST)
        full = solve_token_state_evolution(0.6, target=_teacher(40),
                                           reg_lambda=0.05 * np.sqrt(kappa), **FAST)
        assert width.test_error == full.test_error and width.width_ratio == kappa
        assert width.rank_fraction == full.rank_fraction <= min(kappa, 1.0)
    assert 0 < noisy40.rank_fraction < 1
    # κ = 1 is the default; a cap below the rank binds and is not modelled
    with pytest.warns(DomainWarning, match="rank cap binds"):
        capped = solve_token_state_evolution(0.6, target=_teacher(40), reg_lambda=0.05,
                                             width_ratio=0.5 * noisy40.rank_fraction, **FAST)
    assert capped.rank_fraction > capped.width_ratio


# --- the building blocks: Daleckii–Krein weights and the leverage's mean -----------------

def _sym(rng, d):
    g = rng.standard_normal((d, d))
    return (g + g.T) / 2


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(2, 7),
       threshold=st.floats(-0.5, 1.0))
def test_divided_differences_are_the_jacobian(seed, d, threshold):
    """``γ ∘ Ẽ`` in the eigenbasis is the derivative of ``Y ↦ (Y − θ I)₊`` along E, and the
    divergence is its trace over the d(d+1)/2 free entries (central differences)."""
    rng = np.random.default_rng(seed)
    Y, E = _sym(rng, d), _sym(rng, d)
    S, U, gamma, divergence = _spectral_threshold(Y, threshold)
    nu = np.linalg.eigvalsh(Y)
    if np.min(np.abs(nu - threshold)) < 1e-3 or np.min(np.diff(nu)) < 1e-3:
        return  # a kink or a degenerate pair: the derivative is not defined there
    h = 1e-6
    numeric = (_spectral_threshold(Y + h * E, threshold)[0]
               - _spectral_threshold(Y - h * E, threshold)[0]) / (2 * h)
    analytic = U @ (gamma * (U.T @ E @ U)) @ U.T
    np.testing.assert_allclose(analytic, numeric, atol=1e-6)
    trace = 0.0
    for i in range(d):
        for j in range(i, d):
            B = np.zeros((d, d))
            B[i, j] = B[j, i] = 1.0
            dS = (_spectral_threshold(Y + h * B, threshold)[0]
                  - _spectral_threshold(Y - h * B, threshold)[0]) / (2 * h)
            trace += dS[i, j]
    assert divergence == pytest.approx(trace, abs=1e-5)


def test_mean_quartic_form_over_rank_one_tokens():
    """``E Σ_ij γ_ij X̃_ij² = (Σ γ + Σ_i γ_ii)/d`` for ``X̃ = (x̃ x̃ᵀ − I)/√d``, as for a GOE
    matrix (off-diagonal variance 1/d, diagonal 2/d): the leverage's mean is the Gaussian V."""
    rng = np.random.default_rng(0)
    d = 6
    _, _, gamma, _ = _spectral_threshold(_sym(rng, d), 0.2)
    x = rng.standard_normal((400_000, d))
    X = (x[:, :, None] * x[:, None, :] - np.eye(d)) / np.sqrt(d)
    quartic = np.einsum("ij,mij->m", gamma, X ** 2)
    expected = (gamma.sum() + np.trace(gamma)) / d
    assert quartic.mean() == pytest.approx(expected, rel=0.01)
    g = rng.standard_normal((400_000, d, d))
    goe = (g + g.transpose(0, 2, 1)) / np.sqrt(2 * d)
    assert np.einsum("ij,mij->m", gamma, goe ** 2).mean() == pytest.approx(expected, rel=0.01)
