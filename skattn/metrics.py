"""The paper's test error and its scorer.

Model selection with scikit-learn
---------------------------------
scikit-learn's metrics accept targets of at most two dimensions. The data of
:func:`~skattn.make_attention_indexed` and :meth:`~skattn.AttentionIndexedModel.sample`
come in that layout by default (``layout="flat"``: X ``(n, T·d)``, y ``(n, T·T)`` or
``(n, T·d)``), so in a search such as
``GridSearchCV(TiedAttentionRegressor(), {"reg_lambda": [...]}, scoring=...)`` every
scorer works:

- a string scorer (``"neg_mean_squared_error"``, ``"r2"``, ``"neg_mean_absolute_error"``,
  ...) on flattened y; the estimator predicts flattened outputs. ``neg_mean_squared_error``
  is :func:`attention_error` divided by ``T²`` (seq2lab) or ``T`` (seq2seq) and picks the
  same candidate as :func:`attention_error_scorer`. Flattened seq2seq data does not fix
  the token count: set the estimator's ``n_tokens``;
- ``scoring=attention_error_scorer`` (or the default ``scoring=None``, the estimator's
  ``score``) on every layout of y: 3-D ``(n, T, T)`` / ``(n, T, d)`` (``layout="tokens"``),
  flattened, or 1-D;
- a string scorer with 3-D y (``layout="tokens"``) fails on every split inside
  scikit-learn. The search does not raise: scikit-learn catches every exception of a
  scorer, warns "Scoring failed ... Found array with dim 3" once per split, sets the score
  to ``error_score`` (NaN by default) and ranks all candidates first, so ``best_params_``
  is the first candidate. Pass ``error_score="raise"`` to make the search raise.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import check_choice, check_finite_array

__all__ = ["attention_error", "attention_error_scorer"]


def _check_outputs(y, name):
    """``y`` as a finite float array of 1 to 3 dimensions, or an error naming ``name``."""
    try:
        arr = None if np.iscomplexobj(y) else np.asarray(y, dtype=float)
    except (TypeError, ValueError):
        arr = None
    if arr is None:  # not real numbers: check_finite_array names the problem
        return check_finite_array(y, name)
    # the shape is checked before the values, so a wrong layout is reported as such
    if arr.ndim not in (1, 2, 3):
        raise ValueError(f"{name} must have 3 dimensions (n_samples, n_tokens, n_outputs), "
                         f"or 2 or 1 when flattened with n_tokens given; got shape "
                         f"{arr.shape}.")
    return check_finite_array(arr, name)


def _as_3d(y, name, n_tokens, task):
    """``y`` of shape (n, T, k) from the 3-D, flattened 2-D or 1-D layout."""
    if y.ndim == 3:
        if n_tokens is not None and y.shape[1] != n_tokens:
            raise ValueError(f"{name} of shape {y.shape} has {y.shape[1]} tokens but "
                             f"n_tokens={n_tokens}.")
        return y
    if n_tokens is None:
        # a square width reads as a flattened T×T attention matrix ("auto" included, as
        # for 3-D outputs); flattened seq2seq outputs need n_tokens
        if (y.ndim == 2 and task in ("auto", "seq2lab")
                and math.isqrt(y.shape[1]) ** 2 == y.shape[1]):
            n_tokens = math.isqrt(y.shape[1])
        else:
            raise ValueError(
                f"{name} must have 3 dimensions (n_samples, n_tokens, n_outputs), or be "
                f"flattened to (n_samples, n_tokens·n_outputs) with n_tokens given (e.g. "
                f"n_tokens=est.n_tokens_); got shape {y.shape} and n_tokens=None.")
    if y.ndim == 1:
        if n_tokens != 1:
            raise ValueError(f"a 1-D {name} (one label per sample) means n_tokens=1, got "
                             f"n_tokens={n_tokens}.")
        return y.reshape(-1, 1, 1)
    if y.shape[1] % n_tokens != 0:
        raise ValueError(f"{name} of shape {y.shape} has {y.shape[1]} columns, not a "
                         f"multiple of n_tokens={n_tokens}; expected (n_samples, "
                         f"n_tokens·n_tokens) or (n_samples, n_tokens·n_features).")
    return y.reshape(y.shape[0], n_tokens, -1)


def _match_layouts(y_true, y_pred, n_tokens, task):
    """Both arrays as (n, T, k): either may be 3-D, flattened 2-D or 1-D.

    A 3-D argument fixes T and k for the other one; two flattened ones are read with
    ``n_tokens`` (or √columns for seq2lab). Shapes that hold different samples or entries
    per sample raise a ValueError naming both.
    """
    mismatch = (f"y_true and y_pred must have the same shape, or the same samples and "
                f"outputs in the other layout (3-D (n_samples, n_tokens, n_outputs) or "
                f"flattened (n_samples, n_tokens·n_outputs)); got shapes {y_true.shape} and "
                f"{y_pred.shape}.")
    if (y_true.shape[0] != y_pred.shape[0]
            or y_true.size != y_pred.size):
        raise ValueError(mismatch)
    if y_true.shape == y_pred.shape:
        y_true = _as_3d(y_true, "y_true", n_tokens, task)
        return y_true, y_pred.reshape(y_true.shape)
    # different layouts of the same entries: the 3-D one (if any) decides T and k
    if y_pred.ndim == 3 and y_true.ndim != 3:
        y_pred = _as_3d(y_pred, "y_pred", n_tokens, task)
        return y_true.reshape(y_pred.shape), y_pred
    if y_true.ndim == 3 and y_pred.ndim != 3:
        y_true = _as_3d(y_true, "y_true", n_tokens, task)
        return y_true, y_pred.reshape(y_true.shape)
    if y_true.ndim == 3 or min(y_true.ndim, y_pred.ndim) != 1:
        # two 3-D arrays of other token splits, or two 2-D arrays of other widths
        raise ValueError(mismatch)
    # one 1-D, one (n, 1) flattened array: one label per sample
    y_true = _as_3d(y_true.reshape(-1, 1) if y_true.ndim == 1 else y_true, "y_true",
                    n_tokens, task)
    return y_true, y_pred.reshape(y_true.shape)


def attention_error(y_true, y_pred, *, task="auto", n_tokens=None):
    """Mean per-sample error of attention outputs (docs: Theory §2).

    ``mean_μ Σ_ab (ŷ_ab − y_ab)²`` for seq2lab outputs of shape (n, T, T), and
    ``mean_μ ‖ŷ − y‖²_F / d`` for seq2seq outputs of shape (n, T, d).

    Parameters
    ----------
    y_true, y_pred : ndarray of shape (n_samples, n_tokens, n_tokens or n_features), \
            (n_samples, n_tokens * (n_tokens or n_features)) or (n_samples,)
        3-D, or flattened (the default layout of :func:`~skattn.make_attention_indexed`,
        and what the estimators predict when fitted on flattened y); the two arguments
        may be in different layouts of the same entries, the 3-D one then fixing the
        token count. Two flattened arguments are read with ``n_tokens``, except for
        seq2lab, where it is √(columns). A 1-D layout is one label per sample
        (n_tokens=1).
    task : {"auto", "seq2lab", "seq2seq"}, default="auto"
        "auto" reads a square trailing shape (after reshaping) as seq2lab, and a
        flattened width that is a perfect square (without ``n_tokens``) as a flattened
        T×T attention matrix. For flattened seq2seq outputs pass ``task="seq2seq"`` and
        ``n_tokens`` (an error per sample is divided by d, which the width alone does not
        tell).
    n_tokens : int or None, default=None
        Token count T, to read flattened inputs; checked against 3-D inputs.

    Returns
    -------
    error : float

    Raises
    ------
    ValueError
        Naming both shapes if they hold different samples or entries; if they are empty
        or cannot be read with ``n_tokens`` and ``task``.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.full((4, 2, 2), 0.5)
    >>> round(attention_error(y, y + 0.1), 12)
    0.04
    >>> round(attention_error(y.reshape(4, -1), y.reshape(4, -1) + 0.1, n_tokens=2), 12)
    0.04
    >>> round(attention_error(y, y.reshape(4, -1) + 0.1), 12)  # either layout, either side
    0.04
    """
    check_choice(task, "task", ("auto", "seq2lab", "seq2seq"))
    if n_tokens is not None and (isinstance(n_tokens, bool)
                                 or not isinstance(n_tokens, (int, np.integer))
                                 or n_tokens < 1):
        raise ValueError(f"n_tokens must be an integer >= 1 or None, got {n_tokens!r}.")
    y_true = _check_outputs(y_true, "y_true")
    y_pred = _check_outputs(y_pred, "y_pred")
    if y_true.shape[0] == 0 or y_pred.shape[0] == 0:
        raise ValueError("y_true must hold at least one sample.")
    if 0 in y_true.shape[1:] or 0 in y_pred.shape[1:]:
        raise ValueError(f"y_true and y_pred must have at least one token and one output, "
                         f"got shapes {y_true.shape} and {y_pred.shape}.")
    y_true, y_pred = _match_layouts(y_true, y_pred, n_tokens, task)
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

    Works with any fitted skattn estimator and every layout of y (3-D, flattened, 1-D);
    flattened outputs are read with the estimator's ``n_tokens_`` and ``task_``. Unlike
    scikit-learn's string scorers it accepts 3-D y (see the module docstring).

    Parameters
    ----------
    estimator : fitted skattn estimator
    X : array-like, a layout accepted by ``estimator.predict``
    y : array-like, the layout used in ``fit``

    Returns
    -------
    score : float
        ``-attention_error(y, estimator.predict(X))``.
    """
    y_pred = np.asarray(estimator.predict(X), dtype=float)
    y_true = np.asarray(y, dtype=float)
    return -attention_error(y_true, y_pred, task=getattr(estimator, "task_", "auto"),
                            n_tokens=getattr(estimator, "n_tokens_", None))
