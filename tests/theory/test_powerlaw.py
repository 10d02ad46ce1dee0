"""Tests of skattn.theory.powerlaw: spectral recovery, emergence, error decomposition and
theory learning curves for power-law targets (docs/theory.rst §8)."""

import time
from types import SimpleNamespace

import numpy as np
import pytest

from skattn.data import AttentionIndexedModel, PowerLawTarget
from skattn.theory import DiscreteLaw, DomainWarning, solve_state_evolution
from skattn.theory.denoisers import goe_matrix
from skattn.theory.powerlaw import (
    error_coefficients,
    error_decomposition,
    emergence_alpha,
    irreducible_error,
    isolation_thresholds,
    powerlaw_law,
    recovered_modes,
    theory_learning_curve,
)


def fake_result(law, delta, epsilon=0.0, eta=1.0, alpha=0.1):
    """Just what recovered_modes reads from a StateEvolutionResult."""
    return SimpleNamespace(law=law, delta=delta, epsilon=epsilon, eta=eta, alpha=alpha,
                           parametrization="factored")


def linear_se(d, n, gamma=1.25, c=3.0, noise=0.5, **kw):
    """Linear attention, T = 2, λ = c √(n/d²), deterministic equivalent at dimension d."""
    a = n / d ** 2
    return solve_state_evolution(a, n_tokens=2, reg_lambda=c * np.sqrt(a),
                                 target=powerlaw_law(gamma, d), attention="linear",
                                 noise=noise, options=dict(n_nodes=1024), **kw)


@pytest.fixture(scope="module")
def se_200():
    return {n: linear_se(200, n) for n in (400, 2000, 8000)}


# ---------------------------------------------------------------------------------------
# spectral recovery
# ---------------------------------------------------------------------------------------

def test_single_spike_matches_bbp():
    # one spike θ in a null bulk: outlier at θ + δ²/θ with squared overlap 1 − δ²/θ²
    d, theta, delta = 400, 3.0, 1.0
    law = DiscreteLaw(np.r_[theta, np.zeros(d - 1)])
    rec = recovered_modes(fake_result(law, delta))
    assert rec.recovered[0] and rec.n_recovered == 1
    # the bulk carries the d − 1 null eigenvalues: δ² G_bulk(x) with mass (d − 1)/d
    x = rec.positions[0]
    assert x == pytest.approx(theta + delta ** 2 * (1 - 1 / d) / theta, rel=2e-3)
    assert rec.overlaps[0] == pytest.approx(1 - delta ** 2 / theta ** 2, abs=3e-3)
    assert rec.bulk_edge == pytest.approx(2 * delta, rel=1e-2)
    assert rec.learned_eigenvalues[0] == pytest.approx(x)
    # below the BBP threshold θ < δ the spike sinks into the bulk
    rec2 = recovered_modes(fake_result(DiscreteLaw(np.r_[0.7, np.zeros(d - 1)]), delta))
    assert rec2.n_recovered == 0 and not rec2.outlier.any()
    # a threshold ε above the outlier: isolated but not recovered
    rec3 = recovered_modes(fake_result(law, delta, epsilon=3.5))
    assert rec3.outlier[0] and not rec3.recovered[0]


def test_isolation_thresholds_match_recovery():
    lam = powerlaw_law(1.25, 100).eigenvalues[::-1]
    thr = isolation_thresholds(lam)
    assert np.all(np.diff(thr[:10]) < 0)  # top modes separate first
    for i in (0, 2, 5):
        above = recovered_modes(fake_result(DiscreteLaw(lam), thr[i] * 1.01))
        below = recovered_modes(fake_result(DiscreteLaw(lam), thr[i] * 0.99))
        assert not above.outlier[i] and below.outlier[i]


def test_recovery_along_n(se_200):
    recs = [recovered_modes(se_200[n]) for n in sorted(se_200)]
    counts = [r.n_recovered for r in recs]
    assert counts == sorted(counts) and counts[0] >= 1 and counts[-1] > counts[0]
    for r in recs:
        k = r.n_recovered
        # recovered modes are the top ones, in order, above the bulk and above ε
        assert np.array_equal(r.recovered_indices, np.arange(k))
        assert np.all(r.positions[:k] > r.bulk_edge) and np.all(r.positions[:k] > r.epsilon)
        assert np.all(np.diff(r.positions[:k]) < 0)
        assert np.all((r.overlaps[:k] > 0) & (r.overlaps[:k] <= 1))
        assert np.all(np.isnan(r.positions[k:]))
    # outliers approach the target eigenvalues as n grows (δ → 0)
    err = [abs(r.positions[0] / r.target_eigenvalues[0] - 1) for r in recs]
    assert err[-1] < err[0] < 0.2 and recs[-1].overlaps[0] > 0.99


def test_recovery_from_explicit_eigenvalues(se_200):
    r = se_200[2000]
    a = recovered_modes(r)
    b = recovered_modes(r, PowerLawTarget(1.25).eigenvalues(200)[::-1])  # order is free
    assert np.array_equal(a.recovered, b.recovered)
    np.testing.assert_allclose(a.positions, b.positions, equal_nan=True)
    c = recovered_modes(r, max_cluster=None)
    assert c.n_recovered >= a.n_recovered


def test_recovered_modes_errors(se_200):
    r = se_200[400]
    with pytest.raises(ValueError, match="max_cluster"):
        recovered_modes(r, max_cluster=0)
    with pytest.raises(ValueError, match="target_eigenvalues"):
        recovered_modes(fake_result(None, 1.0))
    with pytest.raises(ValueError, match="target_eigenvalues"):
        recovered_modes(r, [1.0])
    with pytest.raises(TypeError, match="StateEvolutionResult"):
        recovered_modes(object())
    with pytest.raises(ValueError, match="delta"):
        recovered_modes(fake_result(powerlaw_law(1.0, 10), 0.0))


# ---------------------------------------------------------------------------------------
# error decomposition
# ---------------------------------------------------------------------------------------

def test_decomposition_is_exact_for_linear_attention(se_200):
    for n, r in se_200.items():
        dec = error_decomposition(r)
        # the spectral-law pieces rebuild m and ‖Ŝ − S0‖²/d of the fixed point
        assert dec.s_error == pytest.approx(r.s_error, rel=1e-7)
        assert dec.m == pytest.approx(r.m, rel=1e-7)
        assert dec.mismatch == pytest.approx((r.Q0 - r.m) ** 2 / r.Q0, rel=1e-6)
        assert min(dec.over, dec.under, dec.approx) >= 0
        assert dec.c1 == 6.0 and dec.c2 == 0.0 and dec.e0 == pytest.approx(3 * 0.5)
        total = sum(dec.contributions.values())
        assert total == pytest.approx(dec.excess, rel=1e-7)
        assert dec.residual == pytest.approx(0.0, abs=1e-7 * dec.excess)
        # and the test error of the fixed point (quasi-Monte-Carlo quadrature)
        assert total == pytest.approx(r.test_error - dec.e0, rel=3e-2)


def test_decomposition_against_finite_matrices(se_200):
    # Ŝ = η ReLU(S0 + δZ − ε) for GOE draws at d = 200: the same split, by eigenvectors
    r = se_200[2000]
    dec = error_decomposition(r)
    rec = dec.recovery
    lam = rec.target_eigenvalues
    d, k = lam.size, int(rec.outlier.sum())
    emp = []
    for seed in range(3):
        nu, V = np.linalg.eigh(np.diag(lam) + r.delta * goe_matrix(d, seed))
        nu, V = nu[::-1], V[:, ::-1]
        s = r.eta * np.maximum(nu - r.epsilon, 0.0)
        Sii = (V ** 2) @ s
        per_mode = lam * (lam - 2 * Sii) / d
        R = rec.recovered
        emp.append([np.sum(s[k:] ** 2) / d,
                    per_mode[~R].sum() + np.sum(s[:k][~R[:k]] ** 2) / d,
                    per_mode[R].sum() + np.sum(s[:k][R[:k]] ** 2) / d,
                    *nu[:k], *(V[np.arange(k), np.arange(k)] ** 2)])
    emp = np.mean(emp, axis=0)
    np.testing.assert_allclose(emp[:3], [dec.over, dec.under, dec.approx], rtol=0.12)
    np.testing.assert_allclose(emp[3:3 + k], rec.positions[:k], rtol=0.03)
    np.testing.assert_allclose(emp[3 + k:], rec.overlaps[:k], atol=0.06)


def test_decomposition_moves_from_under_to_approx(se_200):
    decs = [error_decomposition(se_200[n]) for n in sorted(se_200)]
    assert decs[0].under > decs[-1].under
    assert decs[0].excess > decs[1].excess > decs[2].excess


def test_error_coefficients():
    lin = SimpleNamespace(Q0=1.0, m=0.3, params=dict(attention="linear", n_tokens=3,
                                                     noise=0.2))
    assert error_coefficients(lin) == (6 * 0.2, 12.0, 0.0)
    soft = SimpleNamespace(Q0=1.0, m=1.0, params=dict(attention="softmax", n_tokens=2,
                                                      beta=1.0, target_beta=1.0, noise=0.0))
    e0, c1, c2 = error_coefficients(soft, n_nodes=4096)
    assert e0 == pytest.approx(0.0, abs=1e-12) and c1 > 0 and c2 < 0
    e0n = error_coefficients(SimpleNamespace(Q0=1.0, m=0.5, params=dict(soft.params,
                                                                         noise=0.5)))[0]
    assert e0n > 0


@pytest.mark.parametrize("attention, noise, Q0", [("linear", 0.2, 1.0),
                                                   ("softmax", 0.0, 1.0),
                                                   ("softmax", 0.5, 1.0),
                                                   ("softmax", 0.5, 1.5)])
def test_irreducible_error_is_the_e0_of_the_decomposition(attention, noise, Q0):
    params = dict(attention=attention, n_tokens=2, beta=1.0, target_beta=1.0, noise=noise)
    result = SimpleNamespace(Q0=Q0, m=0.5 * Q0, params=params)
    e0 = irreducible_error(2, attention=attention, noise=noise, Q0=Q0, n_nodes=4096)
    assert e0 == error_coefficients(result, n_nodes=4096)[0]


def test_irreducible_error_is_below_every_error_for_linear_attention():
    # linear attention: e0 = KΔ is the minimum of e_test = KΔ + 2K‖S − S0‖²/d
    from skattn.theory.powerlaw.decomposition import _error_function

    e = _error_function("linear", 2, 1.0, 1.0, 1.0, 0.3, 16, 0)
    e0 = irreducible_error(2, attention="linear", noise=0.3)
    for m, q in [(0.9, 0.9), (0.5, 0.3), (1.0, 1.1)]:
        assert e(m, q) >= e0


def test_theory_does_not_import_data():
    """data depends on theory.laws one way: importing the theory pulls in no skattn.data."""
    import subprocess
    import sys

    code = ("import sys, skattn.theory, skattn.theory.powerlaw as p, skattn.scaling; "
            "p.powerlaw_law(1.25, 10); p.scaling_regime(1e3, 100, 0.1, 1.25); "
            "bad = sorted(m for m in sys.modules if m.startswith(('skattn.data', 'torch'))); "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_powerlaw_law_is_the_target_law():
    law = powerlaw_law(1.25, 50, cutoff=30)
    np.testing.assert_array_equal(
        law.eigenvalues, PowerLawTarget(1.25, cutoff=30).spectral_law(50).eigenvalues)


@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_decomposition_softmax_is_accurate(noise):
    # T = 2 softmax: exact along S0, first order in the transverse error
    d = 100
    # the mode-by-mode decomposition is a Gaussian-bulk construction: correction="none" (which
    # warns that the softmax channel is outside its domain on this target)
    with pytest.warns(DomainWarning, match="spiky target"):
        lc = theory_learning_curve([4 * d, 40 * d], target=PowerLawTarget(1.25),
                                   n_features=d, n_tokens=2, reg_lambda=0.3 / d,
                                   lambda_exponent=0.5, attention="softmax", noise=noise,
                                   n_nodes=1024, correction="none")
    assert all(r.correction == "none" for r in lc.results)
    assert lc.converged.all()
    for r in lc.results:
        dec = error_decomposition(r, n_nodes=4096)
        assert dec.s_error == pytest.approx(r.s_error, rel=1e-6)
        assert dec.c2 < 0 < dec.c1 < 6.0
        assert dec.approximation == pytest.approx(dec.excess, rel=0.03)
        assert sum(dec.contributions.values()) == pytest.approx(dec.approximation)


# ---------------------------------------------------------------------------------------
# emergence
# ---------------------------------------------------------------------------------------

def test_emergence_alpha_brackets_recovery():
    d, gamma = 100, 1.25
    kw = dict(target=PowerLawTarget(gamma), n_features=d, n_tokens=2, attention="linear",
              noise=0.5, n_nodes=512)
    lam = lambda a: 3 * np.sqrt(a)  # noqa: E731
    alphas = emergence_alpha([0, 1, 2], reg_lambda=lam, alpha_range=(2e-3, 0.3), n_grid=10,
                             rtol=1e-2, **kw)
    assert np.all(np.isfinite(alphas)) and np.all(np.diff(alphas) > 0)
    for i, a in enumerate(alphas):
        n = a * d ** 2 * np.array([0.97, 1.03])
        lc = theory_learning_curve(n, reg_lambda=3 / d, lambda_exponent=0.5, **kw)
        assert lc.converged.all()
        assert [recovered_modes(r).recovered[i] for r in lc.results] == [False, True]


def test_emergence_alpha_errors():
    kw = dict(target=PowerLawTarget(1.0), n_features=20, n_tokens=2, reg_lambda=0.1)
    with pytest.raises(ValueError, match="mode_index"):
        emergence_alpha(20, **kw)
    with pytest.raises(TypeError, match="mode_index"):
        emergence_alpha(0.5, **kw)
    with pytest.raises(ValueError, match="alpha_range"):
        emergence_alpha(0, alpha_range=(0.5, 0.1), **kw)
    with pytest.raises(ValueError, match="n_features"):
        emergence_alpha(0, target=PowerLawTarget(1.0), n_tokens=2, reg_lambda=0.1)


# ---------------------------------------------------------------------------------------
# learning curves from the theory
# ---------------------------------------------------------------------------------------

def test_theory_learning_curve_d1000_fast():
    # the §8 scaling law at d = 1000, up to n = d², from the theory alone, in seconds
    d, gamma, c = 1000, 1.25, 10.0
    n = np.geomspace(40 * d, d * d, 6)
    t0 = time.perf_counter()
    lc = theory_learning_curve(n, target=PowerLawTarget(gamma), n_features=d, n_tokens=2,
                               reg_lambda=c / d, lambda_exponent=0.5, attention="linear",
                               noise=0.5, n_nodes=512)
    assert time.perf_counter() - t0 < 30
    assert lc.converged.all() and np.all(np.diff(lc.excess) < 0)
    np.testing.assert_allclose(lc.reg_lambda, c * np.sqrt(n) / d)
    slope = np.polyfit(np.log(n), np.log(lc.excess), 1)[0]
    assert slope == pytest.approx(-1 + 1 / (2 * gamma), abs=0.03)
    assert lc.test_error == pytest.approx(lc.e0 + lc.excess)


def test_theory_learning_curve_errors():
    kw = dict(target=PowerLawTarget(1.0), n_tokens=2, reg_lambda=0.1)
    with pytest.raises(ValueError, match="n_features"):
        theory_learning_curve([100], **kw)
    with pytest.raises(ValueError, match="n_samples"):
        theory_learning_curve([0, 100], n_features=10, **kw)
    with pytest.raises(ValueError, match="n_features"):
        theory_learning_curve([100], target=powerlaw_law(1.0, 10), n_features=12,
                              n_tokens=2, reg_lambda=0.1)


def test_plot_emergence_smoke(se_200):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skattn.plotting import plot_emergence

    n = sorted(se_200)
    recs = [recovered_modes(se_200[k]) for k in n]
    ax = plot_emergence(n, recs, trained={"n": [400], "eigenvalues": [np.arange(5.0)]})
    assert ax.get_xscale() == "log"
    with pytest.raises(ValueError, match="recoveries"):
        plot_emergence(n[:2], recs)
    plt.close("all")


# ---------------------------------------------------------------------------------------
# slow: the two finite-d theories agree
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_deterministic_equivalent_matches_finite_d_goe_mode():
    # the continuum SE with the d eigenvalues vs the finite-d SE with fixed GOE draws
    d, gamma = 200, 1.25
    for n in (1000, 8000):
        cont = linear_se(d, n, gamma)
        fin = [solve_state_evolution(n / d ** 2, n_tokens=2, reg_lambda=3 * np.sqrt(n) / d,
                                     target=PowerLawTarget(gamma), n_features=d,
                                     attention="linear", noise=0.5,
                                     options=dict(n_nodes=1024, random_state=s, init=cont,
                                                  tol=1e-4))
               for s in range(2)]  # the finite-d map has kinks (eigenvalues crossing ε)
        assert all(f.converged for f in fin)
        assert np.mean([f.s_error for f in fin]) == pytest.approx(cont.s_error, rel=0.05)


def test_softmax_learning_curve_on_a_spiky_target_is_the_spiked_finite_d_prediction():
    """T = 2 softmax on a γ = 1.25 power law (the top mode carries 75 % of Σλ²): the
    learning curve solves the d-dimensional problem, which solve_state_evolution routes to
    the spiked state evolution (docs/spiked.rst); the deterministic equivalent, which
    treats every eigenvalue as a d → ∞ eigenspace, is 9 % lower (trained models at d = 100,
    α = 0.3: 0.0582)."""
    import warnings

    from skattn.theory import DomainWarning

    d, lam, noise = 100, 0.05, 0.2
    with warnings.catch_warnings():
        warnings.simplefilter("error", DomainWarning)   # routed, and δ/λ_1 < 0.05 there
        lc = theory_learning_curve([0.3 * d * d], target=PowerLawTarget(1.25), n_features=d,
                                   n_tokens=2, reg_lambda=lam, noise=noise)
    routed = solve_state_evolution(0.3, target=PowerLawTarget(1.25), n_features=d,
                                   n_tokens=2, reg_lambda=lam, noise=noise)
    assert lc.converged.all() and lc.results[0].correction == "spiked"
    assert lc.test_error[0] == pytest.approx(routed.test_error, rel=1e-6)
    equivalent = solve_state_evolution(0.3, target=powerlaw_law(1.25, d), n_tokens=2,
                                       reg_lambda=lam, noise=noise)
    assert equivalent.test_error < 0.93 * lc.test_error[0]
    # the floor e0 = e_test(S0) is the spiked channel's too: against the teacher's own S0
    # on fresh noisy labels (Monte Carlo, 40 000 samples) the Gaussian value is 10 % low
    from skattn.data.teacher import attention_map, preactivation
    from skattn.metrics import attention_error
    teacher = AttentionIndexedModel(d, target=PowerLawTarget(1.25), noise=noise,
                                    random_state=0)
    X, y = teacher.sample(40000, random_state=5, layout="tokens")
    measured = attention_error(y, attention_map(preactivation(X, teacher.S0_)))
    assert lc.e0 == pytest.approx(measured, rel=0.015)
    assert irreducible_error(2, noise=noise) < 0.92 * measured
    # the mode-by-mode decomposition refuses the spiked result, naming the way out
    with pytest.raises(ValueError, match="correction='none'"):
        error_decomposition(lc.results[0])
    with pytest.raises(ValueError, match="correction='none'"):
        recovered_modes(lc.results[0])


def test_emergence_on_a_spiky_softmax_target_warns():
    from skattn.theory import DomainWarning

    with pytest.warns(DomainWarning, match="spiky target"):
        emergence_alpha(1, target=PowerLawTarget(1.25), n_features=40, n_tokens=2,
                        reg_lambda=0.05, alpha_range=(0.05, 0.5), n_grid=3, rtol=0.2,
                        n_nodes=512)
