"""Tests of the spiked state evolution (skattn.theory.spiked): explicit top modes of a
power-law target as non-Gaussian variables of the output channel."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import AttentionIndexedModel, PowerLawTarget, SpectrumTarget, WishartTarget
from skattn.theory.channels import (
    GaussianNodes,
    SoftmaxChannel,
    channel_for,
    output_side,
    test_error,
)
from skattn.theory.spiked import (
    null_predictor_error,
    solve_spiked_state_evolution,
    spike_components,
    spike_count,
    spiked_output_side,
    spiked_test_error,
    split_spikes,
)

test_error.__test__ = False
NOISE = 0.2


# ---- the split and the spike components ------------------------------------------------
def test_split_spikes_keeps_the_top_modes_and_the_bulk_norm():
    eig = PowerLawTarget(1.25).eigenvalues(80)
    split = split_spikes(eig[::-1], 2)          # any order in, decreasing out
    assert split.n_spikes == 2
    np.testing.assert_allclose(split.strengths, eig[:2] / np.sqrt(80))
    assert split.bulk_eigenvalues.size == 78
    assert split.bulk_Q0 + np.sum(split.strengths ** 2) == pytest.approx(1.0)


def test_spike_count_flags_the_modes_of_the_domain_warning():
    assert spike_count(PowerLawTarget(1.25).eigenvalues(80)) == 1      # 75 % share
    assert spike_count(PowerLawTarget(0.5).eigenvalues(80)) == 0
    wishart = np.linalg.eigvalsh(WishartTarget(0.5).sample(80, random_state=0))
    assert spike_count(wishart) == 0
    assert spike_count(np.zeros(5)) == 0


def test_spike_components_match_the_preactivation_of_the_teacher():
    # S = Σ_i λ_i v_i v_iᵀ: h(S; x) is Σ_i (λ_i/√d)(g_ai g_bi − δ_ab), g = x·v
    rng = np.random.default_rng(0)
    d, T, k = 30, 3, 2
    v = np.linalg.qr(rng.standard_normal((d, k)))[0]
    lam = np.array([4.0, 1.5])
    S = (v * lam) @ v.T
    X = rng.standard_normal((50, T, d))
    from skattn.data.teacher import preactivation
    from skattn.theory.coords import u_from_h
    expected = u_from_h(preactivation(X, S))
    got = spike_components(X @ v, lam / np.sqrt(d))
    np.testing.assert_allclose(got, expected, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 16), k=st.integers(1, 4), T=st.integers(2, 4))
def test_spike_components_are_invariant_under_a_relabelling_of_the_spikes(seed, k, T):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((7, T, k))
    s = rng.uniform(0, 2, k)
    perm = rng.permutation(k)
    np.testing.assert_allclose(spike_components(g[:, :, perm], s[perm]),
                               spike_components(g, s), atol=1e-12)
    # a spike of zero strength contributes nothing, and flipping a projection's sign
    # (v_i → −v_i) changes nothing
    g_flip = g.copy()
    g_flip[:, :, 0] *= -1
    np.testing.assert_allclose(spike_components(g_flip, s), spike_components(g, s),
                               atol=1e-12)
    s0 = s.copy()
    s0[0] = 0.0
    np.testing.assert_allclose(spike_components(g[:, :, 1:], s[1:]) if k > 1 else 0.0,
                               spike_components(g, s0), atol=1e-12)


# ---- the test error -------------------------------------------------------------------
def test_no_spikes_is_the_gaussian_channel_value():
    ch = SoftmaxChannel(2)
    kw = dict(m=0.3, q=0.4, noise=NOISE)
    one = spiked_test_error(ch, target_strengths=[], student_strengths=[], bulk_Q0=0.8,
                            n_replicates=1, seed=3, **kw)
    assert one.value == test_error(ch, Q0=0.8, nodes=GaussianNodes(6, seed=3), **kw)
    many = spiked_test_error(ch, target_strengths=[], student_strengths=[], bulk_Q0=0.8,
                             n_replicates=8, seed=10, **kw)
    reference = test_error(ch, Q0=0.8, nodes=GaussianNodes(6, 2 ** 16, seed=99), **kw)
    assert abs(many.value - reference) < max(4 * many.standard_error, 1e-4)


@pytest.mark.parametrize("n_tokens", [1, 2, 3])
def test_linear_attention_sees_only_second_moments(n_tokens):
    # linear attention: the error is quadratic, so only the covariance of the components
    # matters: E Σ_ab (h0 + ξ − h)² = 2K [bulk_Q0 + Δ/2 − 2m + q + Σ_i (t_i − s_i)²]
    # (E‖φ_i‖² = K, Σ_ab h_ab² = 2‖u‖²), the same with spikes as without
    ch = channel_for("linear", n_tokens)
    t, s = np.array([0.8, 0.3]), np.array([0.5, 0.4])
    m, q, bulk_Q0 = 0.1, 0.2, 0.25
    est = spiked_test_error(ch, target_strengths=t, student_strengths=s, m=m, q=q,
                            bulk_Q0=bulk_Q0, noise=NOISE, n_points=2 ** 14)
    exact = 2 * ch.K * (bulk_Q0 + NOISE / 2 - 2 * m + q + np.sum((t - s) ** 2))
    assert est.value == pytest.approx(exact, rel=5e-3)
    assert abs(est.value - exact) < max(5 * est.standard_error, 1e-3 * exact)


def test_the_spiked_null_error_reproduces_the_teacher_and_the_gaussian_one_does_not():
    # power law γ = 1.25 at d = 80: the top mode carries 75 % of ‖S0‖²_F. Simulated error of
    # the S = 0 predictor: 0.310 (± 0.0007 per 10⁵ samples, the same at d = 200, 400);
    # Gaussian state evolution 0.360
    d = 80
    eig = PowerLawTarget(1.25).eigenvalues(d)
    teacher = AttentionIndexedModel(d, target=PowerLawTarget(1.25), noise=NOISE,
                                    random_state=0)
    _, y = teacher.sample(40000, random_state=1, layout="tokens")
    per_sample = np.sum((y - 0.5) ** 2, axis=(1, 2))
    simulated, sem = per_sample.mean(), per_sample.std() / np.sqrt(per_sample.size)
    gaussian = null_predictor_error(eig, 0, noise=NOISE, n_points=2 ** 12, n_replicates=2)
    spiked = null_predictor_error(eig, 5, noise=NOISE, n_points=2 ** 12, n_replicates=4)
    assert gaussian.value == pytest.approx(0.3596, abs=2e-3)
    assert abs(gaussian.value - simulated) > 0.04
    assert abs(spiked.value - simulated) < 4 * sem + 4 * spiked.standard_error


def test_all_modes_explicit_is_exact_at_small_d():
    # with k = d − 1 only one mode is Gaussian: the computation is the teacher itself
    d = 6
    eig = np.array([3.0, 1.5, 1.0, 0.6, 0.3, 0.1])
    teacher = AttentionIndexedModel(d, target=SpectrumTarget(eig), noise=NOISE,
                                    random_state=0)
    _, y = teacher.sample(60000, random_state=2, layout="tokens")
    per_sample = np.sum((y - 0.5) ** 2, axis=(1, 2))
    simulated, sem = per_sample.mean(), per_sample.std() / np.sqrt(per_sample.size)
    exact = null_predictor_error(eig, d - 1, noise=NOISE, n_points=2 ** 13)
    gaussian = null_predictor_error(eig, 0, noise=NOISE, n_points=2 ** 12, n_replicates=2)
    assert abs(exact.value - simulated) < 4 * sem + 4 * exact.standard_error
    assert abs(gaussian.value - simulated) > 10 * sem


# ---- the output side and the fixed point ---------------------------------------------
def test_no_spikes_output_side_is_todays_stein_output_side():
    ch = SoftmaxChannel(2)
    nodes = GaussianNodes(6, n_points=2048, seed=0)
    kw = dict(m=0.3, q=0.35, noise=NOISE, sigma=0.7, alpha=0.3)
    ours, _ = spiked_output_side(ch, nodes, target_strengths=[], student_strengths=[],
                                 bulk_Q0=0.9, **kw)
    ref = output_side(SoftmaxChannel(2), Q0=0.9, nodes=nodes, sigma_hat_form="stein", **kw)
    assert ours.m_hat == pytest.approx(ref.m_hat, rel=1e-8)
    assert ours.q_hat == pytest.approx(ref.q_hat, rel=1e-8)
    assert ours.sigma_hat == pytest.approx(ref.sigma_hat, rel=1e-8)
    assert ours.train_error == pytest.approx(ref.train_error, rel=1e-8)


def test_fixed_point_satisfies_the_spike_stationarity_and_reduces_to_todays_at_k0():
    from skattn.theory import StateEvolutionProblem, solve_state_evolution
    from skattn.theory.problem import DomainWarning

    d, alpha, lam = 40, 0.3, 0.05
    eig = PowerLawTarget(1.25).eigenvalues(d)
    res = solve_spiked_state_evolution(alpha, eig, reg_lambda=lam, noise=NOISE,
                                       n_points=2048, n_replicates=2)
    assert res.converged and res.n_spikes == 1
    # ERM stationarity along the spike: E[g_outᵀ φ_1] = λ̃/(α√d)
    ch = SoftmaxChannel(2)
    split = split_spikes(eig, 1)
    out, _ = spiked_output_side(ch, GaussianNodes(8, n_points=2048, seed=0),
                                target_strengths=split.strengths,
                                student_strengths=res.student_strengths, m=res.m, q=res.q,
                                bulk_Q0=split.bulk_Q0, noise=NOISE, sigma=res.sigma,
                                alpha=alpha)
    assert out.spike_residual[0] == pytest.approx(lam / (alpha * np.sqrt(d)), abs=1e-4)
    assert 0 < res.student_strengths[0] < res.target_strengths[0]
    base = solve_spiked_state_evolution(alpha, eig, n_spikes=0, reg_lambda=lam, noise=NOISE,
                                        n_points=2048, n_replicates=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DomainWarning)
        gauss = solve_state_evolution(alpha, StateEvolutionProblem(
            PowerLawTarget(1.25), n_tokens=2, reg_lambda=lam, noise=NOISE, n_features=d),
            options=dict(n_nodes=2048), correction="none")
    assert base.m == pytest.approx(gauss.m, rel=1e-3)
    assert base.q == pytest.approx(gauss.q, rel=1e-3)
    assert base.sigma == pytest.approx(gauss.sigma, rel=1e-3)


def test_small_alpha_warns_that_the_prior_noise_is_not_small_against_the_spike():
    """δ/λ_1 above 0.05 (α = 0.1 at d = 60: 0.126, where trained models sit 12 % above the
    spiked value) raises DomainWarning naming the reason; α = 0.3 at d = 100 (0.044,
    within 0.4 % of training) does not."""
    from skattn.theory import DomainWarning
    from skattn.theory.spiked import SPIKE_NOISE_MAX_RATIO

    with pytest.warns(DomainWarning, match="noise width"):
        low = solve_spiked_state_evolution(0.1, PowerLawTarget(1.25).eigenvalues(60),
                                           reg_lambda=0.05, noise=0.2, n_points=2048,
                                           n_replicates=1)
    assert low.noise_to_spike == pytest.approx(0.126, abs=0.005)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DomainWarning)
        high = solve_spiked_state_evolution(0.3, PowerLawTarget(1.25).eigenvalues(100),
                                            reg_lambda=0.05, noise=0.2, n_points=2048,
                                            n_replicates=1)
    assert high.noise_to_spike < SPIKE_NOISE_MAX_RATIO
    none = solve_spiked_state_evolution(0.3, PowerLawTarget(1.25).eigenvalues(40),
                                        n_spikes=0, reg_lambda=0.05, n_points=1024,
                                        n_replicates=1)
    assert np.isnan(none.noise_to_spike)


# ---- bad input ------------------------------------------------------------------------
def test_bad_input_names_the_argument():
    ch = SoftmaxChannel(2)
    with pytest.raises(ValueError, match="n_spikes"):
        split_spikes(np.ones(5), 5)
    with pytest.raises(ValueError, match="non-negative"):
        split_spikes(np.array([1.0, -1.0, 0.5]), 1)
    with pytest.raises(ValueError, match="student_strengths"):
        spiked_test_error(ch, target_strengths=[1.0], student_strengths=[1.0, 2.0], m=0,
                          q=0.1, bulk_Q0=0.5, noise=0)
    with pytest.raises(ValueError, match="m must satisfy"):
        spiked_test_error(ch, target_strengths=[], student_strengths=[], m=1.0, q=0.1,
                          bulk_Q0=0.5, noise=0)
    with pytest.raises(ValueError, match="strengths"):
        spike_components(np.zeros((3, 2, 2)), [1.0])
    with pytest.raises(ValueError, match="nodes"):
        spiked_output_side(ch, GaussianNodes(6), target_strengths=[1.0],
                           student_strengths=[1.0], m=0, q=0.1, bulk_Q0=0.5, noise=0,
                           sigma=1.0, alpha=0.3)
    with pytest.raises(ValueError, match="max_share"):
        spike_count(np.ones(4), max_share=0)
    with pytest.raises(ValueError, match="width_ratio"):
        solve_spiked_state_evolution(0.3, np.ones(10), width_ratio=0.5)


# ---- against trained students (slow) --------------------------------------------------
@pytest.mark.slow
def test_spiked_se_predicts_trained_students_on_a_power_law_target():
    import torch

    from skattn import TiedAttentionRegressor
    from skattn.metrics import attention_error

    torch.set_num_threads(1)
    d, alpha, lam, gamma = 100, 0.3, 0.05, 1.25
    eig = PowerLawTarget(gamma).eigenvalues(d)
    spiked = solve_spiked_state_evolution(alpha, eig, reg_lambda=lam, noise=NOISE)
    from skattn.theory import StateEvolutionProblem, solve_state_evolution
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gauss = solve_state_evolution(alpha, StateEvolutionProblem(
            PowerLawTarget(gamma), n_tokens=2, reg_lambda=lam, noise=NOISE, n_features=d),
            correction="none")
    errors = []
    for seed in range(2):
        teacher = AttentionIndexedModel(d, target=PowerLawTarget(gamma), noise=NOISE,
                                        random_state=seed)
        X, y = teacher.sample(int(round(alpha * d * d)), random_state=1000 + seed, layout="tokens")
        X_test, y_test = teacher.sample(20000, random_state=2000 + seed, layout="tokens")
        student = TiedAttentionRegressor(reg_lambda=lam, solver="lbfgs", dtype="float64",
                                         device="cpu", random_state=seed).fit(X, y)
        errors.append(attention_error(y_test, student.predict(X_test)))
    measured = float(np.mean(errors))
    print(f"\n[power law γ={gamma}, d={d}] measured {errors}; spiked SE "
          f"{spiked.test_error.value:.5f}, Gaussian SE {gauss.test_error:.5f}")
    assert abs(measured - spiked.test_error.value) < 0.04 * measured
    assert abs(measured - gauss.test_error) > 0.06 * measured


def test_no_spike_linear_is_the_finite_d_state_evolution_at_alpha_eff():
    """Linear attention with k = 0: the same fixed point as solve_state_evolution, which
    solves finite-d linear attention at α d/(d + 1) (the objective at α)."""
    from skattn.theory import StateEvolutionProblem, solve_state_evolution
    from skattn.theory.problem import DomainWarning

    d, alpha, lam = 40, 0.3, 0.05
    eig = np.clip(np.linalg.eigvalsh(WishartTarget(0.5).sample(d, 2)), 0, None)
    base = solve_spiked_state_evolution(alpha, eig, n_spikes=0, n_tokens=1, reg_lambda=lam,
                                        attention="linear", n_points=2048, n_replicates=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DomainWarning)
        gauss = solve_state_evolution(alpha, StateEvolutionProblem(
            SpectrumTarget(eig), n_tokens=1, reg_lambda=lam, attention="linear",
            n_features=d), options=dict(n_nodes=2048, sigma_hat_form="stein"),  # its Σ̂
            correction="none")
    # (at the nominal α they differ by 1.1 % in q and 4.7 % in Σ)
    for name in ("m", "q", "sigma", "train_objective"):
        assert getattr(base, name) == pytest.approx(getattr(gauss, name), rel=1e-4), name


# ---- the route from solve_state_evolution ------------------------------------------------
def test_solve_state_evolution_routes_spiky_softmax_targets_to_the_spiked_state_evolution():
    """Finite-d factored softmax seq2lab on a spiky target is the spiked fixed point, with
    the whole matrix's overlaps, the spike in the learned spectrum and no "spiky target"
    warning; correction="none" keeps the Gaussian fixed point and its warning."""
    from skattn.theory import solve_state_evolution
    from skattn.theory.problem import DomainWarning

    d, alpha, lam = 100, 0.3, 0.05
    eig = PowerLawTarget(1.25).eigenvalues(d)
    own = solve_spiked_state_evolution(alpha, eig, reg_lambda=lam, noise=NOISE, tol=1e-7,
                                       max_iter=600)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DomainWarning)   # inside the spiked domain here
        routed = solve_state_evolution(alpha, n_tokens=2, reg_lambda=lam, noise=NOISE,
                                       target=PowerLawTarget(1.25), n_features=d)
    assert routed.converged and routed.correction == "spiked"
    assert routed.correction_weight == 1.0
    assert [d.name for d in routed.decisions if d.applies] == ["spiked"]
    assert routed.extras["n_spikes"] == 1
    assert routed.test_error == pytest.approx(own.test_error.value, rel=1e-12)
    assert routed.train_objective == pytest.approx(own.train_objective, rel=1e-12)
    t, s = own.target_strengths, own.student_strengths
    assert routed.m == pytest.approx(own.m + t @ s, rel=1e-12)
    assert routed.q == pytest.approx(own.q + s @ s, rel=1e-12)
    assert routed.Q0 == pytest.approx(np.mean(eig ** 2), rel=1e-12)
    assert routed.params["n_spikes"] == 1
    from skattn.theory.spiked import is_spiked_result
    assert is_spiked_result(routed) and not is_spiked_result(None)
    # the learned spectrum holds the spike s_1 √d as its top eigenvalue, and as a point of
    # the support
    spectrum = routed.sample_spectrum(d)
    assert spectrum.shape == (d,) and spectrum[-1] == pytest.approx(s[0] * np.sqrt(d))
    assert routed.spectrum_support()[-1] == pytest.approx((s[0] * np.sqrt(d),) * 2)
    # Tr Ŝ/d of the objective: L/d² = α e_train + λ Tr Ŝ/d (κ = 1)
    assert routed.train_objective == pytest.approx(
        alpha * routed.train_error + lam * routed.trace, rel=1e-10)
    # a teacher with this spectrum is routed the same way (only its eigenvalues matter)
    teacher = AttentionIndexedModel(d, target=PowerLawTarget(1.25), noise=NOISE,
                                    random_state=3)
    assert solve_state_evolution(alpha, target=teacher, reg_lambda=lam).test_error == \
        pytest.approx(routed.test_error, rel=1e-6)
    with pytest.warns(DomainWarning, match="spiky target"):
        gauss = solve_state_evolution(alpha, n_tokens=2, reg_lambda=lam, noise=NOISE,
                                      target=PowerLawTarget(1.25), n_features=d,
                                      correction="none")
    assert gauss.correction == "none"
    assert gauss.test_error < 0.95 * routed.test_error   # 9 % lower (docs/spiked.rst)


@pytest.mark.parametrize("changes", [dict(attention="linear", n_tokens=1),
                                     dict(task="seq2seq"), dict(width_ratio=0.5),
                                     dict(parametrization="direct"), dict(n_tokens=5),
                                     dict(target=WishartTarget(0.5))])
def test_only_validated_problems_are_routed(changes):
    """The spiked correction's domain (skattn/theory/corrections/spiked.py); a width whose
    cap binds is outside it (one whose cap does not bind is solved at full width, below)."""
    from skattn.theory import StateEvolutionProblem

    problem = StateEvolutionProblem(PowerLawTarget(1.25), n_tokens=2, reg_lambda=0.05,
                                    noise=NOISE, n_features=60)
    eig = PowerLawTarget(1.25).eigenvalues(60)
    assert _spiked_weight(problem, eig) == 1.0
    continuum = StateEvolutionProblem(WishartTarget(0.5), n_tokens=2, reg_lambda=0.05)
    assert _spiked_weight(continuum, eig) == 0.0
    assert _spiked_weight(problem, None) == 0.0          # no eigenvalues: nothing is spiky
    changed = problem.replace(**changes)
    eig = changed.target_law(0)[1]
    assert _spiked_weight(changed, eig, rank_capped="width_ratio" in changes) == 0.0


def _spiked_weight(problem, eigenvalues, rank_capped=False, alpha=0.3):
    """The spiked correction's domain weight (its ``decide`` rule, with a stand-in core that
    carries only what the rule reads)."""
    from skattn.theory.core.solve import CoreSolution
    from skattn.theory.corrections.spiked import SpikedCorrection

    core = CoreSolution(result=None, rank_capped=rank_capped, collapsed=False,
                        eigenvalues=eigenvalues)
    return SpikedCorrection().decide(alpha, problem, core).weight


def test_spiked_weight_ramps_with_the_top_mode_share_and_the_width():
    """The spiked correction fades in as the top mode's share of ||S0||_F^2 goes from 30 %
    to 40 %; a width whose cap does not bind is in its domain (computed at full width)."""
    from skattn.theory import StateEvolutionProblem

    problem = StateEvolutionProblem(PowerLawTarget(1.25), n_tokens=2, reg_lambda=0.05,
                                    noise=NOISE, n_features=30)

    def share(x):     # a top mode with share x of Σλ² over 29 unit modes
        return np.r_[np.sqrt(x / (1 - x) * 29), np.ones(29)]

    assert _spiked_weight(problem, share(0.29)) == 0.0
    assert 0.0 < _spiked_weight(problem, share(0.35)) < 1.0
    assert _spiked_weight(problem, share(0.41)) == 1.0
    wide = problem.replace(width_ratio=0.5)
    assert _spiked_weight(wide, share(0.5), rank_capped=False) == 1.0
    assert _spiked_weight(wide, share(0.5), rank_capped=True) == 0.0


def test_spiked_route_warm_starts_along_a_curve_and_in_the_predictor():
    from skattn import AsymptoticPredictor
    from skattn.theory import solve_state_evolution, state_evolution_curve

    d, lam = 60, 0.05
    kw = dict(n_tokens=2, reg_lambda=lam, noise=NOISE, target=PowerLawTarget(1.25),
              n_features=d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # small α: the "spike close to the noise" warning
        curve = state_evolution_curve([0.2, 0.3], **kw)
        cold = solve_state_evolution(0.3, **kw)
    assert all(r.converged for r in curve)
    assert curve[1].test_error == pytest.approx(cold.test_error, rel=1e-4)
    assert curve[1].n_iter < cold.n_iter
    teacher = AttentionIndexedModel(d, target=PowerLawTarget(1.25), noise=NOISE,
                                    random_state=0)
    X, y = teacher.sample(int(round(0.3 * d * d)), random_state=1, layout="tokens")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = AsymptoticPredictor(target=teacher, reg_lambda=lam, max_iter=50).fit(X, y)
    assert pred.predicted_test_error_ == pytest.approx(cold.test_error, rel=1e-6)
    assert pred.predicted_spectrum_["eigenvalues"].max() == pytest.approx(
        cold.params["spike_strengths"][0] * np.sqrt(d))


def test_spiked_route_falls_back_to_continuation_in_lambda(monkeypatch):
    """A routed solve that finds no fixed point from its cold start is continued from a
    larger λ, like the Gaussian solver, and says so."""
    import skattn.theory.corrections.spiked as spiked_correction
    import skattn.theory.state_evolution as se
    from skattn.theory import solve_state_evolution

    real = spiked_correction.spiked_prediction
    calls = []

    def cold_start_fails(alpha, problem, eigenvalues, **kw):
        calls.append((problem.reg_lambda, kw["init"] is None))
        res = real(alpha, problem, eigenvalues, **kw)
        if kw["init"] is None and problem.reg_lambda < 0.01:
            res.converged, res.message = False, "stalled (simulated)"
        return res

    monkeypatch.setattr(spiked_correction, "spiked_prediction", cold_start_fails)
    kw = dict(n_tokens=2, noise=NOISE, target=PowerLawTarget(1.25), n_features=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = solve_state_evolution(0.3, reg_lambda=5e-3, **kw)
        direct = real(0.3, se.StateEvolutionProblem(PowerLawTarget(1.25), n_tokens=2,
                                                    reg_lambda=5e-3, noise=NOISE,
                                                    n_features=60),
                      PowerLawTarget(1.25).eigenvalues(60), n_nodes=8192, tol=1e-7,
                      max_iter=600, damping=0.5, init=None, random_state=0)
    assert res.converged and res.correction == "spiked"
    assert "continuation" in res.message
    assert calls[0] == (5e-3, True) and calls[1] == (pytest.approx(0.05), True)
    assert res.params["reg_lambda"] == 5e-3
    assert res.test_error == pytest.approx(direct.test_error, rel=1e-4)


@settings(max_examples=50, deadline=None)
@given(eig=st.lists(st.floats(0.0, 10.0), min_size=2, max_size=30).filter(
    lambda e: sum(x * x for x in e) > 1e-6))
def test_spike_count_and_is_spiky_are_one_rule(eig):
    """The spiked route (a positive spike count) and the other routes (is_spiky) read the
    same Gaussian-equivalence rule."""
    from skattn.theory.problem import is_spiky
    from skattn.theory.spiked import spike_count

    assert (spike_count(np.array(eig)) > 0) == is_spiky(np.array(eig))
