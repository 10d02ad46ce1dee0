"""Fits run side by side do not oversubscribe the cores (skattn.limit_threads, joblib)."""

import warnings

import pytest
import torch
from joblib import cpu_count, parallel_config
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import cross_validate
from threadpoolctl import threadpool_info

import skattn
from skattn import TiedAttentionRegressor, make_attention_indexed


class _ThreadRecordingRegressor(TiedAttentionRegressor):
    """Records the torch thread count its fit ran with."""

    def fit(self, X, y):
        self.torch_threads_ = torch.get_num_threads()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return super().fit(X, y)


@pytest.fixture(scope="module")
def data():
    return make_attention_indexed(n_samples=40, n_features=5, random_state=0, layout="tokens")


def _threads_seen(X, y, n_jobs):
    est = _ThreadRecordingRegressor(max_iter=3, device="cpu", random_state=0)
    out = cross_validate(est, X, y, cv=2, n_jobs=n_jobs, return_estimator=True)
    return [e.torch_threads_ for e in out["estimator"]]


def test_limit_threads_sets_and_restores():
    torch.set_num_threads(2)
    with skattn.limit_threads(1):
        assert torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    assert torch.get_num_threads() == 2


def test_limit_threads_restores_after_an_error():
    torch.set_num_threads(2)
    with pytest.raises(RuntimeError, match="boom"):
        with skattn.limit_threads(1):
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_limit_threads_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="n_threads must be an integer in \\[1, "):
        with skattn.limit_threads(bad):
            pass


def test_fit_in_limit_threads_runs_single_threaded(data):
    torch.set_num_threads(2)
    with skattn.limit_threads(1):
        assert _threads_seen(*data, n_jobs=1) == [1, 1]


def test_search_workers_share_the_cores(data):
    """loky workers start with cpu_count // n_jobs threads, which torch adopts."""
    seen = _threads_seen(*data, n_jobs=2)
    assert all(t <= max(1, cpu_count() // 2) for t in seen), seen


def test_search_workers_follow_inner_max_num_threads(data):
    with parallel_config(backend="loky", inner_max_num_threads=1):
        assert _threads_seen(*data, n_jobs=2) == [1, 1]


def test_threads_module_does_not_import_torch():
    import subprocess
    import sys
    code = ("import sys, skattn.threads\n"
            "with skattn.threads.limit_threads(1): pass\n"
            "assert 'torch' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], timeout=120)
    assert done.returncode == 0
