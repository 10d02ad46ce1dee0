"""Kernels: what the construction of ``μ0 ⊞ SC(δ²)`` needs to know about μ0.

Each kernel gives the integrals ``F, A, B``, the Cauchy transform ``G0`` and its derivative,
and the components of ``U`` (the u-image of the support; see the package docstring).
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from ..laws import DiscreteLaw, SpectralLaw, WishartLaw
from . import _compiled
from .rootfinding import _EPS, _bracketed_newton


class _Kernel:
    """Interface to μ0 for the subordination computations (internal)."""

    def FA(self, u, s):
        """``F = ∫ μ0/((u−t)²+s)`` and ``A = ∫ μ0/((u−t)²+s)²`` (s > 0)."""
        raise NotImplementedError

    def FARB(self, u, s):
        """``F, A``, ``R = Re G0(u + i√s)`` and ``B = ∫ μ0 (u−t)/((u−t)²+s)²``."""
        raise NotImplementedError

    def G_Gp(self, omega):
        """Complex ``G0(ω)`` and ``G0'(ω)``."""
        raise NotImplementedError

    def G_Gp_us(self, u, s):
        """``G0(ω)``, ``G0'(ω)`` at ``ω = u + i√s``."""
        return self.G_Gp(np.asarray(u, dtype=float) + 1j * np.sqrt(s))

    def G0_real(self, u):
        """``G0(u)`` for real ``u`` outside the support of μ0."""
        return self.G_Gp(np.asarray(u, dtype=float) + 0j)[0].real

    def F0(self, u):
        """``∫ μ0(dt)/(u − t)²`` for real ``u`` outside the support of μ0."""
        return -self.G_Gp(np.asarray(u, dtype=float) + 0j)[1].real

    def edges_u(self, delta):
        """Sorted list of the intervals ``(u_left, u_right)`` of ``U`` (see module doc)."""
        raise NotImplementedError


class _ComplexKernel(_Kernel):
    """Kernel computed from the complex Cauchy transform (Wishart and generic laws)."""

    def FA(self, u, s):
        v = np.sqrt(s)
        G, Gp = self.G_Gp(u + 1j * v)
        F = -G.imag / v
        A = (Gp.real + F) / (2 * s)
        # A ≥ F² (Cauchy–Schwarz); guard against round-off at tiny s
        A = np.maximum(A, F * F)
        return F, A

    def FARB(self, u, s):
        v = np.sqrt(s)
        G, Gp = self.G_Gp(u + 1j * v)
        F = -G.imag / v
        A = np.maximum((Gp.real + F) / (2 * s), F * F)
        B = Gp.imag / (2 * v)
        return F, A, G.real, B


class _WishartKernel(_ComplexKernel):
    """μ0 = √κ0 × Marchenko–Pastur(1/κ0), possibly with an atom 1 − κ0 at 0."""

    def __init__(self, law):
        self.kappa = float(law.rank_ratio)
        self.sk = np.sqrt(self.kappa)
        self.c = 1.0 / self.kappa
        self.lo_mp = (1 - np.sqrt(self.c)) ** 2
        self.hi_mp = (1 + np.sqrt(self.c)) ** 2
        self.a0, self.b0 = law.bulk_edges()
        self.atom = law.atom_mass

    def _g(self, w):
        c = self.c
        b = w + c - 1
        root = np.sqrt(w - self.lo_mp) * np.sqrt(w - self.hi_mp)
        num1 = b - root
        num2 = b + root
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.where(np.abs(num1) >= np.abs(num2), num1 / (2 * c * w), 2 / num2)
        return g, root

    def G_Gp(self, omega):
        w = np.asarray(omega, dtype=complex) / self.sk
        g, root = self._g(w)
        with np.errstate(divide="ignore", invalid="ignore"):
            gp = g * (self.c * g - 1) / root
            return g / self.sk, gp / self.kappa

    def G0_real(self, u):
        return self._g(np.asarray(u, dtype=float) / self.sk + 0j)[0].real / self.sk

    def edges_u(self, delta):
        k, sk, d2 = self.kappa, self.sk, delta * delta
        # edges: real G with d² G²(G − √κ)² − (1 − κ) G² + 2√κ G − κ = 0,
        #        u = (d² G (G − √κ) + 1 − κ) / (2G − √κ)
        # (the quartic's coefficients and the Newton polish in scalar arithmetic, the same
        # operations as numpy's polynomial helpers: a tenth of their cost per free
        # convolution, where this ran once per state-evolution evaluation)
        poly = (d2, d2 * (-sk - sk), d2 * (sk * sk) - (1 - k), 2 * sk, -k)
        dpoly = (4 * poly[0], 3 * poly[1], 2 * poly[2], poly[3])
        roots = np.roots(poly)
        cand = roots[np.abs(roots.imag) <= 1e-6 * np.maximum(1, np.abs(roots))].real
        us = []
        c, lo, hi = self.c, self.lo_mp, self.hi_mp
        for G in cand.tolist():
            for _ in range(3):  # polish the root
                value, slope = _horner(poly, G), _horner(dpoly, G)
                dG = value / slope if slope != 0 else np.inf
                if np.isfinite(dG):
                    G -= dG
            # scaled g = √κ G; the edge has signed root = d² g (1 − c g)/κ, which fixes
            # w = u/√κ stably (w − hi = r²/(w − lo) on the right, lo − w on the left)
            g = sk * G
            root = d2 * g * (1 - c * g) / k
            r2 = root * root
            y = 2 * r2 / ((hi - lo) + np.sqrt((hi - lo) ** 2 + 4 * r2))
            w = hi + y if root > 0 else lo - y
            if self.atom > 0 and w == 0:
                continue
            u = sk * w
            if not abs(self._g_real(w) / sk - G) <= 1e-6 * max(1.0, abs(G)):
                continue
            us.append(float(u))
        us = np.sort(np.unique(np.array(us, dtype=float)))
        # assemble the components of U
        if self.atom > 0 and us.size == 4:
            return [(us[0], us[1]), (us[2], us[3])]
        if us.size >= 2:
            return [(us[0], us[-1])]
        raise RuntimeError(f"edge finding failed for {self!r} at delta={delta}: {us}")

    def _g_real(self, w):
        """:meth:`_g` at a real ``w`` outside ``(lo, hi)`` (where it is real), in scalar
        arithmetic; NaN inside."""
        c = self.c
        b = w + c - 1
        if w >= self.hi_mp:
            root = np.sqrt(w - self.lo_mp) * np.sqrt(w - self.hi_mp)
        elif w <= self.lo_mp:
            root = -(np.sqrt(self.lo_mp - w) * np.sqrt(self.hi_mp - w))
        else:
            return np.nan
        num1, num2 = b - root, b + root
        if abs(num1) >= abs(num2):
            return num1 / (2 * c * w) if w != 0 else np.inf
        return 2 / num2 if num2 != 0 else np.inf

    def __repr__(self):
        return f"_WishartKernel(kappa={self.kappa})"


def _horner(coefficients, x):
    """The polynomial of ``coefficients`` (highest degree first) at a scalar ``x``."""
    value = 0.0
    for coefficient in coefficients:
        value = value * x + coefficient
    return value


class _GenericKernel(_ComplexKernel):
    """Any law with ``cauchy_transform``/``cauchy_derivative``/``support``.

    Assumes the support is one interval on which ``∫ μ0/(u − t)²`` is infinite
    (square-root or harder edges).
    """

    def __init__(self, law):
        self.law = law
        lo, hi = law.support()
        self.lo, self.hi = float(lo), float(hi)

    def G_Gp(self, omega):
        omega = np.asarray(omega, dtype=complex)
        return (np.asarray(self.law.cauchy_transform(omega)),
                np.asarray(self.law.cauchy_derivative(omega)))

    def edges_u(self, delta):
        target = 1.0 / delta ** 2
        width = max(self.hi - self.lo, 1.0)

        def h(u):
            return float(self.F0(u)) - target

        def root(end, sign):
            far = end + sign * delta  # F0 ≤ 1/δ² there
            step = 1e-3 * delta
            near = end + sign * step
            while h(near) < 0 and step > 1e-15 * width:
                step /= 10
                near = end + sign * step
            if h(near) < 0:
                return end
            if h(far) >= 0:
                return far
            return optimize.brentq(h, min(far, near), max(far, near), xtol=1e-15 * width,
                                   rtol=4 * _EPS)

        return [(root(self.lo, -1.0), root(self.hi, +1.0))]


class _DiscreteKernel(_Kernel):
    """μ0 = Σ_j w_j δ_{t_j} (atoms merged)."""

    _CHUNK = 1 << 16

    def __init__(self, eigenvalues):
        t, counts = np.unique(np.asarray(eigenvalues, dtype=float), return_counts=True)
        self.t = t
        self.w = counts / counts.sum()

    def _rows(self, n):
        step = max(1, self._CHUNK // self.t.size)
        return [slice(i, min(n, i + step)) for i in range(0, n, step)]

    def FA(self, u, s):
        u = np.asarray(u, dtype=float)
        s = np.broadcast_to(np.asarray(s, dtype=float), u.shape)
        if _compiled.HAVE_NUMBA:
            F, A = _compiled.discrete_fa(u.ravel(), np.ascontiguousarray(s).ravel(), self.t,
                                         self.w)
            return F.reshape(u.shape), A.reshape(u.shape)
        F = np.empty(u.shape)
        A = np.empty(u.shape)
        for sl in self._rows(u.size):
            diff = u[sl, None] - self.t
            r = diff * diff
            r += s[sl, None]
            np.reciprocal(r, out=r)
            F[sl] = r @ self.w
            r *= r
            A[sl] = r @ self.w
        return F, A

    def FARB(self, u, s):
        u = np.asarray(u, dtype=float)
        s = np.broadcast_to(np.asarray(s, dtype=float), u.shape)
        if _compiled.HAVE_NUMBA:
            out = _compiled.discrete_farb(u.ravel(), np.ascontiguousarray(s).ravel(), self.t,
                                          self.w)
            return tuple(v.reshape(u.shape) for v in out)
        F, A, R, B = (np.empty(u.shape) for _ in range(4))
        for sl in self._rows(u.size):
            diff = u[sl, None] - self.t
            r = diff * diff
            r += s[sl, None]
            np.reciprocal(r, out=r)
            F[sl] = r @ self.w
            dr = diff * r
            R[sl] = dr @ self.w
            r *= r
            A[sl] = r @ self.w
            r *= diff
            B[sl] = r @ self.w
        return F, A, R, B

    def G_Gp_us(self, u, s):
        # real arithmetic: 1/(ω − t) = (u − t − i v)/((u − t)² + s)
        F, A, R, B = self.FARB(u, s)
        v = np.sqrt(s)
        return R - 1j * v * F, (2 * s * A - F) + 2j * v * B

    def G_Gp(self, omega):
        omega = np.asarray(omega, dtype=complex)
        out_g = np.empty(omega.shape, dtype=complex)
        out_gp = np.empty(omega.shape, dtype=complex)
        flat = omega.reshape(-1)
        g, gp = out_g.reshape(-1), out_gp.reshape(-1)
        for sl in self._rows(flat.size):
            r = 1.0 / (flat[sl, None] - self.t)
            g[sl] = r @ self.w
            gp[sl] = -(r * r) @ self.w
        return out_g, out_gp

    def _sums_real(self, u, powers):
        u = np.asarray(u, dtype=float)
        if _compiled.HAVE_NUMBA:
            out = _compiled.discrete_real_sums(u.ravel(), self.t, self.w,
                                               np.asarray(powers, dtype=np.int64))
            return [row.reshape(u.shape) for row in out]
        out = [np.empty(u.shape) for _ in powers]
        for sl in self._rows(u.size):
            r = 1.0 / (u[sl, None] - self.t)
            rp = r
            for pw in range(1, max(powers) + 1):
                if pw > 1:
                    rp = rp * r
                if pw in powers:
                    out[powers.index(pw)][sl] = rp @ self.w
        return out

    def G0_real(self, u):
        return self._sums_real(u, (1,))[0]

    def F0(self, u):
        return self._sums_real(u, (2,))[0]

    def _edge_newton(self, delta, lo, hi, x0, increasing, kind):
        """Roots on brackets of ``h(u) = F0^(−1/2) − δ`` (``kind`` 0) or of ``F0'`` (1)."""
        lo, hi, x0 = (np.asarray(v, dtype=float) for v in (lo, hi, x0))
        inc = np.broadcast_to(np.asarray(increasing, dtype=bool), x0.shape)
        if _compiled.HAVE_NUMBA:
            return _compiled.discrete_edge_roots(
                self.t, self.w, float(delta), lo, hi, x0, np.ascontiguousarray(inc),
                np.full(x0.size, kind, dtype=np.int64), 1e-14, 100)

        def fun(u, idx):
            if kind == 0:  # h(u) and h'(u): F0' = −2 Σ w/(u−t)³ = −2 F3
                F0, F3 = self._sums_real(u, (2, 3))
                return F0 ** -0.5 - delta, F0 ** -1.5 * F3
            F3, F4 = self._sums_real(u, (3, 4))  # F0'/2 = −F3 (increasing), its derivative
            return -F3, 3 * F4
        return _bracketed_newton(fun, lo, hi, x0, increasing=inc)

    def edges_u(self, delta):
        t, w, d2 = self.t, self.w, delta * delta
        m = t.size
        # outer edges: h decreases on (t0 − δ, t0), increases on (t_m, t_m + δ)
        lo_out = np.array([t[0] - delta, t[-1]])
        hi_out = np.array([t[0], t[-1] + delta])
        x0 = np.array([t[0] - delta * np.sqrt(w[0]), t[-1] + delta * np.sqrt(w[-1])])
        outer = self._edge_newton(delta, lo_out, hi_out, x0, np.array([False, True]), 0)
        gaps = []
        if m > 1:
            g = np.diff(t)
            w13 = np.cbrt(w)
            bound = (w13[:-1] + w13[1:]) ** 3  # min over the gap of the two neighbours' terms
            cand = np.nonzero(g * g > d2 * bound)[0]
            if cand.size:
                ta, tb = t[cand], t[cand + 1]
                r = w13[cand] / w13[cand + 1]
                x0 = ta + (tb - ta) * r / (1 + r)
                umin = self._edge_newton(delta, ta, tb, x0, True, 1)
                F0min = self.F0(umin)
                open_ = F0min < 1.0 / d2
                if np.any(open_):
                    ta, tb, umin = ta[open_], tb[open_], umin[open_]
                    k = cand[open_]
                    # left root in (t_a, umin): h increasing; right root in (umin, t_b)
                    lo = np.concatenate([ta, umin])
                    hi = np.concatenate([umin, tb])
                    x0 = np.concatenate([np.minimum(ta + delta * np.sqrt(w[k]), umin),
                                         np.maximum(tb - delta * np.sqrt(w[k + 1]), umin)])
                    inc = np.concatenate([np.ones(k.size, bool), np.zeros(k.size, bool)])
                    roots = self._edge_newton(delta, lo, hi, x0, inc, 0)
                    gaps = list(zip(roots[:k.size], roots[k.size:]))
        bounds = [outer[0]]
        for a, b in gaps:
            bounds += [a, b]
        bounds.append(outer[1])
        return [(bounds[2 * i], bounds[2 * i + 1]) for i in range(len(bounds) // 2)]


def _make_kernel(law):
    if isinstance(law, WishartLaw):
        return _WishartKernel(law)
    if isinstance(law, DiscreteLaw):
        return _DiscreteKernel(law.eigenvalues)
    if isinstance(law, SpectralLaw):
        return _GenericKernel(law)
    raise TypeError(f"law must be a SpectralLaw, got {type(law).__name__}.")
