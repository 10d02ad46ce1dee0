"""Finite-size corrections of the Gaussian core, behind one interface and one ordered table
(docs: Finite-size corrections).

:data:`CORRECTIONS` is the table ``correction="auto"`` applies, in order: the first
correction takes its weight of the prediction, the next its weight of what is left, and so
on; the Gaussian core keeps the rest. :func:`decide` gives the table's decisions for a
solved core, :func:`apply_table` the prediction.
"""

from __future__ import annotations

import numpy as np

from ..result import mixed_fraction
from .base import Applicability, Correction, CorrectionDecision, smooth_ramp
from .exact_gram import ExactGramCorrection
from .leverage import LeverageCorrection
from .spiked import SpikedCorrection

__all__ = ["CORRECTIONS", "CORRECTION_NAMES", "Correction", "CorrectionDecision",
           "Applicability", "decide", "apply_table", "check_correction", "smooth_ramp"]

#: the ordered table of ``correction="auto"``
CORRECTIONS = (SpikedCorrection(), LeverageCorrection(), ExactGramCorrection())
#: the names ``correction=`` accepts
CORRECTION_NAMES = ("auto", "none") + tuple(c.name for c in CORRECTIONS)

#: the scalar fields of a result that a weighted combination of corrections combines
_BLENDED = ("m", "q", "sigma", "m_hat", "q_hat", "sigma_hat", "test_error", "train_error",
            "train_objective", "eta", "delta", "epsilon")


def check_correction(correction):
    """``correction`` validated: one of :data:`CORRECTION_NAMES`."""
    if not isinstance(correction, str) or correction not in CORRECTION_NAMES:
        raise ValueError(f"correction must be one of {list(CORRECTION_NAMES)}, got "
                         f"{correction!r}.")
    return correction


def decide(alpha, problem, core, correction="auto"):
    """The decision table for a solved core.

    Parameters
    ----------
    alpha : float
    problem : StateEvolutionProblem
    core : CoreSolution
    correction : str, default="auto"
        "auto" weighs the whole table; "none" weighs nothing; a name gives that correction
        the full weight (ValueError where its domain excludes the problem).

    Returns
    -------
    decisions : list of CorrectionDecision
        One per correction, in table order.
    anchors : dict
        The anchor problem of each weighted correction (name → problem or None).
    """
    correction = check_correction(correction)
    decisions, anchors, remaining = [], {}, 1.0
    for item in CORRECTIONS:
        if core.collapsed:
            found = Applicability.no("the core collapsed to S = 0 (the trace penalty removes "
                                     "every direction): nothing to correct")
        else:
            found = item.decide(alpha, problem, core)
        if correction == "auto":
            weight = remaining * found.weight
        elif correction == item.name:
            if found.weight == 0:
                raise ValueError(f"correction={item.name!r} does not apply to this problem: "
                                 f"{found.reason}.")
            weight = 1.0
        else:
            weight = 0.0
        if correction == "auto" and found.weight > 0 and weight == 0:
            reason = found.reason + " (in its domain, but the corrections before it carry " \
                "the whole prediction)"
        elif correction == "auto" and found.weight > 0 and weight < found.weight:
            reason = found.reason + f" (carries {weight:.2f}: what the corrections before " \
                "it left)"
        else:
            reason = found.reason
        if correction not in ("auto", item.name) and found.weight > 0:
            reason = f"{found.reason} (not applied: correction={correction!r})"
        decisions.append(CorrectionDecision(item.name, item.models, float(weight),
                                            float(found.weight), reason))
        if weight > 0:
            anchors[item.name] = found.anchor
        remaining -= weight
    return decisions, anchors


def apply_table(alpha, problem, core, options, decisions, anchors, solve_core):
    """The prediction of a decided table: ``core + Σ_i w_i (corrected_i − core_i)``.

    Parameters
    ----------
    alpha : float
    problem : StateEvolutionProblem
    core : CoreSolution
    options : SolverOptions
    decisions, anchors
        From :func:`decide`.
    solve_core : callable
        ``solve_core(alpha, problem, options)``, for the core at an anchor.

    Returns
    -------
    StateEvolutionResult
    """
    from dataclasses import replace

    base = core.result
    pieces = []
    by_name = {c.name: c for c in CORRECTIONS}
    for decision in decisions:
        if decision.weight <= 0:
            continue
        anchor = anchors[decision.name]
        anchor_core = core if anchor is None else solve_core(alpha, anchor, options)
        if anchor is not None and anchor_core.collapsed:
            continue
        corrected = by_name[decision.name].apply(alpha, anchor or problem, anchor_core,
                                                 options)
        pieces.append((decision, corrected, anchor_core.result))
    extras = {"core_test_error": base.test_error}
    if not pieces:
        return replace(base, correction="none", correction_weight=0.0,
                       correction_reason=_none_reason(decisions), decisions=tuple(decisions),
                       extras={**base.extras, **extras})
    values = {name: getattr(base, name) for name in _BLENDED}
    trace = base.trace
    for decision, corrected, at_anchor in pieces:
        w = decision.weight
        for name in _BLENDED:
            values[name] += w * (getattr(corrected, name) - getattr(at_anchor, name))
        trace += w * (corrected.trace - at_anchor.trace)
        extras.update(corrected.extras)
    lead, lead_result, _ = max(pieces, key=lambda p: p[0].weight)
    total = sum(p[0].weight for p in pieces)
    converged = bool(base.converged and all(p[1].converged for p in pieces)
                     and np.all(np.isfinite(list(values.values()))))
    spectrum = _capped_spectrum(_blend_spectra(base, pieces), problem)
    certified = mixed_fraction([1 - total] + [p[0].weight for p in pieces],
                               [base.certified_fraction]
                               + [p[1].certified_fraction for p in pieces])
    label = ", ".join(f"{d.name} {d.weight:.2f}" if d.weight < 1 else d.name
                      for d, _, _ in pieces)
    # a converged prediction keeps the lead correction's message (a continuation in λ, say)
    message = (lead_result.message if converged else
               "; ".join(r.message for r in [base] + [p[1] for p in pieces]
                         if not r.converged) or "non-finite values")
    params = {**lead_result.params, "trace": trace}
    for key in ("uncertified_bound", "uncertified_effect"):
        extras[key] = _blended_worst_case(base, pieces, key)
    return replace(
        lead_result, **values, converged=converged,
        n_iter=base.n_iter + sum(p[1].n_iter for p in pieces),
        residual=float(max([base.residual] + [p[1].residual for p in pieces])),
        message=f"{message} (correction: {label})", params=params,
        finite_eigenvalues=spectrum, certified_fraction=float(certified),
        correction=lead.name, correction_weight=float(lead.weight),
        correction_reason=lead.reason, decisions=tuple(decisions),
        extras={**lead_result.extras, **extras}, problem=problem, alpha=base.alpha)


def _own_worst_case(result, key="uncertified_bound"):
    """The uncertified-node bound (``key``: or its first-order effect on the prediction)
    of one term of the blend: the one its solve carries (a core's, from its output side;
    each correction sets its own), else zeros where every node is certified, else None
    (uncertified nodes and no bound)."""
    if key in result.extras:
        return result.extras[key]
    return {} if result.certified_fraction == 1.0 else None


def _blended_worst_case(base, pieces, key="uncertified_bound"):
    """How far uncertified prox minimisers can move the blend
    ``core + Σ_i w_i (corrected_i − anchor_i)``: each term's worst case (``key``: the bound
    on its conjugates, or that bound's effect on its prediction) times the absolute value
    of its coefficient, summed (an anchor that is the core adds to the core's
    coefficient). None where a term with a nonzero coefficient has none."""
    terms = [(1.0, _own_worst_case(base, key))]
    for decision, corrected, at_anchor in pieces:
        terms.append((decision.weight, _own_worst_case(corrected, key)))
        if at_anchor is base:
            terms[0] = (terms[0][0] - decision.weight, terms[0][1])
        else:
            terms.append((-decision.weight, _own_worst_case(at_anchor, key)))
    if any(b is None and c != 0.0 for c, b in terms):
        return None
    terms = [(c, b or {}) for c, b in terms]
    keys = sorted({k for _, b in terms for k in b})
    return {k: float(sum(abs(c) * b.get(k, 0.0) for c, b in terms)) for k in keys}


def _none_reason(decisions):
    return "; ".join(f"{d.name}: {d.reason}" for d in decisions)


def _capped_spectrum(spectrum, problem):
    """The rank cap on a blended spectrum (a full-width anchor's difference, added across
    the ramp where the cap starts to bind, must not give Ŝ more than p = κd positive
    eigenvalues), clipped at 0 as Ŝ ⪰ 0."""
    if spectrum is None or problem.width_ratio >= 1:
        return spectrum
    out = np.sort(np.maximum(np.asarray(spectrum, float), 0.0))
    rank = min(out.size, max(1, int(round(problem.width_ratio * out.size))))
    out[: out.size - rank] = 0.0
    return out


def _blend_spectra(base, pieces):
    """Sorted spectra combined as the scalars are (a quantile-wise combination, continuous
    in the weights); the lead correction's where sizes differ."""
    if base.finite_eigenvalues is None:
        return None
    out = np.sort(np.asarray(base.finite_eigenvalues, float))
    for decision, corrected, at_anchor in pieces:
        a = corrected.finite_eigenvalues
        b = at_anchor.finite_eigenvalues
        if a is None or b is None or len(a) != out.size or len(b) != out.size:
            lead = max(pieces, key=lambda p: p[0].weight)[1]
            return lead.finite_eigenvalues
        out = out + decision.weight * (np.sort(a) - np.sort(b))
    return out
