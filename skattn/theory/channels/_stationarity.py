"""The stationarity system of one row of the row-wise dual bound (:mod:`._certify_dual`,
docstring 2) in its T + 2 unknowns ``(v, μ, g)``: its residual and Jacobian, the Krawczyk
operator that excludes or proves its zeros on a box, and the largest box around the found
point on which it proves one.
"""

from __future__ import annotations

import math

from ._kernels import _jit, _jit_inline, hold_references


@_jit_inline
def _invert(J, Y, work):
    """``Y = J⁻¹`` by Gauss–Jordan with partial pivoting (n ≤ 8: no LAPACK call); False
    where a pivot is negligible (``work``: scratch of J's shape). Compiled into its
    callers, with one return and every array held there
    (:func:`._kernels.hold_references`)."""
    n = J.shape[0]
    scale = 0.0
    for i in range(n):
        for j in range(n):
            work[i, j] = J[i, j]
            Y[i, j] = 1.0 if i == j else 0.0
            scale = max(scale, abs(J[i, j]))
    ok = True
    for j in range(n):
        p = j
        for i in range(j + 1, n):
            if abs(work[i, j]) > abs(work[p, j]):
                p = i
        if not abs(work[p, j]) > 1e-13 * scale:
            ok = False
            break
        if p != j:
            for k in range(n):
                work[j, k], work[p, k] = work[p, k], work[j, k]
                Y[j, k], Y[p, k] = Y[p, k], Y[j, k]
        inv = 1.0 / work[j, j]
        for k in range(n):
            work[j, k] *= inv
            Y[j, k] *= inv
        for i in range(n):
            if i != j and work[i, j] != 0.0:
                fac = work[i, j]
                for k in range(n):
                    work[i, k] -= fac * work[j, k]
                    Y[i, k] -= fac * Y[j, k]
    hold_references(J, Y, work)
    return ok


@_jit
def _known_exp(v, c, side, known):
    """``e^v``, taken from ``known`` where v is the end of coordinate c's interval whose
    exponential :func:`._certify_dual._contract_from_ends` left there (``known[2 + side,
    c]`` the end, ``known[side, c]`` its exponential; side 0 the lower end): the same
    number, computed once (where the contraction moved no end, the box's own ends).
    None: computed."""
    if known is None:
        return math.exp(v)
    return known[side, c] if v == known[2 + side, c] else math.exp(v)


@_jit
def _jacobian_point(xc, kappa, yrow, f, ferr, J):
    """The stationarity system at the point xc of (v, μ, g): its residual ``f`` (with the
    bound ``ferr`` of its rounding) and Jacobian ``J`` (``kappa``: κ_c per coordinate)."""
    T = yrow.shape[0]
    mu, g = xc[T], xc[T + 1]
    J[:, :] = 0.0
    total, q, q_abs = 0.0, 0.0, 0.0
    for c in range(T):
        u = math.exp(xc[c])
        f[c] = xc[c] + kappa[c] * u * (u - yrow[c] - g) - mu
        ferr[c] = 1e-14 * (abs(xc[c]) + abs(kappa[c]) * u * (u + abs(yrow[c] + g)) + abs(mu) + 1)
        total += u
        q += u * (u - yrow[c])
        q_abs += u * (u + yrow[c])
        J[c, c] = 1 + kappa[c] * u * (2 * u - yrow[c] - g)
        J[c, T] = -1.0
        J[c, T + 1] = -kappa[c] * u
        J[T, c] = u
        J[T + 1, c] = u * (2 * u - yrow[c])
    J[T + 1, T + 1] = -1.0
    f[T] = total - 1.0
    ferr[T] = 1e-14 * (total + 1)
    f[T + 1] = q - g
    ferr[T + 1] = 1e-14 * (q_abs + abs(g))


@_jit
def _krawczyk(xc, r, kappa, yrow, b, Kc, Kr, work):
    """The Krawczyk image ``K ⊂ Kc ± Kr`` of the box ``xc ± r`` of (v, μ, g) for the
    stationarity system ``F_c(v_c, g) − b_c − μ = 0`` (κ_c = ``kappa[c]``), ``Σ e^v =
    1``, ``Σ e^v(e^v − y) = g``: ``K = x̃ − Y f(x̃) + (I − Y J(X))(X − x̃)``, ``Y`` the
    inverse Jacobian at the centre x̃ and J(X) the Jacobian's interval hull on the box.
    Every zero in X lies in K; ``K ⊂ int X`` proves exactly one. ``work`` (≥ 7 scratch
    matrices of (T + 2)²); False where the centre's Jacobian is singular."""
    if not _krawczyk_centre(xc, kappa, yrow, b, None, work):
        return False
    _krawczyk_image(xc, r, kappa, yrow, Kc, Kr, work, False, None)
    return True


@_jit
def _krawczyk_centre(xc, kappa, yrow, b, b_slack, work):
    """The centre's part of :func:`_krawczyk` (the residual, its rounding bound, J and
    ``Y = J⁻¹``, to ``work``), shared by boxes around the same centre; False where J is
    singular or not finite. One return, every array held there
    (:func:`._kernels.hold_references`): it runs per combination of a search."""
    T = yrow.shape[0]
    n = T + 2
    f, ferr = work[0, 0], work[0, 1]
    J, Y, tmp = work[1], work[2], work[6]
    _jacobian_point(xc, kappa, yrow, f, ferr, J)
    for c in range(T):
        f[c] -= b[c]
        ferr[c] += 1e-14 * abs(b[c])
    if b_slack is not None:
        for c in range(T):
            ferr[c] += b_slack[c]
    finite = True
    for i in range(n):
        for j in range(n):
            finite = finite and math.isfinite(J[i, j])
    ok = finite and (_invert_arrowhead(J, Y) or _invert(J, Y, tmp))
    hold_references(xc, kappa, yrow, b, b_slack, work, f, ferr, J, Y, tmp)
    return ok


# the arrowhead inverse is used where every diagonal entry of J's first T is at least this
# fraction of J's largest entry (else Gauss–Jordan with pivoting)
_ARROWHEAD_PIVOT = 1e-3


@_jit_inline
def _invert_arrowhead(J, Y):
    """``Y = J⁻¹`` for the arrowhead ``J = [[D, B], [C, E]]`` of the stationarity system
    (D diagonal T × T, B T × 2, C 2 × T, E 2 × 2) by the Schur complement ``S = E −
    C D⁻¹ B``: O(T²), against Gauss–Jordan's O(T³). False where a diagonal entry of D or
    S's determinant is small (any Y is sound in the Krawczyk test, which bounds
    ``I − Y J`` itself; a poor one only weakens it). Compiled into its callers, with one
    return and every array held there (:func:`._kernels.hold_references`)."""
    n = J.shape[0]
    T = n - 2
    scale = 0.0
    for i in range(n):
        for j in range(n):
            scale = max(scale, abs(J[i, j]))
    s00, s01, s10, s11 = J[T, T], J[T, T + 1], J[T + 1, T], J[T + 1, T + 1]
    ok = True
    for c in range(T):
        d = J[c, c]
        if not abs(d) >= _ARROWHEAD_PIVOT * scale:
            ok = False
            break
        # Y's last two rows hold C D⁻¹ for now
        Y[T, c], Y[T + 1, c] = J[T, c] / d, J[T + 1, c] / d
        s00 -= Y[T, c] * J[c, T]
        s01 -= Y[T, c] * J[c, T + 1]
        s10 -= Y[T + 1, c] * J[c, T]
        s11 -= Y[T + 1, c] * J[c, T + 1]
    if ok:
        det = s00 * s11 - s01 * s10
        ok = abs(det) > 1e-12 * (abs(s00 * s11) + abs(s01 * s10))
        if ok:
            i00, i01, i10, i11 = s11 / det, -s01 / det, -s10 / det, s00 / det
            for c in range(T):
                # −S⁻¹ C D⁻¹ (the last two rows)
                q0, q1 = Y[T, c], Y[T + 1, c]
                Y[T, c], Y[T + 1, c] = -(i00 * q0 + i01 * q1), -(i10 * q0 + i11 * q1)
            Y[T, T], Y[T, T + 1], Y[T + 1, T], Y[T + 1, T + 1] = i00, i01, i10, i11
            for i in range(T):
                # −D⁻¹ B S⁻¹ (the last two columns), and D⁻¹ + D⁻¹ B S⁻¹ C D⁻¹ = D⁻¹ −
                # (D⁻¹ B)(−S⁻¹ C D⁻¹), with one D⁻¹ B row
                p0, p1 = J[i, T] / J[i, i], J[i, T + 1] / J[i, i]
                Y[i, T], Y[i, T + 1] = -(p0 * i00 + p1 * i10), -(p0 * i01 + p1 * i11)
                for j in range(T):
                    Y[i, j] = -(p0 * Y[T, j] + p1 * Y[T + 1, j])
                Y[i, i] += 1.0 / J[i, i]
    hold_references(J, Y)
    return ok


@_jit
def _krawczyk_image(xc, r, kappa, yrow, Kc, Kr, work, stop_if_disjoint, known):
    """The image of :func:`_krawczyk` for the box ``xc ± r`` from its centre's part in
    ``work`` (:func:`_krawczyk_centre`). With ``stop_if_disjoint``, returns True at the
    first row whose image misses the box (``|Kc_i − xc_i| > Kr_i + r_i``: no zero in the
    box), the rows after it not computed; else False with every row computed (each row's
    arithmetic is the same either way). ``known``: None, or exponentials of the box's
    ends already computed (:func:`_known_exp`). One return, every array held there
    (:func:`._kernels.hold_references`)."""
    T = yrow.shape[0]
    n = T + 2
    f, ferr = work[0, 0], work[0, 1]
    J, Y, Jc, Jr, C = work[1], work[2], work[3], work[4], work[5]
    disjoint = False
    # the interval hull of J on the box: centre offset from J(x̃) (Jc) and radius (Jr),
    # on J's arrowhead pattern only (the entries off it are 0 and never read)
    g_lo, g_hi = xc[T + 1] - r[T + 1], xc[T + 1] + r[T + 1]
    for c in range(T):
        ul, uh = _known_exp(xc[c] - r[c], c, 0, known), _known_exp(xc[c] + r[c], c, 1, known)
        lo = min(ul * (2 * ul - yrow[c] - g_hi), uh * (2 * ul - yrow[c] - g_hi))
        hi = max(ul * (2 * uh - yrow[c] - g_lo), uh * (2 * uh - yrow[c] - g_lo))
        Jc[c, c] = 1 + kappa[c] * 0.5 * (lo + hi) - J[c, c]
        Jr[c, c] = abs(kappa[c]) * 0.5 * (hi - lo)
        Jc[c, T + 1] = -kappa[c] * 0.5 * (ul + uh) - J[c, T + 1]
        Jr[c, T + 1] = abs(kappa[c]) * 0.5 * (uh - ul)
        Jc[T, c], Jr[T, c] = 0.5 * (ul + uh) - J[T, c], 0.5 * (uh - ul)
        lo = min(ul * (2 * ul - yrow[c]), uh * (2 * ul - yrow[c]))
        hi = max(ul * (2 * uh - yrow[c]), uh * (2 * uh - yrow[c]))
        Jc[T + 1, c], Jr[T + 1, c] = 0.5 * (lo + hi) - J[T + 1, c], 0.5 * (hi - lo)
    # |I − Y J(X)| ≤ |I − Y J(x̃) − Y Jc| + |Y| Jr, entrywise, each sum over the rows of
    # J's pattern in column j, in increasing order (the same sums as over all rows):
    # column c < T has rows c, T and T + 1; column T (μ) rows < T, constant (no Jr);
    # column T + 1 (g) rows < T and T + 1 (−1, constant). Row by row: row i of C, then
    # row i of the image
    for i in range(n):
        for j in range(T):
            cij = 1.0 if i == j else 0.0
            cij -= Y[i, j] * (J[j, j] + Jc[j, j])
            cij -= Y[i, T] * (J[T, j] + Jc[T, j])
            cij -= Y[i, T + 1] * (J[T + 1, j] + Jc[T + 1, j])
            rij = abs(Y[i, j]) * Jr[j, j] + abs(Y[i, T]) * Jr[T, j]
            rij += abs(Y[i, T + 1]) * Jr[T + 1, j]
            C[i, j] = abs(cij) + rij
        c_mu = 1.0 if i == T else 0.0
        c_g = 1.0 if i == T + 1 else 0.0
        r_g = 0.0
        for k in range(T):
            c_mu -= Y[i, k] * J[k, T]
            c_g -= Y[i, k] * (J[k, T + 1] + Jc[k, T + 1])
            r_g += abs(Y[i, k]) * Jr[k, T + 1]
        c_g -= Y[i, T + 1] * J[T + 1, T + 1]
        C[i, T] = abs(c_mu)
        C[i, T + 1] = abs(c_g) + r_g
        step, spread = 0.0, 0.0
        for k in range(n):
            step += Y[i, k] * f[k]
            spread += C[i, k] * r[k] + abs(Y[i, k]) * ferr[k]
        Kc[i] = xc[i] - step
        # a relative margin for the rounding of these products
        Kr[i] = spread * (1 + 1e-9) + 1e-12 * abs(step) + 1e-15 * (abs(xc[i]) + 1)
        if stop_if_disjoint and abs(Kc[i] - xc[i]) > Kr[i] + r[i]:
            disjoint = True
            break
    hold_references(xc, r, kappa, yrow, Kc, Kr, work, known, f, ferr, J, Y, Jc, Jr, C)
    return disjoint


# the found point's box: ρ = 2^-k, k ≤ _FOUND_BOX_HALVINGS; the search starts at
# k = _FOUND_BOX_FIRST, the usual answer, then goes up while the larger box passes, or
# down until one does (the counts behind the start: docs: Changelog)
_FOUND_BOX_HALVINGS = 44
_FOUND_BOX_FIRST = 5


@_jit
def _found_point_box(x, kappa, yrow, b, Xlo, Xhi, r, Kc, Kr, work):
    """The largest box ``x ± ρw`` (``ρ = 2^-k``; ``w`` the row sums of ``|J(x)⁻¹|``)
    around the found point x = (log s*, μ*, g*) in which the Krawczyk test proves one zero
    of the stationarity system, searched from ``k = _FOUND_BOX_FIRST`` up while a larger
    box passes, else down; writes it to Xlo, Xhi and returns ρ (0: none found). ``r``,
    ``Kc``, ``Kr`` and ``work`` are scratch (they hold the last box tried)."""
    T = yrow.shape[0]
    n = T + 2
    # the centre's part of the Krawczyk operator once, for every ρ
    if not _krawczyk_centre(x, kappa, yrow, b, None, work):
        return 0.0
    Y, w = work[2], work[0, 2]
    for i in range(n):
        w[i] = 0.0
        for k in range(n):
            w[i] += abs(Y[i, k])
    k = _FOUND_BOX_FIRST
    if _proves_one_zero(x, 0.5 ** k, w, kappa, yrow, r, Kc, Kr, work):
        while k > 0 and _proves_one_zero(x, 0.5 ** (k - 1), w, kappa, yrow, r, Kc, Kr, work):
            k -= 1
    else:
        k += 1
        while not _proves_one_zero(x, 0.5 ** k, w, kappa, yrow, r, Kc, Kr, work):
            k += 1
            if k > _FOUND_BOX_HALVINGS:
                return 0.0
    rho = 0.5 ** k
    for i in range(n):
        Xlo[i], Xhi[i] = x[i] - rho * w[i], x[i] + rho * w[i]
    return rho


@_jit
def _proves_one_zero(x, rho, w, kappa, yrow, r, Kc, Kr, work):
    """Whether the Krawczyk image of the box ``x ± ρw`` (centre part in ``work``) lies in
    its interior: exactly one zero there."""
    n = x.shape[0]
    for i in range(n):
        r[i] = rho * w[i]
    _krawczyk_image(x, r, kappa, yrow, Kc, Kr, work, False, None)
    for i in range(n):
        if not abs(Kc[i] - x[i]) + Kr[i] < r[i]:
            return False
    return True
