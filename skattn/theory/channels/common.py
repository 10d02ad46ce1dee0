"""What the output side and its per-component variant share: the quadrature nodes, the
result type, the compiled loss/trace pass, the argument checks and the warm-start memory
(:mod:`~skattn.theory.channels.output`, :mod:`~skattn.theory.channels._components`)."""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm, qmc

from ..._validation import check_scalar_range
from . import _kernels

# largest K whose Tr(I − (I+ΣH)⁻¹) goes through the compiled Jacobi eigenvalues
_JACOBI_MAX_K = 3


class GaussianNodes:
    """Fixed quasi-Monte-Carlo nodes for expectations over ``N(0, I_dim)``.

    Scrambled Sobol points (``scipy.stats.qmc``), clipped away from 0 and 1 and mapped
    through the normal quantile. Reusing the same nodes (common random numbers) makes the
    state-evolution map a smooth function of the order parameters.

    Parameters
    ----------
    dim : int
    n_points : int, default=8192
        A power of two keeps the Sobol balance properties.
    seed : int, numpy Generator, RandomState or None, default=0
        Seeds the scrambling (``None``: fresh entropy, not reproducible).

    Attributes
    ----------
    points : ndarray of shape (n_points, dim)
    weights : ndarray of shape (n_points,)
        Uniform weights ``1/n_points``.

    Notes
    -----
    Uniforms are clipped to ``[ε, 1 − ε]``, ``ε = 1/(2048 n_points)``, before ``norm.ppf``.
    """

    def __init__(self, dim, n_points=8192, seed=0):
        self.dim = check_scalar_range(dim, "dim", low=1, integer=True)
        self.n_points = check_scalar_range(n_points, "n_points", low=1, integer=True)
        self.seed = seed
        if isinstance(seed, np.random.RandomState):
            seed = seed.randint(2 ** 31)
        try:
            sampler = qmc.Sobol(d=self.dim, scramble=True, rng=seed)
        except TypeError:                       # scipy < 1.15 names the argument ``seed``
            sampler = qmc.Sobol(d=self.dim, scramble=True, seed=seed)
        n = self.n_points
        if n & (n - 1) == 0:
            u = sampler.random_base2(int(np.log2(n)))
        else:
            with warnings.catch_warnings():     # balance warning for n not a power of 2
                warnings.simplefilter("ignore")
                u = sampler.random(n)
        eps = 0.5 / (n * 1024.0)
        u = np.clip(u, eps, 1 - eps)
        self.points = norm.ppf(u)
        self.weights = np.full(n, 1.0 / n)

    def __repr__(self):
        return f"GaussianNodes(dim={self.dim}, n_points={self.n_points}, seed={self.seed!r})"

    def subset(self, n_points):
        """The first ``n_points`` nodes, with uniform weights, as new nodes.

        A power-of-two prefix of a scrambled Sobol sequence is itself a balanced Sobol set;
        the coarse stage of the state-evolution solver iterates on one.

        Parameters
        ----------
        n_points : int
            In ``[1, self.n_points]``.

        Returns
        -------
        GaussianNodes
        """
        n_points = check_scalar_range(n_points, "n_points", low=1, high=self.n_points,
                                      integer=True)
        sub = object.__new__(GaussianNodes)
        sub.dim, sub.n_points, sub.seed = self.dim, n_points, self.seed
        sub.points = self.points[:n_points]
        sub.weights = np.full(n_points, 1.0 / n_points)
        return sub

    def blocks(self, k):
        """``(points[:, :k], points[:, k:])`` as two C-contiguous arrays, kept for the next
        call with the same ``k``: arithmetic on them is several times faster than on the
        strided column slices (every state-evolution evaluation starts with it).

        Parameters
        ----------
        k : int
            In ``[0, dim]``.

        Returns
        -------
        first, rest : ndarray of shape (n_points, k) and (n_points, dim − k)
        """
        cached = getattr(self, "_blocks", None)
        if cached is not None and cached[0] is self.points and cached[1] == k:
            return cached[2], cached[3]
        k = check_scalar_range(k, "k", low=0, high=self.dim, integer=True)
        first = np.ascontiguousarray(self.points[:, :k])
        rest = np.ascontiguousarray(self.points[:, k:])
        self._blocks = (self.points, k, first, rest)
        return first, rest

    def mean(self, values):
        """Weighted mean over the nodes (first axis)."""
        return np.tensordot(self.weights, values, axes=(0, 0))


@dataclass
class OutputSide:
    """Conjugate order parameters and train error from :func:`output_side`.

    Attributes
    ----------
    m_hat, q_hat, sigma_hat : float
        ``m̂, q̂, Σ̂`` (with the paper's factor 2).
    train_error : float
        ``E ℓ(y, z*)``.
    moreau : float
        ``E[‖z* − ω‖²/(2Σ) + ℓ(y, z*)]``, the averaged Moreau envelope ``M(Σ, m, q)``.
    sigma_hat_pointwise : float or None
        ``(2α/Σ) E Tr(I − (I + ΣH)⁻¹) = −2α E[Σ_k ∂g_k/∂ω_k]`` with the pointwise
        derivative (docs: Theory §4); None for the uncertified warm iterations
        (``trust_warm``) in the Stein form, which never report it and skip its Hessians.
    sigma_hat_stein : float
        ``−2α E[Σ_k ∂g_k/∂ω_k]`` in Stein form,
        ``−2α E[gᵀω]/q + (m/q) m̂``: the derivative in the sense of distributions, which also
        counts the jumps of the global minimiser z*(ω) of a non-convex prox. It equals
        ``4α ∂M/∂q``, the stationarity condition of the paper's Φ. Falls back to the
        pointwise form when ``q ≤ 1e-8 (Q0 + Δ/2)``.
    t_hat : float
        ``t̂ = −2α ∂M/∂t``, the conjugate of ``t = Tr S/d`` for non-Gaussian tokens
        (``token_kurtosis ≠ 0``); 0 for Gaussian tokens, where M does not depend on t.
    certified_fraction : float
        Fraction of the nodes whose prox minimiser is certified global (provably convex
        prox problem, the branch and bound of :mod:`._certify` for T = 2, or the
        strong-convexity certificate of :mod:`._certify_rows` for T ≥ 3); 1 for linear
        attention.
    uncertified_bound : dict
        How far the nodes that are not certified can move each reported quantity: an
        upper bound on ``|value − value with the global minimiser at those nodes|`` for
        ``m_hat``, ``q_hat``, ``sigma_hat_stein``, ``train_error`` and ``moreau`` (0 where
        every node is certified; :func:`uncertified_bound`). Empty for linear attention;
        None for the uncertified warm iterations (``trust_warm``), which are never
        reported.
    """

    m_hat: float
    q_hat: float
    sigma_hat: float
    train_error: float
    moreau: float
    sigma_hat_pointwise: float | None
    sigma_hat_stein: float
    t_hat: float = 0.0
    certified_fraction: float = 1.0
    uncertified_bound: dict | None = field(default_factory=dict)

    def __getitem__(self, key):
        return getattr(self, key)

    def keys(self):
        return ("m_hat", "q_hat", "sigma_hat", "train_error", "moreau", "sigma_hat_pointwise",
                "sigma_hat_stein", "t_hat", "certified_fraction")  # the scalars


def uncertified_bound(certified, z, omega, loss, sigma, zeta1, zeta2, *, alpha, m, q, V,
                      mean):
    """Bounds on how much the uncertified nodes can move the output side.

    At a node with objective ``F`` at the found ``z`` (its loss ℓ), every global minimiser
    lies in the ball ``‖z_g − ω‖ ≤ r = √(2ΣF)`` (``‖z_g − ω‖²/(2Σ) ≤ F(z_g) ≤ F``, ℓ ≥
    0). With ``g = (z − ω)/Σ``, a linear average ``E[gᵀη]`` (``m̂ = 2α E[gᵀζ2]/√V``; the
    Stein ``Σ̂ = 2α E[gᵀ(−ζ1/√q + (m/q)ζ2/√V)]``) moves by ``E[(z_g − z)ᵀη]/Σ`` over the
    uncertified nodes, with ``z_g − z = (ω − z) + (z_g − ω)``: at most ``(|E[(ω − z)ᵀη]|
    + E[r‖η‖])/Σ`` (the first term keeps its sign across nodes). ``‖g_g‖²`` lies in ``[0,
    (r/Σ)²]``, so E‖g‖² moves by at most ``max(E[(r/Σ)² − ‖g‖²], E‖g‖²)``; the loss lies
    in ``[0, F]`` (at most ``max(E[F − ℓ], E[ℓ])``) and the objective in ``[0, F]`` (at
    most E[F]). With non-Gaussian tokens m, q and V are per component (arrays of shape
    (K,)), m̂ and Σ̂ sums of one such form per component. The
    certified nodes already hold a global minimiser. Bounds on the change of m̂, q̂ =
    2α E‖g‖², the Stein Σ̂, the train error and the Moreau envelope: a worst case over
    each node's ball, so a bound, not an estimate.

    Returns
    -------
    dict
        ``m_hat, q_hat, sigma_hat_stein, train_error, moreau`` (floats ≥ 0).
    """
    unc = ~np.asarray(certified, dtype=bool)
    if not unc.any():
        return dict(m_hat=0.0, q_hat=0.0, sigma_hat_stein=0.0, train_error=0.0, moreau=0.0)
    rho2 = np.sum((z - omega) ** 2, axis=1)
    F = rho2 / (2 * sigma) + loss
    r = np.sqrt(2 * sigma * np.maximum(F, 0.0))

    def over(values):
        # an average over the nodes with the uncertified ones' values only
        return float(mean(np.where(unc, values, 0.0)))

    def linear(eta):
        # the largest move of E[gᵀη] over the uncertified nodes' balls
        shift = over(np.sum((omega - z) * eta, axis=1))
        return (abs(shift) + over(r * np.linalg.norm(eta, axis=1))) / sigma

    # m, q and V may be per component (non-Gaussian tokens): the same linear forms, with
    # each component's own; a component off the Stein form (V or q 0) leaves them unbounded
    dm = 2 * alpha * linear(zeta2 / np.sqrt(V)) if np.all(V > 0) else np.inf
    ds = (2 * alpha * linear(-zeta1 / np.sqrt(q) + (m / q) * zeta2 / np.sqrt(V))
          if np.all(V > 0) and np.all(q > 0) else np.inf)
    # ‖g_g‖² and the loss move within their ranges, all nodes the same way at worst
    # (ρ²/Σ)/Σ: Σ² of a wild iterate (Σ ≳ 1e155) overflows a float and raises
    g2, g2_max = (rho2 / sigma) / sigma, (r / sigma) ** 2
    dq = 2 * alpha * max(over(g2_max - g2), over(g2))
    d_loss = max(over(F - loss), over(loss))
    d_objective = over(F)
    return dict(m_hat=dm, q_hat=dq, sigma_hat_stein=ds, train_error=d_loss,
                moreau=d_objective)


def _trace_resolvent_complement(H, sigma):
    """``Tr(I − (I + ΣH)⁻¹)`` per sample, with ``1 + Σλ`` floored at 1e-12 (≥ 0 at a
    global minimiser). Through the eigenvalues: a closed form in the minors of ``I + ΣH``
    (tried for K = 3) loses every digit to cancellation when Σ is large (ridgeless limits).
    Up to K = 3 the eigenvalues come from compiled Jacobi rotations (as accurate as
    LAPACK, without its per-matrix overhead: 3.6 ms against 8.6 ms for 8192 3×3 matrices);
    from K = 6 (T = 3) LAPACK's batched eigvalsh is the faster.
    """
    if _kernels.HAVE_NUMBA and H.shape[1] <= _JACOBI_MAX_K:
        return _kernels.trace_resolvent_complement(np.ascontiguousarray(H), float(sigma))
    lam = np.linalg.eigvalsh(H)
    den = np.maximum(1 + sigma * lam, 1e-12)
    return np.sum(sigma * lam / den, axis=1)


def _fused_rows_kernel(channel):
    """Whether the channel's losses and traces go through the compiled per-row kernels of
    T ≥ 3 (:func:`._kernels.loss_and_trace`, :func:`._kernels.losses_T`)."""
    return (_kernels.HAVE_NUMBA and getattr(channel, "compiled", False)
            and getattr(channel, "_index", None) is not None and channel.K > _JACOBI_MAX_K
            and hasattr(channel, "softmax_row_kernel"))


def _losses(channel, y, z, sigma):
    """The loss per sample alone: :func:`._kernels.losses_T` on the compiled T ≥ 3 path of
    :func:`_loss_and_trace`, else its loss."""
    if _fused_rows_kernel(channel):
        return _kernels.losses_T(np.ascontiguousarray(z), np.ascontiguousarray(y),
                                 channel._index, channel._scale, float(channel.beta_))
    return _loss_and_trace(channel, y, z, sigma)[0]


def _loss_and_trace(channel, y, z, sigma):
    """Loss and ``Tr(I − (I + ΣH)⁻¹)`` per sample, ``H = ∇²ℓ(y, z*)``.

    Softmax attention with T = 2 on the compiled path: the closed form of
    :func:`._kernels.loss_and_trace2`. With T ≥ 3: one fused kernel (the Hessian per
    sample and a Cholesky trace, :func:`._kernels.loss_and_trace`; T = 6, 8192 nodes:
    ~5× less time than the numpy Hessians and LAPACK's batched eigenvalues), with the
    eigenvalues of :func:`_trace_resolvent_complement` where ``I + ΣH`` is nearly singular.
    Otherwise the numpy Hessians and :func:`_trace_resolvent_complement`.
    """
    if (_kernels.HAVE_NUMBA and getattr(channel, "compiled", False)
            and hasattr(channel, "softmax_row_kernel") and channel.n_tokens == 2):
        # T = 2: rank-2 Hessian in the row differences, closed-form eigenvalues (~20× less
        # time than the numpy Hessians and the 3 × 3 Jacobi rotations)
        return _kernels.loss_and_trace2(np.ascontiguousarray(z), np.ascontiguousarray(y),
                                        float(channel.beta_), float(sigma))
    if _fused_rows_kernel(channel):
        loss, tr = _kernels.loss_and_trace(np.ascontiguousarray(z), np.ascontiguousarray(y),
                                           channel._index, channel._scale,
                                           float(channel.beta_), float(sigma))
        bad = np.flatnonzero(~np.isfinite(tr))
        if bad.size:
            _, _, H = channel._derivs(y[bad], z[bad])
            tr[bad] = _trace_resolvent_complement(H, sigma)
        return loss, tr
    loss, _, H = channel._derivs(y, z)
    return loss, _trace_resolvent_complement(H, sigma)      # Tr(I − (I + ΣH)⁻¹)


def _check_nodes(channel, nodes):
    if nodes is None:
        nodes = GaussianNodes(2 * channel.K)
    if nodes.dim != 2 * channel.K:
        raise ValueError(f"nodes must have dim 2K = {2 * channel.K} for n_tokens="
                         f"{channel.n_tokens}, got {nodes.dim}.")
    return nodes


def _check_overlaps(m, q, Q0, noise):
    """Validated ``(m, q, Q0, noise)`` of :func:`output_side` and :func:`test_error`."""
    m = float(m)
    q = check_scalar_range(q, "q", low=0)
    Q0 = check_scalar_range(Q0, "Q0", low=0, low_inclusive=False)
    noise = check_scalar_range(noise, "noise", low=0)
    return m, q, Q0, noise


def _gaussian_pair(m, q, var0, nodes, K):
    """``(ω, w)`` per component Gaussian with covariance ``[[q, m], [m, var0]]``.

    Returns ω, w, the residual standard deviation √V of w given ω (V = var0 − m²/q) and the
    standardised residual ζ2 = (w − (m/q) ω)/√V.
    """
    zeta1, zeta2 = nodes.blocks(K)
    if q <= 1e-300:
        omega = np.zeros_like(zeta1)
        V = var0
        w = np.sqrt(V) * zeta2
    else:
        V = max(var0 - m * m / q, 0.0)
        omega = np.sqrt(q) * zeta1
        w = (m / np.sqrt(q)) * zeta1 + np.sqrt(V) * zeta2
    return omega, w, V, zeta2


def remembered_minimisers(channel, nodes=None):
    """The prox minimisers ``z*`` the channel remembers from its last warm evaluation
    (on ``nodes`` if given), or None.

    Parameters
    ----------
    channel : object
    nodes : GaussianNodes or None

    Returns
    -------
    ndarray of shape (n_points, K) or None
    """
    ref, prev = getattr(channel, "_warm_z", (None, None))
    if ref is None or (nodes is not None and ref() is not nodes):
        return None
    return prev


def seed_minimisers(channel, nodes, z):
    """Let the channel's next warm evaluation on ``nodes`` start each node's prox at ``z``
    (another evaluation's minimisers on the same points: a nearby map's).

    Parameters
    ----------
    channel : object
    nodes : GaussianNodes
    z : ndarray of shape (nodes.n_points, channel.K)

    Raises
    ------
    ValueError
        If ``z`` has another shape.
    """
    z = np.asarray(z, dtype=float)
    if z.shape != (nodes.n_points, channel.K):
        raise ValueError(f"z must have shape {(nodes.n_points, channel.K)}, got {z.shape}.")
    _warm_start(channel, nodes, z)


def _warm_start(channel, nodes, z=None):
    """The ``z*`` of the previous call on the same nodes (stored on the channel), or None.

    Across the fixed-point iterations of one solve the minimisers move little, so the
    previous ``z*`` of a node is a start that needs a few Newton steps; a weak reference
    to the nodes keeps a stale ``z*`` from reaching other nodes.
    """
    if z is not None:
        channel._warm_z = (weakref.ref(nodes), z)
        return None
    ref, prev = getattr(channel, "_warm_z", (None, None))
    if ref is None or ref() is not nodes or prev.shape != (nodes.n_points, channel.K):
        return None
    return prev


def prox_at_nodes(channel, nodes, y, omega, sigma, start, *, warm_start, trust_warm,
                  multistart_memory=False):
    """The channel's prox at the nodes, with what it remembers of earlier evaluations on
    them: ``(z, certified)``.

    ``warm_start``: from each node's last warm minimiser (:func:`_warm_start`), which is
    then replaced. ``multistart_memory`` (without ``warm_start``; softmax, T ≥ 3, the
    compiled prox): an uncertified multi-start where the nodes whose starts all ended at
    one point in an earlier such evaluation (since :func:`forget_multistart_memory`) run
    from that point alone; the memory is then replaced.
    """
    sigma = np.full(omega.shape[0], sigma)
    if multistart_memory and not warm_start:
        warm, agree = _multistart_memory(channel, nodes)
        z, certified = channel._prox_certified(y, omega, sigma, start=start, warm=warm,
                                               trust_warm=trust_warm, memory=agree)
        channel._multistart_memory = (weakref.ref(nodes), z, agree)
        return z, certified
    warm = _warm_start(channel, nodes) if warm_start else None
    z, certified = channel._prox_certified(y, omega, sigma, start=start, warm=warm,
                                           trust_warm=trust_warm)
    if warm_start:
        _warm_start(channel, nodes, z)
    return z, certified


def forget_multistart_memory(channel):
    """Drop the channel's multi-start memory (:func:`prox_at_nodes`)."""
    channel._multistart_memory = None


def _multistart_memory(channel, nodes):
    """The remembered minimisers (or None) and agreement mask on ``nodes`` (all False
    where nothing is remembered for them)."""
    ref, z, agree = getattr(channel, "_multistart_memory", None) or (None, None, None)
    if ref is None or ref() is not nodes or z.shape != (nodes.n_points, channel.K):
        return None, np.zeros(nodes.n_points, dtype=bool)
    return z, agree.copy()
