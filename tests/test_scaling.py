"""Tests of the scaling laws of docs/theory.rst §8: excess-risk exponents and the regime map
(skattn.theory.powerlaw.regimes), power-law fits (skattn.scaling), the λ ∝ √n wrapper
(skattn.estimators.ScaledLambdaRegressor), and (slow) the learning-curve scaling law
measured with scikit-learn's ``learning_curve`` on TiedAttentionRegressor."""

import warnings

import numpy as np
import pytest

from skattn.data import PowerLawTarget
from skattn.estimators import ScaledLambdaRegressor
from skattn.scaling import fit_power_law, irreducible_error
from skattn.theory.powerlaw import (
    REGIMES,
    excess_risk_exponent,
    phase_diagram,
    scaling_regime,
)


# ---------------------------------------------------------------------------------------
# exponents and regimes
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [0.75, 1.0, 1.25, 3.0])
def test_exponents(gamma):
    a = -1 + 1 / (2 * gamma)
    assert excess_risk_exponent(gamma) == pytest.approx(a)
    assert excess_risk_exponent(gamma, "optimal") == pytest.approx(a)
    assert excess_risk_exponent(gamma, "bulk") == -1.0
    assert excess_risk_exponent(gamma, "regularized") == pytest.approx(-(2 - 1 / gamma))
    assert excess_risk_exponent(gamma, "shrinkage") == -2.0
    assert excess_risk_exponent(gamma, "plateau") == 0.0
    # along λ ∝ √n the regularized rate (λ d^{3/2}/n)^{2−1/γ} has the recovery exponent
    assert excess_risk_exponent(gamma, "regularized") * 0.5 == pytest.approx(a)


def test_exponent_errors():
    with pytest.raises(ValueError, match="gamma"):
        excess_risk_exponent(0.5)
    with pytest.raises(TypeError, match="gamma"):
        excess_risk_exponent("1")
    with pytest.raises(ValueError, match="regime"):
        excess_risk_exponent(1.0, "interpolation")


def test_scaling_regime_points():
    d, g = 100, 1.25
    kw = dict(n_tokens=2, noise=0.5)
    assert scaling_regime(5, d, 1e-4, g, **kw) == "plateau"        # n ≪ d: nothing learnable
    assert scaling_regime(1000, d, 1e-4, g, **kw) == "recovery"    # d ≪ n ≪ d², λ ≪ √α
    assert scaling_regime(10 ** 6, d, 1e-4, g, **kw) == "bulk"     # n ≫ d²
    assert scaling_regime(400, d, 2.0, g, **kw) == "regularized"   # λ = 10 √n/d
    assert scaling_regime(1e10, d, 1e4, g, **kw) == "shrinkage"    # δ < ε < λ_d
    assert scaling_regime(5000, d, 1e3, g, **kw) == "plateau"      # ε above λ_1
    # the λ ≶ √(n/d²) boundary of docs/theory.rst §8, here λ = √(4KΔα)
    n = 1000
    edge = np.sqrt(4 * 3 * 0.5 * n / d ** 2)
    assert scaling_regime(n, d, 0.9 * edge, g, **kw) == "recovery"
    assert scaling_regime(n, d, 1.1 * edge, g, **kw) == "regularized"
    # the threshold and noise scales are those of the state evolution: at d = 100,
    # n = 400, λ = 2 (T = 2 linear, Δ = 0.5) it gives ε = 4.38, the map uses 4.17
    from skattn.theory.powerlaw.regimes import _scales

    delta, eps, top, bottom, alpha, K = _scales(400, d, 2.0, g, 2, 0.5)
    assert eps == pytest.approx(4.38, rel=0.1)
    assert top == pytest.approx(PowerLawTarget(g).eigenvalues(d)[0])
    assert bottom == pytest.approx(PowerLawTarget(g).eigenvalues(d)[-1])


def test_scaling_regime_vectorised_and_errors():
    out = scaling_regime(np.geomspace(10, 1e7, 9), 100, 1e-3, 1.25)
    assert out.shape == (9,) and set(out) <= set(REGIMES)
    assert list(out[[0, 3, 8]]) == ["plateau", "recovery", "bulk"]
    grid = scaling_regime(np.array([[1e3], [1e5]]), 100, np.array([1e-3, 1e3]), 1.25)
    assert grid.shape == (2, 2)
    with pytest.raises(ValueError, match="n must"):
        scaling_regime(0, 100, 0.1, 1.25)
    with pytest.raises(ValueError, match="reg_lambda"):
        scaling_regime(10, 100, -0.1, 1.25)
    with pytest.raises(ValueError, match="gamma"):
        scaling_regime(10, 100, 0.1, 0.3)
    with pytest.raises(ValueError, match="noise"):
        scaling_regime(10, 100, 0.1, 1.25, noise=0.0)
    with pytest.raises(ValueError, match="n_tokens"):
        scaling_regime(10, 100, 0.1, 1.25, n_tokens=0)


def test_phase_diagram_grid():
    n = np.geomspace(10, 1e11, 40)
    lam = np.geomspace(1e-4, 1e6, 30)
    regimes, labels = phase_diagram(100, 1.25, n=n, reg_lambda=lam)
    assert regimes.shape == (30, 40) and len(labels) == len(REGIMES)
    assert set(np.unique(regimes)) == {0, 1, 2, 3, 4}
    assert "-0.60" in labels[REGIMES.index("recovery")]


# ---------------------------------------------------------------------------------------
# power-law fits
# ---------------------------------------------------------------------------------------

def test_fit_power_law_exact():
    n = np.geomspace(100, 10000, 7)
    fit = fit_power_law(n, 0.3 + 2.5 * n ** -0.6, e0=0.3)
    assert fit.exponent == pytest.approx(-0.6, abs=1e-10)
    assert fit.prefactor == pytest.approx(2.5, rel=1e-9)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.ci[1] - fit.ci[0] < 1e-6 and fit.contains(-0.6 + 1e-9)
    np.testing.assert_allclose(fit.predict(n), 2.5 * n ** -0.6)


@pytest.mark.parametrize("method", ["t", "bootstrap"])
def test_fit_power_law_interval_covers(method):
    rng = np.random.default_rng(0)
    n = np.geomspace(100, 10000, 8)
    hits, widths = 0, []
    for _ in range(40):
        err = 3 * n[:, None] ** -0.4 * np.exp(0.1 * rng.standard_normal((8, 3)))
        fit = fit_power_law(n, err, method=method, random_state=rng.integers(1 << 30),
                            n_bootstrap=300)
        hits += fit.contains(-0.4)
        widths.append(fit.ci[1] - fit.ci[0])
        assert fit.n_points == 24
    assert hits >= 33  # nominal 95 %
    assert 0.01 < np.mean(widths) < 0.1


def test_fit_power_law_skips_nan_and_errors():
    n = np.array([10.0, 20, 40, 80])
    err = np.array([[1.0, np.nan], [0.7, 0.72], [0.5, 0.49], [0.35, 0.36]])
    assert fit_power_law(n, err).n_points == 7
    with pytest.raises(ValueError, match="e0"):
        fit_power_law(n, [1.0, 0.5, 0.2, 0.1], e0=0.3)
    with pytest.raises(ValueError, match="one row per n"):
        fit_power_law(n, [1.0, 0.5])
    with pytest.raises(ValueError, match="at least 3"):
        fit_power_law(n[:2], [1.0, 0.5])
    with pytest.raises(ValueError, match="confidence"):
        fit_power_law(n, [1.0, 0.5, 0.2, 0.1], confidence=1.5)
    with pytest.raises(ValueError, match="method"):
        fit_power_law(n, [1.0, 0.5, 0.2, 0.1], method="jackknife")
    with pytest.raises(ValueError, match="n must"):
        fit_power_law(-n, [1.0, 0.5, 0.2, 0.1])


def test_scaling_reexports_the_theory_regimes():
    import skattn.scaling
    import skattn.theory.powerlaw as powerlaw

    for name in ("REGIMES", "excess_risk_exponent", "scaling_regime", "phase_diagram",
                 "irreducible_error"):
        assert getattr(skattn.scaling, name) is getattr(powerlaw, name)


def test_fit_power_law_bootstrap_matches_t_interval():
    # scipy.stats.bootstrap on the point indices: with Gaussian log-noise the percentile
    # interval of the pairs bootstrap is close to the t interval, and it is reproducible
    rng = np.random.default_rng(3)
    n = np.geomspace(100, 10000, 10)
    err = 2 * n[:, None] ** -0.5 * np.exp(0.05 * rng.standard_normal((10, 4)))
    t_fit = fit_power_law(n, err)
    boot = fit_power_law(n, err, method="bootstrap", random_state=7)
    assert boot.method == "bootstrap" and boot.exponent == t_fit.exponent
    assert boot.ci == fit_power_law(n, err, method="bootstrap", random_state=7).ci
    np.testing.assert_allclose(boot.ci, t_fit.ci, atol=0.2 * (t_fit.ci[1] - t_fit.ci[0]))


def test_fit_power_law_bootstrap_skips_degenerate_resamples():
    # 5 points at 3 distinct n: some resamples put every point at one n (no slope); the
    # interval comes from the others and stays finite
    n = np.array([10.0, 10, 20, 20, 40])
    err = np.array([1.0, 1.1, 0.7, 0.75, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_power_law(n, err, method="bootstrap", n_bootstrap=500, random_state=0)
    assert np.all(np.isfinite(fit.ci)) and fit.ci[0] < fit.exponent < fit.ci[1]
    with pytest.raises(ValueError, match="n_bootstrap"):
        fit_power_law(n, err, method="bootstrap", n_bootstrap=5)


# ---------------------------------------------------------------------------------------
# the irreducible error e0 and the warning on a wrong e0
# ---------------------------------------------------------------------------------------

def test_wrong_e0_warns_right_e0_does_not():
    n = np.geomspace(100, 10000, 7)
    e0 = irreducible_error(2, attention="linear", noise=0.1)  # K Δ = 3 × 0.1
    err = e0 + 2.5 * n ** -0.6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_power_law(n, err, e0=e0)
    assert fit.exponent == pytest.approx(-0.6)
    # forgetting the noise floor: the curve flattens, the fitted exponent is far off
    with pytest.warns(RuntimeWarning, match="e0 may be too low"):
        fit = fit_power_law(n, err, e0=0.0)
    assert fit.exponent > -0.2
    # overshooting it (still below min err): the curve steepens (a bend this sharp needs a
    # few more points to be significant)
    n10 = np.geomspace(100, 10000, 10)
    with pytest.warns(RuntimeWarning, match="e0 may be too high"):
        fit_power_law(n10, e0 + 2.5 * n10 ** -0.6, e0=e0 + 0.5 * 2.5 * n10[-1] ** -0.6)
    # e0 >= min(err): log(err − e0) undefined
    with pytest.raises(ValueError, match="e0"):
        fit_power_law(n, err, e0=float(err.min()))


def test_e0_warning_is_rare_on_noisy_power_laws():
    rng = np.random.default_rng(5)
    n = np.geomspace(100, 10000, 7)
    n_warned = 0
    for _ in range(100):
        err = 3 * n[:, None] ** -0.4 * np.exp(0.1 * rng.standard_normal((7, 3)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit_power_law(n, err)
        n_warned += any(issubclass(w.category, RuntimeWarning) for w in caught)
    assert n_warned <= 2


def test_irreducible_error_values():
    # linear attention: the label noise summed over the K = T(T+1)/2 entries
    assert irreducible_error(2, attention="linear", noise=0.5) == pytest.approx(1.5)
    assert irreducible_error(3, attention="linear", noise=0.2, Q0=1.5) == pytest.approx(1.2)
    # softmax: zero without noise at β = β0; with noise it grows with Δ
    assert irreducible_error(2) == pytest.approx(0.0, abs=1e-12)
    assert irreducible_error(2, target_beta=2.0) > 0
    assert 0 < irreducible_error(2, noise=0.1) < irreducible_error(2, noise=0.5)
    with pytest.raises(ValueError, match="noise"):
        irreducible_error(2, noise=-0.1)
    with pytest.raises(ValueError, match="attention"):
        irreducible_error(2, attention="relu")
    with pytest.raises(ValueError, match="Q0"):
        irreducible_error(2, Q0=0.0)


# ---------------------------------------------------------------------------------------
# λ ∝ √n wrapper
# ---------------------------------------------------------------------------------------

def test_scaled_lambda_regressor():
    from sklearn.base import clone

    from skattn import TiedAttentionRegressor, make_attention_indexed

    X, y = make_attention_indexed(n_samples=64, n_features=6, n_tokens=2,
                                  attention="linear", random_state=0, layout="tokens")
    base = TiedAttentionRegressor(attention="linear", max_iter=50, device="cpu",
                                  random_state=0)
    est = ScaledLambdaRegressor(base, scale=0.25, exponent=0.5)
    assert clone(est).get_params()["scale"] == 0.25
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    assert est.reg_lambda_ == pytest.approx(0.25 * 8.0)
    assert est.estimator_.reg_lambda == est.reg_lambda_ and base.reg_lambda == 1e-2
    assert est.predict(X).shape == y.shape
    assert np.isfinite(est.score(X, y)) and est.n_features_in_ == 2 * 6
    with pytest.raises(TypeError, match="reg_lambda"):
        ScaledLambdaRegressor(object()).fit(X, y)
    with pytest.raises(ValueError, match="scale"):
        ScaledLambdaRegressor(base, scale=-1.0).fit(X, y)


# ---------------------------------------------------------------------------------------
# slow: the learning-curve scaling law, simulation against the theory
# ---------------------------------------------------------------------------------------

D, C_LAMBDA, NOISE, K = 100, 10.0, 0.5, 3  # linear attention, T = 2: K = T(T+1)/2


def simulated_learning_curve(gamma, sizes, n_splits=3, seed=1):
    """sklearn learning_curve of TiedAttentionRegressor (linear attention, λ = c√n/d).

    The score is minus the population excess risk, exact for linear attention:
    ``e_test(S) − e0 = 2K ‖S − S0‖²_F / d`` at every d.
    """
    from sklearn.model_selection import ShuffleSplit, learning_curve

    from skattn import PowerLawTarget, TiedAttentionRegressor, make_attention_indexed

    X, y, S0 = make_attention_indexed(n_samples=int(1.5 * sizes[-1]), n_features=D,
                                      n_tokens=2, target=PowerLawTarget(gamma),
                                      noise=NOISE, attention="linear", return_target=True,
                                      random_state=seed, layout="tokens")

    def neg_excess(est, X_, y_):
        return -2 * K * np.sum((est.estimator_.S_ - S0) ** 2) / D

    est = ScaledLambdaRegressor(
        TiedAttentionRegressor(width=1.0, attention="linear", solver="lbfgs",
                               max_iter=2000, tol=1e-8, device="cpu", dtype="float64",
                               random_state=0),
        scale=C_LAMBDA / D, exponent=0.5)
    cv = ShuffleSplit(n_splits=n_splits, train_size=int(sizes[-1]), test_size=200,
                      random_state=0)
    n, _, test = learning_curve(est, X, y, train_sizes=sizes, cv=cv, scoring=neg_excess)
    return n, -test, (X, y, S0)


@pytest.mark.slow
@pytest.mark.parametrize("gamma", [0.75, 1.25])
def test_learning_curve_exponent_matches_theory(gamma):
    from skattn import AttentionIndexedModel, PowerLawTarget, TiedAttentionRegressor
    from skattn.metrics import attention_error
    from skattn.theory.powerlaw import theory_learning_curve

    # d ≪ n ≪ d²: n/d from 4 to 40 (α = n/d² from 0.04 to 0.4), one decade
    sizes = np.geomspace(4 * D, 40 * D, 6).round().astype(int)
    n, excess, (X, y, S0) = simulated_learning_curve(gamma, sizes)
    sim = fit_power_law(n, excess)
    lc = theory_learning_curve(n, target=PowerLawTarget(gamma), n_features=D, n_tokens=2,
                               reg_lambda=C_LAMBDA / D, lambda_exponent=0.5,
                               attention="linear", noise=NOISE)
    theory = fit_power_law(n, lc.excess)
    asymptotic = excess_risk_exponent(gamma, "recovery")
    print(f"gamma={gamma}: simulation {sim.exponent:.3f} {sim.ci}, finite-d theory "
          f"{theory.exponent:.3f}, asymptotic {asymptotic:.3f}; sim/theory "
          f"{np.round(excess.mean(axis=1) / lc.excess, 3)}")
    assert lc.converged.all()
    assert abs(sim.exponent - theory.exponent) <= 0.1
    assert abs(sim.exponent - asymptotic) <= 0.1
    assert abs(theory.exponent - asymptotic) <= 0.1
    # pointwise: finite-size corrections make the simulation up to ~15 % worse at n = 4d,
    # a few % at n = 40d
    ratio = excess.mean(axis=1) / lc.excess
    assert np.all((ratio > 0.9) & (ratio < 1.25)) and ratio[-1] < 1.08

    # the population scorer is the test error: check one fit on fresh noisy samples
    teacher = AttentionIndexedModel(D, n_tokens=2, target=PowerLawTarget(gamma), noise=NOISE,
                                    attention="linear", random_state=1)
    assert np.allclose(teacher.S0_, S0)
    X2, y2 = teacher.sample(30000, random_state=12345, layout="tokens")
    lam = C_LAMBDA * np.sqrt(sizes[0]) / D
    est = TiedAttentionRegressor(width=1.0, reg_lambda=lam, attention="linear",
                                 device="cpu", dtype="float64", random_state=0)
    est.fit(X[:sizes[0]], y[:sizes[0]])
    emp = attention_error(y2, est.predict(X2)) - K * NOISE
    assert emp == pytest.approx(2 * K * np.sum((est.S_ - S0) ** 2) / D, rel=0.05)
