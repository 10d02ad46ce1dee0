"""The finite-d sample ratio ``α_eff = α d/(d + 1)`` of the factored state evolution.

docs/theory.rst §4 ("Finite d"): symmetric d×d matrices have d(d + 1)/2 degrees of freedom,
the continuum counts d²/2. The rule lives in StateEvolutionProblem.effective_alpha.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.theory import StateEvolutionProblem, solve_state_evolution
from skattn.theory.laws import DiscreteLaw

LIN_T1 = dict(n_tokens=1, attention="linear", reg_lambda=0.05)


def _problem(**changes):
    return StateEvolutionProblem(WishartTarget(0.5), **{**LIN_T1, **changes})


def test_rule_factored_finite_d():
    problem = _problem(n_features=100)
    assert problem.alpha_factor == pytest.approx(100 / 101, rel=1e-15)
    assert problem.effective_alpha(0.3) == pytest.approx(0.3 * 100 / 101, rel=1e-15)
    assert problem.replace(width_ratio=2.0).effective_alpha(0.3) == pytest.approx(0.3 * 100 / 101)
    assert problem.replace(task="seq2seq", n_tokens=2).alpha_factor == pytest.approx(100 / 101)


def test_rule_keeps_alpha_for_softmax():
    # measured: α_eff moved softmax predictions away from training
    problem = _problem(n_features=100)
    assert problem.replace(attention="softmax", n_tokens=2).effective_alpha(0.3) == 0.3
    # a rank cap keeps the rule; the solver falls back to α only where the cap binds
    assert problem.replace(width_ratio=0.5).alpha_factor == pytest.approx(100 / 101)


@pytest.mark.parametrize("kappa", [0.75, 0.9])
def test_inactive_rank_cap_is_the_full_width_model_at_scaled_lambda(kappa):
    """Width κ with a cap that does not bind has the minimiser of full width at λ̃ = √κ λ,
    so the two predictions must agree (they differed by 12 % at d = 60 while a cap
    dropped the α_eff rule)."""
    teacher = AttentionIndexedModel(60, n_tokens=1, target=WishartTarget(0.3),
                                    attention="linear", random_state=4)
    kw = dict(target=teacher, n_tokens=1, attention="linear")
    capped = solve_state_evolution(0.3, reg_lambda=0.05, width_ratio=kappa, **kw)
    full = solve_state_evolution(0.3, reg_lambda=0.05 * np.sqrt(kappa), **kw)
    assert capped.converged and full.converged
    for name in ("m", "q", "sigma", "test_error", "train_objective"):
        assert getattr(capped, name) == pytest.approx(getattr(full, name), rel=1e-9), name


def test_binding_rank_cap_falls_back_to_alpha(monkeypatch):
    """Where the cap binds (κ = 0.25 on Wishart(0.5) at λ = 0.01: ~60 % positive
    eigenvalues without it) the fixed point is the one at the nominal α."""
    import warnings

    from skattn.theory import DomainWarning

    teacher = AttentionIndexedModel(60, n_tokens=1, target=WishartTarget(0.5),
                                    attention="linear", random_state=4)
    kw = dict(target=teacher, n_tokens=1, attention="linear", reg_lambda=0.01,
              width_ratio=0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DomainWarning)  # a strong cap: outside the domain
        default = solve_state_evolution(0.3, **kw)
        # without the rule (α_eff/α = 1): the fixed points at α and at α d/(d + 1)
        monkeypatch.setattr(StateEvolutionProblem, "alpha_factor", property(lambda self: 1.0))
        at_alpha = solve_state_evolution(0.3, **kw)
        at_alpha_eff = solve_state_evolution(0.3 * 60 / 61, **kw)
    assert default.converged and at_alpha.converged and at_alpha_eff.converged
    for name in ("m", "q", "sigma", "test_error", "train_objective"):
        assert getattr(default, name) == pytest.approx(getattr(at_alpha, name), rel=1e-12)
    assert abs(default.test_error / at_alpha_eff.test_error - 1) > 0.005


def test_rule_continuum_and_direct_keep_alpha():
    assert _problem().effective_alpha(0.3) == 0.3
    assert _problem().alpha_factor == 1.0
    # measured: the exact finite-d ridge estimator follows the SE at α, not at α_eff
    assert _problem(n_features=40, parametrization="direct").effective_alpha(0.3) == 0.3


def test_rule_same_instance_teacher():
    teacher = AttentionIndexedModel(30, n_tokens=1, attention="linear", random_state=0)
    problem = StateEvolutionProblem.from_teacher(teacher, reg_lambda=0.05)
    assert problem.effective_alpha(0.2) == pytest.approx(0.2 * 30 / 31)


@pytest.mark.parametrize("alpha", [0.0, -0.1, np.nan, np.inf])
def test_rule_rejects_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        _problem(n_features=50).effective_alpha(alpha)


def test_rule_rejects_non_number():
    with pytest.raises(TypeError, match="alpha"):
        _problem(n_features=50).effective_alpha("0.3")


@settings(max_examples=50, deadline=None)
@given(alpha=st.floats(1e-3, 10.0), d=st.integers(2, 10 ** 6))
def test_effective_alpha_tends_to_alpha(alpha, d):
    small, large = (_problem(n_features=n).effective_alpha(alpha) for n in (d, 2 * d))
    # α (1 − 1/d) ≤ α_eff < α, and it grows towards α with d
    assert alpha * (1 - 1 / d) <= small < alpha
    assert small < large < alpha


def test_finite_d_solve_is_the_empirical_law_at_alpha_eff():
    """The hook: the finite-d fixed point is the empirical law's at α d/(d + 1); the
    objective keeps the nominal α."""
    d, alpha = 50, 0.3
    eig = np.clip(np.linalg.eigvalsh(WishartTarget(0.5).sample(d, 3)), 0, None)
    # the Gaussian hook (the default at finite d adds the leverage mixture on top)
    # a tight tol: the two start stages draw different samples (d atoms, 128 quantiles),
    # so the paths differ and the points agree to the tolerance
    tight = dict(tol=1e-11)
    finite = solve_state_evolution(alpha, target=DiscreteLaw(eig), n_features=d,
                                   correction="none", options=tight, **LIN_T1)
    law = solve_state_evolution(alpha * d / (d + 1), target=DiscreteLaw(eig), options=tight,
                                **LIN_T1)
    assert finite.converged and law.converged
    for name in ("m", "q", "sigma", "test_error", "train_error"):
        assert getattr(finite, name) == pytest.approx(getattr(law, name), rel=1e-9), name
    assert finite.alpha == alpha
    assert finite.train_objective == pytest.approx(
        alpha * finite.train_error + 0.05 * finite.trace, rel=1e-12)
    # and it is not the law's fixed point at α itself
    at_alpha = solve_state_evolution(alpha, target=DiscreteLaw(eig), **LIN_T1)
    assert finite.test_error > at_alpha.test_error * 1.005


def test_continuum_path_unchanged():
    # the value of the d → ∞ SE before the rule (validation store, "lin T1" continuum row)
    # (stored at tol = 1e-7, the default, which bounds its own error at a few 1e-7; the
    # start stage's path changed since, not the fixed point)
    res = solve_state_evolution(0.3, target=WishartTarget(0.5), options=dict(tol=1e-10),
                                **LIN_T1)
    assert res.converged
    assert res.test_error == pytest.approx(0.3889772875290952, rel=1e-6)


@pytest.mark.slow
def test_same_instance_prediction_of_trained_linear_t1_at_d100():
    """Trained linear T = 1 models at d = 100 (2 teachers) against the same-instance SE."""
    from skattn.estimators import TiedAttentionRegressor

    d, alpha = 100, 0.3
    n = int(round(alpha * d * d))
    ratios = []
    for seed in range(2):
        teacher = AttentionIndexedModel(d, n_tokens=1, target=WishartTarget(0.5),
                                        attention="linear", random_state=500 + seed)
        X, y = teacher.sample(n, random_state=600 + seed, layout="tokens")
        est = TiedAttentionRegressor(width=1.0, reg_lambda=0.05, attention="linear",
                                     solver="lbfgs", max_iter=5000, tol=1e-6,
                                     dtype="float64", device="cpu", random_state=seed)
        est.fit(X, y)
        error = est.S_ - teacher.S0_
        # exact expectation over fresh tokens: E h(Ŝ − S0)² = 2 ‖Ŝ − S0‖²_F/d (no noise)
        simulated = 2 * np.sum(error * error) / d
        predicted = solve_state_evolution(alpha, target=teacher, reg_lambda=0.05)
        assert predicted.converged
        ratios.append(simulated / predicted.test_error)
    gap = np.mean(ratios) - 1
    spread = np.std(ratios, ddof=1) / np.sqrt(len(ratios))
    assert abs(gap) <= max(0.03, 2 * spread), (ratios, gap, spread)


@settings(max_examples=6, deadline=None)
@given(kappa=st.sampled_from([1.5, 2.0, 3.0]), alpha=st.floats(0.1, 0.6),
       reg_lambda=st.floats(0.02, 0.2), attention=st.sampled_from(["linear", "softmax"]),
       task=st.sampled_from(["seq2lab", "seq2seq"]), finite=st.booleans())
def test_width_is_only_a_rescaled_penalty_without_a_cap(kappa, alpha, reg_lambda, attention,
                                                        task, finite):
    """A width κ ≥ 1 never caps the rank: the ERM is full width at λ̃ = √κ λ, and every
    route of the solver (continuum, finite d, α_eff, seq2seq) must predict the same."""
    n_tokens = 1 if attention == "linear" and task == "seq2lab" else 2
    target = (AttentionIndexedModel(24, n_tokens=n_tokens, attention=attention,
                                    target=WishartTarget(0.5), random_state=1)
              if finite else WishartTarget(0.5))
    kw = dict(target=target, task=task, options=dict(n_nodes=1024))
    if not finite:
        kw.update(n_tokens=n_tokens, attention=attention)
    import warnings

    from skattn.theory import DomainWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DomainWarning)  # a small-d teacher may be spiky
        wide = solve_state_evolution(alpha, reg_lambda=reg_lambda, width_ratio=kappa, **kw)
        full = solve_state_evolution(alpha, reg_lambda=reg_lambda * np.sqrt(kappa), **kw)
    assert wide.converged == full.converged
    for name in ("test_error", "train_objective", "m", "q", "sigma"):
        assert getattr(wide, name) == pytest.approx(getattr(full, name), rel=1e-9), name
