"""Kurtosis-corrected state evolution for non-Gaussian tokens (docs/tokens.rst).

Fast tests: κ4 = 0 is today's state evolution exactly; the new conjugate t̂ is the
t-derivative of the averaged Moreau envelope (like m̂, Σ̂ in tests/theory/test_channels.py) and
enters the prior as the ε-shift whose t̂-derivative is Tr Ŝ/d; the S = 0 end agrees with
the measured error of uniform attention on Rademacher and Student-t tokens. Slow test
(``-m slow``): the corrected SE matches trained students on Rademacher tokens at small α
where the Gaussian SE does not (tolerance of tests/validation/test_theory_against_simulation.py: 5 % or 3 s.e.).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.theory import (
    StateEvolutionProblem,
    bayes_optimal,
    free_convolution,
    interpolation_threshold,
    solve_state_evolution,
)
from skattn.theory.channels import GaussianNodes, SoftmaxChannel, output_side
from skattn.theory.channels import test_error as se_test_error
from skattn.theory.channels._components import _output_side_by_component, component_overlaps
from skattn.theory.denoisers import FactoredDenoiser
from skattn.theory.problem import token_excess_kurtosis

T, KAPPA0, LAMBDA = 2, 0.5, 0.05


@pytest.fixture(scope="module")
def nodes6():
    return GaussianNodes(6, 4096, seed=0)


# ---- κ4 = 0 is today's state evolution ----------------------------------------------------
def test_zero_kurtosis_is_bit_identical_to_the_gaussian_solver():
    target = WishartTarget(KAPPA0)
    default = solve_state_evolution(0.3, reg_lambda=LAMBDA, n_tokens=T, target=target,
                                    options=dict(n_nodes=1024))
    explicit = solve_state_evolution(0.3, reg_lambda=LAMBDA, n_tokens=T, target=target,
                                     token_kurtosis=0.0, options=dict(n_nodes=1024))
    assert default.as_dict() == explicit.as_dict()
    assert "token_kurtosis" not in default.params  # Gaussian tables keep their columns
    problem = StateEvolutionProblem(target, n_tokens=T, reg_lambda=LAMBDA)
    assert problem == problem.replace(token_kurtosis=0.0)
    assert "token_kurtosis" not in repr(problem)


def test_component_path_reduces_to_the_gaussian_output_side(nodes6):
    ch = SoftmaxChannel(2, beta=2.0)
    kw = dict(m=0.6, q=0.9, Q0=1.5, noise=0.2, sigma=1.0, alpha=0.5, nodes=nodes6,
              sigma_hat_form="stein")
    gaussian = output_side(ch, **kw)
    by_component = _output_side_by_component(ch, warm_start=False, token_kurtosis=0.0,
                                             trace=0.5, target_trace=0.7, **kw)
    for key in gaussian.keys():
        np.testing.assert_allclose(by_component[key], gaussian[key], rtol=1e-12, atol=1e-14)


# ---- the derivation: conjugates are derivatives of Φ ---------------------------------------
@pytest.mark.parametrize("beta, sigma, kappa4", [(1.0, 0.5, -2.0), (1.0, 2.0, 1.5),
                                                 (4.0, 0.5, -1.0)])
def test_t_hat_is_the_trace_derivative_of_the_moreau_envelope(beta, sigma, kappa4, nodes6):
    """t̂ = −2α ∂M/∂t, and m̂, Σ̂ (Stein) keep their meaning with per-component overlaps."""
    ch = SoftmaxChannel(2, beta=beta, target_beta=beta)
    kw = dict(Q0=1.5, noise=0.2, sigma=sigma, alpha=0.5, nodes=nodes6, target_trace=0.7,
              token_kurtosis=kappa4, sigma_hat_form="stein")
    m, q, t, h = 0.6, 0.9, 0.5, 2e-3
    out = output_side(ch, m=m, q=q, trace=t, **kw)

    def moreau(mm, qq, tt):
        return output_side(ch, m=mm, q=qq, trace=tt, **kw).moreau

    d_t = (moreau(m, q, t + h) - moreau(m, q, t - h)) / (2 * h)
    d_m = (moreau(m + h, q, t) - moreau(m - h, q, t)) / (2 * h)
    d_q = (moreau(m, q + h, t) - moreau(m, q - h, t)) / (2 * h)
    assert out.t_hat != 0.0
    np.testing.assert_allclose(out.t_hat, -2 * 0.5 * d_t, rtol=0.02)
    np.testing.assert_allclose(out.m_hat, -2 * 0.5 * d_m, rtol=0.03)
    np.testing.assert_allclose(out.sigma_hat, 4 * 0.5 * d_q, rtol=0.03)


def test_t_hat_shift_of_the_threshold_is_conjugate_to_the_trace():
    """Ψ = (m̂²/4Σ̂) J(δ, (2λ̃ − t̂)/m̂) has ∂Ψ/∂t̂ = Tr Ŝ/(2d): t̂ is t's conjugate."""
    law = WishartTarget(KAPPA0).spectral_law(None)
    m_hat, q_hat, sigma_hat, lam = 0.8, 0.3, 1.1, 0.05
    denoiser = FactoredDenoiser(law, reg_lambda=lam)
    mu = free_convolution(law, np.sqrt(q_hat) / m_hat)

    def psi(t_hat):
        return m_hat ** 2 / (4 * sigma_hat) * mu.J((2 * lam - t_hat) / m_hat)

    t_hat, h = -0.03, 1e-4
    state = denoiser(m_hat, q_hat, sigma_hat, t_hat=t_hat)
    np.testing.assert_allclose((psi(t_hat + h) - psi(t_hat - h)) / (2 * h), state.trace / 2,
                               rtol=1e-5)
    assert state.epsilon == pytest.approx((2 * lam - t_hat) / m_hat)
    # a negative t̂ (Rademacher) raises the threshold: fewer, smaller eigenvalues
    assert state.trace < denoiser(m_hat, q_hat, sigma_hat).trace


@settings(max_examples=40, deadline=None)
@given(d=st.integers(3, 12), kappa4=st.floats(-2.0, 8.0), seed=st.integers(0, 2 ** 16))
def test_component_covariance_is_that_of_a_flat_diagonal_matrix(d, kappa4, seed):
    """For S with a constant diagonal, (q_k, m_k) are the exact diagonal (co)variances."""
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((2, d, d))
    S, S0 = A + A.T, B @ B.T
    np.fill_diagonal(S, rng.normal())
    np.fill_diagonal(S0, abs(rng.normal()))
    m, q, Q0 = np.sum(S * S0) / d, np.sum(S * S) / d, np.sum(S0 * S0) / d
    t, t0 = np.trace(S) / d, np.trace(S0) / d
    m_k, q_k, Q0_k = component_overlaps(3, m=m, q=q, Q0=Q0, trace=t, target_trace=t0,
                                        token_kurtosis=kappa4)
    # Cov(u_aa(S), u_aa(S')) = Tr(SS')/d + (κ4/2) Σ_i S_ii S'_ii/d
    exact_q = q + kappa4 / 2 * np.sum(np.diag(S) ** 2) / d
    exact_m = m + kappa4 / 2 * np.sum(np.diag(S) * np.diag(S0)) / d
    np.testing.assert_allclose(q_k, [exact_q] * 3 + [q] * 3, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m_k, [exact_m] * 3 + [m] * 3, rtol=1e-10, atol=1e-12)
    assert np.all(q_k >= 0) and np.all(m_k ** 2 <= q_k * Q0_k * (1 + 1e-9) + 1e-12)


# ---- input checks ------------------------------------------------------------------------
@pytest.mark.parametrize("value, error", [(-2.5, ValueError), (np.inf, ValueError),
                                          (np.nan, ValueError), ("big", TypeError)])
def test_bad_token_kurtosis(value, error):
    with pytest.raises(error, match="token_kurtosis"):
        StateEvolutionProblem(WishartTarget(KAPPA0), n_tokens=T, token_kurtosis=value)


def test_kurtosis_needs_the_traces(nodes6):
    with pytest.raises(ValueError, match="trace"):
        output_side(SoftmaxChannel(2), m=0.3, q=0.5, Q0=1.5, noise=0.0, sigma=1.0, alpha=1.0,
                    nodes=nodes6, token_kurtosis=-2.0)


def test_solvers_without_the_correction_refuse_kurtosis():
    problem = StateEvolutionProblem(WishartTarget(KAPPA0), n_tokens=T, token_kurtosis=-2.0)
    with pytest.raises(ValueError, match="token_kurtosis"):
        interpolation_threshold(problem)
    with pytest.raises(ValueError, match="token_kurtosis"):
        bayes_optimal(0.3, problem)


def test_token_excess_kurtosis():
    assert token_excess_kurtosis("gaussian") == 0.0
    assert token_excess_kurtosis("rademacher") == -2.0
    assert token_excess_kurtosis("student_t", 10.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="token_df"):
        token_excess_kurtosis("student_t", 4.0)  # infinite fourth moment
    with pytest.raises(ValueError, match="token_df"):
        token_excess_kurtosis("student_t")


# ---- the solver --------------------------------------------------------------------------
def test_solver_with_kurtosis_converges_and_is_self_consistent():
    res = solve_state_evolution(0.3, reg_lambda=LAMBDA, n_tokens=T, target=WishartTarget(KAPPA0),
                                token_kurtosis=-2.0, options=dict(n_nodes=2048))
    assert res.converged, res.message
    assert res.params["token_kurtosis"] == -2.0
    assert res.params["target_trace"] == pytest.approx(np.sqrt(KAPPA0))
    # the threshold carries t̂: ε = (2λ̃ − t̂)/m̂, and Rademacher (κ4 < 0) raises it
    assert res.epsilon == pytest.approx((2 * LAMBDA - res.params["t_hat"]) / res.m_hat)
    assert res.params["t_hat"] < 0
    # the trace of the learned spectrum is the order parameter t
    eig = res.sample_spectrum(4000, random_state=0)
    assert np.mean(eig) == pytest.approx(res.trace, rel=2e-2)


def test_linear_attention_and_direct_parametrization_run():
    for problem in (StateEvolutionProblem(WishartTarget(KAPPA0), n_tokens=1, attention="linear",
                                          reg_lambda=0.05, noise=0.1, token_kurtosis=1.0),
                    StateEvolutionProblem(WishartTarget(KAPPA0), n_tokens=2, reg_lambda=0.05,
                                          parametrization="direct", token_kurtosis=-1.0)):
        res = solve_state_evolution(0.3, problem, options=dict(n_nodes=1024))
        assert res.converged, res.message
        assert np.isfinite(res.test_error) and res.test_error > 0


# ---- against simulations: the S = 0 end (no training needed) -------------------------------
@pytest.mark.parametrize("law, kwargs, kappa4", [
    ("rademacher", {"token_distribution": "rademacher"}, -2.0),
    ("student_t10", {"token_distribution": "student_t", "token_df": 10.0}, 1.0),
])
def test_collapsed_state_evolution_predicts_the_null_predictor(law, kwargs, kappa4):
    """A huge λ collapses the SE to S = 0, whose error is that of uniform attention.

    Measured on teacher samples at d = 200 (40 000 sequences): the corrected SE must match,
    the Gaussian SE must not (the shift is −10 % for Rademacher, +4 % for df = 10).
    """
    d, n = 200, 40_000
    teacher = AttentionIndexedModel(d, n_tokens=T, target=WishartTarget(KAPPA0),
                                    random_state=0, **kwargs)
    _, y = teacher.sample(n, random_state=1, layout="tokens")
    errors = np.sum((y - 0.5) ** 2, axis=(1, 2))
    measured, sem = errors.mean(), errors.std(ddof=1) / np.sqrt(n)
    # the same-instance SE (the teacher's own spectrum: Q0, t0 at this d)
    # (from_teacher takes the token law's κ4 itself)
    problem = StateEvolutionProblem.from_teacher(teacher, reg_lambda=1e3)
    assert problem.token_kurtosis == pytest.approx(kappa4)
    gaussian = solve_state_evolution(0.2, problem.replace(token_kurtosis=0.0))
    corrected = solve_state_evolution(0.2, problem)
    assert corrected.q == 0.0 and "collapsed" in corrected.message
    print(f"\n[S = 0, {law}] measured {measured:.4f} ± {sem:.4f}; SE corrected "
          f"{corrected.test_error:.4f}, Gaussian {gaussian.test_error:.4f}")
    tol = max(0.02 * measured, 3 * sem)
    assert abs(corrected.test_error - measured) <= tol
    assert abs(gaussian.test_error - measured) > tol


def test_test_error_at_zero_estimator_matches_direct_formula(nodes6):
    """At S = 0, test error = 4 E(sigmoid(g) − 1/2)², Var g = 3 Q0 + κ4 t0² (T = 2)."""
    from scipy.special import expit
    ch, Q0, t0, kappa4 = SoftmaxChannel(2), 1.5, np.sqrt(0.5), -2.0
    value = se_test_error(ch, m=0.0, q=0.0, Q0=Q0, noise=0.0, nodes=GaussianNodes(6, 2 ** 14),
                          token_kurtosis=kappa4, trace=0.0, target_trace=t0)
    x, w = np.polynomial.hermite_e.hermegauss(80)
    exact = 4 * np.sum(w * (expit(np.sqrt(3 * Q0 + kappa4 * t0 ** 2) * x) - 0.5) ** 2) \
        / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(value, exact, rtol=2e-3)


# ---- against simulations: trained students (slow) -----------------------------------------
@pytest.mark.slow
def test_corrected_se_matches_rademacher_students_where_the_gaussian_se_does_not():
    import torch

    from skattn import TiedAttentionRegressor
    from skattn.metrics import attention_error

    torch.set_num_threads(1)
    d, alpha, seeds = 120, 0.15, range(3)
    problem = StateEvolutionProblem(WishartTarget(KAPPA0), n_tokens=T, reg_lambda=LAMBDA)
    gaussian = solve_state_evolution(alpha, problem)
    corrected = solve_state_evolution(alpha, problem.replace(token_kurtosis=-2.0))
    assert gaussian.converged and corrected.converged
    errors = []
    for seed in seeds:
        teacher = AttentionIndexedModel(d, n_tokens=T, target=WishartTarget(KAPPA0),
                                        random_state=seed, token_distribution="rademacher")
        X, y = teacher.sample(int(round(alpha * d * d)), random_state=1000 + seed, layout="tokens")
        X_test, y_test = teacher.sample(4000, random_state=2000 + seed, layout="tokens")
        student = TiedAttentionRegressor(reg_lambda=LAMBDA, solver="lbfgs", dtype="float64",
                                         random_state=seed).fit(X, y)
        errors.append(attention_error(y_test, student.predict(X_test)))
    errors = np.array(errors)
    mean, sem = errors.mean(), errors.std(ddof=1) / np.sqrt(len(errors))
    print(f"\n[Rademacher, d={d}, α={alpha}] measured {mean:.5f} ± {sem:.5f}; SE corrected "
          f"{corrected.test_error:.5f}, Gaussian {gaussian.test_error:.5f}")
    assert abs(mean - corrected.test_error) <= max(0.05 * corrected.test_error, 3 * sem)
    assert abs(mean - gaussian.test_error) > max(0.05 * gaussian.test_error, 3 * sem)


def test_from_teacher_takes_the_token_law_and_refuses_what_the_theory_does_not_cover():
    import numpy as np

    from skattn.data import AttentionIndexedModel, WishartTarget
    from skattn.theory import StateEvolutionProblem

    def teacher(**kw):
        return AttentionIndexedModel(24, n_tokens=2, target=WishartTarget(0.5),
                                     random_state=0, **kw)

    assert StateEvolutionProblem.from_teacher(teacher(), reg_lambda=0.1).token_kurtosis == 0
    rad = StateEvolutionProblem.from_teacher(teacher(token_distribution="rademacher"),
                                             reg_lambda=0.1)
    assert rad.token_kurtosis == -2.0
    t10 = StateEvolutionProblem.from_teacher(
        teacher(token_distribution="student_t", token_df=10.0), reg_lambda=0.1)
    assert t10.token_kurtosis == pytest.approx(1.0)
    with pytest.raises(ValueError, match="token_kurtosis"):
        StateEvolutionProblem.from_teacher(teacher(token_distribution="rademacher"),
                                           reg_lambda=0.1, token_kurtosis=0.0)
    with pytest.raises(ValueError, match="n_heads"):
        StateEvolutionProblem.from_teacher(teacher(n_heads=2), reg_lambda=0.1)
    with pytest.raises(ValueError, match="token_covariance"):
        StateEvolutionProblem.from_teacher(teacher(token_covariance=np.eye(24)),
                                           reg_lambda=0.1)
    with pytest.raises(ValueError, match="token_kurtosis"):
        StateEvolutionProblem.from_teacher(
            teacher(token_distribution=lambda rng, shape: rng.choice([-1.0, 1.0], shape)),
            reg_lambda=0.1)
