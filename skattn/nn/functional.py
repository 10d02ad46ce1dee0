"""Torch functional layer: pre-activations, attention maps and per-sample losses.

Conventions follow docs: Theory §1–2 exactly:

- pre-activation ``h_ab(S; x) = (x_aᵀ S x_b − δ_ab Tr S) / √d``;
- factored model ``S = W Wᵀ / √(p d)``, evaluated through ``X W`` so that no ``d×d``
  matrix (and no per-sample tensor larger than ``T×p``) is formed; the untied model
  ``S = W_Q W_Kᵀ / √(p d)`` likewise through ``X W_Q`` and ``X W_K`` (then h is not
  symmetric);
- multi-head models carry a head axis (H) just before the ``d×p`` factor axes, the
  pre-activations one just before the ``T×T`` axes, and the model's attention map is the
  mean over heads ``(1/H) Σ_k σ_β(h(S_k; x))`` (rows still sum to one);
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
    "preactivation_untied",
    "softmax",
    "attention_map",
    "mean_attention_map",
    "attention_output",
    "per_sample_loss",
    "factored_S",
    "untied_S",
    "direct_S",
]


def preactivation(X, S):
    """Trace-centred pre-activation from a matrix S (one per head when S is 3-D).

    Parameters
    ----------
    X : Tensor of shape (..., n_tokens, n_features)
    S : Tensor of shape (n_features, n_features) or (n_heads, n_features, n_features)
        Symmetric for tied attention; any square matrix for untied attention (then h is
        not symmetric).

    Returns
    -------
    h : Tensor of shape (..., n_tokens, n_tokens) or (..., n_heads, n_tokens, n_tokens)
        ``(x_aᵀ S x_b − δ_ab Tr S) / √d``.
    """
    d = X.shape[-1]
    T = X.shape[-2]
    if S.ndim == 3:
        # one pre-activation per head: the head axis goes just before the token axes
        X = X.unsqueeze(-3)
        trace = torch.diagonal(S, dim1=-2, dim2=-1).sum(-1)[:, None, None]
    else:
        trace = torch.trace(S)
    h = token_bilinear(X @ S, X)
    eye = torch.eye(T, dtype=h.dtype, device=h.device)
    return (h - trace * eye) / math.sqrt(d)


def _head_trace(W_Q, W_K):
    """``Tr(W_Q W_Kᵀ)`` per head, shaped to broadcast against ``(…, [H,] T, T)``."""
    if W_Q.ndim == 2:
        return torch.sum(W_Q * W_K)
    return torch.sum(W_Q * W_K, dim=(-2, -1))[:, None, None]


def _project(X, W):
    """``X W`` with a head axis inserted when W has one (shape (n, [H,] T, p))."""
    if W.ndim == 2:
        return X @ W
    # einsum, not the broadcast ``X.unsqueeze(-3) @ W``: the latter's backward builds one
    # d × p gradient per sample before summing them (~12× slower at d = p = 80)
    return torch.einsum("...td,hdp->...htp", X, W)


#: ``M Z`` for per-sample ``T × T`` matrices M is summed as T fused multiply-adds over
#: ``(n, T, p)`` slabs when T = 2 and p < 128: there CPU batched matmuls of 2 × p blocks
#: run 3–10× slower than the slabs (per-block overhead; measured n = 2048–8192); from
#: p = 128, or at T ≥ 3, the batched matmul is as fast or faster.
_SLAB_TOKENS = 2
_SLAB_WIDTH = 128


def _left_multiply(M, Z):
    """``M @ Z`` for ``M`` of shape (..., T, T) and ``Z`` of shape (..., T, p)."""
    T, p = Z.shape[-2:]
    if T > _SLAB_TOKENS or p >= _SLAB_WIDTH:
        return M @ Z
    out = M[..., :, 0, None] * Z[..., 0:1, :]
    for b in range(1, T):
        # in place: ``out`` is a fresh buffer no autograd node saved (one large allocation
        # and its page faults fewer per step)
        out.addcmul_(M[..., :, b, None], Z[..., b:b + 1, :])
    return out


class _CentredTokenGram(torch.autograd.Function):
    """``h = (Z Zᵀ − t I) · c`` over the last two axes, with a one-pass backward.

    Autograd of ``Z @ Z.transpose(-1, -2)`` runs two batched matmuls and adds a transposed
    (strided) gradient to a contiguous one; at T = 2 that backward alone took 70–95 % of a
    training step at d = 64–128 on CPU. Here ``∂/∂Z = c (dh + dhᵀ) Z`` (slab
    multiply-adds at small T) and ``∂/∂t = −c Σ_a dh_aa``; the trace shift and the scale
    are applied in place, which saves the identity matrix and four small autograd nodes
    per step. The backward is built from differentiable operations, so double backward
    works.
    """

    @staticmethod
    def forward(ctx, Z, trace, scale):
        h = Z @ Z.transpose(-1, -2)
        # trace: 0-d (one head) or (H, 1, 1); the diagonal view has shape (..., [H,] T)
        shift = trace if trace.ndim == 0 else trace[..., 0]
        torch.diagonal(h, dim1=-2, dim2=-1).sub_(shift)
        h.mul_(scale)
        ctx.save_for_backward(Z)
        ctx.scale = scale
        ctx.trace_shape = trace.shape
        return h

    @staticmethod
    def backward(ctx, dh):
        (Z,) = ctx.saved_tensors
        g = dh * ctx.scale
        dZ = _left_multiply(g + g.transpose(-1, -2), Z)
        diag = torch.diagonal(g, dim1=-2, dim2=-1)
        shape = ctx.trace_shape
        dtrace = -(diag.sum() if len(shape) == 0 else diag.sum_to_size(*shape[:-1]).reshape(shape))
        return dZ, dtrace, None


class _TokenBilinear(torch.autograd.Function):
    """``Q Kᵀ`` over the last two axes; backward ``dQ = dG K``, ``dK = dGᵀ Q`` as slab
    multiply-adds at small T (see :class:`_CentredTokenGram` for why)."""

    @staticmethod
    def forward(ctx, Q, K):
        ctx.save_for_backward(Q, K)
        return Q @ K.transpose(-1, -2)

    @staticmethod
    def backward(ctx, dG):
        Q, K = ctx.saved_tensors
        dQ = _left_multiply(dG, K) if ctx.needs_input_grad[0] else None
        dK = _left_multiply(dG.transpose(-1, -2), Q) if ctx.needs_input_grad[1] else None
        return dQ, dK


def token_bilinear(Q, K):
    """Per-sample ``Q Kᵀ`` over the token axis (shape (..., T, T)), broadcasting leading axes."""
    if Q.shape[:-2] != K.shape[:-2]:
        # expanded views; autograd of broadcast_tensors sums the gradients back
        Q, K = torch.broadcast_tensors(Q, K)
    return _TokenBilinear.apply(Q, K)


def token_gram(Z, trace=None, scale=1.0):
    """Per-sample ``(Z Zᵀ − trace · I) · scale`` over the token axis (shape (..., T, T)).

    ``trace`` is a 0-d tensor, or of shape (H, 1, 1) when Z has a head axis; None means 0.
    """
    if trace is None:
        trace = torch.zeros((), dtype=Z.dtype, device=Z.device)
    return _CentredTokenGram.apply(Z, trace, float(scale))


def preactivation_factored(X, W):
    """Pre-activation of the factored model ``S = W Wᵀ / √(p d)`` without forming S.

    With ``Z = X W`` (shape ``(n, T, p)``) and ``Tr S = ‖W‖²_F / √(p d)``,
    ``h = (Z Zᵀ − δ_ab ‖W‖²_F) / (√(p d) · √d)``.

    Parameters
    ----------
    X : Tensor of shape (n_samples, n_tokens, n_features)
    W : Tensor of shape (n_features, width) or (n_heads, n_features, width)

    Returns
    -------
    h : Tensor of shape (n_samples, n_tokens, n_tokens) or \
            (n_samples, n_heads, n_tokens, n_tokens)
    """
    d, p = W.shape[-2:]
    return token_gram(_project(X, W), _head_trace(W, W),
                      1.0 / (math.sqrt(p * d) * math.sqrt(d)))


def preactivation_untied(X, W_Q, W_K):
    """Pre-activation of the untied model ``S = W_Q W_Kᵀ / √(p d)`` without forming S.

    With ``Q = X W_Q``, ``K = X W_K`` and ``Tr S = Σ_ij (W_Q)_ij (W_K)_ij / √(p d)``,
    ``h = (Q Kᵀ − δ_ab Tr(W_Q W_Kᵀ)) / (√(p d) · √d)``; at ``W_Q = W_K`` this is
    :func:`preactivation_factored`.

    Parameters
    ----------
    X : Tensor of shape (n_samples, n_tokens, n_features)
    W_Q, W_K : Tensor of shape (n_features, width) or (n_heads, n_features, width)
        Query and key factors, of one shape.

    Returns
    -------
    h : Tensor of shape (n_samples, n_tokens, n_tokens) or \
            (n_samples, n_heads, n_tokens, n_tokens)
        Not symmetric in the token indices unless ``W_Q W_Kᵀ`` is.
    """
    if W_Q.shape != W_K.shape:
        raise ValueError(f"W_Q and W_K must have the same shape, got {tuple(W_Q.shape)} "
                         f"and {tuple(W_K.shape)}.")
    d, p = W_Q.shape[-2:]
    T = X.shape[-2]
    h = token_bilinear(_project(X, W_Q), _project(X, W_K))
    eye = torch.eye(T, dtype=h.dtype, device=h.device)
    return (h - _head_trace(W_Q, W_K) * eye) / (math.sqrt(p * d) * math.sqrt(d))


#: Rows up to this length go through :class:`_ShortRowSoftmax`: on CPU ``torch.softmax``
#: over a last axis of 2–4 entries runs 4–5× slower than the same arithmetic spelled out
#: (measured at n = 2048–8192, T = 2 and 4), and it was a fifth of a d = 64 training step.
_SHORT_ROW = 8


class _ShortRowSoftmax(torch.autograd.Function):
    """Row-wise ``softmax(β z)`` as exp / sum with the row maximum subtracted.

    Backward: ``∂/∂z = β A ⊙ (g − Σ_c g_c A_c)``, the softmax Jacobian-vector product
    (built from differentiable operations, so double backward works).
    """

    @staticmethod
    def forward(ctx, z, beta):
        bz = beta * z
        # subtracting the row maximum changes nothing mathematically and keeps exp finite
        e = torch.exp(bz - bz.amax(dim=-1, keepdim=True))
        A = e / e.sum(dim=-1, keepdim=True)
        ctx.save_for_backward(A)
        ctx.beta = beta
        return A

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        return ctx.beta * A * (g - torch.sum(g * A, dim=-1, keepdim=True)), None


def softmax(z, beta=1.0):
    """Row-wise softmax ``σ_β(z)_ab = exp(β z_ab) / Σ_c exp(β z_ac)`` (log-sum-exp stable).

    The row maximum is subtracted before the exponential (by ``torch.softmax``, or for
    short rows by the same arithmetic written out), so large ``β z`` is safe.
    """
    if z.shape[-1] <= _SHORT_ROW:
        return _ShortRowSoftmax.apply(z, float(beta))
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


def mean_attention_map(h, beta=1.0, attention="softmax"):
    """Multi-head attention map: the mean over heads of ``σ_β(h_k)``.

    Parameters
    ----------
    h : Tensor of shape (..., n_heads, n_tokens, n_tokens)
        One pre-activation per head (head axis just before the token axes).
    beta : float, default=1.0
    attention : {"softmax", "linear"}, default="softmax"

    Returns
    -------
    A : Tensor of shape (..., n_tokens, n_tokens)
        ``(1/H) Σ_k σ_β(h_k)``: a mean of row-stochastic matrices, so (for softmax) its
        rows still sum to one.
    """
    return attention_map(h, beta, attention).mean(dim=-3)


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
    """Per-sample square loss of docs: Theory §2.

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
    """``S = W Wᵀ / √(p d)`` for ``W`` of shape ``(d, p)`` (or ``(H, d, p)``: one per head)."""
    d, p = W.shape[-2:]
    return (W @ W.transpose(-1, -2)) / math.sqrt(p * d)


def untied_S(W_Q, W_K):
    """``S = W_Q W_Kᵀ / √(p d)`` for factors of shape ``(d, p)`` (or ``(H, d, p)``)."""
    d, p = W_Q.shape[-2:]
    return (W_Q @ W_K.transpose(-1, -2)) / math.sqrt(p * d)


def direct_S(V):
    """``S = V / √d`` for a symmetric ``V`` of shape ``(d, d)``."""
    return V / math.sqrt(V.shape[0])
