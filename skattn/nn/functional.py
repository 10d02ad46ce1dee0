"""Torch functional layer: pre-activations, attention maps and per-sample losses.

Conventions follow THEORY.md §1–2 exactly:

- pre-activation ``h_ab(S; x) = (x_aᵀ S x_b − δ_ab Tr S) / √d``;
- factored model ``S = W Wᵀ / √(p d)``, evaluated through ``X W`` so that no ``d×d``
  matrix (and no per-sample tensor larger than ``T×p``) is formed;
- attention ``σ_β(h)`` is a row-wise softmax at inverse temperature β, or the identity
  (linear attention);
- per-sample loss ``ℓ = Σ_ab (ŷ_ab − y_ab)²`` (seq2lab) or ``‖ŷ − y‖²_F / d`` (seq2seq).

:mod:`skattn.data.teacher` is the numpy twin of ``preactivation``, ``softmax``,
``attention_map`` and ``attention_output``: same names, signatures, operation order and
errors, so the teacher and the models compute one forward model.
"""

from __future__ import annotations

import math

import torch

from .._validation import check_choice
from ..data.teacher import ATTENTIONS, TASKS

__all__ = [
    "preactivation",
    "preactivation_factored",
    "softmax",
    "attention_map",
    "attention_output",
    "per_sample_loss",
    "factored_S",
    "direct_S",
]

def preactivation(X, S):
    """Trace-centred pre-activation from a symmetric matrix S.

    Parameters
    ----------
    X : Tensor of shape (..., n_tokens, n_features)
    S : Tensor of shape (n_features, n_features), symmetric

    Returns
    -------
    h : Tensor of shape (..., n_tokens, n_tokens)
        ``(x_aᵀ S x_b − δ_ab Tr S) / √d``.
    """
    d = X.shape[-1]
    T = X.shape[-2]
    h = (X @ S) @ X.transpose(-1, -2)
    eye = torch.eye(T, dtype=h.dtype, device=h.device)
    return (h - torch.trace(S) * eye) / math.sqrt(d)


def preactivation_factored(X, W):
    """Pre-activation of the factored model ``S = W Wᵀ / √(p d)`` without forming S.

    With ``Z = X W`` (shape ``(n, T, p)``) and ``Tr S = ‖W‖²_F / √(p d)``,
    ``h = (Z Zᵀ − δ_ab ‖W‖²_F) / (√(p d) · √d)``.

    Parameters
    ----------
    X : Tensor of shape (n_samples, n_tokens, n_features)
    W : Tensor of shape (n_features, width)

    Returns
    -------
    h : Tensor of shape (n_samples, n_tokens, n_tokens)
    """
    d, p = W.shape
    T = X.shape[-2]
    Z = X @ W
    h = Z @ Z.transpose(-1, -2)
    eye = torch.eye(T, dtype=h.dtype, device=h.device)
    return (h - torch.sum(W * W) * eye) / (math.sqrt(p * d) * math.sqrt(d))


def softmax(z, beta=1.0):
    """Row-wise softmax ``σ_β(z)_ab = exp(β z_ab) / Σ_c exp(β z_ac)`` (log-sum-exp stable).

    ``torch.softmax`` subtracts the row maximum, so large ``β z`` is safe.
    """
    return torch.softmax(beta * z, dim=-1)


def attention_map(h, beta=1.0, attention="softmax"):
    """Row-wise ``σ_β(h)``: softmax at inverse temperature β, or the identity.

    Parameters
    ----------
    h : Tensor of shape (..., n_tokens, n_tokens)
    beta : float, default=1.0
    attention : {"softmax", "linear"}, default="softmax"

    Returns
    -------
    A : Tensor of the same shape as ``h``
    """
    check_choice(attention, "attention", ATTENTIONS)
    return softmax(h, beta) if attention == "softmax" else h


def attention_output(A, X, task):
    """The model output: the attention matrix (seq2lab) or ``A X`` (seq2seq).

    Parameters
    ----------
    A : Tensor of shape (..., n_tokens, n_tokens)
    X : Tensor of shape (..., n_tokens, n_features)
    task : {"seq2lab", "seq2seq"}

    Returns
    -------
    y_pred : Tensor of shape (..., n_tokens, n_tokens or n_features)
    """
    check_choice(task, "task", TASKS)
    return A if task == "seq2lab" else A @ X


def per_sample_loss(y_pred, y, task):
    """Per-sample square loss of THEORY.md §2.

    Parameters
    ----------
    y_pred, y : Tensor of shape (n_samples, n_tokens, k)
    task : {"seq2lab", "seq2seq"}
        seq2lab: ``Σ_ab (ŷ_ab − y_ab)²``; seq2seq: ``‖ŷ − y‖²_F / d`` with ``d = k``.

    Returns
    -------
    loss : Tensor of shape (n_samples,)
    """
    check_choice(task, "task", TASKS)
    sq = torch.sum((y_pred - y) ** 2, dim=(-2, -1))
    return sq if task == "seq2lab" else sq / y.shape[-1]


def factored_S(W):
    """``S = W Wᵀ / √(p d)`` for ``W`` of shape ``(d, p)``."""
    d, p = W.shape
    return (W @ W.T) / math.sqrt(p * d)


def direct_S(V):
    """``S = V / √d`` for a symmetric ``V`` of shape ``(d, d)``."""
    return V / math.sqrt(V.shape[0])
