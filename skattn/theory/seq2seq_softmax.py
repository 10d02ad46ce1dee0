"""Finite-d seq2seq state evolution of factored SOFTMAX attention (exact token Gram).

The softmax version of the exact-Gram ("Bartlett") channel of :mod:`.seq2seq`
(docs: Theory §4, "Finite d", seq2seq state evolution). Gaussian tokens factor as
``x = √d B Q`` and, for ``S = t I + S_⊥``, ``h(S) = t h(I) + B V(S_⊥) Bᵀ`` exactly, with
``h(I) = √d (B Bᵀ − I)``; V is modelled as Gaussian with the Haar-frame covariance
(:func:`~skattn.theory.seq2seq.frame_covariance`), independent of B. In u-coordinates the
student's pre-activation is

    ``z = t φ + M_B v``,  ``φ = u(h(I))``,  ``M_B: v ↦ u(B h(v) Bᵀ)`` (K × K per node),

and the teacher's ``z0 = τ0 φ + M_B v0 + ξ̃`` (label noise ξ̃ of variance Δ/2 per
component, inside the softmax as in :class:`~skattn.theory.channels.SoftmaxChannel`). The
proximal map is over the bulk v,

    ``argmin_v ‖v − ω‖²/(2Σ) + ℓ_G(y, t φ + M_B v)``,

with ``ℓ_G = Tr(R G Rᵀ)``, ``R = softmax(βh(z)) − y`` the weighted loss of
:mod:`.channels.weighted` (``G = B Bᵀ`` for seq2seq, ``I`` for seq2lab). It is not convex:
damped Newton (:func:`.channels.prox._newton`) over the full K-dim v (the shift direction
of the softmax is flat in the loss, the proximal term fixes it) from ω, from the exact-fit
point, from their midpoint and from the node's previous minimiser; the best end point is
kept (not certified). Where numba is installed the same Newton runs one node at a time in
compiled code (:mod:`._seq2seq_kernels`); the node quantities that do not move with
``(m, q, t)`` (B, φ, M_B) are built once per solve. At T = 2 the loss sees the two row
differences only, and the prox is the seq2lab channel's certified two-dimensional prox
with each node's own metric (:class:`_Rows2`): its minimisers are proved global where the
certificate holds, and the result reports that share (``certified_fraction``).

The conjugates are derivatives of the node-averaged Moreau envelope M at fixed
``(m, q, t)``, ``m̂ = −2α ∂M/∂m``, ``Σ̂ = 4α ∂M/∂q``, ``m̂_I = −2α ∂M/∂t``, computed
*pathwise* by the envelope theorem: on fixed nodes the minimum moves with ω
(``∂_ω = −g_out``), with the teacher's bulk v0 through the labels' Jacobian, and with t
explicitly; ω and v0 depend on ``(m, q, t)`` through the bulk overlaps
``(m − tτ0, q − t², Q0 − τ0²)``. ``q̂ = 2α E[g_outᵀ C g_out]`` in the frame metric C, as
in the linear module. Where a node's global minimiser switches branch the envelope is
still continuous, so this is the derivative of the node average (the distributional
derivative in the limit, as the Stein forms of :func:`~.channels.output_side`).

The test errors are node averages over the same law: the seq2seq metric
``E Tr(R G Rᵀ)`` with ``z = tφ + M_B ω`` (no ``1 + c_T/d`` factor needed) and its seq2lab
form ``E ‖R‖²_F``. Prior side: :class:`~skattn.theory.denoisers.FactoredDenoiser` with
``t_hat = m̂_I``, at the nominal α (softmax keeps α, see
:meth:`~skattn.theory.StateEvolutionProblem.effective_alpha`). Measurements:
``benchmarks/seq2seq_softmax.py``.

Pure numpy/scipy (no torch).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .._validation import check_choice, check_scalar_range
from .channels import GaussianNodes, LinearChannel, SoftmaxChannel
from .channels import _certify
from .channels.prox import _curvature_floor, _newton, _SoftmaxProblem
from .channels.softmax import _CERT_TOL
from .channels.weighted import _derivs
from . import _seq2seq_kernels as _kernels
from .coords import _maps, u_from_h
from .problem import UNSET, resolve_problem
from .seq2seq import (Seq2seqStateEvolutionResult, _bartlett_factor, _check_finite_d_solve,
                      _Seq2seqMap, frame_covariance)
from .core import solve_core
from .core.iteration import robust_fixed_point

__all__ = ["BartlettSoftmaxOutputSide", "bartlett_softmax_output_side",
           "bartlett_softmax_envelope", "bartlett_softmax_test_errors",
           "solve_seq2seq_softmax_state_evolution"]

TASKS = ("seq2seq", "seq2lab")
# Newton step cap in v, × 1/β (the softmax channel's own cap)
_RADIUS = 8.0


@dataclass
class BartlettSoftmaxOutputSide:
    """Conjugates from :func:`bartlett_softmax_output_side` (paper's factor 2).

    Attributes
    ----------
    m_hat, m_hat_identity, q_hat, sigma_hat : float
        ``m̂ = −2α ∂M/∂m``, ``m̂_I = −2α ∂M/∂t``, ``q̂ = 2α E[g_outᵀ C g_out]`` and
        ``Σ̂ = 4α ∂M/∂q``.
    train_error : float
        ``E ℓ_G(y, z*)``.
    moreau : float
        The node-averaged envelope ``M = E[‖v* − ω‖²/(2Σ) + ℓ_G(y, z*)]``.
    certified_fraction : float
        Share of the node weight whose minimiser is proved global (T = 2: the
        certificate of :mod:`.channels._certify` on the row differences; T ≥ 3: none, 0).
    """

    m_hat: float
    m_hat_identity: float
    q_hat: float
    sigma_hat: float
    train_error: float
    moreau: float
    certified_fraction: float = 0.0


# -- the law on the nodes ---------------------------------------------------------------


def _check_channel(channel):
    if not isinstance(channel, (SoftmaxChannel, LinearChannel)):
        raise TypeError(f"channel must be a SoftmaxChannel or LinearChannel, got "
                        f"{type(channel).__name__}.")


def _check_args(channel, nodes, m, q, t, Q0, trace0, noise, sigma, alpha, n_features, task):
    """Validated scalars, the bulk overlaps and the node dimension check."""
    T = channel.n_tokens
    check_choice(task, "task", TASKS)
    sigma = check_scalar_range(sigma, "sigma", low=0, low_inclusive=False)
    alpha = check_scalar_range(alpha, "alpha", low=0)
    noise = check_scalar_range(noise, "noise", low=0)
    Q0 = check_scalar_range(Q0, "Q0", low=0, low_inclusive=False)
    d = check_scalar_range(n_features, "n_features", low=T + 1, integer=True)
    m, q, t, trace0 = float(m), float(q), float(t), float(trace0)
    if not np.all(np.isfinite([m, q, t, trace0])):
        raise ValueError(f"m, q, t and trace0 must be finite, got {m}, {q}, {t}, {trace0}.")
    K = channel.K
    if not isinstance(nodes, GaussianNodes) or nodes.dim != 4 * K:
        raise ValueError(f"nodes must be GaussianNodes of dim 4K = {4 * K} for "
                         f"n_tokens={T}, got {getattr(nodes, 'dim', type(nodes).__name__)}.")
    m_perp, q_perp, Q0_perp = m - t * trace0, q - t * t, Q0 - trace0 * trace0
    V = Q0_perp - m_perp * m_perp / q_perp if q_perp > 0 else -1.0
    if not (q_perp > 0 and V > 0):
        raise ValueError(f"(m, q, t) = ({m}, {q}, {t}) must leave a non-degenerate bulk: "
                         "q > t² and (m − t τ0)² < (q − t²)(Q0 − τ0²).")
    return sigma, alpha, noise, d, m_perp, q_perp, V


def _bulk_map(B, T):
    """``M_B`` of shape (N, K, K): the u-coordinates of ``B h(v) Bᵀ`` as a matrix in v."""
    K = T * (T + 1) // 2
    Lr = _maps(T)[2].reshape(T, T, K)
    LB = np.einsum("nac,cek,nbe->nabk", B, Lr, B)          # v ↦ B h(v) Bᵀ
    _, _, _, inv_scale, rows, cols = _maps(T)
    # LB is symmetric in (a, b): u_from_h takes the (rows, cols) entries, scaled
    return LB[:, rows, cols, :] * inv_scale[None, :, None]


#: frames kept for reuse (a few MB each at T = 2, 8192 nodes)
_FRAME_CACHE_SIZE = 2
_FRAMES = OrderedDict()


def frame_for(T, K, nodes, d):
    """The :class:`_Frame` of these nodes at d: built once per node set and d, and kept
    for the next solve (the points of a curve at one d, repeated predictions: the χ²
    quantiles of B are most of a frame's cost). Keyed by the nodes' points themselves."""
    pts = np.ascontiguousarray(nodes.points)
    key = (T, K, int(d), pts.shape, hashlib.sha1(pts.view(np.uint8)).hexdigest())
    frame = _FRAMES.get(key)
    if frame is None:
        frame = _Frame(T, K, nodes, d)
        _FRAMES[key] = frame
        if len(_FRAMES) > _FRAME_CACHE_SIZE:
            _FRAMES.popitem(last=False)
    else:
        _FRAMES.move_to_end(key)
    return frame


class _Frame:
    """The node quantities that do not move with ``(m, q, t)``: the frame metric, the unit
    directions of ω and of the teacher's bulk, B's Gram matrix, φ, M_B and its inverse.
    Built once per node set (:func:`frame_for`; the χ² quantiles of B and the M_B
    products were a third of an evaluation); read-only."""

    def __init__(self, T, K, nodes, d):
        pts = nodes.points
        self.nodes, self.d = nodes, d
        self.cov = frame_covariance(T, d)
        root = np.linalg.cholesky(self.cov)
        self.a = pts[:, :K] @ root.T               # ω/√q⊥: unit-overlap directions
        self.b = pts[:, K:2 * K] @ root.T
        self.xi = pts[:, 2 * K:3 * K]                # label noise per unit √(Δ/2)
        B = _bartlett_factor(pts[:, 3 * K:], T, d)
        self.gram = B @ np.swapaxes(B, 1, 2)
        self.identity = np.broadcast_to(np.eye(T), self.gram.shape).copy()
        self.phi = u_from_h(np.sqrt(d) * (self.gram - np.eye(T)))
        self.MB = _bulk_map(B, T)
        for array in (self.a, self.b, self.gram, self.identity, self.phi, self.MB):
            array.flags.writeable = False
        self._MB_inv = None
        self._rows2 = self._shift = None

    def rows2(self, channel):
        """T = 2: the bulk prox in the row differences (:class:`_Rows2`), built once."""
        if self._rows2 is None:
            self._rows2 = _Rows2(channel, self)
        return self._rows2

    @property
    def MB_inv(self):
        if self._MB_inv is None:
            self._MB_inv = np.linalg.inv(self.MB)
        return self._MB_inv

    def shift_direction(self, channel):
        """``e = M_B⁻¹ shift`` per node (the flat direction in v) and ``‖e‖²``, built once."""
        if self._shift is None:
            e = np.einsum("nkl,l->nk", self.MB_inv, channel.shift)      # M_B e = shift
            self._shift = (e, np.einsum("nk,nk->n", e, e))
        return self._shift

    def matches(self, nodes, d):
        return self.d == d and (self.nodes is nodes or (
            nodes.points.shape == self.nodes.points.shape
            and np.array_equal(nodes.points, self.nodes.points)))


class _Rows2:
    """T = 2: the bulk prox as the channel's certified 2-D prox, node by node.

    A softmax row of two logits depends on their difference only, so the loss sees
    ``a = C_u z`` (each row's diagonal logit minus its off-diagonal one), and with label
    rows summing to 1 each row's residual is ``ρ_a (1, −1)``: ``Tr(R G Rᵀ) = g̃ Σ_a ρ_a²``,
    ``g̃ = G11 + G22 − 2 G12``, which is ``g̃/2`` times the seq2lab row loss of
    :class:`~.channels.prox._Softmax2Problem`. With ``C = C_u M_B = Rᵀ Qᵀ`` (Q: K × 2
    orthonormal) the bulk offset ``x = Q y`` (its part orthogonal to Q is 0 at the minimum)
    has ``a = C_u z(ω) + Rᵀ y`` and ``‖x‖ = ‖y‖``: the prox is ``g̃/2`` times the seq2lab
    T = 2 prox with ``D = Rᵀ`` and ``Σ' = Σ g̃/2``, whose multi-start, convexity test and
    certificate (:func:`~.channels._certify.prox2`) then apply with each node's own
    D.
    """

    def __init__(self, channel, frame):
        index, scale = channel._index, channel._scale
        Cu = np.zeros((2, channel.K))
        for row, (a, b) in enumerate(((0, 1), (1, 0))):   # diagonal entry first
            Cu[row, index[a, a]] += scale[a, a]
            Cu[row, index[a, b]] -= scale[a, b]
        self.Cu = Cu
        C = np.einsum("rk,nkl->nrl", Cu, frame.MB)
        self.Q, R = np.linalg.qr(np.swapaxes(C, 1, 2))   # Cᵀ = Q R per node
        self.D = np.ascontiguousarray(np.swapaxes(R, 1, 2))
        self.Dinv = np.ascontiguousarray(np.linalg.inv(self.D))
        self.P = np.ascontiguousarray(np.swapaxes(self.Dinv, 1, 2) @ self.Dinv)
        self.lam_p = np.linalg.eigvalsh(self.P)[:, 0]

    def reduce(self, v, omega):
        """The 2-D coordinate ``y = Qᵀ(v − ω)`` of bulk points v (N, K)."""
        return np.ascontiguousarray(np.einsum("nkr,nk->nr", self.Q, v - omega))

    def prox(self, channel, law, sigma, warm, warm_only):
        """``(v*, objective, certified mask)``; None where the label rows do not sum to
        1 (the reduction above needs it)."""
        y = law.y
        p = np.ascontiguousarray(np.stack([y[:, 0, 0], y[:, 1, 1]], axis=1))
        r = np.ascontiguousarray(np.stack([y[:, 0, 1], y[:, 1, 0]], axis=1))
        if not np.all(np.abs(p + r - 1.0) <= 1e-9):
            return None
        G = law.weights
        g_tilde = G[:, 0, 0] + G[:, 1, 1] - 2 * G[:, 0, 1]
        s_red = np.ascontiguousarray(sigma * g_tilde / 2)
        a0 = np.ascontiguousarray(np.einsum("rk,nk->nr", self.Cu, law.z_of(law.omega)))
        y_fit = self.reduce(_fit_start(channel, law), law.omega)
        beta = float(channel.beta_)
        lower = np.min(_curvature_floor(1 + p - r), axis=1) * beta ** 2
        convex = np.ascontiguousarray(
            self.lam_p / s_red * (1 - 1e-3) + 1.05 * np.minimum(lower, 0) > 0)
        if warm_only:
            # the previous minimisers (or, for the evaluation that seeds them, the fit
            # start), uncertified: the fixed-point iterations
            y_warm = y_fit if warm is None else self.reduce(warm, law.omega)
            use_warm, trust_warm, budget = True, True, 0
        else:   # the multi-start (and the warm start), certified: the reported evaluations
            y_warm = np.zeros((1, 2)) if warm is None else self.reduce(warm, law.omega)
            use_warm, trust_warm, budget = warm is not None, False, channel.certify_budget
        yb, fb, cert = _certify.prox2(
            a0, p, r, s_red, self.D, self.Dinv, self.P, beta, y_fit, convex, y_warm,
            use_warm, trust_warm, channel.n_starts, _RADIUS / beta, channel.max_iter,
            _CERT_TOL, budget)
        return law.omega + np.einsum("nkr,nr->nk", self.Q, yb), fb * g_tilde / 2, cert


class _Law:
    """Everything on the nodes at fixed ``(m, q, t)``: ω, v0, B, φ, M_B, labels, weights."""

    def __init__(self, channel, nodes, m_perp, q_perp, V, t, trace0, noise, d, task,
                 frame=None):
        T, K = channel.n_tokens, channel.K
        if frame is None or not frame.matches(nodes, d):
            frame = frame_for(T, K, nodes, d)
        self.frame = frame
        self.cov, self.a, self.b = frame.cov, frame.a, frame.b
        self.omega = np.sqrt(q_perp) * self.a
        self.v0 = (m_perp / np.sqrt(q_perp)) * self.a + np.sqrt(V) * self.b
        self.gram, self.phi, self.MB = frame.gram, frame.phi, frame.MB
        self.z0 = (trace0 * self.phi + np.einsum("nkl,nl->nk", self.MB, self.v0)
                   + np.sqrt(noise / 2) * frame.xi)
        self.y = channel.labels(self.z0)
        self.weights = self.gram if task == "seq2seq" else frame.identity
        self.base = t * self.phi                       # z = t φ + M_B v
        self.m_perp, self.q_perp, self.V = m_perp, q_perp, V

    def z_of(self, v):
        return self.base + np.einsum("nkl,nl->nk", self.MB, v)


class _BulkProblem(_SoftmaxProblem):
    """``‖x‖²/(2Σ) + ℓ_G(y, tφ + M_B(ω + x))`` over the full bulk v = ω + x."""

    def __init__(self, channel, law, sigma):
        self.ch, self.law = channel, law
        self.sigma = np.full(law.omega.shape[0], sigma)

    def _z(self, rows, x):
        law = self.law
        return law.base[rows] + np.einsum("nkl,nl->nk", law.MB[rows], law.omega[rows] + x)

    def value(self, rows, x):
        law = self.law
        loss = _derivs(self.ch, law.y[rows], self._z(rows, x), law.weights[rows],
                       hessian=False)[0]
        return np.sum(x * x, axis=1) / (2 * self.sigma[rows]) + loss

    def grad_hess(self, rows, x):
        law, s = self.law, self.sigma[rows]
        MB = law.MB[rows]
        _, gl, Hl = _derivs(self.ch, law.y[rows], self._z(rows, x), law.weights[rows])
        g = x / s[:, None] + np.einsum("nlk,nl->nk", MB, gl)
        H = np.eye(x.shape[1]) / s[:, None, None] + np.swapaxes(MB, 1, 2) @ Hl @ MB
        return g, H


def _fit_start(channel, law):
    """The exact-fit bulk ``M_B⁻¹(z0 β0/β − tφ)``, moved along the flat shift direction to
    the point nearest ω (the proximal term's own choice)."""
    z_fit = law.z0 * (channel.target_beta_ / channel.beta_)
    v = np.einsum("nkl,nl->nk", law.frame.MB_inv, z_fit - law.base)
    e, ee = law.frame.shift_direction(channel)
    c = -np.einsum("nk,nk->n", e, v - law.omega) / ee
    return v + c[:, None] * e


def _prox(channel, law, sigma, warm=None, warm_only=False):
    """Best Newton end point over the starts; returns ``(v*, objective, certified mask)``.
    ``warm_only``: the warm start alone (the cheap iterations before the multi-start
    polish), or the fit start alone without one. Softmax T = 2 (compiled): the certified
    2-D prox of :class:`_Rows2`."""
    N, K = law.omega.shape
    if (_kernels.HAVE_NUMBA and isinstance(channel, SoftmaxChannel) and channel.n_tokens == 2
            and getattr(channel, "compiled", True)):
        out = law.frame.rows2(channel).prox(channel, law, sigma, warm, warm_only)
        if out is not None:
            return out
    prob = _BulkProblem(channel, law, sigma)
    if isinstance(channel, LinearChannel):                  # quadratic: one start suffices
        x0 = np.zeros((N, 1, K))
        radius = np.inf
    elif warm_only:
        # the warm start alone; without one (the evaluation that seeds them), the fit start
        x0 = ((warm if warm is not None else _fit_start(channel, law)) - law.omega)[:, None, :]
        radius = _RADIUS / channel.beta_
    else:
        x_fit = _fit_start(channel, law) - law.omega
        starts = [np.zeros((N, K)), x_fit, 0.5 * x_fit]
        if warm is not None:
            starts.append(warm - law.omega)
        x0 = np.stack(starts, axis=1)
        radius = _RADIUS / channel.beta_
    S = x0.shape[1]
    max_iter = getattr(channel, "max_iter", 100)
    if _kernels.HAVE_NUMBA and isinstance(channel, SoftmaxChannel) \
            and getattr(channel, "compiled", True):
        # the same Newton, one node at a time in compiled code (_seq2seq_kernels)
        x, f = _kernels.bulk_prox(x0, law.omega, law.base, law.MB, law.y, law.weights, sigma,
                                  channel._index, channel._scale, channel.beta_, radius,
                                  max_iter)
        return law.omega + x, f, _linear_certified(channel, N)
    rows = np.repeat(np.arange(N), S)
    x, f = _newton(prob, rows, x0.reshape(N * S, K), radius, max_iter)
    x, f = x.reshape(N, S, K), f.reshape(N, S)
    best = np.argmin(f, axis=1)
    return law.omega + x[np.arange(N), best], f[np.arange(N), best], \
        _linear_certified(channel, N)


def _linear_certified(channel, N):
    """The multi-start's certified mask: all nodes for the (convex) linear channel's
    quadratic prox, none for softmax at T ≥ 3."""
    return np.full(N, isinstance(channel, LinearChannel))


def _loss_terms(channel, law, z):
    """Loss ``Tr(R G Rᵀ)``, its u-gradient and ``R G`` per node, as
    :func:`~skattn.theory.channels.weighted._derivs` without the Hessian, keeping ``R G``
    for the labels' side and skipping the products with ``G = I`` (seq2lab)."""
    A = channel._act(channel._h(z), channel.beta_)
    R = A - law.y
    RG = R if law.weights is law.frame.identity else np.matmul(R, law.weights)
    loss = np.einsum("nab,nab->n", R, RG)
    if isinstance(channel, LinearChannel):
        grad_h = 2.0 * RG
    else:
        grad_h = 2 * channel.beta_ * A * (RG - np.sum(RG * A, axis=-1, keepdims=True))
    N, T = z.shape[0], channel.n_tokens
    return loss, grad_h.reshape(N, T * T) @ channel._L, RG


def _labels_vjp(channel, law, dF_dy):
    """``Σ_ab dF/dy_ab ∂y_ab/∂z0``: for softmax labels ``y_a = softmax(β0 h_a)`` the row
    Jacobian is ``β0 (diag(y_a) − y_a y_aᵀ)``, so the product is ``β0 y ∘ (dF/dy − ⟨dF/dy,
    y⟩_row)`` pulled back through ``h(u)`` (no (N, T, T, K) Jacobian)."""
    if isinstance(channel, LinearChannel):
        return np.einsum("nab,nabk->nk", dF_dy, channel.labels_jacobian(law.z0))
    y = law.y
    w = channel.target_beta_ * y * (dF_dy - np.sum(dF_dy * y, axis=-1, keepdims=True))
    N, T = y.shape[0], channel.n_tokens
    return w.reshape(N, T * T) @ channel._L


def _output(channel, nodes, m, q, t, Q0, trace0, noise, sigma, alpha, n_features, task,
            warm=None, warm_only=False, frame=None):
    """The output side and the minimisers (for warm starts)."""
    _check_channel(channel)
    sigma, alpha, noise, d, m_perp, q_perp, V = _check_args(
        channel, nodes, m, q, t, Q0, trace0, noise, sigma, alpha, n_features, task)
    law = _Law(channel, nodes, m_perp, q_perp, V, t, trace0, noise, d, task, frame)
    v, f, certified = _prox(channel, law, sigma, warm, warm_only)
    # node means of the loss, g·a, ∂F/∂v0·a, ∂F/∂v0·b, ∂F/∂t and gᵀCg (g = g_out)
    if _kernels.HAVE_NUMBA and isinstance(channel, SoftmaxChannel):
        c = np.ascontiguousarray
        sums = _kernels.output_sums(
            c(v), c(law.omega), c(law.base), law.MB, c(law.y), c(law.weights), c(law.a),
            c(law.b), c(law.phi), c(law.cov), c(channel._L), c(channel._index),
            c(channel._scale, dtype=float), float(channel.beta_),
            float(channel.target_beta_), float(sigma), c(nodes.weights))
    else:
        sums = _output_sums_numpy(channel, law, v, sigma, nodes)
    mean_loss, mean_ga, mean_fa, mean_fb, mean_dt, mean_gcg = (float(x) for x in sums)
    sq, sV = np.sqrt(q_perp), np.sqrt(V)
    # ω = √q⊥ a, v0 = (m⊥/√q⊥) a + √V b, V = Q0⊥ − m⊥²/q⊥; ∂F/∂ω = −g_out
    dM_dq = (-mean_ga / (2 * sq) - m_perp / (2 * sq ** 3) * mean_fa
             + m_perp ** 2 / (2 * q_perp ** 2 * sV) * mean_fb)
    dM_dm = mean_fa / sq - m_perp / (q_perp * sV) * mean_fb
    # t also moves m⊥ = m − tτ0 and q⊥ = q − t²
    dM_dt = mean_dt - trace0 * dM_dm - 2 * t * dM_dq
    out = BartlettSoftmaxOutputSide(
        m_hat=-2 * alpha * dM_dm, m_hat_identity=-2 * alpha * dM_dt,
        q_hat=2 * alpha * mean_gcg, sigma_hat=4 * alpha * dM_dq, train_error=mean_loss,
        moreau=float(nodes.mean(f)), certified_fraction=float(nodes.mean(certified)))
    return out, v


def _output_sums_numpy(channel, law, v, sigma, nodes):
    """The node means of :func:`._seq2seq_kernels.output_sums`, in numpy (any channel)."""
    loss, grad_z, RG = _loss_terms(channel, law, law.z_of(v))
    gout = (v - law.omega) / sigma
    # envelope theorem: ∂F/∂v0 through y(z0) with ∂ℓ/∂y = −2 R G
    dF_dv0 = np.einsum("nlk,nl->nk", law.MB, _labels_vjp(channel, law, -2 * RG))
    dF_dt = np.sum(grad_z * law.phi, axis=1)               # explicit t of z = tφ + M_B v
    return [nodes.mean(x) for x in (
        loss, np.sum(gout * law.a, axis=1), np.sum(dF_dv0 * law.a, axis=1),
        np.sum(dF_dv0 * law.b, axis=1), dF_dt, np.sum((gout @ law.cov) * gout, axis=1))]


def bartlett_softmax_output_side(channel, nodes, *, m, q, t, Q0, trace0, noise, sigma,
                                 alpha, n_features, task="seq2seq", warm=None):
    """Output side of the exact-Gram channel for softmax (or linear) attention.

    Parameters
    ----------
    channel : SoftmaxChannel or LinearChannel
        The attention at T, β, β0.
    nodes : GaussianNodes of dim 4K
        Columns: ω, the teacher's bulk given ω, the label noise (K each), then the T
        diagonal and the ``K − T`` sub-diagonal entries of B (as
        :func:`~skattn.theory.seq2seq.bartlett_output_side`).
    m, q, t : float
        ``Tr(S0 Ŝ)/d``, ``Tr Ŝ²/d`` and ``Tr Ŝ/d``, with ``q > t²`` and
        ``(m − tτ0)² < (q − t²)(Q0 − τ0²)``.
    Q0, trace0 : float
        ``Tr S0²/d > 0`` and ``τ0 = Tr S0/d``.
    noise : float
        Δ ≥ 0.
    sigma : float
        Σ > 0.
    alpha : float
        ≥ 0.
    n_features : int
        d ≥ T + 1.
    task : {"seq2seq", "seq2lab"}, default="seq2seq"
        The training loss: Gram-weighted rows (``G = B Bᵀ``) or ``G = I``.
    warm : ndarray of shape (N, K), optional
        Previous minimisers v* of the same nodes: one more Newton start.

    Returns
    -------
    BartlettSoftmaxOutputSide
    """
    return _output(channel, nodes, m, q, t, Q0, trace0, noise, sigma, alpha, n_features,
                   task, warm)[0]


def bartlett_softmax_envelope(channel, nodes, *, m, q, t, Q0, trace0, noise, sigma,
                              n_features, task="seq2seq", warm=None):
    """The node-averaged Moreau envelope ``M(m, q, t)`` and its minimisers.

    Parameters
    ----------
    channel, nodes, m, q, t, Q0, trace0, noise, sigma, n_features, task, warm
        As in :func:`bartlett_softmax_output_side`.

    Returns
    -------
    moreau : float
    minimisers : ndarray of shape (N, K)
        The bulk v* per node.
    """
    _check_channel(channel)
    sigma, _, noise, d, m_perp, q_perp, V = _check_args(
        channel, nodes, m, q, t, Q0, trace0, noise, sigma, 0.0, n_features, task)
    law = _Law(channel, nodes, m_perp, q_perp, V, t, trace0, noise, d, task)
    v, f, _ = _prox(channel, law, sigma, warm)
    return float(nodes.mean(f)), v


def bartlett_softmax_test_errors(channel, nodes, *, m, q, t, Q0, trace0, noise, n_features,
                                 _frame=None):
    """Test errors of a student with overlaps ``(m, q, t)``: seq2seq metric and seq2lab form.

    ``E Tr(R G Rᵀ)`` (``= E‖(Â − Y)x‖²_F/d``, G the token Gram matrix) and ``E‖R‖²_F``
    with ``R = attention(tφ + M_B ω) − labels(z0)``, on the law of
    :func:`bartlett_softmax_output_side` (labels with noise, as
    :func:`~skattn.theory.channels.test_error`).

    Parameters
    ----------
    channel, nodes, m, q, t, Q0, trace0, noise, n_features
        As in :func:`bartlett_softmax_output_side`.

    Returns
    -------
    seq2seq : float
    seq2lab : float
    """
    _check_channel(channel)
    _, _, noise, d, m_perp, q_perp, V = _check_args(
        channel, nodes, m, q, t, Q0, trace0, noise, 1.0, 0.0, n_features, "seq2seq")
    law = _Law(channel, nodes, m_perp, q_perp, V, t, trace0, noise, d, "seq2seq", _frame)
    R = channel._act(channel._h(law.z_of(law.omega)), channel.beta_) - law.y
    seq = np.einsum("nab,nbc,nac->n", R, law.gram, R)
    return float(nodes.mean(seq)), float(nodes.mean(np.einsum("nab,nab->n", R, R)))


# -- the fixed point --------------------------------------------------------------------


class _SoftmaxSeq2seqMap(_Seq2seqMap):
    """:class:`~skattn.theory.seq2seq._Seq2seqMap` with the softmax output side (warm)."""

    def __init__(self, channel, alpha, T, d, denoiser, Q0, trace0, noise, nodes, loss):
        super().__init__(alpha, T, d, denoiser, Q0, trace0, noise, nodes, "bartlett", loss)
        self.channel, self.warm = channel, None
        # True: each node's prox from its previous minimiser alone (cheap iterations); the
        # fixed point is then polished with the multi-start prox, whose map is reported
        self.warm_only = False
        self.frame = frame_for(T, channel.K, nodes, d)     # one for all evaluations
        self._last_residual = None

    def residual(self, x):
        # the warm iterations start where the evaluation that seeds them was made, in the
        # same mode: its value stands (a warm start at its own minimisers stays there)
        cached = self._last_residual
        if cached is not None and cached[0] == self.warm_only and self.last_x is not None \
                and np.array_equal(self.last_x, x):
            return cached[1].copy()
        r = super().residual(x)
        self._last_residual = None if r is None else (self.warm_only, r.copy())
        return r

    def evaluate(self, m, q, sigma, t):
        out, v = _output(self.channel, self.nodes, m, q, t, self.Q0, self.trace0,
                         self.noise, sigma, self.alpha, self.d, self.loss, self.warm,
                         warm_only=self.warm_only, frame=self.frame)
        self.warm = v
        prior = self.denoiser(out.m_hat, out.q_hat, out.sigma_hat, t_hat=out.m_hat_identity)
        return out, prior


#: the warm iterations hand over to the multi-start polish below this residual
_WARM_HANDOVER = 1e-3
#: largest student β at which the evaluation that seeds the warm minimisers starts from the
#: fit alone (near convex: the core's warm iterations had this edge when it was measured)
SEED_FROM_FIT_MAX_BETA = 2.0


def solve_seq2seq_softmax_state_evolution(alpha, problem=None, *, target=UNSET,
                                          n_tokens=UNSET, reg_lambda=UNSET, noise=UNSET,
                                          n_features=UNSET, beta=UNSET, target_beta=UNSET,
                                          loss="seq2seq", n_nodes=8192, tol=1e-6,
                                          max_iter=200, damping=0.5, init=None,
                                          random_state=0):
    """Finite-d seq2seq state evolution of factored softmax attention (module docstring).

    Parameters
    ----------
    alpha : float
        ``n/d²`` > 0 (the fixed point keeps the nominal α).
    problem : StateEvolutionProblem, optional
        Softmax attention, factored, at finite d, Gaussian tokens. A width ``κ ≠ 1`` enters
        through the trace penalty ``λ̃ = √κ λ`` and the rank-capped prior; validated where
        the cap does not bind (where it binds, :func:`~skattn.theory.solve_state_evolution`
        keeps the seq2lab prediction).
    target, n_tokens, reg_lambda, noise, n_features, beta, target_beta
        The model keywords of :func:`~skattn.theory.solve_state_evolution` instead of a
        problem (``target`` may be a teacher: its own S0 at its d).
    loss : {"seq2seq", "seq2lab"}, default="seq2seq"
        The training loss (``G = B Bᵀ`` or ``I``).
    n_nodes : int, default=8192
        Quasi-Monte-Carlo nodes (≥ 16).
    tol : float, default=1e-6
        Max-norm of the residual in ``(m/√Q0, log q, log Σ, t/√Q0)``.
    max_iter : int, default=200
        Evaluations of the map.
    damping : float in (0, 1], default=0.5
    init : StateEvolutionResult or Seq2seqStateEvolutionResult, optional
        A start (its ``m, q, sigma, trace``); default: the finite-d seq2lab softmax fixed
        point of :func:`~skattn.theory.solve_state_evolution`.
    random_state : int, default=0
        Seeds the nodes.

    Returns
    -------
    Seq2seqStateEvolutionResult
        ``model="bartlett"``; ``test_error`` is the seq2seq metric ``E‖(Â − Y)x‖²_F/d``
        and ``seq2lab_test_error`` its seq2lab form ``E‖Â − A0‖²_F``, both node averages
        at the fixed point; ``s_error`` is ``Q0 − 2m + q``.

    Raises
    ------
    ValueError
        For linear attention, the direct parametrization, the continuum (no
        ``n_features``), non-Gaussian tokens or out-of-range keywords.
    """
    alpha = check_scalar_range(alpha, "alpha", low=0, low_inclusive=False)
    if problem is None and reg_lambda is UNSET:
        raise TypeError("solve_seq2seq_softmax_state_evolution() needs a problem or the "
                        "keyword 'reg_lambda'.")
    problem = resolve_problem(problem, "solve_seq2seq_softmax_state_evolution", target=target,
                              n_tokens=n_tokens, reg_lambda=reg_lambda, noise=noise,
                              n_features=n_features, beta=beta, target_beta=target_beta)
    check_choice(loss, "loss", TASKS)
    if problem.attention != "softmax":
        raise ValueError(f"attention must be 'softmax', got {problem.attention!r} (linear "
                         "attention: skattn.theory.seq2seq.solve_seq2seq_state_evolution).")
    if problem.parametrization != "factored":
        raise ValueError(f"parametrization must be 'factored', got "
                         f"{problem.parametrization!r}.")
    n_nodes, tol, max_iter, damping, random_state = _check_finite_d_solve(
        problem, n_nodes, tol, max_iter, damping, random_state)
    if init is None:
        init = solve_core(alpha, problem.replace(task="seq2lab"),
                          dict(random_state=random_state)).result
    if not all(np.isfinite(getattr(init, k, np.nan)) for k in ("m", "q", "sigma", "trace")):
        raise TypeError(f"init must be a state-evolution result with finite m, q, sigma and "
                        f"trace, got {type(init).__name__}.")
    law, eig0 = problem.target_law(random_state)
    Q0, trace0 = float(np.mean(eig0 ** 2)), float(np.mean(eig0))
    T, d = problem.n_tokens, problem.n_features
    channel = problem.channel()
    nodes = GaussianNodes(4 * channel.K, n_points=n_nodes, seed=random_state)
    denoiser = problem.denoiser(law, eig0)
    fp = _SoftmaxSeq2seqMap(channel, alpha, T, d, denoiser, Q0, trace0, problem.noise,
                            nodes, loss)
    x0 = fp.to_x(init.m, init.q, init.sigma, init.trace)
    if not isinstance(channel, LinearChannel):
        # warm iterations (after one multi-start evaluation that seeds the minimisers),
        # then the multi-start polish from their point
        # the seeding evaluation from the fit start alone where the prox is near convex
        # (β ≤ SEED_FROM_FIT_MAX_BETA): the polish's multi-start
        # corrects a node left in another basin
        fp.warm_only = channel.beta_ <= SEED_FROM_FIT_MAX_BETA
        fp.residual(x0)
        fp.warm_only = fp.warm is not None
        x_w, norm_w, _ = robust_fixed_point(fp, x0, tol=tol, max_iter=max_iter,
                                            damping=damping)
        fp.warm_only, fp.last_x = False, None      # the reported map is the multi-start one
        if norm_w < _WARM_HANDOVER:
            x0 = x_w
    x, res_norm, converged = robust_fixed_point(fp, x0, tol=tol, max_iter=max_iter,
                                                 damping=damping)
    m, q, sigma, t = fp.from_x(x)
    state = fp.state_at(x)
    if state is None:
        raise ValueError(f"the softmax seq2seq state evolution left its domain (loss={loss!r}, "
                         f"residual {res_norm:.2e}); try a smaller damping.")
    out, prior = state
    seq, lab = bartlett_softmax_test_errors(channel, nodes, m=m, q=q, t=t, Q0=Q0,
                                            trace0=trace0, noise=problem.noise, n_features=d,
                                            _frame=fp.frame)
    return Seq2seqStateEvolutionResult(
        alpha=alpha, n_features=d, model="bartlett", loss=loss, m=m, q=q, sigma=sigma,
        trace=t, m_hat=out.m_hat, m_hat_identity=out.m_hat_identity, q_hat=out.q_hat,
        sigma_hat=out.sigma_hat, Q0=Q0, trace0=trace0, s_error=Q0 - 2 * m + q,
        test_error=seq, seq2lab_test_error=lab, train_error=out.train_error,
        train_objective=alpha * out.train_error + problem.reg_trace * t,
        converged=bool(converged), residual=float(res_norm), n_calls=fp.n_calls,
        eta=prior.eta, delta=prior.delta, epsilon=prior.epsilon,
        spectrum=denoiser.learned_spectrum(prior),
        certified_fraction=out.certified_fraction)
