"""Optimisation of the ERM objective ``Σ_μ ℓ_μ + λ · penalty`` (docs: Theory §2).

:func:`train` runs Adam (full batch or minibatch) or torch's L-BFGS with a strong-Wolfe
line search on a module of :mod:`skattn.nn.modules`, stopping when the relative change
of the objective stays below ``tol`` for ``n_iter_no_change`` consecutive iterations.

Stopping is not convergence: a step size that has collapsed (Adam after many ``lr_decay``
shrinks, an L-BFGS line search that fails) also stops the objective from changing. A run
counts as converged only when, at the parameters it returns, the *relative gradient norm*

    ``r = ‖∇L(θ)‖ · max(‖θ‖, ‖θ₀‖) / max(|L(θ₀)|, |L(θ)|)``

is at most ``gtol`` (default ``10·√tol``). ``r`` is the first-order change of the objective,
relative to its scale, under a relative change of order one of the parameters; it is
invariant to rescaling the objective. Near a minimum ``L − L* ≈ ½ gᵀH⁻¹g``, so an objective
settled to a relative ``tol`` leaves ``r`` of order ``√tol``; the factor 10 is slack for the
conditioning. On the test problems it separates fits that reach the L-BFGS minimum from
Adam runs stuck far from it by more than three decades (docs: Changelog).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
from .._progress import finish_progress, iteration_bar, log_step
from .._validation import check_random_state_arg as check_random_state

__all__ = ["TrainingDivergedError", "TrainingResult", "train", "SOLVERS"]

SOLVERS = ("adam", "lbfgs")

# Line-search evaluations allowed per L-BFGS iteration (torch's own default).
_LBFGS_MAX_LS = 25
_LBFGS_HISTORY = 20
_CHUNK_MIN = 8192  # samples per chunk of a full-batch pass (bounds peak memory)


class TrainingDivergedError(ValueError, ArithmeticError):
    """The objective became NaN or infinite during training.

    The parameters are restored to the last iterate with a finite objective before this is
    raised; ``result`` holds the :class:`TrainingResult` up to that iterate.
    """

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


@dataclass
class TrainingResult:
    """Outcome of :func:`train`.

    Attributes
    ----------
    objective_history : ndarray of shape (n_iter,)
        Objective ``Σ_μ ℓ_μ + λ·penalty`` (a sum over the full training set) after each
        iteration (an iteration is one step for full-batch Adam and L-BFGS, one epoch for
        minibatch Adam).
    initial_objective : float
        Objective at the initial parameters.
    objective : float
        Final objective.
    data_loss : float
        Final ``Σ_μ ℓ_μ``.
    n_samples : int
    n_iter : int
        Optimiser iterations run, ``len(objective_history)``: L-BFGS steps (each a
        strong-Wolfe line search of up to 26 objective evaluations), full-batch Adam steps,
        or minibatch-Adam epochs. Objective evaluations are counted by ``n_evaluations``.
    converged : bool
        True when the run stopped on the objective-change rule *and* the relative gradient
        norm at the returned parameters is at most ``gtol`` (see the module docstring).
    solver : str
    n_evaluations : int
        Objective-and-gradient evaluations over the full data set (minibatch steps count
        as fractions).
    relative_gradient_norm : float
        ``r`` at the returned parameters (NaN when training diverged).
    message : str
        Why training stopped, in words.
    """

    objective_history: np.ndarray
    initial_objective: float
    objective: float
    data_loss: float
    n_samples: int
    n_iter: int
    converged: bool
    solver: str
    n_evaluations: float = 0.0
    relative_gradient_norm: float = float("nan")
    message: str = ""

    @property
    def train_error(self):
        """Mean per-sample loss ``(1/n) Σ_μ ℓ_μ``."""
        return self.data_loss / self.n_samples


def _snapshot(params):
    return [p.detach().clone() for p in params]


def _restore(params, snapshot):
    with torch.no_grad():
        for p, s in zip(params, snapshot):
            p.copy_(s)


def _norm(params):
    with torch.no_grad():
        return math.sqrt(sum(float(torch.sum(p * p)) for p in params))


def _gradient_norm(objective_and_grad, params):
    objective_and_grad()
    norm = math.sqrt(sum(float(torch.sum(p.grad * p.grad)) for p in params))
    for p in params:
        p.grad = None
    return norm


def _divergence_message(solver, it, lr, dtype):
    hints = []
    if solver == "adam":
        hints.append(f"lower learning_rate_init (currently {lr:g})")
    if dtype != torch.float64:
        hints.append("use dtype='float64'")
    hints.append("increase reg_lambda")
    if solver == "adam":
        hints.append("or try solver='lbfgs'")
    else:
        hints.append("or try solver='adam' with a small learning_rate_init")
    return (f"Training diverged at iteration {it}: the objective became NaN or infinite. "
            f"The parameters were restored to the last iterate with a finite objective. "
            f"To fix it: {', '.join(hints)}.")


def train(module, X, y, *, reg_lambda=0.0, solver="lbfgs", learning_rate_init=0.1,
          max_iter=5000, tol=1e-6, n_iter_no_change=10, batch_size=None,
          random_state=None, verbose=0, lr_decay=0.7, gtol=None, callback=None):
    """Minimise ``Σ_μ ℓ_μ + reg_lambda · module.penalty()`` in place.

    Parameters
    ----------
    module : FactoredAttention or DirectAttention
        Its parameters are the starting point and are updated in place.
    X : Tensor of shape (n_samples, n_tokens, n_features)
    y : Tensor of shape (n_samples, n_tokens, n_tokens or n_features)
        On the module's device and dtype.
    reg_lambda : float, default=0.0
        λ ≥ 0 (weight decay on the sum objective).
    solver : {"adam", "lbfgs"}, default="lbfgs"
    learning_rate_init : float, default=0.1
        Adam's step size (ignored by L-BFGS, which uses a unit initial step and a
        strong-Wolfe line search).
    max_iter : int, default=5000
        Maximum number of iterations (epochs for minibatch Adam).
    tol : float, default=1e-6
        Stop when ``|L_k − L_{k−1}| / |L_{k−1}| < tol`` for ``n_iter_no_change``
        consecutive iterations.
    n_iter_no_change : int, default=10
    batch_size : int or None, default=None
        Minibatch size for Adam (None: full batch). The data term of a minibatch is scaled
        by ``n / batch`` so each step targets the full-sum objective. L-BFGS always uses
        the full batch.
    random_state : int, RandomState or None
        Seeds the minibatch order.
    verbose : int, default=0
        0: silent; 1: a tqdm bar with no total (``max_iter`` is a cap, not the length of
        the run): the iterations done, the elapsed time, the current objective / d² and
        its relative change; 2: also one log line per iteration (see
        :mod:`skattn._progress`).
    lr_decay : float, default=0.7
        Adam's step size is multiplied by ``lr_decay`` whenever the full objective
        increases from one iteration to the next (1.0 disables it). Adam also returns the
        best iterate seen, not the last.
    gtol : float or None, default=None
        Largest relative gradient norm (module docstring) at which a run that stopped
        counts as converged; None means ``10 * sqrt(tol)``.
    callback : callable or None, default=None
        Called as ``callback(iteration, module, objective)`` after each iteration (1-based)
        with the module at the new parameters and their objective, e.g. a
        :class:`skattn.nn.HistoryRecorder`. None calls nothing.

    Returns
    -------
    result : TrainingResult

    Raises
    ------
    TrainingDivergedError
        If the objective becomes NaN or infinite; the module keeps the last parameters
        with a finite objective.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {list(SOLVERS)}, got {solver!r}.")
    if gtol is None:
        gtol = 10.0 * math.sqrt(tol)
    elif (isinstance(gtol, bool) or not isinstance(gtol, numbers.Real)
          or not 0 < gtol < math.inf):
        raise ValueError(f"gtol must be a positive float or None, got {gtol!r}.")
    params = [p for p in module.parameters() if p.requires_grad]
    n = X.shape[0]
    d = module.n_features
    lam = float(reg_lambda)
    full_batch = solver == "lbfgs" or batch_size is None or batch_size >= n
    rng = check_random_state(random_state)
    n_evals = 0.0

    # Full-batch passes run over chunks of samples, each with its own backward (gradients
    # accumulate): the per-sample activations XW and their gradients then never exist for
    # all n at once, which keeps the peak memory of fit near the size of X.
    chunk = n if n <= _CHUNK_MIN else max(_CHUNK_MIN, -(-n // 4))

    def objective_and_grad():
        for p in params:
            p.grad = None
        total = 0.0
        for start in range(0, n, chunk):
            part = module.data_loss(X[start:start + chunk], y[start:start + chunk])
            part.backward()
            total += part.detach()
        pen = lam * module.penalty()
        pen.backward()
        return total + pen.detach()

    def full_objective(with_grad):
        nonlocal n_evals
        n_evals += 1
        if with_grad:
            return float(objective_and_grad())
        with torch.no_grad():
            data = sum(module.data_loss(X[s:s + chunk], y[s:s + chunk])
                       for s in range(0, n, chunk))
            return float(data + lam * module.penalty())

    initial_norm = _norm(params)
    history = []
    stopped = False  # the objective-change rule was met (convergence is decided after)
    no_change = 0
    last_good = _snapshot(params)

    def diverged(it):
        _restore(params, last_good)
        with torch.no_grad():
            data = sum(module.data_loss(X[s:s + chunk], y[s:s + chunk]).item()
                       for s in range(0, n, chunk))
        hist = np.asarray(history, dtype=float)
        res = TrainingResult(hist, initial, hist[-1] if len(hist) else initial, data, n,
                             len(hist), False, solver, n_evals,
                             message=f"diverged at iteration {it}")
        return TrainingDivergedError(
            _divergence_message(solver, it, learning_rate_init, X.dtype), res)

    if solver == "adam":
        opt = torch.optim.Adam(params, lr=learning_rate_init)
        initial = full_objective(with_grad=full_batch)
    else:
        opt = torch.optim.LBFGS(params, lr=1.0, max_iter=1, max_eval=1 + _LBFGS_MAX_LS,
                                history_size=_LBFGS_HISTORY, line_search_fn="strong_wolfe",
                                tolerance_grad=0.0, tolerance_change=0.0)
        cache = {}

        def closure():
            nonlocal n_evals
            # The line search's last trial is usually the accepted point, which the next
            # step re-evaluates first: reuse it instead of a second forward/backward.
            if cache and all(torch.equal(p, c) for p, c in zip(params, cache["x"])):
                for p, g in zip(params, cache["g"]):
                    p.grad = g.clone()
                return cache["L"]
            L = objective_and_grad()
            cache["x"] = _snapshot(params)
            cache["g"] = [p.grad.detach().clone() for p in params]
            cache["L"] = L.detach()
            n_evals += 1
            return cache["L"]

        initial = float(closure())
    if not math.isfinite(initial):
        raise TrainingDivergedError(
            "The objective is NaN or infinite at the initial parameters. To fix it: lower "
            "init_scale, use dtype='float64', or check the scale of X and y.")

    # no total: max_iter is a cap, not the length of the run (an ETA from it is false)
    bar = iteration_bar(verbose, solver, leave=True, dynamic_ncols=True)
    prev = initial
    best, best_params = initial, _snapshot(params)
    it = 0
    try:
        for it in range(1, max_iter + 1):
            if solver == "adam" and full_batch:
                opt.step()
                L = full_objective(with_grad=True)
            elif solver == "adam":
                perm = rng.permutation(n)
                for start in range(0, n, batch_size):
                    idx = torch.as_tensor(perm[start:start + batch_size], device=X.device)
                    opt.zero_grad(set_to_none=True)
                    obj = module.objective(X[idx], y[idx], lam, data_scale=n / len(idx))
                    if not math.isfinite(obj.item()):
                        raise diverged(it)
                    obj.backward()
                    opt.step()
                    n_evals += len(idx) / n
                L = full_objective(with_grad=False)
            else:
                opt.step(closure)
                L = float(closure())
            if not math.isfinite(L):
                raise diverged(it)
            last_good = _snapshot(params)
            if L < best:
                best, best_params = L, last_good
            history.append(L)
            if callback is not None:
                callback(it, module, L)
            rel = abs(prev - L) / max(abs(prev), np.finfo(float).tiny)
            if solver == "adam" and L > prev:
                # Constant-step Adam turns unstable late in training (observed at d = 60–100:
                # the objective climbs by 1–10 % after thousands of steps); shrinking the
                # step on every increase keeps it converging.
                for group in opt.param_groups:
                    group["lr"] *= lr_decay
            if solver == "lbfgs" and L == prev:
                # no progress (line search failed, e.g. at float32 precision): restart from
                # steepest descent in case the curvature memory is stale
                opt.state.clear()
                cache.clear()
            prev = L
            no_change = no_change + 1 if rel < tol else 0
            bar.update(1)
            if verbose > 0:
                bar.set_postfix({"objective/d²": f"{L / d ** 2:.6g}", "rel.change": f"{rel:.1e}"},
                                refresh=False)
            log_step(verbose, f"{solver} iteration {it}: objective/d² = {L / d ** 2:.8g}, "
                              f"relative change = {rel:.2e}")
            if no_change >= n_iter_no_change:
                stopped = True
                break
    finally:
        if verbose > 0 and history:
            bar.set_postfix({"objective/d²": f"{history[-1] / d ** 2:.6g}",
                             "stopped": stopped})
        finish_progress(bar, completed=stopped)

    final = history[-1] if history else initial
    if solver == "adam" and best < final:
        _restore(params, best_params)
        final = best
    with torch.no_grad():
        data = sum(module.data_loss(X[s:s + chunk], y[s:s + chunk]).item()
                   for s in range(0, n, chunk))
    grad_norm = _gradient_norm(objective_and_grad, params)
    n_evals += 1
    scale = max(_norm(params), initial_norm) or 1.0
    rel_grad = grad_norm * scale / max(abs(initial), abs(final), np.finfo(float).tiny)
    if not stopped:
        message = (f"reached max_iter={max_iter} before the relative objective change stayed "
                   f"below tol={tol:g} for {n_iter_no_change} iterations")
    elif rel_grad <= gtol:
        message = f"converged (relative gradient norm {rel_grad:.2e} <= gtol={gtol:.2e})"
    else:
        message = (f"stalled: the objective stopped changing after {len(history)} iterations "
                   f"but the relative gradient norm is {rel_grad:.2e} > gtol={gtol:.2e} "
                   "(a collapsed step, not a minimum)")
    converged = stopped and rel_grad <= gtol
    return TrainingResult(np.asarray(history, dtype=float), initial, final, data, n, len(history),
                          converged, solver, n_evals, rel_grad, message)
