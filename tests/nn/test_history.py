"""Training history: the HistoryRecorder callback, the train() hook, history_ on estimators."""

import numpy as np
import pytest
import torch
from sklearn.base import clone

from skattn import make_attention_indexed
from skattn.estimators import (
    DirectAttentionRegressor,
    TiedAttentionRegressor,
    UntiedAttentionRegressor,
)
from skattn.nn import FactoredAttention, HistoryRecorder, UntiedAttention, train
from skattn.nn import history as history_module

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

D = 8
FAST = dict(dtype="float64", device="cpu", random_state=0, max_iter=40)


@pytest.fixture(scope="module")
def data():
    X, y, S0 = make_attention_indexed(200, D, n_tokens=3, return_target=True, random_state=0,
                                      layout="tokens")
    return X, y, S0


def test_history_off_costs_nothing(data, monkeypatch):
    """history=None: train gets no callback, the recorder never runs, no S is formed."""
    X, y, _ = data
    import skattn.estimators._base as base

    callbacks = []
    real_train = base.train

    def spy(*args, **kwargs):
        callbacks.append(kwargs.get("callback"))
        return real_train(*args, **kwargs)

    def forbidden(*args, **kwargs):
        raise AssertionError("called although history=None")

    monkeypatch.setattr(base, "train", spy)
    monkeypatch.setattr(HistoryRecorder, "__call__", forbidden)
    monkeypatch.setattr(FactoredAttention, "S", forbidden)
    est = TiedAttentionRegressor(**FAST).fit(X, y)
    assert callbacks == [None]
    assert not hasattr(est, "history_")


def test_tied_history_matches_the_fit(data):
    X, y, S0 = data
    est = TiedAttentionRegressor(history={"S0": S0, "top_k": 4}, **FAST).fit(X, y)
    h = est.history_
    assert set(h) == {"iteration", "objective", "m", "q", "top"}
    np.testing.assert_array_equal(h["iteration"], np.arange(1, est.n_iter_ + 1))
    np.testing.assert_allclose(h["objective"], est.loss_curve_, rtol=1e-12)
    assert h["top"].shape == (est.n_iter_, 4)
    assert np.all(np.diff(h["top"], axis=1) <= 0)
    # L-BFGS returns its last iterate: the last record is the fitted S_
    np.testing.assert_allclose(h["top"][-1], est.head_spectra_[0, :4], rtol=1e-10)
    np.testing.assert_allclose(h["m"][-1], np.trace(S0 @ est.S_) / D, rtol=1e-10)
    np.testing.assert_allclose(h["q"][-1], np.trace(est.S_ @ est.S_) / D, rtol=1e-10)


def test_untied_history_uses_singular_values_and_the_symmetric_part(data):
    X, y, S0 = data
    est = UntiedAttentionRegressor(history={"S0": S0, "top_k": 3}, **FAST).fit(X, y)
    h, S = est.history_, est.S_
    assert np.linalg.norm(S - S.T) > 1e-3  # the test needs a non-symmetric S
    np.testing.assert_allclose(h["top"][-1], np.linalg.svd(S, compute_uv=False)[:3],
                               rtol=1e-10)
    np.testing.assert_allclose(h["m"][-1], np.trace(S0 @ (S + S.T) / 2) / D, rtol=1e-10)
    np.testing.assert_allclose(h["q"][-1], np.sum(S * S) / D, rtol=1e-10)
    assert np.all(h["top"] >= 0)


def test_direct_history_and_adam_epochs(data):
    X, y, _ = data
    est = DirectAttentionRegressor(history={"every": 3}, solver="adam", batch_size=50,
                                   **FAST).fit(X, y)
    h = est.history_
    assert set(h) == {"iteration", "objective", "top"}  # no S0: no overlaps
    np.testing.assert_array_equal(h["iteration"], np.arange(3, est.n_iter_ + 1, 3))
    np.testing.assert_allclose(h["objective"], np.asarray(est.loss_curve_)[2::3],
                               rtol=1e-12)
    assert h["top"].shape == (len(h["iteration"]), 8)  # top_k=10 capped at d


def test_multi_head_history_has_a_head_axis(data):
    X, y, S0 = data
    est = TiedAttentionRegressor(n_heads=2, history=HistoryRecorder(S0, top_k=2),
                                 **FAST).fit(X, y)
    n = est.n_iter_
    assert est.history_["top"].shape == (n, 2, 2)
    assert est.history_["m"].shape == (n, 2)
    np.testing.assert_allclose(est.history_["top"][-1], est.head_spectra_[:, :2],
                               rtol=1e-10)


def test_recorder_parameter_is_not_modified_and_clones(data):
    X, y, S0 = data
    recorder = HistoryRecorder(S0, every=2)
    est = TiedAttentionRegressor(history=recorder, **FAST)
    est.fit(X, y)
    assert recorder.records == []
    assert len(est.history_["iteration"]) == est.n_iter_ // 2
    assert clone(est).get_params()["history"].every == 2


def test_refit_without_history_drops_history(data):
    X, y, _ = data
    est = TiedAttentionRegressor(history={}, **FAST).fit(X, y)
    assert "history_" in vars(est)
    est.set_params(history=None).fit(X, y)
    assert not hasattr(est, "history_")


def test_train_calls_the_callback_every_iteration():
    X, y = make_attention_indexed(100, 6, random_state=1, layout="tokens")
    module = UntiedAttention(6, 6, dtype=torch.float64)
    calls = []
    result = train(module, torch.as_tensor(X), torch.as_tensor(y), max_iter=15,
                   callback=lambda it, mod, obj: calls.append((it, mod, obj)))
    assert [c[0] for c in calls] == list(range(1, result.n_iter + 1))
    assert all(c[1] is module for c in calls)
    np.testing.assert_allclose([c[2] for c in calls], result.objective_history)


@pytest.mark.parametrize("history,exc,match", [
    ({"S0": np.eye(D + 1)}, ValueError, r"history S0 has shape \(9, 9\).*n_features=8"),
    ({"S0": np.ones((D, D + 1))}, ValueError, "history S0 must be a square"),
    ({"S0": np.full((D, D), np.nan)}, ValueError, "history S0 must be finite"),
    ({"every": 0}, ValueError, "history every"),
    ({"top_k": 2.5}, TypeError, "history top_k"),
    ({"S": np.eye(D)}, ValueError, "history has unknown key"),
    ("yes", ValueError, "'history' parameter"),
])
def test_bad_history_is_rejected(data, history, exc, match):
    X, y, _ = data
    with pytest.raises(exc, match=match):
        TiedAttentionRegressor(history=history, **FAST).fit(X, y)


def test_make_history_recorder_gives_fresh_recorders():
    recorder = HistoryRecorder(top_k=2)
    made = history_module.make_history_recorder(recorder)
    assert made is not recorder and made.top_k == 2
    assert history_module.make_history_recorder(None) is None
    with pytest.raises(TypeError, match="history must be None"):
        history_module.make_history_recorder([1])
    empty = HistoryRecorder(np.eye(3)).as_dict()
    assert empty["iteration"].shape == (0,) and empty["m"].shape == (0,)
