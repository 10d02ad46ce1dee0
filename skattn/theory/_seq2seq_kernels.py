"""Compiled (numba) prox of the exact-Gram softmax channel (:mod:`.seq2seq_softmax`).

Per node, ``argmin_x ‖x‖²/(2Σ) + Tr(R G Rᵀ)`` with ``R = softmax(β h(z)) − y`` and
``z = base + M_B (ω + x)`` over the full bulk (K-dim x): the same damped modified Newton as
the numpy path (:func:`.channels.prox._newton` on ``_BulkProblem``): the direction
``−|H|⁻¹g`` (Cholesky where H is positive definite, else eigenvalue-modified; the
channels' compiled :func:`~.channels._kernels._dirT`), the step cap, Armijo backtracking
with quadratic interpolation and the same stopping rules, from each start, keeping the best
end point (the first on ties, as ``np.argmin``). One node at a time in compiled code
removes numpy's per-iteration overhead on (N, K, K) batches, which was most of an
exact-Gram evaluation. ``HAVE_NUMBA`` False: the caller keeps the numpy path.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .channels._kernels import (HAVE_NUMBA, _dirT, _jit, _jit_parallel, _prange,
                                backtrack_step, capped_newton_step, cholesky_direction,
                                softmax_inplace, use_parallel)

__all__ = ["HAVE_NUMBA", "bulk_prox", "output_sums", "use_parallel"]


@_jit
def _bulk_val(x, omega, base, MB, y, G, s, index, scale, beta, z, A, r):
    """The prox objective at x (scratch z: K, A and r: T)."""
    K, T = x.shape[0], y.shape[0]
    for k in range(K):
        acc = base[k]
        for j in range(K):
            acc += MB[k, j] * (omega[j] + x[j])
        z[k] = acc
    loss = 0.0
    for a in range(T):
        for c in range(T):
            A[c] = beta * z[index[a, c]] * scale[a, c]
        softmax_inplace(A)
        for c in range(T):
            r[c] = A[c] - y[a, c]
        for c in range(T):
            rg = 0.0
            for e in range(T):
                rg += G[c, e] * r[e]
            loss += r[c] * rg
    xx = 0.0
    for k in range(K):
        xx += x[k] * x[k]
    return xx / (2 * s) + loss


@_jit
def _bulk_grad_hess(x, omega, base, MB, y, G, s, index, scale, beta, ws, g, H):
    """Gradient g and Hessian H in x (written in place): ``x/Σ + M_Bᵀ ∇ℓ`` and
    ``I/Σ + M_Bᵀ ∇²ℓ M_B``, with the row Hessians ``2β²[J G J + diag(Aρ̃) − (Aρ̃)Aᵀ −
    A(Aρ̃)ᵀ]``, ``ρ̃ = G r − (Aᵀ G r)1`` (:func:`~.channels.weighted._derivs`);
    ``(J G J)_ce = A_c A_e (G_ce − (GA)_c − (GA)_e + AᵀGA)`` for ``J = diag(A) − AAᵀ``.
    ``ws``: the scratch of :func:`_workspace`."""
    K, T = x.shape[0], y.shape[0]
    z, gl, Hu, HM = ws.z, ws.gl, ws.Hu, ws.HM
    A, rG, GA, arho = ws.A, ws.rG, ws.GA, ws.arho
    for k in range(K):
        acc = base[k]
        for j in range(K):
            acc += MB[k, j] * (omega[j] + x[j])
        z[k] = acc
        gl[k] = 0.0
        for j in range(K):
            Hu[k, j] = 0.0
    b2 = 2 * beta * beta
    for a in range(T):
        for c in range(T):
            A[c] = beta * z[index[a, c]] * scale[a, c]
        softmax_inplace(A)
        for c in range(T):
            rg, ga = 0.0, 0.0
            for e in range(T):
                rg += G[c, e] * (A[e] - y[a, e])
                ga += G[c, e] * A[e]
            rG[c], GA[c] = rg, ga
        sbar, aga = 0.0, 0.0
        for c in range(T):
            sbar += rG[c] * A[c]
            aga += A[c] * GA[c]
        for c in range(T):
            arho[c] = A[c] * (rG[c] - sbar)
            gl[index[a, c]] += 2 * beta * arho[c] * scale[a, c]
        for c in range(T):
            kc = index[a, c]
            for e in range(T):
                hv = A[c] * A[e] * (G[c, e] - GA[c] - GA[e] + aga) \
                    - arho[c] * A[e] - A[c] * arho[e]
                if c == e:
                    hv += arho[c]
                Hu[kc, index[a, e]] += b2 * hv * scale[a, c] * scale[a, e]
    for k in range(K):
        acc = x[k] / s
        for j in range(K):
            acc += MB[j, k] * gl[j]
        g[k] = acc
    for i in range(K):                           # ∇²ℓ M_B
        for j in range(K):
            acc = 0.0
            for l in range(K):
                acc += Hu[i, l] * MB[l, j]
            HM[i, j] = acc
    for i in range(K):
        for j in range(i, K):
            acc = 0.0
            for l in range(K):
                acc += MB[l, i] * HM[l, j]
            H[i, j] = acc
            H[j, i] = acc
        H[i, i] += 1.0 / s


@_jit
def _direction(g, H, L, w, p):
    """``p = −H⁻¹g`` by Cholesky where H is positive definite
    (:func:`~.channels._kernels.cholesky_direction`), else ``_dirT``'s
    eigenvalue-modified ``−|H|⁻¹g``."""
    if not cholesky_direction(H, g, L, w, p):
        q = _dirT(g, H)
        for i in range(g.shape[0]):
            p[i] = q[i]


#: scratch arrays of one node's Newton runs (a namedtuple: numba passes it as a tuple)
_Workspace = namedtuple("_Workspace", "z A r rG GA arho gl Hu HM H g p L w xt")


@_jit
def _workspace(K, T):
    return _Workspace(np.empty(K), np.empty(T), np.empty(T), np.empty(T), np.empty(T),
                      np.empty(T), np.empty(K), np.empty((K, K)), np.empty((K, K)),
                      np.empty((K, K)), np.empty(K), np.empty(K), np.zeros((K, K)),
                      np.empty(K), np.empty(K))


@_jit
def _bulk_newton(x, omega, base, MB, y, G, s, index, scale, beta, radius, max_iter, ws):
    """:func:`.channels.prox._newton` for one problem (the same steps and stopping rules),
    in place on x; returns the objective at the end point."""
    K = x.shape[0]
    z, A, r, g, H, p, xt = ws.z, ws.A, ws.r, ws.g, ws.H, ws.p, ws.xt
    f = _bulk_val(x, omega, base, MB, y, G, s, index, scale, beta, z, A, r)
    for _ in range(max_iter):
        _bulk_grad_hess(x, omega, base, MB, y, G, s, index, scale, beta, ws, g, H)
        _direction(g, H, ws.L, ws.w, p)
        pn, slope, xnorm, noise, resolved, small = capped_newton_step(x, g, p, K, f, radius)
        if slope < 0 and not resolved and not small:
            for k in range(K):
                xt[k] = x[k] + p[k]
            ft = _bulk_val(xt, omega, base, MB, y, G, s, index, scale, beta, z, A, r)
            if ft <= f + noise:
                x[:] = xt
                f = ft
        if small or not resolved:
            break
        t, accepted = 1.0, False
        for _ in range(30):
            for k in range(K):
                xt[k] = x[k] + t * p[k]
            ft = _bulk_val(xt, omega, base, MB, y, G, s, index, scale, beta, z, A, r)
            if ft <= f + 1e-4 * t * slope and math.isfinite(ft):
                x[:] = xt
                f, accepted = ft, True
                break
            t = backtrack_step(ft, f, slope, t)
        if not accepted or t * pn <= 1e-11 * xnorm:
            break
    return f


#: nodes per chunk of the node loop: each chunk allocates its scratch once
_CHUNK = 256


def _bulk_prox_py(x0, omega, base, MB, y, G, sigma, index, scale, beta, radius, max_iter):
    N, S, K = x0.shape
    T = y.shape[1]
    xb = np.empty((N, K))
    fb = np.empty(N)
    n_chunks = (N + _CHUNK - 1) // _CHUNK
    for c in _prange(n_chunks):
        ws = _workspace(K, T)
        x = np.empty(K)
        for n in range(c * _CHUNK, min(N, (c + 1) * _CHUNK)):
            best_f = math.inf
            for j in range(S):
                x[:] = x0[n, j]
                f = _bulk_newton(x, omega[n], base[n], MB[n], y[n], G[n], sigma, index,
                                 scale, beta, radius, max_iter, ws)
                if j == 0 or f < best_f:
                    best_f = f
                    xb[n] = x
            fb[n] = best_f
    return xb, fb


_bulk_prox_serial = _jit(_bulk_prox_py)
_bulk_prox_parallel = _jit_parallel(_bulk_prox_py)


def bulk_prox(x0, omega, base, MB, y, G, sigma, index, scale, beta, radius, max_iter):
    """Best Newton end point per node over its starts.

    Parameters
    ----------
    x0 : ndarray of shape (N, S, K)
        The starts (offsets from ω).
    omega, base : ndarray of shape (N, K)
    MB : ndarray of shape (N, K, K)
    y, G : ndarray of shape (N, T, T)
        Labels and (symmetric) loss weights.
    sigma, beta, radius : float
    index, scale : ndarray of shape (T, T)
        The u ↦ h map of :func:`~skattn.theory.coords._maps`.
    max_iter : int

    Returns
    -------
    x : ndarray of shape (N, K)
        The best end point (offset from ω).
    f : ndarray of shape (N,)
        Its objective.
    """
    prox = _bulk_prox_parallel if use_parallel() else _bulk_prox_serial
    c = np.ascontiguousarray
    return prox(c(x0, dtype=float), c(omega, dtype=float), c(base, dtype=float),
                c(MB, dtype=float), c(y, dtype=float), c(G, dtype=float), float(sigma),
                c(index), c(scale, dtype=float), float(beta), float(radius), int(max_iter))


@_jit
def output_sums(v, omega, base, MB, y, G, a, b, phi, cov, L, index, scale, beta, beta0,
                sigma, weights):
    """The node averages of the softmax output side (:func:`.seq2seq_softmax._output`) in
    one pass: with ``z = base + M_B v``, ``R = softmax(βh(z)) − y``, ``g = (v − ω)/Σ``,
    ``∇_z ℓ`` and the labels' pull-back ``∂F/∂v0 = M_Bᵀ Lᵀ[β0 y ∘ (−2RG − ⟨−2RG, y⟩_row)]``,
    returns the weighted means of ``Tr(RGRᵀ)``, ``g·a``, ``∂F/∂v0·a``, ``∂F/∂v0·b``,
    ``∇_z ℓ·φ`` and ``gᵀ C g`` (C = ``cov``)."""
    N, K = v.shape
    T = y.shape[1]
    z = np.empty(K)
    g = np.empty(K)
    A = np.empty((T, T))
    RG = np.empty((T, T))
    grad = np.empty(K)
    dz0 = np.empty(K)
    out = np.zeros(6)
    for n in range(N):
        for k in range(K):
            acc = base[n, k]
            for j in range(K):
                acc += MB[n, k, j] * v[n, j]
            z[k] = acc
            g[k] = (v[n, k] - omega[n, k]) / sigma
            grad[k] = 0.0
            dz0[k] = 0.0
        loss = 0.0
        for r in range(T):
            for c in range(T):
                A[r, c] = beta * z[index[r, c]] * scale[r, c]
            softmax_inplace(A[r])
        for r in range(T):
            for c in range(T):
                acc = 0.0
                for e in range(T):
                    acc += (A[r, e] - y[n, r, e]) * G[n, e, c]
                RG[r, c] = acc
                loss += (A[r, c] - y[n, r, c]) * acc
        for r in range(T):
            sa, sy = 0.0, 0.0
            for e in range(T):
                sa += RG[r, e] * A[r, e]
                sy += -2.0 * RG[r, e] * y[n, r, e]
            for c in range(T):
                gh = 2 * beta * A[r, c] * (RG[r, c] - sa)
                wv = beta0 * y[n, r, c] * (-2.0 * RG[r, c] - sy)
                row = r * T + c
                for k in range(K):
                    grad[k] += gh * L[row, k]
                    dz0[k] += wv * L[row, k]
        ga, fa, fb, tphi, qq = 0.0, 0.0, 0.0, 0.0, 0.0
        for k in range(K):
            dv0 = 0.0
            for l_ in range(K):
                dv0 += MB[n, l_, k] * dz0[l_]
            fa += dv0 * a[n, k]
            fb += dv0 * b[n, k]
            ga += g[k] * a[n, k]
            tphi += grad[k] * phi[n, k]
            cg = 0.0
            for l_ in range(K):
                cg += g[l_] * cov[l_, k]
            qq += cg * g[k]
        w = weights[n]
        out[0] += w * loss
        out[1] += w * ga
        out[2] += w * fa
        out[3] += w * fb
        out[4] += w * tphi
        out[5] += w * qq
    return out
