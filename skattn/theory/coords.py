"""Coordinate maps between a symmetric pre-activation and its u-vector (docs: Theory §3).

A sample enters the theory only through the ``K = T(T+1)/2`` normalised components
``u_k = h_ab / √(1 + δ_ab)`` (a ≤ b) of its symmetric ``T × T`` pre-activation ``h``:
:func:`pair_indices` fixes their order, :func:`h_from_u` and :func:`u_from_h` map between
the two. Pure numpy.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .._validation import check_scalar_range

__all__ = ["pair_indices", "h_from_u", "u_from_h"]


@lru_cache(maxsize=None)
def _pairs(T):
    diag = [(a, a) for a in range(T)]
    off = [(a, b) for a in range(T) for b in range(a + 1, T)]
    return tuple(diag + off)


def pair_indices(T):
    """Index pairs ``(a, b)``, ``a ≤ b``, in the order of the u-coordinates.

    The diagonal pairs come first, then the off-diagonal pairs ``a < b`` in row-major order;
    for ``T = 2``: ``(0, 0), (1, 1), (0, 1)``, i.e. ``(u11, u22, u12)``.

    Parameters
    ----------
    T : int
        Number of tokens (≥ 1).

    Returns
    -------
    pairs : list of tuple of int
        ``K = T(T+1)/2`` pairs.
    """
    T = check_scalar_range(T, "n_tokens", low=1, integer=True)
    return list(_pairs(T))


@lru_cache(maxsize=None)
def _maps(T):
    """Index map, scale and the linear map L: u ↦ vec(h) (shape (T², K)) for T tokens."""
    pairs = _pairs(T)
    K = len(pairs)
    index = np.empty((T, T), dtype=np.intp)
    scale = np.empty((T, T))
    L = np.zeros((T * T, K))
    for k, (a, b) in enumerate(pairs):
        c = np.sqrt(2.0) if a == b else 1.0
        for (i, j) in {(a, b), (b, a)}:
            index[i, j] = k
            scale[i, j] = c
            L[i * T + j, k] = c
    inv_scale = np.array([1 / np.sqrt(2.0) if a == b else 1.0 for (a, b) in pairs])
    rows = np.array([a for (a, b) in pairs], dtype=np.intp)
    cols = np.array([b for (a, b) in pairs], dtype=np.intp)
    for arr in (index, scale, L, inv_scale, rows, cols):
        arr.setflags(write=False)
    return index, scale, L, inv_scale, rows, cols


def _n_tokens_from_K(K):
    T = int(round((np.sqrt(8 * K + 1) - 1) / 2))
    if T * (T + 1) // 2 != K or T < 1:
        raise ValueError(f"the last axis of u must have length T(T+1)/2, got {K}.")
    return T


def h_from_u(u, T=None):
    """Symmetric pre-activation ``h_ab = √(1 + δ_ab) u_k`` from the u-coordinates.

    Parameters
    ----------
    u : array_like of shape (..., K)
        ``K = T(T+1)/2`` components ordered as in :func:`pair_indices`.
    T : int, optional
        Number of tokens; inferred from ``K`` when omitted.

    Returns
    -------
    h : ndarray of shape (..., T, T), symmetric in its last two axes
    """
    u = np.asarray(u, dtype=float)
    if T is None:
        T = _n_tokens_from_K(u.shape[-1])
    index, scale, *_ = _maps(T)
    if u.shape[-1] != len(_pairs(T)):
        raise ValueError(f"u must have T(T+1)/2 = {len(_pairs(T))} components for "
                         f"n_tokens={T}, got {u.shape[-1]}.")
    return u[..., index] * scale


def u_from_h(h):
    """u-coordinates ``u_k = h_ab / √(1 + δ_ab)`` of the symmetric part of ``h``.

    Parameters
    ----------
    h : array_like of shape (..., T, T)

    Returns
    -------
    u : ndarray of shape (..., K), the inverse of :func:`h_from_u` on symmetric matrices
    """
    h = np.asarray(h, dtype=float)
    if h.ndim < 2 or h.shape[-1] != h.shape[-2]:
        raise ValueError(f"h must have shape (..., T, T), got {h.shape}.")
    T = h.shape[-1]
    _, _, _, inv_scale, rows, cols = _maps(T)
    hs = 0.5 * (h + np.swapaxes(h, -1, -2))
    return hs[..., rows, cols] * inv_scale
