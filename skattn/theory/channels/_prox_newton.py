"""The T ≥ 3 softmax prox's Newton run on one sample, on its caller's workspace.

The algorithm of :mod:`._kernels` (damped modified Newton with the direction
``−|H|⁻¹g``, a step cap, Armijo backtracking with quadratic interpolation and the same
stopping rules) for the T ≥ 3 drivers of :mod:`._proxT`, one sample at a time. A run
allocates nothing and calls no BLAS: its products are loops, and where the Hessian is
indefinite it solves with ``|H|⁻¹`` without forming eigenvectors (LAPACK only where that
fails). With vectors of K ≤ 21 entries the allocations, BLAS calls and eigenvector
matrices cost more than the arithmetic: multi-start evaluations took 1.5–1.6 times as
long with them (docs: Changelog, "Newton workspace").
"""

import math

import numpy as np

from ._kernels import (_dirT, _hess_u, _jit, _jit_inline, backtrack_step,
                       capped_newton_step, cholesky_direction, hold_references)

# The workspace, ``(vectors, matrices, rotations)`` of :func:`newton_workspace`. Rows of
# the vectors: z, g_z, p_z, the Cholesky solve's w, x, g, p, the trial x, a row's softmax
# (T ≤ K entries) and its W, and for the indefinite solve (:func:`_abs_inverse_solve`)
# the transformed gradient, the eigenvalues and the off-diagonal; the matrices: ∇²_z,
# its Cholesky factor, the tridiagonal reduction's copy and its Householder vectors; the
# rotations: the QL iteration's record.
_WS_Z, _WS_GZ, _WS_PZ, _WS_W, _WS_X, _WS_G, _WS_P, _WS_XT, _WS_A, _WS_AW, _WS_U, _WS_D, \
    _WS_E = range(13)
# the row of the vectors where a run leaves its end point
END_POINT_ROW = _WS_X
# the QL iteration's record holds this many rotations per K²: about 1.3 K² are made
# (at most 1.64 K² on 8000 random symmetric matrices, K = 6–21); a full record sends the
# solve to LAPACK
_ROTATIONS_PER_K2 = 8


@_jit
def newton_workspace(K):
    """The scratch of :func:`newtonT_into` for logits of length ``K`` (one per thread)."""
    return (np.zeros((13, K)), np.zeros((4, K, K)),
            np.empty((3, _ROTATIONS_PER_K2 * K * K)))


@_jit_inline
def _reflect(u, reflectors, k):
    """``u ← (I − 2vvᵀ)u`` for the unit vector ``v``, row k of ``reflectors`` (zero up to
    its entry k). Compiled into its caller (no call, no references)."""
    t = 0.0
    for i in range(k + 1, u.shape[0]):
        t += reflectors[k, i] * u[i]
    for i in range(k + 1, u.shape[0]):
        u[i] -= 2.0 * t * reflectors[k, i]


@_jit
def _abs_inverse_solve(H, g, work, reflectors, u, d, e, rotations, out):
    """``out = |H|⁻¹g`` for the symmetric ``H``: the eigenvalues replaced by their
    absolute values, floored at ``1e-12 max|λ| + 1e-300`` (as ``−p`` of the numpy path's
    eigen-direction). False (``out`` untouched) where the QL iteration does not converge
    in 30 sweeps per eigenvalue, overflows or fills the record of ``rotations``.

    ``H = Q T Qᵀ`` by Householder reflections (a copy in ``work``, the reflectors' unit
    vectors in the rows of ``reflectors``), ``T = S Λ Sᵀ`` by the implicit QL iteration
    with Wilkinson's shift on the eigenvalues alone, so that ``|H|⁻¹g = QS |Λ|⁻¹ SᵀQᵀg``:
    ``Qᵀg`` and ``Sᵀ`` are applied to the vector as each reflector and rotation is
    made, and the recorded rotations and the reflectors map back. About twice as fast
    as LAPACK's eigen-decomposition at K = 10–21: no eigenvector matrix is formed.
    """
    n = H.shape[0]
    for i in range(n):
        u[i] = g[i]
        for j in range(n):
            work[i, j] = H[i, j]
    for k in range(n - 2):
        norm2 = 0.0
        for i in range(k + 1, n):
            norm2 += work[i, k] * work[i, k]
        x0 = work[k + 1, k]
        alpha = -math.sqrt(norm2) if x0 >= 0 else math.sqrt(norm2)
        length2 = 2.0 * (norm2 - alpha * x0)   # ‖x − αe₁‖², zero only for a zero column
        for i in range(n):
            reflectors[k, i] = 0.0
        if length2 == 0.0:
            continue
        inv = 1.0 / math.sqrt(length2)
        reflectors[k, k + 1] = (x0 - alpha) * inv
        for i in range(k + 2, n):
            reflectors[k, i] = work[i, k] * inv
        # the trailing block ← P A P with P = I − 2vvᵀ: A − 2(vqᵀ + qvᵀ), q = Av − (vᵀAv)v
        vav = 0.0
        for i in range(k + 1, n):
            t = 0.0
            for j in range(k + 1, n):
                t += work[i, j] * reflectors[k, j]
            e[i] = t
            vav += reflectors[k, i] * t
        for i in range(k + 1, n):
            e[i] -= vav * reflectors[k, i]
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                work[i, j] -= 2.0 * (reflectors[k, i] * e[j] + e[i] * reflectors[k, j])
        work[k + 1, k] = alpha
        _reflect(u, reflectors, k)
    for i in range(n):
        d[i] = work[i, i]
        e[i] = work[i + 1, i] if i + 1 < n else 0.0
    cap = rotations.shape[1]
    n_rot = 0
    ok = True
    for low in range(n):
        sweeps = 0
        while ok:
            m = low                             # the first negligible off-diagonal
            while m < n - 1:
                dd = abs(d[m]) + abs(d[m + 1])
                if abs(e[m]) + dd == dd:
                    break
                m += 1
            if m == low:
                break
            sweeps += 1
            if sweeps > 30 or n_rot + m - low > cap:
                ok = False
                break
            shift = (d[low + 1] - d[low]) / (2.0 * e[low])
            r = math.sqrt(shift * shift + 1.0)
            shift = d[m] - d[low] + e[low] / (shift + (r if shift >= 0 else -r))
            sn, cs, carry = 1.0, 1.0, 0.0
            deflated = False
            i = m - 1
            while i >= low:
                f = sn * e[i]
                b = cs * e[i]
                r = math.sqrt(f * f + shift * shift)
                if not r < 1e150:               # overflow (or NaN): LAPACK instead
                    ok = False
                    break
                e[i + 1] = r
                if r == 0.0:                    # underflow: deflate here, sweep again
                    d[i + 1] -= carry
                    e[m] = 0.0
                    deflated = True
                    break
                inv = 1.0 / r
                sn, cs = f * inv, shift * inv
                shift = d[i + 1] - carry
                r = (d[i] - shift) * sn + 2.0 * cs * b
                carry = sn * r
                d[i + 1] = shift + carry
                shift = cs * r - b
                t = u[i + 1]                    # u ← Rᵀu, R the rotation of (i, i + 1)
                u[i + 1] = sn * u[i] + cs * t
                u[i] = cs * u[i] - sn * t
                rotations[0, n_rot] = i
                rotations[1, n_rot] = cs
                rotations[2, n_rot] = sn
                n_rot += 1
                i -= 1
            if deflated or not ok:
                continue
            d[low] -= carry
            e[low] = shift
            e[m] = 0.0
        if not ok:
            break
    if ok:
        floor = 0.0
        for i in range(n):
            floor = max(floor, abs(d[i]))
        floor = 1e-12 * floor + 1e-300
        for i in range(n):
            u[i] /= max(abs(d[i]), floor)
        for j in range(n_rot - 1, -1, -1):      # S u: the rotations, last one first
            i = int(rotations[0, j])
            cs, sn = rotations[1, j], rotations[2, j]
            a, b = u[i], u[i + 1]
            u[i] = cs * a + sn * b
            u[i + 1] = cs * b - sn * a
        for k in range(n - 3, -1, -1):          # Q u: the reflectors, last one first
            _reflect(u, reflectors, k)
        for i in range(n):
            out[i] = u[i]
    hold_references(H, g, work, reflectors, u, d, e, rotations, out)
    return ok


@_jit
def _objectiveT(x, omega, y, s, B, index, scale, beta, vectors):
    """The prox objective ``‖x‖²/(2Σ) + ℓ(ω + Bx)`` of one sample (uses the rows z and A
    of ``vectors``). One return, no calls: no references (:func:`hold_references`)."""
    K, Ke, T = omega.shape[0], B.shape[1], y.shape[0]
    xx = 0.0
    for j in range(Ke):
        xx += x[j] * x[j]
    for i in range(K):
        v = 0.0
        for j in range(Ke):
            v += B[i, j] * x[j]
        vectors[_WS_Z, i] = omega[i] + v
    loss = 0.0
    for a in range(T):
        mx = -math.inf
        for c in range(T):
            h = beta * vectors[_WS_Z, index[a, c]] * scale[a, c]
            vectors[_WS_A, c] = h
            mx = max(mx, h)
        tot = 0.0
        for c in range(T):
            vectors[_WS_A, c] = math.exp(vectors[_WS_A, c] - mx)
            tot += vectors[_WS_A, c]
        for c in range(T):
            loss += (vectors[_WS_A, c] / tot - y[a, c]) ** 2
    out = xx / (2 * s) + loss
    hold_references(x, omega, y, B, index, scale, vectors)
    return out


@_jit
def _newton_directionT(x, omega, y, s, B, index, scale, beta, vectors, matrices,
                       rotations):
    """Gradient and modified-Newton direction ``−|H|⁻¹g`` in x (rows g and p of
    ``vectors``), computed in z.

    In z the objective ``‖z − ω‖²/(2Σ) + ℓ(z)`` has the Hessian ``I/Σ + ∇²_zℓ``, which maps
    the shift direction to itself over Σ (ℓ is constant along it) and the complement
    ``range B`` to itself; with ``g_z`` orthogonal to the shift the z-direction is ``B``
    times the x-direction, exactly (also with the eigenvalue modification). Solving in z
    saves the products ``Bᵀ(∇²ℓ B)`` (~17k flops at T = 6, most of a Newton step).
    Cholesky where the Hessian is positive definite, else :func:`_abs_inverse_solve`
    (LAPACK's eigen-decomposition where that fails).
    """
    K, Ke = omega.shape[0], B.shape[1]
    z, gz, pz = vectors[_WS_Z], vectors[_WS_GZ], vectors[_WS_PZ]
    Hz = matrices[0]
    for i in range(K):
        v = 0.0
        for j in range(Ke):
            v += B[i, j] * x[j]
        z[i] = omega[i] + v
        gz[i] = (z[i] - omega[i]) / s
    T = y.shape[0]          # the row scratch has K ≥ T entries: its first T
    _hess_u(z, y, index, scale, beta, Hz, vectors[_WS_A, :T], vectors[_WS_AW, :T], gz)
    for i in range(K):
        Hz[i, i] += 1.0 / s
    if not cholesky_direction(Hz, gz, matrices[1], vectors[_WS_W], pz):
        if _abs_inverse_solve(Hz, gz, matrices[2], matrices[3], vectors[_WS_U],
                              vectors[_WS_D], vectors[_WS_E], rotations, pz):
            for i in range(K):
                pz[i] = -pz[i]
        else:                                   # LAPACK's route (rare)
            pz[:] = _dirT(gz, Hz)
    for j in range(Ke):
        vg, vp = 0.0, 0.0
        for i in range(K):
            vg += B[i, j] * gz[i]
            vp += B[i, j] * pz[i]
        vectors[_WS_G, j] = vg
        vectors[_WS_P, j] = vp


@_jit
def newtonT_into(x0, omega, y, s, B, index, scale, beta, radius, max_iter, vectors,
                 matrices, rotations):
    """Damped modified Newton from ``x0`` on one T ≥ 3 sample: returns the objective at
    the end point, which it leaves in ``vectors[END_POINT_ROW, :K − 1]`` (``vectors,
    matrices, rotations``: :func:`newton_workspace`). The step cap, Armijo backtracking
    and stopping rules of the module's docstring."""
    Ke = B.shape[1]
    x, g, p, xt = vectors[_WS_X], vectors[_WS_G], vectors[_WS_P], vectors[_WS_XT]
    for j in range(Ke):
        x[j] = x0[j]
    f = _objectiveT(x, omega, y, s, B, index, scale, beta, vectors)
    for _ in range(max_iter):
        _newton_directionT(x, omega, y, s, B, index, scale, beta, vectors, matrices,
                           rotations)
        pn, slope, xnorm, noise, resolved, small = capped_newton_step(x, g, p, Ke, f,
                                                                       radius)
        if slope < 0 and not resolved and not small:
            for j in range(Ke):
                xt[j] = x[j] + p[j]
            ft = _objectiveT(xt, omega, y, s, B, index, scale, beta, vectors)
            if ft <= f + noise:
                for j in range(Ke):
                    x[j] = xt[j]
                f = ft
        if small or not resolved:
            break
        t, accepted = 1.0, False
        for _ in range(30):
            for j in range(Ke):
                xt[j] = x[j] + t * p[j]
            ft = _objectiveT(xt, omega, y, s, B, index, scale, beta, vectors)
            if ft <= f + 1e-4 * t * slope and math.isfinite(ft):
                for j in range(Ke):
                    x[j] = xt[j]
                f, accepted = ft, True
                break
            t = backtrack_step(ft, f, slope, t)
        if not accepted or t * pn <= 1e-11 * xnorm:
            break
    return f


@_jit
def _newtonT(x, omega, y, s, B, index, scale, beta, radius, max_iter):
    """:func:`newtonT_into` on a workspace of its own: ``(end point, objective)`` (for
    callers outside the sample loops: its allocations cost more than the run)."""
    vectors, matrices, rotations = newton_workspace(omega.shape[0])
    f = newtonT_into(x, omega, y, s, B, index, scale, beta, radius, max_iter, vectors,
                     matrices, rotations)
    return vectors[_WS_X, :B.shape[1]].copy(), f
