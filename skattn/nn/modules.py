"""Torch modules for tied, untied and multi-head attention (docs: Theory §2).

- :class:`FactoredAttention`: ``S = W Wᵀ / √(p d)``, penalty ``‖W‖²_F``;
- :class:`UntiedAttention`: ``S = W_Q W_Kᵀ / √(p d)``, penalty
  ``(‖W_Q‖²_F + ‖W_K‖²_F) / 2`` (equal to the tied one at ``W_Q = W_K``);
- :class:`DirectAttention`: ``S = V / √d`` with ``V`` symmetric, penalty ``‖V‖²_F``.

The factored modules take ``n_heads=H``: one factor per head (parameters of shape
``(H, d, p)``), the attention map is the mean of the heads' maps and the penalty the sum
of the heads' penalties; ``n_heads=1`` keeps the single-head parameters of shape
``(d, p)``.

Both expose ``forward(X)`` (the prediction), ``S()``, ``penalty()`` and
``objective(X, y, reg_lambda)`` = ``Σ_μ ℓ_μ + reg_lambda · penalty`` (a sum over samples,
the paper's normalisation).
"""

from __future__ import annotations

from numbers import Integral

import torch
from torch import nn

from . import functional as F

__all__ = ["FactoredAttention", "UntiedAttention", "DirectAttention"]


def _check_options(attention, task):
    if attention not in F.ATTENTIONS:
        raise ValueError(f"attention must be one of {list(F.ATTENTIONS)}, got {attention!r}.")
    if task not in F.TASKS:
        raise ValueError(f"task must be one of {list(F.TASKS)}, got {task!r}.")


def _check_n_heads(n_heads):
    if isinstance(n_heads, bool) or not isinstance(n_heads, Integral):
        raise TypeError(f"n_heads must be an int >= 1, got {type(n_heads).__name__} "
                        f"({n_heads!r}).")
    if n_heads < 1:
        raise ValueError(f"n_heads must be an int >= 1, got {n_heads}.")
    return int(n_heads)


def _factor(name, value, n_features, width, n_heads, init_scale, generator, dtype, device):
    """A factor parameter: ``value`` checked, or i.i.d. ``N(0, init_scale²)`` entries."""
    shape = (n_features, width) if n_heads == 1 else (n_heads, n_features, width)
    if value is None:
        # one draw for all heads: heads start distinct (identical heads stay identical)
        value = torch.randn(shape, generator=generator, dtype=dtype or
                            torch.get_default_dtype()) * init_scale
    value = torch.as_tensor(value, dtype=dtype).to(device=device)
    if tuple(value.shape) != shape:
        raise ValueError(f"{name} must have shape {shape} (n_heads={n_heads}), got "
                         f"{tuple(value.shape)}.")
    return nn.Parameter(value.clone())


class _AttentionBase(nn.Module):
    """Shared forward/objective; subclasses define ``preactivation``, ``S`` and ``penalty``."""

    def __init__(self, beta, attention, task):
        super().__init__()
        _check_options(attention, task)
        self.beta = float(beta)
        self.attention = attention
        self.task = task

    n_heads = 1

    def attention_matrix(self, X):
        """``σ_β(h(S; X))`` (mean over heads) of shape (n_samples, n_tokens, n_tokens)."""
        if self.n_heads > 1:
            return F.mean_attention_map(self.preactivation(X), self.beta, self.attention)
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
    """Factored (tied) attention, ``S = W Wᵀ / √(p d)``, one or several heads.

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
    W : array-like of shape (n_features, width) or (n_heads, n_features, width), optional
        Initial factor (the 3-D shape when ``n_heads > 1``). If None, i.i.d.
        ``N(0, init_scale²)`` entries (a zero W is a stationary point of the objective,
        so it is never the default).
    init_scale : float, default=1.0
        Standard deviation of the random initial entries; with 1.0 the spectrum of S is
        of order one.
    n_heads : int, default=1
        Number of heads H; the attention map is ``(1/H) Σ_k σ_β(h(S_k; x))`` and the
        penalty ``Σ_k ‖W_k‖²_F``.
    generator : torch.Generator, optional
    dtype, device : torch dtype and device, optional

    Attributes
    ----------
    W : torch.nn.Parameter of shape (n_features, width) or (n_heads, n_features, width)
    """

    def __init__(self, n_features, width, *, beta=1.0, attention="softmax", task="seq2lab",
                 W=None, init_scale=1.0, n_heads=1, generator=None, dtype=None, device=None):
        super().__init__(beta, attention, task)
        self.n_heads = _check_n_heads(n_heads)
        self.W = _factor("W", W, n_features, width, self.n_heads, init_scale, generator,
                         dtype, device)

    @property
    def n_features(self):
        return self.W.shape[-2]

    @property
    def width(self):
        return self.W.shape[-1]

    def preactivation(self, X):
        """``h(S; X)`` through ``X W`` (no d×d matrix formed); a head axis when H > 1."""
        return F.preactivation_factored(X, self.W)

    def S(self):
        """``W Wᵀ / √(p d)``, of shape (d, d) or (H, d, d)."""
        return F.factored_S(self.W)

    def penalty(self):
        """``‖W‖²_F`` (summed over heads)."""
        return torch.sum(self.W * self.W)


class UntiedAttention(_AttentionBase):
    """Untied attention, ``S = W_Q W_Kᵀ / √(p d)``, one or several heads.

    The penalty ``(‖W_Q‖²_F + ‖W_K‖²_F) / 2`` equals the tied ``‖W‖²_F`` at
    ``W_Q = W_K = W``, so this module then has the objective of
    :class:`FactoredAttention`. Minimised over the factorisations of a fixed S it is
    ``√(p d) ‖S‖_*`` (nuclear norm, reached at ``W_Q = U √Σ``, ``W_K = V √Σ`` up to
    scale), which is the tied ``√(p d) Tr S`` whenever S is positive semi-definite.

    Parameters
    ----------
    n_features : int
        Token dimension d.
    width : int
        Width p of the factors.
    beta : float, default=1.0
    attention : {"softmax", "linear"}, default="softmax"
    task : {"seq2lab", "seq2seq"}, default="seq2lab"
    W_Q, W_K : array-like of shape (n_features, width) or (n_heads, n_features, width), \
            optional
        Initial query and key factors. If None, i.i.d. ``N(0, init_scale²)`` entries
        (``W_Q = W_K = 0`` is a saddle of the objective).
    init_scale : float, default=1.0
    n_heads : int, default=1
        Number of heads H (attention maps averaged, penalties summed).
    generator : torch.Generator, optional
    dtype, device : torch dtype and device, optional

    Attributes
    ----------
    W_Q, W_K : torch.nn.Parameter of shape (n_features, width) or \
            (n_heads, n_features, width)
    """

    def __init__(self, n_features, width, *, beta=1.0, attention="softmax", task="seq2lab",
                 W_Q=None, W_K=None, init_scale=1.0, n_heads=1, generator=None, dtype=None,
                 device=None):
        super().__init__(beta, attention, task)
        self.n_heads = _check_n_heads(n_heads)
        args = (n_features, width, self.n_heads, init_scale, generator, dtype, device)
        self.W_Q = _factor("W_Q", W_Q, *args)
        self.W_K = _factor("W_K", W_K, *args)

    @property
    def n_features(self):
        return self.W_Q.shape[-2]

    @property
    def width(self):
        return self.W_Q.shape[-1]

    def preactivation(self, X):
        """``h(S; X)`` through ``X W_Q`` and ``X W_K`` (no d×d matrix formed)."""
        return F.preactivation_untied(X, self.W_Q, self.W_K)

    def S(self):
        """``W_Q W_Kᵀ / √(p d)``, of shape (d, d) or (H, d, d); not symmetric."""
        return F.untied_S(self.W_Q, self.W_K)

    def penalty(self):
        """``(‖W_Q‖²_F + ‖W_K‖²_F) / 2`` (summed over heads)."""
        return (torch.sum(self.W_Q * self.W_Q) + torch.sum(self.W_K * self.W_K)) / 2


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
