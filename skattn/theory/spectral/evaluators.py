"""Node evaluators: ``x ↦ (u, s, ρ, Re G)`` on the support of ``μ0 ⊞ SC(δ²)``."""

from __future__ import annotations

import numpy as np

from . import _compiled
from .kernels import _DiscreteKernel
from .rootfinding import _EPS, _TINY, _bracketed_newton


class _SubordinationEvaluator:
    """δ > 0: boundary values of the subordination function.

    ``at_u`` solves ``F(u, s) = 1/δ²`` for ``s`` at given ``u`` (globally convergent);
    ``at_x`` solves ``ω + δ² G0(ω) = x`` for ``ω = u + i√s`` by Newton's method from a
    guess, falling back to a bracketed Newton iteration on ``u ↦ x(u)``.
    """

    def __init__(self, kernel, delta):
        self.kernel = kernel
        self.delta = delta
        self.d2 = delta * delta

    def solve_s(self, u, s0=None, maxiter=100, fa=None):
        """Solve ``F(u, s) = 1/δ²`` for ``s`` (vectorised, safeguarded Newton).

        ``fa(idx, s)``, if given, replaces ``kernel.FA(u[idx], s)``.
        """
        if fa is None and _compiled.HAVE_NUMBA and isinstance(self.kernel, _DiscreteKernel):
            # the same iteration per point, compiled (_compiled.discrete_solve_s)
            u = np.ascontiguousarray(u, dtype=float)
            s0 = np.full(u.shape, np.nan) if s0 is None else np.broadcast_to(
                np.asarray(s0, dtype=float), u.shape)
            return _compiled.discrete_solve_s(
                u.ravel(), np.ascontiguousarray(s0).ravel(), self.kernel.t, self.kernel.w,
                self.d2, int(maxiter)).reshape(u.shape)
        if fa is None:
            def fa(idx, s):
                return self.kernel.FA(u[idx], s)
        d2 = self.d2
        u = np.asarray(u, dtype=float)
        n = u.size
        if s0 is None:
            s = np.full(n, 0.25 * d2)
        else:
            s = np.array(s0, dtype=float, copy=True)
            bad = ~np.isfinite(s) | (s <= 0)
            s[bad] = 0.25 * d2
            s = np.minimum(s, d2)
        lo = np.zeros(n)
        hi = np.full(n, d2)  # F(u, s) ≤ 1/s: ψ(δ²) ≥ 0
        floor = 1e-34 * d2
        active = np.arange(n)
        for _ in range(maxiter):
            if active.size == 0:
                break
            sa = s[active]
            F, A = fa(active, sa)
            psi = 1.0 / F - d2  # concave increasing in s
            right = psi > 0
            hi[active] = np.where(right, sa, hi[active])
            lo[active] = np.where(~right, sa, lo[active])
            la, ha = lo[active], hi[active]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                ds = -psi * F * F / A
                s_step = sa + ds  # Newton in s: from the right it lands left of the root
                va = np.sqrt(sa)
                vn = va + ds / (2 * va)  # Newton in v = √s
                v_step = np.where(vn > 0, vn * vn, np.nan)
            prop = np.where(right, s_step, v_step)
            alt = np.where(right, v_step, s_step)
            ok = (prop > la) & (prop < ha)
            prop = np.where(ok, prop, alt)
            ok = (prop > la) & (prop < ha)
            fallback = np.where(la > 0, np.sqrt(la * ha), 1e-3 * ha)
            prop = np.where(ok, prop, fallback)
            # a Newton step of relative size 1e-9 leaves an error ~1e-18 (quadratic rate)
            conv = (ok & (np.abs(prop - sa) <= 1e-9 * sa)) | (psi == 0) | (
                ha - la <= 1e-15 * ha)
            prop = np.where(psi == 0, sa, prop)
            dead = ha <= floor  # u outside U (round-off at an edge): no mass there
            prop = np.where(dead, 0.0, prop)
            s[active] = prop
            active = active[~(conv | dead)]
        return s

    def at_u(self, u, s0=None):
        """``(s, x, ρ, Re G, dx/du)`` at given ``u``."""
        u = np.asarray(u, dtype=float)
        R = np.empty_like(u)
        dxdu = np.zeros_like(u)
        s = self.solve_s(u, s0)
        pos = s > 0
        if np.any(pos):
            F, A, Rp, B = self.kernel.FARB(u[pos], s[pos])
            R[pos] = Rp
            dxdu[pos] = 2 * self.d2 * (s[pos] * A * A + B * B) / A
        if np.any(~pos):
            R[~pos] = self.kernel.G0_real(u[~pos])
        x = u + self.d2 * R
        return s, x, np.sqrt(s) / (np.pi * self.d2), R, dxdu

    def dx_du(self, u, s):
        F, A, R, B = self.kernel.FARB(u, s)
        return u + self.d2 * R, 2 * self.d2 * (s * A * A + B * B) / A

    def at_x(self, x, u0, s0, ulo, uhi):
        """``(u, s, ρ, Re G)`` at points ``x`` inside the support.

        ``u0, s0``: guesses; ``[ulo, uhi]``: a bracket of ``u`` (used by the fallback).
        """
        d2 = self.d2
        x = np.asarray(x, dtype=float)
        n = x.size
        om = np.asarray(u0, float) + 1j * np.sqrt(np.maximum(s0, (1e-6 * self.delta) ** 2))
        conv = np.zeros(n, bool)
        R = np.full(n, np.nan)
        active = np.arange(n)
        for _ in range(30):
            if active.size == 0:
                break
            oa = om[active]
            G, Gp = self.kernel.G_Gp_us(oa.real, oa.imag ** 2)
            res = oa + d2 * G - x[active]
            step = res / (1 + d2 * Gp)
            # converged: tiny step, or a residual at the round-off level (near edges,
            # where H' → 0, the step cannot shrink below the conditioning)
            small_res = np.abs(res) <= 4 * _EPS * (np.abs(x[active]) + np.abs(oa)
                                                   + d2 * np.abs(G))
            step = np.where(small_res, 0.0, step)
            new = oa - step
            new = new.real + 1j * np.abs(new.imag)
            fin = np.isfinite(new)
            # quadratic convergence: a step of 1e-8 Im ω leaves an error ~1e-16 Im ω
            c = (small_res | (np.abs(step) <= np.maximum(1e-8 * new.imag,
                                                          8 * _EPS * np.abs(new)))) & fin
            om[active] = np.where(fin, new, oa)
            # Re G at the new point to first order (the step is negligible at convergence)
            R[active] = (G - Gp * step).real
            conv[active[c]] = True
            active = active[~c & fin]
        u = om.real
        s = om.imag ** 2
        ok = conv & (om.imag > 0) & (u >= ulo - 1e-12 * np.abs(ulo)) & (
            u <= uhi + 1e-12 * np.abs(uhi))
        # Im ω is only known to ~eps |ω| from the complex iteration: where it is tiny
        # (small δ), re-solve F(u, s) = 1/δ² in s at the converged u (relative accuracy)
        tiny = ok & (om.imag < 1e-6 * np.abs(om))
        if np.any(tiny):
            s[tiny] = self.solve_s(u[tiny], s[tiny])
        if not np.all(ok):
            bad = ~ok
            ub, sb = self._invert_bracketed(x[bad], ulo[bad], uhi[bad],
                                            np.clip(np.asarray(u0, float)[bad], ulo[bad],
                                                    uhi[bad]), np.asarray(s0, float)[bad])
            u[bad], s[bad] = ub, sb
            Gb, _ = self.kernel.G_Gp_us(ub, np.maximum(sb, _TINY))
            R[bad] = Gb.real
        return u, s, np.sqrt(s) / (np.pi * d2), R

    def _invert_bracketed(self, x, lo, hi, u0, s0):
        state = {"s": np.array(s0, dtype=float, copy=True)}

        def fun(u, idx):
            s = self.solve_s(u, state["s"][idx])
            state["s"][idx] = s
            xu, dx = self.dx_du(u, np.maximum(s, _TINY))
            return xu - x[idx], dx

        u = _bracketed_newton(fun, lo, hi, u0, increasing=True)
        return u, self.solve_s(u, state["s"])


class _DensityEvaluator:
    """δ = 0 with a continuous part: ``u = x``, ``ρ = ρ0``, ``R = Re G_c`` (no atoms)."""

    def __init__(self, density, real_cauchy):
        self.density = density
        self.real_cauchy = real_cauchy

    def at_x(self, x, u0=None, s0=None, ulo=None, uhi=None):
        x = np.asarray(x, dtype=float)
        return x.copy(), np.zeros_like(x), np.asarray(self.density(x), float), np.asarray(
            self.real_cauchy(x), float)
