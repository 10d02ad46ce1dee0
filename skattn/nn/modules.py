"""Torch modules for single-head tied attention (THEORY.md §2).

- :class:`FactoredAttention`: ``S = W Wᵀ / √(p d)``, penalty ``‖W‖²_F``;
- :class:`DirectAttention`: ``S = V / √d`` with ``V`` symmetric, penalty ``‖V‖²_F``.

Both expose ``forward(X)`` (the prediction), ``S()``, ``penalty()`` and
``objective(X, y, reg_lambda)`` = ``Σ_μ ℓ_μ + reg_lambda · penalty`` (a sum over samples,
the paper's normalisation).
"""

from __future__ import annotations

import torch
from torch import nn

from . import functional as F

__all__ = ["FactoredAttention", "DirectAttention"]


def _check_options(attention, task):
    if attention not in F.ATTENTIONS:
        raise ValueError(f"attention must be one of {list(F.ATTENTIONS)}, got {attention!r}.")
    if task not in F.TASKS:
        raise ValueError(f"task must be one of {list(F.TASKS)}, got {task!r}.")


class _AttentionBase(nn.Module):
    """Shared forward/objective; subclasses define ``preactivation``, ``S`` and ``penalty``."""

    def __init__(self, beta, attention, task):
        super().__init__()
        _check_options(attention, task)
        self.beta = float(beta)
        self.attention = attention
        self.task = task

    def attention_matrix(self, X):
        """``σ_β(h(S; X))`` of shape (n_samples, n_tokens, n_tokens)."""
        return F.attention_map(self.preactivation(X), self.beta, self.attention)

    def forward(self, X):
        """Prediction: the attention matrix (seq2lab) or ``σ_β(h) X`` (seq2seq)."""
        return F.attention_output(self.attention_matrix(X), X, self.task)

    def data_loss(self, X, y):
        """``Σ_μ ℓ_μ`` over the given samples (a sum, not a mean)."""
        return torch.sum(F.per_sample_loss(self(X), y, self.task))

    def objective(self, X, y, reg_lambda, data_scale=1.0):
        """``data_scale · Σ_μ ℓ_μ + reg_lambda · penalty()``.

        ``data_scale = n / batch`` makes a minibatch an unbiased estimate of the full sum.
        """
        return data_scale * self.data_loss(X, y) + reg_lambda * self.penalty()


class FactoredAttention(_AttentionBase):
    """Factored (tied) attention, ``S = W Wᵀ / √(p d)``.

    Parameters
    ----------
    n_features : int
        Token dimension d.
    width : int
        Width p of the factor W (``κ = p/d``).
    beta : float, default=1.0
        Inverse temperature of the softmax.
    attention : {"softmax", "linear"}, default="softmax"
    task : {"seq2lab", "seq2seq"}, default="seq2lab"
    W : array-like of shape (n_features, width), optional
        Initial factor. If None, i.i.d. ``N(0, init_scale²)`` entries (a zero W is a
        stationary point of the objective, so it is never the default).
    init_scale : float, default=1.0
        Standard deviation of the random initial entries; with 1.0 the spectrum of S is
        of order one.
    generator : torch.Generator, optional
    dtype, device : torch dtype and device, optional

    Attributes
    ----------
    W : torch.nn.Parameter of shape (n_features, width)
    """

    def __init__(self, n_features, width, *, beta=1.0, attention="softmax", task="seq2lab",
                 W=None, init_scale=1.0, generator=None, dtype=None, device=None):
        super().__init__(beta, attention, task)
        if W is None:
            W = torch.randn(n_features, width, generator=generator, dtype=dtype or
                            torch.get_default_dtype()) * init_scale
        W = torch.as_tensor(W, dtype=dtype).to(device=device)
        if W.shape != (n_features, width):
            raise ValueError(f"W must have shape {(n_features, width)}, got {tuple(W.shape)}.")
        self.W = nn.Parameter(W.clone())

    @property
    def n_features(self):
        return self.W.shape[0]

    @property
    def width(self):
        return self.W.shape[1]

    def preactivation(self, X):
        """``h(S; X)`` through ``X W`` (no d×d matrix formed)."""
        return F.preactivation_factored(X, self.W)

    def S(self):
        """``W Wᵀ / √(p d)``."""
        return F.factored_S(self.W)

    def penalty(self):
        """``‖W‖²_F``."""
        return torch.sum(self.W * self.W)


class DirectAttention(_AttentionBase):
    """Direct (Frobenius) attention, ``S = V / √d`` with ``V`` symmetric.

    The free parameter ``V_param`` is symmetrised on use, ``V = (V_param + V_paramᵀ)/2``,
    so V is symmetric by construction and gradients are projected onto symmetric matrices;
    starting from a symmetric ``V_param``, Adam and L-BFGS keep it symmetric.

    Parameters
    ----------
    n_features : int
        Token dimension d.
    beta : float, default=1.0
    attention : {"softmax", "linear"}, default="softmax"
    task : {"seq2lab", "seq2seq"}, default="seq2lab"
    V : array-like of shape (n_features, n_features), optional
        Initial matrix (symmetrised). If None: zero when ``init_scale == 0`` (the
        minimum-norm start), else a GOE draw with off-diagonal standard deviation
        ``init_scale``.
    init_scale : float, default=0.0
    generator : torch.Generator, optional
    dtype, device : torch dtype and device, optional
    """

    def __init__(self, n_features, *, beta=1.0, attention="softmax", task="seq2lab", V=None,
                 init_scale=0.0, generator=None, dtype=None, device=None):
        super().__init__(beta, attention, task)
        if V is None:
            G = torch.randn(n_features, n_features, generator=generator,
                            dtype=dtype or torch.get_default_dtype())
            V = (G + G.T) / 2 ** 0.5 * init_scale
        V = torch.as_tensor(V, dtype=dtype).to(device=device)
        if V.shape != (n_features, n_features):
            raise ValueError(f"V must have shape {(n_features, n_features)}, "
                             f"got {tuple(V.shape)}.")
        self.V_param = nn.Parameter(((V + V.T) / 2).clone())

    @property
    def n_features(self):
        return self.V_param.shape[0]

    @property
    def V(self):
        """The symmetric matrix ``(V_param + V_paramᵀ)/2``."""
        return (self.V_param + self.V_param.T) / 2

    def preactivation(self, X):
        return F.preactivation(X, self.S())

    def S(self):
        """``V / √d``."""
        return F.direct_S(self.V)

    def penalty(self):
        """``‖V‖²_F``."""
        V = self.V
        return torch.sum(V * V)
