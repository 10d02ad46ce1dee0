"""TiedAttentionRegressor and DirectAttentionRegressor: fitting, layouts, correctness."""

import math
import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from skattn import (
    AttentionIndexedModel,
    DirectAttentionRegressor,
    TiedAttentionRegressor,
    WishartTarget,
    make_attention_indexed,
)
from skattn.data import preactivation, softmax
from skattn.estimators import infer_structure
from skattn.metrics import attention_error
from skattn.nn import TrainingDivergedError

ESTIMATORS = [TiedAttentionRegressor, DirectAttentionRegressor]

# several tests cap max_iter on purpose; test_convergence_warning checks the warning itself
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")




@pytest.fixture(scope="module")
def data():
    X, y = make_attention_indexed(300, 12, n_tokens=3, random_state=0, layout="tokens")
    return X, y


def _objective_numpy(est, X, y, task):
    """docs/theory.rst §2 objective recomputed in numpy from the fitted parameters."""
    A = softmax(preactivation(X, est.S_), est.beta)
    y_pred = A if task == "seq2lab" else A @ X
    per = np.sum((y_pred - y) ** 2, axis=(1, 2))
    if task == "seq2seq":
        per /= X.shape[2]
    param = est.W_ if hasattr(est, "W_") else est.V_
    return per.sum() + est.reg_lambda * np.sum(param ** 2), per.mean()


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("task", ["seq2lab", "seq2seq"])
def test_fit_attributes_and_objective(Est, task):
    X, y = make_attention_indexed(300, 12, n_tokens=3, task=task, random_state=1, layout="tokens")
    est = Est(reg_lambda=0.05, dtype="float64", random_state=0).fit(X, y)
    d = 12
    assert est.token_dim_ == d and est.n_tokens_ == 3 and est.task_ == task
    assert est.n_features_in_ == 3 * d  # columns of the flattened X
    assert est.device_ in ("cpu", "cuda") or est.device_.startswith("cuda")
    assert isinstance(est.n_iter_, int) and est.n_iter_ == len(est.loss_curve_)
    assert isinstance(est.converged_, bool) and est.converged_
    assert isinstance(est.train_objective_, float) and isinstance(est.train_error_, float)
    assert all(isinstance(v, float) for v in est.loss_curve_)
    assert isinstance(est.S_, np.ndarray) and est.S_.shape == (d, d)
    np.testing.assert_allclose(est.S_, est.S_.T, atol=1e-12)
    if Est is TiedAttentionRegressor:
        assert est.W_.shape == (d, d) and est.width_ == d
        np.testing.assert_allclose(est.S_, est.W_ @ est.W_.T / d, rtol=1e-12)
        assert np.linalg.eigvalsh(est.S_).min() > -1e-10  # PSD
    else:
        np.testing.assert_allclose(est.V_, est.V_.T)
        np.testing.assert_allclose(est.S_, est.V_ / math.sqrt(d))
    # objective and train error exactly as docs/theory.rst §2 (sums, per d²)
    obj, err = _objective_numpy(est, X, y, task)
    assert math.isclose(est.train_objective_, obj / d ** 2, rel_tol=1e-8)
    assert math.isclose(est.loss_curve_[-1], est.train_objective_, rel_tol=1e-12)
    assert math.isclose(est.train_error_, err, rel_tol=1e-8)
    assert math.isclose(est.train_error_, attention_error(y, est.predict(X), task=task),
                        rel_tol=1e-8)
    assert est.loss_curve_[-1] <= est.loss_curve_[0]


@pytest.mark.parametrize("width, p", [(1.0, 12), (0.5, 6), (3, 3), (0.01, 1), (2.0, 24)])
def test_width_int_or_ratio(data, width, p):
    X, y = data
    est = TiedAttentionRegressor(width=width, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    assert est.W_.shape == (12, p) and est.width_ == p
    np.testing.assert_allclose(est.S_, est.W_ @ est.W_.T / math.sqrt(p * 12), rtol=1e-12)


def test_predict_layouts_follow_fit(data):
    X, y = data
    n, T, d = X.shape
    est3 = TiedAttentionRegressor(random_state=0, max_iter=30).fit(X, y)
    est2 = TiedAttentionRegressor(random_state=0, max_iter=30).fit(X.reshape(n, -1),
                                                                   y.reshape(n, -1))
    assert est2.n_tokens_ == T and est2.token_dim_ == d and est2.task_ == "seq2lab"
    assert est2.n_features_in_ == est3.n_features_in_ == T * d
    assert est3.predict(X).shape == (n, T, T)
    assert est3.predict(X.reshape(n, -1)).shape == (n, T, T)
    assert est2.predict(X).shape == (n, T * T)
    np.testing.assert_allclose(est2.predict(X[:5]).reshape(5, T, T), est3.predict(X[:5]),
                               rtol=1e-6, atol=1e-8)
    # 2-D X with 3-D y: T from y, predictions 3-D
    est = TiedAttentionRegressor(random_state=0, max_iter=5).fit(X.reshape(n, -1), y)
    assert est.n_tokens_ == T and est.predict(X).shape == (n, T, T)


def test_flattened_seq2seq_needs_n_tokens():
    X, y = make_attention_indexed(200, 8, n_tokens=3, task="seq2seq", random_state=0,
                                  layout="tokens")
    n = X.shape[0]
    Xf, yf = X.reshape(n, -1), y.reshape(n, -1)
    with pytest.raises(ValueError, match="n_tokens"):
        TiedAttentionRegressor(max_iter=5).fit(Xf, yf)
    est = TiedAttentionRegressor(n_tokens=3, max_iter=50, random_state=0).fit(Xf, yf)
    assert est.task_ == "seq2seq" and est.n_tokens_ == 3 and est.token_dim_ == 8
    assert est.n_features_in_ == Xf.shape[1] == 24
    assert est.predict(Xf).shape == (n, 24)
    ref = TiedAttentionRegressor(max_iter=50, random_state=0).fit(X, y)
    np.testing.assert_allclose(est.W_, ref.W_, rtol=1e-5, atol=1e-6)


def test_ambiguous_task_requires_explicit_task():
    X, y = make_attention_indexed(100, 3, n_tokens=3, task="seq2lab", random_state=0,
                                  layout="tokens")
    with pytest.raises(ValueError, match="task"):
        TiedAttentionRegressor().fit(X, y)
    est = TiedAttentionRegressor(task="seq2lab", max_iter=20, random_state=0).fit(X, y)
    assert est.task_ == "seq2lab"


@pytest.mark.parametrize(
    "X_shape, y_shape, task, n_tokens, expected",
    [
        ((5, 2, 7), (5, 2, 2), "auto", None, (2, 7, "seq2lab")),
        ((5, 2, 7), (5, 2, 7), "auto", None, (2, 7, "seq2seq")),
        ((5, 2, 7), (5, 4), "auto", None, (2, 7, "seq2lab")),
        ((5, 2, 7), (5, 14), "auto", None, (2, 7, "seq2seq")),
        ((5, 14), (5, 4), "auto", None, (2, 7, "seq2lab")),
        ((5, 14), (5, 2, 7), "auto", None, (2, 7, "seq2seq")),
        ((5, 14), (5, 14), "auto", 2, (2, 7, "seq2seq")),
        ((5, 14), (5, 14), "seq2seq", 7, (7, 2, "seq2seq")),
        ((5, 9), (5, 9), "seq2lab", None, (3, 3, "seq2lab")),
        ((5, 6), (5,), "auto", None, (1, 6, "seq2lab")),
        ((5, 1, 6), (5,), "auto", None, (1, 6, "seq2lab")),
    ])
def test_infer_structure(X_shape, y_shape, task, n_tokens, expected):
    assert infer_structure(X_shape, y_shape, task=task, n_tokens=n_tokens) == expected


def test_linear_single_token_quadratic_network():
    """T = 1 linear attention: y = (xᵀ S0 x − Tr S0)/√d, a 1-D target (docs/theory.rst §4)."""
    X, y = make_attention_indexed(600, 10, n_tokens=1, attention="linear", random_state=0,
                                  layout="tokens")
    y1 = y.reshape(-1)
    est = TiedAttentionRegressor(attention="linear", reg_lambda=1e-3, random_state=0)
    est.fit(X[:, 0, :], y1)
    assert est.n_tokens_ == 1 and est.predict(X[:5, 0, :]).shape == (5,)
    assert est.score(X[:, 0, :], y1) > 0.99


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_both_solvers_reach_same_objective(Est, data):
    X, y = data
    objs = {}
    for solver in ("lbfgs", "adam"):
        est = Est(solver=solver, reg_lambda=0.05, dtype="float64", tol=1e-9,
                  n_iter_no_change=20, random_state=0).fit(X, y)
        assert est.converged_
        objs[solver] = est.train_objective_
    assert math.isclose(objs["adam"], objs["lbfgs"], rel_tol=1e-3)


def test_minibatch_adam(data):
    X, y = data
    ref = TiedAttentionRegressor(reg_lambda=0.05, random_state=0).fit(X, y)
    est = TiedAttentionRegressor(solver="adam", batch_size=64, learning_rate_init=0.03,
                                 max_iter=150, reg_lambda=0.05, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    assert est.train_objective_ < 1.02 * ref.train_objective_


def test_recovers_low_rank_target():
    """Noiseless Wishart(κ0 = 0.2), α = 1 ≫ recovery threshold, small λ: test error
    below 1% of the zero predictor (S = 0, uniform attention 1/T)."""
    d = 30
    model = AttentionIndexedModel(d, target=WishartTarget(0.2), random_state=1)
    X, y = model.sample(d * d, random_state=2, layout="tokens")
    X_test, y_test = model.sample(2000, random_state=3, layout="tokens")
    est = TiedAttentionRegressor(reg_lambda=1e-4, random_state=0).fit(X, y)
    err = attention_error(y_test, est.predict(X_test))
    err_zero = attention_error(y_test, np.full_like(y_test, 1.0 / 2))
    assert err < 0.01 * err_zero
    assert est.score(X_test, y_test) > 0.99


def test_seq2seq_and_seq2lab_give_same_attention_error():
    """Same X and S0, labels A (seq2lab) or A X (seq2seq): the learned attention matrices
    have the same test error up to finite-size corrections (relative gap ~ 1/√d)."""
    d = 30
    model = AttentionIndexedModel(d, target=WishartTarget(0.5), random_state=0)
    X, y_lab = model.sample(d * d // 2, random_state=10, layout="tokens")
    X_test, A_test = model.sample(2000, random_state=20, layout="tokens")
    lab = TiedAttentionRegressor(random_state=0).fit(X, y_lab)
    seq = TiedAttentionRegressor(random_state=0).fit(X, y_lab @ X)
    assert lab.task_ == "seq2lab" and seq.task_ == "seq2seq"
    e_lab = attention_error(A_test, lab.attention_matrix(X_test))
    e_seq = attention_error(A_test, seq.attention_matrix(X_test))
    assert abs(e_seq - e_lab) < 2 / math.sqrt(d) * e_lab
    # and the train objectives per d² agree closely
    assert math.isclose(lab.train_objective_, seq.train_objective_, rel_tol=0.05)


@pytest.mark.slow
def test_seq2seq_seq2lab_gap_shrinks_with_d():
    gaps = []
    for d in (20, 80):
        model = AttentionIndexedModel(d, target=WishartTarget(0.5), random_state=0)
        X, y_lab = model.sample(d * d // 2, random_state=10, layout="tokens")
        X_test, A_test = model.sample(4000, random_state=20, layout="tokens")
        lab = TiedAttentionRegressor(random_state=0).fit(X, y_lab)
        seq = TiedAttentionRegressor(random_state=0).fit(X, y_lab @ X)
        e_lab = attention_error(A_test, lab.attention_matrix(X_test))
        e_seq = attention_error(A_test, seq.attention_matrix(X_test))
        gaps.append(abs(e_seq - e_lab) / e_lab)
    assert gaps[1] < gaps[0]
    assert gaps[1] < 0.15


@pytest.mark.slow
def test_defaults_reach_erm_minimum_paper_scale():
    """d = 100, n = 3000 (α = 0.3), T = 2, κ0 = 0.5, λ = 0.01: default (L-BFGS) and Adam
    reach the float64 L-BFGS minimum within 1e-3 relative."""
    X, y = make_attention_indexed(3000, 100, target=WishartTarget(0.5), random_state=0,
                                  layout="tokens")
    ref = TiedAttentionRegressor(reg_lambda=0.01, dtype="float64", tol=1e-10,
                                 n_iter_no_change=20, random_state=0).fit(X, y)
    for kw in ({}, {"solver": "adam"}):
        est = TiedAttentionRegressor(reg_lambda=0.01, random_state=0, **kw).fit(X, y)
        assert est.converged_
        assert abs(est.train_objective_ - ref.train_objective_) < 1e-3 * ref.train_objective_


def test_random_state_reproducible(data):
    X, y = data
    a = TiedAttentionRegressor(random_state=3, max_iter=20).fit(X, y)
    b = TiedAttentionRegressor(random_state=3, max_iter=20).fit(X, y)
    np.testing.assert_array_equal(a.W_, b.W_)


def test_warm_start_continues(data):
    X, y = data
    est = TiedAttentionRegressor(random_state=0, max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
        first = est.train_objective_
        first_curve = list(est.loss_curve_)
        est.set_params(warm_start=True)
        est.fit(X, y)
    # the second fit continues the first: its curve is appended (as MLPRegressor's)
    assert est.loss_curve_[:len(first_curve)] == first_curve
    assert len(est.loss_curve_) == len(first_curve) + est.n_iter_
    assert est.loss_curve_[len(first_curve)] <= first * (1 + 1e-6)
    assert est.train_objective_ < first
    # mismatched shapes are reported, not silently re-initialised
    est.set_params(width=3)
    with pytest.raises(ValueError, match="warm_start"):
        est.fit(X, y)


def test_convergence_warning(data):
    X, y = data
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        est = TiedAttentionRegressor(max_iter=2, random_state=0).fit(X, y)
    assert not est.converged_ and est.n_iter_ == 2


def test_divergence_keeps_last_finite_parameters():
    X, y = make_attention_indexed(200, 10, n_tokens=2, attention="linear", random_state=0,
                                  layout="tokens")
    est = TiedAttentionRegressor(attention="linear", solver="adam", learning_rate_init=1e12,
                                 max_iter=50, random_state=0)
    with pytest.raises(TrainingDivergedError, match="learning_rate_init"):
        est.fit(X, y)
    assert np.all(np.isfinite(est.W_)) and np.all(np.isfinite(est.predict(X)))


def test_not_fitted():
    with pytest.raises(NotFittedError):
        TiedAttentionRegressor().predict(np.zeros((2, 2, 3)))


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_pickle_and_float64(Est, data):
    X, y = data
    est = Est(dtype="float64", device="cpu", max_iter=30, random_state=0).fit(X, y)
    assert est.device_ == "cpu"
    clone = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(clone.predict(X), est.predict(X))


def test_predict_on_cpu_after_cuda_fit(data, monkeypatch):
    """A model fitted on CUDA predicts where CUDA is unavailable (numpy state only)."""
    X, y = data
    est = TiedAttentionRegressor(max_iter=20, random_state=0, device="cpu").fit(X, y)
    expected = est.predict(X)
    est.device_ = "cuda"  # as after a CUDA fit
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    restored = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(restored.predict(X), expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit_then_cpu_predict(data):
    X, y = data
    gpu = TiedAttentionRegressor(device="cuda", random_state=0).fit(X, y)
    cpu = TiedAttentionRegressor(device="cpu", random_state=0).fit(X, y)
    assert gpu.device_.startswith("cuda")
    assert math.isclose(gpu.train_objective_, cpu.train_objective_, rel_tol=1e-3)
    est = pickle.loads(pickle.dumps(gpu))
    np.testing.assert_allclose(est.predict(X), gpu.predict(X), rtol=1e-10)


def test_auto_device():
    est = TiedAttentionRegressor(max_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(*make_attention_indexed(50, 4, random_state=0, layout="tokens"))
    assert est.device_ == ("cuda" if torch.cuda.is_available() else "cpu")


def test_score_is_variance_weighted_r2(data):
    X, y = data
    est = TiedAttentionRegressor(max_iter=30, random_state=0).fit(X, y)
    y_pred = est.predict(X)
    expected = 1 - np.sum((y_pred - y) ** 2) / np.sum((y - y.mean(axis=0)) ** 2)
    assert math.isclose(est.score(X, y), expected, rel_tol=1e-10)


def test_attention_matrix_and_verbose(data, capsys):
    X, y = make_attention_indexed(100, 6, n_tokens=2, task="seq2seq", random_state=0,
                                  layout="tokens")
    est = TiedAttentionRegressor(max_iter=20, verbose=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    assert "objective/d²" in capsys.readouterr().err
    A = est.attention_matrix(X)
    assert A.shape == (100, 2, 2)
    np.testing.assert_allclose(A.sum(-1), 1.0)
    np.testing.assert_allclose(est.predict(X), A @ X, rtol=1e-12)


def test_n_features_in_counts_the_columns_sklearn_sees():
    """n_features_in_ is the width of the flattened X, so it agrees with
    feature_names_in_; the token dimension d is token_dim_."""
    pa = pytest.importorskip("pyarrow")
    X, y = make_attention_indexed(60, 5, n_tokens=2, random_state=0, layout="tokens")
    Xf = X.reshape(60, -1)
    table = pa.table({f"x{i}": Xf[:, i] for i in range(Xf.shape[1])})
    est = TiedAttentionRegressor(max_iter=5, random_state=0).fit(table, y)
    assert est.n_features_in_ == len(est.feature_names_in_) == 10
    assert est.token_dim_ == 5 and est.n_tokens_ == 2
    # a 3-D X has the same n_features_in_ (its flattened width) and the same fit
    est3 = TiedAttentionRegressor(max_iter=5, random_state=0).fit(X, y)
    assert est3.n_features_in_ == 10
    np.testing.assert_allclose(est.predict(table), est3.predict(X))


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_random_state_accepts_a_generator(Est, data):
    X, y = data
    a = Est(init_scale=1.0, max_iter=5, random_state=np.random.default_rng(7)).fit(X, y)
    b = Est(init_scale=1.0, max_iter=5, random_state=np.random.default_rng(7)).fit(X, y)
    np.testing.assert_array_equal(a.S_, b.S_)
    with pytest.raises(ValueError, match="'random_state' parameter"):
        Est(random_state=-1).fit(X, y)


def test_cold_start_resets_the_loss_curve(data):
    X, y = data
    est = TiedAttentionRegressor(max_iter=4, random_state=0, warm_start=True).fit(X, y)
    est.fit(X, y)
    assert len(est.loss_curve_) == 8
    est.set_params(warm_start=False).fit(X, y)
    assert len(est.loss_curve_) == est.n_iter_ == 4
