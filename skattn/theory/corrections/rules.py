"""The domain rules the corrections share: where each fades in and out.

Every edge is a smooth ramp (:func:`~skattn.theory.corrections.base.smooth_ramp`), never a
step, so the prediction is continuous in d, α, κ4, κ and the top-mode share. The measurements
behind them are in docs: Validation report, "The correction table at its edges".
"""

from __future__ import annotations

import numpy as np

from ..problem import top_mode_share
from ..core.solve import RANK_CAP_RAMP, rank_cap_weight
from .base import Applicability, smooth_ramp

__all__ = ["SPIKY_SHARE_EDGES", "KURTOSIS_FADE", "ANISOTROPY_EDGES", "spiky_weight",
           "kurtosis_anchor", "full_width_anchor", "common_domain", "anisotropy_weight",
           "combine"]

#: The spiked correction fades in as the top mode's share of ‖S0‖²_F grows from the first to
#: the second value; the Gaussian-equivalence corrections fade out across the same ramp.
SPIKY_SHARE_EDGES = (0.30, 0.40)
#: Corrections computed for Gaussian tokens fade out as ``|κ4|`` grows from 0 to this value; in
#: between they are computed at κ4 = 0 and carried over as a difference to the core.
KURTOSIS_FADE = 0.25
#: Corrections whose channel separates S0 into its trace and its traceless part need the
#: traceless part: they fade out as ``1 − (Tr S0/d)² / (Tr S0²/d)`` falls from the second
#: value to the first (S0 = c·I has none).
ANISOTROPY_EDGES = (0.01, 0.05)


def anisotropy_weight(eigenvalues):
    """``(weight, ratio)``: the share of ``Tr S0²`` off the identity direction and the
    :data:`ANISOTROPY_EDGES` ramp on it (1 where S0 is far from c·I)."""
    if eigenvalues is None:
        return 1.0, 1.0
    e = np.asarray(eigenvalues, dtype=float)
    second = float(np.mean(e ** 2))
    ratio = 0.0 if second == 0 else max(0.0, 1.0 - float(np.mean(e)) ** 2 / second)
    return smooth_ramp(ratio, *ANISOTROPY_EDGES), ratio


def spiky_weight(eigenvalues):
    """The weight of the spiked treatment for a target with these eigenvalues (0 for a
    Gaussian-equivalent one, 1 for a spiky one) and the share it is judged by."""
    if eigenvalues is None:
        return 0.0, 0.0
    share = top_mode_share(eigenvalues)
    return smooth_ramp(share, *SPIKY_SHARE_EDGES), share


def kurtosis_anchor(problem):
    """``(weight, anchor, reason)`` of the token-kurtosis fade: a correction made for
    Gaussian tokens applies fully at κ4 = 0 and fades out by ``|κ4|`` = :data:`KURTOSIS_FADE`,
    computed at the Gaussian-token anchor in between."""
    kurtosis = problem.token_kurtosis
    if kurtosis == 0:
        return 1.0, None, ""
    weight = 1.0 - smooth_ramp(abs(kurtosis), 0.0, KURTOSIS_FADE)
    reason = (f"token_kurtosis={kurtosis:g}: computed for Gaussian tokens and faded out by "
              f"|κ4| = {KURTOSIS_FADE:g}")
    return weight, problem.replace(token_kurtosis=0.0), reason


def full_width_anchor(problem, core):
    """The full-width problem at ``√κ λ`` where a rank cap ``κ < 1`` does not bind (the same
    minimiser, docs: Theory §2; also across the ramp where it starts to bind, see
    :func:`rank_cap_part`), or the problem itself; None where the cap binds fully."""
    if problem.width_ratio >= 1:
        return problem
    if rank_cap_part(problem, core)[0] == 0:
        return None
    return problem.replace(width_ratio=1.0, reg_lambda=problem.reg_trace)


def rank_cap_part(problem, core, rank_cap_ok=False):
    """``(weight, reason)`` of a rank cap: 1 where it does not bind, fading to 0 over the
    core's own ramp from α_eff to α (:func:`~skattn.theory.core.solve.rank_cap_weight`: the
    uncapped positive fraction over κ from 1 to ``1 + RANK_CAP_RAMP``), so that a
    correction does not switch off where the cap starts to bind."""
    if rank_cap_ok or problem.width_ratio >= 1:
        return 1.0, ""
    fraction = core.positive_fraction
    if core.rank_capped and not np.isfinite(fraction):
        weight = 0.0  # binding, without the fraction to say how far: fully
    else:
        weight = 1.0 - rank_cap_weight(fraction, problem.width_ratio)
    return weight, (f"a rank cap binds (positive fraction {fraction:.3f} against "
                    f"width_ratio={problem.width_ratio:g}; faded out by "
                    f"{1 + RANK_CAP_RAMP:g} x width_ratio)")


def common_domain(problem, core, *, tasks=("seq2lab",), rank_cap_ok=False):
    """The checks every finite-d correction shares: finite d, factored, one of ``tasks``, a
    rank cap that does not bind fully (unless ``rank_cap_ok``; its fade is
    :func:`rank_cap_part`). An :class:`Applicability` that says no, or None where they
    pass."""
    if problem.n_features is None:
        return Applicability.no("continuum (n_features=None): no finite-size correction")
    if problem.parametrization != "factored":
        return Applicability.no("direct parametrization: the core is exact there")
    if problem.task not in tasks:
        return Applicability.no(f"task={problem.task!r} (this correction: "
                                f"{' or '.join(tasks)})")
    weight, reason = rank_cap_part(problem, core, rank_cap_ok)
    if weight == 0:
        return Applicability.no(reason)
    return None


def combine(*parts):
    """Multiply ``(weight, reason)`` parts; the reasons of parts below 1 are joined."""
    weight = float(np.prod([w for w, _ in parts]))
    reasons = [r for w, r in parts if r and w < 1]
    return weight, "; ".join(reasons)
