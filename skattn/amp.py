"""Approximate message passing on data (docs: Theory §9): the theory as an estimator.

AMP iterates on the observed samples with the *same* channel (prox, g, Hessian) and
spectral denoiser as the state evolution, so a convention can only be wrong in one place.
Its fixed point satisfies the KKT conditions of factored ERM, which :func:`kkt_residual`
checks directly from the loss gradient (not from AMP's own quantities).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import check_scalar_range
from .theory.coords import h_from_u, u_from_h

__all__ = ["AMPResult", "amp", "kkt_residual", "sensing_components",
           "sensing_adjoint", "seq2seq_to_attention"]


@dataclass
class AMPResult:
    """Output of :func:`amp`: the estimate, its order parameters and convergence record.

    ``n_iter`` counts AMP iterations run (one update of Ŝ, Σ and the Onsager term each,
    at most ``max_iter``; an iteration that detects the collapse to Ŝ = 0 counts), and
    ``history`` holds the relative change of Ŝ at each of them.
    """

    S: np.ndarray
    sigma: float
    sigma_hat: float
    n_iter: int
    converged: bool
    kkt_residual: float
    message: str
    history: list


def sensing_components(X, S):
    """Normalised components ``u_μk(S) = ⟨A_μk, S⟩`` (docs: Theory §3), shape (n, K)."""
    d = X.shape[-1]
    XS = X @ S
    h = np.einsum("nai,nbi->nab", XS, X) / np.sqrt(d)
    h -= np.trace(S) / np.sqrt(d) * np.eye(X.shape[1])
    return u_from_h(h)


def sensing_adjoint(X, G):
    """``Σ_μ Σ_k G_μk A_μk`` as a d×d matrix, computed as one batched ``Xᵀ G X``.

    ``A_k = (x_a x_bᵀ + x_b x_aᵀ)/(2√d)`` (a < b) and ``(x_a x_aᵀ − I)/√(2d)`` (a = b).
    """
    n, T, d = X.shape
    Gm, shift = _adjoint_weights(G, T)
    GX = Gm @ X  # (n, T, d)
    out = X.reshape(n * T, d).T @ GX.reshape(n * T, d) / np.sqrt(d)
    out -= shift / np.sqrt(d) * np.eye(d)
    return (out + out.T) / 2


def _adjoint_weights(G, T):
    """T×T weights of ``Σ_k G_k A_k = Xᵀ Gm X/√d − shift·I/√d`` for each sample."""
    # h_from_u puts √2 G_k on the diagonal and G_k off it; rescale to the A_k weights
    Gm = h_from_u(G, T)
    diag = np.einsum("naa->na", Gm)
    Gm = Gm / 2.0
    idx = np.arange(T)
    Gm[:, idx, idx] = diag / 2.0  # √2 G_aa / 2 = G_aa/√2
    return Gm, float(np.sum(diag / 2.0))


def seq2seq_to_attention(X, y):
    """Recover the attention matrix from seq2seq outputs: ``A = y Xᵀ (X Xᵀ)⁻¹`` per sample.

    Exact for noiseless ``y = A X`` with T < d (the T×T Gram matrix is invertible).
    """
    gram = X @ np.swapaxes(X, 1, 2)
    return np.swapaxes(np.linalg.solve(gram, X @ np.swapaxes(y, 1, 2)), 1, 2)


class _NumpyOps:
    """The d×d linear algebra of one AMP iteration, in numpy."""

    def __init__(self, X):
        self.X = X

    def components(self, S):
        return sensing_components(self.X, S)

    def adjoint(self, G):
        return sensing_adjoint(self.X, G)

    @staticmethod
    def eigh(M):
        return np.linalg.eigh(M)


class _TorchOps(_NumpyOps):
    """The same operations in torch (float64) on ``device``: the GEMMs over all samples and
    the eigendecomposition run on the accelerator; the per-sample prox stays in numpy."""

    def __init__(self, X, device):
        import torch  # only here: the numpy path never imports torch

        self.torch = torch
        self.device = torch.device(device)
        self.X = X
        self.Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float64,
                                  device=self.device)
        n, T, d = X.shape
        self.n, self.T, self.d = n, T, d

    def components(self, S):
        torch = self.torch
        St = torch.as_tensor(S, dtype=torch.float64, device=self.device)
        XS = self.Xt @ St
        h = torch.einsum("nai,nbi->nab", XS, self.Xt) / np.sqrt(self.d)
        h = h - torch.trace(St) / np.sqrt(self.d) * torch.eye(self.T, dtype=torch.float64,
                                                               device=self.device)
        return u_from_h(h.cpu().numpy())

    def adjoint(self, G):
        torch = self.torch
        n, T, d = self.n, self.T, self.d
        Gm, shift = _adjoint_weights(G, T)
        Gt = torch.as_tensor(Gm, dtype=torch.float64, device=self.device)
        GX = (Gt @ self.Xt).reshape(n * T, d)
        out = (self.Xt.reshape(n * T, d).T @ GX / np.sqrt(d)).cpu().numpy()
        out -= shift / np.sqrt(d) * np.eye(d)
        return (out + out.T) / 2

    def eigh(self, M):
        torch = self.torch
        nu, vec = torch.linalg.eigh(torch.as_tensor(M, dtype=torch.float64,
                                                    device=self.device))
        return nu.cpu().numpy(), vec.cpu().numpy()


def _make_ops(X, device):
    if device is None:
        return _NumpyOps(X)
    if device == "auto":
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a dependency
            return _NumpyOps(X)
        device = "cuda" if torch.cuda.is_available() else None
        return _NumpyOps(X) if device is None else _TorchOps(X, device)
    if not (isinstance(device, str) and device.split(":")[0] in ("cpu", "cuda")):
        raise ValueError(f"device must be None, 'auto', 'cpu', 'cuda' or 'cuda:<index>', "
                         f"got {device!r}.")
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available.")
    return _TorchOps(X, device)


def _divergence(nu, f, sigma_hat):
    d = nu.size
    diff_nu = nu[:, None] - nu[None, :]
    diff_f = f[:, None] - f[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        dd = np.where(diff_nu != 0, diff_f / diff_nu, 0.0)
    np.fill_diagonal(dd, 0.0)
    return float(np.sum(dd) / d ** 2 + 2 * np.count_nonzero(f) / (sigma_hat * d ** 2))


def _threshold(M, reg_trace, sigma_hat, rank, eigh=np.linalg.eigh):
    nu, vec = eigh(M)
    f = np.maximum(nu - 2 * reg_trace, 0.0) / sigma_hat
    if np.count_nonzero(f) > rank:
        f[: nu.size - rank] = 0.0
    S = (vec * f) @ vec.T
    return (S + S.T) / 2, nu, f


def loss_gradient(channel, X, y, S, reg_trace):
    """Gradient in S of ``Σ_μ ℓ_μ(u_μ(S)) + λ̃ d Tr S``."""
    d = X.shape[-1]
    u = sensing_components(X, S)
    return sensing_adjoint(X, channel.grad(y, u)) + reg_trace * d * np.eye(d)


def direct_kkt_residual(channel, X, y, S, reg_lambda, sigma_hat):
    """Relative stationarity residual of direct ERM ``Σ_μ ℓ_μ + λ d ‖S‖²_F`` at ``S``.

    ``τ ‖∇L(S)‖_F / ‖S‖_F`` with AMP's step ``τ = 2/(d (Σ̂ + 4λ))``.
    """
    d = X.shape[-1]
    u = sensing_components(X, S)
    grad = sensing_adjoint(X, channel.grad(y, u)) + 2 * reg_lambda * d * S
    step = 2.0 / (d * (sigma_hat + 4 * reg_lambda))
    return float(step * np.linalg.norm(grad) / max(np.linalg.norm(S), 1e-300))


def kkt_residual(channel, X, y, S, reg_trace, sigma_hat):
    """Relative KKT residual of factored ERM at a PSD ``S``.

    ``‖S − P₊(S − τ ∇L(S))‖_F / ‖S‖_F`` with ``τ = 2/(d Σ̂)`` (AMP's own step), P₊ the
    projection on the PSD cone and ∇L the gradient of the trace-penalised objective. It is
    zero exactly when ``∇L`` lies in the normal cone of the PSD cone at S. At ``S = 0`` the
    norm is taken relative to ``τ ‖∇L(0)‖_F`` instead.
    """
    d = X.shape[-1]
    grad = loss_gradient(channel, X, y, S, reg_trace)
    step_size = 2.0 / (d * sigma_hat)
    step = S - step_size * grad
    nu, vec = np.linalg.eigh((step + step.T) / 2)
    proj = (vec * np.maximum(nu, 0.0)) @ vec.T
    norm = np.linalg.norm(S)
    if norm == 0:
        # ‖S‖ = 0 leaves nothing to be relative to: measure against the step's length
        norm = step_size * np.linalg.norm(grad)
    return float(np.linalg.norm(S - proj) / max(norm, 1e-300))


def _zero_fixed_point(channel, ops, y, reg_trace, d):
    """Whether ``S = 0`` (with σ = 0) is a fixed point of factored AMP; return it if so.

    Once the spectral threshold removes every eigenvalue, σ (the denoiser's divergence)
    is 0 and the iteration only decays towards ``S = 0``, σ = 0, where ``Σ̂ ∝ 1/σ`` would
    overflow. The limit σ → 0 of one AMP step at ``S = 0`` is explicit: ω = u(0), the
    prox is the identity, ``g = −∇ℓ(ω)`` and ``Σ̂ = (2/d²) Σ_μ Tr ∇²ℓ(ω_μ)``. ``S = 0`` is a
    fixed point exactly when the threshold maps that step to zero again, i.e. when every
    eigenvalue of ``M = (2/d) Σ_μ Σ_k g_μk A_μk`` is at most ``2λ̃`` — the KKT condition
    of the trace-penalised problem at ``S = 0``.

    Returns
    -------
    sigma_hat : float or None
        ``Σ̂`` at the fixed point, or None when ``S = 0`` is not one.
    """
    omega = ops.components(np.zeros((d, d)))
    M = -2.0 / d * ops.adjoint(channel.grad(y, omega))
    nu, _ = ops.eigh(M)
    if np.max(nu) > 2 * reg_trace:
        return None
    hess = channel.hessian(y, omega)
    return float(2.0 / d ** 2 * np.sum(np.trace(hess, axis1=1, axis2=2)))


def amp(channel, X, y, *, reg_trace, rank=None, max_iter=500, tol=1e-8, damping=0.5,
        S_init=None, parametrization="factored", device=None, verbose=0):
    """AMP for factored ERM with trace penalty ``λ̃`` on observed seq2lab data.

    Parameters
    ----------
    channel : SoftmaxChannel or LinearChannel
    X : ndarray of shape (n, T, d)
    y : ndarray of shape (n, T, T)
        Attention-matrix labels (convert seq2seq outputs with :func:`seq2seq_to_attention`).
    reg_trace : float
        λ̃ = √κ λ ≥ 0.
    rank : int or None
        Keep at most this many non-zero eigenvalues (p); None for no constraint.
    max_iter, tol : int, float
        Stop when the relative change of Ŝ falls below ``tol``.
    damping : float in (0, 1]
        Weight of the new iterate.
    S_init : ndarray, optional
        Warm start for Ŝ.
    device : None, "auto", "cpu", "cuda" or "cuda:<index>", default=None
        None runs in numpy. Otherwise the products over all samples and the
        eigendecomposition run in torch (float64) on that device ("auto": CUDA if
        available, else numpy); the per-sample prox always runs in numpy.
    parametrization : {"factored", "direct"}, default="factored"
        "direct" replaces the spectral threshold by the ridge denoiser of docs: Theory §5,
        ``Ŝ = M/(Σ̂ + 4λ)``, for the objective ``Σ ℓ + λ‖V‖²_F``; ``reg_trace`` is then λ.
    verbose : int, default=0
        0: silent; 1: a progress bar with no total (AMP stops when it converges): the
        iterations done, the elapsed time and the relative change of S; 2: also one log
        line per iteration (see :mod:`skattn._progress`).

    Returns
    -------
    AMPResult
    """
    n, T, d = X.shape
    reg_trace = check_scalar_range(reg_trace, "reg_trace", low=0)
    damping = check_scalar_range(damping, "damping", low=0, high=1, low_inclusive=False)
    rank = d if rank is None else int(rank)
    ops = _make_ops(X, device)
    if parametrization not in ("factored", "direct"):
        raise ValueError(f"parametrization must be 'factored' or 'direct', got "
                         f"{parametrization!r}.")
    S = np.eye(d) * 1e-3 if S_init is None else np.array(S_init, dtype=float)
    sigma = 1.0
    g_old = np.zeros((n, channel.K))
    start = channel.fit_logits(y)
    history, converged, it = [], False, 0
    sigma_hat = 1.0
    from ._progress import finish_progress, iteration_bar, log_step
    bar = iteration_bar(verbose, "AMP")  # no total: AMP stops when it converges
    for it in range(1, max_iter + 1):
        omega = ops.components(S) - sigma * g_old
        z = channel.prox(y, omega, sigma, start=start)
        g = (z - omega) / sigma
        H = channel.hessian(y, z)
        I = np.eye(channel.K)
        tr = np.trace(I - np.linalg.inv(I + sigma * H), axis1=1, axis2=2)
        sigma_hat_new = 2.0 / d ** 2 * np.sum(tr) / sigma
        M = 2.0 / d * ops.adjoint(g) + sigma_hat_new * S
        if parametrization == "direct":
            S_new = M / (sigma_hat_new + 4 * reg_trace)
            sigma_new = 1.0 / (sigma_hat_new + 4 * reg_trace)
        else:
            S_new, nu, f = _threshold(M, reg_trace, sigma_hat_new, rank, eigh=ops.eigh)
            sigma_new = _divergence(nu - 2 * reg_trace, f, sigma_hat_new)
            if not np.any(f):
                zero_sigma_hat = _zero_fixed_point(channel, ops, y, reg_trace, d)
                if zero_sigma_hat is not None:  # a legitimate collapse, not a divergence
                    history.append(1.0 if np.any(S) else 0.0)  # relative change to 0
                    bar.update(1)
                    S, sigma, sigma_hat = np.zeros((d, d)), 0.0, zero_sigma_hat
                    converged = True
                    break
        change = np.linalg.norm(S_new - S) / max(np.linalg.norm(S_new), 1e-300)
        S = damping * S_new + (1 - damping) * S
        sigma = damping * sigma_new + (1 - damping) * sigma
        sigma_hat = sigma_hat_new
        g_old = damping * g + (1 - damping) * g_old
        history.append(float(change))
        bar.update(1)
        bar.set_postfix(change=f"{change:.2e}")
        log_step(verbose, f"AMP iteration {it}: relative change of S = {change:.2e}")
        if not np.all(np.isfinite(S)) or not np.isfinite(sigma):
            bar.close()
            raise FloatingPointError("AMP diverged (non-finite iterate); increase damping "
                                     "towards 0 (e.g. damping=0.2) or reg_lambda.")
        if change < tol:
            converged = True
            break
    finish_progress(bar, completed=converged)
    if parametrization == "direct":
        res = direct_kkt_residual(channel, X, y, S, reg_trace, sigma_hat)
    else:
        res = kkt_residual(channel, X, y, S, reg_trace, sigma_hat)
    if converged and not np.any(S):
        msg = "converged to S = 0 (every eigenvalue below the threshold)"
    else:
        msg = "converged" if converged else f"relative change {history[-1]:.2e} > tol after {it} iterations"
    return AMPResult(S=S, sigma=sigma, sigma_hat=sigma_hat, n_iter=it, converged=converged,
                     kkt_residual=res, message=msg, history=history)
