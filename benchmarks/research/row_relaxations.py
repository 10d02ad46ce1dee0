"""Which relaxation of the symmetric prox would certify the nodes that the row-wise dual leaves.

The T ≥ 3 certificate relaxes the symmetric pre-activation H of a node's prox to
independent rows, coupled only through the antisymmetric multipliers ν of the found point
(docs: Theory). Where some row has a lower minimum under those ν, no split of the
quadratic closes the gap at many nodes of large β. This study solves a grid point, runs
one certified prox evaluation at its fixed point on fresh Gaussian nodes
(``SoftmaxChannel.prox(..., return_certified=True)``), and measures at the nodes left
uncertified how much of that gap four relaxations leave (each lower value found by
multi-start L-BFGS, so an estimate, not a proof):

* ``rows``: every pair relaxed (today's bound, equal split): the sum of the rows' gaps;
* ``pair``: the one pair (a, c) kept exact, a the row with the largest gap, c the best of
  the others; the other pairs relaxed by ν: the least of ``ψ_a(η) + ψ_c(η)`` over the
  shared entry η, each ψ a row's least value with that entry fixed (a one-dimensional
  search);
* ``star``: every pair that touches a row with a gap kept exact (a problem in the shared
  entries of those rows);
* ``envelope``: the star of the row with the largest gap alone, each column row's response
  ``ψ_c(η)`` (its least value with its entry in that column fixed at η) replaced by its
  convex envelope. Each affine piece of an envelope, ``min_h φ_c(h) − λh_a + λη``, is one
  shifted row problem, which the row-wise search already certifies; so this is the
  relaxation a certificate could prove with the tools it has, plus a search over the row
  with convex piecewise-linear terms added.

A relaxation would certify a node where its gap is above ``-tol``, the certificate's
tolerance. A node whose found point is not global keeps a gap under every relaxation.

Points: the seed-0 speed-grid points with uncertified nodes (T = 4 points 1 and 3, T = 6
points 2 and 5), T = 3 seed 0 point 3 (the fitting point of the unequal splits) and the
T = 4 ghost (seed 0 point 2, Σ ≈ 45), solved from its reported state.

Usage: ``python benchmarks/research/row_relaxations.py [--quick] [--max-nodes 150]
[--results-dir DIR]``; writes ``row_relaxations.json``. About 20 minutes on the 2-core
machine. ``--quick``: one T = 3 point on 1024 nodes, at most 3 nodes.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np
from _common import add_common_arguments, write_result
from scipy.optimize import minimize

from skattn.theory.channels import SoftmaxChannel, h_from_u

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from run_benchmarks import grid_configurations, solve_grid_point  # noqa: E402

POINTS = [(4, 0, 1), (4, 0, 3), (6, 0, 2), (6, 0, 5), (3, 0, 3), (4, 0, 2)]
#: the T = 4 ghost is solved from its reported state (``ghost_point.py``; about 70 s)
INITS = {(4, 0, 2): (10.30, 99.6, 45.2)}
#: the certificate's tolerance (``softmax._CERT_TOL``): a gap above -TOL certifies
TOL = 1e-9
_ROW_STARTS = 30
_JOINT_STARTS = 12
# the grid of η (in units of the span) on which each column row's response is sampled
_ENVELOPE_GRID = np.linspace(-1.0, 1.0, 49)


def fixed_point_nodes(config, res, n_nodes, rng):
    """Fresh Gaussian nodes at a solve's fixed point (``w | ω`` as in
    :func:`skattn.theory.channels.output_side`): the channel, labels ``y``, ``omega`` and
    ``w`` (the start of the prox)."""
    T, beta = config["n_tokens"], config["beta"]
    channel = SoftmaxChannel(T, beta=beta, target_beta=beta)
    q, m = res.q, res.m
    spread = np.sqrt(max(res.Q0 - m * m / q + config["noise"] / 2, 0.0))
    omega = np.sqrt(q) * rng.standard_normal((n_nodes, channel.K))
    w = (m / q) * omega + spread * rng.standard_normal((n_nodes, channel.K))
    return channel, channel.labels(w), omega, w


def certified_evaluation(config, n_nodes, rng, init=None):
    """Solve a grid point, then one certified prox evaluation at its fixed point on fresh
    nodes (:func:`fixed_point_nodes`): a dict of the nodes' ``y``, ``omega``, minimisers
    ``z`` and ``certified`` mask, the fixed point's ``sigma``, and the solve's ``seconds``
    and certified fraction."""
    seconds, res = solve_grid_point(config, n_nodes=n_nodes,
                                    **({} if init is None else {"init": init}))
    channel, y, omega, w = fixed_point_nodes(config, res, n_nodes, rng)
    z, certified = channel.prox(y, omega, res.sigma, start=w, return_certified=True)
    return {"y": y, "omega": omega, "z": z, "certified": certified, "sigma": res.sigma,
            "seconds": seconds, "solve_certified_fraction": res.certified_fraction}


def uncertified_nodes(config, n_nodes, rng, init=None):
    """The rows (found, ω's and the loss gradients) of the nodes that
    :func:`certified_evaluation` leaves uncertified, and the solve's seconds and
    certified fraction, and the evaluation's."""
    ev = certified_evaluation(config, n_nodes, rng, init)
    T, beta, left = config["n_tokens"], config["beta"], ~ev["certified"]
    H, H0 = h_from_u(ev["z"][left], T), h_from_u(ev["omega"][left], T)
    s = _softmax(beta * H)
    y = ev["y"][left]
    g = np.sum(s * (s - y), axis=-1, keepdims=True)
    node = dict(H=H, H0=H0, L=2 * beta * s * (s - y - g), y=y, sigma=ev["sigma"],
                beta=beta)
    return node, ev["seconds"], ev["solve_certified_fraction"], float(ev["certified"].mean())


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class _Rows:
    """The rows of one node's relaxed prox ``F = Σ_ac (H_ac − H0_ac)²/(4Σ) + Σ_a ℓ_a(H_a)``
    under the equal split and the found point's multipliers ``ν = −(G − Gᵀ)/2``, ``G =
    (H − H0)/(2Σ) + L``: ``φ_r(h) = Σ_c w_c (h_c − centre_rc)² + offset_r + ‖softmax(βh) −
    y_r‖²`` (ν inside the centre and offset)."""

    def __init__(self, node, n):
        s, beta = node["sigma"], node["beta"]
        self.H, H0, L, y = node["H"][n], node["H0"][n], node["L"][n], node["y"][n]
        self.y, self.beta, self.T = y, beta, y.shape[0]
        self.w = np.full(self.T, 1 / (4 * s))
        G = (self.H - H0) / (2 * s) + L
        nu = -(G - G.T) / 2
        self.centre = H0 - nu / (2 * self.w)
        self.offset = np.sum(nu * H0 - nu ** 2 / (4 * self.w), axis=1)
        self.found = np.array([self.value(r, self.H[r])[0] for r in range(self.T)])

    def value(self, r, h):
        s = _softmax(self.beta * h)
        g = s @ (s - self.y[r])
        return (self.offset[r] + self.w @ (h - self.centre[r]) ** 2
                + np.sum((s - self.y[r]) ** 2),
                2 * self.w * (h - self.centre[r]) + 2 * self.beta * s * (s - self.y[r] - g))


def _least(fun, starts):
    best, arg = np.inf, None
    for x0 in starts:
        r = minimize(fun, x0, jac=True, method="L-BFGS-B",
                     options=dict(gtol=1e-12, ftol=1e-15, maxiter=3000))
        if r.fun < best:
            best, arg = r.fun, r.x
    return best, arg


def _exact_pairs(rows, exact, starts_of_rows, rng):
    """The least value of the relaxation that keeps every pair touching a row of ``exact``
    symmetric (the other pairs relaxed), less the found value: a joint multi-start."""
    T = rows.T
    # parameters: the symmetric entries (a ≤ c) touching exact rows, then each other row's
    # entries in the columns outside ``exact``
    shared = [(a, c) for a in range(T) for c in range(a, T) if a in exact or c in exact]
    free = [(r, c) for r in range(T) if r not in exact for c in range(T) if c not in exact]
    slots = shared + free

    def unpack(p):
        M = np.empty((T, T))
        for k, (a, c) in enumerate(shared):
            M[a, c] = M[c, a] = p[k]
        for k, (r, c) in enumerate(free):
            M[r, c] = p[len(shared) + k]
        return M

    def fun(p):
        M = unpack(p)
        total, G = 0.0, np.empty((T, T))
        for r in range(T):
            v, G[r] = rows.value(r, M[r])
            total += v
        grad = np.array([G[a, c] + (G[c, a] if a != c else 0.0) for a, c in shared]
                        + [G[r, c] for r, c in free])
        return total, grad

    def pack(M):
        return np.array([M[a, c] for a, c in slots])

    starts = [pack(rows.H)]
    for low in starts_of_rows:      # each exact row moved towards its own lower point
        for t in (0.25, 0.5, 0.75, 1.0):
            M = rows.H.copy()
            for a, p in low.items():
                M[a] = M[:, a] = t * p + (1 - t) * rows.H[a]
            starts.append(pack(M))
    while len(starts) < _JOINT_STARTS:
        starts.append(starts[1 % len(starts)] + 0.2 * rng.standard_normal(len(slots)))
    return _least(fun, starts)[0] - rows.found.sum()


def relaxation_gaps(node, n, rng):
    """The gaps (least value less the found one) of the relaxations at node n."""
    rows = _Rows(node, n)
    gaps, lows = np.empty(rows.T), {}
    for r in range(rows.T):
        radius = np.sqrt(max(rows.found[r] - rows.offset[r], 0.0) / rows.w[r])
        starts = [rows.H[r]] + [rows.H[r] + 0.5 * radius * rng.standard_normal(rows.T)
                                for _ in range(_ROW_STARTS)]
        m, p = _least(lambda h, r=r: rows.value(r, h), starts)
        gaps[r] = min(m - rows.found[r], 0.0)
        if gaps[r] < -TOL:
            lows[r] = p
    out = {"rows": float(gaps.sum()),
           "failing_rows": len(lows)}
    if not lows:
        out["pair"] = out["star"] = out["envelope"] = out["rows"]
        return out
    a = int(np.argmin(gaps))
    # rows a and c exact in their shared entry, every other row relaxed: the best c
    out["pair"] = float(max(_pair_gap(rows, a, c, lows[a]) + gaps.sum() - gaps[a] - gaps[c]
                            for c in range(rows.T) if c != a))
    out["star"] = float(_exact_pairs(rows, set(lows), [lows], rng))
    out["envelope"] = float(_envelope_gap(rows, a, lows[a], rng))
    return out


def _lower_hull(x, y):
    """The vertices of the lower convex hull of the points (x, y), x increasing."""
    hull = []
    for p in zip(x, y):
        while len(hull) >= 2 and ((hull[-1][1] - hull[-2][1]) * (p[0] - hull[-2][0])
                                  >= (p[1] - hull[-2][1]) * (hull[-1][0] - hull[-2][0])):
            hull.pop()
        hull.append(p)
    return np.array(hull)


def _column_response(rows, a, c, span):
    """Row c's least value with its entry in column a fixed at η (``ψ_c(η)``), on a grid of
    ``H_ac ± span``: continuation outward from ``H_ac`` in both directions, each η also from
    the found row."""
    T = rows.T
    keep = [j for j in range(T) if j != a]
    etas = rows.H[a, c] + span * _ENVELOPE_GRID
    values = np.empty(etas.size)
    middle = _ENVELOPE_GRID.size // 2
    for order in (range(middle, etas.size), range(middle, -1, -1)):
        previous = rows.H[c][keep]
        for k in order:
            def fun(v, eta=etas[k]):
                h = np.empty(T)
                h[keep], h[a] = v, eta
                val, grad = rows.value(c, h)
                return val, grad[keep]
            values[k], previous = _least(fun, [rows.H[c][keep], previous])
    return etas, values


def _envelope_gap(rows, a, low, rng):
    """The star of row a with each ``ψ_c`` replaced by its convex envelope (the lower hull
    of its grid values, continued linearly): ``min_u φ_a(u) + Σ_c conv ψ_c(u_c)``, less the
    found value. Each affine piece of an envelope is what a certified shifted row bound
    gives (``min_h φ_c(h) − λ h_a``), so this is the relaxation a certificate could prove."""
    T = rows.T
    hulls = {}
    for c in range(T):
        if c != a:
            radius = np.sqrt(max(rows.found[c] - rows.offset[c], 0.0) / rows.w[c])
            span = 1.5 * max(radius, abs(low[c] - rows.H[a, c]))
            hulls[c] = _lower_hull(*_column_response(rows, a, c, span))

    def envelope(c, x):
        hx, hy = hulls[c][:, 0], hulls[c][:, 1]
        k = int(np.clip(np.searchsorted(hx, x) - 1, 0, hx.size - 2))
        slope = (hy[k + 1] - hy[k]) / (hx[k + 1] - hx[k])
        return hy[k] + slope * (x - hx[k]), slope

    def fun(u):
        val, grad = rows.value(a, u)
        grad = grad.copy()
        for c in hulls:
            v, slope = envelope(c, u[c])
            val, grad[c] = val + v, grad[c] + slope
        return val, grad

    starts = [rows.H[a]] + [t * low + (1 - t) * rows.H[a] for t in (0.25, 0.5, 0.75, 1.0)]
    starts += [low + 0.2 * rng.standard_normal(T) for _ in range(_JOINT_STARTS - len(starts))]
    return _least(fun, starts)[0] - rows.found.sum()


def _pair_gap(rows, a, c, low):
    """Rows a and c with their shared entry exact (the others relaxed): the least of row a
    plus row c, less their found values."""
    T = rows.T
    keep = [j for j in range(T) if j != a]

    def fun(p):
        ha, hc = p[:T], np.empty(T)
        hc[keep], hc[a] = p[T:], ha[c]
        va, ga = rows.value(a, ha)
        vc, gc = rows.value(c, hc)
        grad = np.concatenate([ga, gc[keep]])
        grad[c] += gc[a]
        return va + vc, grad

    starts = [np.concatenate([t * low + (1 - t) * rows.H[a], rows.H[c][keep]])
              for t in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return _least(fun, starts)[0] - rows.found[a] - rows.found[c]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-nodes", type=int, default=150,
                        help="uncertified nodes studied per point, evenly spaced (default 150)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    points, n_nodes, max_nodes = POINTS, 8192, args.max_nodes
    if args.quick:
        points, n_nodes, max_nodes = [(3, 0, 3)], 1024, 3
    rng = np.random.default_rng(0)
    rows = []
    for T, seed, i in points:
        config = grid_configurations(T, 6, seed)[i]
        node, seconds, fraction, evaluated = uncertified_nodes(
            config, n_nodes, rng, INITS.get((T, seed, i)))
        left = node["H"].shape[0]
        chosen = np.unique(np.linspace(0, left - 1, min(left, max_nodes)).astype(int)) \
            if left else np.zeros(0, int)
        t = time.perf_counter()
        nodes = [relaxation_gaps(node, int(n), rng) for n in chosen]
        rows.append({"n_tokens": T, "seed": seed, "point": i, "config": config,
                     "n_nodes": n_nodes, "certified_fraction": fraction,
                     "evaluation_certified_fraction": evaluated, "sigma": node["sigma"],
                     "init": INITS.get((T, seed, i)),
                     "uncertified": int(left), "studied": len(nodes),
                     "solve_seconds": seconds, "study_seconds": time.perf_counter() - t,
                     "nodes": nodes})
        closed = {k: sum(g[k] > -TOL for g in nodes)
                  for k in ("rows", "pair", "star", "envelope")}
        print(f"T={T} seed {seed} point {i}: {left} uncertified, {len(nodes)} studied, "
              f"closed {closed}", flush=True)
    write_result(args, "row_relaxations.json", {"tol": TOL, "rows": rows},
                 script=__file__, argv=argv)
    return rows


if __name__ == "__main__":
    main()
