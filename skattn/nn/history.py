"""Training history: overlaps and spectra of S recorded during training (skorch style).

:class:`HistoryRecorder` is a callback for :func:`skattn.nn.train` (its ``callback``
argument, called as ``callback(iteration, module, objective)`` after each iteration). Every
``every`` iterations it forms ``S = module.S()`` once and records

- ``objective``: the objective divided by d² (the scale of ``loss_curve_``);
- ``m = Tr(S0ᵀ S) / d`` and ``q = ‖S‖²_F / d``, the overlaps of docs: Theory §3, when a
  target ``S0`` is given. For a symmetric S they are ``Tr(S0 S)/d`` and ``Tr(S²)/d``; for
  untied attention ``Tr(S0ᵀ S) = Tr(S0 · sym S)`` for a symmetric ``S0``, so m is the
  overlap of the symmetric part and q the squared Frobenius norm of the whole S;
- ``top``: the ``top_k`` largest eigenvalues of S (tied and direct modules) or singular
  values (untied modules, whose S is not symmetric), in decreasing order.

With several heads (``S`` of shape (H, d, d)) m, q and top get a head axis after the
record axis. The estimators take the same settings as their ``history`` parameter and
store :meth:`HistoryRecorder.as_dict` as ``history_``.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from .modules import UntiedAttention

__all__ = ["HistoryRecorder", "make_history_recorder"]

_KEYS = ("S0", "every", "top_k")


def _check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"history {name} must be an int >= 1, got {type(value).__name__} "
                        f"({value!r}).")
    if value < 1:
        raise ValueError(f"history {name} must be an int >= 1, got {value}.")
    return int(value)


class HistoryRecorder:
    """Record the objective, the overlaps with a target and the top spectrum of S.

    Parameters
    ----------
    S0 : array-like of shape (d, d) or None, default=None
        Target matrix for the overlaps m and q; None records neither (only the objective
        and the spectrum). Its shape is checked against the module at the first call
        (or by :meth:`check_n_features`).
    every : int, default=1
        Record iterations ``every, 2·every, …`` (an iteration is an L-BFGS step, a
        full-batch Adam step or a minibatch Adam epoch).
    top_k : int, default=10
        Number of leading eigenvalues (singular values for untied S) recorded; capped at d.

    Attributes
    ----------
    records : list of dict
        One dict per recorded iteration (keys as in :meth:`as_dict`).

    Examples
    --------
    >>> import numpy as np
    >>> from skattn import TiedAttentionRegressor, make_attention_indexed
    >>> X, y, S0 = make_attention_indexed(300, 10, return_target=True, random_state=0)
    >>> est = TiedAttentionRegressor(history={"S0": S0, "top_k": 3}, random_state=0,
    ...                              max_iter=20).fit(X, y)
    >>> est.history_["top"].shape == (len(est.history_["iteration"]), 3)
    True
    """

    def __init__(self, S0=None, every=1, top_k=10):
        if S0 is not None:
            S0 = np.array(S0, dtype=np.float64)  # a private copy: the caller's stays intact
            if S0.ndim != 2 or S0.shape[0] != S0.shape[1]:
                raise ValueError(f"history S0 must be a square (d, d) matrix, got shape "
                                 f"{S0.shape}.")
            if not np.all(np.isfinite(S0)):
                raise ValueError("history S0 must be finite (it holds NaN or inf).")
        self.S0 = S0
        self.every = _check_positive_int(every, "every")
        self.top_k = _check_positive_int(top_k, "top_k")
        self.records = []
        self._S0_torch = None

    def check_n_features(self, n_features):
        """Raise unless ``S0`` (when given) is ``n_features × n_features``.

        Parameters
        ----------
        n_features : int
            Token dimension d of the model.

        Raises
        ------
        ValueError
            Naming ``history`` and ``S0``, with both shapes.
        """
        if self.S0 is not None and self.S0.shape != (n_features, n_features):
            raise ValueError(
                f"history S0 has shape {self.S0.shape} but the model has n_features="
                f"{n_features}: expected S0 of shape ({n_features}, {n_features}).")

    def __call__(self, iteration, module, objective):
        """Record iteration ``iteration`` of ``module`` (when it is a multiple of ``every``).

        Parameters
        ----------
        iteration : int
            1-based iteration index.
        module : FactoredAttention, UntiedAttention or DirectAttention
        objective : float
            The objective ``Σ_μ ℓ_μ + λ·penalty`` at the current parameters.
        """
        if iteration % self.every:
            return
        d = module.n_features
        if not self.records:
            self.check_n_features(d)
        with torch.no_grad():
            S = module.S()
            record = {"iteration": int(iteration), "objective": float(objective) / d ** 2}
            if self.S0 is not None:
                if self._S0_torch is None or self._S0_torch.device != S.device:
                    self._S0_torch = torch.as_tensor(self.S0, dtype=S.dtype, device=S.device)
                S0 = self._S0_torch
                record["m"] = (torch.sum(S0 * S, dim=(-2, -1)) / d).cpu().numpy()
                record["q"] = (torch.sum(S * S, dim=(-2, -1)) / d).cpu().numpy()
            if isinstance(module, UntiedAttention):
                spectrum = torch.linalg.svdvals(S)  # already decreasing
            else:
                spectrum = torch.linalg.eigvalsh(S).flip(-1)
            record["top"] = spectrum[..., :self.top_k].cpu().double().numpy()
        self.records.append(record)

    def as_dict(self):
        """The records as arrays, one entry per recorded iteration along axis 0.

        Returns
        -------
        history : dict of str to ndarray
            ``iteration`` (int, 1-based, shape (n_records,)), ``objective`` (objective / d²,
            shape (n_records,)), ``top`` (shape (n_records, k) or (n_records, H, k)), and
            with ``S0`` also ``m`` and ``q`` (shape (n_records,) or (n_records, H)).
            Empty arrays when nothing was recorded.
        """
        if not self.records:
            empty = {"iteration": np.zeros(0, dtype=int), "objective": np.zeros(0),
                     "top": np.zeros((0, self.top_k))}
            if self.S0 is not None:
                empty.update(m=np.zeros(0), q=np.zeros(0))
            return empty
        return {key: np.asarray([r[key] for r in self.records])
                for key in self.records[0]}

    def __repr__(self):
        s0 = None if self.S0 is None else f"<array {self.S0.shape}>"
        return f"HistoryRecorder(S0={s0}, every={self.every}, top_k={self.top_k})"


def make_history_recorder(history):
    """A fresh recorder from an estimator's ``history`` parameter.

    Parameters
    ----------
    history : None, dict or HistoryRecorder
        None: no history. A dict with keys among ``S0``, ``every``, ``top_k`` (the
        arguments of :class:`HistoryRecorder`). A HistoryRecorder: its settings (it is not
        modified; the records go to a new recorder).

    Returns
    -------
    recorder : HistoryRecorder or None

    Raises
    ------
    ValueError or TypeError
        Naming ``history`` and the offending key or value.
    """
    if history is None:
        return None
    if isinstance(history, HistoryRecorder):
        return HistoryRecorder(S0=history.S0, every=history.every, top_k=history.top_k)
    if isinstance(history, dict):
        unknown = sorted(set(history) - set(_KEYS), key=str)
        if unknown:
            raise ValueError(f"history has unknown key(s) {unknown}; expected keys among "
                             f"{list(_KEYS)}.")
        return HistoryRecorder(**history)
    raise TypeError(f"history must be None, a dict with keys among {list(_KEYS)} or a "
                    f"skattn.nn.HistoryRecorder, got {type(history).__name__}.")
