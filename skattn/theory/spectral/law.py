"""The convolved law ``μ_δ = μ0 ⊞ SC(δ²)``: integrals, pointwise values, quantiles and
samples, computed on the panel quadrature of :mod:`.builder` (see the package docstring for
the method), and the public constructors."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from scipy.interpolate import PchipInterpolator

from ..._validation import check_random_state_arg, check_scalar_range
from ..laws import DiscreteLaw, SpectralLaw, WishartLaw
from .builder import PanelQuadrature
from .kernels import _DiscreteKernel
from .quadrature import _bary, _panel_inverse, _panel_map, take_rows
from .rootfinding import _EPS, _bracketed_newton

__all__ = [
    "ConvolvedLaw",
    "free_convolution",
    "semicircle_law",
    "squared_relu_moment",
    "relu_divided_difference",
    "x_relu_moment",
    "mass_below",
]


def _uniform_sampler(random_state):
    """``n ↦ n`` uniforms on [0, 1) from a seed, a RandomState or a numpy Generator."""
    # sklearn's check_random_state does not take Generators: use theirs directly
    if isinstance(random_state, np.random.Generator):
        return random_state.random
    return check_random_state_arg(random_state).random_sample


class ConvolvedLaw:
    """The law ``μ_δ = μ0 ⊞ SC(δ²)`` of ``S0 + δ Z``, with a quadrature adapted to it.

    Build it with :func:`free_convolution`. For ``δ = 0`` it represents μ0 itself (atoms
    included) through the same interface.

    Parameters
    ----------
    law : SpectralLaw
        The target law μ0.
    delta : float
        The noise level δ ≥ 0.
    rtol : float, default=1e-10
        Tolerance of the adaptive refinement (see :func:`free_convolution`).

    Attributes
    ----------
    law : SpectralLaw
        The target law μ0.
    delta : float
        The noise level δ ≥ 0.
    intervals : list of tuple of float
        Support intervals ``(a, b)`` of the continuous part, increasing.
    atoms : ndarray of shape (n_atoms, 2)
        Rows ``(location, mass)``; empty for δ > 0.
    nodes : ndarray of shape (n_nodes,)
        Quadrature nodes of the continuous part (increasing).
    weights : ndarray of shape (n_nodes,)
        Quadrature weights: ``∫ f ρ_δ dx ≈ Σ weights · f(nodes)`` for smooth ``f``.
    density_nodes : ndarray of shape (n_nodes,)
        ``ρ_δ`` at the nodes.
    hilbert_nodes : ndarray of shape (n_nodes,)
        ``Re G_δ(x + i0)`` at the nodes (for δ = 0: of the continuous part only).
    n_panels : int
        Number of quadrature panels (21-point Gauss–Kronrod rule on each).
    """

    def __init__(self, law, delta, *, rtol=1e-10, template=None):
        self.law = law
        self.delta = float(delta)
        self.rtol = float(rtol)
        self._quad = PanelQuadrature(law, self.delta, rtol=self.rtol, template=template)
        self.atoms = self._quad.atoms
        self.intervals = self._quad.intervals
        # results derived from the panels, dropped whenever more components get built
        self._split_cache = OrderedDict()
        self._table = None

    def _ensure(self, mask=None):
        """Build the components selected by ``mask`` (all if None); see
        :meth:`PanelQuadrature.ensure`."""
        if self._quad.ensure(mask):
            self._split_cache.clear()
            self._table = None

    @property
    def nodes(self):
        """Quadrature nodes of the continuous part (increasing)."""
        self._ensure()
        return self._quad.node_values["x"].ravel()

    @property
    def weights(self):
        """Quadrature weights: ``∫ f ρ_δ dx ≈ Σ weights · f(nodes)`` for smooth ``f``."""
        self._ensure()
        return self._quad.node_values["W"].ravel()

    @property
    def density_nodes(self):
        """``ρ_δ`` at the nodes."""
        self._ensure()
        return self._quad.node_values["rho"].ravel()

    @property
    def hilbert_nodes(self):
        """``Re G_δ(x + i0)`` at the nodes (δ = 0: of the continuous part only)."""
        self._ensure()
        return self._quad.node_values["R"].ravel()

    @property
    def n_panels(self):
        """Number of quadrature panels."""
        self._ensure()
        return self._quad.panels["xp"].size

    # -- basic properties -------------------------------------------------------------

    def __repr__(self):
        return (f"ConvolvedLaw(law={self.law!r}, delta={self.delta!r}, "
                f"n_intervals={len(self.intervals)})")

    def support(self):
        """Smallest interval ``(lo, hi)`` holding the support (atoms included)."""
        pts = [a for ab in self.intervals for a in ab] + list(self.atoms[:, 0])
        return float(min(pts)), float(max(pts))

    def expect(self, f):
        """``∫ f dμ_δ`` for a vectorised callable ``f`` (accurate for smooth ``f``).

        For integrands with a kink use :meth:`relu_moment` and friends, which split the
        quadrature at the kink.
        """
        out = np.sum(self.weights * np.asarray(f(self.nodes), dtype=float))
        if self.atoms.size:
            out += np.sum(self.atoms[:, 1] * np.asarray(f(self.atoms[:, 0]), dtype=float))
        return float(out)

    def moment(self, k):
        """``∫ x^k μ_δ(dx)``."""
        k = int(k)
        return self.expect(lambda x: x ** k)

    def mean(self):
        """``∫ x μ_δ(dx)`` (equal to the mean of μ0)."""
        return self.moment(1)

    def second_moment(self):
        """``∫ x² μ_δ(dx) = Q0 + δ²``."""
        return self.moment(2)

    def density_power_integral(self, power=3):
        """``∫ ρ_δ(x)^power dx`` of the continuous part (e.g. ``power = 3`` for §7)."""
        return float(np.sum(self.weights * self.density_nodes ** (power - 1)))

    # -- pointwise evaluation ---------------------------------------------------------

    def _locate(self, x):
        """Index of the panel containing each x (−1 if in none)."""
        self._ensure()
        pan = self._quad.panels
        P = pan["xp"].size
        if P == 0:
            return np.full(np.shape(x), -1)
        k = np.minimum(np.searchsorted(pan["xq"], x, side="left"), P - 1)
        inside = (x >= pan["xp"][k]) & (x <= pan["xq"][k])
        # the outer edges of a component belong to the outside (density 0 there)
        inside &= ~(((x == pan["xp"][k]) & pan["sl"][k]) | ((x == pan["xq"][k]) & pan["sr"][k]))
        return np.where(inside, k, -1)

    def _real_outside(self, x):
        """``G_δ(x)`` for real x outside the support: real ω in the gaps of U."""
        d2 = self._quad.evaluator.d2
        ulo = np.array([c[0] for c in self._quad.components_u])
        uhi = np.array([c[1] for c in self._quad.components_u])
        xlo = np.array([a for a, _ in self.intervals])
        j = np.searchsorted(xlo, x)  # x lies right of component j − 1, left of j
        # left of everything: u ∈ [x, ulo[0]] (G0 < 0 there); right: u ∈ [uhi[-1], x]
        lo = np.where(j > 0, uhi[np.maximum(j - 1, 0)], x)
        hi = np.where(j < ulo.size, ulo[np.minimum(j, ulo.size - 1)], x)
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        kern = self._quad.kernel

        def fun(u, idx):
            return u + d2 * kern.G0_real(u) - x[idx], 1 - d2 * kern.F0(u)

        u = _bracketed_newton(fun, lo, hi, 0.5 * (lo + hi), increasing=True)
        return kern.G0_real(u)

    def cauchy_boundary(self, x):
        """``G_δ(x + i0)`` on the real line (vectorised).

        The real part is the principal-value Hilbert transform ``PV ∫ μ_δ(dy)/(x − y)``
        and the imaginary part is ``−π ρ_δ(x)``. For δ = 0 this is ``G_0(x + i0)``
        (infinite at atoms).
        """
        x = np.asarray(x, dtype=float)
        flat = x.ravel()
        if self.delta == 0:
            k0 = self._quad.kernel
            with np.errstate(divide="ignore", invalid="ignore"):
                if isinstance(k0, _DiscreteKernel):
                    return k0.G0_real(flat).astype(complex).reshape(x.shape)
                return np.asarray(k0.G_Gp(flat + 0j)[0], complex).reshape(x.shape)
        out = np.empty(flat.shape, complex)
        k = self._locate(flat)
        ins = k >= 0
        if np.any(ins):
            kk = k[ins]
            tx, tu, ts = self._quad.guess_table
            xi = flat[ins]
            pan = self._quad.panels
            _, _, rho, R = self._quad.evaluator.at_x(xi, np.interp(xi, tx, tu),
                                                     np.interp(xi, tx, ts), pan["up"][kk],
                                                     pan["uq"][kk])
            out[ins] = R - 1j * np.pi * rho
        if np.any(~ins):
            out[~ins] = self._real_outside(flat[~ins])
        return out.reshape(x.shape)

    def density(self, x):
        """Density ``ρ_δ(x)`` of the continuous part (vectorised; atoms excluded)."""
        x = np.asarray(x, dtype=float)
        if self.delta == 0:
            if self._quad.evaluator is None:
                return np.zeros_like(x)
            return np.asarray(self.law.density(x), dtype=float)
        return np.maximum(-self.cauchy_boundary(x).imag / np.pi, 0.0)

    # -- the ε-split quadrature ---------------------------------------------------------

    def _split(self, eps):
        """Quadrature of the continuous part split at ε.

        Returns ``(x_below, W_below, R_below, x_above, W_above, R_above, ρ(ε))``.
        """
        eps = float(eps)
        cache = self._split_cache
        if eps in cache:
            cache.move_to_end(eps)
            return cache[eps]
        self._ensure(self._quad.root_panels["xq"] > eps)
        cache = self._split_cache  # (building clears the cache)
        nod, pan = self._quad.node_values, self._quad.panels
        P = pan["xp"].size
        keys = ("x", "W", "R")
        if P == 0:
            z = np.zeros(0)
            res = (z, z, z, z, z, z, 0.0)
        else:
            k = int(np.searchsorted(pan["xq"], eps, side="right"))  # first panel: xq > ε
            if k < P and pan["xp"][k] < eps:
                sd, rho = self._split_panel(k, eps)
                below = [np.concatenate([nod[key][:k].ravel(), sd[key][0]]) for key in keys]
                above = [np.concatenate([sd[key][1], nod[key][k + 1:].ravel()]) for key in keys]
            else:
                rho = 0.0
                below = [nod[key][:k].ravel() for key in keys]
                above = [nod[key][k:].ravel() for key in keys]
            res = (*below, *above, rho)
        cache[eps] = res
        if len(cache) > 8:
            cache.popitem(last=False)
        return res

    def _split_panel(self, k, eps):
        """The two parts of panel ``k`` cut at ``x = ε``, and ``ρ(ε)``.

        The parts are the parameter ranges ``[0, t_ε]`` and ``[t_ε, 1]`` of the panel's
        own map, so the integrand stays as smooth as on the whole panel.
        """
        pan, nod, R = self._quad.panels, self._quad.node_values, self._quad.rule
        one = take_rows(pan, slice(k, k + 1))
        onen = take_rows(nod, slice(k, k + 1))
        p, q = self._quad.coords(one)
        rho_e = None
        if self.delta == 0 or self._quad.panel_space == "x":
            t_e = float(_panel_inverse(p, q, one["sl"], one["sr"], np.array([[eps]]))[0, 0])
        else:  # u-space: u_ε from Newton on the subordination equation
            X = np.concatenate([one["xp"], onen["x"][0], one["xq"]])
            tt = np.array([[np.interp(eps, X, R["ext"])]])
            U = np.concatenate([one["up"], onen["u"][0], one["uq"]])[None, :]
            S = np.concatenate([one["sp"], onen["s"][0], one["sq"]])[None, :]
            u0, s0 = _bary(U, tt)[:, 0], np.maximum(_bary(S, tt)[:, 0], 0.0)
            u_e, _, rho, _ = self._quad.evaluator.at_x(np.array([eps]), u0, s0, one["up"],
                                                       one["uq"])
            rho_e = float(rho[0])
            t_e = float(_panel_inverse(p, q, one["sl"], one["sr"], u_e[:, None])[0, 0])
        ta = np.array([[0.0], [t_e]])
        tb = np.array([[t_e], [1.0]])
        tt = ta + (tb - ta) * R["t"][None, :]
        two = lambda a: np.concatenate([a, a])  # noqa: E731
        y, dy = _panel_map(two(p), two(q), two(one["sl"]), two(one["sr"]), tt)
        dy = dy * (tb - ta)
        n = y.shape[1]
        lo, hi = np.full(2 * n, one["up"][0]), np.full(2 * n, one["uq"][0])
        guess = extra = None
        if self.delta > 0:
            U = np.concatenate([one["up"], onen["u"][0], one["uq"]])[None, :]
            S = np.concatenate([one["sp"], onen["s"][0], one["sq"]])[None, :]
            U2, S2 = np.repeat(U, 2, 0), np.repeat(S, 2, 0)
            guess = (_bary(U2, tt), np.maximum(_bary(S2, tt), 0.0))
            if rho_e is None:
                te = np.array([[t_e]])
                extra = (np.array([eps]), one["up"], one["uq"], _bary(U, te)[:, 0],
                         np.maximum(_bary(S, te)[:, 0], 0.0))
        elif rho_e is None:
            extra = (np.array([eps]), None, None, None, None)
        sd, ext = self._quad.eval_nodes(y, dy, lo, hi, guess, extra)
        if rho_e is None:
            rho_e = float(ext[3][0])
        return sd, rho_e

    def _atoms_above(self, eps):
        if not self.atoms.size:
            return np.zeros(0), np.zeros(0)
        a, m = self.atoms[:, 0], self.atoms[:, 1]
        sel = a > eps
        return a[sel], m[sel]

    def relu_moment(self, eps, power=1):
        """``∫ (x − ε)₊^power μ_δ(dx)`` (``power = 0`` gives ``μ_δ((ε, ∞))``)."""
        if np.ndim(eps):
            return np.vectorize(lambda e: self.relu_moment(e, power))(eps)
        power = check_scalar_range(power, "power", low=0)
        _, _, _, xa, Wa, _, _ = self._split(eps)
        a, m = self._atoms_above(eps)
        if power == 0:
            return float(np.sum(Wa) + np.sum(m))
        return float(np.sum(Wa * (xa - eps) ** power) + np.sum(m * (a - eps) ** power))

    def J(self, eps):
        """The squared-ReLU moment ``J(δ, ε) = ∫ (x − ε)₊² μ_δ(dx)`` (the paper's J).

        The limit of ``Tr ReLU(S0 + δZ − ε)²/d``: the overlap ``q = η² J`` of the state
        evolution. Same as ``relu_moment(eps, 2)``.

        Parameters
        ----------
        eps : float or array-like
            The threshold ε.

        Returns
        -------
        float or ndarray
            ``J(δ, ε)`` (an array of the shape of ``eps`` for array input).
        """
        return self.relu_moment(eps, 2)

    def x_relu_moment(self, eps):
        """``∫ x (x − ε)₊ μ_δ(dx)``."""
        if np.ndim(eps):
            return np.vectorize(self.x_relu_moment)(eps)
        _, _, _, xa, Wa, _, _ = self._split(eps)
        a, m = self._atoms_above(eps)
        return float(np.sum(Wa * xa * (xa - eps)) + np.sum(m * a * (a - eps)))

    def mass_below(self, eps):
        """``μ_δ((−∞, ε])``: the mass of the atom at zero of ``ReLU(S0 + δZ − ε)``."""
        if np.ndim(eps):
            return np.vectorize(self.mass_below)(eps)
        return float(min(1.0, max(0.0, 1.0 - self.mass_above(eps))))

    def mass_above(self, eps):
        """``μ_δ((ε, ∞)) = 1 − mass_below(ε)``."""
        if np.ndim(eps):
            return np.vectorize(self.mass_above)(eps)
        return self.relu_moment(eps, 0)

    def D(self, eps):
        """The mean divided difference of the ReLU, ``D(δ, ε)`` (the paper's D).

        ``D(δ, ε) = ∫∫ ((x − ε)₊ − (y − ε)₊)/(x − y) μ_δ(dx) μ_δ(dy)``: the limit of the
        normalised divergence ``(1/d²) Σ_ij`` of the divided differences of the spectral
        map ``M ↦ ReLU(M − ε)`` at ``M = S0 + δZ`` (the Σ of the state evolution), and
        ``∂J/∂δ = 2 δ D``.

        For δ > 0, ``D = 2 ∫ (x − ε)₊ Re G_δ(x + i0) ρ_δ(x) dx``. For δ = 0 the atoms are
        handled exactly (the divided difference at coinciding points is the derivative
        ``1{x > ε}``, with value 1/2 at ``x = ε``).

        Parameters
        ----------
        eps : float or array-like
            The threshold ε.

        Returns
        -------
        float or ndarray
            ``D(δ, ε)`` (an array of the shape of ``eps`` for array input).
        """
        if np.ndim(eps):
            return np.vectorize(self.D)(eps)
        eps = float(eps)
        xb, Wb, _, xa, Wa, Ra, _ = self._split(eps)
        # D is unchanged by f → f − c; taking c = f(left end of the continuous part) keeps
        # the antisymmetry identity valid at a hard edge (μ0 = MP with κ0 = 1 at δ = 0).
        # (c > 0 only when ε lies left of the whole continuous part: nothing is below.)
        c = max(self.intervals[0][0] - eps, 0.0) if self.intervals else 0.0
        out = 2 * np.sum(Wa * (xa - eps - c) * Ra)
        if self.delta > 0 or not self.atoms.size:
            return float(out)
        a, m = self.atoms[:, 0], self.atoms[:, 1]
        fa = np.maximum(a - eps, 0.0)
        # atom–continuous terms: 2 Σ_a m_a ∫ (f(x) − f(a))/(x − a) ρ(x) dx
        if xa.size + xb.size:
            xs = np.concatenate([xb, xa])
            Ws = np.concatenate([Wb, Wa])
            fx = np.concatenate([np.zeros_like(xb), xa - eps])
            dd = (fx[None, :] - fa[:, None]) / (xs[None, :] - a[:, None])
            out += 2 * np.sum(m[:, None] * Ws[None, :] * dd)
        # atom–atom terms
        above, at, below = a > eps, a == eps, a < eps
        Wp, We = np.sum(m[above]), np.sum(m[at])
        out += Wp * Wp + 2 * Wp * We + 0.5 * We * We
        if np.any(above) and np.any(below):
            ai, mi = a[above], m[above]
            aj, mj = a[below], m[below]
            out += 2 * np.sum((mi * (ai - eps))[:, None] * mj[None, :]
                              / (ai[:, None] - aj[None, :]))
        return float(out)

    # -- quantiles and sampling ---------------------------------------------------------

    def _cdf_tables(self):
        """Per-interval ``(CDF − CDF(start), x)`` tables of the continuous part."""
        if self._table is not None:
            return self._table
        self._ensure()
        nod, pan = self._quad.node_values, self._quad.panels
        tables = []
        if pan["xp"].size:
            # ∫ from the panel start to each node (spectral integration matrix)
            inner = (nod["W"] / self._quad.rule["wk"]) @ self._quad.rule["S"].T
            mass = nod["W"].sum(axis=1)
            xs = np.concatenate([pan["xp"][:, None], nod["x"], pan["xq"][:, None]], axis=1)
            zero = np.zeros((mass.size, 1))
            cs = np.concatenate([zero, inner, mass[:, None]], axis=1)
            for a, b in self._quad.component_slices:
                start = np.concatenate([[0.0], np.cumsum(mass[a:b])[:-1]])
                X = xs[a:b].ravel()
                C = (cs[a:b] + start[:, None]).ravel()
                C = np.maximum.accumulate(C)
                keep = np.concatenate([[True], (np.diff(C) > 0) & (np.diff(X) > 0)])
                tables.append((C[keep], X[keep]))
        total = sum(C[-1] for C, _ in tables)
        cont_mass = 1.0 - (np.sum(self.atoms[:, 1]) if self.atoms.size else 0.0)
        f = cont_mass / total if total > 0 else 0.0
        self._table = [(C * f, X) for C, X in tables]
        return self._table

    def _quantile_table(self, q):
        """Approximate quantile function (inverse CDF) by monotone interpolation."""
        q = np.asarray(q, dtype=float)
        pieces = [("c", X[0], (C, X)) for C, X in self._cdf_tables()]
        pieces += [("a", a, m) for a, m in self.atoms]
        pieces.sort(key=lambda pc: pc[1])
        out = np.full(q.shape, np.nan)
        cum = 0.0
        todo = np.ones(q.shape, bool)
        for kind, loc, data in pieces:
            if kind == "a":
                sel = todo & (q <= cum + data)
                out[sel] = loc
                cum += data
            else:
                C, X = data
                sel = todo & (q <= cum + C[-1])
                if np.any(sel):
                    qq = np.clip(q[sel] - cum, 0, C[-1])
                    out[sel] = PchipInterpolator(C, X)(qq) if C.size > 1 else X[0]
                cum += C[-1]
            todo &= ~sel
        out[todo] = self.support()[1]
        return out

    def upper_quantile(self, kappa):
        """The ε with ``μ_δ((ε, ∞)) = κ`` (for the rank constraint ``p = κ d``).

        Precisely ``inf{ε : μ_δ((ε, ∞)) ≤ κ}``: with atoms (δ = 0) it may be the location
        of an atom. ``κ ≥ 1`` gives the lower end of the support, ``κ ≤ 0`` the upper end.
        """
        kappa = check_scalar_range(kappa, "kappa")
        lo_s, hi_s = self.support()
        if kappa >= 1:
            return lo_s
        if kappa <= 0:
            return hi_s
        if self.atoms.size:  # κ inside the jump of an atom → the atom
            for a, m in self.atoms:
                above = self.mass_above(a)
                if above <= kappa < above + m:
                    return float(a)
        e = float(self._quantile_table(np.array([1.0 - kappa]))[0])

        def g(e):
            return self.mass_above(e) - kappa

        # bracket: the panel of the guess, widened until the sign changes
        pan = self._quad.panels
        k = int(np.clip(np.searchsorted(pan["xq"], e), 0, self.n_panels - 1))
        lo, hi = pan["xp"][k], pan["xq"][k]
        while g(lo) < 0 and k > 0:
            k -= 1
            lo = pan["xp"][k]
        k2 = int(np.clip(np.searchsorted(pan["xq"], e), 0, self.n_panels - 1))
        while g(hi) > 0 and k2 < self.n_panels - 1:
            k2 += 1
            hi = pan["xq"][k2]
        e = float(np.clip(e, lo, hi))
        for _ in range(100):
            val = g(e)
            if val == 0:
                return e
            if val > 0:
                lo = e
            else:
                hi = e
            rho = self._split(e)[6]
            e_new = e + val / rho if rho > 0 else np.nan
            if not lo < e_new < hi:
                e_new = 0.5 * (lo + hi)
            if abs(e_new - e) <= 4 * _EPS * max(abs(e), 1.0):
                return float(e_new)
            e = e_new
        return float(e)

    def sample_eigenvalues(self, n, random_state=None, method="random"):
        """Draw ``n`` points from μ_δ by the quantile transform.

        Parameters
        ----------
        n : int
            Number of points.
        random_state : None, int, numpy Generator or RandomState, default=None
            Seed of the uniforms (``method="random"``); a fixed seed gives a fixed draw.
        method : {"random", "quantile"}, default="random"
            ``"random"``: i.i.d. draws; ``"quantile"``: the deterministic quantiles at
            ``(i + 1/2)/n`` (a typical spectrum).

        Returns
        -------
        ndarray of shape (n,)
            The points in increasing order. The quantile function is a monotone
            interpolation between quadrature nodes (accurate to about 1e-6 relative).
        """
        n = check_scalar_range(n, "n", low=0, integer=True)
        if method == "random":
            q = np.sort(_uniform_sampler(random_state)(n))
        elif method == "quantile":
            q = (np.arange(n) + 0.5) / n
        else:
            raise ValueError(f"method must be 'random' or 'quantile', got {method!r}.")
        return self._quantile_table(q)




_CACHE = OrderedDict()
_CACHE_SIZE = 16


def _law_key(law):
    if isinstance(law, WishartLaw):
        return ("wishart", float(law.rank_ratio))
    if isinstance(law, DiscreteLaw):
        e = np.ascontiguousarray(law.eigenvalues)
        return ("discrete", e.size, hash(e.tobytes()))
    return None


#: δ relative to the law's root-mean-square scale, where the quadrature holds in float64:
#: below, a discrete law's panels lost its whole mass (second moment 0 at δ = 1e-20, none
#: converging at 1e-100) and Marchenko–Pastur's edge search failed (1e-50); above (1e50),
#: the edge search failed too. 1e-12 still converged (24 s), 1e20 exactly.
MIN_RELATIVE_DELTA = 1e-10
MAX_RELATIVE_DELTA = 1e15


def _check_relative_delta(law, delta):
    if delta == 0:
        return
    with np.errstate(all="ignore"):
        scale = float(np.sqrt(law.second_moment()))
    if not (np.isfinite(scale) and scale > 0):
        return  # the law itself is refused (or is a point at 0) elsewhere
    # a discrete law under a much wider semicircle is that semicircle (exact there); the
    # upper bound guards the continuous laws' edge search
    high = np.inf if isinstance(law, DiscreteLaw) else MAX_RELATIVE_DELTA
    if not MIN_RELATIVE_DELTA <= delta / scale <= high:
        raise ValueError(
            f"delta={delta:.3g} is {delta / scale:.3g} times the law's root-mean-square "
            f"scale {scale:.3g}, outside [{MIN_RELATIVE_DELTA:g}, {high:g}] "
            "where the free convolution's quadrature holds in float64 (use delta=0 for "
            "the law itself).")


def free_convolution(law, delta, *, rtol=1e-10, warm_start=None):
    """The law ``μ0 ⊞ SC(δ²)`` of ``S0 + δ Z``, with its quadrature.

    Parameters
    ----------
    law : SpectralLaw
        Target law μ0 (:class:`~skattn.theory.WishartLaw`,
        :class:`~skattn.theory.DiscreteLaw`, or any law with ``cauchy_transform``,
        ``cauchy_derivative`` and ``support``, whose support is one interval).
    delta : float
        Noise level δ ≥ 0 (the semicircle has variance δ², i.e. ``Z`` is GOE with
        spectrum on [−2, 2]). ``δ = 0`` returns μ0 itself through the same interface
        (atoms included). A positive δ must lie within ``[1e-10, 1e15]`` times the law's
        root-mean-square scale ``√Q0`` (ValueError otherwise).
    rtol : float, default=1e-10
        Tolerance of the adaptive refinement: a panel is accepted when its 10-point Gauss
        and 21-point Kronrod integrals of ``1, x, x², Re G`` (normalised by the support
        scale) agree to ``rtol``; the Kronrod result is then far more accurate.

    warm_start : ConvolvedLaw or None, default=None
        The same law convolved at a nearby δ (a fixed-point iteration's previous
        evaluation): the refinement then starts from its panel layout, relative to each
        support component (in u for a discrete law, in x, whose edges move with δ, for
        the others), which near convergence is accepted at once (every panel still passes
        the same ``rtol`` test). Ignored for another law or another ``rtol``. A
        warm-started result is neither taken from nor put in the cache, so that a result
        depends only on the calls that led to it.

    Returns
    -------
    ConvolvedLaw
        Results are cached for a few recent ``(law, δ, rtol)``, so repeated calls with
        the same arguments are free.

    Examples
    --------
    >>> from skattn.theory import WishartLaw
    >>> from skattn.theory.spectral import free_convolution
    >>> mu = free_convolution(WishartLaw(0.5), 0.3)
    >>> round(mu.second_moment(), 12)  # Q0 + δ² = 1.5 + 0.09
    1.59
    """
    if not isinstance(law, SpectralLaw):
        raise TypeError(f"law must be a SpectralLaw, got {type(law).__name__}.")
    delta = check_scalar_range(delta, "delta", low=0)
    rtol = check_scalar_range(rtol, "rtol", low=0, low_inclusive=False)
    _check_relative_delta(law, delta)
    if isinstance(warm_start, ConvolvedLaw) and warm_start.law is law and \
            warm_start.rtol == rtol and delta > 0:
        if warm_start.delta == delta:
            return warm_start
        # without a layout (nothing built yet) a cold build, but not the cache's either:
        # a cached law's panels depend on the queries of earlier callers
        return ConvolvedLaw(law, delta, rtol=rtol, template=warm_start._quad.template())
    key = _law_key(law)
    if key is not None:
        key = (key, delta, rtol)
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    out = ConvolvedLaw(law, delta, rtol=rtol)
    if key is not None:
        _CACHE[key] = out
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return out


def semicircle_law(delta):
    """Semicircle law of variance δ² (``DiscreteLaw([0]) ⊞ SC(δ²)``), support [−2δ, 2δ]."""
    return free_convolution(DiscreteLaw([0.0]), delta)


def squared_relu_moment(law, delta, eps):
    """The squared-ReLU moment ``J(δ, ε) = ∫ (x − ε)₊² μ_δ(dx)``, ``μ_δ = law ⊞ SC(δ²)``.

    Shortcut for ``free_convolution(law, delta).J(eps)`` (see :meth:`ConvolvedLaw.J`).
    """
    return free_convolution(law, delta).J(eps)


def relu_divided_difference(law, delta, eps):
    """The mean divided difference of the ReLU under ``μ_δ = law ⊞ SC(δ²)``:
    ``D(δ, ε) = ∫∫ ((x−ε)₊ − (y−ε)₊)/(x − y) μ_δ(dx) μ_δ(dy)``.

    Shortcut for ``free_convolution(law, delta).D(eps)`` (see :meth:`ConvolvedLaw.D`).
    """
    return free_convolution(law, delta).D(eps)


def x_relu_moment(law, delta, eps):
    """``∫ x (x − ε)₊ μ_δ(dx)`` with ``μ_δ = law ⊞ SC(δ²)``."""
    return free_convolution(law, delta).x_relu_moment(eps)


def mass_below(law, delta, eps):
    """``μ_δ((−∞, ε])`` with ``μ_δ = law ⊞ SC(δ²)``."""
    return free_convolution(law, delta).mass_below(eps)
