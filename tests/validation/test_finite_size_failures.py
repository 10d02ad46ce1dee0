"""A failed prediction never discards finished training, and says why (issue #28, item 1)."""

import numpy as np
import pytest

import skattn.theory
from skattn.data import AttentionIndexedModel
from skattn.validation.finite_size import FSSConfig, _analyse, same_instance_se_row


def _config():
    return FSSConfig(alpha=0.3, reg_lambda=0.1, target={"family": "wishart", "kappa0": 0.2})


def _teacher(cfg, d=8):
    return AttentionIndexedModel(d, n_tokens=cfg.n_tokens, target=cfg.make_target(),
                                 random_state=0)


@pytest.mark.parametrize("exc, kind", [
    (AttributeError("'NoneType' object has no attribute 'q_hat'"), "internal error"),
    (RuntimeError("edge finding failed"), "internal error"),
    (ValueError("n_features=100000 needs about 186 GiB of memory, above the limit of 8 GiB; "
                "use a smaller problem, or raise the limit with the environment variable "
                "SKATTN_MEMORY_LIMIT_GB."), "memory guard"),
    (ValueError("alpha must lie in [1e-12, 1e6]"), "domain error"),
])
def test_any_prediction_failure_is_recorded_not_raised(monkeypatch, exc, kind):
    def boom(*args, **kwargs):
        raise exc

    monkeypatch.setattr(skattn.theory, "solve_state_evolution", boom)
    cfg = _config()
    row = same_instance_se_row(cfg, _teacher(cfg))
    assert row["se_same_instance_converged"] is False
    assert np.isnan(row["se_same_instance_test_error"])
    msg = row["se_same_instance_message"]
    assert msg.startswith(kind), msg
    assert type(exc).__name__ in msg
    assert "rerun does not help" in msg  # deterministic: the store will not retry it


def _sim_row(cfg, d, seed, *, status="ok", error=None, se=np.nan, msg=""):
    row = {"kind": "simulation", "config": cfg.to_json(), "d": d, "seed": seed,
           "status": status, "error": error, "same_instance_se": True}
    if status == "ok":
        row.update(test_error=0.1 + 1 / d + 0.001 * seed, train_objective=0.05,
                   se_same_instance_test_error=se, se_same_instance_train_objective=se,
                   se_same_instance_message=msg)
    return row


def test_failed_same_instance_prediction_names_its_cause():
    cfg = _config()
    cause = "internal error of the prediction (deterministic: a rerun does not help): X"
    rows = [{"kind": "continuum_se", "config": cfg.to_json(), "status": "ok",
             "se_available": False}]
    rows += [_sim_row(cfg, d, s, se=0.1 if d != 12 else np.nan,
                      msg="" if d != 12 else cause)
             for d in (8, 10, 12) for s in (0, 1)]
    with pytest.raises(ValueError, match=r"d=\[12\].*trained rows are kept.*internal error"):
        _analyse(cfg, rows, np.array([8, 10, 12]), 0.95, 0.01)


def test_failed_training_rows_name_their_cause():
    cfg = _config()
    guard = ("ValueError: n_features=100000 needs about 186 GiB of memory, above the limit "
             "of 8 GiB; use a smaller problem, or raise the limit with the environment "
             "variable SKATTN_MEMORY_LIMIT_GB.")
    rows = [_sim_row(cfg, d, s, se=0.1) for d in (8, 10) for s in (0, 1)]
    rows += [_sim_row(cfg, 100000, s, status="error", error=guard) for s in (0, 1)]
    with pytest.raises(ValueError, match=r"d=\[100000\].*186 GiB.*memory guard refused it: "
                                         r"a rerun does not help"):
        _analyse(cfg, rows, np.array([8, 10, 100000]), 0.95, 0.01)
    crash = "RuntimeError: worker lost"
    rows = rows[:4] + [_sim_row(cfg, 100000, s, status="error", error=crash) for s in (0, 1)]
    with pytest.raises(ValueError, match=r"worker lost.*helps only if the cause was "
                                         r"transient"):
        _analyse(cfg, rows, np.array([8, 10, 100000]), 0.95, 0.01)
