"""Finite-d state evolution with token leverage: linear attention, one token (docs: Theory §4,
"Token leverage").

With one token the pre-activation is ``h(S) = ⟨S, X⟩`` with the rank-one sensing matrix
``X = (x xᵀ − I)/√d``. The Gaussian state evolution treats ``X`` as a GOE matrix with the
same covariance. In the cavity (leave-one-out) form of the fixed point one per-sample
quantity differs between the two: the leverage ``V_μ = ⟨X_μ, 𝒥[X_μ]⟩ / V̂`` of sample μ
under the Jacobian 𝒥 of the spectral denoiser. For a GOE design it concentrates on its mean
V. For rank-one tokens it is a quartic form in x whose relative spread is of order
``1/√d`` at finite d (0.40 at d = 60). The channel's conjugates are then averages over the
token, taken jointly with the cavity residual ``e_μ = ⟨X_μ, S0 − Ŝ⟩ + √Δ ξ`` of the same x
and weighted by the sample's squared norm ``ν_μ = ‖X_μ‖²_F / E‖X‖²_F`` (its weight in the
precision ``Σ_μ a_μk²/(1 + V_μ)`` of a coordinate, averaged over the coordinates; exact for
an elliptical design):

    V̂ = α d E[ν_μ/(1 + V_μ)],    τ² = α d E[ν_μ e_μ²/(1 + V_μ)²] / V̂².

The prior side is the finite-d spectral denoiser ``Ŝ = (S0 + τ W/√2 − θ I)₊`` with
``θ = λ d/(4 V̂)`` and W a GOE matrix (off-diagonal variance 1/2), averaged over draws of W;
``V = div Ŝ/(d V̂)``, the divergence over the ``d(d + 1)/2`` free entries (Daleckii–Krein).
Both averages use fixed draws (common random numbers), so the map is deterministic and the
damped Anderson iteration of :mod:`~skattn.theory.core.iteration` applies.

With ``V_μ = V``, ``ν_μ = 1`` and ``e_μ²`` replaced by its mean the same equations are
the finite-d Gaussian state evolution; :func:`solve_token_state_evolution` solves both, on
the same draws, so that their ratio isolates the effect of the token structure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_random_state_arg, check_scalar_range
from .denoisers import relu_divided_differences
from .core.iteration import robust_fixed_point
from .problem import DomainWarning, StateEvolutionProblem, is_teacher
from .._warnings import warn

__all__ = ["TokenStateEvolutionResult", "solve_token_state_evolution"]

_N_BATCHES = 4
#: Weight decays below this are outside the validated domain (validated at λ = 0.05).
_MIN_VALIDATED_LAMBDA = 0.01
#: Below this d the leverage's relative spread passes 0.5 and the fixed point is no longer a
#: small correction (at d = 16 it did not converge; docs: Changelog).
_MIN_VALIDATED_D = 40


@dataclass
class TokenStateEvolutionResult:
    """Fixed point of the token-leverage state evolution (linear attention, T = 1).

    Attributes
    ----------
    alpha, reg_lambda, noise : float
        The problem (``n = α d²`` samples, weight decay λ, label-noise variance Δ).
    n_features : int
        d.
    test_error : float
        Predicted ``E(y − ŷ)² = 2‖Ŝ − S0‖²_F/d + Δ`` on rank-one tokens.
    train_error : float
        Predicted mean squared training residual ``E[e_μ²/(1 + V_μ)²]``.
    gaussian_test_error : float
        The same finite-d equations with a concentrated leverage (a GOE design), on the same
        draws of the denoiser's noise.
    token_correction : float
        ``test_error / gaussian_test_error − 1``: the effect of the token structure.
    leverage_spread : float
        Relative standard deviation of ``V_μ`` over tokens at the fixed point.
    width_ratio : float
        κ = p/d of the student; the threshold uses the trace penalty ``√κ λ``.
    rank_fraction : float
        The largest ``rank(Ŝ)/d`` over the draws at the fixed point; above κ the rank cap
        would bind (not modelled: a DomainWarning).
    mc_standard_error : float
        Monte Carlo standard error of ``test_error``: the spread of the fixed points solved
        on four disjoint batches of the draws, over √4 (not a finite-size error).
    converged : bool
    n_iter : int
        Evaluations of the fixed-point map, both solves together.
    message : str
    residual : float
        ``max |map(x) − x|`` at the returned point, in the solver's log coordinates.
    """

    alpha: float
    reg_lambda: float
    noise: float
    n_features: int
    test_error: float
    train_error: float
    gaussian_test_error: float
    token_correction: float
    leverage_spread: float
    width_ratio: float
    rank_fraction: float
    mc_standard_error: float
    converged: bool
    n_iter: int
    message: str
    residual: float


def _goe(d, rng):
    """GOE with off-diagonal variance 1/2 and diagonal variance 1."""
    g = rng.standard_normal((d, d))
    return (g + g.T) / 2.0


def _spectral_threshold(Y, threshold):
    """``Ŝ = (Y − θ I)₊`` on the eigenvalues, its eigenvectors, and the divided differences.

    Returns ``(S, U, gamma, divergence)``: ``gamma[i, j]`` is the Daleckii–Krein weight
    ``(f(ν_i) − f(ν_j))/(ν_i − ν_j)`` (``f′(ν_i)`` on the diagonal) in the eigenbasis U of Y,
    and ``divergence = Σ_i f′(ν_i) + Σ_{i<j} gamma_ij`` is the trace of the Jacobian on
    symmetric matrices.
    """
    nu, U = np.linalg.eigh(Y)
    f = np.maximum(nu - threshold, 0.0)
    gamma = relu_divided_differences(nu - threshold)
    divergence = np.trace(gamma) + np.triu(gamma, 1).sum()
    return (U * f) @ U.T, U, gamma, float(divergence)


def _control_variate_mean(values, controls):
    """Mean of ``values`` with the mean-zero ``controls`` regressed out (least squares)."""
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(controls))):
        return float("nan")
    centred = controls - controls.mean(axis=0)
    coef = np.linalg.lstsq(centred, values - values.mean(), rcond=None)[0]
    return float(values.mean() - controls.mean(axis=0) @ coef)


class _TokenMap:
    """The fixed-point map in ``x = (log τ², log V̂)``, on fixed draws."""

    def __init__(self, S0, alpha, reg_lambda, noise, seeds, n_tokens_mc, gaussian):
        self.S0, self.alpha, self.reg_lambda, self.noise = S0, alpha, reg_lambda, noise
        self.d = S0.shape[0]
        self.seeds, self.n_tokens_mc = seeds, n_tokens_mc
        self.gaussian = gaussian
        self.n_calls = 0

    def _draws(self):
        """``(W, tokens, label noise)`` of each draw, regenerated from its seed: the same
        numbers at every evaluation (common random numbers) in O(n_tokens_mc · d) memory."""
        for seed in self.seeds:
            rng = np.random.default_rng(seed)
            W = _goe(self.d, rng)
            if self.gaussian:
                yield W, None, None
            else:
                yield (W, rng.standard_normal((self.n_tokens_mc, self.d)),
                       rng.standard_normal(self.n_tokens_mc))

    def evaluate(self, x):
        """Per-draw ``(test error, E ν/(1+V_μ), E ν e²/(1+V_μ)², spread of V_μ,
        E e²/(1+V_μ)², rank(Ŝ)/d)``."""
        d, S0 = self.d, self.S0
        tau2, v_hat = np.exp(x)
        rows = []
        for W, tokens, xi in self._draws():
            S, U, gamma, divergence = _spectral_threshold(
                S0 + np.sqrt(tau2 / 2.0) * W, self.reg_lambda * d / (4.0 * v_hat))
            leverage = divergence / (d * v_hat)
            rank_fraction = float(np.trace(gamma)) / d    # γ_ii = 1 on the active eigenvalues
            error = S0 - S
            test_error = 2.0 * np.sum(error ** 2) / d + self.noise
            if self.gaussian:
                rows.append((test_error, 1.0 / (1.0 + leverage),
                             test_error / (1.0 + leverage) ** 2, 0.0,
                             test_error / (1.0 + leverage) ** 2, rank_fraction))
                continue
            # V_μ ∝ Σ_ij γ_ij X̃_ij² with X̃ = Uᵀ X U = (x̃ x̃ᵀ − I)/√d, x̃ = Uᵀ x; its mean over
            # tokens is V (E X̃_ij² = (1 + δ_ij)/d, as for a GOE matrix)
            xt2 = (tokens @ U) ** 2
            diag = np.diag(gamma)
            quartic = (np.einsum("mi,mi->m", xt2 @ gamma, xt2) - 2.0 * xt2 @ diag
                       + diag.sum()) / d
            mean_quartic = (gamma.sum() + diag.sum()) / d
            leverages = leverage * quartic / mean_quartic
            residual = ((np.einsum("mi,mi->m", tokens @ error, tokens) - np.trace(error))
                        / np.sqrt(d) + np.sqrt(self.noise) * xi)
            # ν_μ = ‖X_μ‖²_F / E‖X‖²_F: the sample's weight in the precision Σ_μ a_μk²/(1 + V_μ),
            # averaged over the coordinates k (exact for an elliptical design)
            norms = np.sum(tokens ** 2, axis=1)
            weights = (norms ** 2 - 2.0 * norms + d) / (d * (d + 1.0))
            # control variates with exactly known means (E quartic, E e² = test error, E ν = 1)
            # remove the first-order Monte Carlo noise, which the fixed point amplifies near
            # the interpolation threshold (V̂ is a small difference there)
            controls = np.column_stack([quartic / mean_quartic - 1.0,
                                        residual ** 2 / test_error - 1.0, weights - 1.0])
            rows.append((test_error,
                         _control_variate_mean(weights / (1.0 + leverages), controls),
                         _control_variate_mean(weights * residual ** 2 / (1.0 + leverages) ** 2,
                                               controls),
                         np.std(quartic) / mean_quartic,
                         _control_variate_mean(residual ** 2 / (1.0 + leverages) ** 2, controls),
                         rank_fraction))
        return np.array(rows)

    def residual(self, x):
        self.n_calls += 1
        if not np.all(np.isfinite(x)):
            return None
        with np.errstate(all="ignore"):
            try:
                rows = self.evaluate(x)
            except np.linalg.LinAlgError:  # an eigensolver fed non-finite entries
                return None
        if not np.all(np.isfinite(rows)):
            return None
        inverse, weighted = rows[:, 1].mean(), rows[:, 2].mean()
        v_hat = self.alpha * self.d * inverse
        tau2 = self.alpha * self.d * weighted / v_hat ** 2
        if not (v_hat > 0 and tau2 > 0):
            return None
        return np.log([tau2, v_hat]) - x


def _solve_map(fixed_point_map, x0, tol, max_iter):
    x, norm, converged = robust_fixed_point(fixed_point_map, x0, tol=tol, max_iter=max_iter,
                                            damping=0.5)
    rows = fixed_point_map.evaluate(x)
    return x, rows, norm, converged


def solve_token_state_evolution(alpha, *, target, reg_lambda, width_ratio=1.0, n_draws=64,
                                n_tokens_mc=4000, random_state=0, tol=1e-5, max_iter=300):
    """Finite-d prediction for factored linear attention on one token, with token leverage.

    The same-instance prediction of :func:`~skattn.theory.solve_state_evolution` assumes a
    Gaussian design. On rank-one tokens trained models sit above it by about ``5/d``
    relative (docs: Where the predictions hold); this solver models that excess through the per-sample
    leverage (module docstring, docs: Theory §4, "Token leverage").

    Parameters
    ----------
    alpha : float
        Samples per d²: ``n = α d²``; in (0, 100].
    target : AttentionIndexedModel
        The teacher (duck-typed: ``S0_``, ``n_tokens``, ``noise``, ``attention``,
        ``n_features``); it must have one token, linear attention, one head and Gaussian
        tokens. Its own S0 and label noise are used.
    reg_lambda : float
        Weight decay λ of the factored estimator; > 0.
    width_ratio : float, default=1.0
        κ = p/d of the student ``W ∈ R^{d×p}``, > 0. A width whose rank cap does not bind
        has the full-width minimiser at the trace penalty ``λ̃ = √κ λ`` (docs: Theory §2);
        a binding cap (``rank(Ŝ) > κ d`` at the fixed point) is not modelled and warns.
    n_draws : int, default=64
        Draws of the denoiser's GOE noise (each with its own tokens); at least 8. The
        Monte Carlo error is estimated from four disjoint batches of them.
    n_tokens_mc : int, default=4000
        Tokens per draw for the channel averages.
    random_state : int, RandomState instance or None, default=0
        Seed of the draws (fixed draws: common random numbers across iterations).
    tol : float, default=1e-5
        Convergence of the fixed point in ``(log τ², log V̂)`` (the active set makes the map
        piecewise smooth; 1e-5 is far below the Monte Carlo error of about 1 %).
    max_iter : int, default=300
        Evaluations of the map per solve (Gaussian, then tokens).

    Returns
    -------
    TokenStateEvolutionResult

    Warns
    -----
    DomainWarning
        If ``reg_lambda < 0.01`` (next to the interpolation threshold at small λ it
        over-predicts trained models), if the teacher is noiseless and ``alpha`` is below
        its perfect-recovery threshold (there it under-predicts them), if d < 40, or if the
        rank cap of ``width_ratio < 1`` binds at the fixed point; docs: Where the predictions hold.

    Raises
    ------
    TypeError
        If ``target`` is not a teacher.
    ValueError
        If ``target`` does not have one token, linear attention and Gaussian tokens, or an
        argument is out of range.
    """
    if not is_teacher(target):
        raise TypeError("target must be a teacher (an AttentionIndexedModel, with S0_, "
                        f"n_tokens, noise, attention, n_features), got {type(target).__name__}.")
    if int(target.n_tokens) != 1 or target.attention != "linear":
        raise ValueError("target must have n_tokens=1 and attention='linear' (the token-"
                         f"leverage solver is for one token), got n_tokens={target.n_tokens}, "
                         f"attention={target.attention!r}.")
    if getattr(target, "n_heads", 1) != 1 or getattr(target, "token_covariance", None) \
            is not None or getattr(target, "token_distribution", "gaussian") != "gaussian":
        raise ValueError("target must have one head and isotropic Gaussian tokens "
                         "(n_heads=1, token_covariance=None, token_distribution='gaussian').")
    alpha = check_scalar_range(alpha, "alpha", low=0, low_inclusive=False, high=100)
    reg_lambda = check_scalar_range(reg_lambda, "reg_lambda", low=0, low_inclusive=False)
    width_ratio = check_scalar_range(width_ratio, "width_ratio", low=0, low_inclusive=False)
    n_draws = check_scalar_range(n_draws, "n_draws", low=2 * _N_BATCHES, integer=True)
    n_tokens_mc = check_scalar_range(n_tokens_mc, "n_tokens_mc", low=100, integer=True)
    tol = check_scalar_range(tol, "tol", low=0, low_inclusive=False)
    max_iter = check_scalar_range(max_iter, "max_iter", low=1, integer=True)
    S0 = np.asarray(target.S0_, dtype=float)
    d = int(target.n_features)
    if S0.shape != (d, d) or not np.all(np.isfinite(S0)):
        raise ValueError(f"target.S0_ must be a finite ({d}, {d}) matrix, got shape {S0.shape}.")
    noise = float(target.noise)
    if d < _MIN_VALIDATED_D:
        warn(f"n_features={d} is below {_MIN_VALIDATED_D}: the token-leverage state "
             "evolution is validated from d = 40 on (below, the leverage spreads by more "
             "than half its mean and the fixed point may not be found; "
             "docs: Where the predictions hold).",
             DomainWarning)
    if reg_lambda < _MIN_VALIDATED_LAMBDA:
        # the λ scan next to α_interp: docs: Validation report, "Linear attention at finite d"
        warn(f"reg_lambda={reg_lambda:g} is below {_MIN_VALIDATED_LAMBDA:g}: next to "
             "the interpolation threshold at small λ the token-leverage state "
             "evolution over-predicts trained models, more so the smaller λ; the leverage "
             "mixture of solve_state_evolution is closer there "
             "(docs: Where the predictions hold; Validation report).", DomainWarning)
    if noise == 0:
        from .problem import _teacher_law
        from .thresholds import perfect_recovery_threshold
        alpha_perf = perfect_recovery_threshold(target=_teacher_law(target), n_tokens=1,
                                                attention="linear", n_features=d)
        if alpha < alpha_perf:
            # the α scan across α_perf and the lin T1 κ = 0.75 grid row: docs: Validation
            # report, "Linear attention at finite d"
            warn(f"alpha={alpha:g} is below the perfect-recovery threshold "
                 f"{alpha_perf:.3g} of this noiseless teacher: there the token-leverage "
                 "state evolution under-predicts trained models and the Gaussian one is "
                 "closer (docs: Where the predictions hold; Validation report).",
                 DomainWarning)
    rng = check_random_state_arg(random_state)
    seeds = np.random.SeedSequence(int(rng.randint(0, 2 ** 31 - 1))).spawn(n_draws)
    x0 = np.log([1.0 / (alpha * d), alpha * d / 20.0])

    # an inactive cap is the full-width problem at the shared trace penalty λ̃ = √κ λ
    trace_penalty = StateEvolutionProblem.from_teacher(
        target, reg_lambda=reg_lambda, width_ratio=width_ratio).reg_trace

    def token_map(index, gaussian):
        return _TokenMap(S0, alpha, trace_penalty, noise, [seeds[i] for i in index],
                         n_tokens_mc, gaussian)

    # Gaussian first (cheap, and the start of the token solve), then tokens, on all draws
    gaussian_map, full_map = token_map(range(n_draws), True), token_map(range(n_draws), False)
    x_gauss, rows_gauss, norm_gauss, ok_gauss = _solve_map(gaussian_map, x0, tol, max_iter)
    x_tok, rows, norm_tok, ok_tok = _solve_map(full_map, x_gauss, tol, max_iter)
    norm, ok = max(norm_gauss, norm_tok), ok_gauss and ok_tok
    n_iter = gaussian_map.n_calls + full_map.n_calls
    # the Monte Carlo error: the spread of the token fixed points solved on disjoint batches
    # of the draws, each started from the full one (the fixed point amplifies the noise of
    # the averages, so the per-draw spread at one fixed point would understate it)
    batch_errors = []
    for index in np.array_split(np.arange(n_draws), _N_BATCHES):
        batch_map = token_map(index, False)
        _, rows_b, _, ok_b = _solve_map(batch_map, x_tok, tol, max_iter)
        n_iter += batch_map.n_calls
        if ok_b:
            batch_errors.append(rows_b[:, 0].mean())
    mc_standard_error = (float(np.std(batch_errors, ddof=1) / np.sqrt(len(batch_errors)))
                         if len(batch_errors) > 1 else float("inf"))
    converged = bool(ok)
    message = "converged" if converged else (
        f"not converged: residual {norm:.2e} > tol {tol:.1e} after "
        f"{max_iter} evaluations per solve; raise max_iter")
    test_error = float(rows[:, 0].mean())
    gaussian_test_error = float(rows_gauss[:, 0].mean())
    rank_fraction = float(rows[:, 5].max())
    if rank_fraction > width_ratio:
        warn(f"width_ratio={width_ratio:g}: the rank cap binds at the fixed point "
             f"(rank(Ŝ)/d up to {rank_fraction:.2f}); the token-leverage state "
             "evolution models the full-width minimiser only, so this is not a "
             "prediction for the capped student (solve_state_evolution has the "
             "capped prior).", DomainWarning)
    return TokenStateEvolutionResult(
        alpha=alpha, reg_lambda=reg_lambda, noise=noise, n_features=d,
        test_error=test_error, train_error=float(rows[:, 4].mean()),
        gaussian_test_error=gaussian_test_error,
        token_correction=test_error / gaussian_test_error - 1.0,
        leverage_spread=float(rows[:, 3].mean()), width_ratio=width_ratio,
        rank_fraction=rank_fraction,
        mc_standard_error=mc_standard_error,
        converged=converged, n_iter=n_iter, message=message,
        residual=float(norm))
