"""The numerical options of the state-evolution solver, in one validated object.

As :func:`scipy.optimize.minimize` takes its method knobs in ``options=``, the solver takes
everything that changes *how* a fixed point is found — not *which* problem is solved — in a
:class:`SolverOptions` (or a plain dict of its fields).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from ..._validation import check_choice, check_scalar_range
from ..result import StateEvolutionResult

__all__ = ["SolverOptions", "resolve_options", "OPTION_NAMES"]

#: nodes of the coarse stage of coarse-to-fine iteration (a Sobol prefix of the nodes)
DEFAULT_COARSE_NODES = 1024


@dataclass(frozen=True)
class SolverOptions:
    """Numerical options of :func:`~skattn.theory.solve_state_evolution`.

    Parameters
    ----------
    n_nodes : int, default=8192
        Quasi-Monte Carlo nodes for the Gaussian expectations (a power of two is best).
    tol : float, default=1e-7
        Tolerance on the fixed-point residual (relative, on ``m/√(qQ0)``, ``log q``,
        ``log Σ``).
    max_iter : int, default=600
        Maximum number of evaluations of the fixed-point map (those of a multi-start
        memory stage that the polish sets aside are counted in ``n_iter`` but not here;
        docs: Theory §4).
    damping : float in (0, 1], default=0.5
        Weight of the new iterate in damped iterations.
    init : StateEvolutionResult or tuple (m, q, sigma) or None, default=None
        Warm start.
    sigma_hat_form : {"auto", "stein", "pointwise"}, default="auto"
        How Σ̂ is averaged: "pointwise" is ``(2α/Σ) E Tr(I − (I+ΣH)⁻¹)``, "stein" the
        q-derivative of the averaged Moreau envelope (right where the softmax prox is
        non-convex). "auto": "pointwise" for the linear channel, "stein" for softmax.
    random_state : int or None, default=0
        Seeds the quadrature nodes and the finite-d draws (fixed: the map is deterministic).
    n_coarse_nodes : int or None, default=1024
        Coarse to fine: the fixed point is first iterated on this many nodes (all of them
        for linear attention) with the prior side on one fixed draw, then with the exact
        equations on all nodes from there (only the path changes). None: the exact
        equations on all nodes from the start.
    verbose : int or bool, default=0
        0: silent; 1: a progress bar of the map's evaluations (the last residual, the
        kind of evaluation, the node count); 2: also one line per evaluation (its state,
        residual and seconds) and one for the result. Reporting changes no result.
    """

    n_nodes: int = 8192
    tol: float = 1e-7
    max_iter: int = 600
    damping: float = 0.5
    init: object = None
    sigma_hat_form: str = "auto"
    random_state: int | None = 0
    n_coarse_nodes: int | None = DEFAULT_COARSE_NODES
    verbose: int = 0

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "n_nodes", check_scalar_range(self.n_nodes, "n_nodes", low=16,
                                                 integer=True))
        set_(self, "tol", check_scalar_range(self.tol, "tol", low=0, low_inclusive=False))
        set_(self, "max_iter", check_scalar_range(self.max_iter, "max_iter", low=1,
                                                  integer=True))
        set_(self, "damping", check_scalar_range(self.damping, "damping", low=0, high=1,
                                                 low_inclusive=False))
        if self.n_coarse_nodes is not None:
            set_(self, "n_coarse_nodes", check_scalar_range(
                self.n_coarse_nodes, "n_coarse_nodes", low=16, integer=True))
        check_choice(self.sigma_hat_form, "sigma_hat_form", ("auto", "stein", "pointwise"))
        verbose = self.verbose
        set_(self, "verbose", int(verbose) if isinstance(verbose, (bool, np.bool_)) else
             check_scalar_range(verbose, "verbose", low=0, integer=True))
        rs = self.random_state
        if not (rs is None or (isinstance(rs, (int, np.integer)) and not isinstance(rs, bool)
                               and 0 <= rs < 2 ** 32)):
            raise ValueError(f"random_state must be an int in [0, 2**32 - 1] or None (it "
                             f"seeds the fixed quadrature nodes and draws), got {rs!r}.")
        set_(self, "random_state", 0 if rs is None else int(rs))
        set_(self, "init", _check_init(self.init))

    def replace(self, **changes):
        """A copy with ``changes`` applied (validated again)."""
        return replace(self, **changes)

    def as_dict(self):
        """The options as a dict (``init`` included)."""
        return asdict(self) if self.init is None else \
            {f.name: getattr(self, f.name) for f in fields(self)}

    def sigma_hat_form_for(self, attention):
        """The Σ̂ form used for ``attention`` ("auto" resolved)."""
        if self.sigma_hat_form != "auto":
            return self.sigma_hat_form
        return "pointwise" if attention == "linear" else "stein"


OPTION_NAMES = tuple(f.name for f in fields(SolverOptions))


def _check_init(init):
    if init is None or isinstance(init, StateEvolutionResult):
        return init
    try:
        values = tuple(float(v) for v in init)
        if len(values) != 3:
            raise ValueError
    except (TypeError, ValueError) as exc:
        raise ValueError("init must be a StateEvolutionResult or a tuple (m, q, sigma) of "
                         f"three finite numbers, got {init!r}.") from exc
    if not (np.isfinite(values).all() and values[1] > 0 and values[2] > 0):
        raise ValueError(f"init must have finite m and q, sigma > 0, got {init!r}.")
    return values


def resolve_options(options=None, **overrides):
    """A :class:`SolverOptions` from ``options`` (None, a dict or a SolverOptions) with
    ``overrides`` applied; unknown names raise ValueError listing the valid ones."""
    if options is None:
        base = {}
    elif isinstance(options, SolverOptions):
        base = options.as_dict()
    elif isinstance(options, dict):
        base = dict(options)
    else:
        raise TypeError(f"options must be a dict, a SolverOptions or None, got "
                        f"{type(options).__name__}.")
    base.update(overrides)
    unknown = sorted(set(base) - set(OPTION_NAMES))
    if unknown:
        raise ValueError(f"unknown solver option(s) {unknown}; the options are "
                         f"{list(OPTION_NAMES)}.")
    return SolverOptions(**base)
