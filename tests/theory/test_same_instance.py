"""Same-instance predictions: the state evolution of one teacher's own S0 at its d."""

import numpy as np
import pytest

from skattn.data import AttentionIndexedModel, SpectrumTarget, WishartTarget
from skattn.estimators import AsymptoticPredictor
from skattn.theory import StateEvolutionProblem, free_convolution, solve_state_evolution


@pytest.fixture(scope="module")
def teacher():
    return AttentionIndexedModel(40, n_tokens=2, target=WishartTarget(0.5), beta=1.5,
                                 noise=0.2, attention="softmax", random_state=3)


def _explicit(alpha, teacher, **kw):
    eig = np.clip(np.linalg.eigvalsh(teacher.S0_), 0, None)
    return solve_state_evolution(alpha, target=SpectrumTarget(eig),
                                 n_features=teacher.n_features, n_tokens=teacher.n_tokens,
                                 target_beta=teacher.beta, noise=teacher.noise,
                                 attention=teacher.attention, **kw)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_same_instance_equals_the_explicit_spectrum_route(attention):
    teacher = AttentionIndexedModel(50, n_tokens=2, target=WishartTarget(0.5), noise=0.1,
                                    attention=attention, random_state=1)
    same = solve_state_evolution(0.3, target=teacher, reg_lambda=0.05)
    explicit = _explicit(0.3, teacher, reg_lambda=0.05)
    assert same.converged
    for name in ("test_error", "train_objective", "m", "q", "sigma", "Q0"):
        assert getattr(same, name) == getattr(explicit, name), name
    assert same.problem.n_features == 50 and same.problem.noise == 0.1
    assert same.Q0 == pytest.approx(teacher.Q0_, rel=1e-12)


def test_same_instance_differs_from_a_fresh_draw_of_the_family(teacher):
    # n_features=d with the family draws another S0: the reason for the same-instance route
    same = solve_state_evolution(0.3, target=teacher, reg_lambda=0.1)
    family = solve_state_evolution(0.3, target=WishartTarget(0.5), reg_lambda=0.1,
                                   n_tokens=2, target_beta=1.5, noise=0.2, n_features=40)
    assert same.Q0 != pytest.approx(family.Q0, rel=1e-3)


def test_from_teacher_takes_the_teacher_fields(teacher):
    problem = StateEvolutionProblem.from_teacher(teacher, reg_lambda=0.1, beta=2.0)
    assert (problem.n_tokens, problem.target_beta, problem.noise, problem.attention,
            problem.n_features) == (2, 1.5, 0.2, "softmax", 40)
    assert problem.beta == 2.0  # the student's temperature stays the caller's
    # agreeing explicit values are accepted
    StateEvolutionProblem.from_teacher(teacher, n_tokens=2, noise=0.2, target_beta=1.5,
                                       attention="softmax", n_features=40)


@pytest.mark.parametrize("name, value", [("n_tokens", 3), ("target_beta", 1.0),
                                         ("noise", 0.0), ("attention", "linear"),
                                         ("n_features", 41)])
def test_a_contradiction_with_the_teacher_names_the_argument(teacher, name, value):
    with pytest.raises(ValueError, match=f"{name}=.*contradicts the teacher"):
        solve_state_evolution(0.3, target=teacher, reg_lambda=0.1, **{name: value})
    with pytest.raises(ValueError, match=f"{name}="):
        StateEvolutionProblem.from_teacher(teacher, reg_lambda=0.1, **{name: value})


def test_from_teacher_bad_input(teacher):
    with pytest.raises(TypeError, match="teacher"):
        StateEvolutionProblem.from_teacher(WishartTarget(0.5), reg_lambda=0.1)
    with pytest.raises(TypeError, match="target"):
        StateEvolutionProblem.from_teacher(teacher, target=WishartTarget(0.5))


def test_predictor_with_a_teacher_as_target(teacher):
    est = AsymptoticPredictor(target=teacher, reg_lambda=0.1, beta=1.0)
    res = est.state_evolution(0.3, n_tokens=2)
    ref = solve_state_evolution(0.3, target=teacher, reg_lambda=0.1)
    assert res.test_error == ref.test_error
    with pytest.raises(ValueError, match="noise=0.5 contradicts"):
        AsymptoticPredictor(target=teacher, reg_lambda=0.1, noise=0.5).state_evolution(
            0.3, n_tokens=2)
    with pytest.raises(ValueError, match="attention='linear' contradicts"):
        AsymptoticPredictor(target=teacher, attention="linear").state_evolution(0.3, 2)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 30 AMP steps
def test_predictor_fit_with_a_teacher(teacher):
    X, y = teacher.sample(200, random_state=0, layout="tokens")
    est = AsymptoticPredictor(target=teacher, reg_lambda=0.1, max_iter=30).fit(X, y)
    ref = solve_state_evolution(200 / 40 ** 2, target=teacher, reg_lambda=0.1)
    assert est.predicted_test_error_ == pytest.approx(ref.test_error, rel=1e-12)
    other = AttentionIndexedModel(20, n_tokens=2, random_state=0)
    with pytest.raises(ValueError, match="n_features"):
        AsymptoticPredictor(target=other).fit(X, y)


# ---- the finite-d state evolution converges to the continuum ----------------------------
# One fixed GOE draw carried O(1/d) corrections that the fixed point amplified (linear T=1,
# Δ = 0.3: 1.088 at d = 60 and 1.257 at d = 800 against 1.281 on the continuum's own
# quantile spectrum); the free convolution of the d eigenvalues has none.

CASES = [dict(n_tokens=1, attention="linear", reg_lambda=0.05),
         dict(n_tokens=2, attention="softmax", reg_lambda=0.1)]


@pytest.mark.parametrize("noise", [0.0, 0.3])
@pytest.mark.parametrize("case", CASES, ids=["linear", "softmax"])
def test_finite_d_on_the_law_quantiles_equals_the_continuum(case, noise):
    law = WishartTarget(0.5).spectral_law()
    eig = free_convolution(law, 0.0).sample_eigenvalues(60, method="quantile")
    # the finite-d SE runs at α d/(d + 1) for linear attention (docs/theory.rst §4 "Finite d")
    alpha = StateEvolutionProblem(WishartTarget(0.5), n_features=60, **case).effective_alpha(0.3)
    cont = solve_state_evolution(alpha, target=WishartTarget(0.5), noise=noise, **case)
    # the Gaussian fixed point: the finite-d prior side is what is compared here (at finite
    # d softmax T = 2 and linear T = 1 seq2lab are otherwise routed to the leverage mixture,
    # softmax T ≤ 3 to the exact-Gram channel: finite-d effects)
    fin = solve_state_evolution(0.3, target=SpectrumTarget(np.clip(eig, 0, None)),
                                n_features=60, noise=noise, correction="none", **case)
    assert cont.converged and fin.converged
    assert fin.test_error == pytest.approx(cont.test_error, rel=5e-3)
    assert fin.finite_eigenvalues.shape == (60,)


@pytest.mark.parametrize("noise", [0.0, 0.3])
@pytest.mark.parametrize("case", CASES, ids=["linear", "softmax"])
def test_finite_d_converges_to_the_continuum(case, noise):
    cont = solve_state_evolution(0.3, target=WishartTarget(0.5), noise=noise, **case)
    # the Gaussian finite-d state evolution (the leverage mixture adds a finite-d effect
    # of about 1/d on top: docs/domain.rst "Leverage mixture")
    fins = [solve_state_evolution(0.3, target=WishartTarget(0.5), n_features=400,
                                  noise=noise, options=dict(random_state=seed),
                                  correction="none", **case)
            for seed in range(3)]
    assert all(f.converged for f in fins)
    # each draw's own S0 moves the error by up to ±1.6 % at d = 400 (its Q0 by ±1.2 %):
    # that is the teacher, not the solver; the mean of three is within 1 %
    errors = [f.test_error for f in fins]
    assert np.mean(errors) == pytest.approx(cont.test_error, rel=1e-2)
    assert max(errors) == pytest.approx(cont.test_error, rel=3e-2)


# ---- the measured finite-size effect of softmax at small λ ------------------------------

def test_small_lambda_softmax_at_finite_d_warns_of_a_finite_size_effect():
    """Factored softmax T = 2 at finite d ≤ 160 and λ < 0.01 warns (FiniteSizeWarning, a
    DomainWarning that does not mark the configuration as outside the theory's domain)
    where the leverage mixture does not model the effect (``correction="exact_gram"``); the default
    (the mixture), the continuum, λ ≥ 0.01, larger d, T = 3, linear and direct attention
    do not."""
    import warnings

    from skattn.validation import domain_reasons
    from skattn.theory import DomainWarning, FiniteSizeWarning
    from skattn.theory.problem import warn_finite_size

    assert issubclass(FiniteSizeWarning, DomainWarning)
    teacher = AttentionIndexedModel(40, n_tokens=2, target=WishartTarget(0.5), noise=0.1,
                                    random_state=0)
    with pytest.warns(FiniteSizeWarning, match="reg_lambda=0.001") as caught:
        res = solve_state_evolution(0.15, target=teacher, reg_lambda=1e-3,
                                    options=dict(n_nodes=1024), correction="exact_gram")
    assert res.converged
    assert domain_reasons("; ".join(str(w.message) for w in caught)) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", FiniteSizeWarning)
        modelled = solve_state_evolution(0.15, target=teacher, reg_lambda=1e-3,
                                         options=dict(n_nodes=1024))
    assert modelled.correction == "leverage" and modelled.correction_weight == 1.0
    assert modelled.test_error > res.test_error
    base = StateEvolutionProblem(WishartTarget(0.5), n_tokens=2, reg_lambda=1e-3,
                                 n_features=100)
    with pytest.warns(FiniteSizeWarning):
        assert warn_finite_size(base)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FiniteSizeWarning)
        for quiet in (base.replace(reg_lambda=0.01), base.replace(n_features=None),
                      base.replace(n_features=250), base.replace(attention="linear"),
                      base.replace(n_tokens=3),
                      base.replace(parametrization="direct")):
            assert not warn_finite_size(quiet)
        solve_state_evolution(0.15, target=WishartTarget(0.5), n_tokens=2, noise=0.1,
                              reg_lambda=1e-3, options=dict(n_nodes=1024))  # the continuum


def test_a_finite_d_solve_does_not_depend_on_earlier_solves():
    # each denoiser warm-starts its spectral quadrature from its own previous evaluation
    # only: a solve gives the same bits whatever ran before it
    teacher = AttentionIndexedModel(40, n_tokens=1, target=WishartTarget(0.5), noise=0.1,
                                    attention="linear", random_state=3)
    kw = dict(target=teacher, reg_lambda=0.02, correction="none")
    first = solve_state_evolution(0.3, **kw)
    solve_state_evolution(0.5, target=teacher, reg_lambda=0.01, correction="none")
    again = solve_state_evolution(0.3, **kw)
    for name in ("test_error", "m", "q", "sigma", "n_iter"):
        assert getattr(first, name) == getattr(again, name), name
