"""Fixed-point iteration shared by the state-evolution solvers (docs: Theory §4).

Damped Anderson acceleration of ``x ← x + r(x)`` with fallbacks for maps that are
undefined at some points (a residual of None), and a staged driver that alternates it
with plain damped steps. Used by :mod:`~skattn.theory.state_evolution`,
:mod:`~skattn.theory.seq2seq`, :mod:`~skattn.theory.seq2seq_softmax` and
:mod:`~skattn.theory.spiked`.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import root

__all__ = ["robust_fixed_point", "anderson", "powell_hybrid", "forward_differences",
           "lambda_continuation", "solve_or_continue"]

#: Weight decays tried, as multiples of the one asked for, when its fixed point is not found
#: from a cold start (λ = 0: these values times ``_ZERO_LAMBDA_BASE``).
_CONTINUATION_FACTORS = (10.0, 100.0)
_ZERO_LAMBDA_BASE = 1e-4
#: λ = 0 without a start: first the fixed point at this λ, then λ = 0 warm-started from it.
ZERO_LAMBDA_START = 1e-2
#: Ratio of consecutive weight decays on the way back down.
_CONTINUATION_STEP = np.sqrt(10.0)
#: A stall: within one Anderson run, the best residual stays above STALL_DECREASE times
#: its value STALL_EVALS evaluations earlier, and below STALL_FLOOR. Near a fixed point the
#: map then has no point below tol: it is discontinuous at the quadrature's resolution
#: (a node whose prox switches between two local minimisers moves it by ~1/n_nodes), and
#: further stages, starts and continuation in λ land on the same floor.
STALL_EVALS = 20
STALL_DECREASE = 0.9
STALL_FLOOR = 1e-3


def robust_fixed_point(fixed_point_map, x, *, tol, max_iter, damping, secants=None,
                       stall_evals=STALL_EVALS, give_up_evals=None):
    """Anderson acceleration, then plain damped iteration with shrinking steps.

    Each stage starts from the best iterate so far and gets a share of the evaluation
    budget. A stall at a floor (:data:`STALL_EVALS`) ends the stages and records the best
    residual in ``fixed_point_map.stall_floor`` (the lowest over its runs).

    Parameters
    ----------
    fixed_point_map : object
        Has ``residual(x)`` (``map(x) − x`` as an array, or None where the map is
        undefined) and ``n_calls`` (evaluations so far, counted against ``max_iter``).
    x : ndarray
        The start.
    tol : float
        Convergence when ``max |residual| < tol``.
    max_iter : int
        Budget of evaluations of the map (including those already in ``n_calls``).
    damping : float
        Step of the first stage; later stages use fractions of it.
    secants : tuple of ndarray or None, default=None
        ``(dX, dR)`` of a map close to this one (its Jacobian minus the identity on their
        span): the first Anderson stage starts with them (:func:`anderson`).
    stall_evals : int, default=STALL_EVALS
        The window of the stall test (:func:`anderson`).
    give_up_evals : int or None, default=None
        Where given, the stages also end when the best residual, once below its value at
        the start, has not fallen below :data:`STALL_DECREASE` times its value this many
        evaluations earlier, at any level (:func:`anderson`); no floor is recorded.

    Returns
    -------
    x : ndarray
        The best iterate seen.
    residual_norm : float
        Its ``max |residual|``.
    converged : bool
    """
    best_x, best_norm = x, np.inf
    # one stall record for all stages: a floor is a property of the map, not of a stage
    # (a stage's share of a small budget is shorter than STALL_EVALS)
    stall = {}
    stages = [("anderson", damping), ("plain", 0.5 * damping), ("anderson", 0.3 * damping),
              ("plain", 0.15 * damping)]
    for kind, step in stages:
        budget = max_iter - fixed_point_map.n_calls
        if budget <= 0:
            break
        share = budget if kind == stages[-1][0] and step == stages[-1][1] else \
            max(budget // 2, 1)
        depth = 4 if kind == "anderson" else 0
        x_s, norm, ok = anderson(fixed_point_map.residual, best_x, tol=tol, max_iter=share,
                                  damping=step, depth=depth, secants=secants, stall=stall,
                                  stall_evals=stall_evals, give_up_evals=give_up_evals)
        secants = None      # a later stage restarts from the best point, own history only
        if norm < best_norm:
            best_x, best_norm = x_s, norm
        if ok:
            return best_x, best_norm, True
        if "gave_up" in stall:
            break
        if "floor" in stall:
            previous = getattr(fixed_point_map, "stall_floor", None)
            fixed_point_map.stall_floor = best_norm if previous is None else \
                min(previous, best_norm)
            break
    return best_x, best_norm, False


# Kept over scipy.optimize.root(method="anderson", M=4): on the test curves that took several
# times more map evaluations (docs: Changelog), and it cannot step back
# from points where the map is undefined (residual None).
def anderson(residual, x, *, tol, max_iter, damping, depth=4, secants=None, stall=None,
             stall_evals=STALL_EVALS, give_up_evals=None):
    """Damped Anderson acceleration (type II) of ``x ← x + residual(x)``.

    An accelerated step that lands where the map is undefined, or that multiplies the
    residual by more than 4, is replaced by a plain damped step and the history is cleared.

    Parameters
    ----------
    residual : callable
        ``residual(x)``: ``map(x) − x``, or None where the map is undefined.
    x : ndarray
        The start.
    tol : float
        Convergence when ``max |residual| < tol``.
    max_iter : int
        Evaluations of ``residual``.
    damping : float
        Weight of the residual in a plain step.
    depth : int, default=4
        Past iterates in the Anderson mixing (0: plain damped iteration).
    secants : tuple of ndarray or None, default=None
        ``(dX, dR)``, columns of iterate and residual differences of a nearby map (a
        coarser node set, the same equations with a correction): they stand in for the
        history until the iteration has its own, so the first steps are accelerated
        rather than plain damped ones. Dropped with the history after a bad step.
    stall : dict or None, default=None
        Where given, the run stops at a stall (:data:`STALL_EVALS`) and sets
        ``stall["floor"]`` to the best residual; ``stall["history"]`` keeps the best
        residual after each evaluation, so that runs sharing the dict (the stages of
        :func:`robust_fixed_point`) detect a stall across them.
    stall_evals : int, default=STALL_EVALS
        The window of the stall test: the best residual has not fallen below
        :data:`STALL_DECREASE` times its value this many evaluations earlier.
    give_up_evals : int or None, default=None
        Where given (with ``stall``), the run also stops when the best residual has not
        fallen below :data:`STALL_DECREASE` times its value this many evaluations earlier,
        counted from its first value below the start's (Anderson's first steps from a good
        start can rise for a while), at any level, and sets ``stall["gave_up"]`` (no floor:
        for a map that only leads to the one whose fixed point is reported).

    Returns
    -------
    x : ndarray
        The best iterate seen.
    residual_norm : float
        Its ``max |residual|``.
    converged : bool
    """
    xs, rs = [], []
    prior = None
    if secants is not None and depth > 0 and secants[0].shape[0] == np.size(x) \
            and secants[0].shape[1] > 0:
        prior = secants
    r = residual(x)
    if r is None:
        return x, np.inf, False
    best_x, best_norm = x, float(np.max(np.abs(r)))
    n_eval = 1
    # the best residual after each evaluation (with those of earlier runs sharing ``stall``)
    best_at = [] if stall is None else stall.setdefault("history", [])
    best_at.append(best_norm)
    while best_norm >= tol and n_eval < max_iter:
        if (stall is not None and len(best_at) > stall_evals and best_norm < STALL_FLOOR
                and best_norm > STALL_DECREASE * best_at[-1 - stall_evals]):
            stall["floor"] = best_norm
            break
        if (give_up_evals is not None and stall is not None
                and _gives_up(best_at, give_up_evals)):
            stall["gave_up"] = True
            break
        norm = float(np.max(np.abs(r)))
        xs.append(x)
        rs.append(r)
        del xs[:-max(depth, 1) - 1], rs[:-max(depth, 1) - 1]
        plain = x + damping * r
        x_new = plain
        mixed = depth > 0 and (len(xs) > 1 or prior is not None)
        if mixed:
            dX = np.diff(np.array(xs), axis=0).T
            dR = np.diff(np.array(rs), axis=0).T
            if prior is not None and dX.shape[1] < depth:
                keep = depth - dX.shape[1]
                dX = np.hstack([prior[0][:, -keep:], dX])
                dR = np.hstack([prior[1][:, -keep:], dR])
            gamma = np.linalg.lstsq(dR, r, rcond=None)[0]
            x_new = plain - (dX + damping * dR) @ gamma
        r_new = residual(x_new)
        n_eval += 1
        if mixed and (r_new is None or float(np.max(np.abs(r_new))) > 4 * norm):
            xs, rs, prior = [], [], None
            x_new = plain
            r_new = residual(x_new)
            n_eval += 1
        if r_new is None:  # even the damped step is undefined: shrink it
            x_new = x + 0.1 * damping * r
            r_new = residual(x_new)
            n_eval += 1
            if r_new is None:
                break
        x, r = x_new, r_new
        new_norm = float(np.max(np.abs(r)))
        if new_norm < best_norm:
            best_x, best_norm = x, new_norm
        best_at.append(best_norm)
    return best_x, best_norm, best_norm < tol


def _gives_up(best_at, window):
    """Whether the best residuals ``best_at`` (after each evaluation) have gained no
    :data:`STALL_DECREASE` over the last ``window`` evaluations, counted from the first
    one below the start's."""
    first = next((k for k, value in enumerate(best_at) if value < best_at[0]), None)
    return (first is not None and len(best_at) - 1 - first >= window
            and best_at[-1] > STALL_DECREASE * best_at[-1 - window])


#: Forward-difference step, relative to ``max(1, |x_j|)``, of the Jacobians of
#: :func:`forward_differences` (and so of :func:`powell_hybrid`): wide enough that a node
#: switching minimisers within a step (a jump of ~1/n_nodes in the residual) rarely enters
#: a column, small against the map's curvature in the state variables.
FD_STEP = 1e-4


def forward_differences(residual, x, r0=None, step=FD_STEP):
    """``(dX, dR)``: forward differences of ``residual`` at ``x`` along each variable.

    ``dX`` is diagonal (the steps ``step · max(1, |x_j|)``), and column j of ``dR`` is
    ``residual(x + dX[:, j]) − residual(x)``: the Jacobian is ``dR @ inv(dX)``, and the pair
    can seed :func:`anderson` as ``secants``.

    Parameters
    ----------
    residual : callable
        As in :func:`anderson`.
    x : ndarray of shape (n,)
    r0 : ndarray of shape (n,) or None, default=None
        ``residual(x)`` where known.
    step : float, default=FD_STEP

    Returns
    -------
    (dX, dR) : tuple of ndarray of shape (n, n), or None
        None where the map is undefined at one of the points.
    """
    x = np.asarray(x, dtype=float)
    r0 = residual(x) if r0 is None else r0
    if r0 is None:
        return None
    steps = step * np.maximum(1.0, np.abs(x))
    columns = []
    for k in range(x.size):
        shifted = x.copy()
        shifted[k] += steps[k]
        r = residual(shifted)
        if r is None:
            return None
        columns.append(r - r0)
    return np.diag(steps), np.array(columns).T


class _Stop(Exception):
    """Ends :func:`powell_hybrid`'s solver from its callbacks."""


def powell_hybrid(fixed_point_map, x, *, tol, max_iter):
    """Powell's hybrid method (MINPACK ``hybrj``, :func:`scipy.optimize.root` with
    ``method="hybr"``) on ``residual(x) = 0``.

    A forward-difference Jacobian (:func:`forward_differences`), rank-one (Broyden) updates
    and a dogleg trust region: on maps whose damped Anderson steps are rejected and then
    creep (the coarse stage at β > 3), it reaches the fixed point after a Jacobian or two
    (docs: Changelog). It stops at the first residual below ``tol``, when the budget is
    spent, or where the map is undefined (a residual of None), and returns the best point
    seen.

    Parameters
    ----------
    fixed_point_map : object
        As in :func:`robust_fixed_point`.
    x : ndarray
        The start.
    tol : float
        Convergence when ``max |residual| < tol``.
    max_iter : int
        Budget of evaluations (including those already in ``fixed_point_map.n_calls``).

    Returns
    -------
    x : ndarray
        The best iterate seen.
    residual_norm : float
        Its ``max |residual|``.
    converged : bool
    """
    best = [np.array(x, dtype=float), np.inf]
    # the last (x, residual) and (x, Jacobian): scipy evaluates both at the start once to
    # check their shapes, and the Jacobian is asked for where the residual is known
    last, last_jacobian = {}, {}

    def residual(y):
        y = np.array(y, dtype=float)
        if np.array_equal(last.get("x"), y):
            return last["r"]
        if fixed_point_map.n_calls >= max_iter:
            raise _Stop
        r = fixed_point_map.residual(y)
        if r is None:
            raise _Stop
        norm = float(np.max(np.abs(r)))
        if norm < best[1]:
            best[0], best[1] = y, norm
        if norm < tol:
            raise _Stop
        last["x"], last["r"] = y, r
        return r

    def jacobian(y):
        y = np.array(y, dtype=float)
        if not np.array_equal(last_jacobian.get("x"), y):
            dX, dR = forward_differences(residual, y, r0=residual(y))
            last_jacobian["x"], last_jacobian["J"] = y, dR / np.diag(dX)
        return last_jacobian["J"]

    # in variables u = x − x0 + 1: MINPACK's first trust region is a multiple of |u0|,
    # which must not vanish with a start at (or near) the origin of the state variables
    offset = best[0] - 1.0
    if max_iter > fixed_point_map.n_calls:
        try:
            # xtol far below the steps that matter: the stops above end it
            root(lambda u: residual(u + offset), np.ones_like(offset),
                 jac=lambda u: jacobian(u + offset), method="hybr", options={"xtol": 1e-14})
        except _Stop:
            pass
    return best[0], best[1], best[1] < tol


def lambda_continuation(solve, reg_lambda):
    """Reach a fixed point at ``reg_lambda`` by continuation from a larger weight decay.

    Used when the fixed point at ``reg_lambda`` is not found from a cold start (e.g. linear
    T = 1 at λ = 1e-3 next to the interpolation threshold, where some teachers stall from a
    cold start but converge from the solution at λ = 0.01). A larger λ smooths the map; its fixed point is then
    followed back down in steps of √10, each warm-started from the last.

    Parameters
    ----------
    solve : callable
        ``solve(reg_lambda, init)`` returns a result with ``converged``, ``n_iter``, ``q``
        and ``sigma`` (``init`` None: a cold start).
    reg_lambda : float
        The weight decay wanted, ≥ 0.

    Returns
    -------
    result or None
        The converged result at ``reg_lambda`` (its ``n_iter`` counts every solve of the
        path, its message names the path), or None if no path converged.
    """
    base = reg_lambda if reg_lambda > 0 else _ZERO_LAMBDA_BASE
    n_iter = 0
    for factor in _CONTINUATION_FACTORS:
        start_lambda = base * factor
        point = solve(start_lambda, None)
        n_iter += point.n_iter
        if not point.converged:
            continue                    # a larger λ smooths the map further
        if not (point.q > 0 and point.sigma > 0):
            break                       # collapsed to S = 0, no warm start; so would larger λ
        n_steps = int(np.ceil(np.log(factor) / np.log(_CONTINUATION_STEP) - 1e-9))
        path = list(base * factor ** (1.0 - np.arange(1, n_steps + 1) / n_steps))
        path[-1] = base
        if reg_lambda == 0:
            path.append(0.0)
        for lam in path:
            point = solve(lam, point)
            n_iter += point.n_iter
            if not point.converged:
                break
        else:
            point.n_iter = n_iter
            point.message = (f"converged (continuation in λ from {start_lambda:.3g}: no "
                             "fixed point from a cold start)")
            return point
    return None


def solve_or_continue(solve, reg_lambda, init=None):
    """``solve(reg_lambda, init)``; from a cold start that finds no fixed point, continue in λ.

    The shared fallback of the state-evolution solvers. λ = 0 without ``init`` is first
    solved warm from the fixed point at :data:`ZERO_LAMBDA_START`. Where ``init`` is None
    and the result is not converged, :func:`lambda_continuation` is tried (its solves silenced: the
    first one has warned about the domain), and its result, if converged, is returned with
    the failed solve's evaluations counted in ``n_iter``.

    Parameters
    ----------
    solve : callable
        As in :func:`lambda_continuation`.
    reg_lambda : float
        The weight decay wanted, ≥ 0.
    init : object or None, default=None
        Passed to the first solve; a warm start is not continued.

    Returns
    -------
    result
        The continued result where the continuation converged, else the first one.
    """
    if reg_lambda == 0 and init is None:
        # λ = 0 from a cold start wanders (Σ unbounded on the way) before the continuation
        # below; one warm step from the fixed point at ZERO_LAMBDA_START is far cheaper
        start = solve(ZERO_LAMBDA_START, None)
        if start.converged and start.q > 0 and start.sigma > 0:
            point = solve(0.0, start)
            if point.converged:
                point.n_iter += start.n_iter
                return point
    first = solve(reg_lambda, init)
    if first.converged or init is not None or \
            getattr(first, "extras", {}).get("stall_floor") is not None:
        return first      # a stall at the quadrature's resolution: the same map at λ
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        continued = lambda_continuation(solve, reg_lambda)
    if continued is None:
        if reg_lambda == 0:
            # where no threshold check applies (seq2seq, κ4 ≠ 0, a rank cap), say what λ = 0
            # may mean here rather than only "try continuation"
            first.message += ("; reg_lambda=0 has no fixed point where the ridgeless "
                              "minimiser is not unique (below the interpolation threshold): "
                              "for the λ → 0⁺ limit pass a small positive reg_lambda, e.g. "
                              "reg_lambda=1e-4")
        return first
    continued.n_iter += first.n_iter      # the failed cold start counts too
    return continued
