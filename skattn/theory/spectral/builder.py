"""Building the adaptive panel quadrature of ``μ_δ = μ0 ⊞ SC(δ²)``.

:class:`PanelQuadrature` finds the support components, covers them with Gauss–Kronrod
panels refined until the embedded Gauss rule agrees (see the package docstring), and keeps
the node values ``x, u, s, ρ, Re G`` and weights. :class:`~.law.ConvolvedLaw` answers the
queries on them.
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_memory
from ..laws import DiscreteLaw, WishartLaw
from .evaluators import _DensityEvaluator, _SubordinationEvaluator
from .kernels import _DiscreteKernel, _GenericKernel, _make_kernel, _WishartKernel
from .quadrature import (NODE_KEYS, PANEL_KEYS, _bary, _gk21, _panel_inverse, _panel_map,
                         concat_rows, take_rows)
from .rootfinding import _TINY


def _level_bytes(n_panels):
    """Peak float64 memory of evaluating ``n_panels`` panels: the (P, 21, 23) barycentric
    tables of the initial guesses and about forty (P, 21) node arrays."""
    return 8 * n_panels * 21 * (3 * 23 + 40)


class PanelQuadrature:
    """Adaptive Gauss–Kronrod panels on the continuous part of ``μ_δ`` (internal).

    Components of the support are built lazily by :meth:`ensure`. For ``δ = 0`` the
    continuous part of μ0 is built at once and its atoms are kept apart.

    Parameters
    ----------
    law : SpectralLaw
        The target law μ0.
    delta : float
        The noise level δ ≥ 0.
    rtol : float, default=1e-10
        Tolerance of the adaptive refinement.

    Attributes
    ----------
    atoms : ndarray of shape (n_atoms, 2)
        Rows ``(location, mass)``; empty for δ > 0.
    intervals : list of tuple of float
        Support intervals ``(a, b)`` of the continuous part, increasing.
    kernel : _Kernel
        The kernel of μ0 (at δ = 0 too: the law's Cauchy transform comes from it).
    evaluator : _SubordinationEvaluator, _DensityEvaluator or None
        Maps points of the support to ``(u, s, ρ, Re G)``; None for a purely atomic law.
    panel_space : {"x", "u"}
        The variable the panels are uniform in (``u`` for discrete targets at δ > 0).
    root_panels : dict of ndarray
        One panel per support component (the ``PANEL_KEYS`` arrays).
    built : ndarray of bool
        Which components are built.
    panels, node_values : dict of ndarray
        The built panels (sorted by x) and their node values (the ``NODE_KEYS`` arrays).
    guess_table : tuple of ndarray or None
        Sorted ``(x, u, s)`` at all panel ends and nodes, for interpolated initial guesses.
    component_slices : list of tuple of int
        Panel index ranges ``[a, b)`` of the built components.
    """

    _GRADE = 0.15
    _MAX_DEPTH = 60
    _PRESPLIT = (0.1, 0.5, 0.9)

    def __init__(self, law, delta, *, rtol=1e-10, template=None):
        self.law = law
        self.delta = float(delta)
        self.rtol = float(rtol)
        self.rule = _gk21()
        # panel layouts of a quadrature at a nearby δ (see :meth:`template`): the
        # refinement starts from them instead of from whole components
        self._template = template
        if self.delta > 0:
            self.kernel = _make_kernel(law)
            self.evaluator = _SubordinationEvaluator(self.kernel, self.delta)
            # discrete laws: panels in u (no soft edges); others: panels in x
            self.panel_space = "u" if isinstance(self.kernel, _DiscreteKernel) else "x"
            self.atoms = np.zeros((0, 2))
            comps = self.kernel.edges_u(self.delta)
            self.components_u = comps
            ua = np.array([c[0] for c in comps], float)
            ub = np.array([c[1] for c in comps], float)
            ue = np.concatenate([ua, ub])
            xe = ue + self.evaluator.d2 * self.kernel.G0_real(ue)
            K = ua.size
            roots = dict(xp=xe[:K], xq=xe[K:], up=ua, uq=ub, sp=np.zeros(K),
                         sq=np.zeros(K), sl=np.ones(K, bool), sr=np.ones(K, bool))
        else:
            self.panel_space = "x"
            roots = self._init_delta0()
        if roots is None:
            roots = {k: np.zeros(0) for k in PANEL_KEYS}
            roots.update(sl=np.zeros(0, bool), sr=np.zeros(0, bool))
        self.root_panels = roots
        self.intervals = [(float(a), float(b)) for a, b in zip(roots["xp"], roots["xq"])]
        self.built = np.zeros(roots["xp"].size, bool)
        self._parts = []
        self.panels = take_rows(roots, slice(0, 0))
        self.node_values = {k: np.zeros((0, 21)) for k in NODE_KEYS}
        self._finish()
        if self.delta == 0:
            self.ensure()

    def _init_delta0(self):
        """Atoms, evaluator and root panel of μ0 itself (None: no continuous part)."""
        law = self.law
        self.components_u = []
        if isinstance(law, WishartLaw):
            k = _WishartKernel(law)
            self.kernel = k
            wa = law.atom_mass
            self.atoms = np.array([(0.0, wa)] if wa > 0 else [], float).reshape(-1, 2)
            a0, b0 = law.bulk_edges()

            def real_cauchy(x):
                with np.errstate(divide="ignore", invalid="ignore"):
                    G = k.G_Gp(np.asarray(x, dtype=float) + 0j)[0].real
                    return G - wa / x if wa > 0 else G

            self.evaluator = _DensityEvaluator(law.density, real_cauchy)
            lohi = (a0, b0)
        elif isinstance(law, DiscreteLaw):
            k = _DiscreteKernel(law.eigenvalues)
            self.kernel = k
            self.atoms = np.column_stack([k.t, k.w])
            self.evaluator = None
            return None
        elif hasattr(law, "density"):
            k = _GenericKernel(law)
            self.kernel = k
            self.atoms = np.zeros((0, 2))
            self.evaluator = _DensityEvaluator(
                law.density, lambda x: k.G_Gp(np.asarray(x, float) + 0j)[0].real)
            lohi = (k.lo, k.hi)
        else:
            raise NotImplementedError("delta = 0 needs a WishartLaw, a DiscreteLaw or a law "
                                      "with a density method.")
        a, b = (np.array([v], float) for v in lohi)
        return dict(xp=a, xq=b, up=a.copy(), uq=b.copy(), sp=np.zeros(1), sq=np.zeros(1),
                    sl=np.ones(1, bool), sr=np.ones(1, bool))

    def coords(self, pan):
        """Ends ``(p, q)`` of panels ``pan`` in the panel space."""
        return (pan["up"], pan["uq"]) if self.panel_space == "u" else (pan["xp"], pan["xq"])

    def _parent_guess(self, par, pnod, idx, y):
        """Guesses ``(u, s)`` at points ``y`` (P, m) of the panel space, interpolated
        spectrally from the parent panels ``par[idx]``."""
        p, q = self.coords(par)
        t = _panel_inverse(p[idx], q[idx], par["sl"][idx], par["sr"][idx], y)
        U = np.concatenate([par["up"][idx, None], pnod["u"][idx], par["uq"][idx, None]], 1)
        S = np.concatenate([par["sp"][idx, None], pnod["s"][idx], par["sq"][idx, None]], 1)
        return _bary(U, t), np.maximum(_bary(S, t), 0.0)

    def _root_guess(self, pan, y):
        """Guesses at the nodes ``y`` (P, m) of the root panels (whole components)."""
        if self.panel_space == "u":
            s0 = (y - pan["up"][:, None]) * (pan["uq"][:, None] - y)  # exact for one atom
            return y, np.clip(s0, 0.0, self.evaluator.d2)
        # x-space: a robust solve on a u-grid, then linear interpolation in x
        P = pan["xp"].size
        ug, _ = _panel_map(pan["up"], pan["uq"], np.ones(P, bool), np.ones(P, bool),
                           self.rule["t"])
        sg, xg, _, _, _ = self.evaluator.at_u(ug.ravel())
        tx = np.concatenate([xg, pan["xp"], pan["xq"]])
        tu = np.concatenate([ug.ravel(), pan["up"], pan["uq"]])
        ts = np.concatenate([sg, pan["sp"], pan["sq"]])
        o = np.argsort(tx, kind="stable")
        yy = y.ravel()
        return (np.interp(yy, tx[o], tu[o]).reshape(y.shape),
                np.interp(yy, tx[o], ts[o]).reshape(y.shape))

    def _nodes_of(self, pan):
        """Node coordinates (P, 21) in the panel space and their Jacobians."""
        p, q = self.coords(pan)
        return _panel_map(p, q, pan["sl"], pan["sr"], self.rule["t"])

    def _eval(self, pan, guess=None, extra=None):
        """Evaluate the nodes of panels ``pan`` (see :meth:`_eval_nodes`)."""
        y, dy = self._nodes_of(pan)
        n = y.shape[1]
        return self.eval_nodes(y, dy, np.repeat(pan["up"], n), np.repeat(pan["uq"], n),
                                guess, extra)

    def eval_nodes(self, y, dy, lo, hi, guess=None, extra=None):
        """Evaluate nodes ``y`` (P, 21) of the panel space with Jacobians ``dy``.

        ``lo, hi``: u-brackets of the nodes (flat). ``guess = (u0, s0)``: initial values at
        the nodes. ``extra = (y, lo, hi, u0, s0)``: additional points of the panel space.
        Returns the node dict and, for the extra points, ``(x, u, s, ρ)``.
        """
        R = self.rule
        m = y.size
        ys = y.ravel()
        if self.delta == 0:
            if extra is not None:
                ys = np.concatenate([ys, extra[0]])
            u, s, rho, Rr = self.evaluator.at_x(ys)
            x, jac = ys, np.ones_like(ys)
        else:
            u0, s0 = (np.ravel(g) for g in guess)
            if extra is not None:
                ys = np.concatenate([ys, extra[0]])
                lo = np.concatenate([lo, extra[1]])
                hi = np.concatenate([hi, extra[2]])
                u0 = np.concatenate([u0, extra[3]])
                s0 = np.concatenate([s0, extra[4]])
            if self.panel_space == "u":
                s, x, rho, Rr, jac = self.evaluator.at_u(ys, s0)
                u = ys
            else:
                u, s, rho, Rr = self.evaluator.at_x(ys, u0, s0, lo, hi)
                x, jac = ys, np.ones_like(ys)
        shp = y.shape
        wgt = (rho[:m] * jac[:m]).reshape(shp) * dy
        nod = dict(x=x[:m].reshape(shp), u=u[:m].reshape(shp), s=s[:m].reshape(shp),
                   rho=rho[:m].reshape(shp), R=Rr[:m].reshape(shp), W=wgt * R["wk"],
                   WG=wgt * R["wg"])
        ext = (x[m:], u[m:], s[m:], rho[m:]) if extra is not None else None
        return nod, ext

    def ensure(self, mask=None):
        """Build the panels of the support components selected by ``mask`` (all if None).

        Components are built on demand: the ε-dependent integrals only need the
        components above ε. Returns whether anything was built (so that the caller can
        drop what it derived from the previous panels).
        """
        need = ~self.built if mask is None else (np.asarray(mask, bool) & ~self.built)
        if not np.any(need):
            return False
        self._parts.append(self._refine(take_rows(self.root_panels, need),
                                        np.flatnonzero(need)))
        self.built |= need
        pan = concat_rows([p for p, _ in self._parts])
        nod = concat_rows([n for _, n in self._parts])
        order = np.argsort(pan["xp"], kind="stable")
        self.panels, self.node_values = take_rows(pan, order), take_rows(nod, order)
        self._finish()
        return True

    def _presplit(self, pan):
        """Split x-space root panels at fixed fractions (saves refinement levels)."""
        fr = self._PRESPLIT
        P, n = pan["xp"].size, len(fr) + 1
        out = {k: np.repeat(v, n) for k, v in pan.items()}
        L = pan["xq"] - pan["xp"]
        cuts = pan["xp"][:, None] + L[:, None] * np.asarray(fr)[None, :]
        xp = np.concatenate([pan["xp"][:, None], cuts], 1).ravel()
        xq = np.concatenate([cuts, pan["xq"][:, None]], 1).ravel()
        first = np.tile(np.arange(n) == 0, P)
        last = np.tile(np.arange(n) == n - 1, P)
        out["xp"], out["xq"] = xp, xq
        out["sl"] = pan["sl"].repeat(n) & first
        out["sr"] = pan["sr"].repeat(n) & last
        # u and s at the new cuts from the root guess
        inner = ~first
        ug, sg = self._root_guess(pan, cuts)
        tmp = self.evaluator.at_x(cuts.ravel(), ug.ravel(), sg.ravel(),
                                  np.repeat(pan["up"], n - 1), np.repeat(pan["uq"], n - 1))
        uc, sc = tmp[0], tmp[1]
        out["up"][inner], out["sp"][inner] = uc, sc
        out["uq"][~last], out["sq"][~last] = uc, sc
        return out

    def template(self):
        """The built components' panel layouts, for a quadrature of the same law at a
        nearby δ (``free_convolution(..., warm_start=...)``), or None (δ = 0).

        Per component (None where it is not built), in the relative coordinate of the
        component's interval in the panel space (u for discrete laws, where the atoms stay
        put as δ moves; x for the others, whose support edges move): the panel ends, the
        nodes, and their values of s/δ² and of u (relative to the component's u-interval).
        """
        if self.delta == 0 or not np.any(self.built):
            return None
        key = "u" if self.panel_space == "u" else "x"
        lo, hi = self.root_panels[key + "p"], self.root_panels[key + "q"]
        ua, ub = self.root_panels["up"], self.root_panels["uq"]
        layouts = [None] * self.built.size
        pan, nod = self.panels, self.node_values
        for c, (a, b) in zip(np.flatnonzero(self.built), self.component_slices):
            width = hi[c] - lo[c]
            ends = np.concatenate([pan[key + "p"][a:b], pan[key + "q"][b - 1:b]])
            layouts[c] = dict(space=self.panel_space, ends=(ends - lo[c]) / width,
                              nodes=(nod[key][a:b].ravel() - lo[c]) / width,
                              s=nod["s"][a:b].ravel() / self.evaluator.d2,
                              u=(nod["u"][a:b].ravel() - ua[c]) / (ub[c] - ua[c]))
        return layouts

    def _template_panels(self, pan, components):
        """Panels of the root panels ``pan`` (the components ``components``) laid out as
        in the template, with their end values and node guesses ``(u, s)``, or None where
        the template does not fit (another number of components, one not built there, or
        another panel space)."""
        layouts = self._template
        if layouts is None or len(layouts) != self.root_panels["up"].size or \
                any(layouts[c] is None or layouts[c]["space"] != self.panel_space
                    for c in components):
            return None
        layouts = [layouts[c] for c in components]
        d2, in_u = self.evaluator.d2, self.panel_space == "u"
        key = "u" if in_u else "x"
        rows = {k: [] for k in PANEL_KEYS}
        bounds = []
        for c, lay in enumerate(layouts):
            lo, hi = pan[key + "p"][c], pan[key + "q"][c]
            v = lo + lay["ends"] * (hi - lo)
            n = v.size - 1
            rows[key + "p"].append(v[:-1])
            rows[key + "q"].append(v[1:])
            rows["sl"].append((np.arange(n) == 0) & pan["sl"][c])
            rows["sr"].append((np.arange(n) == n - 1) & pan["sr"][c])
            bounds.append((lo, hi, pan["up"][c], pan["uq"][c]))
        out = {k: np.concatenate(rows[k]) for k in (key + "p", key + "q", "sl", "sr")}

        def guess(y, comp_of_y):
            """The template's (u, s) at the same relative positions as ``y`` (flat, in
            the components ``comp_of_y``); in u the guess of u is y itself."""
            u, s = y.astype(float, copy=True), np.empty(y.shape)
            for c, (lay, (lo, hi, ua, ub)) in enumerate(zip(layouts, bounds)):
                at = comp_of_y == c
                rel = (y[at] - lo) / (hi - lo)
                s[at] = np.clip(np.interp(rel, lay["nodes"], lay["s"]) * d2, 0, d2)
                if not in_u:
                    u[at] = ua + (ub - ua) * np.interp(rel, lay["nodes"], lay["u"])
            return u, s

        # the inner ends: the other coordinate and s from the evaluator; the component
        # ends are the roots'
        inner_end = np.concatenate([np.arange(r.size) > 0 for r in rows[key + "p"]])
        first = ~inner_end
        comp = np.cumsum(first) - 1
        ends = out[key + "p"]
        up, xp, sp = np.zeros(ends.size), np.zeros(ends.size), np.zeros(ends.size)
        up[first], xp[first], sp[first] = pan["up"], pan["xp"], pan["sp"]
        if np.any(inner_end):
            u_in, s_in = guess(ends[inner_end], comp[inner_end])
            if in_u:
                s_e, x_e, _, _, _ = self.evaluator.at_u(ends[inner_end], s_in)
                up[inner_end], xp[inner_end], sp[inner_end] = ends[inner_end], x_e, s_e
            else:
                ulo, uhi = pan["up"][comp[inner_end]], pan["uq"][comp[inner_end]]
                u_e, s_e, _, _ = self.evaluator.at_x(ends[inner_end], u_in, s_in, ulo, uhi)
                up[inner_end], xp[inner_end], sp[inner_end] = u_e, ends[inner_end], s_e
        last = np.r_[~inner_end[1:], True]
        uq, xq, sq = np.empty_like(up), np.empty_like(xp), np.empty_like(sp)
        uq[:-1], xq[:-1], sq[:-1] = up[1:], xp[1:], sp[1:]
        uq[last], xq[last] = pan["uq"][comp[last]], pan["xq"][comp[last]]
        sq[last] = pan["sq"][comp[last]]
        out.update(up=up, uq=uq, xp=xp, xq=xq, sp=sp, sq=sq)
        y = self._nodes_of(out)[0]
        u0, s0 = guess(y.ravel(), np.repeat(comp, y.shape[1]))
        return out, (u0.reshape(y.shape), s0.reshape(y.shape))

    def _refine(self, pan, components=None):
        """Adaptive Gauss–Kronrod panels on the root panels ``pan`` (sorted by x; the
        components ``components``): from the template's layout where there is one, and
        again from the root panels where that one is not monotone."""
        if self._template is not None and self.delta > 0 and components is not None:
            out = self._refine_from(pan, components, use_template=True)
            if out is not None and _monotone(*out, self.panel_space):
                return out
        return self._refine_from(pan, components, use_template=False)

    def _refine_from(self, pan, components, use_template):
        """:meth:`_refine` from the template's layout (``use_template``; None where it
        does not fit) or from the root panels."""
        roots = pan
        warm = self._template_panels(pan, components) \
            if use_template and self.delta > 0 and components is not None else None
        if use_template and warm is None:
            return None
        if warm is not None:
            pan, guess = warm
        elif self.delta > 0 and self.panel_space == "x" and self._PRESPLIT:
            pan = self._presplit(pan)
        if warm is None:
            guess = None if self.delta == 0 else self._root_guess(roots,
                                                                   self._nodes_of(pan)[0])
        nod, _ = self._eval(pan, guess)
        ends = np.concatenate([self.root_panels["xp"], self.root_panels["xq"]])
        xscale = max(np.max(np.abs(ends)), self.delta, _TINY)
        rscale = max(np.max(np.abs(nod["R"])), 1.0 / xscale)

        def errors(d):
            dW = d["W"] - d["WG"]
            x, R = d["x"] / xscale, d["R"] / rscale
            return np.max(np.abs(np.stack([dW.sum(1), (dW * x).sum(1), (dW * x * x).sum(1),
                                           (dW * R).sum(1)], axis=1)), axis=1)

        fin_p, fin_n = [], []
        for depth in range(self._MAX_DEPTH):
            acc = errors(nod) <= self.rtol
            if self.panel_space == "u":
                acc &= ~self._unresolved_atoms(pan, nod)
            if depth == self._MAX_DEPTH - 1:
                acc[:] = True
            if np.any(acc):
                fin_p.append(take_rows(pan, acc))
                fin_n.append(take_rows(nod, acc))
            if np.all(acc):
                break
            par, pnod = take_rows(pan, ~acc), take_rows(nod, ~acc)
            P = par["xp"].size
            # the panels double at each level where they do not converge (an extreme scale
            # of the law: 1e150 grew to 24 GB): refuse before the next level's arrays
            check_memory(_level_bytes(2 * P), f"the spectral law's quadrature (support up to "
                         f"{xscale:.3g}, delta={self.delta:.3g}: {2 * P} panels at level "
                         f"{depth + 1}, not converged)")
            p, q = self.coords(par)
            sl, sr = par["sl"], par["sr"]
            # split at the middle, or close to a singular end (the features of the density
            # at small δ sit at the edges: graded refinement reaches them in few levels)
            frac = np.where(sl & ~sr, self._GRADE, np.where(sr & ~sl, 1 - self._GRADE, 0.5))
            mid = p + frac * (q - p)
            z = np.zeros(P, bool)
            child = {k: np.concatenate([par[k], par[k]]) for k in PANEL_KEYS}
            child["sl"] = np.concatenate([sl, z])
            child["sr"] = np.concatenate([z, sr])
            key_p, key_q = ("up", "uq") if self.panel_space == "u" else ("xp", "xq")
            child[key_p] = np.concatenate([p, mid])
            child[key_q] = np.concatenate([mid, q])
            idx = np.concatenate([np.arange(P), np.arange(P)])
            guess = ext_guess = None
            if self.delta > 0:
                guess = self._parent_guess(par, pnod, idx, self._nodes_of(child)[0])
                ext_guess = self._parent_guess(par, pnod, np.arange(P), mid[:, None])
                ext_guess = (ext_guess[0][:, 0], ext_guess[1][:, 0])
            else:
                ext_guess = (mid, np.zeros(P))
            nod, ext = self._eval(child, guess,
                                  extra=(mid, par["up"], par["uq"], *ext_guess))
            xm, um, sm, _ = ext
            child["xq"][:P], child["xp"][P:] = xm, xm
            child["uq"][:P], child["up"][P:] = um, um
            child["sq"][:P], child["sp"][P:] = sm, sm
            pan = child
        pan, nod = concat_rows(fin_p), concat_rows(fin_n)
        order = np.argsort(pan["xp"], kind="stable")
        return take_rows(pan, order), take_rows(nod, order)

    def _unresolved_atoms(self, pan, nod):
        """Panels holding several atoms whose ripples in the density are not negligible.

        Atoms at spacing g seen at height v = Im ω make ripples of relative size about
        ``exp(−2π v / g)`` that 21 nodes cannot follow across many atoms, and that the
        Gauss/Kronrod comparison can miss (both rules alias them alike).
        """
        t = self.kernel.t
        n_in = np.searchsorted(t, pan["uq"]) - np.searchsorted(t, pan["up"])
        g = (pan["uq"] - pan["up"]) / np.maximum(n_in, 1)
        vmin = np.sqrt(np.min(nod["s"], axis=1))
        ripple = np.exp(-2 * np.pi * vmin / g)
        return (n_in > 2) & (ripple > 1e-3 * self.rtol)

    def _finish(self):
        """Tables derived from the panels: initial guesses and support components."""
        nod, pan = self.node_values, self.panels
        P = pan["xp"].size
        if P:
            tx = np.concatenate([pan["xp"], pan["xq"], nod["x"].ravel()])
            tu = np.concatenate([pan["up"], pan["uq"], nod["u"].ravel()])
            ts = np.concatenate([pan["sp"], pan["sq"], nod["s"].ravel()])
            o = np.argsort(tx, kind="stable")
            self.guess_table = (tx[o], tu[o], ts[o])
        else:
            self.guess_table = None
        # components: runs of panels sharing an end
        comps = []
        start = 0
        for i in range(1, P + 1):
            if i == P or pan["xp"][i] != pan["xq"][i - 1]:
                comps.append((start, i))
                start = i
        self.component_slices = comps


def _monotone(pan, nod, panel_space):
    """Whether the built panels' nodes have the other coordinate strictly increasing along
    theirs (x(u) is an increasing map on each support component). A warm start whose
    node guesses led the root solves astray can leave a panel at one clamped (u, s), whose
    Gauss and Kronrod sums then agree: such a build is redone from the root panels."""
    if pan["xp"].size == 0:
        return True
    key, other = ("u", "x") if panel_space == "u" else ("x", "u")
    order = np.argsort(nod[key].ravel(), kind="stable")
    values = nod[other].ravel()[order]
    return bool(np.all(np.diff(values) > 0))
