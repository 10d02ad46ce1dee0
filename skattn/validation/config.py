"""Configuration of a finite-size-scaling run (:mod:`skattn.validation`)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from .._validation import check_choice, check_scalar_range
from ..data.targets import check_target_spec, target_from_spec

__all__ = ["FSSConfig"]

# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FSSConfig:
    """One configuration of the model, the data and the estimator.

    Parameters
    ----------
    alpha : float
        Sample ratio α = n/d² > 0 (``n = round(α d²)``).
    reg_lambda : float
        λ ≥ 0 (> 0 for ``estimator="direct"``).
    n_tokens : int, default=2
        T (≥ 2 for softmax, ≥ 1 for linear attention).
    attention : {"softmax", "linear"}, default="softmax"
    beta, target_beta : float, default=1.0
        Inverse temperatures of the student and of the teacher.
    noise : float, default=0.0
        Label noise Δ ≥ 0.
    task : {"seq2lab", "seq2seq"}, default="seq2lab"
    target : dict, default={"family": "wishart", "kappa0": 0.5}
        ``{"family": "wishart", "kappa0": κ0}`` or
        ``{"family": "powerlaw", "gamma": γ, "cutoff": None}``: the target spec of
        :func:`skattn.data.check_target_spec`, shared with :mod:`skattn.experiments`.
    estimator : {"tied", "direct"}, default="tied"
        :class:`~skattn.TiedAttentionRegressor` or :class:`~skattn.DirectAttentionRegressor`.
    width_ratio : float, default=1.0
        κ = p/d of the tied model (ignored by "direct").
    solver : {"lbfgs", "adam"}, default="lbfgs"
    max_iter : int, default=5000
    tol : float, default=1e-6
    dtype : {"float64", "float32"}, default="float64"
    label : str, default=""
        A readable name for tables and figures.

    Notes
    -----
    :attr:`outside_gaussian_equivalence` flags softmax on power-law targets whose top mode
    keeps more than ``GAUSSIAN_EQUIVALENCE_MAX_SHARE`` of ``‖S0‖²_F`` as d grows (γ = 0.75: 0.40)
    where the spiked state evolution does not apply: the Gaussian equivalence behind the
    state evolution then fails (docs: Theory §8, Where the predictions hold, Spiky
    targets); such
    configurations are run and reported, but flagged.
    """

    alpha: float
    reg_lambda: float
    n_tokens: int = 2
    attention: str = "softmax"
    beta: float = 1.0
    target_beta: float = 1.0
    noise: float = 0.0
    task: str = "seq2lab"
    target: dict = field(default_factory=lambda: {"family": "wishart", "kappa0": 0.5})
    estimator: str = "tied"
    width_ratio: float = 1.0
    solver: str = "lbfgs"
    max_iter: int = 5000
    tol: float = 1e-6
    dtype: str = "float64"
    label: str = ""

    def __post_init__(self):
        check = object.__setattr__
        check(self, "alpha", check_scalar_range(self.alpha, "alpha", low=0, low_inclusive=False))
        check(self, "reg_lambda", check_scalar_range(self.reg_lambda, "reg_lambda", low=0))
        check_choice(self.attention, "attention", ("softmax", "linear"))
        check(self, "n_tokens", check_scalar_range(
            self.n_tokens, "n_tokens", low=2 if self.attention == "softmax" else 1,
            integer=True))
        for name in ("beta", "target_beta", "width_ratio", "tol"):
            check(self, name, check_scalar_range(getattr(self, name), name, low=0,
                                                 low_inclusive=False))
        check(self, "noise", check_scalar_range(self.noise, "noise", low=0))
        check(self, "max_iter", check_scalar_range(self.max_iter, "max_iter", low=1,
                                                   integer=True))
        check_choice(self.task, "task", ("seq2lab", "seq2seq"))
        check_choice(self.estimator, "estimator", ("tied", "direct"))
        check_choice(self.solver, "solver", ("lbfgs", "adam"))
        check_choice(self.dtype, "dtype", ("float64", "float32"))
        if self.estimator == "direct" and self.reg_lambda == 0:
            raise ValueError("reg_lambda must be > 0 for estimator='direct' (docs: Theory §5).")
        if not isinstance(self.label, str):
            raise ValueError(f"label must be a str, got {type(self.label).__name__}.")
        check(self, "target", check_target_spec(self.target))

    # ---- conversions ------------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec):
        """Build from a dict of the fields (unknown keys raise ``ValueError``)."""
        if isinstance(spec, cls):
            return spec
        if not isinstance(spec, dict):
            raise ValueError(f"config must be an FSSConfig or a dict, got "
                             f"{type(spec).__name__}.")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(spec) - names)
        if unknown:
            raise ValueError(f"config has unknown keys {unknown}; expected a subset of "
                             f"{sorted(names)}.")
        return cls(**spec)

    def to_dict(self):
        """The fields as a plain dict (JSON-serialisable)."""
        return {f.name: (dict(getattr(self, f.name)) if f.name == "target"
                         else getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self):
        """Canonical JSON (sorted keys): the sweep parameter that identifies the config."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    # ---- derived ----------------------------------------------------------------------
    @property
    def outside_gaussian_equivalence(self):
        """Softmax on a spiky target that the spiked state evolution does not cover
        (:func:`skattn.theory.spiked.spiked_route_covers`): outside the domain of the theory
        (docs: Theory §8, docs: Spiky targets).

        Spiky: a power law whose top-mode share at d = 10 000 (its d → ∞ value for γ > 1/2;
        Wishart shares vanish) exceeds the threshold of
        :func:`skattn.theory.problem.warn_outside_domain`.
        """
        if self.attention != "softmax" or self.target["family"] != "powerlaw":
            return False
        from ..theory.laws import power_law_eigenvalues
        from ..theory.problem import is_spiky
        from ..theory.spiked import spiked_route_covers
        if spiked_route_covers(self.attention, "factored" if self.estimator == "tied"
                               else self.estimator, self.task, self.n_tokens,
                               self.width_ratio):
            return False    # predicted by the spiked state evolution (docs: Spiky targets)

        eig = power_law_eigenvalues(self.target["gamma"], 10_000, self.target.get("cutoff"))
        return is_spiky(eig)

    @property
    def has_continuum(self):
        """Whether a d → ∞ target law exists (not for power-law targets)."""
        return self.target["family"] != "powerlaw"

    def make_target(self):
        """The :class:`~skattn.data.Target` of the spec."""
        return target_from_spec(self.target)

    def se_kwargs(self):
        """Keyword arguments of :func:`~skattn.theory.solve_state_evolution` (no target)."""
        direct = self.estimator == "direct"
        return dict(alpha=self.alpha, n_tokens=self.n_tokens, reg_lambda=self.reg_lambda,
                    width_ratio=1.0 if direct else self.width_ratio, beta=self.beta,
                    target_beta=self.target_beta, noise=self.noise,
                    attention=self.attention, task=self.task,
                    parametrization="direct" if direct else "factored")

    def describe(self):
        """A compact one-line description of the non-default fields."""
        if self.label:
            return self.label
        default = FSSConfig(alpha=self.alpha, reg_lambda=self.reg_lambda)
        parts = [f"α={self.alpha:g}", f"λ={self.reg_lambda:g}"]
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name not in ("alpha", "reg_lambda", "label") and v != getattr(default, f.name):
                parts.append(f"{f.name}={v}")
        return " ".join(parts)
