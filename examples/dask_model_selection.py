"""
Model selection on a dask cluster
=================================

``GridSearchCV`` over the weight decay λ and ``learning_curve`` run unchanged on a
dask.distributed cluster through joblib's ``"dask"`` backend: each fit is a dask task.
Here the cluster is an in-process ``LocalCluster``; pass a scheduler address to
``Client(...)`` to use a real one. Needs the ``distributed`` extra
(``pip install skattn[distributed]``). Tested in ``tests/api/test_cuda_and_dask.py``.
"""

import joblib
import numpy as np
from distributed import Client, LocalCluster
from sklearn.model_selection import GridSearchCV, learning_curve

from skattn import TiedAttentionRegressor
from skattn.data import WishartTarget, make_attention_indexed
from skattn.metrics import attention_error_scorer


def main():
    X, y = make_attention_indexed(1200, 40, n_tokens=2, target=WishartTarget(0.5),
                                  random_state=0, layout="tokens")
    est = TiedAttentionRegressor(random_state=0)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster), joblib.parallel_backend("dask"):
        search = GridSearchCV(est, {"reg_lambda": [1e-3, 1e-2, 1e-1, 1.0]}, cv=3,
                              scoring=attention_error_scorer, n_jobs=-1).fit(X, y)
        sizes, _, test = learning_curve(est, X, y, train_sizes=np.linspace(0.25, 1.0, 4),
                                        cv=3, scoring=attention_error_scorer, n_jobs=-1)
    print("best reg_lambda:", search.best_params_["reg_lambda"],
          f"(CV test error {-search.best_score_:.2e})")
    for n, err in zip(sizes, -test.mean(axis=1)):
        print(f"n = {n:5d}: CV test error {err:.2e}")


if __name__ == "__main__":
    main()
