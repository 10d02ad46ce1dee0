"""Compiled (numba) per-sample kernels of the softmax prox of :mod:`.prox`.

The same algorithm as the vectorised numpy path (:func:`.prox._newton` with the starts of
:meth:`.softmax.SoftmaxChannel._prox`): damped modified Newton, the eigenvalue-modified
direction ``−|H|⁻¹g``, a step cap, Armijo backtracking with quadratic interpolation and the
same stopping rules, and for T = 2 the same 2-D grid start. One sample at a time in compiled
code removes the per-iteration overhead of numpy on (N, K, K) batches, which dominated the
state evolution. The T ≥ 3 Newton run itself is in :mod:`._prox_newton` (on its caller's
workspace). The drivers over all samples, with the certificate that the minimiser is
global, are in :mod:`._certify` (T = 2) and :mod:`._proxT` (T ≥ 3). ``HAVE_NUMBA`` is
False where numba is missing; the callers then use numpy.
"""

from __future__ import annotations

import math
import types

import numpy as np

try:  # numba is a declared dependency; the numpy path stays as a fallback
    import numba
    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

if HAVE_NUMBA:
    _jit = numba.njit(cache=True, nogil=True, error_model="numpy")  # x/0 → inf, as numpy
    # loops over independent samples, threaded (numba.set_num_threads / NUMBA_NUM_THREADS)
    _jit_parallel = numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
    # compiled into each caller (numba's own inlining): see hold_references
    _jit_inline = numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
    _prange = numba.prange
else:  # pragma: no cover
    def _jit(f):
        return f
    _jit_parallel = _jit
    _jit_inline = _jit
    _prange = range


@_jit
def hold_references(*arrays):
    """Nothing: a compiled function calls it at its one return with its arrays, so that
    each of them lives to that return.

    numba takes a reference to every array a compiled function is passed (an atomic
    increment) and drops it where the array is last used; its pruning pass removes the
    pair only where the function makes no call that stays a call (a call's error path
    returns without dropping it) and every path drops the array at one place. Otherwise
    each call pays two atomic operations per array: in the certificate's tests, which
    run once per combination of intervals, that was a third of the search's time (docs:
    Changelog, "References")."""


def parallel_twin(f):
    """``_jit_parallel`` of a renamed copy of ``f`` (qualname ``<name>_parallel``).

    numba's on-disk cache is keyed by the function's qualified name and bytecode, not by
    its options (numba issue 6845): ``_jit(f)`` and ``_jit_parallel(f)`` of the same ``f``
    share one cache entry, so the "serial" driver ran the threaded code, or the reverse,
    depending on which was compiled first. A copy under another name has its own entry.
    """
    name = f.__name__ + "_parallel"
    code = f.__code__.replace(co_name=name)
    if hasattr(code, "co_qualname"):                    # Python ≥ 3.11
        code = code.replace(co_qualname=f.__qualname__ + "_parallel")
    g = types.FunctionType(code, f.__globals__, name, f.__defaults__, f.__closure__)
    g.__qualname__, g.__doc__, g.__module__ = f.__qualname__ + "_parallel", f.__doc__, \
        f.__module__
    return _jit_parallel(g)


def use_parallel():
    """Whether the sample loops should run threaded: numba present and more than one
    numba thread allowed here (joblib workers are capped to one by
    :mod:`skattn.parallel`)."""
    return HAVE_NUMBA and numba.get_num_threads() > 1


def thread_count():
    """numba's thread count here (1 without numba): the threads of the loops over samples
    that run outside numba's own (:mod:`._certify_split`)."""
    return numba.get_num_threads() if HAVE_NUMBA else 1


@_jit
def _expit(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@_jit
def _expit_pair(x):
    """``(_expit(x), _expit(−x))`` from one exponential (the same values, bit for bit)."""
    e = math.exp(-abs(x))
    if x >= 0:
        return 1.0 / (1.0 + e), e / (1.0 + e)
    return e / (1.0 + e), 1.0 / (1.0 + e)


# ---------------------------------------------------------------------------------- T = 2
@_jit
def _val2(x0, x1, a0, p, r, s, D, beta):
    f = (x0 * x0 + x1 * x1) / (2 * s)
    for i in range(2):
        ba = beta * (a0[i] + D[i, 0] * x0 + D[i, 1] * x1)
        s1, s0 = _expit_pair(ba)
        f += (s1 - p[i]) ** 2 + (s0 - r[i]) ** 2
    return f


@_jit
def _dir2(x0, x1, a0, p, r, s, D, beta):
    """Gradient and modified-Newton direction of the T = 2 objective in x."""
    g0, g1 = x0 / s, x1 / s
    h00 = h11 = 1.0 / s
    h01 = 0.0
    for i in range(2):
        ba = beta * (a0[i] + D[i, 0] * x0 + D[i, 1] * x1)
        s1, s0 = _expit_pair(ba)
        e = 2 * (s1 - p[i]) - 2 * (s0 - r[i])
        d1 = beta * s1 * s0
        la = e * d1
        laa = 4 * d1 * d1 + e * beta * d1 * (s0 - s1)
        g0 += la * D[i, 0]
        g1 += la * D[i, 1]
        h00 += laa * D[i, 0] * D[i, 0]
        h11 += laa * D[i, 1] * D[i, 1]
        h01 += laa * D[i, 0] * D[i, 1]
    det = h00 * h11 - h01 * h01
    if h00 > 0 and det > 1e-12 * max(h00, h11) ** 2:
        # positive definite, well conditioned (|H| = H): the Newton step directly
        return g0, g1, -(h11 * g0 - h01 * g1) / det, -(h00 * g1 - h01 * g0) / det
    theta = 0.5 * math.atan2(2 * h01, h00 - h11)
    cs, sn = math.cos(theta), math.sin(theta)
    l1 = abs(h00 * cs * cs + 2 * h01 * sn * cs + h11 * sn * sn)
    l2 = abs(h00 * sn * sn - 2 * h01 * sn * cs + h11 * cs * cs)
    floor = 1e-12 * max(l1, l2) + 1e-300
    c1 = (cs * g0 + sn * g1) / max(l1, floor)
    c2 = (-sn * g0 + cs * g1) / max(l2, floor)
    return g0, g1, -(cs * c1 - sn * c2), -(sn * c1 + cs * c2)


@_jit
def _newton2(x0, x1, a0, p, r, s, D, beta, radius, max_iter):
    f = _val2(x0, x1, a0, p, r, s, D, beta)
    for _ in range(max_iter):
        g0, g1, p0, p1 = _dir2(x0, x1, a0, p, r, s, D, beta)
        pn = math.sqrt(p0 * p0 + p1 * p1)
        if pn > radius:
            p0 *= radius / pn
            p1 *= radius / pn
            pn = radius
        slope = g0 * p0 + g1 * p1
        xnorm = math.sqrt(x0 * x0 + x1 * x1)
        noise = 4e-15 * (abs(f) + math.sqrt(abs(f)))
        resolved = slope < -noise
        small = pn <= 1e-12 * xnorm
        if slope < 0 and not resolved and not small:
            ft = _val2(x0 + p0, x1 + p1, a0, p, r, s, D, beta)
            if ft <= f + noise:
                x0, x1, f = x0 + p0, x1 + p1, ft
        if small or not resolved:
            break
        t, accepted = 1.0, False
        for _ in range(30):
            ft = _val2(x0 + t * p0, x1 + t * p1, a0, p, r, s, D, beta)
            if ft <= f + 1e-4 * t * slope and math.isfinite(ft):
                x0, x1, f, accepted = x0 + t * p0, x1 + t * p1, ft, True
                break
            t = backtrack_step(ft, f, slope, t)
        if not accepted or t * pn <= 1e-11 * xnorm:
            break
    return x0, x1, f


#: the grid's points uniform in sigmoid(β a): ``u_j = (j + ½)/12`` and ``logit(u_j)``
_GRID_U = (np.arange(12) + 0.5) / 12
_GRID_LOGIT = np.array([math.log(u / (1 - u)) for u in _GRID_U])


@_jit
def _grid2(a0, p, r, s, P, Dinv, beta, xf0, xf1, D):
    """Port of :meth:`.prox._Softmax2Problem.grid_starts` for one sample."""
    n_sigma, n_segment = 12, 8
    G = n_sigma + n_segment
    dfit = np.empty(2)
    dfit[0] = D[0, 0] * xf0 + D[0, 1] * xf1
    dfit[1] = D[1, 0] * xf0 + D[1, 1] * xf1
    d = np.empty((2, G))
    tab = np.empty((2, G))
    for i in range(2):
        for j in range(n_sigma):
            u = _GRID_U[j]
            d[i, j] = _GRID_LOGIT[j] / beta - a0[i]
            tab[i, j] = P[i, i] * d[i, j] ** 2 / (2 * s) + (u - p[i]) ** 2 \
                + (1 - u - r[i]) ** 2
        for j in range(n_segment):
            t = j / (n_segment - 1)
            ds = t * dfit[i]
            ba = beta * (a0[i] + ds)
            d[i, n_sigma + j] = ds
            s1, s0 = _expit_pair(ba)
            tab[i, n_sigma + j] = P[i, i] * ds ** 2 / (2 * s) + (s1 - p[i]) ** 2 \
                + (s0 - r[i]) ** 2
    cross = P[0, 1] / s
    cd1 = np.empty(G)
    for k1 in range(G):
        cd1[k1] = cross * d[1, k1]
    best_f, b0, b1 = math.inf, 0.0, 0.0
    for k0 in range(G):
        d0, t0 = d[0, k0], tab[0, k0]
        for k1 in range(G):
            F = d0 * cd1[k1] + t0 + tab[1, k1]
            if F < best_f:
                best_f, b0, b1 = F, d0, d[1, k1]
    for i in range(2):
        j = 1 - i
        bf, bi, bj = math.inf, 0.0, 0.0
        for k in range(G):
            dj = -(P[0, 1] / P[j, j]) * d[i, k]
            ba = beta * (a0[j] + dj)
            s1, s0 = _expit_pair(ba)
            F = (tab[i, k] + P[j, j] * dj ** 2 / (2 * s) + cross * d[i, k] * dj
                 + (s1 - p[j]) ** 2 + (s0 - r[j]) ** 2)
            if F < bf:
                bf, bi, bj = F, d[i, k], dj
        if bf < best_f:
            best_f = bf
            if i == 0:
                b0, b1 = bi, bj
            else:
                b1, b0 = bi, bj
    return Dinv[0, 0] * b0 + Dinv[0, 1] * b1, Dinv[1, 0] * b0 + Dinv[1, 1] * b1


# --------------------------------------------------------------------------- any T ≥ 2
@_jit
def backtrack_step(ft, f, slope, t):
    """The next Armijo trial step after a rejected step ``t`` (value ``ft`` against ``f``,
    directional slope ``slope`` < 0): the minimiser of the quadratic through them, kept in
    ``[0.1 t, 0.5 t]`` (0.1 t where ``ft`` is not finite)."""
    excess = ft - f - slope * t if math.isfinite(ft) else math.inf
    tq = -slope * t * t / (2 * excess)
    if tq != tq:
        tq = 0.0
    return min(max(tq, 0.1 * t), 0.5 * t)


@_jit_inline
def capped_newton_step(x, g, p, n, f, radius):
    """The step tests shared by the compiled damped Newton runs (:mod:`._prox_newton` and
    the exact-Gram bulk prox): cap the direction ``p[:n]`` at length ``radius`` in place,
    and return ``(|p|, gᵀp, |x|, noise, resolved, small)``, where ``noise`` is the rounding
    level of the objective value ``f``, ``resolved`` whether the slope ``gᵀp`` lies below
    it, and ``small`` whether the step is negligible against ``x``. Compiled into each
    caller, so that both take the same steps to the last bit."""
    pp, xx = 0.0, 0.0
    for j in range(n):
        pp += p[j] * p[j]
        xx += x[j] * x[j]
    pn, xnorm = math.sqrt(pp), math.sqrt(xx)
    if pn > radius:
        for j in range(n):
            p[j] *= radius / pn
        pn = radius
    slope = 0.0
    for j in range(n):
        slope += g[j] * p[j]
    noise = 4e-15 * (abs(f) + math.sqrt(abs(f)))
    return pn, slope, xnorm, noise, slope < -noise, pn <= 1e-12 * xnorm


@_jit_inline
def softmax_inplace(v):
    """Overwrite the logits ``v`` with their softmax (max-shifted, so no overflow); the one
    row softmax of the compiled T ≥ 3 kernels and certificate. Compiled into each caller:
    as a call, it made each caller take a reference to every array it holds
    (:func:`hold_references`)."""
    mx = -math.inf
    for c in range(v.shape[0]):
        mx = max(mx, v[c])
    tot = 0.0
    for c in range(v.shape[0]):
        v[c] = math.exp(v[c] - mx)
        tot += v[c]
    for c in range(v.shape[0]):
        v[c] /= tot


@_jit
def _loss_T(z, y, index, scale, beta):
    T = y.shape[0]
    out = 0.0
    h = np.empty(T)
    for a in range(T):
        for c in range(T):
            h[c] = beta * z[index[a, c]] * scale[a, c]
        softmax_inplace(h)
        for c in range(T):
            out += (h[c] - y[a, c]) ** 2
    return out


@_jit
def _gradhessT(x, omega, y, s, B, index, scale, beta):
    T, K = y.shape[0], omega.shape[0]
    z = omega + B @ x
    gl = np.zeros(K)
    Hu = np.zeros((K, K))
    A = np.empty(T)
    W = np.empty(T)
    for a in range(T):
        for c in range(T):
            A[c] = beta * z[index[a, c]] * scale[a, c]
        softmax_inplace(A)
        sbar, nA = 0.0, 0.0
        for c in range(T):
            sbar += (A[c] - y[a, c]) * A[c]
            nA += A[c] * A[c]
        for c in range(T):
            arho = A[c] * (A[c] - y[a, c] - sbar)
            gl[index[a, c]] += 2 * beta * arho * scale[a, c]
            W[c] = A[c] * A[c] + arho
        b2 = 2 * beta * beta
        for c in range(T):
            kc = index[a, c]
            for e in range(T):
                hv = (nA * A[c] - W[c]) * A[e] - A[c] * W[e]
                if c == e:
                    hv += W[c]
                Hu[kc, index[a, e]] += b2 * hv * scale[a, c] * scale[a, e]
    g = x / s + B.T @ gl
    H = B.T @ (Hu @ B)
    for i in range(H.shape[0]):
        H[i, i] += 1.0 / s
    return g, H


@_jit
def cholesky_lower(M, L, shift, tol):
    """The lower Cholesky factor of ``M − shift·I`` written into ``L`` (square, of M's
    shape; its upper triangle is not touched): False as soon as a pivot is not above
    ``tol`` (not positive definite by that margin)."""
    n = M.shape[0]
    for j in range(n):
        piv = M[j, j] - shift
        for k in range(j):
            piv -= L[j, k] * L[j, k]
        if not piv > tol:
            return False
        L[j, j] = math.sqrt(piv)
        for i in range(j + 1, n):
            v = M[i, j]
            for k in range(j):
                v -= L[i, k] * L[j, k]
            L[i, j] = v / L[j, j]
    return True


@_jit
def cholesky_direction(H, g, L, w, p):
    """``p = −H⁻¹g`` by Cholesky (``L``, ``w``: scratch) where H is positive definite,
    its pivots above 1e-12 of its largest diagonal entry; False (``p`` not written)
    where it is not. The positive definite case of every modified Newton direction here."""
    n = g.shape[0]
    tol = 0.0
    for i in range(n):
        tol = max(tol, abs(H[i, i]))
    tol *= 1e-12
    if not cholesky_lower(H, L, 0.0, tol):
        return False
    for j in range(n):
        v = g[j]
        for k in range(j):
            v -= L[j, k] * w[k]
        w[j] = v / L[j, j]
    for j in range(n - 1, -1, -1):
        v = w[j]
        for k in range(j + 1, n):
            v -= L[k, j] * p[k]
        p[j] = v / L[j, j]
    for j in range(n):
        p[j] = -p[j]
    return True


@_jit
def _dirT(g, H):
    """``−|H|⁻¹ g``: Cholesky where H is positive definite, else the eigen-modified solve."""
    n = g.shape[0]
    p = np.empty(n)
    if cholesky_direction(H, g, np.zeros((n, n)), np.empty(n), p):
        return p
    lam, V = np.linalg.eigh(H)
    lam = np.abs(lam)
    floor = 1e-12 * np.max(lam) + 1e-300
    c = (V.T @ g) / np.maximum(lam, floor)
    return -(V @ c)


# ------------------------------------------------------------------ output-side traces
@_jit
def _sym_eigvals(A):
    """Eigenvalues of a small symmetric matrix by cyclic Jacobi rotations (in place on A).

    Jacobi is the most accurate route for small symmetric matrices (each eigenvalue to a
    few ulps of ‖A‖, as LAPACK's); a closed form in the minors is not (module
    :mod:`.output`). Rotation formulas of Rutishauser (Numerical Recipes ``jacobi``).
    """
    n = A.shape[0]
    for _ in range(60):
        off, diag = 0.0, 0.0
        for p in range(n):
            diag += A[p, p] * A[p, p]
            for q in range(p + 1, n):
                off += A[p, q] * A[p, q]
        if off <= 1e-34 * diag or off == 0.0:
            break
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[p, q]
                if apq == 0.0:
                    continue
                theta = (A[q, q] - A[p, p]) / (2.0 * apq)
                if abs(theta) > 1e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                    if theta < 0:
                        t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                tau = s / (1.0 + c)
                A[p, p] -= t * apq
                A[q, q] += t * apq
                A[p, q] = A[q, p] = 0.0
                for r in range(n):
                    if r != p and r != q:
                        arp, arq = A[r, p], A[r, q]
                        A[r, p] = A[p, r] = arp - s * (arq + tau * arp)
                        A[r, q] = A[q, r] = arq + s * (arp - tau * arq)
    out = np.empty(n)
    for p in range(n):
        out[p] = A[p, p]
    return out


# serial: K ≤ 3 costs well under a µs a sample, and an OpenMP region here left its
# threads spinning against OpenBLAS's (the sampled prior side's eigvalsh): with two
# threads a linear T = 1 solve ran several times slower than with one (docs: Changelog)
@_jit
def trace_resolvent_complement(H, sigma):
    """``Σ_k Σλ_k / max(1 + Σλ_k, 1e-12)`` over the eigenvalues λ_k of each ``H[i]``
    (shape (N, K, K), symmetric): ``Tr(I − (I + ΣH)⁻¹)`` per sample."""
    N, K = H.shape[0], H.shape[1]
    out = np.empty(N)
    for i in range(N):
        A = np.empty((K, K))
        for a in range(K):
            for b in range(K):
                A[a, b] = H[i, a, b]
        lam = _sym_eigvals(A)
        tot = 0.0
        for k in range(K):
            tot += sigma * lam[k] / max(1.0 + sigma * lam[k], 1e-12)
        out[i] = tot
    return out


@_jit
def _hess_u(z, y, index, scale, beta, Hu, A, W, grad):
    """Loss and Hessian ``∇²_z ℓ`` (in u-coordinates, written to ``Hu``) of one sample,
    its gradient ``∇_z ℓ`` added to ``grad``; the same row terms as :func:`_gradhessT`
    (and :meth:`.softmax.SoftmaxChannel._row_terms`); ``A``, ``W``: scratch of length T."""
    T, K = y.shape[0], z.shape[0]
    for i in range(K):
        for j in range(K):
            Hu[i, j] = 0.0
    loss = 0.0
    b2 = 2 * beta * beta
    for a in range(T):
        for c in range(T):
            A[c] = beta * z[index[a, c]] * scale[a, c]
        softmax_inplace(A)
        sbar, nA = 0.0, 0.0
        for c in range(T):
            loss += (A[c] - y[a, c]) ** 2
            sbar += (A[c] - y[a, c]) * A[c]
            nA += A[c] * A[c]
        for c in range(T):
            W[c] = A[c] * A[c] + A[c] * (A[c] - y[a, c] - sbar)
            grad[index[a, c]] += 2 * beta * A[c] * (A[c] - y[a, c] - sbar) * scale[a, c]
        for c in range(T):
            kc = index[a, c]
            for e in range(T):
                hv = (nA * A[c] - W[c]) * A[e] - A[c] * W[e]
                if c == e:
                    hv += W[c]
                Hu[kc, index[a, e]] += b2 * hv * scale[a, c] * scale[a, e]
    return loss


@_jit
def _trace_by_cholesky(Hs, L, X, Y):
    """``Tr((I + Hs)⁻¹ Hs) = Tr(I − (I + Hs)⁻¹)`` for one symmetric ``Hs = ΣH`` through a
    Cholesky factorisation ``I + Hs = LLᵀ``: ``Tr(L⁻¹ Hs L⁻ᵀ)``, without the cancellation
    of ``K − Tr (I + Hs)⁻¹`` at small Σ. Returns ``nan`` where a pivot is below 1e-8 (the
    caller then takes the eigenvalues, which floor ``1 + Σλ`` at 1e-12)."""
    K = Hs.shape[0]
    for j in range(K):
        piv = 1.0 + Hs[j, j]
        for k in range(j):
            piv -= L[j, k] * L[j, k]
        if not piv > 1e-8:
            return math.nan
        L[j, j] = math.sqrt(piv)
        for i in range(j + 1, K):
            v = Hs[i, j]
            for k in range(j):
                v -= L[i, k] * L[j, k]
            L[i, j] = v / L[j, j]
    # X = L⁻¹ Hs (forward substitution, column by column), then Tr(X L⁻ᵀ) = Tr(L⁻¹ Xᵀ)
    for c in range(K):
        for i in range(K):
            v = Hs[i, c]
            for k in range(i):
                v -= L[i, k] * X[k, c]
            X[i, c] = v / L[i, i]
    tot = 0.0
    # Y = L⁻¹ Xᵀ (column by column, to the scratch Y of length K); its trace
    for c in range(K):
        for i in range(K):
            v = X[c, i]
            for k in range(i):
                v -= L[i, k] * Y[k]
            Y[i] = v / L[i, i]
        tot += Y[c]
    return tot


@_jit
def losses_T(z, y, index, scale, beta):
    """Per sample the loss ``ℓ(y, z)`` (T ≥ 3), the value :func:`loss_and_trace` gives,
    without the Hessian and its trace (the uncertified warm evaluations in the Stein form
    of Σ̂ need only this)."""
    N = z.shape[0]
    out = np.empty(N)
    for n in range(N):
        out[n] = _loss_T(z[n], y[n], index, scale, beta)
    return out


# samples per chunk of loss_and_trace's threaded loop, each chunk with its own scratch
_TRACE_CHUNK = 64


@_jit_parallel
def loss_and_trace(z, y, index, scale, beta, sigma):
    """Per sample: the loss ``ℓ(y, z)`` and ``Tr(I − (I + ΣH)⁻¹)``, ``H = ∇²_z ℓ``, in one
    compiled pass (threaded over samples), instead of the numpy Hessians (N, K, K) and a
    batched eigendecomposition. The trace is ``nan`` where ``I + ΣH`` is (nearly) singular."""
    N, K = z.shape
    T = y.shape[1]
    loss = np.empty(N)
    tr = np.empty(N)
    n_chunks = (N + _TRACE_CHUNK - 1) // _TRACE_CHUNK
    for c in _prange(n_chunks):
        # scratch per chunk of samples, not allocated per sample
        Hu, L, X = np.empty((K, K)), np.empty((K, K)), np.empty((K, K))
        A, W, Y, unused_gradient = np.empty(T), np.empty(T), np.empty(K), np.zeros(K)
        for n in range(c * _TRACE_CHUNK, min(N, (c + 1) * _TRACE_CHUNK)):
            loss[n] = _hess_u(z[n], y[n], index, scale, beta, Hu, A, W, unused_gradient)
            for i in range(K):
                for j in range(K):
                    Hu[i, j] *= sigma
            tr[n] = _trace_by_cholesky(Hu, L, X, Y)
    return loss, tr


@_jit  # serial: ~0.1 µs a sample, less than a threaded region costs on a loaded machine
def loss_and_trace2(z, y, beta, sigma):
    """T = 2: per sample the loss and ``Tr(I − (I + ΣH)⁻¹)`` in closed form.

    The T = 2 loss depends on the row differences ``a = Cz`` only
    (:class:`.prox._Softmax2Problem`, ``C = [[√2, 0, −1], [0, √2, −1]]``) and is separable
    in them, so ``H = Cᵀ diag(ℓ1'', ℓ2'') C`` has rank 2 and its non-zero eigenvalues are
    those of ``diag(ℓ'') CCᵀ``, ``CCᵀ = [[3, 1], [1, 3]]``, i.e. of the symmetric 2 × 2
    ``M = S diag(ℓ'') S``, ``S = (CCᵀ)^½``. The larger eigenvalue of M (in modulus) comes
    from the discriminant and the smaller one as ``det M / μ1`` (no cancellation), each
    term ``Σμ/max(1 + Σμ, 1e-12)`` as in :func:`trace_resolvent_complement`.
    """
    N = z.shape[0]
    loss = np.empty(N)
    tr = np.empty(N)
    sq2 = math.sqrt(2.0)
    sa, sb = 0.5 * (2.0 + sq2), 0.5 * (2.0 - sq2)        # S = [[sa, sb], [sb, sa]]
    for n in range(N):
        f = 0.0
        lpp0 = lpp1 = 0.0
        for i in range(2):
            ai = sq2 * z[n, i] - z[n, 2]
            ba = beta * ai
            s1, s0 = _expit_pair(ba)
            p, r = y[n, i, i], y[n, i, 1 - i]
            f += (s1 - p) ** 2 + (s0 - r) ** 2
            e = 2 * (s1 - p) - 2 * (s0 - r)
            d1 = beta * s1 * s0
            laa = 4 * d1 * d1 + e * beta * d1 * (s0 - s1)
            if i == 0:
                lpp0 = laa
            else:
                lpp1 = laa
        loss[n] = f
        m00 = sigma * (sa * sa * lpp0 + sb * sb * lpp1)
        m11 = sigma * (sb * sb * lpp0 + sa * sa * lpp1)
        m01 = sigma * sa * sb * (lpp0 + lpp1)
        mean, half = 0.5 * (m00 + m11), 0.5 * (m00 - m11)
        rad = math.hypot(half, m01)
        mu1 = mean + rad if mean >= 0 else mean - rad
        mu2 = 0.0
        if mu1 != 0.0:
            mu2 = (8.0 * sigma * sigma * lpp0 * lpp1) / mu1   # det M = det(CCᵀ) Σ² ℓ1''ℓ2''
        tr[n] = mu1 / max(1.0 + mu1, 1e-12) + mu2 / max(1.0 + mu2, 1e-12)
    return loss, tr


@_jit
def stein_sums(z, omega, zeta1, zeta2, loss, weights, sigma):
    """The node averages of :func:`.output.output_side` in one pass: with
    ``g = (z − ω)/Σ``, the weighted sums of ``gᵀζ2``, ``‖g‖²``, ``gᵀζ1``, ``ℓ`` and
    ``‖z − ω‖²`` (one loop instead of a numpy temporary and reduction for each)."""
    N, K = z.shape
    s_gz2, s_gg, s_gz1, s_loss, s_sq = 0.0, 0.0, 0.0, 0.0, 0.0
    for n in range(N):
        a, b, c, sq = 0.0, 0.0, 0.0, 0.0
        for k in range(K):
            dz = z[n, k] - omega[n, k]
            g = dz / sigma
            a += g * zeta2[n, k]
            b += g * g
            c += g * zeta1[n, k]
            sq += dz * dz
        w = weights[n]
        s_gz2 += w * a
        s_gg += w * b
        s_gz1 += w * c
        s_loss += w * loss[n]
        s_sq += w * sq
    return s_gz2, s_gg, s_gz1, s_loss, s_sq


@_jit  # serial: a few ns a sample
def convex2(p, r, sigma, beta2, lam_p, c_first, c_last, c_step, table):
    """T = 2: :meth:`.prox._Softmax2Problem.convex` in one pass, with the same arithmetic
    (the tabulated floor of :func:`.prox._curvature_floor`: grid ``c_first`` to ``c_last``
    in steps ``c_step``); a node whose bound is NaN is not convex."""
    N = p.shape[0]
    size = table.shape[0]
    crude_scale = 6 * math.sqrt(3.0)
    out = np.empty(N, dtype=np.bool_)
    for n in range(N):
        lower = math.inf
        for i in range(2):
            c = 1 + p[n, i] - r[n, i]
            if c >= c_first and c <= c_last:
                pos = (c - c_first) / c_step
                cell = min(int(pos), size - 2)
                floor = table[cell] + (pos - cell) * (table[cell + 1] - table[cell])
            else:
                floor = -2 * (abs(c) + 2) / crude_scale
            if floor < lower or floor != floor:
                lower = floor
        if lower != lower:
            out[n] = False
        else:
            out[n] = lam_p / sigma[n] * (1 - 1e-3) + 1.05 * min(lower * beta2, 0.0) > 0
    return out
