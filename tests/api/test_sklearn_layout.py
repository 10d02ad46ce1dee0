"""scikit-learn's layout by default: the package's own data works with sklearn's scorers.

``make_attention_indexed`` and ``AttentionIndexedModel.sample`` hand out X of shape
(n, T·d) and y of shape (n, T·T) (seq2lab) or (n, T·d) (seq2seq) unless
``layout="tokens"``; the estimators predict in the layout they were fitted on and
``attention_error`` reads either layout on either side.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import (GridSearchCV, KFold, cross_val_score, cross_validate,
                                     learning_curve)

from skattn import (AttentionIndexedModel, DirectAttentionRegressor, TiedAttentionRegressor,
                    UntiedAttentionRegressor, make_attention_indexed)
from skattn.metrics import attention_error, attention_error_scorer

# the first candidate is by far the worst: a search that ranks nothing (NaN) picks it
LAMBDAS = [300.0, 3.0, 0.03]
SCORERS = ["neg_mean_squared_error", "r2", "neg_mean_absolute_error"]
CV = KFold(3, shuffle=True, random_state=0)


def _est(**kw):
    return TiedAttentionRegressor(width=1.0, max_iter=300, dtype="float64", device="cpu",
                                  random_state=0, **kw)


@pytest.fixture(scope="module")
def default_data():
    return make_attention_indexed(n_samples=90, n_features=8, random_state=1)


def _quiet(fn):
    with warnings.catch_warnings():
        # any warning but non-convergence (e.g. sklearn's "Scoring failed") is an error
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)  # the later filter wins
        return fn()


def test_default_layout_is_flat_and_tokens_is_one_keyword_away():
    X, y = make_attention_indexed(30, 5, n_tokens=3, random_state=0)
    assert X.shape == (30, 15) and y.shape == (30, 9)
    X3, y3 = make_attention_indexed(30, 5, n_tokens=3, random_state=0, layout="tokens")
    assert X3.shape == (30, 3, 5) and y3.shape == (30, 3, 3)
    np.testing.assert_array_equal(X, X3.reshape(30, -1))
    np.testing.assert_array_equal(y, y3.reshape(30, -1))
    teacher = AttentionIndexedModel(5, n_tokens=3, random_state=0)
    Xs, ys = teacher.sample(20, task="seq2seq", random_state=1)
    Xs3, ys3 = teacher.sample(20, task="seq2seq", random_state=1, layout="tokens")
    assert Xs.shape == (20, 15) and ys.shape == (20, 15) and ys3.shape == (20, 3, 5)
    np.testing.assert_array_equal(ys, ys3.reshape(20, -1))
    np.testing.assert_array_equal(Xs, Xs3.reshape(20, -1))


@pytest.mark.parametrize("call", [
    lambda: make_attention_indexed(10, 4, layout="3d"),
    lambda: AttentionIndexedModel(4, random_state=0).sample(10, layout="tokens3"),
    lambda: make_attention_indexed(10, 4, layout=None),
])
def test_bad_layout_names_the_argument_and_choices(call):
    with pytest.raises(ValueError, match=r"layout must be one of \['flat', 'tokens'\]"):
        call()


@pytest.mark.parametrize("scoring", SCORERS)
def test_grid_search_with_sklearn_scorers_on_default_data(default_data, scoring):
    X, y = default_data
    search = _quiet(lambda: GridSearchCV(_est(), {"reg_lambda": LAMBDAS}, scoring=scoring,
                                         cv=CV, error_score="raise").fit(X, y))
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores))
    assert search.best_params_["reg_lambda"] != LAMBDAS[0]


def test_neg_mse_picks_the_lambda_of_attention_error_scorer(default_data):
    X, y = default_data
    mse = _quiet(lambda: GridSearchCV(_est(), {"reg_lambda": LAMBDAS}, cv=CV,
                                      scoring="neg_mean_squared_error").fit(X, y))
    ours = _quiet(lambda: GridSearchCV(_est(), {"reg_lambda": LAMBDAS}, cv=CV,
                                       scoring=attention_error_scorer).fit(X, y))
    scores = ours.cv_results_["mean_test_score"]
    # lambda matters here: a search that ranked nothing would pick LAMBDAS[0]
    assert np.ptp(scores) > 0.1 * abs(scores).max()
    assert ours.best_params_["reg_lambda"] != LAMBDAS[0]
    assert mse.best_params_["reg_lambda"] == ours.best_params_["reg_lambda"]
    # seq2lab: the flattened MSE is the paper's error over the T² = 4 entries
    np.testing.assert_allclose(mse.cv_results_["mean_test_score"] * 4, scores, rtol=1e-8)


@pytest.mark.parametrize("scoring", SCORERS)
def test_cross_val_score_cross_validate_learning_curve(default_data, scoring):
    X, y = default_data
    scores = _quiet(lambda: cross_val_score(_est(), X, y, cv=CV, scoring=scoring,
                                            error_score="raise"))
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    res = _quiet(lambda: cross_validate(_est(), X, y, cv=CV, scoring=sorted({scoring, "r2"}),
                                        error_score="raise"))
    assert np.all(np.isfinite(res[f"test_{scoring}"]))
    sizes, train, test = _quiet(lambda: learning_curve(
        _est(), X, y, cv=CV, scoring=scoring, train_sizes=[0.5, 1.0], error_score="raise"))
    assert test.shape == (2, 3) and np.all(np.isfinite(test)) and np.all(np.isfinite(train))


def test_seq2seq_default_data_with_n_tokens():
    # flattened seq2seq data does not fix T: the estimator is told n_tokens
    X, y = make_attention_indexed(90, 6, n_tokens=2, task="seq2seq", random_state=2)
    scores = _quiet(lambda: cross_val_score(_est(n_tokens=2), X, y, cv=CV, error_score="raise",
                                            scoring="neg_mean_squared_error"))
    assert np.all(np.isfinite(scores))
    with pytest.raises(ValueError, match="n_tokens must be given"):
        _est().fit(X, y)


@pytest.mark.parametrize("Est", [TiedAttentionRegressor, UntiedAttentionRegressor,
                                 DirectAttentionRegressor])
def test_estimators_predict_in_the_layout_they_were_fitted_on(Est):
    X, y = make_attention_indexed(60, 5, random_state=3)
    X3, y3 = make_attention_indexed(60, 5, random_state=3, layout="tokens")
    kw = dict(max_iter=50, dtype="float64", device="cpu", random_state=0)
    flat = _quiet(lambda: Est(**kw).fit(X, y))
    tokens = _quiet(lambda: Est(**kw).fit(X3, y3))
    assert flat.predict(X).shape == (60, 4)
    assert tokens.predict(X3).shape == (60, 2, 2)
    # either X layout at predict time; the same fit from the same draws
    assert flat.predict(X3).shape == (60, 4)
    np.testing.assert_allclose(flat.predict(X3), tokens.predict(X).reshape(60, -1), atol=1e-10)
    assert attention_error(y3, flat.predict(X3)) == pytest.approx(
        attention_error(y, tokens.predict(X)))


def test_attention_error_accepts_either_layout_on_either_side():
    rng = np.random.default_rng(0)
    a, b = rng.random((5, 3, 3)), rng.random((5, 3, 3))
    expected = attention_error(a, b)
    assert attention_error(a.reshape(5, -1), b) == pytest.approx(expected)
    assert attention_error(a, b.reshape(5, -1)) == pytest.approx(expected)
    # seq2seq: the 3-D side tells T (and d) to the flattened one
    s, t = rng.random((5, 3, 4)), rng.random((5, 3, 4))
    assert attention_error(s, t.reshape(5, -1)) == pytest.approx(attention_error(s, t))
    assert attention_error(s.reshape(5, -1), t) == pytest.approx(attention_error(s, t))
    # one label per sample: 1-D against (n, 1)
    assert attention_error(a[:, 0, 0], b[:, :1, 0]) == pytest.approx(
        np.mean((a[:, 0, 0] - b[:, 0, 0]) ** 2))


@pytest.mark.parametrize("shape_true, shape_pred", [
    ((5, 2, 2), (5, 9)),      # other entries per sample
    ((5, 4), (5, 9)),
    ((5, 2, 2), (6, 4)),      # other samples
    ((5, 2, 6), (5, 3, 4)),   # same size, another token split
    ((5, 12), (5, 3, 4, 1)),  # 4-D is no layout
])
def test_attention_error_names_both_shapes_when_they_cannot_match(shape_true, shape_pred):
    y_true, y_pred = np.zeros(shape_true), np.zeros(shape_pred)
    with pytest.raises(ValueError) as info:
        attention_error(y_true, y_pred)
    message = str(info.value)
    if len(shape_pred) <= 3:
        assert str(shape_true) in message and str(shape_pred) in message
    else:
        assert str(shape_pred) in message
