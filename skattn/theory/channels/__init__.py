"""Output channels of the state evolution (docs: Theory §3–4), reusable by AMP on data (§9).

A sample enters the theory only through the ``K = T(T+1)/2`` normalised components
``u_k = h_ab / √(1 + δ_ab)`` (a ≤ b) of its symmetric pre-activation
(:mod:`skattn.theory.coords`, re-exported here). This package holds

* the channels :class:`SoftmaxChannel` (:mod:`.softmax`) and :class:`LinearChannel`
  (:mod:`.linear`), on a common base (:mod:`.base`): student attention, teacher labels,
  the per-sample square loss ``ℓ(y, z) = Σ_ab (σ(h(z))_ab − y_ab)²`` with its analytic
  gradient and Hessian in u-coordinates, and the proximal operator
  ``z* = argmin_z ‖z − ω‖²/(2Σ) + ℓ(y, z)`` (the *global* minimiser) with its Jacobians;
  the softmax prox solver lives in :mod:`.prox`;
* the same square loss with per-sample token weights ``Tr(R G Rᵀ)`` (the finite-d
  seq2seq loss) and its proximal map (:mod:`.weighted`);
* :class:`GaussianNodes`, :func:`output_side` (the conjugates ``m̂, q̂, Σ̂`` with the
  paper's factor 2, and the train error) and :func:`test_error` (:mod:`.output`).

Pure numpy/scipy.
"""

from __future__ import annotations

from ..coords import h_from_u, pair_indices, u_from_h
from .linear import LinearChannel
from .output import (GaussianNodes, OutputSide, output_side, remembered_minimisers,
                     seed_minimisers, test_error)
from .softmax import SoftmaxChannel

__all__ = [
    "pair_indices",
    "h_from_u",
    "u_from_h",
    "SoftmaxChannel",
    "LinearChannel",
    "channel_for",
    "GaussianNodes",
    "OutputSide",
    "output_side",
    "test_error",
    "remembered_minimisers",
    "seed_minimisers",
]


def channel_for(attention, n_tokens, beta=1.0, target_beta=1.0):
    """Channel factory.

    Parameters
    ----------
    attention : {"softmax", "linear"}
    n_tokens : int
    beta, target_beta : float
        Inverse temperatures (ignored for linear attention).

    Returns
    -------
    channel : SoftmaxChannel or LinearChannel
    """
    if attention == "softmax":
        return SoftmaxChannel(n_tokens, beta=beta, target_beta=target_beta)
    if attention == "linear":
        return LinearChannel(n_tokens)
    raise ValueError(f"attention must be one of ['linear', 'softmax'], got {attention!r}.")
