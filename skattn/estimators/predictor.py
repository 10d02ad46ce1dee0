"""AsymptoticPredictor: AMP on data plus the exact high-dimensional predictions of SE."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._validation import (MAX_INVERSE_TEMPERATURE, MAX_NOISE, NONE, Interval, Options,
                           Predicate, atomic_fit, channel_memory_bytes, check_memory)
from ..amp import amp, seq2seq_to_attention
from ..data.targets import Target
from ..data.teacher import AttentionIndexedModel
from ..theory.channels import channel_for
from ..theory.corrections import CORRECTION_NAMES
from ..theory.problem import (StateEvolutionProblem, split_model_keywords,
                              warn_uncertified)
from ..theory.state_evolution import solve_state_evolution, state_evolution_curve
from ._mixin import DEVICE_STRING, WIDTH_CONSTRAINT, AttentionRegressorMixin, resolve_width
from .._progress import ticker
from .._warnings import warn

__all__ = ["AsymptoticPredictor"]


class AsymptoticPredictor(AttentionRegressorMixin, BaseEstimator):
    """Attention ERM solved by AMP, with its exact asymptotic predictions.

    ``fit`` runs approximate message passing on the data (docs: Theory §9), whose fixed point
    is the minimiser of the factored objective ``Σ_μ ℓ_μ + λ‖W‖²_F`` (a trace-penalised
    problem in ``S``), and — when ``target`` is given — solves the state evolution at
    ``α = n/d²`` to predict the test error, training error and learned spectrum
    (docs: Theory §4). The data-free methods :meth:`state_evolution` and :meth:`curve`
    give the same predictions without data.

    Parameters
    ----------
    width : int or float, default=1.0
        Width p of the factor W (int) or κ = p/d (float); ignored when
        ``parametrization="direct"``.
    parametrization : {"factored", "direct"}, default="factored"
        "factored": ``S = W Wᵀ/√(pd)`` with weight decay on W (a trace penalty on S);
        "direct": ``S = V/√d`` with ``λ‖V‖²_F`` (docs: Theory §5).
    reg_lambda : float, default=1e-2
        Weight decay λ ≥ 0 on W; the trace penalty on S is ``λ̃ = √κ λ``.
    beta : float, default=1.0
        Inverse temperature of the student's softmax.
    attention : {"softmax", "linear"}, default="softmax"
    task : {"auto", "seq2lab", "seq2seq"}, default="auto"
    n_tokens : int or None, default=None
        Token count for flattened X.
    target : Target, AttentionIndexedModel or None, default=None
        The target family assumed by the predictions (e.g. ``WishartTarget(0.5)``), or the
        teacher itself: then the predictions are for its own S0 at its d (same instance),
        with its T, β0, Δ and attention; ``target_beta``, ``noise`` and ``n_features`` left
        at their defaults are taken from it, other values (and the student's
        ``attention``, the data's T and d) must agree with it (ValueError otherwise).
    target_beta : float, default=1.0
        Teacher's inverse temperature β0 assumed by the predictions.
    noise : float, default=0.0
        Label noise Δ assumed by the predictions.
    n_features : int or None, default=None
        None: predictions in the d → ∞ continuum; an int: the finite-d state evolution
        (power-law targets, width < d).
    max_iter : int, default=500
        AMP iterations.
    tol : float, default=1e-8
        AMP stops when the relative change of Ŝ falls below tol.
    damping : float, default=0.5
        AMP damping (weight of the new iterate).
    n_nodes : int, default=8192
        Quadrature nodes of the state evolution.
    correction : str, default="auto"
        The finite-size correction of the state evolution (``"auto"``: the correction table;
        ``"none"``: the Gaussian core; or a correction's name to force it; see
        :func:`skattn.theory.explain` and docs: Finite-size corrections).
    device : {"auto", "numpy", "cpu", "cuda", "cuda:<index>"}, default="auto"
        Where AMP's products over all samples and its eigendecompositions run: "numpy",
        or torch (float64) on a device; "auto": CUDA when available, else numpy, as the
        regressors' "auto". The paths agree to round-off (about 1e-8 on ``S_`` at
        ``tol=1e-9``). The per-sample prox runs in numpy either way.
    random_state : int, RandomState, Generator or None, default=None
        Seeds the quadrature nodes and finite-d draws of the state evolution (an int;
        None or a random generator give the fixed seed 0).
    verbose : int, default=0
        0: silent; 1: a bar over AMP's iterations (no total: AMP stops when it
        converges) and, with ``target``, a ticker of the elapsed time of the state
        evolution; 2: also one line per AMP iteration, and the state evolution's own bar
        and line per evaluation (``SolverOptions.verbose``).

    Attributes
    ----------
    S_ : ndarray of shape (d, d)
        The AMP estimate of the ERM minimiser.
    kkt_residual_ : float
        Relative KKT residual of factored ERM at ``S_`` (see :func:`skattn.amp.kkt_residual`).
    converged_ : bool
    n_iter_ : int
        AMP iterations run (``amp_result_.n_iter``).
    state_ : StateEvolutionResult or None
        Solved at ``α = n/d²`` when ``target`` is given.
    correction_ : str or None
        The correction ``state_`` used (``state_.correction``; None without ``target``).
    predicted_test_error_, predicted_train_error_, predicted_train_objective_ : float
        From ``state_``; a ValueError naming ``target`` when it was None at fit.
    predicted_spectrum_ : dict
        ``atom_mass``, ``support`` and ``eigenvalues`` (a typical spectrum at this d);
        a ValueError naming ``target`` when it was None at fit.
    n_features_in_ : int
        Number of columns of the flattened X, ``n_tokens_ * token_dim_`` (equal to
        ``len(feature_names_in_)``).
    token_dim_ : int
        Token dimension d (features per token); ``S_`` is d × d.
    n_tokens_, task_ : int, str
        Token count T and "seq2lab" or "seq2seq".
    device_ : str
        "cpu" (numpy or torch on the CPU) or the CUDA device AMP ran on.
    feature_names_in_ : ndarray of shape (n_tokens * n_features,)
        Column names, when X was a DataFrame with string column names.
    """

    _constraints: dict = {
        **AttentionRegressorMixin._constraints,
        "width": WIDTH_CONSTRAINT,
        "parametrization": [Options("factored", "direct")],
        "target": [NONE, Predicate(
            lambda value: isinstance(value, (Target, AttentionIndexedModel)),
            "a skattn Target (e.g. WishartTarget(0.5)) or an AttentionIndexedModel")],
        "target_beta": [Interval("real", 0, MAX_INVERSE_TEMPERATURE, closed="right")],
        "noise": [Interval("real", 0, MAX_NOISE, closed="both")],
        "n_features": [Interval("int", 2), NONE],
        "tol": [Interval("real", 0, closed="neither")],
        "damping": [Interval("real", 0, 1, closed="right")],
        "n_nodes": [Interval("int", 16)],
        "correction": [Options(*CORRECTION_NAMES)],
        "device": [Predicate(lambda value: value == "numpy" or DEVICE_STRING.accepts(value),
                             "a str among 'auto', 'numpy', 'cpu', 'cuda' or 'cuda:<index>'")],
    }

    def __init__(self, width=1.0, parametrization="factored", reg_lambda=1e-2, beta=1.0,
                 attention="softmax",
                 task="auto", n_tokens=None, target=None, target_beta=1.0, noise=0.0,
                 n_features=None, max_iter=500, tol=1e-8, damping=0.5, n_nodes=8192,
                 correction="auto", device="auto", random_state=None, verbose=0):
        super().__init__(reg_lambda=reg_lambda, beta=beta, attention=attention, task=task,
                         n_tokens=n_tokens, max_iter=max_iter, tol=tol, device=device,
                         random_state=random_state, verbose=verbose)
        self.width = width
        self.parametrization = parametrization
        self.target = target
        self.target_beta = target_beta
        self.noise = noise
        self.n_features = n_features
        self.damping = damping
        self.n_nodes = n_nodes
        self.correction = correction

    # ----------------------------------------------------------------- helpers
    def _width_ratio(self, d):
        if isinstance(self.width, Integral):
            return self.width / d
        return float(self.width)

    def _seed(self):
        rs = self.random_state
        return 0 if rs is None else (rs if isinstance(rs, Integral) else 0)

    def _known_d(self):
        """d of the predictions: ``n_features``, or the teacher's when target is one."""
        if isinstance(self.target, AttentionIndexedModel):
            return self.target.n_features
        return self.n_features

    def _se_problem(self, n_tokens, width_ratio, overrides=None):
        """This estimator's StateEvolutionProblem and solver options, with ``overrides``."""
        if self.target is None:
            raise ValueError("target must be set (e.g. target=WishartTarget(0.5)) to compute "
                             "state-evolution predictions.")
        model, options = split_model_keywords(overrides or {})
        if isinstance(self.target, AttentionIndexedModel):
            # defaults stand for "the teacher's"; set values must agree with it
            given = {name: getattr(self, name) for name, default in
                     (("target_beta", 1.0), ("noise", 0.0), ("n_features", None))
                     if getattr(self, name) != default}
            problem = StateEvolutionProblem.from_teacher(
                self.target, n_tokens=n_tokens, attention=self.attention,
                reg_lambda=self.reg_lambda, width_ratio=width_ratio, beta=self.beta,
                parametrization=self.parametrization, **given)
        else:
            problem = StateEvolutionProblem(
                target=self.target, n_tokens=n_tokens, reg_lambda=self.reg_lambda,
                width_ratio=width_ratio, beta=self.beta, target_beta=self.target_beta,
                noise=self.noise, attention=self.attention, n_features=self.n_features,
                parametrization=self.parametrization)
        correction = options.pop("correction", self.correction)
        options = {"n_nodes": self.n_nodes, "random_state": self._seed(), **options}
        return problem.replace(**model), {"correction": correction,
                                          "options": options}

    # ------------------------------------------------------------------- fit
    @atomic_fit()  # a failed fit leaves the estimator as it was
    def fit(self, X, y):
        """Run AMP on ``(X, y)`` and, if ``target`` is set, solve SE at ``α = n/d²``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, n_features) or flattened
        y : array-like, attention matrices (seq2lab) or output sequences (seq2seq)

        Returns
        -------
        self : object

        Raises
        ------
        ValueError
            Naming the parameter, for invalid parameters or data, a state-evolution
            problem that cannot be solved (e.g. a float ``width`` < 1 with
            ``n_features=None``), or a computation above the memory limit
            (``SKATTN_MEMORY_LIMIT_GB``, default 8 GiB). Everything is checked before
            AMP runs, and a failed fit leaves the estimator as it was.
        """
        self._validate_params()
        X3, y3, T, d, task, y_ndim = self._validate_fit_data(X, y)
        if isinstance(self.target, AttentionIndexedModel) and self.target.n_features != d:
            raise ValueError(f"X has n_features={d} but the teacher given as target has "
                             f"n_features={self.target.n_features}.")
        if self.n_features is not None and self.n_features != d:  # would predict another d
            raise ValueError(f"n_features={self.n_features} does not match X, which has "
                             f"n_features={d}; leave n_features=None to use X's.")
        if isinstance(self.width, Integral) and self.width > d:
            raise ValueError(f"width={self.width} exceeds n_features={d}; the rank of S is "
                             "at most d.")
        for name, value in self._structure_attributes(T, d, task, y_ndim).items():
            setattr(self, name, value)
        self.device_ = self.device if self.device not in ("numpy", "auto") else "cpu"
        if self.device == "auto":
            import torch  # only to see whether AMP's "auto" will pick CUDA

            self.device_ = "cuda" if torch.cuda.is_available() else "cpu"
        if task == "seq2seq" and d < T:
            raise ValueError(f"seq2seq outputs determine the attention matrix only when "
                             f"n_features >= n_tokens; X has n_features={d} < n_tokens={T}.")
        width_ratio = self._width_ratio(d)
        direct = self.parametrization == "direct"
        if direct and self.reg_lambda == 0:
            raise ValueError("reg_lambda must be > 0 with parametrization='direct'.")
        rank = d if direct else resolve_width(self.width, d)
        n = X3.shape[0]
        # AMP: the channel at every sample, the data and a few d × d / d × p iterates
        check_memory(channel_memory_bytes(T, n) + 8 * (4 * n * T * d + 8 * d * d + 4 * d * rank),
                     f"n_samples={n} (AMP with n_tokens={T}, n_features={d}, rank {rank})")
        if self.target is not None:  # the state evolution's checks, before AMP runs
            problem, options = self._se_problem(T, width_ratio)
            check_memory(channel_memory_bytes(T, options["options"]["n_nodes"]),
                         f"n_nodes={options['options']['n_nodes']} (with n_tokens={T})")
            law, eig0 = problem.target_law(options["options"]["random_state"])
            problem.denoiser(law, eig0, options["options"]["random_state"])
        A = y3 if task == "seq2lab" else seq2seq_to_attention(X3, y3)
        channel = channel_for(self.attention, T, self.beta, self.beta)
        reg = self.reg_lambda if direct else np.sqrt(width_ratio) * self.reg_lambda
        result = amp(channel, X3, A, reg_trace=reg, rank=rank,
                     max_iter=self.max_iter, tol=self.tol, damping=self.damping,
                     parametrization=self.parametrization,
                     device=None if self.device == "numpy" else self.device,
                     verbose=self.verbose)
        self.S_ = result.S
        self.kkt_residual_ = result.kkt_residual
        self.converged_ = result.converged
        self.n_iter_ = result.n_iter
        self.amp_result_ = result
        if not result.converged:
            warn(f"AsymptoticPredictor: AMP did not converge ({result.message}); "
                 "lower damping or raise max_iter.", ConvergenceWarning)
        self.state_ = None
        self.correction_ = None
        self._predicted_spectrum = None
        if self.target is not None:
            # one solve, seconds to a minute at finite d: a ticker of the elapsed time, or
            # at verbose=2 the solve's own bar and a line per evaluation
            lines = int(self.verbose) >= 2
            if lines:
                options["options"]["verbose"] = 2
            with ticker(0 if lines else self.verbose,
                        f"state evolution at alpha={n / d ** 2:.3g}"):
                state = solve_state_evolution(n / d ** 2, problem, **options)
            self.state_ = state
            self.correction_ = state.correction
            self._predicted_spectrum = {
                "atom_mass": state.atom_mass,
                "support": state.spectrum_support(),
                "eigenvalues": state.sample_spectrum(d, random_state=self._seed()),
            }
            if not state.converged:
                warn(f"state evolution did not converge: {state.message}",
                     ConvergenceWarning)
            else:
                warn_uncertified(state, "AsymptoticPredictor")
        return self

    # ------------------------------------------------------------- predictions
    def _fitted_state(self, attribute):
        """``state_``, or an error naming ``target`` when fit solved no state evolution."""
        check_is_fitted(self)
        if self.state_ is None:
            raise ValueError(
                f"{attribute} needs target: this AsymptoticPredictor was fitted with "
                f"target=None, so no state evolution was solved. Set target (e.g. "
                f"target=WishartTarget(0.5)) and fit again.")
        return self.state_

    @property
    def predicted_test_error_(self):
        """Test error predicted by the state evolution at ``α = n/d²`` (needs ``target``)."""
        return self._fitted_state("predicted_test_error_").test_error

    @property
    def predicted_train_error_(self):
        """Training error predicted by the state evolution (needs ``target``)."""
        return self._fitted_state("predicted_train_error_").train_error

    @property
    def predicted_train_objective_(self):
        """Training objective / d² predicted by the state evolution (needs ``target``)."""
        return self._fitted_state("predicted_train_objective_").train_objective

    @property
    def predicted_spectrum_(self):
        """``atom_mass``, ``support`` and a typical ``eigenvalues`` draw (needs ``target``)."""
        self._fitted_state("predicted_spectrum_")
        return self._predicted_spectrum

    # --------------------------------------------------------------- data-free
    def state_evolution(self, alpha, n_tokens, **kwargs):
        """Solve the state evolution at ``alpha`` with this estimator's parameters.

        Parameters
        ----------
        alpha : float
            n/d².
        n_tokens : int
        **kwargs
            Overrides passed to :func:`skattn.theory.solve_state_evolution`.

        Returns
        -------
        StateEvolutionResult
        """
        width_ratio = self.width if not isinstance(self.width, Integral) else None
        if width_ratio is None:
            d = self._known_d()
            if d is None:
                raise ValueError("an integer width needs n_features to give κ = p/d.")
            width_ratio = self.width / d
        problem, options = self._se_problem(n_tokens, width_ratio, kwargs)
        return solve_state_evolution(alpha, problem, **options)

    def curve(self, alphas, n_tokens, n_jobs=None, **kwargs):
        """State evolution along ``alphas`` (warm-started), as a list of results."""
        d = self._known_d()
        width_ratio = self.width if not isinstance(self.width, Integral) else (
            self.width / d if d else None)
        if width_ratio is None:
            raise ValueError("an integer width needs n_features to give κ = p/d.")
        reg_lambda = kwargs.pop("reg_lambda", self.reg_lambda)  # may vary along the curve
        problem, options = self._se_problem(n_tokens, width_ratio, kwargs)
        return state_evolution_curve(alphas, problem, reg_lambda=reg_lambda, n_jobs=n_jobs,
                                     verbose=self.verbose, **options)
