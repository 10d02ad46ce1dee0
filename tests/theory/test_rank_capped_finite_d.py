"""The rank-capped finite-d prior: the capped free convolution of the target's spectrum.

A student of width κ < 1 keeps the p = κd largest positive eigenvalues of
``M = m̂ S0 + √q̂ Z − 2λ̃ I``; the prior replaces the diagonalisation of one GOE draw by the
convolved law cut at its upper κ-quantile (skattn/theory/spectral/capped.py).
"""

import warnings

import numpy as np
import pytest

from skattn.theory import DiscreteLaw, WishartLaw, solve_state_evolution
from skattn.theory.denoisers import FactoredDenoiser, goe_matrix
from skattn.theory.spectral import capped_relu_integrals, free_convolution

KAPPA, LAMBDA = 0.25, 0.05
CONJUGATES = (1.3, 0.3, 1.1)  # (m̂, q̂, Σ̂) near the fixed point of the validation case


def _quantile_spectrum(law, d):
    return free_convolution(law, 0.0).sample_eigenvalues(d, method="quantile")


def _capped_prior(eig, width_ratio=KAPPA, **kw):
    return FactoredDenoiser(DiscreteLaw(eig), width_ratio=width_ratio, reg_lambda=LAMBDA,
                            n_features=eig.size, **kw)


def _draw_prior(eig, m_hat, q_hat, sigma_hat, seed, width_ratio=KAPPA):
    """The matrix model itself: diagonalise ``M`` for one GOE draw, keep the p largest.

    ``m`` from the eigenvectors (not by Stein's identity); Σ without the O(1/d) diagonal
    term of a real GOE draw.
    """
    d = eig.size
    p = max(1, int(round(width_ratio * d)))
    M = np.diag(m_hat * eig) + np.sqrt(q_hat) * goe_matrix(d, seed)
    M[np.diag_indices(d)] -= 2 * np.sqrt(width_ratio) * LAMBDA
    nu, vec = np.linalg.eigh(M)
    f = np.maximum(nu, 0.0) / sigma_hat
    f[: d - p] = 0.0
    diff = nu[:, None] - nu[None, :]
    tied = diff == 0  # the diagonal, and equal atoms at q̂ = 0 (f equal: the cut is above)
    dd = np.where(tied, 0.0, (f[:, None] - f[None, :]) / np.where(tied, 1.0, diff))
    return dict(m=np.sum(eig[:, None] * vec ** 2 * f[None, :]) / d, q=np.sum(f ** 2) / d,
                sigma=np.sum(dd) / d ** 2, trace=np.sum(f) / d)


def test_the_capped_prior_is_deterministic():
    eig = _quantile_spectrum(WishartLaw(0.2), 80)
    a = _capped_prior(eig, random_state=0)(*CONJUGATES)
    b = _capped_prior(eig, random_state=7)(*CONJUGATES)
    assert a.rank_capped and b.rank_capped
    for name in ("m", "q", "sigma", "trace", "rank_threshold"):
        assert getattr(a, name) == getattr(b, name), name


def test_the_cap_binds_and_changes_the_prior():
    eig = _quantile_spectrum(WishartLaw(0.2), 80)
    capped = _capped_prior(eig)(*CONJUGATES)
    free = _capped_prior(eig, width_ratio=1.0)(*CONJUGATES)
    assert capped.rank_capped and not free.rank_capped
    assert capped.rank_threshold > capped.epsilon
    # the κ = 1 student has λ̃ = λ, the κ = 0.25 one λ/2: compare the same ε instead
    same_eps = FactoredDenoiser(DiscreteLaw(eig), reg_lambda=LAMBDA * np.sqrt(KAPPA),
                                n_features=80)(*CONJUGATES)
    assert same_eps.epsilon == pytest.approx(capped.epsilon)
    # the cut removes the small positive eigenvalues: much of Σ and Tr Ŝ, little of q
    assert capped.sigma < 0.8 * same_eps.sigma and capped.trace < 0.9 * same_eps.trace
    assert capped.q < same_eps.q


def test_a_non_binding_cap_equals_the_relu_integrals():
    mu = free_convolution(WishartLaw(0.5), 0.4)
    eps = 0.8
    loose = capped_relu_integrals(mu, eps, rank_ratio=0.9)  # μ_δ((ε, ∞)) < 0.9
    assert not loose.binding and loose.threshold == eps
    assert loose.second == mu.J(eps) and loose.divided_difference == mu.D(eps)
    assert loose.x_first == mu.x_relu_moment(eps)
    assert loose.first == mu.relu_moment(eps, 1)
    assert capped_relu_integrals(mu, eps, rank_ratio=1.0) == loose


def test_a_binding_cap_keeps_the_quantile_mass():
    mu = free_convolution(WishartLaw(0.2), 0.4)
    capped = capped_relu_integrals(mu, 0.1, rank_ratio=KAPPA)
    assert capped.binding and capped.kept_mass == pytest.approx(KAPPA, abs=1e-9)
    assert capped.threshold == pytest.approx(mu.upper_quantile(KAPPA))
    # the jump (τ − ε) 1{x > τ} adds to every integral of the ReLU at τ
    tau = capped.threshold
    assert capped.first == pytest.approx(mu.relu_moment(tau, 1) + (tau - 0.1) * KAPPA)
    assert capped.divided_difference > mu.D(tau)


def test_the_large_d_prior_agrees_with_the_continuum():
    law = WishartLaw(0.2)
    d = 2000
    fin = _capped_prior(_quantile_spectrum(law, d))(*CONJUGATES)
    m_hat, q_hat, sigma_hat = CONJUGATES
    delta, eta = np.sqrt(q_hat) / m_hat, m_hat / sigma_hat
    eps = 2 * np.sqrt(KAPPA) * LAMBDA / m_hat
    cont = capped_relu_integrals(free_convolution(law, delta), eps, KAPPA)
    assert fin.rank_capped and cont.binding
    assert fin.m == pytest.approx(eta * (cont.x_first - delta ** 2 * cont.divided_difference),
                                  abs=1e-3)
    assert fin.q == pytest.approx(eta ** 2 * cont.second, abs=1e-3)
    assert fin.sigma == pytest.approx(cont.divided_difference / sigma_hat, abs=1e-3)
    assert fin.trace == pytest.approx(eta * cont.first, abs=1e-3)
    assert fin.rank_threshold == pytest.approx(cont.threshold, abs=1e-3)


def test_the_prior_agrees_with_the_matrix_model_averaged_over_draws():
    # the deterministic equivalent of E over GOE draws, at moderate d (O(1/d) apart)
    eig = _quantile_spectrum(WishartLaw(0.2), 60)
    new = _capped_prior(eig)(*CONJUGATES)
    draws = [_draw_prior(eig, *CONJUGATES, seed=s) for s in range(40)]
    for name in ("m", "q", "sigma", "trace"):
        values = np.array([dr[name] for dr in draws])
        sem = values.std() / np.sqrt(values.size)
        assert getattr(new, name) == pytest.approx(values.mean(), abs=3 * sem + 0.01
                                                   * abs(values.mean())), name


def test_without_noise_the_cap_keeps_the_largest_target_eigenvalues():
    eig = _quantile_spectrum(WishartLaw(0.5), 40)
    m_hat, sigma_hat = 1.2, 0.9
    state = _capped_prior(eig)(m_hat, 0.0, sigma_hat)
    ref = _draw_prior(eig, m_hat, 0.0, sigma_hat, seed=0)  # q̂ = 0: the draw drops out
    assert state.rank_capped and state.delta == 0
    for name in ("m", "q", "trace"):
        assert getattr(state, name) == pytest.approx(ref[name], rel=1e-12), name
    # the distinct atoms' divided differences, plus the 10 kept atoms' own derivative 1
    assert state.sigma == pytest.approx(ref["sigma"] + 10 / (sigma_hat * 40 ** 2), rel=1e-12)


def test_the_learned_spectrum_has_rank_at_most_p():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = solve_state_evolution(0.2, n_tokens=2, reg_lambda=LAMBDA, width_ratio=KAPPA,
                                    n_features=80, target=DiscreteLaw(
                                        _quantile_spectrum(WishartLaw(0.2), 80)))
    assert res.converged
    assert res.finite_eigenvalues.shape == (80,)
    assert np.count_nonzero(res.finite_eigenvalues) == 20


def test_capped_relu_integrals_bad_input():
    mu = free_convolution(WishartLaw(0.5), 0.4)
    with pytest.raises(TypeError, match="mu"):
        capped_relu_integrals(WishartLaw(0.5), 0.1, 0.5)
    with pytest.raises(ValueError, match="delta > 0"):
        capped_relu_integrals(free_convolution(WishartLaw(0.5), 0.0), 0.1, 0.5)
    with pytest.raises(ValueError, match="rank_ratio"):
        capped_relu_integrals(mu, 0.1, 0.0)
    with pytest.raises(ValueError, match="rank_ratio"):
        capped_relu_integrals(mu, 0.1, 1.5)
    with pytest.raises(ValueError, match="eps"):
        capped_relu_integrals(mu, np.nan, 0.5)


@pytest.mark.slow
def test_the_capped_prior_predicts_trained_students_at_d_80():
    # T = 2 softmax, Wishart(0.2), α = 0.2, λ = 0.05, κ = 0.25 (the cap binds: 27 % of the
    # unconstrained spectrum is positive); one GOE draw was 12–20 % off here
    from skattn import TiedAttentionRegressor
    from skattn.data import AttentionIndexedModel, WishartTarget
    from skattn.metrics import attention_error

    d, alpha = 80, 0.2
    gaps, objective_gaps = [], []
    for seed in range(2):
        teacher = AttentionIndexedModel(d, n_tokens=2, target=WishartTarget(0.2),
                                        random_state=1000 * seed + d)
        X, y = teacher.sample(int(round(alpha * d * d)), random_state=1000 * seed + d + 1,
                              layout="tokens")
        X_test, y_test = teacher.sample(20000, random_state=1000 * seed + d + 2, layout="tokens")
        est = TiedAttentionRegressor(width=KAPPA, reg_lambda=LAMBDA, solver="lbfgs",
                                     max_iter=5000, tol=1e-6, dtype="float64",
                                     random_state=seed).fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            se = solve_state_evolution(alpha, target=teacher, reg_lambda=LAMBDA,
                                       width_ratio=KAPPA)
        assert se.converged and np.count_nonzero(se.finite_eigenvalues) == 20
        gaps.append(attention_error(y_test, est.predict(X_test)) / se.test_error - 1)
        objective_gaps.append(est.train_objective_ / se.train_objective - 1)
    assert abs(np.mean(gaps)) < 0.08, gaps
    assert np.max(np.abs(objective_gaps)) < 0.02, objective_gaps
