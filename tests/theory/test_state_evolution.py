"""State evolution: closed forms, identities, robustness (docs/theory.rst §4–5, §10)."""

import pickle

import numpy as np
import pytest

from skattn.data import PowerLawTarget, WishartTarget
from skattn.theory import (
    DiscreteLaw,
    DomainWarning,
    WishartLaw,
    free_convolution,
    solve_state_evolution,
    state_evolution_curve,
)


def _linear_t1_closed_form(alpha, reg_lambda, kappa0, noise, n_iter=3000):
    """Independent T = 1 linear SE: closed-form output side of docs/theory.rst §4 + spectral prior."""
    law = WishartLaw(kappa0)
    Q0 = law.second_moment()
    m, q, sigma = 0.5 * Q0, 0.5 * Q0, 1.0
    for _ in range(n_iter):
        m_hat = sigma_hat = 2 * alpha / (sigma + 0.25)
        q_hat = 2 * alpha * (Q0 - 2 * m + q + noise / 2) / (sigma + 0.25) ** 2
        delta, eps, eta = np.sqrt(q_hat) / m_hat, 2 * reg_lambda / m_hat, m_hat / sigma_hat
        mu = free_convolution(law, delta)
        D = mu.D(eps)
        new = (eta * (mu.x_relu_moment(eps) - delta ** 2 * D), eta ** 2 * mu.J(eps),
               D / sigma_hat)
        if max(abs(a - b) for a, b in zip(new, (m, q, sigma))) < 1e-12:
            break
        m, q, sigma = (0.5 * a + 0.5 * b for a, b in zip(new, (m, q, sigma)))
    return m, q, sigma


@pytest.mark.parametrize("alpha, reg_lambda, noise", [(0.2, 0.05, 0.0), (0.5, 0.05, 0.0),
                                                      (0.3, 0.1, 0.5)])
def test_linear_t1_matches_closed_form(alpha, reg_lambda, noise):
    m, q, sigma = _linear_t1_closed_form(alpha, reg_lambda, 0.5, noise)
    res = solve_state_evolution(alpha, n_tokens=1, reg_lambda=reg_lambda,
                                target=WishartTarget(0.5), attention="linear", noise=noise)
    assert res.converged, res.message
    assert res.m == pytest.approx(m, rel=2e-3)
    assert res.q == pytest.approx(q, rel=2e-3)
    assert res.sigma == pytest.approx(sigma, rel=2e-3)
    # closed-form conjugates at the fixed point
    assert res.m_hat == pytest.approx(2 * alpha / (res.sigma + 0.25), rel=2e-3)
    assert res.sigma_hat == pytest.approx(2 * alpha / (res.sigma + 0.25), rel=1e-6)
    # linear T = 1 test error is 2 (Q0 + Δ/2 − 2m + q)
    assert res.test_error == pytest.approx(2 * (res.Q0 + noise / 2 - 2 * res.m + res.q),
                                           rel=1e-2, abs=1e-4)


def test_softmax_t2_point_is_consistent():
    res = solve_state_evolution(0.3, n_tokens=2, reg_lambda=0.01, target=WishartTarget(0.5))
    assert res.converged, res.message
    assert 0 < res.m <= np.sqrt(res.q * res.Q0)
    assert res.Q0 == pytest.approx(1.5)
    for name in ("test_error", "train_error", "train_objective", "eta", "delta"):
        assert np.isfinite(getattr(res, name)) and getattr(res, name) > 0
    # objective/d² = α e_train + λ̃ Tr Ŝ/d
    assert res.train_objective == pytest.approx(
        0.3 * res.train_error + 0.01 * res.trace, rel=1e-12)
    # the learned spectrum: atom + density integrate to one
    s = np.linspace(1e-9, max(b for _, b in res.spectrum_support()), 20001)
    mass = np.trapezoid(res.spectrum_density(s), s)
    assert res.atom_mass + mass == pytest.approx(1.0, abs=2e-3)
    assert 0 < res.atom_mass < 1
    # Ŝ = η ReLU(X − ε): its trace matches Tr Ŝ/d
    eig = res.sample_spectrum(4000, random_state=0)
    assert np.mean(eig) == pytest.approx(res.trace, rel=2e-2)
    assert np.mean(eig ** 2) == pytest.approx(res.q, rel=2e-2)
    # the result pickles (with its law) and flattens for tables
    again = pickle.loads(pickle.dumps(res))
    assert again.test_error == res.test_error
    row = res.as_dict()
    assert row["alpha"] == 0.3 and row["converged"] is True


def test_more_data_helps_and_regularisation_costs():
    target = WishartTarget(0.5)
    curve = state_evolution_curve([0.1, 0.2, 0.4], n_tokens=2, reg_lambda=0.01, target=target)
    errs = [r.test_error for r in curve]
    assert all(r.converged for r in curve)
    assert errs[0] > errs[1] > errs[2]
    big = solve_state_evolution(0.4, n_tokens=2, reg_lambda=1.0, target=target)
    assert big.converged and big.test_error > errs[2]


def test_direct_ridgeless_limit():
    # noiseless λ → 0⁺ minimum-norm interpolator: ‖Ŝ − S0‖²/d = Q0 (1 − 2 K_eff α)
    for alpha, T, attention in [(0.1, 1, "linear"), (0.1, 2, "linear"), (0.1, 2, "softmax")]:
        res = solve_state_evolution(alpha, n_tokens=T, reg_lambda=1e-5,
                                    target=WishartTarget(0.5), attention=attention,
                                    parametrization="direct")
        k_eff = T * (T + 1) // 2 - (attention == "softmax")
        assert res.converged, res.message
        assert res.s_error == pytest.approx(res.Q0 * (1 - 2 * k_eff * alpha), rel=1e-2)


def test_finite_d_agrees_with_continuum():
    kw = dict(n_tokens=1, reg_lambda=0.05, attention="linear")
    cont = solve_state_evolution(0.3, target=WishartTarget(0.5), **kw)
    # one fixed draw fluctuates by a few % at d = 300 (measured ±5%); average three draws
    fins = [solve_state_evolution(0.3, target=WishartTarget(0.5), n_features=300,
                                  options=dict(random_state=seed), **kw) for seed in range(3)]
    assert cont.converged and all(f.converged for f in fins)
    assert np.mean([f.test_error for f in fins]) == pytest.approx(cont.test_error, rel=0.04)
    fin = fins[0]
    assert fin.finite_eigenvalues.shape == (300,)
    assert fin.atom_mass == pytest.approx(cont.atom_mass, abs=0.03)


def test_rank_constraint_and_power_law_need_finite_d():
    with pytest.raises(ValueError, match="n_features"):
        solve_state_evolution(0.3, n_tokens=1, reg_lambda=0.1, target=WishartTarget(0.5),
                              attention="linear", width_ratio=0.5)
    with pytest.raises(ValueError, match="n_features"):
        solve_state_evolution(0.3, n_tokens=1, reg_lambda=0.1, target=PowerLawTarget(1.0),
                              attention="linear")
    # κ = 0.25 against a positive fraction ≈ 0.57: a strong cap, outside the validated domain
    with pytest.warns(DomainWarning, match="strong rank cap"):
        res = solve_state_evolution(0.3, n_tokens=1, reg_lambda=0.1,
                                    target=WishartTarget(0.5), attention="linear",
                                    width_ratio=0.25, n_features=120)
    assert res.converged
    assert np.count_nonzero(res.finite_eigenvalues) <= 30


def test_discrete_law_target():
    eig = PowerLawTarget(1.0).eigenvalues(100)
    res = solve_state_evolution(0.3, n_tokens=1, reg_lambda=0.1, target=DiscreteLaw(eig),
                                attention="linear")
    assert res.converged and np.isfinite(res.test_error)


def test_unconverged_is_flagged_not_silent():
    res = solve_state_evolution(0.3, n_tokens=2, reg_lambda=0.01, target=WishartTarget(0.5),
                                options=dict(max_iter=2))
    assert not res.converged
    assert "residual" in res.message


@pytest.mark.parametrize("kwargs, name", [
    (dict(alpha=0.0), "alpha"),
    (dict(alpha=-1.0), "alpha"),
    (dict(n_tokens=1), "n_tokens"),
    (dict(reg_lambda=-1.0), "reg_lambda"),
    (dict(beta=0.0), "beta"),
    (dict(noise=-0.1), "noise"),
    (dict(attention="relu"), "attention"),
    (dict(parametrization="lowrank"), "parametrization"),
    (dict(target="wishart"), "target"),
    (dict(options=dict(tol=0.0)), "tol"),
    (dict(options=dict(sigma_hat_form="exact")), "sigma_hat_form"),
    (dict(options=dict(n_nodez=1024)), "n_nodez"),
    (dict(options=[("tol", 1e-3)]), "options"),
    (dict(correction="leverage_mixture"), "correction"),
    (dict(exact_gram=False), "exact_gram"),
    (dict(spiked=False), "spiked"),
    (dict(leverage=False), "leverage"),
])
def test_bad_input(kwargs, name):
    params = dict(alpha=0.3, n_tokens=2, reg_lambda=0.01, target=WishartTarget(0.5))
    params.update(kwargs)
    alpha = params.pop("alpha")
    with pytest.raises((ValueError, TypeError), match=name):
        solve_state_evolution(alpha, **params)



def test_options_as_keywords_are_deprecated_but_equal():
    """Numerical knobs as plain keywords still work, with a FutureWarning, and give the
    options= result bit for bit (SolverOptions or a dict alike)."""
    from skattn.theory import SolverOptions, state_evolution_curve

    kw = dict(n_tokens=1, reg_lambda=0.05, target=WishartTarget(0.5), attention="linear")
    new = solve_state_evolution(0.3, options=dict(n_nodes=512, tol=1e-6), **kw)
    same = solve_state_evolution(0.3, options=SolverOptions(n_nodes=512, tol=1e-6), **kw)
    with pytest.warns(FutureWarning, match="options="):
        old = solve_state_evolution(0.3, n_nodes=512, tol=1e-6, **kw)
    assert new.as_dict() == old.as_dict() == same.as_dict()
    curve = state_evolution_curve([0.3], options=dict(n_nodes=512, tol=1e-6), **kw)
    assert curve[0].test_error == new.test_error
    with pytest.raises(TypeError, match="correction="):
        state_evolution_curve([0.3], leverage=False, **kw)


def test_forced_correction_outside_its_domain_raises():
    """correction=<name> outside that correction's domain is a ValueError with the reason;
    "none" is the Gaussian core, recorded as such."""
    kw = dict(n_tokens=1, reg_lambda=0.05, target=WishartTarget(0.5), attention="linear",
              options=dict(n_nodes=512))
    with pytest.raises(ValueError, match="correction='exact_gram' does not apply"):
        solve_state_evolution(0.3, correction="exact_gram", **kw)   # the continuum
    core = solve_state_evolution(0.3, correction="none", **kw)
    assert core.correction == "none" and core.correction_weight == 0.0
    assert [d.name for d in core.decisions] == ["spiked", "leverage", "exact_gram"]
    assert not any(d.applies for d in core.decisions)


def test_theory_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, skattn.theory, skattn.amp; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
