"""Finite-d state evolution of the seq2seq task for factored linear attention.

The seq2seq loss of one sample is ``‖(Â − Y) x‖²_F/d = Tr(R G Rᵀ)`` with ``R = Â − Y`` and
the token Gram matrix ``G = x xᵀ/d = I + h(I)/√d`` exactly (docs: Theory §1, §4
"Finite d"): the weights of the residual rows are the pre-activations of the identity. In
the continuum ``G → I`` and seq2seq is seq2lab; at finite d the identity is a second fixed,
teacher-like direction, with ``t = Tr Ŝ/d`` a fourth order parameter beside ``(m, q, Σ)``
and its conjugate ``m̂_I``.

Two output channels, one fixed point:

- :func:`bartlett_output_side` (``model="bartlett"``, routed from
  :func:`~skattn.theory.solve_state_evolution`): the exact token Gram matrix through the
  Bartlett factorisation ``x = √d B Q``, ``h(S) = t h(I) + B V(S_⊥) Bᵀ``, with the bulk V
  Gaussian and independent of B;
- :func:`seq2seq_output_side` (``model="gaussian"``): the weights ``I + h(g)/√d`` with
  ``g = u(I)`` jointly Gaussian with the features and the Gram matrix of ``(S0, I, Ŝ)``
  as covariance. Against trained models it predicts only part of the seq2seq excess
  (docs: Validation report, "seq2seq at finite d"): the coupling of the weights to the features is in third moments that a Gaussian g lacks.
  With ``loss="seq2lab"`` (``G = I``) it is the finite-d seq2lab state evolution, node for
  node.

Prior side (both): the finite-d spectral denoiser of docs: Theory §4 with input
``m̂ S0 + m̂_I I + √q̂ Z − 2λ̃ I``, i.e. the threshold ``ε = (2λ̃ − m̂_I)/m̂``
(:class:`~skattn.theory.denoisers.FactoredDenoiser` with ``t_hat = m̂_I``), which returns
``m``, ``q``, Σ and t. The fixed point is solved at α_eff, like the seq2lab one.

The predicted seq2seq test error is ``1 + c_T/d`` times the seq2lab form of the signal
part plus the unchanged label-noise term (:func:`seq2seq_metric_factor`): for a fixed Ŝ
this factor is exact for Gaussian tokens. Derivation and measurements: docs: Theory §4,
"seq2seq state evolution"; ``benchmarks/seq2seq_finite_d.py``.

Pure numpy/scipy (no torch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr
from scipy.stats import chi2

from .._validation import check_choice, check_scalar_range
from .channels import GaussianNodes
from .coords import _maps, h_from_u, u_from_h
from .problem import UNSET, resolve_problem
from .core import solve_core
from .core.iteration import robust_fixed_point

__all__ = ["seq2seq_metric_factor", "Seq2seqOutputSide", "seq2seq_output_side",
           "frame_covariance", "bartlett_output_side",
           "Seq2seqStateEvolutionResult", "solve_seq2seq_state_evolution"]

WEIGHTS = ("gaussian", "identity")
MODELS = ("bartlett", "gaussian")


def seq2seq_metric_factor(n_tokens, n_features):
    """``1 + c_T/d``: seq2seq over seq2lab test error of a fixed Ŝ (signal part).

    ``c_T = (8 + (T − 1)(T + 4))/(T + 1)`` (4, 14/3, 11/2 for T = 1, 2, 3), from the
    Gaussian moments of docs: Theory §4 ("Finite d", seq2seq); the label-noise term is
    the same in both tasks.

    Parameters
    ----------
    n_tokens : int
        T ≥ 1.
    n_features : int
        d ≥ 1.

    Returns
    -------
    float
    """
    T = check_scalar_range(n_tokens, "n_tokens", low=1, integer=True)
    d = check_scalar_range(n_features, "n_features", low=1, integer=True)
    return 1.0 + (8 + (T - 1) * (T + 4)) / (T + 1) / d


def _linear_test_error(T, m, q, Q0, noise):
    """Exact seq2lab test error of linear attention: ``T(T+1)(Q0 − 2m + q) + T(T+1)Δ/2``."""
    return T * (T + 1) * (Q0 - 2 * m + q), T * (T + 1) * noise / 2


# -- the output side --------------------------------------------------------------------


@dataclass
class Seq2seqOutputSide:
    """Conjugates from :func:`seq2seq_output_side` (paper's factor 2).

    Attributes
    ----------
    m_hat : float
        Conjugate of ``m = Tr(S0 Ŝ)/d``.
    m_hat_identity : float
        ``m̂_I``, conjugate of ``t = Tr Ŝ/d`` (0 with ``weights="identity"``).
    q_hat, sigma_hat : float
    train_error : float
        ``E ℓ(w, z*)``.
    """

    m_hat: float
    m_hat_identity: float
    q_hat: float
    sigma_hat: float
    train_error: float


def _node_dim(K, weights):
    return 3 * K if weights == "gaussian" else 2 * K


def _solver_node_dim(K, model, loss):
    if model == "bartlett":
        return 4 * K
    return _node_dim(K, "gaussian" if loss == "seq2seq" else "identity")


def _gram_weights(g, T, n_features):
    """``W = Lᵀ(I ⊗ G)L`` per node, ``G = I + h(g)/√d`` with negative eigenvalues set to 0.

    The true Gram matrix ``x xᵀ/d`` is positive semi-definite; its Gaussian model is not
    always (rarely, at d ≥ 40), and a negative weight would make the prox unbounded.
    """
    G = np.eye(T) + h_from_u(g, T) / np.sqrt(n_features)
    lam, vec = np.linalg.eigh(G)
    if np.any(lam < 0):
        G = np.einsum("nij,nj,nkj->nik", vec, np.maximum(lam, 0.0), vec)
    Lr = _maps(T)[2].reshape(T, T, -1)
    return np.einsum("abk,nbc,acl->nkl", Lr, G, Lr)


def _check_gram(m, q, t, Q0, trace0, noise):
    """The conditional covariance of ``(w, g)`` given ω, and its Cholesky factor."""
    var_w = Q0 + noise / 2
    C = np.array([[var_w - m * m / q, trace0 - m * t / q], [trace0 - m * t / q, 1 - t * t / q]])
    try:
        return np.linalg.cholesky(C)
    except np.linalg.LinAlgError:
        raise ValueError(f"(m, t, q) = ({m}, {t}, {q}) with Q0={Q0}, trace0={trace0} is not "
                         "the Gram matrix of (S0, I, Ŝ) (its covariance is not positive "
                         "definite).") from None


def seq2seq_output_side(n_tokens, nodes, *, m, q, t, Q0, trace0, noise, sigma, alpha,
                        n_features, weights="gaussian"):
    """Output side of the Gaussian-weights channel (``model="gaussian"``).

    Per u-component the label field ``w = u(S0) + ξ̃``, the identity field ``g = u(I)`` and
    the student's ``ω`` are jointly Gaussian with the Gram matrix of ``(S0, I, Ŝ)``:
    ``E[w²] = Q0 + Δ/2``, ``E[wg] = τ0``, ``E[g²] = 1``, ``E[ωw] = m``, ``E[ωg] = t``,
    ``E[ω²] = q``. The loss is ``(z − w)ᵀ W (z − w)``, ``W = Lᵀ(I_T ⊗ G)L`` with
    ``G = I + h(g)/√d`` (``L: u ↦ vec h``), so the prox is one K × K solve per node.
    ``m̂`` and ``m̂_I`` (``2α E[Σ_k ∂g_k/∂w_k]`` and ``2α E[Σ_k ∂g_k/∂g_k]``) are in Stein
    form on the law of ``(w, g)`` given ω, ``q̂ = 2α E‖g_out‖²`` and
    ``Σ̂ = 2α E Tr((I + 2ΣW)⁻¹ 2W)`` (pointwise: the prox is linear), as for seq2lab in
    :func:`~skattn.theory.channels.output_side`.

    Parameters
    ----------
    n_tokens : int
        T ≥ 1.
    nodes : GaussianNodes
        Of dim 3K (``weights="gaussian"``: ω, then w and g given ω) or 2K
        (``"identity"``: the nodes of :func:`~skattn.theory.solve_state_evolution`).
    m, q, t : float
        ``Tr(S0 Ŝ)/d``, ``Tr Ŝ²/d > 0`` and ``Tr Ŝ/d``.
    Q0, trace0 : float
        ``Tr S0²/d > 0`` and ``τ0 = Tr S0/d``.
    noise : float
        Δ ≥ 0.
    sigma : float
        Σ > 0.
    alpha : float
        The sample ratio of the fixed point (α_eff at finite d).
    n_features : int
        d ≥ 1: the Gram fluctuation is ``h(g)/√d``.
    weights : {"gaussian", "identity"}, default="gaussian"
        "identity" drops ``h(g)/√d`` (``G = I``: the seq2lab loss).

    Returns
    -------
    Seq2seqOutputSide
    """
    T = check_scalar_range(n_tokens, "n_tokens", low=1, integer=True)
    check_choice(weights, "weights", WEIGHTS)
    q = check_scalar_range(q, "q", low=0, low_inclusive=False)
    Q0 = check_scalar_range(Q0, "Q0", low=0, low_inclusive=False)
    noise = check_scalar_range(noise, "noise", low=0)
    sigma = check_scalar_range(sigma, "sigma", low=0, low_inclusive=False)
    alpha = check_scalar_range(alpha, "alpha", low=0)
    d = check_scalar_range(n_features, "n_features", low=1, integer=True)
    m, t, trace0 = float(m), float(t), float(trace0)
    if not np.all(np.isfinite([m, t, trace0])):
        raise ValueError(f"m, t and trace0 must be finite, got {m}, {t}, {trace0}.")
    K = T * (T + 1) // 2
    if nodes.dim != _node_dim(K, weights):
        raise ValueError(f"nodes must have dim {_node_dim(K, weights)} for n_tokens={T} and "
                         f"weights={weights!r}, got {nodes.dim}.")
    pts = nodes.points
    zeta1 = pts[:, :K]
    omega = np.sqrt(q) * zeta1
    if weights == "identity":
        V = Q0 + noise / 2 - m * m / q
        if V <= 0:
            raise ValueError(f"m must satisfy m² < q (Q0 + Δ/2), got m={m}, q={q}.")
        chol = np.array([[np.sqrt(V)]])
        w = (m / q) * omega + chol[0, 0] * pts[:, K:2 * K]
        W = np.broadcast_to(2.0 * np.eye(K), (pts.shape[0], K, K))
    else:
        chol = _check_gram(m, q, t, Q0, trace0, noise)
        zeta2, zeta3 = pts[:, K:2 * K], pts[:, 2 * K:]
        w = (m / q) * omega + chol[0, 0] * zeta2
        g = (t / q) * omega + chol[1, 0] * zeta2 + chol[1, 1] * zeta3
        W = _gram_weights(g, T, d)
    A = np.eye(K) + 2 * sigma * W
    # g_out = (z* − ω)/Σ = (I + 2ΣW)⁻¹ 2W (w − ω): the prox of a quadratic loss
    two_W_r = 2 * np.einsum("nkl,nl->nk", W, w - omega)
    gout = np.linalg.solve(A, two_W_r[..., None])[..., 0]
    z = omega + sigma * gout
    r = z - w
    train = float(nodes.mean(np.einsum("nk,nkl,nl->n", r, W, r)))
    # Stein on (w, g) | ω = mean + chol ζ: E[g_out ζ_j] = Σ_a chol_aj E[∂_a g_out], so
    # the derivatives are chol⁻ᵀ of the node averages
    stein = np.array([nodes.mean(np.sum(gout * pts[:, (1 + j) * K:(2 + j) * K], axis=1))
                      for j in range(chol.shape[0])])
    derivs = np.linalg.solve(chol.T, stein)
    m_hat = 2 * alpha * float(derivs[0])
    m_hat_identity = 2 * alpha * float(derivs[1]) if weights == "gaussian" else 0.0
    q_hat = 2 * alpha * float(nodes.mean(np.sum(gout * gout, axis=1)))
    resolvent = np.linalg.solve(A, 2 * W)
    sigma_hat = 2 * alpha * float(nodes.mean(np.trace(resolvent, axis1=1, axis2=2)))
    return Seq2seqOutputSide(m_hat, m_hat_identity, q_hat, sigma_hat, train)


def _bartlett_factor(pts, T, d):
    """``B`` with ``x xᵀ/d = B Bᵀ``: the Bartlett decomposition of the token Gram matrix.

    ``B`` is lower triangular, ``B_aa² ~ χ²_{d−a}/d`` (a = 0 … T − 1) and ``B_ab ~ N(0, 1/d)``
    below the diagonal, all independent (exact for Gaussian tokens).
    """
    n = pts.shape[0]
    B = np.zeros((n, T, T))
    diag = np.arange(T)
    B[:, diag, diag] = np.sqrt(chi2.ppf(ndtr(pts[:, :T]), d - diag) / d)
    rows, cols = np.tril_indices(T, -1)
    B[:, rows, cols] = pts[:, T:] / np.sqrt(d)
    return B


def frame_covariance(n_tokens, n_features):
    """Covariance of the u-components of ``V = √d Q S Qᵀ`` per unit ``⟨S, S⟩/d``.

    For a traceless S and Q a uniform orthonormal T-frame in R^d: ``d/(d + 2)`` on the
    diagonal components, ``−d/((d + 2)(d − 1))`` between two of them, and
    ``d²/((d + 2)(d − 1))`` on the off-diagonal components, which are uncorrelated with
    everything else (Haar moments; with them every second moment of h is exact).

    Parameters
    ----------
    n_tokens : int
        T ≥ 1.
    n_features : int
        d ≥ T + 1.

    Returns
    -------
    ndarray of shape (K, K)
    """
    T = check_scalar_range(n_tokens, "n_tokens", low=1, integer=True)
    d = check_scalar_range(n_features, "n_features", low=T + 1, integer=True)
    K = T * (T + 1) // 2
    cov = np.diag(np.where(np.arange(K) < T, d / (d + 2.0), d * d / ((d + 2.0) * (d - 1.0))))
    diag = np.arange(T)
    cross = -d / ((d + 2.0) * (d - 1.0))
    cov[np.ix_(diag, diag)] += cross * (1 - np.eye(T))
    return cov


def bartlett_output_side(n_tokens, nodes, *, m, q, t, Q0, trace0, noise, sigma, alpha,
                         n_features, task="seq2seq"):
    r"""Output side with the exact token Gram matrix (docs: Theory §4, "Finite d").

    Gaussian tokens factor as ``x = √d B Q`` with ``Q`` (T × d) uniform on the orthonormal
    frames and ``B`` the lower-triangular Cholesky factor of ``G = x xᵀ/d``, independent
    (Bartlett). For ``S = t I + S_⊥`` (``Tr S_⊥ = 0``) this gives exactly

    .. math::

        h(S) = t\,h(I) + B\,V(S_⊥)\,B^\top,\qquad h(I) = \sqrt d\,(G − I),\qquad
        V(S_⊥) = \sqrt d\, Q S_⊥ Q^\top,

    and ``V`` is modelled as Gaussian, independent of ``B``, with the covariance
    :func:`frame_covariance` times ``⟨S_⊥, S'_⊥⟩/d`` (the Haar moments over orthonormal
    frames; with them every second moment of h is exact). The Gram weights, the norms of the features and the
    trace direction are thus coupled as in the data: the moments of the seq2seq metric
    (``E[h_aa(Δ)² G_aa]`` …) are those of the docs. The teacher has ``τ0 = Tr S0/d``; the
    Gaussian bulk pair has the overlaps ``m − t τ0``, ``q − t²``, ``Q0 − τ0²``. The
    conjugates are derivatives of the averaged Moreau envelope M at fixed ``(m, q, t)``,
    ``m̂ = −2α ∂M/∂m``, ``Σ̂ = 4α ∂M/∂q``, ``m̂_I = −2α ∂M/∂t``, taken pointwise (the prox
    is linear).

    Parameters
    ----------
    n_tokens : int
    nodes : GaussianNodes of dim 4K
        Columns: ω, the teacher's bulk given ω, the label noise (K each), then the T
        diagonal and the ``K − T`` sub-diagonal entries of B.
    m, q, t, Q0, trace0, noise, sigma, alpha, n_features
        As in :func:`seq2seq_output_side` (``q > t²``, ``Q0 > τ0²``,
        ``n_features ≥ n_tokens + 1``).
    task : {"seq2seq", "seq2lab"}, default="seq2seq"
        The loss: Gram-weighted rows, or the plain square loss (the features keep B).

    Returns
    -------
    Seq2seqOutputSide
    """
    T = check_scalar_range(n_tokens, "n_tokens", low=1, integer=True)
    check_choice(task, "task", ("seq2seq", "seq2lab"))
    sigma = check_scalar_range(sigma, "sigma", low=0, low_inclusive=False)
    alpha = check_scalar_range(alpha, "alpha", low=0)
    noise = check_scalar_range(noise, "noise", low=0)
    d = check_scalar_range(n_features, "n_features", low=T + 1, integer=True)
    K = T * (T + 1) // 2
    if nodes.dim != 4 * K:
        raise ValueError(f"nodes must have dim 4K = {4 * K} for n_tokens={T}, got "
                         f"{nodes.dim}.")
    m, q, t = float(m), float(q), float(t)
    m_perp, q_perp, Q0_perp = m - t * trace0, q - t * t, Q0 - trace0 * trace0
    V = Q0_perp - m_perp * m_perp / q_perp if q_perp > 0 else -1.0
    if not (q_perp > 0 and V > 0):
        raise ValueError(f"(m, q, t) = ({m}, {q}, {t}) must leave a non-degenerate bulk: "
                         f"q > t² and (m − t τ0)² < (q − t²)(Q0 − τ0²).")
    pts = nodes.points
    cov = frame_covariance(T, d)
    root = np.linalg.cholesky(cov)
    B = _bartlett_factor(pts[:, 3 * K:], T, d)
    gram = B @ np.swapaxes(B, 1, 2)
    B_inv = np.linalg.inv(B)
    omega = np.sqrt(q_perp) * pts[:, :K] @ root.T
    bulk0 = (m_perp / q_perp) * omega + np.sqrt(V) * pts[:, K:2 * K] @ root.T
    h_identity = np.sqrt(d) * (gram - np.eye(T))
    xi = h_from_u(np.sqrt(noise / 2) * pts[:, 2 * K:3 * K], T)

    def whiten(h):                                  # B⁻¹ h B⁻ᵀ
        return B_inv @ h @ np.swapaxes(B_inv, 1, 2)

    # R = B (h(z) − h(y)) Bᵀ, y the teacher's bulk plus the rest of the residual
    y = bulk0 + u_from_h(whiten(xi - (t - trace0) * h_identity))
    phi_t = u_from_h(whiten(h_identity))            # −∂y/∂t
    Lr = _maps(T)[2].reshape(T, T, K)
    LB = np.einsum("nac,cek,nbe->nabk", B, Lr, B)   # u ↦ B h(u) Bᵀ
    weights = gram if task == "seq2seq" else np.broadcast_to(np.eye(T), gram.shape)
    W = np.einsum("nabk,nbc,nacl->nkl", LB, weights, LB)
    A = np.eye(K) + 2 * sigma * W
    gout = np.linalg.solve(A, (2 * np.einsum("nkl,nl->nk", W, y - omega))[..., None])[..., 0]
    r = omega + sigma * gout - y
    train = float(nodes.mean(np.einsum("nk,nkl,nl->n", r, W, r)))
    resolvent = np.linalg.solve(A, 2 * W)          # −∂g/∂ω = ∂g/∂y
    # Σ̂ = 4α ∂M/∂q = −2α E Tr(cov ∂g/∂ω): the components of ω are correlated
    sigma_hat = 2 * alpha * float(nodes.mean(np.einsum("kl,nlk->n", cov, resolvent)))
    m_hat = sigma_hat                               # ∂g/∂y = −∂g/∂ω for this prox
    q_hat = 2 * alpha * float(nodes.mean(np.einsum("nk,kl,nl->n", gout, cov, gout)))
    # −2α ∂M/∂t at fixed (m, q): the explicit t of y, and t inside m − tτ0 and q − t²
    m_hat_identity = (2 * alpha * float(nodes.mean(np.sum(gout * phi_t, axis=1)))
                      - trace0 * m_hat + t * sigma_hat)
    return Seq2seqOutputSide(m_hat, m_hat_identity, q_hat, sigma_hat, train)


# -- the fixed point --------------------------------------------------------------------


@dataclass
class Seq2seqStateEvolutionResult:
    """Fixed point of :func:`solve_seq2seq_state_evolution`.

    Attributes
    ----------
    alpha : float
        The nominal ``n/d²``.
    n_features : int
    model, loss : str
    m, q, sigma, trace : float
        ``Tr(S0 Ŝ)/d``, ``Tr Ŝ²/d``, Σ and ``t = Tr Ŝ/d``.
    m_hat, m_hat_identity, q_hat, sigma_hat : float
    Q0, trace0 : float
        ``Tr S0²/d`` and ``Tr S0/d``.
    s_error : float
        ``‖Ŝ − S0‖²_F/d = Q0 − 2m + q``.
    test_error : float
        The seq2seq test error ``E ‖(Â − Y)x‖²_F/d``: ``(1 + c_T/d)`` times the signal
        part of ``seq2lab_test_error``, plus its label-noise part.
    seq2lab_test_error : float
        ``T(T+1) s_error + T(T+1)Δ/2``, the seq2lab test error of the same Ŝ.
    train_error : float
    train_objective : float
        ``L/d² = α e_train + λ̃ t`` at the nominal α.
    converged : bool
    residual : float
        Max-norm of the fixed-point residual at the returned point.
    n_calls : int
        Evaluations of the fixed-point map.
    eta, delta, epsilon : float
        The learned spectrum ``Ŝ ≈ eta · ReLU(S0 + delta Z − epsilon I)``, with
        ``epsilon = (2λ̃ − m̂_I)/m̂`` (docs: Theory §4).
    spectrum : ndarray of shape (d,) or None
        A typical spectrum of Ŝ (the denoiser's ``learned_spectrum``).
    certified_fraction : float
        Share of the node weight whose prox minimiser is proved global: 1 for linear
        attention (a quadratic prox); softmax T = 2: the row-difference certificate of
        the bulk prox; softmax T ≥ 3: 0 (a multi-start, not certified).
    """

    alpha: float
    n_features: int
    model: str
    loss: str
    m: float
    q: float
    sigma: float
    trace: float
    m_hat: float
    m_hat_identity: float
    q_hat: float
    sigma_hat: float
    Q0: float
    trace0: float
    s_error: float
    test_error: float
    seq2lab_test_error: float
    train_error: float
    train_objective: float
    converged: bool
    residual: float
    n_calls: int = 0
    eta: float = np.nan
    delta: float = np.nan
    epsilon: float = np.nan
    spectrum: np.ndarray | None = None
    certified_fraction: float = 1.0


class _Seq2seqMap:
    """``x = (m/√Q0, log q, log Σ, t/√Q0) ↦ F(x) − x`` on fixed nodes."""

    def __init__(self, alpha, T, d, denoiser, Q0, trace0, noise, nodes, model, loss):
        self.alpha, self.T, self.d, self.denoiser = alpha, T, d, denoiser
        self.Q0, self.trace0, self.noise = Q0, trace0, noise
        self.nodes, self.model, self.loss = nodes, model, loss
        self.n_calls, self.last, self.last_x = 0, None, None

    def to_x(self, m, q, sigma, t):
        return np.array([m / np.sqrt(self.Q0), np.log(q), np.log(sigma),
                         t / np.sqrt(self.Q0)])

    def from_x(self, x):
        return (float(x[0] * np.sqrt(self.Q0)), float(np.exp(np.clip(x[1], -700, 700))),
                float(np.exp(np.clip(x[2], -700, 700))), float(x[3] * np.sqrt(self.Q0)))

    def evaluate(self, m, q, sigma, t):
        keywords = dict(m=m, q=q, t=t, Q0=self.Q0, trace0=self.trace0, noise=self.noise,
                        sigma=sigma, alpha=self.alpha, n_features=self.d)
        if self.model == "gaussian":
            weights = "gaussian" if self.loss == "seq2seq" else "identity"
            out = seq2seq_output_side(self.T, self.nodes, weights=weights, **keywords)
        else:
            out = bartlett_output_side(self.T, self.nodes, task=self.loss, **keywords)
        prior = self.denoiser(out.m_hat, out.q_hat, out.sigma_hat,
                              t_hat=out.m_hat_identity)
        return out, prior

    def residual(self, x):
        self.n_calls += 1
        try:
            with np.errstate(all="ignore"):
                out, prior = self.evaluate(*self.from_x(x))
        except (ValueError, FloatingPointError, np.linalg.LinAlgError):
            return None    # an iterate outside the domain of the map
        new = (prior.m, prior.q, prior.sigma, prior.trace)
        if not (np.all(np.isfinite(new)) and prior.q > 0 and prior.sigma > 0):
            return None
        self.last, self.last_x = (out, prior), np.array(x, dtype=float)
        return self.to_x(*new) - x

    def state_at(self, x):
        """``(output side, prior)`` at x, or None outside the map's domain: the last
        evaluation's where it was at x (the solvers return the point they converged at, so
        a second evaluation there would repeat the first), else a new evaluation."""
        if self.last_x is None or not np.array_equal(self.last_x, x):
            if self.residual(x) is None:
                return None
        return self.last


def _check_finite_d_solve(problem, n_nodes, tol, max_iter, damping, random_state):
    """Checks shared by the seq2seq solvers: finite d, Gaussian tokens, solver options."""
    if problem.n_features is None:
        raise ValueError("n_features must be an integer d (or target a teacher): the seq2seq "
                         "correction is a finite-d effect.")
    if problem.token_kurtosis != 0.0:
        raise ValueError(f"token_kurtosis must be 0 (Gaussian tokens), got "
                         f"{problem.token_kurtosis}.")
    return (check_scalar_range(n_nodes, "n_nodes", low=16, integer=True),
            check_scalar_range(tol, "tol", low=0, low_inclusive=False),
            check_scalar_range(max_iter, "max_iter", low=1, integer=True),
            check_scalar_range(damping, "damping", low=0, high=1, low_inclusive=False),
            check_scalar_range(random_state, "random_state", low=0, high=2 ** 32 - 1,
                               integer=True))


def solve_seq2seq_state_evolution(alpha, problem=None, *, target=UNSET, n_tokens=UNSET,
                                  reg_lambda=UNSET, width_ratio=UNSET, noise=UNSET,
                                  n_features=UNSET, model="bartlett", loss="seq2seq",
                                  n_nodes=8192, tol=1e-7, max_iter=400, damping=0.5,
                                  init=None, random_state=0):
    """Finite-d seq2seq state evolution of factored linear attention (module docstring).

    Parameters
    ----------
    alpha : float
        ``n/d²`` > 0. ``model="gaussian"`` solves at
        :meth:`~skattn.theory.StateEvolutionProblem.effective_alpha`, as the seq2lab state
        evolution; ``model="bartlett"`` at α itself: its exact Gram matrix carries the
        token-norm fluctuations that α_eff stands in for (solved at α, its seq2lab loss
        reproduces the Gaussian state evolution at α_eff, and trained seq2seq models sit
        closer to it than to α_eff; docs: Theory §4, "Finite d"; docs: Changelog).
    problem : StateEvolutionProblem, optional
        Linear attention, factored, at finite d (``n_features`` or a teacher's own S0),
        Gaussian tokens. Its ``task`` is not used: the loss solved is the seq2seq one.
    target, n_tokens, reg_lambda, width_ratio, noise, n_features
        The model keywords of :func:`~skattn.theory.solve_state_evolution` instead of a
        problem (``target`` may be a teacher: its own S0 at its d).
    model : {"bartlett", "gaussian"}, default="bartlett"
        The output channel: the exact token Gram matrix (:func:`bartlett_output_side`) or the
        jointly Gaussian ``(w, g, ω)`` of :func:`seq2seq_output_side`.
    loss : {"seq2seq", "seq2lab"}, default="seq2seq"
        The training loss. ``model="gaussian", loss="seq2lab"`` is the finite-d seq2lab
        state evolution of :func:`~skattn.theory.solve_state_evolution`, node for node.
    n_nodes : int, default=8192
        Quasi-Monte-Carlo nodes.
    tol : float, default=1e-7
        Max-norm of the residual in ``(m/√Q0, log q, log Σ, t/√Q0)``.
    max_iter : int, default=400
        Evaluations of the map.
    damping : float in (0, 1], default=0.5
    init : StateEvolutionResult or Seq2seqStateEvolutionResult, optional
        A start (its ``m, q, sigma, trace``); default: the seq2lab fixed point of
        :func:`~skattn.theory.solve_state_evolution`.
    random_state : int, default=0
        Seeds the nodes (the same nodes as :func:`~skattn.theory.solve_state_evolution`
        with ``model="gaussian", loss="seq2lab"``).

    Returns
    -------
    Seq2seqStateEvolutionResult

    Raises
    ------
    ValueError
        For softmax attention, the direct parametrization, the continuum (no
        ``n_features``) or non-Gaussian tokens.
    """
    alpha = check_scalar_range(alpha, "alpha", low=0, low_inclusive=False)
    if problem is None and reg_lambda is UNSET:
        raise TypeError("solve_seq2seq_state_evolution() needs a problem or the keyword "
                        "'reg_lambda'.")
    problem = resolve_problem(problem, "solve_seq2seq_state_evolution", target=target,
                              n_tokens=n_tokens, reg_lambda=reg_lambda,
                              width_ratio=width_ratio, noise=noise, n_features=n_features,
                              attention="linear" if problem is None else UNSET)
    check_choice(model, "model", MODELS)
    check_choice(loss, "loss", ("seq2seq", "seq2lab"))
    if problem.attention != "linear":
        raise ValueError(f"attention must be 'linear' for the seq2seq state evolution, got "
                         f"{problem.attention!r}.")
    if problem.parametrization != "factored":
        raise ValueError(f"parametrization must be 'factored', got "
                         f"{problem.parametrization!r}.")
    n_nodes, tol, max_iter, damping, random_state = _check_finite_d_solve(
        problem, n_nodes, tol, max_iter, damping, random_state)
    if init is None:
        # the seq2lab fixed point: the start, and the identity-weights map's own fixed point
        init = solve_core(alpha, problem.replace(task="seq2lab"),
                          dict(n_nodes=n_nodes, tol=tol, random_state=random_state)).result
    elif not all(np.isfinite(getattr(init, k, np.nan)) for k in ("m", "q", "sigma", "trace")):
        raise TypeError(f"init must be a state-evolution result with finite m, q, sigma and "
                        f"trace, got {type(init).__name__}.")
    law, eig0 = problem.target_law(random_state)
    Q0, trace0 = float(np.mean(eig0 ** 2)), float(np.mean(eig0))
    T, d = problem.n_tokens, problem.n_features
    K = T * (T + 1) // 2
    nodes = GaussianNodes(_solver_node_dim(K, model, loss), n_points=n_nodes,
                          seed=random_state)
    denoiser = problem.denoiser(law, eig0)
    # the exact-Gram channel carries the token-norm fluctuations that α_eff stands in for
    # in the Gaussian model (docs: Theory §4, "seq2seq state evolution"): nominal α
    solved_alpha = problem.effective_alpha(alpha) if model == "gaussian" else alpha
    fp = _Seq2seqMap(solved_alpha, T, d, denoiser, Q0, trace0,
                     problem.noise, nodes, model, loss)
    x0 = fp.to_x(init.m, init.q, init.sigma, init.trace)
    x, res_norm, converged = robust_fixed_point(fp, x0, tol=tol, max_iter=max_iter,
                                                 damping=damping)
    m, q, sigma, t = fp.from_x(x)
    state = fp.state_at(x)                           # the output side at the returned point
    if state is None:
        raise ValueError(f"the seq2seq state evolution left its domain (model={model!r}, "
                         f"loss={loss!r}, residual {res_norm:.2e}); try a smaller damping.")
    out, prior = state
    signal, noise_part = _linear_test_error(T, m, q, Q0, problem.noise)
    return Seq2seqStateEvolutionResult(
        alpha=alpha, n_features=d, model=model, loss=loss, m=m, q=q, sigma=sigma, trace=t,
        m_hat=out.m_hat, m_hat_identity=out.m_hat_identity, q_hat=out.q_hat,
        sigma_hat=out.sigma_hat, Q0=Q0, trace0=trace0, s_error=Q0 - 2 * m + q,
        test_error=seq2seq_metric_factor(T, d) * signal + noise_part,
        seq2lab_test_error=signal + noise_part, train_error=out.train_error,
        train_objective=alpha * out.train_error + problem.reg_trace * t,
        converged=bool(converged), residual=float(res_norm), n_calls=fp.n_calls,
        eta=prior.eta, delta=prior.delta, epsilon=prior.epsilon,
        spectrum=denoiser.learned_spectrum(prior))

