"""One state-evolution problem: the model, validated once, without the sample ratio α.

A :class:`StateEvolutionProblem` holds what defines the high-dimensional limit of one
attention model (docs: Theory §2–5): the target, the sequence length T, the temperatures
β and β0, the label noise Δ, the attention, task and parametrization, the regularisation
λ, the width ratio κ and, optionally, a finite size d. It builds the pieces the generic
solver needs (the channel, the target law, the denoiser), so the solver, the thresholds,
the Bayes-optimal baseline and the λ search all read one description.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

import numpy as np

from .._validation import (MAX_INVERSE_TEMPERATURE, MAX_NOISE, MIN_INVERSE_TEMPERATURE,
                           channel_memory_bytes, check_choice, check_memory,
                           check_scalar_range)
from .channels import channel_for
from .denoisers import DirectDenoiser, FactoredDenoiser
from .laws import DiscreteLaw, SpectralLaw
from .._warnings import warn

__all__ = ["StateEvolutionProblem", "DomainWarning", "FiniteSizeWarning", "resolve_target_law",
           "top_mode_share", "is_spiky", "GAUSSIAN_EQUIVALENCE_MAX_SHARE", "RANK_CONSTRAINT_MIN_D",
           "STRONG_RANK_CAP_SHARE", "FINITE_SIZE_MIN_LAMBDA", "FINITE_SIZE_MAX_D",
           "warn_finite_size", "token_excess_kurtosis", "UncertifiedWarning",
           "UNCERTIFIED_MAX_SHARE", "warn_uncertified", "effect_share"]

PARAMETRIZATIONS = ("factored", "direct")
ATTENTIONS = ("softmax", "linear")
TASKS = ("seq2lab", "seq2seq")


class _Unset:
    """Default of a model keyword the caller did not give (None means d → ∞ already)."""

    def __repr__(self):
        return "<unset>"

    def __reduce__(self):  # one instance, also across pickling (joblib workers)
        return "UNSET"


UNSET = _Unset()

#: Largest share ``max_i λ_i² / Σ λ²`` of ‖S0‖²_F one mode may carry for a softmax
#: prediction. The output channel assumes Gaussian pre-activations; a mode with a finite
#: share adds the O(1) chi-square ``λ_1 ((x·v_1)² − 1)/√d``, whose effect on the test error
#: grows with the share and does not shrink with d. The bound keeps the error of the S = 0
#: predictor within the seed spread of trained models (docs: Where the predictions hold,
#: "Spiky targets and the Gaussian channel"; the evidence is in docs: Changelog).
GAUSSIAN_EQUIVALENCE_MAX_SHARE = 0.25

#: Smallest d at which the rank-capped prior (width_ratio below the positive fraction of the
#: unconstrained minimiser) is validated: from there it predicts trained models as well as
#: the uncapped one. A cap far below the positive fraction is a different failure (not a
#: finite-size effect): :data:`STRONG_RANK_CAP_SHARE`. docs: Where the predictions hold,
#: "Rank-constrained students"; the evidence is in docs: Changelog.
RANK_CONSTRAINT_MIN_D = 40

#: A binding rank cap with ``width_ratio`` below this share of the positive fraction
#: ``μ_δ((ε, ∞))`` at the fixed point is outside the validated domain: below it trained
#: students stop in other minima (higher objective, lower test error, depending on the
#: initialisation); the bound lies between the share where that happens and the shares
#: found within the seed spread (docs: Where the predictions hold, "Rank-constrained
#: students"; the evidence is in docs: Changelog).
STRONG_RANK_CAP_SHARE = 0.6

_TEACHER_ATTRIBUTES = ("S0_", "n_tokens", "beta", "noise", "attention", "n_features")


class DomainWarning(UserWarning):
    """A prediction outside the domain where the state evolution is validated.

    Raised (as a warning) for softmax predictions on spiky targets (one mode carries more
    than :data:`GAUSSIAN_EQUIVALENCE_MAX_SHARE` of ``‖S0‖²_F``) and for binding rank
    constraints below :data:`RANK_CONSTRAINT_MIN_D`.
    """


class FiniteSizeWarning(DomainWarning):
    """A finite-d prediction that misses a finite-size effect of trained models.

    The state evolution still applies as d → ∞ (the continuum prediction is validated
    there), but at the given d trained models sit several per cent away from the
    same-instance prediction, by an effect that decays with d (docs: Where the
    predictions hold, "Same-instance predictions"; evidence in docs: Validation report). Raised
    for factored softmax attention with T = 2 at a small weight decay
    (:data:`FINITE_SIZE_MIN_LAMBDA`) up to :data:`FINITE_SIZE_MAX_D`, where the leverage
    correction that models the effect does not carry the prediction (``correction`` other
    than "auto" or "leverage", or outside its domain: :func:`skattn.theory.explain`). A subclass of
    :class:`DomainWarning`, so filters on that catch it too.
    """


class UncertifiedWarning(UserWarning):
    """A prediction that the certificate of the softmax prox does not pin down.

    Raised by :class:`~skattn.AsymptoticPredictor` where some quadrature nodes keep a prox
    minimiser that is not certified global, and their bound, carried through the fixed
    point to first order (``extras["uncertified_effect"]`` of the result), could move the
    predicted test error by more than :data:`UNCERTIFIED_MAX_SHARE` of it (docs: Theory,
    "Certificate"). The bound is a worst case over each node's ball, so the warning says
    what the certificate leaves open, not that the prediction is off.
    """


#: The share of the predicted test error that the uncertified nodes may move it by (to first
#: order) before :class:`UncertifiedWarning` is raised.
UNCERTIFIED_MAX_SHARE = 0.01


#: Factored softmax predictions at finite d below this λ miss the token-structure excess of
#: trained models, largest next to the interpolation threshold; T = 3 stays within the
#: seed spread, so only T = 2 warns (docs: Validation report, "Finite-d predictions of softmax
#: seq2lab"; docs: Changelog has the scans that set the bounds).
FINITE_SIZE_MIN_LAMBDA = 0.01

#: ... up to this d: the excess next to the interpolation threshold holds at this d and
#: has faded by the next d scanned (docs: Changelog, "Evidence moved out of the code").
FINITE_SIZE_MAX_D = 160


def effect_share(result):
    """How far the uncertified nodes could move ``result``'s test error, to first order, as
    a share of it (``extras["uncertified_effect"]``); NaN where not estimated.

    Parameters
    ----------
    result : StateEvolutionResult

    Returns
    -------
    float
    """
    effect = result.extras.get("uncertified_effect")
    if not effect:
        return np.nan
    if effect["test_error"] == 0:
        return 0.0          # also at a test error of 0 (perfect recovery)
    return float(effect["test_error"] / abs(result.test_error)) if result.test_error \
        else np.inf


def warn_uncertified(result, caller):
    """Warn (:class:`UncertifiedWarning`) where the uncertified prox minimisers of
    ``result`` could move its test error by more than :data:`UNCERTIFIED_MAX_SHARE` of it,
    to first order (:func:`effect_share`; silent where that was not estimated, as for the
    exact-Gram correction's multi-start, which is never certified).

    Parameters
    ----------
    result : StateEvolutionResult
    caller : str
        Named in the message.

    Returns
    -------
    bool
        Whether it warned.
    """
    share = effect_share(result)
    if not share > UNCERTIFIED_MAX_SHARE:      # NaN (not estimated) included
        return False
    effect = result.extras["uncertified_effect"]["test_error"]
    warn(f"{caller}: {1 - result.certified_fraction:.2%} of the quadrature nodes keep a prox "
         f"minimiser that is not certified global. If their global minimisers lay anywhere "
         f"in the balls their objective allows (a worst case), they could move the "
         f"predicted test error {result.test_error:.4g} by up to {effect:.3g} "
         f"({share:.1%}) to first order: result.extras['uncertified_effect'].",
         UncertifiedWarning)
    return True


def warn_finite_size(problem, modelled=False, stacklevel=3):
    """Warn (:class:`FiniteSizeWarning`) where a finite-d prediction misses a known effect.

    Parameters
    ----------
    problem : StateEvolutionProblem
    modelled : bool, default=False
        Whether the leverage correction carries the prediction (then no warning).
    stacklevel : int, default=3

    Returns
    -------
    bool
        Whether it warned.
    """
    d = problem.n_features
    if modelled or not (d is not None and d <= FINITE_SIZE_MAX_D and problem.attention == "softmax"
            and problem.parametrization == "factored" and problem.n_tokens == 2
            and problem.reg_lambda < FINITE_SIZE_MIN_LAMBDA):
        return False
    warn(
        f"finite-size effect not modelled: at reg_lambda={problem.reg_lambda:g} < "
        f"{FINITE_SIZE_MIN_LAMBDA:g} and n_features={d} <= {FINITE_SIZE_MAX_D}, trained "
        "factored softmax models (T = 2) sit above this same-instance prediction by the "
        "token structure it does not model, most next to the interpolation threshold; "
        "the leverage correction (correction='auto' where its domain applies, or "
        "correction='leverage') models it; the continuum prediction is not affected "
        "(docs: Where the predictions hold; Validation report).",
        FiniteSizeWarning)
    return True


def top_mode_share(eigenvalues):
    """``max_i λ_i² / Σ_i λ_i²``: the share of ``‖S0‖²_F`` carried by its largest mode.

    Parameters
    ----------
    eigenvalues : array-like of shape (d,)

    Returns
    -------
    float
        In [1/d, 1]; it vanishes as d → ∞ for targets with a d → ∞ law (Wishart: O(1/d)),
        and stays finite for spiky (power-law) spectra.
    """
    sq = np.asarray(eigenvalues, dtype=float) ** 2
    total = float(np.sum(sq))
    if sq.ndim != 1 or sq.size == 0 or not np.isfinite(total) or total <= 0:
        raise ValueError("eigenvalues must be a non-empty 1-D array of finite values, not all "
                         "zero.")
    return float(np.max(sq) / total)


def is_spiky(eigenvalues):
    """Whether a spectrum leaves the Gaussian-equivalence domain of docs: Where the predictions hold.

    The one rule behind the spiked, exact-Gram and leverage routes and the power-law
    learning curves: the top mode carries more than :data:`GAUSSIAN_EQUIVALENCE_MAX_SHARE`
    of ``Tr S0²`` (:func:`top_mode_share`).

    Parameters
    ----------
    eigenvalues : array-like of shape (d,)

    Returns
    -------
    bool
    """
    return top_mode_share(eigenvalues) > GAUSSIAN_EQUIVALENCE_MAX_SHARE


def is_teacher(obj):
    """Whether ``obj`` looks like an :class:`~skattn.data.AttentionIndexedModel` (duck typing:
    the theory does not import the data layer)."""
    return all(hasattr(obj, name) for name in _TEACHER_ATTRIBUTES)


def _teacher_law(teacher):
    """The empirical spectral law of a teacher's own S0 (clipped to the PSD cone)."""
    S0 = np.asarray(teacher.S0_, dtype=float)
    d = int(teacher.n_features)
    if S0.shape != (d, d):
        raise ValueError(f"teacher.S0_ must have shape ({d}, {d}) (teacher.n_features), "
                         f"got {S0.shape}.")
    # the same eigenvalues as SpectrumTarget(np.clip(np.linalg.eigvalsh(S0), 0, None))
    return DiscreteLaw(np.clip(np.linalg.eigvalsh(S0), 0.0, None))


def _teacher_model(teacher, given):
    """Model keywords of a same-instance problem: the teacher's, checked against ``given``."""
    from_teacher = {"n_tokens": int(teacher.n_tokens), "target_beta": float(teacher.beta),
                    "noise": float(teacher.noise), "attention": teacher.attention,
                    "n_features": int(teacher.n_features)}
    if getattr(teacher, "n_heads", 1) != 1:
        raise ValueError(f"the teacher has n_heads={teacher.n_heads}: the state evolution "
                         "describes one head (n_heads=1).")
    if getattr(teacher, "token_covariance", None) is not None:
        raise ValueError("the teacher has a token_covariance: the state evolution is for "
                         "isotropic tokens (token_covariance=None).")
    law = getattr(teacher, "token_distribution", "gaussian")
    if isinstance(law, str):  # the kurtosis correction of a named token law
        from_teacher["token_kurtosis"] = token_excess_kurtosis(
            law, getattr(teacher, "token_df", None) if law == "student_t" else None)
    elif "token_kurtosis" not in given:
        raise ValueError("the teacher draws tokens from a callable: give token_kurtosis "
                         "(E z⁴ − 3 of its unit-variance entries).")
    for name, value in from_teacher.items():
        if name in given and given[name] != value:
            raise ValueError(f"{name}={given[name]!r} contradicts the teacher, which has "
                             f"{name}={value!r}; leave {name} out to take the teacher's.")
    return {**given, **from_teacher}


def _check_target_type(target):
    if not isinstance(target, SpectralLaw) and not (hasattr(target, "spectral_law")
                                                    and hasattr(target, "sample")):
        raise TypeError("target must be a skattn Target (WishartTarget, PowerLawTarget, "
                        f"SpectrumTarget) or a SpectralLaw, got {type(target).__name__}.")


def _check_target(target, n_features):
    """Type of the target, and whether it has a law at this ``n_features``."""
    _check_target_type(target)
    if isinstance(target, SpectralLaw):
        if n_features is not None and not (isinstance(target, DiscreteLaw)
                                           and target.n_atoms == n_features):
            raise ValueError("a finite-d state evolution from a SpectralLaw needs a "
                             "DiscreteLaw with n_features atoms; pass a Target instead.")
    elif n_features is None and getattr(target, "finite_size_only", False):
        raise ValueError(f"{type(target).__name__} has no d → ∞ law: pass n_features.")


def _check_model_scalars(n_tokens, width_ratio, reg_lambda, beta, target_beta, noise,
                         attention, task, parametrization):
    """Validate the scalar model parameters; returns them as Python numbers.

    The order of the checks is the order of the error a user sees first.
    """
    check_choice(attention, "attention", ATTENTIONS)
    n_tokens = check_scalar_range(n_tokens, "n_tokens", low=2 if attention == "softmax" else 1,
                                  integer=True)
    # the channel's tables grow as T^7: refuse before building one (SKATTN_MEMORY_LIMIT_GB)
    check_memory(channel_memory_bytes(n_tokens, 0),
                 f"n_tokens={n_tokens} (a channel in T(T+1)/2 coordinates)")
    width_ratio = check_scalar_range(width_ratio, "width_ratio", low=0, low_inclusive=False)
    reg_lambda = check_scalar_range(reg_lambda, "reg_lambda", low=0)
    # upper bounds: beyond them the solver's exponentials and edge search leave float64
    beta = check_scalar_range(beta, "beta", low=MIN_INVERSE_TEMPERATURE,
                              high=MAX_INVERSE_TEMPERATURE)
    target_beta = check_scalar_range(target_beta, "target_beta", low=MIN_INVERSE_TEMPERATURE,
                                     high=MAX_INVERSE_TEMPERATURE)
    noise = check_scalar_range(noise, "noise", low=0, high=MAX_NOISE)
    # seq2seq has the same channel as seq2lab in the limit: ‖(σ̂ − σ)x‖²/d → Σ_ab (σ̂ − σ)²
    check_choice(task, "task", TASKS)
    check_choice(parametrization, "parametrization", PARAMETRIZATIONS)
    return n_tokens, width_ratio, reg_lambda, beta, target_beta, noise


def resolve_target_law(target, n_features=None, random_state=0):
    """Spectral law (and finite-d eigenvalues) of a target given as Target or SpectralLaw.

    Parameters
    ----------
    target : Target or SpectralLaw
    n_features : int or None, default=None
        None: the d → ∞ law; an integer d: the law of one d×d target.
    random_state : int, default=0
        Seeds the draw of targets whose finite-d spectrum is random (e.g. Wishart).

    Returns
    -------
    law : SpectralLaw
    eigenvalues : ndarray of shape (n_features,) or None
        None in the continuum.
    """
    if isinstance(target, SpectralLaw):
        if n_features is None:
            return target, None
        _check_target(target, n_features)
        return target, target.eigenvalues
    _check_target_type(target)
    if n_features is None:
        return target.spectral_law(None), None
    law = None
    try:
        law = target.spectral_law(n_features)
    except ValueError:
        pass
    if isinstance(law, DiscreteLaw) and law.n_atoms == n_features:
        eig = law.eigenvalues
    else:  # e.g. Wishart: the eigenvalues of one fixed draw at this d
        eig = np.linalg.eigvalsh(target.sample(n_features, random_state))
    eig = np.clip(eig, 0.0, None)
    return DiscreteLaw(eig), eig


@dataclass(frozen=True, repr=False)
class StateEvolutionProblem:
    """The model of one state evolution, without the sample ratio α.

    Validated once, at construction; :meth:`replace` gives a changed, re-validated copy.
    Frozen, picklable, and equal (and hashable) when the fields are (a Target compares by
    value, a SpectralLaw by identity).

    Parameters
    ----------
    target : Target or SpectralLaw
        The target family (e.g. ``WishartTarget(0.5)``) or its spectral law. For one
        teacher's own S0, use :meth:`from_teacher`.
    n_tokens : int
        Sequence length T (≥ 2 for softmax, ≥ 1 for linear attention); a ValueError when
        the channel alone would exceed the memory limit (``SKATTN_MEMORY_LIMIT_GB``,
        default 8 GiB: T ≲ 20).
    reg_lambda : float, default=0.0
        λ ≥ 0 in ``Σ_μ ℓ_μ + λ‖W‖²_F`` (or ``λ‖V‖²_F`` for ``parametrization="direct"``,
        where solving the state evolution needs λ > 0).
    width_ratio : float, default=1.0
        κ = p/d of the factored model; the trace penalty is ``λ̃ = √κ λ``.
    beta, target_beta : float, default=1.0
        Inverse temperatures of the student and of the teacher, in ``[1e-6, 1e6]``.
    noise : float, default=0.0
        Label noise Δ in ``[0, 1e6]``.
    attention : {"softmax", "linear"}, default="softmax"
    task : {"seq2lab", "seq2seq"}, default="seq2lab"
        Both have the same limit; accepted for symmetry with the estimators.
    parametrization : {"factored", "direct"}, default="factored"
    n_features : int or None, default=None
        None: the d → ∞ continuum; an integer d ≥ 2: the finite-d deterministic version
        (needed for power-law targets and width_ratio < 1), solved at
        :meth:`effective_alpha` (``α d/(d + 1)`` for factored linear attention).
    token_kurtosis : float, default=0.0
        Excess kurtosis ``κ4 = E z⁴ − 3 ≥ −2`` of the i.i.d. unit-variance token entries
        (0: Gaussian tokens, today's state evolution; −2: Rademacher; ``6/(df − 4)``:
        Student-t, see :func:`token_excess_kurtosis`). It adds ``(κ4/2) t t'`` to the
        covariance of the diagonal pre-activations (``t = Tr S/d``); see
        docs: Non-Gaussian tokens. Only :func:`~skattn.theory.solve_state_evolution` (and what
        calls it) supports a non-zero value.

    Examples
    --------
    >>> from skattn.data import WishartTarget
    >>> problem = StateEvolutionProblem(WishartTarget(0.5), n_tokens=2, reg_lambda=0.01)
    >>> problem.replace(noise=0.1)
    StateEvolutionProblem(target=WishartTarget(rank_ratio=0.5), n_tokens=2, reg_lambda=0.01, noise=0.1)
    """

    target: object
    n_tokens: int
    reg_lambda: float = 0.0
    width_ratio: float = 1.0
    beta: float = 1.0
    target_beta: float = 1.0
    noise: float = 0.0
    attention: str = "softmax"
    task: str = "seq2lab"
    parametrization: str = "factored"
    n_features: int | None = None
    token_kurtosis: float = 0.0

    def __post_init__(self):
        (n_tokens, width_ratio, reg_lambda, beta, target_beta,
         noise) = _check_model_scalars(self.n_tokens, self.width_ratio, self.reg_lambda,
                                       self.beta, self.target_beta, self.noise,
                                       self.attention, self.task, self.parametrization)
        n_features = self.n_features
        if n_features is not None:
            n_features = check_scalar_range(n_features, "n_features", low=2, integer=True)
        _check_target(self.target, n_features)
        # E z⁴ ≥ (E z²)² = 1 for unit-variance entries, so κ4 ≥ −2 (Rademacher)
        token_kurtosis = check_scalar_range(self.token_kurtosis, "token_kurtosis", low=-2)
        # frozen: the validated (plain Python) values are stored through object.__setattr__
        for name, value in (("n_tokens", n_tokens), ("width_ratio", width_ratio),
                            ("reg_lambda", reg_lambda), ("beta", beta),
                            ("target_beta", target_beta), ("noise", noise),
                            ("n_features", n_features), ("token_kurtosis", token_kurtosis)):
            object.__setattr__(self, name, value)

    @classmethod
    def from_teacher(cls, teacher, **model):
        """The same-instance problem of one teacher: its own S0 at its d.

        The target is the empirical law of ``teacher.S0_`` (``n_features = teacher.n_features``),
        and T, β0 (``target_beta``), Δ (``noise``), the attention and the excess kurtosis of
        its token law (``token_kurtosis``) are the teacher's. It equals the explicit route
        ``target=SpectrumTarget(eigvalsh(S0)), n_features=d``. Multi-head teachers and
        anisotropic tokens are outside the theory and raise.

        Parameters
        ----------
        teacher : AttentionIndexedModel
            Or any object with ``S0_`` (d × d), ``n_tokens``, ``beta``, ``noise``,
            ``attention`` and ``n_features`` attributes.
        **model
            The other fields (``reg_lambda``, ``width_ratio``, ``beta``, …). ``n_tokens``,
            ``target_beta``, ``noise``, ``attention`` and ``n_features`` may be given only
            with the teacher's values.

        Returns
        -------
        StateEvolutionProblem

        Raises
        ------
        ValueError
            Naming the keyword that contradicts the teacher.
        TypeError
            If ``teacher`` lacks one of the attributes above, or ``target`` is given too.
        """
        if not is_teacher(teacher):
            missing = [a for a in _TEACHER_ATTRIBUTES if not hasattr(teacher, a)]
            raise TypeError(f"teacher must be an AttentionIndexedModel (attributes "
                            f"{list(_TEACHER_ATTRIBUTES)}); {type(teacher).__name__} lacks "
                            f"{missing[0]!r}.")
        if "target" in model:
            raise TypeError("from_teacher() takes the target from the teacher; do not pass "
                            "target.")
        model = _teacher_model(teacher, model)  # first: it refuses teachers outside the theory
        return cls(target=_teacher_law(teacher), **model)

    def __repr__(self):
        # like scikit-learn: the required fields, then only those that differ from default
        shown = [f for f in fields(self)
                 if f.default is dataclasses.MISSING or getattr(self, f.name) != f.default]
        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in shown)
        return f"{type(self).__name__}({args})"

    def replace(self, **changes):
        """A copy with some fields changed, validated again.

        Parameters
        ----------
        **changes
            New values of fields (e.g. ``reg_lambda=0.1``).

        Returns
        -------
        StateEvolutionProblem
        """
        unknown = sorted(set(changes) - set(MODEL_KEYWORDS))
        if unknown:
            raise ValueError(f"replace() got {unknown[0]!r}, which is not a field of "
                             f"StateEvolutionProblem; the fields are {list(MODEL_KEYWORDS)}.")
        return dataclasses.replace(self, **changes)

    # ---- the pieces of the state evolution ------------------------------------------------
    @property
    def alpha_factor(self):
        """``α_eff/α``: ``d/(d + 1)`` for the finite-d factored linear model, else 1.

        Under a rank cap (``width_ratio < 1``) the solver uses it while the cap does not bind
        and falls back to α where it binds at the fixed point. See :meth:`effective_alpha`.
        """
        if (self.n_features is None or self.parametrization == "direct"
                or self.attention != "linear"):
            return 1.0
        return self.n_features / (self.n_features + 1.0)

    def effective_alpha(self, alpha):
        """The sample ratio at which the finite-d state evolution is solved.

        ``α_eff = α d/(d + 1)`` for factored linear attention at finite d (``n_features``
        given, also for a teacher's own S0): the sensing matrices of docs: Theory §3 are
        isotropic on symmetric d×d matrices, which have ``d(d + 1)/2`` degrees of freedom
        where the continuum counts ``d²/2`` (``n/D = 2α d/(d + 1)``); against trained
        models it closes most of the linear finite-d gap (docs: Theory §4, "Finite
        d"; the numbers are in docs: Changelog). α is kept

        - in the continuum (``n_features=None``);
        - for direct (ridge) attention, whose exact finite-d error is closer to the SE at α;
        - for softmax attention, where α_eff moved the prediction away from trained models;
        - where a rank cap (``width_ratio < 1``) binds at the fixed point: the estimator has
          rank p, not ``d(d + 1)/2`` degrees of freedom, and α_eff moved the prediction
          further from trained models. The solver then solves again at α.

        Where the cap does not bind, the ERM is that of the full-width model at
        ``λ̃ = √κ λ`` (the same minimiser), so α_eff applies as at full width (the grid's
        linear T = 1, κ = 0.75 configuration; docs: Changelog).

        Only the fixed point uses α_eff: the training objective stays
        ``L/d² = α e_train + λ̃ Tr Ŝ/d`` with the nominal ``α = n/d²``.

        Parameters
        ----------
        alpha : float
            The nominal sample ratio ``n/d²``, > 0.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            If ``alpha`` is not a finite number > 0.
        TypeError
            If ``alpha`` is not a real number.
        """
        alpha = check_scalar_range(alpha, "alpha", low=0, low_inclusive=False)
        return alpha * self.alpha_factor

    @property
    def reg_trace(self):
        """The penalty on S: ``λ̃ = √κ λ`` on ``Tr S`` (factored), ``λ`` on ``‖V‖²_F`` (direct)."""
        if self.parametrization == "factored":
            return np.sqrt(self.width_ratio) * self.reg_lambda
        return self.reg_lambda

    def channel(self):
        """The output channel (softmax or linear attention at T, β, β0)."""
        return channel_for(self.attention, self.n_tokens, self.beta, self.target_beta)

    def target_law(self, random_state=0):
        """``(law, eigenvalues)`` of the target; see :func:`resolve_target_law`."""
        return resolve_target_law(self.target, self.n_features, random_state)

    def denoiser(self, law, target_eigenvalues=None, random_state=0):
        """The prior side: factored spectral threshold or direct ridge.

        Parameters
        ----------
        law : SpectralLaw
            From :meth:`target_law`.
        target_eigenvalues : ndarray or None, default=None
            The finite-d eigenvalues from :meth:`target_law`.
        random_state : int, default=0
            Accepted for compatibility; the finite-d prior is deterministic (no draw).

        Returns
        -------
        FactoredDenoiser or DirectDenoiser
        """
        if self.parametrization == "factored":
            return FactoredDenoiser(law, width_ratio=self.width_ratio,
                                    reg_lambda=self.reg_lambda, n_features=self.n_features,
                                    target_eigenvalues=target_eigenvalues,
                                    random_state=random_state)
        if self.reg_lambda == 0:
            raise ValueError("reg_lambda must be > 0 for the direct parametrization "
                             "(use a small value for the ridgeless limit).")
        return DirectDenoiser(law, reg_lambda=self.reg_lambda)


MODEL_KEYWORDS = tuple(f.name for f in fields(StateEvolutionProblem))


def token_excess_kurtosis(token_distribution, token_df=None):
    """Excess kurtosis ``κ4 = E z⁴ − 3`` of unit-variance token entries of a named law.

    Parameters
    ----------
    token_distribution : {"gaussian", "rademacher", "student_t"}
        The laws of :func:`skattn.data.sample_tokens`.
    token_df : float, optional
        Student-t degrees of freedom; must be > 4 (the fourth moment is infinite below).

    Returns
    -------
    float
        0 (Gaussian), −2 (Rademacher), ``6/(df − 4)`` (Student-t).

    Raises
    ------
    ValueError
        For another law, or a Student-t without a finite fourth moment.
    """
    check_choice(token_distribution, "token_distribution", ("gaussian", "rademacher",
                                                            "student_t"))
    if token_distribution == "gaussian":
        return 0.0
    if token_distribution == "rademacher":
        return -2.0
    if token_df is None:
        raise ValueError("token_df is required for token_distribution='student_t'.")
    token_df = check_scalar_range(token_df, "token_df", low=4, low_inclusive=False)
    return 6.0 / (token_df - 4.0)


def require_gaussian_tokens(problem, caller):
    """Raise ValueError where ``caller`` has no kurtosis correction and κ4 ≠ 0."""
    if problem.token_kurtosis != 0.0:
        raise ValueError(f"{caller}() assumes Gaussian tokens (token_kurtosis=0); got "
                         f"token_kurtosis={problem.token_kurtosis}. Only the state evolution "
                         "(solve_state_evolution) has the kurtosis correction.")


def split_model_keywords(keywords):
    """Split keyword arguments into ``(model, other)``: fields of the problem, the rest."""
    model = {k: v for k, v in keywords.items() if k in MODEL_KEYWORDS}
    other = {k: v for k, v in keywords.items() if k not in MODEL_KEYWORDS}
    return model, other


def check_model_keywords(model, allowed, caller):
    """``model`` (the ``**model`` of a public call) after checking its names against
    ``allowed``; a TypeError names the unknown ones and lists those accepted.

    The public functions take the model as ``**model`` (documented keywords) rather than
    as keyword defaults, so that their signatures show no placeholder while "not given"
    stays distinguishable from a value equal to the default (a problem and a keyword
    together are an error, :func:`resolve_problem`).
    """
    unknown = sorted(set(model) - set(allowed))
    if unknown:
        raise TypeError(f"{caller}() got unexpected keyword argument(s) {unknown}; the model "
                        f"keywords it takes are {list(allowed)}.")
    return model


def resolve_problem(problem, caller, **model):
    """The problem of a call that takes either a problem or the model keywords.

    Parameters
    ----------
    problem : StateEvolutionProblem or None
    caller : str
        Name of the calling function, for the error messages.
    **model
        The model keywords of the call; those equal to :data:`UNSET` were not given. A
        teacher as ``target`` gives the same-instance problem
        (:meth:`StateEvolutionProblem.from_teacher`).

    Returns
    -------
    StateEvolutionProblem

    Raises
    ------
    ValueError
        If a problem and a model keyword are both given.
    TypeError
        If ``problem`` is not a StateEvolutionProblem, or a required keyword is missing.
    """
    given = {k: v for k, v in model.items() if v is not UNSET}
    if problem is None and is_teacher(given.get("target")):
        teacher = given.pop("target")
        return StateEvolutionProblem.from_teacher(teacher, **given)
    if problem is None:
        missing = [k for k in ("target", "n_tokens") if k not in given]
        if missing:
            raise TypeError(f"{caller}() needs a problem or the keyword {missing[0]!r}.")
        return StateEvolutionProblem(**given)
    if not isinstance(problem, StateEvolutionProblem):
        raise TypeError(f"problem must be a StateEvolutionProblem, got "
                        f"{type(problem).__name__}.")
    if given:
        key = next(iter(given))
        raise ValueError(f"{caller}() got both a problem and {key}=; change the problem "
                         f"instead: problem.replace({key}=...).")
    return problem


def warn_outside_domain(problem, eigenvalues, *, rank_capped=False, positive_fraction=np.nan,
                        spiky_modelled=False, stacklevel=3):
    """Warn (:class:`DomainWarning`) when a prediction leaves the validated domain.

    Parameters
    ----------
    problem : StateEvolutionProblem
    eigenvalues : ndarray of shape (d,) or None
        The target's eigenvalues at its d (None in the continuum, where no mode carries a
        finite share of ‖S0‖²_F).
    rank_capped : bool, default=False
        Whether the rank constraint binds at the fixed point.
    positive_fraction : float, default=nan
        Where it binds, the fraction of positive eigenvalues Ŝ would have without the cap
        (:attr:`PriorState.positive_fraction <skattn.theory.denoisers.PriorState>`).
    spiky_modelled : bool, default=False
        Whether the prediction treats a spiky softmax target fully (the spiked correction
        at full weight), or the target is below the spiky ramp: then no spiky warning.
    stacklevel : int, default=3
        Passed to :func:`warnings.warn` (3: the caller of the solver).

    Returns
    -------
    list of str
        The reasons warned about (empty inside the domain).
    """
    reasons = []
    if problem.attention == "softmax" and eigenvalues is not None and not spiky_modelled:
        share = top_mode_share(eigenvalues)
        if share > GAUSSIAN_EQUIVALENCE_MAX_SHARE:
            reasons.append(
                f"spiky target: its top mode carries {share:.0%} of ||S0||_F^2 (above "
                f"{GAUSSIAN_EQUIVALENCE_MAX_SHARE:.0%}), so the softmax pre-activations are "
                "not Gaussian and the softmax channel of the state evolution does not apply; "
                "the spiked state evolution keeps the top modes as explicit variables: "
                "solve_state_evolution fades it in at finite d for factored softmax seq2lab "
                "with T <= 4 as the share grows from 30% to 40% (corrections.rules."
                "SPIKY_SHARE_EDGES; in full above), unless correction='none' "
                "(docs: Spiky targets)")
    if (problem.attention == "linear" and problem.parametrization == "factored"
            and eigenvalues is not None):
        share = top_mode_share(eigenvalues)
        if share > GAUSSIAN_EQUIVALENCE_MAX_SHARE:
            reasons.append(
                f"spiky target: its top mode carries {share:.0%} of ||S0||_F^2 (above "
                f"{GAUSSIAN_EQUIVALENCE_MAX_SHARE:.0%}); the linear channel needs only second "
                "moments, but trained factored linear models sit above the same-instance "
                "prediction by several per cent, not shrinking with d, and the spiked state "
                "evolution does not close it (docs: Where the predictions hold, \"Spiky "
                "targets and the Gaussian channel\")")
    if rank_capped and problem.n_features is not None \
            and problem.n_features < RANK_CONSTRAINT_MIN_D:
        reasons.append(
            f"binding rank constraint (width_ratio={problem.width_ratio:g}) at "
            f"n_features={problem.n_features} < {RANK_CONSTRAINT_MIN_D}: the rank-capped "
            f"prediction is validated against trained models from d = {RANK_CONSTRAINT_MIN_D} "
            "on (there within the seed spread of a few %, like the uncapped one), not below")
    if rank_capped and np.isfinite(positive_fraction) \
            and problem.width_ratio < STRONG_RANK_CAP_SHARE * positive_fraction:
        reasons.append(
            f"strong rank cap: width_ratio={problem.width_ratio:g} is below "
            f"{STRONG_RANK_CAP_SHARE:g} x the fraction of positive eigenvalues without the "
            f"cap ({positive_fraction:.2f}); there gradient-trained students stop in other "
            "minima, below the prediction at every d (docs: Where the predictions hold, "
            "\"Rank-constrained students\")")
    for reason in reasons:
        warn(f"outside the validated domain: {reason}.", DomainWarning)
    return reasons
