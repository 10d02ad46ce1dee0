"""GPU path (skipped cleanly without CUDA) and model selection on dask through joblib."""

import pickle

import numpy as np
import pytest
import torch

from skattn import DirectAttentionRegressor, TiedAttentionRegressor
from skattn.data import make_attention_indexed
from skattn.metrics import attention_error_scorer

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


@pytest.fixture(scope="module")
def data():
    return make_attention_indexed(300, 16, n_tokens=2, random_state=0, layout="tokens")


@cuda
@pytest.mark.parametrize("cls", [TiedAttentionRegressor, DirectAttentionRegressor])
def test_cuda_fit_matches_cpu(cls, data):
    X, y = data
    gpu = cls(device="cuda", dtype="float64", random_state=0, max_iter=200).fit(X, y)
    cpu = cls(device="cpu", dtype="float64", random_state=0, max_iter=200).fit(X, y)
    assert gpu.device_.startswith("cuda")
    assert gpu.train_objective_ == pytest.approx(cpu.train_objective_, rel=1e-3)
    # a CUDA-fitted estimator predicts after unpickling on any device
    again = pickle.loads(pickle.dumps(gpu))
    assert np.allclose(again.predict(X[:5]), gpu.predict(X[:5]))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_grid_search_and_learning_curve_on_dask(data):
    distributed = pytest.importorskip("distributed")
    import joblib
    from sklearn.model_selection import GridSearchCV, learning_curve

    X, y = data
    est = TiedAttentionRegressor(max_iter=50, random_state=0)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster), joblib.parallel_backend("dask"):
        gs = GridSearchCV(est, {"reg_lambda": [0.01, 1.0]}, cv=2,
                          scoring=attention_error_scorer, n_jobs=-1).fit(X, y)
        sizes, train, test = learning_curve(est, X, y, train_sizes=[0.5, 1.0], cv=2,
                                            scoring=attention_error_scorer, n_jobs=-1)
    assert gs.best_params_["reg_lambda"] in (0.01, 1.0)
    assert test.shape == (2, 2) and np.all(np.isfinite(test))


@cuda
def test_amp_on_cuda_matches_numpy(data):
    from skattn import AsymptoticPredictor

    X, y = data
    a = AsymptoticPredictor(reg_lambda=0.05, tol=1e-9, max_iter=800).fit(X, y)
    b = AsymptoticPredictor(reg_lambda=0.05, tol=1e-9, max_iter=800, device="cuda").fit(X, y)
    assert np.allclose(a.S_, b.S_, atol=1e-7)
    assert b.kkt_residual_ <= 1e-6
