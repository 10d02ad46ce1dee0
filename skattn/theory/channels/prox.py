"""Global minimiser of the softmax prox problem: damped modified Newton, vectorised.

:class:`_SoftmaxProblem` (any T) and :class:`_Softmax2Problem` (T = 2, closed forms in the
row differences) give the objective, its gradient and Hessian, a convexity test and a
descent direction; :func:`_newton` runs many starts at once.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import expit

from . import _kernels


class _SoftmaxProblem:
    """Prox objective ``‖x‖²/(2Σ) + ℓ(y, ω + Bx)`` over the complement of the shift."""

    def __init__(self, channel, y, omega, sigma):
        self.ch, self.y, self.omega, self.sigma = channel, y, omega, sigma
        self.B = channel.basis

    def convex(self):
        """Samples whose prox objective is provably convex (crude bound, any T).

        Per row, ``∇²_h ℓ_a = 2J² + 2β²[diag(Aρ) − (Aρ)Aᵀ − A(Aρ)ᵀ]`` with ``|ρ_c| ≤ 2R``,
        ``R = max_ab max(|y_ab|, |1 − y_ab|) ≥ |A − y|``, so ``λ_min ≥ −12 R β²``; in u
        (``LᵀL = 2I``) ``λ_min(∇²ℓ) ≥ −24 R β²``.
        """
        R = np.max(np.maximum(np.abs(self.y), np.abs(1 - self.y)), axis=(1, 2))
        return 1.0 / self.sigma > 1.01 * 24 * R * self.ch.beta_ ** 2

    def value(self, rows, x):
        z = self.omega[rows] + x @ self.B.T
        return np.sum(x * x, axis=1) / (2 * self.sigma[rows]) + self.ch._loss(self.y[rows], z)

    def grad_hess(self, rows, x):
        B, s = self.B, self.sigma[rows]
        _, gl, Hl = self.ch._derivs(self.y[rows], self.omega[rows] + x @ B.T)
        g = x / s[:, None] + gl @ B
        H = np.eye(B.shape[1]) / s[:, None, None] + np.matmul(B.T, np.matmul(Hl, B))
        return g, H

    @staticmethod
    def direction(g, H):
        """``−|H|⁻¹ g`` with the eigenvalues of H replaced by ``max(|λ|, floor)``.

        Positive definite Hessians (most of them) go through a vectorised Cholesky solve;
        the others through a batched eigendecomposition.
        """
        p, ok = _cholesky_solve(H, g)
        bad = np.flatnonzero(~ok)
        if bad.size:
            p[bad] = _SoftmaxProblem._eig_direction(g[bad], H[bad])
        return -p

    @staticmethod
    def _eig_direction(g, H):
        lam, V = np.linalg.eigh(H)
        lam = np.abs(lam)
        floor = 1e-12 * np.max(lam, axis=1, keepdims=True) + 1e-300
        c = np.einsum("nji,nj->ni", V, g) / np.maximum(lam, floor)
        return np.einsum("nij,nj->ni", V, c)


# T = 2: the row differences a = C z (a_1 = h11 − h12, a_2 = h22 − h12 in the channel's
# coordinates)
_ROW_DIFFERENCES = np.array([[np.sqrt(2.0), 0.0, -1.0], [0.0, np.sqrt(2.0), -1.0]])


def _pair_geometry(channel):
    """``(D, D⁻¹, P, λ_min(P))`` of :class:`_Softmax2Problem` for the channel's basis,
    computed once per basis (they depend on nothing else)."""
    basis = channel.basis
    cached = getattr(channel, "_pair_geometry", None)
    if cached is not None and cached[0] is basis:
        return cached[1]
    D = _ROW_DIFFERENCES @ basis
    Dinv = np.linalg.inv(D)
    P = Dinv.T @ Dinv
    geometry = (D, Dinv, P, np.linalg.eigvalsh(P)[0])
    channel._pair_geometry = (basis, geometry)
    return geometry


class _Softmax2Problem(_SoftmaxProblem):
    """T = 2: the loss depends on ``a = C z`` (row differences) only; elementwise formulas.

    Row i of σ_β(h) is ``(sigmoid(β a_i), sigmoid(−β a_i))`` (diagonal entry first), with
    ``a_1 = h11 − h12``, ``a_2 = h22 − h12``; ``C = [[√2, 0, −1], [0, √2, −1]]``.
    """

    def __init__(self, channel, y, omega, sigma):
        super().__init__(channel, y, omega, sigma)
        # a = Cω + D x; ‖x‖² = (a − Cω)ᵀ P (a − Cω), P = D⁻ᵀD⁻¹ with smallest eigenvalue
        self.D, self.Dinv, self.P, self.lam_p = _pair_geometry(channel)
        self.a0 = omega @ _ROW_DIFFERENCES.T
        self.p = np.stack([y[:, 0, 0], y[:, 1, 1]], axis=1)  # diagonal label entries
        self.r = np.stack([y[:, 0, 1], y[:, 1, 0]], axis=1)  # off-diagonal label entries
        self.beta = channel.beta_

    def convex(self):
        """Samples whose prox objective is provably convex (one Newton start suffices).

        In ``a`` the Hessian is ``P/Σ + diag(ℓ1'', ℓ2'')``; with ``σ = sigmoid(β a_i)``,
        ``ℓ_i'' = β² [4 σ²(1−σ)² + 2(2σ − c_i) σ(1−σ)(1−2σ)]``, ``c_i = 1 + p_i − r_i``,
        whose minimum over σ is a concave function of ``c_i``, tabulated once
        (:func:`_curvature_floor`); a 5 % margin covers the tabulation. Compiled where
        numba is present (:func:`._kernels.convex2`, the same arithmetic in one pass).
        """
        if _kernels.HAVE_NUMBA:
            cg, g = _curvature_table()
            return _kernels.convex2(self.p, self.r, self.sigma, float(self.beta ** 2),
                                    float(self.lam_p), cg[0], cg[-1], cg[1] - cg[0], g)
        lower = np.min(_curvature_floor(1 + self.p - self.r), axis=1) * self.beta ** 2
        return self.lam_p / self.sigma * (1 - 1e-3) + 1.05 * np.minimum(lower, 0) > 0

    def grid_starts(self, rows, x_fit, n_sigma=12, n_segment=8):
        """Best point of a per-sample 2-D grid in ``a``-space, as an ``x`` start (N, 2).

        The loss is separable, ``ℓ = ℓ1(a1) + ℓ2(a2)``, and the quadratic term is
        ``dᵀ P d/(2Σ)`` with ``d = a − Cω``, ``P = (C Cᵀ)⁻¹``. Each axis holds points uniform
        in ``sigmoid(β a_i)`` (resolving the well of the label at any β) and points on the
        segment between ``(Cω)_i`` and the fitted ``a_i``; for each point of one axis the
        other axis also gets the minimiser of the quadratic term given that point (where a
        saturated row sits). Objective values come from 1-D loss tables.
        """
        N, beta, P = x_fit.shape[0], self.beta, self.P
        a0, sig = self.a0[rows], self.sigma[rows, None]
        pp, rr = self.p[rows], self.r[rows]
        d_fit = x_fit @ self.D.T                                # a_fit − Cω
        u = (np.arange(n_sigma) + 0.5) / n_sigma
        sig_pts = np.log(u / (1 - u)) / beta
        ts = np.linspace(0.0, 1.0, n_segment)
        d, tables = [], []
        for i in range(2):
            p, r = pp[:, i, None], rr[:, i, None]
            d_seg = ts * d_fit[:, i, None]
            ba = beta * (a0[:, i, None] + d_seg)
            loss_seg = (expit(ba) - p) ** 2 + (expit(-ba) - r) ** 2
            loss_sig = (u - p) ** 2 + (1 - u - r) ** 2
            di = np.concatenate([sig_pts - a0[:, i, None], d_seg], axis=1)    # (N, G)
            d.append(di)
            tables.append(P[i, i] * di ** 2 / (2 * sig)
                          + np.concatenate([loss_sig, loss_seg], axis=1))
        cross = P[0, 1] / sig                                   # (N, 1)
        n = np.arange(N)
        # product grid
        F = d[0][:, :, None] * (cross * d[1])[:, None, :]
        F += tables[0][:, :, None]
        F += tables[1][:, None, :]
        G = d[0].shape[1]
        k = np.argmin(F.reshape(N, G * G), axis=1)
        k0, k1 = np.divmod(k, G)
        best_f = F.reshape(N, G * G)[n, k]
        best_d = np.stack([d[0][n, k0], d[1][n, k1]], axis=1)
        # each axis' points with the other coordinate at its quadratic optimum
        for i, j in ((0, 1), (1, 0)):
            dj = -(P[0, 1] / P[j, j]) * d[i]
            ba = beta * (a0[:, j, None] + dj)
            Fc = (tables[i] + P[j, j] * dj ** 2 / (2 * sig) + cross * d[i] * dj
                  + (expit(ba) - pp[:, j, None]) ** 2
                  + (expit(-ba) - rr[:, j, None]) ** 2)
            kc = np.argmin(Fc, axis=1)
            upd = Fc[n, kc] < best_f
            best_f[upd] = Fc[n, kc][upd]
            best_d[upd, i], best_d[upd, j] = d[i][n, kc][upd], dj[n, kc][upd]
        return best_d @ self.Dinv.T

    def _sig(self, rows, x):
        ba = self.beta * (self.a0[rows] + x @ self.D.T)
        return expit(ba), expit(-ba)

    def value(self, rows, x):
        s1, s0 = self._sig(rows, x)
        loss = np.sum((s1 - self.p[rows]) ** 2 + (s0 - self.r[rows]) ** 2, axis=1)
        return np.sum(x * x, axis=1) / (2 * self.sigma[rows]) + loss

    def grad_hess(self, rows, x):
        s1, s0 = self._sig(rows, x)
        b, D, s = self.beta, self.D, self.sigma[rows]
        e = 2 * (s1 - self.p[rows]) - 2 * (s0 - self.r[rows])   # dℓ_i/dσ_i
        d1 = b * s1 * s0                                           # dσ_i/da_i
        la = e * d1
        laa = 4 * d1 * d1 + e * b * d1 * (s0 - s1)
        g = x / s[:, None] + la @ D
        H = np.empty((x.shape[0], 2, 2))
        H[:, 0, 0] = laa @ (D[:, 0] * D[:, 0]) + 1 / s
        H[:, 1, 1] = laa @ (D[:, 1] * D[:, 1]) + 1 / s
        H[:, 0, 1] = H[:, 1, 0] = laa @ (D[:, 0] * D[:, 1])
        return g, H

    @staticmethod
    def direction(g, H):
        a, c, d = H[:, 0, 0], H[:, 0, 1], H[:, 1, 1]
        theta = 0.5 * np.arctan2(2 * c, a - d)
        cs, sn = np.cos(theta), np.sin(theta)
        l1 = a * cs * cs + 2 * c * sn * cs + d * sn * sn
        l2 = a * sn * sn - 2 * c * sn * cs + d * cs * cs
        l1, l2 = np.abs(l1), np.abs(l2)
        floor = 1e-12 * np.maximum(l1, l2) + 1e-300
        c1 = (cs * g[:, 0] + sn * g[:, 1]) / np.maximum(l1, floor)
        c2 = (-sn * g[:, 0] + cs * g[:, 1]) / np.maximum(l2, floor)
        return -np.stack([cs * c1 - sn * c2, sn * c1 + cs * c2], axis=1)


def _cholesky_solve(H, g):
    """Solve ``H p = g`` for a batch of small symmetric matrices by Cholesky.

    Returns ``p`` and a mask of the matrices found positive definite (pivots above
    ``1e-12`` times the largest diagonal entry); ``p`` is meaningless elsewhere.
    """
    M, D, _ = H.shape
    L = np.zeros_like(H)
    ok = np.ones(M, dtype=bool)
    tol = 1e-12 * np.max(np.abs(np.diagonal(H, axis1=1, axis2=2)), axis=1)
    for j in range(D):
        piv = H[:, j, j] - np.einsum("mk,mk->m", L[:, j, :j], L[:, j, :j])
        ok &= piv > tol
        d = np.sqrt(np.where(piv > tol, piv, 1.0))
        L[:, j, j] = d
        if j + 1 < D:
            L[:, j + 1:, j] = (H[:, j + 1:, j]
                               - np.einsum("mik,mk->mi", L[:, j + 1:, :j], L[:, j, :j])) \
                / d[:, None]
    y = np.zeros_like(g)
    for j in range(D):
        y[:, j] = (g[:, j] - np.einsum("mk,mk->m", L[:, j, :j], y[:, :j])) / L[:, j, j]
    p = np.zeros_like(g)
    for j in range(D - 1, -1, -1):
        p[:, j] = (y[:, j] - np.einsum("mk,mk->m", L[:, j + 1:, j], p[:, j + 1:])) / L[:, j, j]
    return p, ok


@lru_cache(maxsize=1)
def _curvature_table():
    s = np.linspace(0.0, 1.0, 2049)[:, None]
    v = s * (1 - s)
    c = np.linspace(-2.0, 4.0, 1201)[None, :]
    g = np.min(4 * v * v + 2 * (2 * s - c) * v * (1 - 2 * s), axis=0)
    return c[0], g


def _curvature_floor(c):
    """``min_σ 4σ²(1−σ)² + 2(2σ − c)σ(1−σ)(1−2σ)`` (a lower bound, vectorised over c).

    The minimum is concave in c, so linear interpolation of the table is a lower bound;
    outside the table, ``min ≥ −(|c| + 2) max |σ(1−σ)(1−2σ)| · 2``.
    """
    cg, g = _curvature_table()
    inside = (c >= cg[0]) & (c <= cg[-1])
    crude = -2 * (np.abs(c) + 2) / (6 * np.sqrt(3.0))
    # the grid is uniform: the cell index is arithmetic (np.interp's search cost ~10 % of a
    # T = 2 curve); the same linear interpolation
    step = cg[1] - cg[0]
    pos = (np.clip(c, cg[0], cg[-1]) - cg[0]) / step
    cell = np.minimum(pos.astype(np.intp), cg.size - 2)
    frac = pos - cell
    return np.where(inside, g[cell] + frac * (g[cell + 1] - g[cell]), crude)


def _newton(prob, rows, x, radius, max_iter):
    """Damped modified Newton, vectorised over independent problems.

    ``rows[i]`` is the sample of problem i. Steps ``−|H|⁻¹g`` (eigenvalue-modified, so a
    descent direction where H is indefinite), capped at ``radius``, with Armijo backtracking
    on the objective. Returns the end points and the objective values.
    """
    x = np.array(x, dtype=float)
    f = prob.value(rows, x)
    active = np.arange(x.shape[0])
    for _ in range(max_iter):
        if active.size == 0:
            break
        ra, xa, fa = rows[active], x[active], f[active]
        g, H = prob.grad_hess(ra, xa)
        p = prob.direction(g, H)
        pn = np.linalg.norm(p, axis=1)
        p *= np.minimum(1.0, radius / np.maximum(pn, 1e-300))[:, None]
        pn = np.minimum(pn, radius)
        slope = np.einsum("ni,ni->n", g, p)
        xnorm = np.linalg.norm(xa, axis=1)
        # converged: negligible step, or a predicted decrease below the rounding noise of
        # f (≈ ε(|f| + Σ|A − y|) for a square loss, bounded by 4e-15(|f| + √|f|)); in the
        # latter case the line search cannot judge the step, so take the (tiny) Newton
        # step once unless it increases f beyond that noise, and stop
        noise = 4e-15 * (np.abs(fa) + np.sqrt(np.abs(fa)))
        resolved = slope < -noise
        small = pn <= 1e-12 * xnorm
        last = np.flatnonzero((slope < 0) & ~resolved & ~small)
        if last.size:
            xt = xa[last] + p[last]
            ft = prob.value(ra[last], xt)
            ok = ft <= fa[last] + noise[last]
            xa[last[ok]], fa[last[ok]] = xt[ok], ft[ok]
        done = small | ~resolved
        t = np.ones(active.size)
        accepted = done.copy()
        search = np.flatnonzero(~accepted)
        for _ in range(30):
            if search.size == 0:
                break
            xt = xa[search] + t[search, None] * p[search]
            ft = prob.value(ra[search], xt)
            ok = (ft <= fa[search] + 1e-4 * t[search] * slope[search]) & np.isfinite(ft)
            hit = search[ok]
            xa[hit], fa[hit] = xt[ok], ft[ok]
            accepted[hit] = True
            # quadratic-interpolation backtracking, t ← clip(t_q, t/10, t/2)
            miss, ts, sl = ~ok, t[search], slope[search]
            excess = np.where(np.isfinite(ft), ft - fa[search] - sl * ts, np.inf)
            with np.errstate(divide="ignore", invalid="ignore"):
                tq = -sl * ts * ts / (2 * excess)
            tq = np.clip(np.nan_to_num(tq, nan=0.0), 0.1 * ts, 0.5 * ts)
            search = search[miss]
            t[search] = tq[miss]
        done |= ~accepted                          # no decrease possible: converged
        x[active], f[active] = xa, fa
        done |= t * pn <= 1e-11 * xnorm
        active = active[~done]
    return x, f
