"""AsymptoticPredictor and AMP (docs/theory.rst §9)."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from skattn import AsymptoticPredictor, TiedAttentionRegressor
from skattn.amp import loss_gradient, sensing_adjoint, sensing_components, seq2seq_to_attention
from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.metrics import attention_error, attention_error_scorer
from skattn.theory.channels import channel_for


@pytest.fixture(scope="module")
def problem():
    d = 20
    teacher = AttentionIndexedModel(d, n_tokens=2, target=WishartTarget(0.5), random_state=0)
    X, y = teacher.sample(int(0.4 * d * d), random_state=1, layout="tokens")
    Xt, yt = teacher.sample(500, random_state=2, layout="tokens")
    return teacher, X, y, Xt, yt


def test_sensing_adjoint_is_the_adjoint():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((7, 3, 9))
    S = rng.standard_normal((9, 9))
    S = S + S.T
    G = rng.standard_normal((7, 6))
    lhs = np.sum(G * sensing_components(X, S))
    rhs = np.sum(sensing_adjoint(X, G) * S)
    assert lhs == pytest.approx(rhs, rel=1e-10)


def test_loss_gradient_matches_finite_differences(problem):
    _, X, y, _, _ = problem
    ch = channel_for("softmax", 2)
    rng = np.random.default_rng(0)
    S = rng.standard_normal((20, 20)) * 0.1
    S = S + S.T
    E = rng.standard_normal((20, 20))
    E = (E + E.T) * 1e-6

    def f(M):
        return np.sum(ch.loss(y, sensing_components(X, M))) + 0.3 * 20 * np.trace(M)

    fd = (f(S + E) - f(S - E)) / 2
    assert np.sum(loss_gradient(ch, X, y, S, 0.3) * E) == pytest.approx(fd, rel=1e-5)


def test_amp_reaches_the_erm_minimiser(problem):
    _, X, y, Xt, yt = problem
    amp_est = AsymptoticPredictor(reg_lambda=0.05, tol=1e-9, max_iter=800).fit(X, y)
    assert amp_est.converged_
    assert amp_est.kkt_residual_ <= 1e-6
    assert np.min(np.linalg.eigvalsh(amp_est.S_)) >= -1e-10
    gd = TiedAttentionRegressor(reg_lambda=0.05, dtype="float64", tol=1e-10,
                                random_state=0).fit(X, y)
    rel = np.linalg.norm(amp_est.S_ - gd.S_) / np.linalg.norm(gd.S_)
    assert rel < 1e-2
    e_amp = attention_error(yt, amp_est.predict(Xt))
    assert e_amp == pytest.approx(attention_error(yt, gd.predict(Xt)), rel=1e-2)


def test_predictions_with_a_target(problem):
    _, X, y, _, _ = problem
    est = AsymptoticPredictor(reg_lambda=0.1, target=WishartTarget(0.5), tol=1e-7).fit(X, y)
    assert est.state_.converged
    assert est.state_.alpha == pytest.approx(X.shape[0] / 20 ** 2)
    for name in ("predicted_test_error_", "predicted_train_error_",
                 "predicted_train_objective_"):
        assert np.isfinite(getattr(est, name))
    spec = est.predicted_spectrum_
    assert 0 <= spec["atom_mass"] <= 1 and spec["eigenvalues"].shape == (20,)
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.predict(X[:5]), est.predict(X[:5]))


def test_data_free_methods():
    est = AsymptoticPredictor(reg_lambda=0.05, attention="linear", target=WishartTarget(0.5))
    res = est.state_evolution(0.3, n_tokens=1)
    assert res.converged
    curve = est.curve([0.1, 0.2], n_tokens=1)
    assert [r.alpha for r in curve] == [0.1, 0.2]
    with pytest.raises(ValueError, match="target"):
        AsymptoticPredictor().state_evolution(0.3, n_tokens=2)


def test_seq2seq_reduces_to_attention(problem):
    teacher, _, _, _, _ = problem
    X, y = teacher.sample(30, task="seq2seq", random_state=5, layout="tokens")
    A = teacher.attention_matrix(X)
    assert np.allclose(seq2seq_to_attention(X, y), A, atol=1e-8)


def test_grid_search_and_clone(problem):
    _, X, y, _, _ = problem
    est = AsymptoticPredictor(tol=1e-6, max_iter=300)
    assert clone(est).get_params() == est.get_params()
    gs = GridSearchCV(est, {"reg_lambda": [0.05, 0.5]}, cv=2, scoring=attention_error_scorer)
    gs.fit(X, y)
    assert gs.best_params_["reg_lambda"] in (0.05, 0.5)


@pytest.mark.parametrize("kwargs, name", [
    (dict(reg_lambda=-1.0), "reg_lambda"),
    (dict(width=0), "width"),
    (dict(damping=0.0), "damping"),
    (dict(tol=0.0), "tol"),
    (dict(attention="relu"), "attention"),
])
def test_bad_parameters(problem, kwargs, name):
    _, X, y, _, _ = problem
    with pytest.raises(ValueError, match=name):
        AsymptoticPredictor(**kwargs).fit(X, y)


def test_direct_amp_matches_direct_regressor(problem):
    from skattn import DirectAttentionRegressor

    _, X, y, Xt, yt = problem
    amp_est = AsymptoticPredictor(parametrization="direct", reg_lambda=0.5, tol=1e-9,
                                  max_iter=800, target=WishartTarget(0.5)).fit(X, y)
    assert amp_est.converged_ and amp_est.kkt_residual_ <= 1e-6
    assert amp_est.state_.parametrization == "direct"
    gd = DirectAttentionRegressor(reg_lambda=0.5, dtype="float64", tol=1e-10,
                                  random_state=0).fit(X, y)
    rel = np.linalg.norm(amp_est.S_ - gd.S_) / np.linalg.norm(gd.S_)
    assert rel < 1e-2


def test_amp_torch_backend_matches_numpy(problem):
    _, X, y, _, _ = problem
    a = AsymptoticPredictor(reg_lambda=0.05, tol=1e-9, max_iter=800).fit(X, y)
    b = AsymptoticPredictor(reg_lambda=0.05, tol=1e-9, max_iter=800, device="cpu").fit(X, y)
    assert np.allclose(a.S_, b.S_, atol=1e-8)
    assert b.kkt_residual_ <= 1e-6
    with pytest.raises(ValueError, match="device"):
        AsymptoticPredictor(device="tpu").fit(X, y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_predictions_without_a_target_name_target(problem):
    _, X, y, _, _ = problem
    est = AsymptoticPredictor(max_iter=5).fit(X, y)
    assert est.state_ is None
    for name in ("predicted_test_error_", "predicted_train_error_",
                 "predicted_train_objective_", "predicted_spectrum_"):
        with pytest.raises(ValueError, match="target") as info:
            getattr(est, name)
        assert not isinstance(info.value, AttributeError)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_predictor_is_no_torch_regressor_and_shares_the_sklearn_surface(problem):
    from skattn.estimators import BaseAttentionRegressor
    from skattn.estimators._mixin import AttentionRegressorMixin

    _, X, y, _, _ = problem
    assert not issubclass(AsymptoticPredictor, BaseAttentionRegressor)
    assert issubclass(AsymptoticPredictor, AttentionRegressorMixin)
    assert AsymptoticPredictor().device == TiedAttentionRegressor().device == "auto"
    est = AsymptoticPredictor(max_iter=5).fit(X.reshape(len(X), -1), y)
    assert est.n_features_in_ == 40 and est.token_dim_ == 20 and est.n_tokens_ == 2


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_default_device_gives_the_numpy_numbers(problem):
    """device="auto" runs numpy without CUDA; with CUDA, torch in float64 (tested in
    test_amp_torch_backend_matches_numpy on the CPU to the same tolerance)."""
    _, X, y, _, _ = problem
    auto = AsymptoticPredictor(reg_lambda=0.05, max_iter=50).fit(X, y)
    numpy_path = AsymptoticPredictor(reg_lambda=0.05, max_iter=50, device="numpy").fit(X, y)
    np.testing.assert_allclose(auto.S_, numpy_path.S_, atol=1e-8)
