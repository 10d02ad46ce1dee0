"""Thresholds (docs/theory.rst §6), the Bayes-optimal baseline (§7) and the optimal λ."""

import numpy as np
import pytest
from scipy import integrate, optimize

from skattn.data import WishartTarget
from skattn.theory import (StateEvolutionProblem, WishartLaw, free_convolution,
                           solve_state_evolution, state_evolution_curve)
from skattn.theory.bayes import bayes_optimal, denoising_mmse
from skattn.theory.optimal import optimal_reg_lambda
from skattn.theory.thresholds import (
    bayes_optimal_threshold,
    effective_constraints,
    interpolation_threshold,
    perfect_recovery_threshold,
    ridgeless_below_threshold,
    semicircle_relu_moments,
    statistical_dimension,
)


def _sc(y):
    return np.sqrt(np.maximum(4 - y * y, 0)) / (2 * np.pi)


# ---------------------------------------------------------------------------------------
# closed forms
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [-1.5, 0.0, 0.3, 1.2, 1.99])
def test_semicircle_moments_against_quadrature(t):
    r, j = semicircle_relu_moments(t)
    assert r == pytest.approx(integrate.quad(lambda y: (y - t) * _sc(y), t, 2)[0], abs=1e-10)
    assert j == pytest.approx(integrate.quad(lambda y: (y - t) ** 2 * _sc(y), t, 2)[0],
                              abs=1e-10)


def test_effective_constraints():
    assert [effective_constraints(T) for T in (2, 3, 4)] == [2, 5, 9]
    assert [effective_constraints(T, "linear") for T in (1, 2, 3)] == [1, 3, 6]
    with pytest.raises(ValueError, match="n_tokens"):
        effective_constraints(1, "softmax")
    with pytest.raises(ValueError, match="attention"):
        effective_constraints(2, "relu")


@pytest.mark.parametrize("w0", [0.1, 0.5, 0.8, 0.95])
def test_statistical_dimension_is_the_minimum(w0):
    M, t = statistical_dimension(w0)

    def Mfun(t):
        return 1 - w0 ** 2 + (1 - w0) * w0 * t * t + w0 ** 2 * semicircle_relu_moments(t)[1]

    ref = optimize.minimize_scalar(Mfun, bounds=(0, 2), method="bounded",
                                   options={"xatol": 1e-10})
    assert M == pytest.approx(ref.fun, abs=1e-10)
    assert t == pytest.approx(ref.x, abs=1e-5)
    assert 1 - w0 ** 2 < M < 1 - w0 ** 2 / 2


@pytest.mark.parametrize("T,attention", [(2, "softmax"), (3, "softmax"), (1, "linear"),
                                         (2, "linear")])
@pytest.mark.parametrize("kappa0", [0.2, 0.5, 0.8])
def test_wishart_thresholds_closed_forms_and_order(T, attention, kappa0):
    K_eff = effective_constraints(T, attention)
    tg = WishartTarget(kappa0)
    a_bo = bayes_optimal_threshold(n_tokens=T, target=tg, attention=attention)
    a_perf = perfect_recovery_threshold(n_tokens=T, target=tg, attention=attention)
    a_int = interpolation_threshold(n_tokens=T, target=tg, attention=attention)
    assert a_bo == pytest.approx((kappa0 - kappa0 ** 2 / 2) / K_eff, rel=1e-12)
    assert a_int == pytest.approx((1 + 2 * kappa0 - kappa0 ** 2) / (4 * K_eff), rel=1e-9)
    assert a_perf == pytest.approx(statistical_dimension(1 - kappa0)[0] / (2 * K_eff))
    assert a_bo < a_perf < a_int < 1 / (2 * K_eff)
    for fun in (interpolation_threshold, perfect_recovery_threshold):
        assert fun(n_tokens=T, target=tg, attention=attention,
                   parametrization="direct") == pytest.approx(1 / (2 * K_eff))


@pytest.mark.parametrize("kappa0", [1.0, 1.5])
@pytest.mark.parametrize("T", [2, 3])
def test_thresholds_coincide_for_full_rank(kappa0, T):
    tg = WishartTarget(kappa0)
    vals = [bayes_optimal_threshold(n_tokens=T, target=tg),
            perfect_recovery_threshold(n_tokens=T, target=tg),
            interpolation_threshold(n_tokens=T, target=tg),
            interpolation_threshold(n_tokens=T, target=tg, parametrization="direct")]
    np.testing.assert_allclose(vals, 1 / (2 * effective_constraints(T)), rtol=1e-9)


def test_table_for_report():
    """α_interp, α_perf, α_BO for κ0 ∈ {0.2, 0.5, 1}, T = 2 softmax (values in the docs)."""
    expect = {0.2: (0.17, 0.127781, 0.09), 0.5: (0.21875, 0.211087, 0.1875),
              1.0: (0.25, 0.25, 0.25)}
    for k, (ai, ap, ab) in expect.items():
        tg = WishartTarget(k)
        assert interpolation_threshold(n_tokens=2, target=tg) == pytest.approx(ai, abs=1e-6)
        assert perfect_recovery_threshold(n_tokens=2, target=tg) == pytest.approx(ap, abs=1e-6)
        assert bayes_optimal_threshold(n_tokens=2, target=tg) == pytest.approx(ab, abs=1e-12)


def test_interpolation_threshold_with_noise():
    tg = WishartTarget(0.5)
    law = WishartLaw(0.5)
    vals = [interpolation_threshold(n_tokens=2, target=tg, noise=n)
            for n in (0.0, 0.01, 0.1, 0.5, 2.0)]
    assert np.all(np.diff(vals) < 0)                # more noise: interpolation stops earlier
    # the defining equation at Δ = 0.5, and α = ∂_δJ/(4 K_eff δ̄) with ∂_δJ by differences
    a = vals[3]
    D = 4 * a                                           # α = D(δ̄, 0)/(2 K_eff), K_eff = 2
    dbar = optimize.brentq(lambda d: free_convolution(law, d).D(0.0) - D, 0.05, 20.0,
                           xtol=1e-10)
    mu = free_convolution(law, dbar)
    assert mu.J(0.0) - dbar ** 2 * mu.D(0.0) == pytest.approx(1.5 + 0.25, rel=2e-3)
    h = 1e-4
    dJ = (free_convolution(law, dbar + h).J(0.0)
          - free_convolution(law, dbar - h).J(0.0)) / (2 * h)
    assert dJ / (4 * 2 * dbar) == pytest.approx(a, rel=2e-3)


def test_threshold_inputs_are_validated():
    tg = WishartTarget(0.5)
    with pytest.raises(ValueError, match="noise"):
        interpolation_threshold(n_tokens=2, target=tg, noise=-1.0)
    with pytest.raises(ValueError, match="parametrization"):
        perfect_recovery_threshold(n_tokens=2, target=tg, parametrization="tied")
    with pytest.raises(TypeError, match="target"):
        bayes_optimal_threshold(n_tokens=2, target=0.5)
    with pytest.raises(ValueError, match="n_features"):
        from skattn.data import PowerLawTarget
        interpolation_threshold(n_tokens=2, target=PowerLawTarget(1.0))


@pytest.mark.parametrize("kw", [dict(), dict(noise=0.5), dict(n_features=40),
                                dict(n_tokens=1, attention="linear")])
def test_ridgeless_below_interpolation_is_the_small_lambda_limit(kw):
    """λ = 0 below the interpolation threshold has a whole set of minimisers and no fixed
    point: the solver returns the λ → 0⁺ limit (the minimum-trace interpolant), its path
    recorded. Before, T = 2 softmax, Wishart(0.5), α = 0.1 ran for minutes to report test
    error 0.96 with converged=False (λ = 1e-6 converges to 0.168), and then it was refused."""
    model = {"n_tokens": 2, "target": WishartTarget(0.5), **kw}
    a_int = interpolation_threshold(**model)
    problem = StateEvolutionProblem(reg_lambda=0.0, **model)
    assert ridgeless_below_threshold(0.1, problem)
    assert not ridgeless_below_threshold(1.01 * a_int, problem)
    assert not ridgeless_below_threshold(0.1, problem.replace(reg_lambda=1e-6))
    res = solve_state_evolution(0.1, reg_lambda=0.0, **model)
    assert res.converged, res.message
    assert "λ → 0⁺ limit" in res.message
    limit = res.extras["ridgeless_limit"]
    assert limit["relative_change"] < 1e-3 and limit["reg_lambda"] <= 1e-4
    lams, errors = np.array(limit["path"]).T
    assert np.all(np.diff(lams) < 0) and errors[-1] == res.test_error
    # the λ = 0 objective, λ = 0 recorded
    assert res.params["reg_lambda"] == 0.0 and res.problem.reg_lambda == 0.0
    assert res.train_objective == pytest.approx(0.1 * res.train_error)
    # the interpolating branch: Σ ∝ 1/λ, and the training error vanishes with λ
    assert res.sigma * limit["reg_lambda"] > 1e-3
    if model.get("noise", 0) == 0:
        assert res.train_error < 1e-6 * res.test_error


def test_ridgeless_limit_is_the_limit_of_small_lambda_solves():
    """The λ = 0 result (linear T = 1: fast solves) equals an independent continuation
    in λ (plain warm starts, no rescaled Σ) at λ = 1e-6 and 1e-7 within the path's
    tolerance; a λ = 0 curve warm-starts each point's limit from its neighbour's and gives
    the same numbers."""
    model = dict(n_tokens=1, attention="linear", target=WishartTarget(0.5))
    zero = solve_state_evolution(0.2, reg_lambda=0.0, **model)
    path = _continuation(0.2, _LAMS + (3e-5, 1e-5, 3e-6, 1e-6, 3e-7, 1e-7), **model)
    for lam in (1e-6, 1e-7):
        small = path[lam]
        assert zero.test_error == pytest.approx(small.test_error, rel=2e-3)
        assert zero.trace == pytest.approx(small.trace, rel=2e-3)
    alphas = [0.1, 0.15, 0.2]
    curve = state_evolution_curve(alphas, reg_lambda=0.0, **model)
    for a, point in zip(alphas, curve):
        alone = solve_state_evolution(a, reg_lambda=0.0, **model)
        assert point.converged and "ridgeless_limit" in point.extras
        assert point.test_error == pytest.approx(alone.test_error, rel=2e-3)


@pytest.mark.slow
def test_ridgeless_limit_softmax_matches_the_issue_small_lambda_solve():
    """The issue's case: T = 2 softmax, Wishart(0.5), α = 0.1; λ = 1e-6 (a cold solve)
    converged to 0.168."""
    model = dict(n_tokens=2, target=WishartTarget(0.5))
    zero = solve_state_evolution(0.1, reg_lambda=0.0, **model)
    small = solve_state_evolution(0.1, reg_lambda=1e-6, **model)
    assert zero.converged and small.converged
    assert zero.test_error == pytest.approx(small.test_error, rel=1e-3)


def test_unconverged_ridgeless_message_says_what_to_pass():
    """Where λ = 0 passes the threshold check but no fixed point is found (here: a budget
    of 2 evaluations), the message names reg_lambda and what to pass."""
    res = solve_state_evolution(0.6, n_tokens=1, attention="linear", reg_lambda=0.0,
                                target=WishartTarget(0.5), options=dict(max_iter=2))
    assert not res.converged
    assert "pass a small positive reg_lambda, e.g. reg_lambda=1e-4" in res.message
    res = solve_state_evolution(0.6, n_tokens=1, attention="linear", reg_lambda=1e-3,
                                target=WishartTarget(0.5), options=dict(max_iter=2))
    assert not res.converged and "reg_lambda" not in res.message


# ---------------------------------------------------------------------------------------
# λ → 0⁺ state evolution lands on the thresholds (linear T = 1: fast and exact)
# ---------------------------------------------------------------------------------------

_LAMS = (1.0, 0.3, 0.1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4)


def _continuation(alpha, lams, **kwargs):
    """Solve along decreasing λ, each point warm-started from the previous one."""
    out, prev = {}, None
    for lam in lams:
        prev = solve_state_evolution(alpha, reg_lambda=lam, options=dict(init=prev), **kwargs)
        assert prev.converged, (alpha, lam, prev.message)
        out[lam] = prev
    return out


def test_se_train_error_vanishes_below_interpolation_threshold():
    tg = WishartTarget(0.5)
    a_int = interpolation_threshold(n_tokens=1, attention="linear", target=tg, noise=0.5)
    train = {}
    for f in (0.9, 1.1):
        res = _continuation(f * a_int, _LAMS, n_tokens=1,
                            attention="linear", target=tg, noise=0.5)
        for lam in (1e-3, 1e-4):
            train[f, lam] = res[lam].train_error
    assert train[0.9, 1e-4] < 1e-6 and train[0.9, 1e-4] < 0.2 * train[0.9, 1e-3]
    assert train[1.1, 1e-4] > 1e-3 and train[1.1, 1e-4] > 0.8 * train[1.1, 1e-3]


def test_se_perfect_recovery_threshold_linear():
    """Noiseless λ → 0⁺: S0 is recovered above α_perf — also between α_perf and the Δ → 0⁺
    interpolation threshold, where docs/theory.rst §6 would place it."""
    tg = WishartTarget(0.2)
    a_perf = perfect_recovery_threshold(n_tokens=1, attention="linear", target=tg)
    a_int = interpolation_threshold(n_tokens=1, attention="linear", target=tg)
    assert a_perf == pytest.approx(0.2555620, abs=1e-6) and a_int == pytest.approx(0.34)
    below = _continuation(0.85 * a_perf, _LAMS, n_tokens=1, attention="linear",
                          target=tg)[1e-4]
    between = _continuation(0.5 * (a_perf + a_int), _LAMS, n_tokens=1, attention="linear",
                            target=tg)[1e-4]
    assert below.s_error > 1e-2
    assert between.s_error < 1e-5


# ---------------------------------------------------------------------------------------
# Bayes-optimal baseline
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kappa0", [0.2, 0.5])
def test_denoising_mmse_limits(kappa0):
    law = WishartLaw(kappa0)
    for t in (1e-5, 1e-3):          # small noise: (1 − Σ w²) t, the degrees of freedom
        assert denoising_mmse(law, t) / t == pytest.approx(1 - (1 - kappa0) ** 2, rel=2e-3)
    big = denoising_mmse(law, 1e4)   # large noise: the variance around the mean m1 I
    assert big == pytest.approx(law.second_moment() - law.moment(1) ** 2, rel=2e-3)
    ts = np.geomspace(1e-3, 1e2, 8)
    assert np.all(np.diff([denoising_mmse(law, t) for t in ts]) > 0)


def test_bayes_mmse_hits_zero_at_alpha_bo():
    tg = WishartTarget(0.2)
    a_bo = bayes_optimal_threshold(n_tokens=2, target=tg)
    near = bayes_optimal(0.98 * a_bo, n_tokens=2, target=tg, n_nodes=1024)
    below = bayes_optimal(0.8 * a_bo, n_tokens=2, target=tg, n_nodes=1024)
    above = bayes_optimal(1.02 * a_bo, n_tokens=2, target=tg, n_nodes=1024)
    assert above.mmse == 0 and above.test_error == pytest.approx(0, abs=1e-12)
    assert 0 < near.mmse < below.mmse
    # continuous (second-order) transition, the MMSE vanishing linearly in α_BO − α
    assert near.mmse < 0.2 * below.mmse
    assert bayes_optimal(0.999 * a_bo, n_tokens=2, target=tg, n_nodes=1024).mmse < 0.01
    # the fixed point: mmse(1/q̂) = 2 K_eff α / q̂
    assert below.mmse == pytest.approx(2 * 2 * below.alpha / below.q_hat, rel=1e-8)
    assert below.m == below.q and below.s_error == below.mmse


def test_bayes_thresholds_coincide_at_full_rank():
    tg = WishartTarget(1.0)
    a = perfect_recovery_threshold(n_tokens=2, target=tg)
    assert bayes_optimal(0.98 * a, n_tokens=2, target=tg, n_nodes=1024).mmse > 0
    assert bayes_optimal(1.01 * a, n_tokens=2, target=tg, n_nodes=1024).mmse == 0


def test_bayes_linear_channel_with_noise():
    tg = WishartTarget(0.5)
    res = [bayes_optimal(a, n_tokens=1, attention="linear", target=tg, noise=0.4)
           for a in (0.05, 0.2, 0.6)]
    assert np.all(np.diff([r.mmse for r in res]) < 0) and res[-1].mmse > 0
    for r in res:  # plug-in = Bayes predictor for linear attention: 2K (Q0 + Δ/2 − q)
        assert r.predictor_error == pytest.approx(2 * (r.Q0 + 0.2 - r.q), rel=1e-12)
        assert r.test_error == pytest.approx(r.predictor_error, rel=5e-3)
        # Gaussian channel fixed point with noise Δ/2 per output
        assert r.mmse + 0.2 == pytest.approx(2 * r.alpha / r.q_hat, rel=1e-8)


def test_bayes_inputs_are_validated():
    tg = WishartTarget(0.5)
    with pytest.raises(ValueError, match="alpha"):
        bayes_optimal(0.0, n_tokens=2, target=tg)
    with pytest.raises(ValueError, match="noise"):
        bayes_optimal(0.1, n_tokens=2, target=tg, noise=-0.1)
    with pytest.raises(ValueError, match="attention"):
        bayes_optimal(0.1, n_tokens=2, target=tg, attention="tanh")


@pytest.mark.parametrize("parametrization", ["factored", "direct"])
def test_no_erm_below_bayes_linear(parametrization):
    tg = WishartTarget(0.5)
    for alpha in (0.1, 0.3, 0.5):
        bo = bayes_optimal(alpha, n_tokens=1, attention="linear", target=tg, noise=0.2)
        for lam in (1e-3, 1e-2, 0.1, 1.0):
            r = solve_state_evolution(alpha, n_tokens=1, attention="linear", reg_lambda=lam,
                                      target=tg, noise=0.2, parametrization=parametrization)
            assert r.converged, r.message
            assert r.s_error >= bo.mmse * (1 - 1e-6)
            assert r.test_error >= bo.predictor_error * (1 - 2e-3)


def test_no_factored_erm_below_bayes_softmax():
    tg = WishartTarget(0.2)
    for alpha in (0.05, 0.12):
        bo = bayes_optimal(alpha, n_tokens=2, target=tg, n_nodes=4096)
        assert bo.predictor_error <= bo.test_error
        for lam in (1e-3, 3e-2):
            r = solve_state_evolution(alpha, n_tokens=2, reg_lambda=lam, target=tg,
                                      options=dict(n_nodes=4096))
            assert r.converged, r.message
            assert r.s_error > bo.mmse
            assert r.test_error > bo.predictor_error
            assert r.test_error > bo.test_error


# ---------------------------------------------------------------------------------------
# optimal λ
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("T", [1, 2])
def test_optimal_ridge_closed_form(T):
    """Direct ERM is ridge regression on the logits: λ* = Δ/(2 Q0) for linear attention."""
    tg = WishartTarget(0.5)
    lam, res = optimal_reg_lambda(0.3, n_tokens=T, attention="linear", target=tg, noise=0.5,
                                  parametrization="direct", xatol=0.003)
    assert res.converged and res.params["reg_lambda"] == lam
    assert lam == pytest.approx(0.5 / (2 * 1.5), rel=0.02)


def test_optimal_factored_is_a_minimum():
    tg = WishartTarget(0.5)
    kw = dict(n_tokens=1, attention="linear", target=tg, noise=0.5)
    lam, res = optimal_reg_lambda(0.3, **kw)
    assert 1e-3 < lam < 10
    for f in (0.7, 1.4):
        other = solve_state_evolution(0.3, reg_lambda=f * lam, **kw)
        assert other.test_error > res.test_error


def test_optimal_reg_lambda_validation():
    tg = WishartTarget(0.5)
    with pytest.raises(ValueError, match="bounds"):
        optimal_reg_lambda(0.1, n_tokens=2, target=tg, bounds=(1.0, 0.1))
    with pytest.raises(ValueError, match="parametrization"):
        optimal_reg_lambda(0.1, n_tokens=2, target=tg, parametrization="x")
    with pytest.raises(TypeError, match="reg_lambda"):
        optimal_reg_lambda(0.1, n_tokens=2, target=tg, reg_lambda=1.0)


# ---------------------------------------------------------------------------------------
# slow: softmax interpolation at small λ, GridSearchCV against the theory
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_se_interpolation_threshold_softmax():
    """Softmax T = 2: the train error falls like λ^1.3 below α_interp and stalls above."""
    tg = WishartTarget(0.5)
    a_int = interpolation_threshold(n_tokens=2, target=tg, noise=0.5)
    ratio = {}
    for f in (0.8, 1.3):
        prev = solve_state_evolution(f * a_int, n_tokens=2, reg_lambda=1e-3, target=tg,
                                     noise=0.5)
        r = solve_state_evolution(f * a_int, n_tokens=2, reg_lambda=1e-4, target=tg,
                                  noise=0.5, options=dict(init=prev))
        assert prev.converged and r.converged
        ratio[f] = r.train_error / prev.train_error
    assert ratio[0.8] < 0.15
    assert ratio[1.3] > 0.5


@pytest.mark.slow
def test_small_lambda_simulation_lands_on_the_predicted_side():
    """TiedAttentionRegressor (linear attention, T = 1, d = 60, λ = 1e-4, Δ = 0.5)
    interpolates below α_interp and not above, with the train error the SE predicts."""
    torch = pytest.importorskip("torch")
    from skattn import AttentionIndexedModel, TiedAttentionRegressor

    torch.set_num_threads(1)
    tg, d, noise = WishartTarget(0.5), 60, 0.5
    a_int = interpolation_threshold(n_tokens=1, attention="linear", target=tg, noise=noise)
    train = {}
    for f in (0.8, 1.25):
        teacher = AttentionIndexedModel(d, n_tokens=1, target=tg, attention="linear",
                                        noise=noise, random_state=0)
        X, y = teacher.sample(int(round(f * a_int * d * d)), random_state=1, layout="tokens")
        est = TiedAttentionRegressor(reg_lambda=1e-4, attention="linear", device="cpu",
                                     dtype="float64", tol=1e-10, max_iter=20000,
                                     random_state=0).fit(X, y)
        train[f] = est.train_error_
        if f > 1:
            se = _continuation(f * a_int, _LAMS, n_tokens=1, attention="linear", target=tg,
                               noise=noise)[1e-4]
            assert est.train_error_ == pytest.approx(se.train_error, rel=0.2)
    assert train[0.8] < 1e-5
    assert train[1.25] > 1e-2
