"""Clear errors for wrong shapes, lengths and n_features; no warning on read-only input (#28)."""

import warnings

import numpy as np
import pytest

from skattn._validation import broadcast_to_grid
from skattn.data import AttentionIndexedModel
from skattn.estimators import AsymptoticPredictor, TiedAttentionRegressor


@pytest.fixture(scope="module")
def data():
    teacher = AttentionIndexedModel(8, n_tokens=2, random_state=0)
    X, y = teacher.sample(30, random_state=1, layout="tokens")
    return teacher, X, y


def test_attention_matrix_checks_the_shape_of_S(data):
    teacher, X, _ = data
    for bad in (np.eye(5), np.ones(8), np.ones((2, 8, 5))):
        with pytest.raises(ValueError, match=r"^S must have"):
            teacher.attention_matrix(X, S=bad)
    assert teacher.attention_matrix(X, S=np.eye(8)).shape == (30, 2, 2)


def test_reg_lambda_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"^reg_lambda .* alphas"):
        broadcast_to_grid([0.1, 0.2], "reg_lambda", (3,), "alphas")
    np.testing.assert_array_equal(broadcast_to_grid(0.1, "reg_lambda", (3,), "alphas"),
                                  [0.1] * 3)


def test_predictor_n_features_must_match_the_data(data):
    _, X, y = data
    with pytest.raises(ValueError, match=r"n_features=20 does not match X"):
        AsymptoticPredictor(n_features=20).fit(X, y)


def test_read_only_input_gives_no_torch_warning(data):
    # a DataFrame's values (pandas copy-on-write) and memory maps are read-only arrays
    _, X, y = data
    X, y = X.copy(), y.copy()
    X.setflags(write=False)
    y.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", message=".*max_iter")  # the short fit
        est = TiedAttentionRegressor(max_iter=3).fit(X, y)
        est.predict(X)
