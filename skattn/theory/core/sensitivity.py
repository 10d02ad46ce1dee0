"""How far the uncertified prox minimisers can move the prediction, to first order.

Where the certificate leaves quadrature nodes uncertified, the output side carries a bound
``b`` on how much their minimisers can move m̂, q̂ and Σ̂ at the fixed point
(``uncertified_bound`` of the channels): a worst case, not an estimate. The
prediction is the fixed point ``s = g(h(s))`` (``h`` the output side, ``g`` the prior side,
``s = (m, q, Σ[, t])``), so a shift ``δ`` of the conjugates moves it by ``(I − g_h h_s)⁻¹
g_h δ`` to first order (docs: Theory, "Certificate"). :func:`uncertified_effect` takes the
worst sign of each component of ``δ`` within ``b`` and reports the resulting move of m, q,
Σ and the test error: an estimate, first order in ``b``, with the Jacobians by forward
differences (the output side's on a prefix of the nodes, warm from the fixed point's
minimisers, so that no minimiser changes basin between the differences).
"""

from __future__ import annotations

import numpy as np

from ..channels import remembered_minimisers, seed_minimisers
from .fixed_point_map import FixedPointMap, get_field

__all__ = ["fixed_point_sensitivity", "uncertified_effect", "unestimated_effect",
           "EFFECT_NODES", "EFFECT_STEP"]

EFFECT_NAMES = ("m", "q", "sigma", "test_error")

#: The prefix of the quadrature nodes on which the output side's Jacobian is taken (a
#: balanced Sobol set; the Jacobian of a smooth average needs far fewer nodes than the
#: average itself, and the estimate is first order anyway).
EFFECT_NODES = 1024
#: Relative forward-difference step of the state (m in units of √(q Q0)) and of the
#: conjugates.
EFFECT_STEP = 1e-4

_HATS = ("m_hat", "q_hat", "sigma_hat")


def _hats(out, with_trace):
    values = [get_field(out, k) for k in _HATS]
    return np.array(values + ([out.t_hat] if with_trace else []), dtype=float)


def fixed_point_sensitivity(fixed_point_map, state, out, test_error_at):
    """``∂(m, q, Σ, test error)/∂(m̂, q̂, Σ̂)`` at the fixed point, to first order: how the
    fixed point ``s = g(h(s) + δ)`` and its test error move with a shift ``δ`` of the
    conjugates, ``(I − g_h h_s)⁻¹ g_h`` (module docstring).

    Parameters
    ----------
    fixed_point_map : FixedPointMap
        The map of the solve, just after an evaluation at ``state`` whose minimisers its
        channel remembers on its nodes.
    state : tuple of float
        The fixed point ``(m, q, Σ[, t])``.
    out : OutputSide
        The output side at ``state``.
    test_error_at : callable
        ``test_error_at(state)``: the test error at a state.

    Returns
    -------
    ndarray of shape (4, 3) or None
        Rows m, q, Σ and the test error; columns m̂, q̂, Σ̂ (t̂ of non-Gaussian tokens held).
        None where a Jacobian is not finite or ``I − g_h h_s`` is singular.
    """
    with_trace = fixed_point_map.with_trace
    state = np.array(state, dtype=float)
    n = state.size
    q = state[1]
    Q0 = fixed_point_map.Q0
    steps = EFFECT_STEP * np.array([np.sqrt(q * Q0), q, state[2]]
                                   + ([np.sqrt(q)] if with_trace else []))
    h_s = _output_jacobian(fixed_point_map, state, steps)
    g_h = _prior_jacobian(fixed_point_map, _hats(out, with_trace))
    if h_s is None or g_h is None:
        return None
    try:
        move = np.linalg.solve(np.eye(n) - g_h @ h_s, g_h)   # ∂s/∂(hats)
    except np.linalg.LinAlgError:
        return None
    # the test error's gradient in the state, by forward differences
    e0 = test_error_at(tuple(state))
    grad = np.empty(n)
    for i in range(n):
        shifted = state.copy()
        shifted[i] += steps[i]
        grad[i] = (test_error_at(tuple(shifted)) - e0) / steps[i]
    rows = np.vstack([move[:3, :3], grad @ move[:, :3]])
    return rows if np.all(np.isfinite(rows)) else None


def uncertified_effect(fixed_point_map, state, out, bound, test_error_at):
    """First-order move of the fixed point and the test error under the uncertified
    nodes' bound: ``|S| b`` with S of :func:`fixed_point_sensitivity` and ``b`` the bound
    on (m̂, q̂, Σ̂), the worst sign of each shift.

    Parameters
    ----------
    fixed_point_map, state, out, test_error_at
        As for :func:`fixed_point_sensitivity`.
    bound : dict
        The output side's ``uncertified_bound`` (``m_hat``, ``q_hat``,
        ``sigma_hat_stein``).

    Returns
    -------
    dict
        ``m, q, sigma, test_error`` (≥ 0; ∞ where a bound is ∞); empty where it cannot be
        estimated (Σ̂ in the pointwise form, whose shift has no bound here; no
        sensitivity).
    """
    if fixed_point_map.sigma_hat_form != "stein":
        return {}
    b = np.array([bound.get("m_hat", np.nan), bound.get("q_hat", np.nan),
                  bound.get("sigma_hat_stein", np.nan)], dtype=float)
    if np.any(np.isnan(b)):
        return {}
    names = EFFECT_NAMES
    if not np.all(np.isfinite(b)):
        return {k: float("inf") for k in names}
    if not np.any(b > 0):
        return {k: 0.0 for k in names}
    rows = fixed_point_sensitivity(fixed_point_map, state, out, test_error_at)
    if rows is None:
        return {}
    return {k: float(v) for k, v in zip(names, np.abs(rows) @ b)}


def unestimated_effect(bound):
    """The ``uncertified_effect`` of a prediction that does not estimate one: zeros where
    its ``bound`` is zero everywhere (every node certified), empty where it is empty, None
    where some node is uncertified (or the bound is None)."""
    if bound is None:
        return None
    if not bound:
        return {}
    return {k: 0.0 for k in EFFECT_NAMES} if all(v == 0 for v in bound.values()) else None


def _output_jacobian(fixed_point_map, state, steps):
    """``∂(hats)/∂(state)`` of the output side on the first :data:`EFFECT_NODES` nodes,
    each evaluation warm from the fixed point's minimisers there; the channel's memory on
    the full nodes is restored afterwards. None where a difference is not finite."""
    channel, nodes = fixed_point_map.channel, fixed_point_map.nodes
    z_full = remembered_minimisers(channel, nodes)
    if z_full is None:
        return None
    z_full = z_full.copy()      # a warm evaluation may update the remembered array in place
    sub = nodes.subset(min(EFFECT_NODES, nodes.n_points))
    z_sub = z_full[:sub.n_points].copy()
    sub_map = FixedPointMap(
        fixed_point_map.alpha, channel, fixed_point_map.denoiser, fixed_point_map.Q0,
        fixed_point_map.noise, sub, fixed_point_map.sigma_hat_form,
        token_kurtosis=fixed_point_map.token_kurtosis,
        target_trace=fixed_point_map.target_trace)
    sub_map.warm = True
    with_trace = fixed_point_map.with_trace
    try:
        columns = []
        for i in range(-1, state.size):
            point = state.copy()
            if i >= 0:
                point[i] += steps[i]
            seed_minimisers(channel, sub, z_sub.copy())
            columns.append(_hats(sub_map.hats(*point), with_trace))
    finally:
        seed_minimisers(channel, nodes, z_full)
    base = columns[0]
    jac = np.column_stack([(c - base) / s for c, s in zip(columns[1:], steps)])
    return jac if np.all(np.isfinite(jac)) else None


def _prior_jacobian(fixed_point_map, hats):
    """``∂(state)/∂(hats)`` of the prior side by forward differences of the denoiser.
    None where a difference is not finite."""
    denoiser, with_trace = fixed_point_map.denoiser, fixed_point_map.with_trace

    def prior_state(h):
        prior = denoiser(*h[:3], t_hat=h[3]) if with_trace else denoiser(*h)
        return np.array(fixed_point_map.state(prior), dtype=float)

    base = prior_state(hats)
    columns = []
    for i in range(hats.size):
        shifted = hats.copy()
        step = EFFECT_STEP * max(abs(hats[i]), 1e-8)
        shifted[i] += step
        columns.append((prior_state(shifted) - base) / step)
    jac = np.column_stack(columns)
    return jac if np.all(np.isfinite(jac)) else None
