"""Compiled (numba) loops of the discrete kernel (:class:`~.kernels._DiscreteKernel`) and
of the subordination evaluator's solve in s (:meth:`~.evaluators._SubordinationEvaluator.
solve_s`).

At finite d every state-evolution evaluation builds the quadrature of ``μ0 ⊞ SC(δ²)`` for
the d atoms of S0: about 800 nodes, each solving ``F(u, s) = 1/δ²`` over the d atoms. The
numpy forms make an ``(n, d)`` temporary per sum and a dozen vector operations per Newton
step; these loops do one pass over the atoms per node and step. Each function is the
numpy form's algorithm element by element (the same steps, brackets and stopping rules),
so results agree to the summation order's round-off. ``HAVE_NUMBA`` False: the callers
keep the numpy forms.

Pure numpy/numba (no torch).
"""

from __future__ import annotations

import math

import numpy as np

from ..channels._kernels import HAVE_NUMBA, _jit

if HAVE_NUMBA:
    import numba
    # the sums over the atoms may be reordered (vectorised): round-off only; no flag that
    # assumes finite values (the Newton iterations test for NaN and inf)
    _jit_sum = numba.njit(cache=True, nogil=True, error_model="numpy",
                          fastmath={"reassoc", "contract"})
else:  # pragma: no cover
    _jit_sum = _jit

__all__ = ["HAVE_NUMBA", "discrete_fa", "discrete_farb", "discrete_real_sums",
           "discrete_solve_s", "discrete_edge_roots", "divided_differences"]


@_jit_sum
def _fa_one(u, s, t, w):
    F, A = 0.0, 0.0
    for j in range(t.size):
        diff = u - t[j]
        r = 1.0 / (diff * diff + s)
        F += w[j] * r
        A += w[j] * r * r
    return F, A


@_jit
def discrete_fa(u, s, t, w):
    """``F = Σ_j w_j/((u−t_j)²+s)`` and ``A = Σ_j w_j/((u−t_j)²+s)²`` per point."""
    n = u.size
    F, A = np.empty(n), np.empty(n)
    for i in range(n):
        F[i], A[i] = _fa_one(u[i], s[i], t, w)
    return F, A


@_jit_sum
def discrete_farb(u, s, t, w):
    """``F, A``, ``R = Σ w (u−t)/((u−t)²+s)`` and ``B = Σ w (u−t)/((u−t)²+s)²``."""
    n = u.size
    F, A, R, B = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        f, a, rr, b = 0.0, 0.0, 0.0, 0.0
        for j in range(t.size):
            diff = u[i] - t[j]
            r = 1.0 / (diff * diff + s[i])
            f += w[j] * r
            rr += w[j] * diff * r
            a += w[j] * r * r
            b += w[j] * r * r * diff
        F[i], A[i], R[i], B[i] = f, a, rr, b
    return F, A, R, B


@_jit
def discrete_real_sums(u, t, w, powers):
    """``Σ_j w_j/(u − t_j)^p`` for each p of ``powers`` (rows), real u off the atoms."""
    n, m = u.size, powers.size
    out = np.zeros((m, n))
    top = 0
    for k in range(m):
        top = max(top, powers[k])
    for i in range(n):
        for j in range(t.size):
            r = 1.0 / (u[i] - t[j])
            rp = 1.0
            for p in range(1, top + 1):
                rp *= r
                for k in range(m):
                    if powers[k] == p:
                        out[k, i] += w[j] * rp
    return out


@_jit
def discrete_solve_s(u, s0, t, w, d2, maxiter):
    """:meth:`~.evaluators._SubordinationEvaluator.solve_s` for a discrete kernel: per
    point, the safeguarded Newton iteration on ``ψ(s) = 1/F(u, s) − δ²`` (concave
    increasing), in s from the right of the root and in v = √s from its left, inside the
    bracket it keeps; ``s0`` (finite, positive, at most δ²; others are replaced by δ²/4)
    is the start. Returns s (0 where u lies outside U)."""
    n = u.size
    out = np.empty(n)
    floor = 1e-34 * d2
    for i in range(n):
        s = s0[i]
        if not (math.isfinite(s) and s > 0):
            s = 0.25 * d2
        s = min(s, d2)
        lo, hi = 0.0, d2
        for _ in range(maxiter):
            F, A = _fa_one(u[i], s, t, w)
            psi = 1.0 / F - d2
            right = psi > 0
            if right:
                hi = s
            else:
                lo = s
            ds = -psi * F * F / A
            s_step = s + ds
            va = math.sqrt(s)
            vn = va + ds / (2 * va)
            v_step = vn * vn if vn > 0 else math.nan
            prop = s_step if right else v_step
            alt = v_step if right else s_step
            ok = lo < prop < hi
            if not ok:
                prop = alt
                ok = lo < prop < hi
            if not ok:
                prop = math.sqrt(lo * hi) if lo > 0 else 1e-3 * hi
            conv = (ok and abs(prop - s) <= 1e-9 * s) or psi == 0 or hi - lo <= 1e-15 * hi
            if psi == 0:
                prop = s
            dead = hi <= floor
            if dead:
                prop = 0.0
            s = prop
            if conv or dead:
                break
        out[i] = s
    return out


@_jit
def _edge_fun(u, t, w, delta, kind):
    """kind 0: ``h(u) = F0^(−1/2) − δ`` and h'; kind 1: ``F0'/2 = −F3`` and its
    derivative ``3 F4`` (F_p = Σ w/(u − t)^p)."""
    F0, F3, F4 = 0.0, 0.0, 0.0
    for j in range(t.size):
        r = 1.0 / (u - t[j])
        r2 = r * r
        F0 += w[j] * r2
        F3 += w[j] * r2 * r
        F4 += w[j] * r2 * r2
    if kind == 0:
        return F0 ** -0.5 - delta, F0 ** -1.5 * F3
    return -F3, 3 * F4


@_jit
def discrete_edge_roots(t, w, delta, lo, hi, x0, increasing, kind, xtol, maxiter):
    """:func:`~.rootfinding._bracketed_newton` on the edge functions of
    :func:`_edge_fun` (``kind`` per point), element by element."""
    n = x0.size
    out = np.empty(n)
    for i in range(n):
        a, b = lo[i], hi[i]
        x = min(max(x0[i], a), b)
        for _ in range(maxiter):
            f, fp = _edge_fun(x, t, w, delta, kind[i])
            step = f / fp
            scale = max(abs(x), 1e-300)
            done = f == 0 or abs(step) <= xtol * scale
            if (f > 0) == increasing[i]:
                b = x
            else:
                a = x
            xn = x - step
            bad = not math.isfinite(xn) or xn < a or xn > b
            if bad and not done:
                xn = 0.5 * (a + b)
            if done and not math.isfinite(xn):
                xn = x
            done = done or (b - a) <= xtol * max(abs(b), abs(a))
            x = xn
            if done:
                break
        out[i] = x
    return out


@_jit
def divided_differences(x, g, kept, eps):
    """The (d, d) divided differences of the capped map values ``g`` over atoms ``x``:
    ``(g_i − g_j)/(x_i − x_j)`` for distinct atoms, ``(kept_i + kept_j)/2 · 1{x_i > ε}``
    for coinciding ones (:func:`~skattn.theory.denoisers._capped_atoms`), element by
    element as its numpy form (no temporaries), so that numpy's sum of them is the
    same to the last bit."""
    n = x.size
    out = np.empty((n, n))
    for i in range(n):
        above = 1.0 if x[i] > eps else 0.0
        for j in range(n):
            gap = x[i] - x[j]
            if gap == 0.0:
                out[i, j] = 0.5 * (kept[i] + kept[j]) * above
            else:
                out[i, j] = (g[i] - g[j]) / gap
    return out
