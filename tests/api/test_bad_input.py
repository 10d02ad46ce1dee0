"""Bad input: each error names the argument and the expected shape or range."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from skattn import DirectAttentionRegressor, TiedAttentionRegressor, make_attention_indexed
from skattn._validation import InvalidParameterError

ESTIMATORS = [TiedAttentionRegressor, DirectAttentionRegressor]




@pytest.fixture(scope="module")
def data():
    return make_attention_indexed(40, 5, n_tokens=2, random_state=0, layout="tokens")


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    return TiedAttentionRegressor(random_state=0).fit(X, y)


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("value, word", [(np.nan, "NaN"), (np.inf, "infinity")])
def test_non_finite_X(Est, data, value, word):
    X, y = data
    X = X.copy()
    X[3, 1, 2] = value
    with pytest.raises(ValueError, match=f"Input X contains {word}"):
        Est().fit(X, y)


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("value, word", [(np.nan, "NaN"), (-np.inf, "infinity")])
def test_non_finite_y(Est, data, value, word):
    X, y = data
    y = y.copy()
    y[0, 0, 0] = value
    with pytest.raises(ValueError, match=f"Input y contains {word}"):
        Est().fit(X, y)


def test_non_finite_X_at_predict(fitted, data):
    X = data[0].copy()
    X[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        fitted.predict(X)


@pytest.mark.parametrize("shape", [(40,), (40, 2, 5, 1)])
def test_wrong_ndim_X(data, shape):
    _, y = data
    X = np.zeros(shape)
    with pytest.raises(ValueError, match=r"X must be 3-D \(n_samples, n_tokens, n_features\)"):
        TiedAttentionRegressor().fit(X, y)


def test_wrong_ndim_y(data):
    X, _ = data
    with pytest.raises(ValueError, match="y must have 1, 2 or 3 dimensions"):
        TiedAttentionRegressor().fit(X, np.zeros((40, 2, 2, 1)))


def test_y_is_required(data):
    with pytest.raises(ValueError, match="requires y"):
        TiedAttentionRegressor().fit(data[0], None)


@pytest.mark.parametrize("y_shape", [(40, 2, 3), (40, 3, 2), (40, 7), (40, 5)])
def test_y_matches_neither_task(data, y_shape):
    X, _ = data
    with pytest.raises(ValueError, match=r"y of shape .* (matches neither task|tokens)"):
        TiedAttentionRegressor().fit(X, np.zeros(y_shape))


def test_y_does_not_match_explicit_task(data):
    X, y = data
    with pytest.raises(ValueError, match=r"does not match task='seq2seq'.*\(n_samples, 2, 5\)"):
        TiedAttentionRegressor(task="seq2seq").fit(X, y)


def test_mismatched_n_samples(data):
    X, y = data
    with pytest.raises(ValueError, match="X and y have inconsistent numbers of samples"):
        TiedAttentionRegressor().fit(X, y[:-1])


def test_predict_with_other_n_features(fitted):
    with pytest.raises(ValueError, match=r"n_features=5: expected X of shape \(n_samples, 2, 5\)"):
        fitted.predict(np.zeros((3, 2, 6)))


def test_predict_with_other_n_tokens(fitted):
    with pytest.raises(ValueError, match="n_tokens=2"):
        fitted.predict(np.zeros((3, 3, 5)))


def test_predict_with_other_flat_width(fitted):
    with pytest.raises(ValueError, match="X has 12 features, but TiedAttentionRegressor is "
                                         "expecting 10 features"):
        fitted.predict(np.zeros((3, 12)))


def test_n_tokens_inconsistent_with_X(data):
    X, y = data
    with pytest.raises(ValueError, match="n_tokens=3 does not match X"):
        TiedAttentionRegressor(n_tokens=3).fit(X, y)
    with pytest.raises(ValueError, match="not a multiple of n_tokens=3"):
        TiedAttentionRegressor(n_tokens=3).fit(X.reshape(40, -1), y.reshape(40, -1))


def test_softmax_needs_two_tokens():
    X = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(ValueError, match="attention='softmax' needs n_tokens >= 2"):
        TiedAttentionRegressor().fit(X, np.zeros(20))


def test_sparse_X_rejected(data):
    X, y = data
    with pytest.raises(TypeError, match="Sparse data was passed for X"):
        TiedAttentionRegressor().fit(sp.csr_matrix(X.reshape(40, -1)), y)


def test_empty_X(data):
    _, y = data
    with pytest.raises(ValueError, match="0 sample"):
        TiedAttentionRegressor().fit(np.zeros((0, 2, 5)), y[:0])


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize(
    "param, value",
    [
        ("reg_lambda", -1e-3),
        ("beta", 0.0),
        ("beta", -1.0),
        ("solver", "sgd"),
        ("dtype", "float16"),
        ("attention", "relu"),
        ("task", "seq2vec"),
        ("max_iter", 0),
        ("tol", -1.0),
        ("n_iter_no_change", 0),
        ("batch_size", 0),
        ("learning_rate_init", 0.0),
        ("n_tokens", 0),
        ("init_scale", -1.0),
        ("warm_start", "yes"),
    ])
def test_invalid_parameters(Est, data, param, value):
    X, y = data
    with pytest.raises(InvalidParameterError, match=f"The '{param}' parameter of {Est.__name__}"):
        Est(**{param: value}).fit(X, y)


@pytest.mark.parametrize("width", [0, -2, 0.0, -0.5])
def test_invalid_width(data, width):
    X, y = data
    with pytest.raises(InvalidParameterError, match="The 'width' parameter .* must be"):
        TiedAttentionRegressor(width=width).fit(X, y)


def test_tied_init_scale_must_be_positive(data):
    X, y = data
    with pytest.raises(InvalidParameterError, match="'init_scale'"):
        TiedAttentionRegressor(init_scale=0.0).fit(X, y)


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("device", ["gpu", "tpu", "cuda:x", 3])
def test_unknown_device(Est, data, device):
    X, y = data
    with pytest.raises(InvalidParameterError, match="'device' parameter"):
        Est(device=device).fit(X, y)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_requested_but_unavailable(data):
    X, y = data
    with pytest.raises(ValueError, match="device='cuda' was requested but CUDA is not"):
        TiedAttentionRegressor(device="cuda").fit(X, y)
