"""Row-wise softmax attention channel; its prox is the multi-start Newton of :mod:`.prox`."""

from __future__ import annotations

import numpy as np

from ..._validation import check_scalar_range
from ..coords import _maps
from . import _certify, _certify_rows, _certify_split, _certify_star, _kernels, _proxT
from .base import _as_sigma, _Channel
from .prox import _newton, _Softmax2Problem, _SoftmaxProblem

# clip of the labels before taking logs in ``fit_logits``: log(1e-12) ≈ −27.6, so the fitted
# logits stay moderate while the residual loss of the fit is ≤ ~1e-24
_LOG_CLIP = 1e-12
# the certificate proves F ≥ F(z*) − _CERT_TOL on the ball of global minimisers: a
# near-tie below it changes the Gaussian expectations by far less than their accuracy
_CERT_TOL = 1e-9


def _row_softmax(z):
    """Row-wise softmax of already-scaled logits, log-sum-exp stable."""
    z = z - np.max(z, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


class SoftmaxChannel(_Channel):
    """Row-wise softmax attention ``σ_β(h)`` with square loss.

    Parameters
    ----------
    n_tokens : int
        Number of tokens T ≥ 2.
    beta : float, default=1.0
        Inverse temperature β of the student.
    target_beta : float, default=1.0
        Inverse temperature β0 of the teacher (used by :meth:`labels`).
    n_starts : int, optional
        Number of Newton starts of the prox on the segment between ω and the exact-fit
        point (both ends included). Default 2 for T = 2 (where a 2-D grid search supplies
        one more start) and 5 for T ≥ 3.
    max_iter : int, default=100
        Newton iterations of the prox.

    Attributes
    ----------
    n_tokens : int
    K : int
        ``T(T+1)/2`` components.
    K_eff : int
        ``K − 1``: the loss is invariant along the shift direction ``s``.
    shift : ndarray of shape (K,)
        Unit shift direction, ``s_k ∝ 1/√(1 + δ_ab)``.
    basis : ndarray of shape (K, K − 1)
        Orthonormal basis of the complement of ``shift``.
    certify_budget : int
        Cube (T = 2) or box (T ≥ 3) splits the certificate of one sample may make before it
        gives up; 0 skips the certificate (default 2000).
    shell_starts : int
        T = 3–5: Newton starts around the found minimiser in the second round of a sample
        whose first certificate failed (default 8, a class attribute; 0 leaves only the
        starts along the axes). Where Σ is large the lower minima that the multi-start
        misses lie there (the measurements: docs: Validation report, "Solver rules, on
        and off").
    last_shell_starts : int
        T = 3–6: Newton starts around the found minimiser, along other directions than
        the shell's, at the samples that every certificate left uncertified; a lower end
        point replaces the minimiser and is certified again (default 8, a class
        attribute; 0: off; the measurements: docs: Validation report, "Are the
        uncertified minimisers global?").
    split_rounds : int
        T ≥ 3: the splits of the quadratic between rows that the certificate tries on a
        sample whose equal-split bound fails (default 4, a class attribute; 0 switches
        the split search off; :mod:`._certify_split`).
    split_min_share : float
        T ≥ 3: in those splits each pair's weight stays within this fraction of
        ``1/(2Σ)`` from both ends (default 0.1, a class attribute; in (0, 0.5]). Near the
        ends a row's search runs out of budget (the measurements: docs: Validation
        report, "The certificate's unequal splits").
    star_bound : bool
        T ≥ 3: where every split fails and the equal split failed in one to three rows,
        keep one of them coupled to the others (their responses bounded below by
        certified quadratics and lines) and prove the bound of that star (default True, a
        class attribute; :mod:`._certify_star`; the measurements: docs: Validation report,
        "The certificate's star bound").
    star_split_rounds : int
        T ≥ 3, with ``star_bound``: where two or three rows failed, the splits tried in
        search of one where every row but the star's holds, before the star of that row
        under it (default 8, a class attribute; 0: the equal split only).
    star_local_rounds : int
        T ≥ 3, with ``star_bound``: where the star of a failing row still fails (under
        the equal split where one row fails, else under the split where the others
        hold), the rounds of *local pieces*, bounds on the other rows' responses proved
        on an interval only, as curved as those responses are there (default 2, at most
        1 under that split; a class attribute; 0: off, and with it the round of pieces
        centred at the star's lower point that follows; the measurements: docs:
        Validation report, "Local pieces of the star").
    double_star : bool
        T ≥ 3, with ``star_bound``: where every star fails and one or two rows failed,
        keep two rows coupled, with their shared entry, and prove that *double star* by a
        branch over the shared entry (default True, a class attribute;
        :mod:`._certify_double`; the measurements: docs: Validation report, "The
        certificate's double star").
    first_warm_starts : int or None
        T ≥ 3: Newton starts, on the same segment, of an uncertified warm evaluation (the
        fixed-point iterations) at the nodes that have no remembered minimiser yet, the
        first evaluation on a node set (default 1, from ω, a class attribute; None: the
        full ``n_starts``; the compiled prox only). The certified evaluations that follow
        replace any minimiser that is not global (the measurements: docs: Validation
        report, "The first warm evaluation").
    """

    shell_starts = _proxT.SHELL_STARTS
    last_shell_starts = _proxT.SHELL_STARTS
    first_warm_starts = 1
    split_rounds = _certify_split.MAX_ROUNDS
    split_min_share = _certify_split.MIN_SHARE
    star_bound = True
    star_split_rounds = _certify_star.STAR_SPLIT_ROUNDS
    star_local_rounds = _certify_star.LOCAL_ROUNDS
    double_star = True

    def __init__(self, n_tokens, beta=1.0, target_beta=1.0, n_starts=None, max_iter=100):
        if not isinstance(n_tokens, (int, np.integer)) or isinstance(n_tokens, bool) \
                or n_tokens < 2:
            raise ValueError(f"n_tokens must be an integer ≥ 2 for softmax attention "
                             f"(a single token has a constant softmax), got {n_tokens!r}.")
        n_tokens = int(n_tokens)
        self.beta = check_scalar_range(beta, "beta", low=0, low_inclusive=False)
        self.target_beta = check_scalar_range(target_beta, "target_beta", low=0,
                                              low_inclusive=False)
        if n_starts is None:
            n_starts = 2 if n_tokens == 2 else 5
        self.n_starts = check_scalar_range(n_starts, "n_starts", low=1, integer=True)
        self.max_iter = check_scalar_range(max_iter, "max_iter", low=1, integer=True)
        self._radius = 8.0                                   # Newton step cap, × 1/β
        # compiled per-sample prox where numba is installed (same algorithm as numpy)
        self.compiled = True
        # cubes the certificate may split per sample (T = 2) or per row of a sample (T ≥ 3,
        # :mod:`._certify_rows`) before giving up on it; 0 skips the certificate
        self.certify_budget = 2000
        self.beta_, self.target_beta_ = self.beta, self.target_beta
        self._setup(n_tokens)
        self.K_eff = self.K - 1
        _, _, _, inv_scale, _, _ = _maps(n_tokens)
        s = inv_scale.copy()
        self.shift = s / np.linalg.norm(s)
        # orthonormal complement of the shift direction
        q, _ = np.linalg.qr(np.column_stack([self.shift, np.eye(self.K)]))
        self.basis = np.ascontiguousarray(q[:, 1:self.K])
        # least-squares design of the log-ratio equations log y_ab = β h_ab − c_a
        T, K = n_tokens, self.K
        design = np.zeros((T * T, K + T))
        design[:, :K] = self.beta * self._L
        for a in range(T):
            design[a * T:(a + 1) * T, K + a] = -1.0
        self._fit_pinv = np.linalg.pinv(design)[:K]          # (K, T²)
        if T >= 3:  # row-space geometry of the T ≥ 3 certificate
            self._row_basis, self._row_gain = _certify_rows.row_geometry(self)

    def __repr__(self):
        return (f"SoftmaxChannel(n_tokens={self.n_tokens}, beta={self.beta}, "
                f"target_beta={self.target_beta})")

    @staticmethod
    def _act(h, beta):
        return _row_softmax(beta * h)

    def _row_terms(self, A, r, hessian):
        b = self.beta_
        sbar = np.sum(r * A, axis=-1, keepdims=True)
        Arho = A * (r - sbar)                          # A_c ρ_c, ρ = r − Σ_b r_b A_b
        G = 2 * b * Arho
        if not hessian:
            return G, None
        # with J = diag(A) − AAᵀ (the softmax Jacobian / β),
        # ∇²_h ℓ_a = 2β²[J² + diag(Aρ) − (Aρ)Aᵀ − A(Aρ)ᵀ]
        #          = 2β²[diag(W) − WAᵀ − AWᵀ + ‖A‖² AAᵀ],  W = A ∘ (A + ρ)
        T = self.n_tokens
        W = A * A + Arho
        nA = np.sum(A * A, axis=-1)[..., None, None]
        Hrow = (nA * A[..., :, None] - W[..., :, None]) * A[..., None, :] \
            - A[..., :, None] * W[..., None, :]
        idx = np.arange(T)
        Hrow[..., idx, idx] += W
        return G, 2 * b * b * Hrow

    def _jac(self, u, beta):
        A = self._act(self._h(u), beta)                              # (N, T, T)
        T = self.n_tokens
        J = beta * (A[..., :, None] * np.eye(T) - A[..., :, None] * A[..., None, :])
        return np.matmul(J, self._Lr)                                # (N, T, T, K)

    def fit_logits(self, y):
        """Logits ``z`` with ``attention(z) ≈ y``.

        Solves ``log y_ab = β h_ab(z) − c_a`` by least squares (minimum norm) in the unknowns
        ``(z, c)``; exact when ``y`` is the softmax of symmetric logits at the student's β.
        Entries of ``y`` are clipped below at ``1e-12`` so the logits stay finite.

        Parameters
        ----------
        y : array_like of shape (N, T, T)

        Returns
        -------
        z : ndarray of shape (N, K)
        """
        y = self._check_y(y)
        logy = np.log(np.clip(y, _LOG_CLIP, None))
        return logy.reshape(y.shape[0], -1) @ self._fit_pinv.T

    # -- prox -------------------------------------------------------------------------

    # the fixed-point iterations may run the cheap warm-start prox (trust_warm)
    warm_startable = True
    # the output side may take loss and Hessian trace from the compiled row kernel
    softmax_row_kernel = True

    @property
    def multistart_memorable(self):
        """Whether an uncertified evaluation can run on the multi-start memory
        (``multistart_memory`` of :func:`.output.output_side`): T ≥ 3, the compiled prox."""
        return self.n_tokens >= 3 and _kernels.HAVE_NUMBA and self.compiled

    def prox(self, y, omega, sigma, start=None, warm=None, return_certified=False):
        """Global minimiser ``z* = argmin_z ‖z − ω‖²/(2Σ) + ℓ(y, z)``.

        The loss is constant along the shift direction ``s``, so ``z* − ω ⊥ s``; the problem
        is solved over the ``K_eff``-dimensional complement, ``z = ω + B x``, by damped
        Newton (eigenvalue-modified Hessian ``|λ|``, step capped at ``8/β``, Armijo
        backtracking on the objective), vectorised over samples and starts:

        * samples whose objective is provably convex (a curvature bound: ``Σβ²`` small)
          get one start, ω;
        * the others get ``n_starts`` points on the segment between ω and the exact-fit
          point (``start``, or :meth:`fit_logits` of ``y``, projected so as to keep ω's
          component along ``s``), and, for T = 2, the best point of a 2-D grid search
          (:meth:`_Softmax2Problem.grid_starts`); the best end point is kept.

        For T = 2 this matched a dense-grid / 60-random-start reference on all but ~1 in
        10⁴ non-convex samples (β ≤ 20, Σ ∈ [0.03, 10³]). For T ≥ 3 the segment alone is a
        heuristic: exact at β ≲ 2 in our checks, while at β = 4 about 0.1–0.5 % of the
        non-convex samples end in a non-global local minimum. On the compiled path the
        minimiser is certified global where :mod:`._certify` (T = 2) or
        :mod:`._certify_rows` (T ≥ 3: strong convexity on the ball of global minimisers)
        proves it; ``certify_budget = 0`` skips that.

        Parameters
        ----------
        y : array_like of shape (N, T, T)
        omega : array_like of shape (N, K)
        sigma : float or array_like of shape (N,)
            Σ > 0.
        start : array_like of shape (N, K), optional
            A point ``z`` with ``attention(z) ≈ y`` (e.g. ``w β0/β`` when ``y = labels(w)``).
        warm : array_like of shape (N, K), optional
            A start that replaces ω for the provably convex samples, e.g. the previous
            ``z*`` of the same node in a fixed-point iteration: it needs a few Newton steps
            where ω needs ten or more. For the other samples (compiled path, T = 2) its
            minimiser is kept if the branch and bound of :mod:`._certify` proves it global;
            otherwise they get the multi-start.
        return_certified : bool, default False
            Also return which minimisers are certified global.

        Returns
        -------
        z : ndarray of shape (N, K)
        certified : ndarray of bool, shape (N,)
            Only with ``return_certified``: True where ``z`` is proved the global minimiser
            (within the certificate's tolerance); elsewhere it is the best local one found.
        """
        y, omega = self._check_y(y), self._check_u(omega, "omega")
        N = omega.shape[0]
        if y.shape[0] != N:
            raise ValueError(f"y and omega must have the same number of rows, got "
                             f"{y.shape[0]} and {N}.")
        sigma = _as_sigma(sigma, N)
        if start is None:
            start = self.fit_logits(y)
        else:
            start = self._check_u(start, "start")
        if warm is not None:
            warm = self._check_u(warm, "warm")
            if warm.shape[0] != N:
                raise ValueError(f"warm must have {N} rows, got {warm.shape[0]}.")
        z, certified = self._prox_certified(y, omega, sigma, start, warm)
        return (z, certified) if return_certified else z

    def _prox_certified(self, y, omega, sigma, start=None, warm=None, trust_warm=False,
                        memory=None):
        """:meth:`prox` (validated inputs) and the mask of samples certified global.

        ``trust_warm``: the samples that are not provably convex take the Newton end point
        from ``warm`` as it is, without multi-start or certificate (the fixed-point
        iterations, which are polished without it afterwards).

        ``memory`` (bool, N; read and written; T ≥ 3, the compiled prox, uncertified): the
        multi-start memory of :func:`.common.prox_at_nodes`, the samples that get one
        Newton run from ``warm``; written where all starts of the multi-start agree."""
        if start is None:
            start = self.fit_logits(y)
        z, _, certified = self._prox(y, omega, sigma, start, warm, trust_warm, memory)
        return z, certified

    def _prox(self, y, omega, sigma, start, warm=None, trust_warm=False, memory=None):
        """Multi-start Newton; returns ``z*`` and the prox objective at ``z*``."""
        N, B = omega.shape[0], self.basis
        x_fit = (start - omega) @ B                 # projection keeps ω's shift component
        prob = (_Softmax2Problem(self, y, omega, sigma) if self.n_tokens == 2
                else _SoftmaxProblem(self, y, omega, sigma))
        radius = self._radius / self.beta_
        x_warm = None if warm is None else np.ascontiguousarray((warm - omega) @ B)
        if _kernels.HAVE_NUMBA and self.compiled:
            return self._prox_compiled(prob, y, omega, sigma, x_fit, x_warm, radius,
                                       trust_warm, memory)
        ts = np.linspace(0.0, 1.0, self.n_starts) if self.n_starts > 1 else np.zeros(1)
        xb, fb = np.zeros((N, self.K_eff)), np.zeros(N)
        # provably convex samples: one Newton run from ω
        convex = prob.convex()
        easy, hard = np.flatnonzero(convex), np.flatnonzero(~convex)
        if x_warm is not None and trust_warm:  # one start for all: the warm one
            easy, hard = np.arange(N), hard[:0]
        if easy.size:
            x0 = np.zeros((easy.size, self.K_eff)) if x_warm is None else x_warm[easy]
            xb[easy], fb[easy] = _newton(prob, easy, x0, radius, self.max_iter)
        if hard.size:
            x0 = ts[None, :, None] * x_fit[hard, None, :]
            if self.n_tokens == 2:
                # plus the best point of a 2-D grid: the segment alone misses the global
                # minimiser of a few % of the samples at β ≳ 4
                x_grid = prob.grid_starts(hard, x_fit[hard])
                x0 = np.concatenate([x0, x_grid[:, None, :]], axis=1)
            S = x0.shape[1]
            rows = np.repeat(hard, S)
            x, f = _newton(prob, rows, x0.reshape(hard.size * S, -1), radius, self.max_iter)
            x, f = x.reshape(hard.size, S, -1), f.reshape(hard.size, S)
            best = np.argmin(f, axis=1)
            xb[hard] = x[np.arange(hard.size), best]
            fb[hard] = f[np.arange(hard.size), best]
        # no branch and bound on this path: only the provably convex samples are certified
        return omega + xb @ B.T, fb, convex

    def _prox_compiled(self, prob, y, omega, sigma, x_fit, x_warm, radius, trust_warm=False,
                       memory=None):
        """The same starts and Newton as the numpy path, one sample at a time (numba), and
        the certificate of :mod:`._certify`; returns ``z*``, the objective and the mask of
        the samples whose minimiser is certified global."""
        convex = np.ascontiguousarray(prob.convex())
        use_warm = x_warm is not None
        if not use_warm:
            x_warm = np.zeros((1, self.K_eff))
        x_fit = np.ascontiguousarray(x_fit)
        beta = float(self.beta_)
        threaded = _kernels.use_parallel()
        if self.n_tokens == 2:
            # every evaluation on the sample-chunk threads, the warm ones too (a few ms for
            # 8192 nodes): faster on a quiet machine, slower where another process keeps a
            # core busy (threads spin while waiting for a descheduled partner), where one
            # numba thread restores the serial path (both measured: docs: Changelog)
            prox2 = _certify.prox2_parallel if threaded else _certify.prox2
            xb, fb, cert = prox2(prob.a0, prob.p, prob.r, sigma, prob.D[None],
                                 prob.Dinv[None], prob.P[None],
                                 beta, x_fit, convex, x_warm, use_warm, trust_warm,
                                 self.n_starts, radius, self.max_iter, _CERT_TOL,
                                 self.certify_budget)
        else:
            proxT = _proxT.proxT_parallel if threaded else _proxT.proxT
            c3 = _certify_rows.third_derivative_bounds(y)
            n_starts = self.n_starts
            if trust_warm and not use_warm and self.first_warm_starts is not None:
                # no remembered minimisers (the first evaluation on these nodes): the
                # multi-start costs several warm evaluations, and the certified ones
                # replace any minimiser it would have improved
                n_starts = check_scalar_range(self.first_warm_starts, "first_warm_starts",
                                              low=1, integer=True)
            omega, y = np.ascontiguousarray(omega), np.ascontiguousarray(y)
            xb, fb, cert = proxT(omega, y, sigma,
                                 self.basis, self._index, self._scale, beta, x_fit, convex,
                                 x_warm, use_warm, trust_warm, n_starts, radius,
                                 self.max_iter, self._row_basis, self._row_gain, c3,
                                 _CERT_TOL, self.certify_budget,
                                 check_scalar_range(self.shell_starts, "shell_starts", low=0,
                                                    integer=True),
                                 np.zeros(len(convex), dtype=np.bool_) if memory is None
                                 else memory)
            rounds = check_scalar_range(self.split_rounds, "split_rounds", low=0, integer=True)
            min_share = check_scalar_range(self.split_min_share, "split_min_share", low=0,
                                           high=0.5, low_inclusive=False)
            star = self.star_bound
            if not isinstance(star, (bool, np.bool_)):
                raise TypeError(f"star_bound must be True or False, got {star!r}.")
            star_rounds = check_scalar_range(self.star_split_rounds, "star_split_rounds",
                                             low=0, integer=True)
            local_rounds = check_scalar_range(self.star_local_rounds, "star_local_rounds",
                                              low=0, integer=True)
            double = self.double_star
            if not isinstance(double, (bool, np.bool_)):
                raise TypeError(f"double_star must be True or False, got {double!r}.")

            def search_certificates(todo):
                return _certify_star.certify_nodes(
                    xb, omega, y, sigma, self.basis, self._index, self._scale, beta,
                    _CERT_TOL, min(self.certify_budget, _proxT.DUAL_BUDGET), rounds, todo,
                    _kernels.thread_count() if threaded else 1, min_share, star,
                    star_rounds, local_rounds, bool(double))
            # where the equal split of the row-wise bound fails, unequal ones (not in the
            # uncertified evaluations of the fixed-point iterations: budget 0)
            todo = np.flatnonzero(~cert) if self.certify_budget > 0 and rounds > 0 else ()
            if len(todo):
                cert[todo] = search_certificates(todo)
            # up to T = 6, a last round of starts at the nodes still uncertified (the
            # shell's directions depend on a node's row, and can miss a lower basin)
            last = check_scalar_range(self.last_shell_starts, "last_shell_starts", low=0,
                                      integer=True)
            left = (np.flatnonzero(~cert) if last and self.certify_budget > 0
                    and self.n_tokens <= _proxT.LAST_SHELL_MAX_T else ())
            if len(left):
                lowered = _proxT.last_shell(left, omega, y, sigma, self.basis, self._index,
                                            self._scale, beta, radius, self.max_iter,
                                            self._row_basis, self._row_gain, c3, _CERT_TOL,
                                            self.certify_budget, last, xb, fb, cert)
                again = left[lowered & ~cert[left]]
                if len(again) and rounds > 0:
                    cert[again] = search_certificates(again)
        return omega + xb @ self.basis.T, fb, cert
