"""The paper's test error, its scorer, and model selection with scikit-learn's scorers."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from skattn import TiedAttentionRegressor, make_attention_indexed
from skattn.metrics import attention_error, attention_error_scorer

# the first candidate is by far the worst: a search that ranks nothing picks it
LAMBDAS = [300.0, 3.0, 0.03]


@pytest.fixture(scope="module")
def small_problem():
    X, y = make_attention_indexed(n_samples=90, n_features=8, random_state=1, layout="tokens")
    return X, y


def _search(scoring, **kwargs):
    est = TiedAttentionRegressor(width=1.0, max_iter=300, dtype="float64", device="cpu",
                                 random_state=0)
    return GridSearchCV(est, {"reg_lambda": LAMBDAS}, scoring=scoring,
                        cv=KFold(3, shuffle=True, random_state=0), **kwargs)


def _fit(search, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return search.fit(X, y)


def test_attention_error_reads_flattened_layouts():
    rng = np.random.default_rng(0)
    a, b = rng.random((5, 3, 3)), rng.random((5, 3, 3))
    expected = attention_error(a, b)
    flat_a, flat_b = a.reshape(5, -1), b.reshape(5, -1)
    assert attention_error(flat_a, flat_b, n_tokens=3) == pytest.approx(expected)
    # seq2lab: T is the square root of the column count
    assert attention_error(flat_a, flat_b, task="seq2lab") == pytest.approx(expected)
    s, t = rng.random((5, 3, 4)), rng.random((5, 3, 4))
    assert attention_error(s.reshape(5, -1), t.reshape(5, -1), n_tokens=3) \
        == pytest.approx(attention_error(s, t))
    assert attention_error(a[:, :1, :1].ravel(), b[:, :1, :1].ravel(), n_tokens=1) \
        == pytest.approx(attention_error(a[:, :1, :1], b[:, :1, :1]))


@pytest.mark.parametrize("kwargs, match", [
    ({}, "y_true must have 3 dimensions .* or be flattened .* with n_tokens given"),
    ({"n_tokens": 5}, "not a multiple of n_tokens=5"),
    ({"n_tokens": 0}, "n_tokens must be an integer >= 1"),
    ({"task": "seq2lab", "n_tokens": 2}, "task='seq2lab' needs square"),
])
def test_attention_error_flattened_bad_input(kwargs, match):
    y = np.zeros((4, 6))
    with pytest.raises(ValueError, match=match):
        attention_error(y, y, **kwargs)


def test_attention_error_checks_n_tokens_against_3d():
    y = np.zeros((4, 2, 2))
    with pytest.raises(ValueError, match="n_tokens=3"):
        attention_error(y, y, n_tokens=3)


def test_string_scorers_work_on_flattened_y_and_agree(small_problem):
    X, y = small_problem
    n = len(y)
    ours = _fit(_search(attention_error_scorer), X, y)
    ours_flat = _fit(_search(attention_error_scorer), X.reshape(n, -1), y.reshape(n, -1))
    mse = _fit(_search("neg_mean_squared_error"), X.reshape(n, -1), y.reshape(n, -1))
    r2 = _fit(_search("r2"), X, y.reshape(n, -1))
    for search in (ours, ours_flat, mse, r2):
        assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    # lambda matters on this problem: the scores are not all alike, the first is worst
    scores = ours.cv_results_["mean_test_score"]
    assert np.argmin(scores) == 0 and np.ptp(scores) > 0.1 * abs(scores).max()
    best = ours.best_params_["reg_lambda"]
    assert best != LAMBDAS[0]
    assert ours_flat.best_params_["reg_lambda"] == best
    assert mse.best_params_["reg_lambda"] == best
    assert r2.best_params_["reg_lambda"] == best
    # seq2lab flattened MSE is the paper's error over the T² entries
    T = y.shape[1]
    np.testing.assert_allclose(mse.cv_results_["mean_test_score"] * T ** 2,
                               ours.cv_results_["mean_test_score"], rtol=1e-8)


def test_string_scorer_with_3d_y_is_reported(small_problem):
    """sklearn catches scorer errors: the default search warns and ranks NaN; with
    error_score='raise' it raises. attention_error_scorer handles the same data."""
    X, y = small_problem
    with pytest.warns(UserWarning, match="Scoring failed"):
        search = _fit(_search("neg_mean_squared_error"), X, y)
    assert np.all(np.isnan(search.cv_results_["mean_test_score"]))
    with pytest.raises(ValueError, match="dim 3"):
        _fit(_search("neg_mean_squared_error", error_score="raise"), X, y)


def test_scorer_on_one_token_linear_data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 6))
    est = TiedAttentionRegressor(attention="linear", dtype="float64", device="cpu",
                                 random_state=0)
    y = np.einsum("ni,ij,nj->n", X, np.eye(6) / 6, X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    assert attention_error_scorer(est, X, y) == pytest.approx(
        -np.mean((est.predict(X) - y) ** 2))
