"""The paper's test error and its scorer."""

from __future__ import annotations

import numpy as np

from ._validation import check_choice, check_finite_array

__all__ = ["attention_error", "attention_error_scorer"]


def attention_error(y_true, y_pred, *, task="auto"):
    """Mean per-sample error of attention outputs (THEORY.md §2).

    ``mean_μ Σ_ab (ŷ_ab − y_ab)²`` for seq2lab outputs of shape (n, T, T), and
    ``mean_μ ‖ŷ − y‖²_F / d`` for seq2seq outputs of shape (n, T, d).

    Parameters
    ----------
    y_true, y_pred : ndarray of shape (n_samples, n_tokens, n_tokens or n_features)
    task : {"auto", "seq2lab", "seq2seq"}, default="auto"
        "auto" reads a square trailing shape as seq2lab.

    Returns
    -------
    error : float
    """
    check_choice(task, "task", ("auto", "seq2lab", "seq2seq"))
    y_true = check_finite_array(y_true, "y_true", ndim=3)
    y_pred = check_finite_array(y_pred, "y_pred", ndim=3)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred must have the same shape, got {y_true.shape} "
                         f"and {y_pred.shape}.")
    if y_true.shape[0] == 0:
        raise ValueError("y_true must hold at least one sample.")
    if y_true.shape[1] == 0 or y_true.shape[2] == 0:
        raise ValueError(f"y_true must have at least one token and one output, got shape "
                         f"{y_true.shape}.")
    if task == "auto":
        task = "seq2lab" if y_true.shape[1] == y_true.shape[2] else "seq2seq"
    elif task == "seq2lab" and y_true.shape[1] != y_true.shape[2]:
        raise ValueError(f"task='seq2lab' needs square (n_samples, n_tokens, n_tokens) "
                         f"outputs, got y_true of shape {y_true.shape}.")
    per_sample = np.sum((y_pred - y_true) ** 2, axis=(1, 2))
    if task == "seq2seq":
        per_sample = per_sample / y_true.shape[2]
    return float(np.mean(per_sample))


def attention_error_scorer(estimator, X, y):
    """Scorer for GridSearchCV: the negated :func:`attention_error` (greater is better).

    Works with any fitted skattn estimator; outputs given flattened in ``fit`` are
    reshaped with the estimator's ``n_tokens_`` and task.
    """
    y_pred = np.asarray(estimator.predict(X), dtype=float)
    y_true = np.asarray(y, dtype=float)
    if y_true.ndim == 2:
        n, T = y_true.shape[0], estimator.n_tokens_
        y_true = y_true.reshape(n, T, -1)
        y_pred = y_pred.reshape(n, T, -1)
    return -attention_error(y_true, y_pred, task=getattr(estimator, "task_", "auto"))
