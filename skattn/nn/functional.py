"""Torch functional layer: pre-activations, attention maps and per-sample losses.

Conventions follow THEORY.md §1–2 exactly:

- pre-activation ``h_ab(S; x) = (x_aᵀ S x_b − δ_ab Tr S) / √d``;
- factored model ``S = W Wᵀ / √(p d)``, evaluated through ``X W`` so that no ``d×d``
  matrix (and no per-sample tensor larger than ``T×p``) is formed;
- attention ``σ_β(h)`` is a row-wise softmax at inverse temperature β, or the identity
  (linear attention);
- per-sample loss ``ℓ = Σ_ab (ŷ_ab − y_ab)²`` (seq2lab) or ``‖ŷ − y‖²_F / d`` (seq2seq).
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "preactivation",
    "preactivation_factored",
    "attention_map",
    "attention_output",
    "per_sample_loss",
    "factored_S",
    "direct_S",
]

ATTENTIONS = ("softmax", "linear")
TASKS = ("seq2lab", "seq2seq")


def preactivation(X, S):
    """Trace-centred pre-activation from a symmetric matrix S.

    Parameters
    ----------
    X : Tensor of shape (n_samples, n_tokens, n_features)
    S : Tensor of shape (n_features, n_features), symmetric

    Returns
    -------
    h : Tensor of shape (n_samples, n_tokens, n_tokens)
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


def attention_map(h, beta=1.0, attention="softmax"):
    """Row-wise ``σ_β(h)``: softmax at inverse temperature β, or the identity.

    ``torch.softmax`` subtracts the row maximum (log-sum-exp), so large ``β h`` is safe.

    Parameters
    ----------
    h : Tensor of shape (..., n_tokens, n_tokens)
    beta : float, default=1.0
    attention : {"softmax", "linear"}, default="softmax"

    Returns
    -------
    A : Tensor of the same shape as ``h``
    """
    if attention == "softmax":
        return torch.softmax(beta * h, dim=-1)
    if attention == "linear":
        return h
    raise ValueError(f"attention must be one of {list(ATTENTIONS)}, got {attention!r}.")


def attention_output(A, X, task):
    """The model output: the attention matrix (seq2lab) or ``A X`` (seq2seq).

    Parameters
    ----------
    A : Tensor of shape (n_samples, n_tokens, n_tokens)
    X : Tensor of shape (n_samples, n_tokens, n_features)
    task : {"seq2lab", "seq2seq"}

    Returns
    -------
    y_pred : Tensor of shape (n_samples, n_tokens, n_tokens or n_features)
    """
    if task == "seq2lab":
        return A
    if task == "seq2seq":
        return A @ X
    raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}.")


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
    sq = torch.sum((y_pred - y) ** 2, dim=(-2, -1))
    if task == "seq2lab":
        return sq
    if task == "seq2seq":
        return sq / y.shape[-1]
    raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}.")


def factored_S(W):
    """``S = W Wᵀ / √(p d)`` for ``W`` of shape ``(d, p)``."""
    d, p = W.shape
    return (W @ W.T) / math.sqrt(p * d)


def direct_S(V):
    """``S = V / √d`` for a symmetric ``V`` of shape ``(d, d)``."""
    return V / math.sqrt(V.shape[0])
