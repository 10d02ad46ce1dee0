"""Reliability: reproducibility, numerical edges, round trips in a fresh process."""

import pickle
import subprocess
import sys

import joblib
import numpy as np
import pytest

from skattn import AsymptoticPredictor, DirectAttentionRegressor, TiedAttentionRegressor
from skattn.data import AttentionIndexedModel, WishartTarget, make_attention_indexed
from skattn.theory import bayes_optimal, solve_state_evolution

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def data():
    return make_attention_indexed(200, 12, n_tokens=2, random_state=0, layout="tokens")


@pytest.mark.parametrize("cls", [TiedAttentionRegressor, DirectAttentionRegressor])
def test_same_seed_same_result(cls, data):
    X, y = data
    # init_scale=1: a random start (the direct estimator starts at V = 0 by default)
    a = cls(reg_lambda=0.1, random_state=3, max_iter=50, init_scale=1.0).fit(X, y)
    b = cls(reg_lambda=0.1, random_state=3, max_iter=50, init_scale=1.0).fit(X, y)
    assert np.array_equal(a.S_, b.S_)
    assert a.loss_curve_ == b.loss_curve_
    # the seed is used: another one starts elsewhere, so the iterates differ
    c = cls(reg_lambda=0.1, random_state=4, max_iter=50, init_scale=1.0).fit(X, y)
    assert c.loss_curve_[0] != a.loss_curve_[0] and not np.array_equal(c.S_, a.S_)


def test_teacher_seeded_and_independent_of_estimator_seed():
    t1 = AttentionIndexedModel(10, random_state=0)
    X, y = t1.sample(50, random_state=1, layout="tokens")
    TiedAttentionRegressor(random_state=123, max_iter=5).fit(X, y)
    t2 = AttentionIndexedModel(10, random_state=0)
    X2, y2 = t2.sample(50, random_state=1, layout="tokens")
    assert np.array_equal(t1.S0_, t2.S0_)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    # both seeds matter: the target's and the samples'
    X3, y3 = t1.sample(50, random_state=2, layout="tokens")
    assert not np.array_equal(X, X3) and not np.array_equal(y, y3)
    t4 = AttentionIndexedModel(10, random_state=1)
    X4, y4 = t4.sample(50, random_state=1, layout="tokens")
    assert not np.array_equal(t1.S0_, t4.S0_) and not np.array_equal(y, y4)
    Xa, ya = make_attention_indexed(50, 10, random_state=7, layout="tokens")
    Xb, yb = make_attention_indexed(50, 10, random_state=7, layout="tokens")
    Xc, yc = make_attention_indexed(50, 10, random_state=8, layout="tokens")
    assert np.array_equal(Xa, Xb) and np.array_equal(ya, yb)
    assert not np.array_equal(Xa, Xc) and not np.array_equal(ya, yc)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("beta", [1e-3, 50.0])
@pytest.mark.parametrize("reg_lambda", [0.0, 1e3])
def test_numerical_edges_stay_finite(data, beta, reg_lambda):
    X, y = data
    est = TiedAttentionRegressor(beta=beta, reg_lambda=reg_lambda, max_iter=30,
                                 random_state=0).fit(X, y)
    assert np.all(np.isfinite(est.S_)) and np.isfinite(est.train_objective_)
    pred = est.predict(X * 1e3)  # logits of order 1e4 and beyond
    assert np.all(np.isfinite(pred))
    assert np.allclose(pred.sum(-1), 1.0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("width", [1, 48])  # 1 and 4d
def test_width_extremes(data, width):
    X, y = data
    est = TiedAttentionRegressor(width=width, max_iter=30, random_state=0).fit(X, y)
    assert est.W_.shape == (12, width)
    # S_ is the stored W_ (not a stale or rescaled copy), PSD, and of full possible rank:
    # exactly min(width, d), i.e. the fit neither collapsed a direction nor exceeded width
    np.testing.assert_allclose(est.S_, est.W_ @ est.W_.T / np.sqrt(width * 12), atol=1e-12)
    eig = np.linalg.eigvalsh(est.S_)
    assert eig.min() >= -1e-10 * eig.max()
    assert np.linalg.matrix_rank(est.S_, tol=1e-8 * eig.max()) == min(width, 12)
    assert np.isfinite(est.train_objective_)
    assert est.train_objective_ < est.loss_curve_[0] or est.n_iter_ == 1


def test_rows_not_summing_to_one_warn(data):
    X, y = data
    with pytest.warns(UserWarning, match="rows that do not sum to one"):
        TiedAttentionRegressor(max_iter=3).fit(X, y * 1.5)


def test_theory_edges_never_nan():
    for kw in [dict(alpha=0.01, reg_lambda=1e-3), dict(alpha=2.0, reg_lambda=1e-3),
               dict(alpha=0.5, reg_lambda=10.0), dict(alpha=0.3, reg_lambda=0.01, beta=4.0)]:
        res = solve_state_evolution(n_tokens=2, target=WishartTarget(0.5), **kw)
        values = [res.m, res.q, res.sigma, res.test_error, res.train_objective]
        # a returned value is never NaN, converged or not
        assert np.all(np.isfinite(values)), (kw, values)
        # these edges are all solvable (an easy far-from-threshold point each)
        assert res.converged, (kw, res.message)
        assert res.test_error >= 0 and res.q >= 0


def test_round_trips_in_a_fresh_process(tmp_path, data):
    X, y = data
    objs = {
        "tied": TiedAttentionRegressor(max_iter=20, random_state=0).fit(X, y),
        "direct": DirectAttentionRegressor(max_iter=20, random_state=0).fit(X, y),
        "state": solve_state_evolution(0.3, n_tokens=1, reg_lambda=0.1,
                                       target=WishartTarget(0.5), attention="linear"),
        "amp": AsymptoticPredictor(max_iter=30, tol=1e-6, reg_lambda=0.1,
                                   target=WishartTarget(0.5)).fit(X, y),
        "bayes": bayes_optimal(0.1, n_tokens=2, target=WishartTarget(0.5)),
    }
    expected = {}
    for name, obj in objs.items():
        joblib.dump(obj, tmp_path / f"{name}.joblib")
        with open(tmp_path / f"{name}.pkl", "wb") as fh:
            pickle.dump(obj, fh)
        expected[name] = (obj.predict(X[:5]) if hasattr(obj, "predict") else
                          np.array([obj.test_error]))
    np.save(tmp_path / "X.npy", X[:5])
    code = f"""
import pickle, joblib, numpy as np, pathlib
p = pathlib.Path({str(tmp_path)!r})
X = np.load(p / "X.npy")
for name in ("tied", "direct", "state", "amp", "bayes"):
    for obj in (joblib.load(p / f"{{name}}.joblib"), pickle.load(open(p / f"{{name}}.pkl", "rb"))):
        out = obj.predict(X) if hasattr(obj, "predict") else np.array([obj.test_error])
        np.save(p / f"{{name}}_out.npy", out)
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    for name, want in expected.items():
        assert np.array_equal(np.load(tmp_path / f"{name}_out.npy"), want)


@pytest.mark.parametrize("cls", [TiedAttentionRegressor, DirectAttentionRegressor,
                                 AsymptoticPredictor])
@pytest.mark.parametrize("n_features, n_samples", [(1, 20), (5, 1)])
def test_tiny_problems_are_valid_and_finite(cls, n_features, n_samples):
    # d = 1 and a single sample are legal ERM problems: they fit and stay finite
    X, y = make_attention_indexed(n_samples, n_features, random_state=0, layout="tokens")
    est = cls(max_iter=5).fit(X, y)
    assert np.all(np.isfinite(est.S_)) and np.all(np.isfinite(est.predict(X)))


def test_result_objects_round_trip_in_a_fresh_process(tmp_path):
    from skattn.data import PowerLawTarget
    from skattn.scaling import fit_power_law
    from skattn.sweep import run_sweep
    from skattn.theory import (
        error_decomposition,
        powerlaw_law,
        recovered_modes,
        theory_learning_curve,
    )

    d = 60
    law = powerlaw_law(1.25, d)
    res = solve_state_evolution(0.3, n_tokens=1, reg_lambda=0.3, target=law,
                                attention="linear", noise=0.5)
    n = np.array([200, 400, 800])
    objs = {
        "recovery": recovered_modes(res),
        "decomposition": error_decomposition(res),
        "curve": theory_learning_curve(n, target=PowerLawTarget(1.25), n_tokens=1,
                                       reg_lambda=0.3, n_features=d, attention="linear",
                                       noise=0.5),
        "fit": fit_power_law(n, 3.0 * n ** -0.5),
        "sweep": run_sweep(lambda a: {"b": 2 * a}, {"a": [1, 2]},
                           output=tmp_path / "sweep.csv", backend="sequential"),
    }
    for name, obj in objs.items():
        joblib.dump(obj, tmp_path / f"{name}.joblib")
        with open(tmp_path / f"{name}.pkl", "wb") as fh:
            pickle.dump(obj, fh)
    code = f"""
import pickle, joblib, pathlib
p = pathlib.Path({str(tmp_path)!r})
for name in {sorted(objs)!r}:
    a = joblib.load(p / f"{{name}}.joblib")
    b = pickle.load(open(p / f"{{name}}.pkl", "rb"))
    assert type(a).__name__ == type(b).__name__
    (p / f"{{name}}.txt").write_text(repr(a))
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    for name, obj in objs.items():
        assert (tmp_path / f"{name}.txt").read_text() == repr(obj)


def test_amp_returns_the_zero_fixed_point():
    # λ = 5 puts every eigenvalue under the threshold: S = 0 is the ERM minimiser (state
    # evolution gives q = m = 0), a fixed point AMP must return instead of diverging
    from skattn.amp import loss_gradient
    from skattn.theory.channels import channel_for

    d = 20
    X, y = make_attention_indexed(120, d, n_tokens=2, target=WishartTarget(0.5),
                                  random_state=0, layout="tokens")
    grad0 = loss_gradient(channel_for("softmax", 2), X, y, np.zeros((d, d)), 5.0)
    assert np.linalg.eigvalsh(grad0).min() > 0  # KKT at S = 0, checked from the loss
    est = AsymptoticPredictor(reg_lambda=5.0, target=WishartTarget(0.5)).fit(X, y)
    assert est.converged_ and est.amp_result_.converged
    assert np.array_equal(est.S_, np.zeros((d, d)))
    assert est.kkt_residual_ <= 1e-10
    assert est.state_.q == 0 and est.state_.m == 0
    assert np.all(np.isfinite(est.predict(X)))
