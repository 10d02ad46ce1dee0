"""The panel quadrature: a 21-point Gauss–Kronrod rule, barycentric interpolation inside a
panel, and the panel maps that smooth square-root edges (see the package docstring)."""

from __future__ import annotations

import numpy as np

_RULE = None

# Per-node values of a panel (arrays of shape (P, 21)) and per-panel end data (shape (P,)):
# x, u = Re ω, s = (Im ω)², ρ, R = Re G, and the Kronrod/Gauss weights W, WG; the ends
# p, q of each panel in x and u, s at the ends, and the square-root-edge flags sl, sr.
NODE_KEYS = ("x", "u", "s", "rho", "R", "W", "WG")
PANEL_KEYS = ("xp", "xq", "up", "uq", "sp", "sq", "sl", "sr")


def take_rows(data, idx):
    """The rows ``idx`` of every array of a panel or node dict."""
    return {k: v[idx] for k, v in data.items()}


def concat_rows(dicts):
    """Concatenate panel or node dicts row-wise."""
    return {k: np.concatenate([d[k] for d in dicts]) for k in dicts[0]}


def _gk21():
    """Gauss–Kronrod (10, 21) rule on [0, 1] and its companions (cached).

    Returns a dict with the 21 Kronrod nodes ``t`` (increasing), Kronrod weights ``wk``,
    the embedded 10-point Gauss weights ``wg`` (zero at the Kronrod-only nodes), the
    cumulative-integration matrix ``S`` (``S[i, j] = ∫_0^{t_i} ℓ_j``) and barycentric
    weights ``bw`` of the 23 points ``(0, t, 1)`` used to interpolate a panel's values.
    """
    global _RULE
    if _RULE is None:
        xk = np.array([
            -0.995657163025808080735527280689003, -0.973906528517171720077964012084452,
            -0.930157491355708226001207180059508, -0.865063366688984510732096688423493,
            -0.780817726586416897063717578345042, -0.679409568299024406234327365114874,
            -0.562757134668604683339000099272694, -0.433395394129247190799265943165784,
            -0.294392862701460198131126603103866, -0.148874338981631210884826001129720,
            0.0])
        xk = np.concatenate([xk, -xk[-2::-1]])
        vk = np.array([
            0.011694638867371874278064396062192, 0.032558162307964727478818972459390,
            0.054755896574351996031381300244580, 0.075039674810919952767043140916190,
            0.093125454583697605535065465083366, 0.109387158802297641899210590325805,
            0.123491976262065851077958109831074, 0.134709217311473325928054001771707,
            0.142775938577060080797094273138717, 0.147739104901338491374841515972068,
            0.149445554002916905664936468389821])
        vk = np.concatenate([vk, vk[-2::-1]])
        wg10 = np.array([
            0.066671344308688137593568809893332, 0.149451349150580593145776339657697,
            0.219086362515982043995534934228163, 0.269266719309996355091226921569469,
            0.295524224714752870173892994651338])
        wg = np.zeros(21)
        wg[1:21:2] = np.concatenate([wg10, wg10[::-1]])
        t = (xk + 1) / 2
        V = np.polynomial.legendre.legvander(xk, 20)
        Vint = np.empty_like(V)
        for k in range(21):
            c = np.zeros(21)
            c[k] = 1.0
            Vint[:, k] = np.polynomial.legendre.legval(
                xk, np.polynomial.legendre.legint(c, lbnd=-1)) / 2
        S = Vint @ np.linalg.inv(V)
        ext = np.concatenate([[0.0], t, [1.0]])
        diff = ext[:, None] - ext[None, :]
        np.fill_diagonal(diff, 1.0)
        bw = 1.0 / np.prod(diff, axis=1)
        bw /= np.max(np.abs(bw))
        _RULE = dict(t=t, wk=vk / 2, wg=wg / 2, S=S, ext=ext, bw=bw)
    return _RULE


def _bary(vals, t_eval):
    """Interpolate per-panel values at the 23 points ``(0, t, 1)`` (``vals``: (P, 23)) at
    parameters ``t_eval`` (P, m) by the barycentric formula."""
    R = _gk21()
    d = t_eval[:, :, None] - R["ext"][None, None, :]
    hit = d == 0
    d = np.where(hit, 1.0, d)
    c = R["bw"] / d
    out = np.einsum("pmj,pj->pm", c, vals) / c.sum(axis=2)
    if np.any(hit):
        ph, mh, jh = np.nonzero(hit)
        out[ph, mh] = vals[ph, jh]
    return out


def _panel_inverse(p, q, sl, sr, y):
    """Parameter ``t`` of points ``y`` (P, m) under the map of panels ``[p, q]``."""
    p = p[:, None]
    q = q[:, None]
    L = np.where(q > p, q - p, 1.0)
    z = np.clip((y - p) / L, 0.0, 1.0)
    both = (sl & sr)[:, None]
    left = (sl & ~sr)[:, None]
    right = (~sl & sr)[:, None]
    return np.where(both, np.arccos(np.clip(1 - 2 * z, -1, 1)) / np.pi,
                    np.where(left, np.sqrt(z), np.where(right, 1 - np.sqrt(1 - z), z)))


def _panel_map(p, q, sl, sr, t):
    """Map ``t ∈ [0, 1]`` to panels ``[p, q]``; returns ``y`` and ``dy/dt`` (shape (P, n)).

    ``t`` is either a common vector (n,) or per-panel values (P, n). ``sl``/``sr`` flag a
    square-root singularity of the density at the left/right end, removed by the maps
    ``y = p + L (1 − cos π t)/2`` (both ends), ``p + L t²`` (left), ``q − L (1 − t)²``
    (right); otherwise ``y = p + L t``.
    """
    p = p[:, None]
    q = q[:, None]
    L = q - p
    both = (sl & sr)[:, None]
    left = (sl & ~sr)[:, None]
    right = (~sl & sr)[:, None]
    tt = t if np.ndim(t) == 2 else t[None, :]
    y = np.where(both, p + L * (1 - np.cos(np.pi * tt)) / 2,
                 np.where(left, p + L * tt ** 2,
                          np.where(right, q - L * (1 - tt) ** 2, p + L * tt)))
    dy = np.where(both, L * np.pi * np.sin(np.pi * tt) / 2,
                  np.where(left, 2 * L * tt, np.where(right, 2 * L * (1 - tt), L + 0 * tt)))
    return y, dy
