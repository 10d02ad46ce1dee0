"""The interface every finite-size correction implements (docs: Finite-size
corrections).

A correction refines the Gaussian core's fixed point at finite d. It declares

- ``name`` and ``models`` (one line: what it models);
- :meth:`Correction.decide`: how much it applies to a problem — a weight in [0, 1] with the
  reason, and optionally the *anchor*, the nearest problem inside its domain at which it is
  computed;
- :meth:`Correction.apply`: its result at the anchor, started from the core's solution there.

The engine (:func:`skattn.theory.solve_state_evolution`) applies the ordered table: each
correction takes its weight of what the corrections before it left, and the prediction is
``core + Σ_i w_i (corrected_i − core_at_anchor_i)``. A weight that fades to 0 across a domain
edge, and anchors that move continuously, keep the prediction continuous there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Correction", "CorrectionDecision", "Applicability", "smooth_ramp"]


@dataclass(frozen=True)
class Applicability:
    """How much a correction applies: ``weight`` in [0, 1], ``reason`` in words, and the
    ``anchor`` problem it is computed at (None: the problem itself)."""

    weight: float
    reason: str
    anchor: object = None

    @classmethod
    def no(cls, reason):
        """Does not apply, because ``reason``."""
        return cls(0.0, reason)


@dataclass(frozen=True)
class CorrectionDecision:
    """One row of the decision table of :func:`skattn.theory.explain`.

    Attributes
    ----------
    name : str
        The correction.
    models : str
        What it models, in one line.
    weight : float
        Its weight in the prediction, in [0, 1] (0: not applied; between 0 and 1: faded
        towards a domain edge, or left partly to corrections before it in the table).
    domain_weight : float
        The weight its own domain gives it, before the corrections ahead of it in the table.
    reason : str
        Why it applies, or why not.
    """

    name: str
    models: str
    weight: float
    domain_weight: float
    reason: str

    @property
    def applies(self):
        """Whether the correction enters the prediction (``weight > 0``)."""
        return self.weight > 0


class Correction:
    """Base class of a finite-size correction (see the module docstring)."""

    #: the name used in ``correction=`` and recorded in ``result.correction``
    name = ""
    #: what it models, in one line
    models = ""

    def decide(self, alpha, problem, core):
        """How much the correction applies.

        Parameters
        ----------
        alpha : float
        problem : StateEvolutionProblem
        core : CoreSolution
            The core's fixed point of ``problem`` (not collapsed).

        Returns
        -------
        Applicability
        """
        raise NotImplementedError

    def apply(self, alpha, problem, core, options):
        """The corrected result at ``problem`` (the anchor), started from ``core``.

        Parameters
        ----------
        alpha : float
        problem : StateEvolutionProblem
            The anchor.
        core : CoreSolution
            The core's fixed point at the anchor.
        options : SolverOptions

        Returns
        -------
        StateEvolutionResult
        """
        raise NotImplementedError


def smooth_ramp(x, low, high):
    """0 below ``low``, 1 above ``high``, the C¹ smoothstep ``3t² − 2t³`` between.

    Parameters
    ----------
    x, low, high : float
        ``low < high``.

    Returns
    -------
    float
    """
    if x <= low:
        return 0.0
    if x >= high:
        return 1.0
    t = (x - low) / (high - low)
    return float(t * t * (3.0 - 2.0 * t))


def log_ramp(x, low, high):
    """:func:`smooth_ramp` in ``log x`` (for edges in d and in ratios)."""
    return smooth_ramp(np.log(x), np.log(low), np.log(high))
