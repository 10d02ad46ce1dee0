"""The spiked correction: a spiky target's top modes as explicit non-Gaussian variables
(:mod:`skattn.theory.spiked`, docs: Spiky targets)."""

from __future__ import annotations

from ..core.iteration import solve_or_continue
import numpy as np

from ..spiked import SPIKED_ROUTED_N_TOKENS, spike_count, spiked_prediction
from .base import Applicability, Correction, log_ramp, smooth_ramp
from .rules import (SPIKY_SHARE_EDGES, combine, common_domain, full_width_anchor,
                    kurtosis_anchor, rank_cap_part, spiky_weight)

__all__ = ["SpikedCorrection", "SPIKED_BULK_SIZE", "SPIKED_BULK_SHARE"]

#: the Gaussian bulk beside the explicit modes needs this many eigenvalues: the correction
#: fades in (log-smoothly) as the bulk grows from the first to the second
SPIKED_BULK_SIZE = (6, 12)
#: ... and this share of ``Tr S0²`` (a rank-one target has no bulk to be Gaussian)
SPIKED_BULK_SHARE = (0.0, 0.02)


class SpikedCorrection(Correction):
    """Factored softmax seq2lab at finite d on a spiky target (T in
    :data:`~skattn.theory.spiked.SPIKED_ROUTED_N_TOKENS`): the top modes that break Gaussian
    equivalence are kept as explicit variables, the bulk stays Gaussian. It fades in as the
    top mode's share of ‖S0‖²_F crosses :data:`~.rules.SPIKY_SHARE_EDGES`."""

    name = "spiked"
    models = ("a spiky target's top modes as explicit non-Gaussian variables (softmax "
              "pre-activations are not Gaussian along them)")

    def decide(self, alpha, problem, core):
        no = common_domain(problem, core)
        if no is not None:
            return no
        if problem.attention != "softmax":
            return Applicability.no("linear attention: its channel needs only second moments")
        if problem.n_tokens not in SPIKED_ROUTED_N_TOKENS:
            return Applicability.no(f"n_tokens={problem.n_tokens} (validated for "
                                    f"{list(SPIKED_ROUTED_N_TOKENS)})")
        spiky, share = spiky_weight(core.eigenvalues)
        if spiky == 0:
            return Applicability.no(f"the top mode carries {share:.0%} of ||S0||_F^2 (spiked "
                                    f"from {SPIKY_SHARE_EDGES[0]:.0%})")
        eig = np.asarray(core.eigenvalues, dtype=float)
        n_spikes = spike_count(eig)
        bulk = np.sort(np.abs(eig))[:eig.size - n_spikes]
        bulk_share = float(np.sum(bulk ** 2) / np.sum(eig ** 2))
        bulk_weight = log_ramp(max(bulk.size, 1), *SPIKED_BULK_SIZE) * smooth_ramp(
            bulk_share, *SPIKED_BULK_SHARE)
        if bulk_weight == 0:
            return Applicability.no(
                f"no Gaussian bulk beside the {n_spikes} explicit mode(s): {bulk.size} "
                f"eigenvalues carrying {bulk_share:.1%} of ||S0||_F^2 (needs more than "
                f"{SPIKED_BULK_SIZE[0]} and {SPIKED_BULK_SHARE[0]:.0%})")
        anchor = full_width_anchor(problem, core)
        kurtosis_weight, kurtosis_problem, kurtosis_reason = kurtosis_anchor(anchor)
        if kurtosis_problem is not None:
            anchor = kurtosis_problem
        weight, faded = combine(
            (spiky, f"top-mode share {share:.0%} inside the ramp "
                    f"{SPIKY_SHARE_EDGES[0]:.0%}-{SPIKY_SHARE_EDGES[1]:.0%}"),
            (kurtosis_weight, kurtosis_reason),
            (bulk_weight, f"a small bulk ({bulk.size} eigenvalues, {bulk_share:.1%} of "
                          "||S0||_F^2)"),
            rank_cap_part(problem, core))
        reason = f"spiky target (top mode {share:.0%} of ||S0||_F^2)"
        return Applicability(weight, reason + (f"; faded: {faded}" if faded else ""),
                             None if anchor is problem else anchor)

    def apply(self, alpha, problem, core, options):
        eigenvalues = core.eigenvalues

        def solve(reg_lambda, start):
            return spiked_prediction(
                alpha, problem.replace(reg_lambda=reg_lambda), eigenvalues,
                n_nodes=options.n_nodes, tol=options.tol,
                max_iter=options.max_iter, damping=options.damping, init=start,
                random_state=options.random_state)

        result = solve_or_continue(solve, problem.reg_lambda, options.init)
        for key in ("n_spikes", "spike_strengths", "target_spike_strengths",
                    "test_error_standard_error"):
            if key in result.params:
                result.extras[key] = result.params[key]
        return result
