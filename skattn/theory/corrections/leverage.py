"""The leverage correction: the spread of each sample's leverage of the token directions
(:mod:`skattn.theory.leverage_mixture`, docs: Theory §4 "Leverage mixture")."""

from __future__ import annotations

from dataclasses import replace

from ..leverage_mixture import leverage_prediction
from ..thresholds import perfect_recovery_threshold
from .base import Applicability, Correction, log_ramp, smooth_ramp
from .rules import combine, common_domain, kurtosis_anchor, rank_cap_part, spiky_weight

__all__ = ["LeverageCorrection", "LEVERAGE_N_TOKENS", "LEVERAGE_D_FADE_IN",
           "LEVERAGE_D_FADE_OUT", "NOISELESS_ALPHA_PERF_FADE"]

#: token counts, by attention, that the leverage correction applies to
LEVERAGE_N_TOKENS = {"softmax": (2,), "linear": (1,)}
#: it fades in (log-smoothly) as d grows from the first value to the second ...
LEVERAGE_D_FADE_IN = (20, 40)
#: ... and out from the first to the second (the correction falls like 1/d)
LEVERAGE_D_FADE_OUT = (400, 480)
#: for a noiseless linear teacher it fades in as α/α_perf grows across this ramp (below
#: α_perf the Gaussian core is closer to trained models: the validation report)
NOISELESS_ALPHA_PERF_FADE = (1.0, 1.1)


class LeverageCorrection(Correction):
    """Factored seq2lab, softmax T = 2 and linear T = 1, Gaussian tokens, no binding rank
    cap: the output side averaged over the law of the per-sample leverage of the token
    directions. Fades in over d ∈ :data:`LEVERAGE_D_FADE_IN`, out over
    :data:`LEVERAGE_D_FADE_OUT`, out across the spiky ramp and with ``|κ4|``, and — for a noiseless
    linear teacher — in across :data:`NOISELESS_ALPHA_PERF_FADE` (× α_perf)."""

    name = "leverage"
    models = ("the spread of the per-sample leverage of the token directions (a 1/d effect "
              "of the token structure on the fixed point)")

    def decide(self, alpha, problem, core):
        no = common_domain(problem, core)
        if no is not None:
            return no
        allowed = LEVERAGE_N_TOKENS.get(problem.attention, ())
        if problem.n_tokens not in allowed:
            return Applicability.no(f"n_tokens={problem.n_tokens} with {problem.attention} "
                                    f"attention (this correction: {allowed})")
        d = problem.n_features
        low, high = LEVERAGE_D_FADE_IN
        out_low, out_high = LEVERAGE_D_FADE_OUT
        if d <= low or d >= out_high:
            return Applicability.no(f"n_features={d} outside ({low}, {out_high})")
        d_weight = log_ramp(d, low, high) * (1.0 - log_ramp(d, out_low, out_high))
        spiky, share = spiky_weight(core.eigenvalues)
        kurtosis_weight, anchor, kurtosis_reason = kurtosis_anchor(problem)
        parts = [(d_weight, f"n_features={d} inside the ramps {LEVERAGE_D_FADE_IN} / "
                            f"{LEVERAGE_D_FADE_OUT}"),
                 (1.0 - spiky, f"top-mode share {share:.0%} (spiky ramp)"),
                 (kurtosis_weight, kurtosis_reason), rank_cap_part(problem, core)]
        if problem.attention == "linear" and problem.noise == 0:
            alpha_perf = perfect_recovery_threshold(target=problem.target, n_tokens=1,
                                                    attention="linear", n_features=d)
            ratio = alpha / alpha_perf
            parts.append((smooth_ramp(ratio, *NOISELESS_ALPHA_PERF_FADE),
                          f"noiseless linear teacher at α = {ratio:.2f} α_perf (fades in "
                          f"over {NOISELESS_ALPHA_PERF_FADE} α_perf)"))
        weight, faded = combine(*parts)
        if weight == 0:
            return Applicability.no(faded)
        reason = f"factored {problem.attention} T = {problem.n_tokens} at d = {d}"
        return Applicability(weight, reason + (f"; faded: {faded}" if faded else ""), anchor)

    def apply(self, alpha, problem, core, options):
        # the mixture at the core's own sample ratio (α_eff, or on the rank-cap ramp)
        result = leverage_prediction(core.result, tol=options.tol,
                                     random_state=options.random_state,
                                     alpha_fixed_point=core.alpha_fixed_point,
                                     secants=core.secants, minimisers=core.minimisers)
        params = dict(result.params)
        params.pop("gaussian_test_error", None)
        spread = params.pop("leverage_spread")
        # a new extras dict: the result shares the core's until then
        # a new extras dict, with the mixture's own bound (leverage_prediction's)
        return replace(result, params=params,
                       extras={**result.extras, "leverage_spread": spread})
