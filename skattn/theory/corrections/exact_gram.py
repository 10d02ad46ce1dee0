"""The exact-Gram correction: the token Gram matrix of finite d in the output channel
(:mod:`skattn.theory.seq2seq`, :mod:`skattn.theory.seq2seq_softmax`, docs/theory.rst §4
"Finite d")."""

from __future__ import annotations

from ..seq2seq import exact_gram_prediction
from .base import Applicability, Correction
from .rules import combine, common_domain, kurtosis_anchor, spiky_weight

__all__ = ["ExactGramCorrection", "EXACT_GRAM_SEQ2LAB_MAX_T"]

#: softmax seq2lab gets the exact-Gram channel up to this T
EXACT_GRAM_SEQ2LAB_MAX_T = 3


class ExactGramCorrection(Correction):
    """The exact token Gram matrix (Bartlett's decomposition) in the output channel, at
    finite d: factored seq2seq (linear attention, or softmax), and factored softmax
    seq2lab with T ≤ :data:`EXACT_GRAM_SEQ2LAB_MAX_T`; Gaussian tokens (faded with |κ4|),
    no binding rank cap, and for seq2lab a target inside Gaussian equivalence (faded out
    across the spiky ramp)."""

    name = "exact_gram"
    models = ("the exact finite-d Gram matrix of the tokens in the output channel (the "
              "seq2seq loss, and softmax seq2lab at small T)")

    def decide(self, alpha, problem, core):
        # linear seq2seq keeps its exact Gram under a binding rank cap
        no = common_domain(problem, core, tasks=("seq2lab", "seq2seq"),
                           rank_cap_ok=problem.task == "seq2seq"
                           and problem.attention == "linear")
        if no is not None:
            return no
        kurtosis_weight, anchor, kurtosis_reason = kurtosis_anchor(problem)
        d = problem.n_features
        if problem.task == "seq2seq":
            weight, faded = combine((kurtosis_weight, kurtosis_reason))
            reason = f"factored {problem.attention} seq2seq at d = {d}"
        else:
            if problem.attention != "softmax":
                return Applicability.no("linear seq2lab: the Gaussian core at α_eff is kept")
            if problem.n_tokens > EXACT_GRAM_SEQ2LAB_MAX_T:
                return Applicability.no(f"n_tokens={problem.n_tokens} > "
                                        f"{EXACT_GRAM_SEQ2LAB_MAX_T}")
            spiky, share = spiky_weight(core.eigenvalues)
            weight, faded = combine((1.0 - spiky, f"top-mode share {share:.0%} (spiky ramp)"),
                                    (kurtosis_weight, kurtosis_reason))
            reason = f"factored softmax seq2lab, T = {problem.n_tokens} at d = {d}"
        if weight == 0:
            return Applicability.no(faded)
        return Applicability(weight, reason + (f"; faded: {faded}" if faded else ""), anchor)

    def apply(self, alpha, problem, core, options):
        loss = "seq2seq" if problem.task == "seq2seq" else "seq2lab"
        result = exact_gram_prediction(core.result, loss=loss, n_nodes=options.n_nodes,
                                       tol=options.tol, random_state=options.random_state)
        for key in ("m_hat_identity", "seq2lab_s_error"):
            result.extras[key] = result.params.pop(key)
        return result
