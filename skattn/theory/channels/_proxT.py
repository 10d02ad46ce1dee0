"""The T ≥ 3 softmax prox driver: multi-start Newton per quadrature node, certified by
:mod:`._certify_rows` (the convexity certificate), then :mod:`._certify_dual` (the
row-wise dual bound) where that fails.

Per node: provably convex samples get one Newton run; in the fixed-point iterations
(``trust_warm``) the others one run from the warm minimiser, uncertified; otherwise the
warm minimiser first where it is certified global, else the multi-start on the segment
ω → fit, its certificate, and a second round of starts where that fails. The samples
still uncertified then get the split search of :mod:`._certify_split` (from
:meth:`.softmax.SoftmaxChannel._prox_compiled`: it runs a linear programme per round),
and up to T = 6 those it leaves a last round of starts (:func:`last_shell`).
"""

import math

import numpy as np

from ._certify_dual import certify_dual
from ._certify_rows import CERTIFIED, certify_convex, minimiser_ball_radius
from ._kernels import _gradhessT, _jit, _prange, parallel_twin
from ._prox_newton import END_POINT_ROW, newton_workspace, newtonT_into

# chunks of samples with their own scratch stack run in parallel (prange), with the same
# per-sample arithmetic as in serial (as in ._certify)
_CHUNK = 64
# the row-wise dual certificate runs where the convexity one fails, with at most
# DUAL_BUDGET box splits per sample (the timings: docs: Changelog)
DUAL_BUDGET = 2000
# where the dual bound follows, the convexity certificate gets fewer splits (the rest go to
# the dual bound, which is cheaper on them; the measurements: docs: Changelog)
_CONVEX_BUDGET_BEFORE_DUAL = 30
# extra Newton starts of a sample whose first certificate fails: up to T = 5 the points
# ±(radius/2) e_i along the axes of x, then the shell below; from T = 6 x* ± radius along
# the _RETRY_DIRECTIONS least curved directions of the Hessian (the measurements behind
# the choice, made when T = 6 had no dual bound: docs: Changelog)
_AXIS_RETRY_MAX_T = 5
_RETRY_SCALE = 0.5
_RETRY_DIRECTIONS = 4
# up to T = 5, after the axes: x* ± (radius/2) along this many quasi-random directions
# (where Σ is large they find most of the lower minima the axes miss; the measurements:
# docs: Changelog, "Uncertified T ≤ 5 nodes"); the default of
# ``SoftmaxChannel.shell_starts``, which the drivers take as ``n_shell``
SHELL_STARTS = 8
# the largest T whose uncertified samples get the last shell (:func:`last_shell`): its
# directions need K − 1 Weyl roots
LAST_SHELL_MAX_T = 6
# the multi-start memory (``agree`` of proxT): a sample's starts agree where each ends within
# this distance (max norm, in x) of the first one's end
AGREE_TOL = 1e-6
# √p of the first primes: the Weyl sequence of the directions (K − 1 ≤ 14 up to T = 5, 20
# at T = 6, the last shell's largest T)
_WEYL_ROOTS = np.sqrt(np.array([2.0, 3.0, 5.0, 7.0, 11.0, 13.0, 17.0, 19.0, 23.0, 29.0,
                                31.0, 37.0, 41.0, 43.0, 47.0, 53.0, 59.0, 61.0, 67.0,
                                71.0]))


@_jit
def _weyl_direction(k, n):
    """The unit vector along ``2 frac(k √p_i) − 1`` (i < n): the k-th point of a Weyl
    sequence in the cube, a start direction that is the same in every thread and run."""
    u = np.empty(n)
    norm = 0.0
    for i in range(n):
        v = k * _WEYL_ROOTS[i]
        u[i] = 2.0 * (v - math.floor(v)) - 1.0
        norm += u[i] * u[i]
    return u / math.sqrt(norm)


@_jit
def _retry_step(rad, T):
    """The distance of the second round's starts (and the last shell's) from their centre:
    ρ/2 up to T = 5, ρ from T = 6 (``rad`` = ρ)."""
    return _RETRY_SCALE * rad if T <= _AXIS_RETRY_MAX_T else rad


@_jit
def _certify_point(x, f, omega, y, s, B, index, scale, beta, Q, gain, c3, tol, budget, stack):
    """The convexity certificate of ``x`` (objective ``f``), then the row-wise dual bound
    where it fails; returns the code."""
    code, _ = certify_convex(x, f, omega, y, s, B, index, scale, beta, Q, gain, c3, tol,
                             min(budget, _CONVEX_BUDGET_BEFORE_DUAL), stack)
    if code != CERTIFIED:
        code, _ = certify_dual(x, omega, y, s, B, index, scale, beta, Q, c3, tol,
                               min(budget, DUAL_BUDGET))
    return code


@_jit
def _proxT_sample(n, omega, y, sigma, B, index, scale, beta, x_fit, convex, warm, use_warm,
                  trust_warm, n_starts, radius, max_iter, Q, gain, c3, tol, budget, n_shell,
                  stack, vectors, matrices, rotations, xb, fb, cert, agree):
    """One sample of :func:`proxT`, written to ``xb[n], fb[n], cert[n]`` (and, in an
    uncertified multi-start, ``agree[n]``); ``vectors, matrices, rotations``: the Newton
    runs' workspace (:func:`._prox_newton.newton_workspace`), where each run leaves its
    end point (``x``)."""
    Ke = B.shape[1]
    x = vectors[END_POINT_ROW, :Ke]
    s = sigma[n]
    has_warm = use_warm and np.all(np.isfinite(warm[n]))
    if convex[n] or (has_warm and trust_warm):
        if has_warm:
            x[:] = warm[n]
        else:
            x[:] = 0.0
        f = newtonT_into(x, omega[n], y[n], s, B, index, scale, beta, radius, max_iter,
                         vectors, matrices, rotations)
        xb[n], fb[n], cert[n] = x, f, convex[n]
        return
    if has_warm and budget <= 0 and agree[n]:
        # the multi-start memory: every start ended at one point in an earlier evaluation,
        # so the one from that point stands for them (uncertified, as the multi-start)
        f = newtonT_into(warm[n], omega[n], y[n], s, B, index, scale, beta, radius,
                         max_iter, vectors, matrices, rotations)
        xb[n], fb[n], cert[n] = x, f, False
        return
    best = math.inf
    tried = False      # whether xb[n] is the warm minimiser whose certificate failed
    if has_warm and budget > 0:
        # the previous evaluation's minimiser first (as for T = 2): where it is certified
        # global, the multi-start cannot do better
        f = newtonT_into(warm[n], omega[n], y[n], s, B, index, scale, beta, radius,
                         max_iter, vectors, matrices, rotations)
        if _certify_point(x, f, omega[n], y[n], s, B, index, scale, beta, Q, gain, c3[n], tol,
                          budget, stack) == CERTIFIED:
            xb[n], fb[n], cert[n] = x, f, True
            return
        best, xb[n], tried = f, x, True
    x_first = np.zeros(Ke)
    same = True        # whether every start ends within AGREE_TOL of the first one's end
    for k in range(n_starts):
        t = k / (n_starts - 1) if n_starts > 1 else 0.0
        for j in range(Ke):
            x[j] = t * x_fit[n, j]
        f = newtonT_into(x, omega[n], y[n], s, B, index, scale, beta, radius, max_iter,
                         vectors, matrices, rotations)
        if k == 0:
            x_first[:] = x
        elif same:
            for j in range(Ke):
                if abs(x[j] - x_first[j]) > AGREE_TOL:
                    same = False
                    break
        if f < best:
            best, tried = f, False
            xb[n] = x
    fb[n] = best
    cert[n] = False
    if budget <= 0:  # budget 0: the multi-start alone, uncertified (fixed-point iterations)
        agree[n] = same
        return
    if not tried and _certify_point(xb[n], best, omega[n], y[n], s, B, index, scale, beta, Q,
                                    gain, c3[n], tol, budget, stack) == CERTIFIED:
        cert[n] = True
        return
    # second try: Newton from points spread over the ball of global minimisers (a better
    # minimum shrinks the ball), then the certificate again
    rad = minimiser_ball_radius(best, s, beta)
    step = _retry_step(rad, y.shape[1])
    if y.shape[1] <= _AXIS_RETRY_MAX_T:    # ± along the axes of x
        directions, centre = np.eye(Ke), np.zeros(Ke)
    else:                                   # ± along the least curved directions at x*
        _, H = _gradhessT(xb[n], omega[n], y[n], s, B, index, scale, beta)
        directions = np.ascontiguousarray(np.linalg.eigh(H)[1][:, :_RETRY_DIRECTIONS])
        centre = xb[n].copy()
    for i in range(directions.shape[1]):
        for sign in (-1.0, 1.0):
            x0 = centre + sign * step * directions[:, i]
            f = newtonT_into(x0, omega[n], y[n], s, B, index, scale, beta, radius,
                             max_iter, vectors, matrices, rotations)
            if f < fb[n]:
                xb[n], fb[n] = x, f
    if y.shape[1] <= _AXIS_RETRY_MAX_T:
        # then x* ± radius/2 along n_shell quasi-random directions: where Σ is large the
        # lower minima lie around x*, and the axes from ω miss most of them
        x_star = xb[n].copy()
        for j in range(n_shell):
            u = _weyl_direction(n * n_shell + j + 1, Ke)
            f = newtonT_into(x_star + step * u, omega[n], y[n], s, B, index,
                             scale, beta, radius, max_iter, vectors, matrices, rotations)
            if f < fb[n]:
                xb[n], fb[n] = x, f
    if fb[n] < best:
        cert[n] = _certify_point(xb[n], fb[n], omega[n], y[n], s, B, index, scale, beta, Q,
                                 gain, c3[n], tol, budget, stack) == CERTIFIED


def _proxT_py(omega, y, sigma, B, index, scale, beta, x_fit, convex, warm, use_warm,
              trust_warm, n_starts, radius, max_iter, Q, gain, c3, tol, budget, n_shell,
              agree):
    """Any-T prox over all samples: ``x`` (N, K − 1), the objective (N,), certified mask.

    Provably convex samples (the crude bound of :meth:`.prox._SoftmaxProblem.convex`): one
    Newton run from the warm start (or ω), certified. With a warm start and
    ``trust_warm``, the others get one Newton run from it, uncertified (the fixed-point
    iterations). With a warm start and ``budget > 0``, Newton from it and the certificate
    (:func:`._certify_rows.certify_convex`, then :func:`._certify_dual.certify_dual`);
    where that fails (or without a warm start), the multi-start on the segment ω → fit of
    :meth:`.softmax.SoftmaxChannel._prox`, the certificate if ``budget > 0``, and a second
    round of starts where it fails (up to T = 5 its last ``n_shell`` starts lie around the
    found minimiser).

    ``agree`` (bool, N; read and written), the multi-start memory of the uncertified
    evaluations (``budget`` 0, without ``trust_warm``): a sample marked in it that has a
    warm start gets one Newton run from there; the others get the multi-start, and are
    marked where all its starts end within :data:`AGREE_TOL` of one point (no
    ``use_warm``, and an array of zeros: the plain multi-start).
    """
    N, Ke = omega.shape[0], B.shape[1]
    T = y.shape[1]
    xb = np.zeros((N, Ke))
    fb = np.zeros(N)
    cert = np.zeros(N, dtype=np.bool_)
    n_chunks = (N + _CHUNK - 1) // _CHUNK
    for c in _prange(n_chunks):
        stack = np.empty((4096 if budget > 0 else 1, T))
        vectors, matrices, rotations = newton_workspace(omega.shape[1])
        for n in range(c * _CHUNK, min(N, (c + 1) * _CHUNK)):
            _proxT_sample(n, omega, y, sigma, B, index, scale, beta, x_fit, convex, warm,
                          use_warm, trust_warm, n_starts, radius, max_iter, Q, gain, c3,
                          tol, budget, n_shell, stack, vectors, matrices, rotations, xb,
                          fb, cert, agree)
    return xb, fb, cert


# serial and parallel (over sample chunks) compilations of the same driver
proxT = _jit(_proxT_py)
proxT_parallel = parallel_twin(_proxT_py)


@_jit
def last_shell(samples, omega, y, sigma, B, index, scale, beta, radius, max_iter, Q, gain,
               c3, tol, budget, n_shell, xb, fb, cert):
    """One more round of ``n_shell`` Newton starts at the ``samples`` every certificate
    left uncertified (T ≤ 6): ``x* + (ρ/2) u`` up to T = 5 and ``x* + ρ u`` at T = 6 (the
    second round's steps), ρ the radius of the ball of global minimisers, along Weyl
    directions past those of :func:`proxT`'s shell (which depend on the sample's row, so a
    sample's first round can miss a lower basin that another row's directions reach; at
    T = 6 the second round has no such directions). Where a start ends lower by more
    than ``tol``, ``xb, fb`` take it and ``cert`` its certificate (convexity, then the
    row-wise dual bound); returns the mask of the samples lowered."""
    N, Ke, T = omega.shape[0], B.shape[1], y.shape[1]
    lowered = np.zeros(samples.size, dtype=np.bool_)
    stack = np.empty((4096, T))
    vectors, matrices, rotations = newton_workspace(omega.shape[1])
    x = vectors[END_POINT_ROW, :Ke]
    for i in range(samples.size):
        n = samples[i]
        s = sigma[n]
        step = _retry_step(minimiser_ball_radius(fb[n], s, beta), T)
        x_star = xb[n].copy()
        for j in range(n_shell):
            u = _weyl_direction((N + n) * n_shell + j + 1, Ke)
            f = newtonT_into(x_star + step * u, omega[n], y[n], s, B, index, scale, beta,
                             radius, max_iter, vectors, matrices, rotations)
            # lower by more than the certificate's tolerance: a new basin, not the same
            # minimum polished again
            if f < fb[n] - tol:
                xb[n], fb[n], lowered[i] = x, f, True
        if lowered[i]:
            cert[n] = _certify_point(xb[n], fb[n], omega[n], y[n], s, B, index, scale, beta,
                                     Q, gain, c3[n], tol, budget, stack) == CERTIFIED
    return lowered
