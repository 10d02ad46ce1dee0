"""The exact-Gram correction: the token Gram matrix of finite d in the output channel
(:mod:`skattn.theory.seq2seq`, :mod:`skattn.theory.seq2seq_softmax`, docs: Theory §4
"Finite d")."""

from __future__ import annotations

from dataclasses import replace

from ..._validation import check_choice
from ..core.sensitivity import unestimated_effect
from ..seq2seq import solve_seq2seq_state_evolution
from ..seq2seq_softmax import solve_seq2seq_softmax_state_evolution
from .base import Applicability, Correction
from .rules import (ANISOTROPY_EDGES, anisotropy_weight, combine, common_domain,
                    kurtosis_anchor, rank_cap_part, spiky_weight)

__all__ = ["ExactGramCorrection", "EXACT_GRAM_SEQ2LAB_MAX_T", "exact_gram_prediction",
           "seq2seq_prediction"]

#: softmax seq2lab gets the exact-Gram channel up to this T
EXACT_GRAM_SEQ2LAB_MAX_T = 3


class ExactGramCorrection(Correction):
    """The exact token Gram matrix (Bartlett's decomposition) in the output channel, at
    finite d: factored seq2seq (linear attention, or softmax), and factored softmax
    seq2lab with T ≤ :data:`EXACT_GRAM_SEQ2LAB_MAX_T`; Gaussian tokens (faded out with ``|κ4|``),
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
        aniso, ratio = anisotropy_weight(core.eigenvalues)
        if aniso == 0:
            return Applicability.no(
                f"S0 is (close to) a multiple of the identity: {ratio:.3g} of Tr S0² off it "
                f"(needs {ANISOTROPY_EDGES[0]:g}); the channel's traceless part degenerates")
        aniso_part = (aniso, f"S0 close to c·I ({ratio:.3g} of Tr S0² off it)")
        cap_part = rank_cap_part(problem, core, problem.task == "seq2seq"
                                 and problem.attention == "linear")
        if problem.task == "seq2seq":
            weight, faded = combine((kurtosis_weight, kurtosis_reason), aniso_part, cap_part)
            reason = f"factored {problem.attention} seq2seq at d = {d}"
        else:
            if problem.attention != "softmax":
                return Applicability.no("linear seq2lab: the Gaussian core at α_eff is kept")
            if problem.n_tokens > EXACT_GRAM_SEQ2LAB_MAX_T:
                return Applicability.no(f"n_tokens={problem.n_tokens} > "
                                        f"{EXACT_GRAM_SEQ2LAB_MAX_T}")
            spiky, share = spiky_weight(core.eigenvalues)
            weight, faded = combine((1.0 - spiky, f"top-mode share {share:.0%} (spiky ramp)"),
                                    (kurtosis_weight, kurtosis_reason), aniso_part,
                                    cap_part)
            reason = f"factored softmax seq2lab, T = {problem.n_tokens} at d = {d}"
        if weight == 0:
            return Applicability.no(faded)
        return Applicability(weight, reason + (f"; faded: {faded}" if faded else ""), anchor)

    def apply(self, alpha, problem, core, options):
        loss = "seq2seq" if problem.task == "seq2seq" else "seq2lab"
        result = exact_gram_prediction(core.result, loss=loss, n_nodes=options.n_nodes,
                                       tol=options.tol, random_state=options.random_state)
        params = dict(result.params)
        moved = {key: params.pop(key) for key in ("m_hat_identity", "seq2lab_s_error")}
        # its prox has no bound of its own: zeros only where every node is certified
        moved["uncertified_bound"] = {} if result.certified_fraction == 1.0 else None
        moved["uncertified_effect"] = unestimated_effect(moved["uncertified_bound"])
        # a new extras dict: the result shares the core's until then
        return replace(result, params=params, extras={**result.extras, **moved})


def seq2seq_prediction(seq2lab, *, n_nodes=8192, tol=1e-7, random_state=0):
    """The seq2seq prediction of :func:`~skattn.theory.solve_state_evolution`.

    :func:`exact_gram_prediction` with the seq2seq loss.

    Parameters
    ----------
    seq2lab, n_nodes, tol, random_state
        As in :func:`exact_gram_prediction`.

    Returns
    -------
    StateEvolutionResult
    """
    return exact_gram_prediction(seq2lab, loss="seq2seq", n_nodes=n_nodes, tol=tol,
                                 random_state=random_state)


def exact_gram_prediction(seq2lab, *, loss="seq2seq", n_nodes=8192, tol=1e-7, random_state=0):
    """The exact-Gram prediction of :func:`~skattn.theory.solve_state_evolution`.

    The fixed point of the exact-Gram channel (:func:`bartlett_output_side`; softmax:
    :func:`~skattn.theory.seq2seq_softmax.solve_seq2seq_softmax_state_evolution`) with the
    given training loss, started from the seq2lab fixed point, as a
    :class:`~skattn.theory.StateEvolutionResult` (docs: Theory §4, "Finite d"). Its test
    error is that of the loss: ``E‖(Â − Y)x‖²_F/d`` for seq2seq, ``E‖Â − A0‖²_F`` for
    seq2lab.

    Parameters
    ----------
    seq2lab : StateEvolutionResult
        The finite-d seq2lab fixed point of a factored problem (linear, or softmax with
        no binding rank cap; ``result.problem`` set; its task may be either).
    loss : {"seq2seq", "seq2lab"}, default="seq2seq"
        The training loss; "seq2lab" for softmax attention only (linear seq2lab keeps the
        Gaussian core, :class:`~skattn.theory.corrections.exact_gram.ExactGramCorrection`).
    n_nodes : int, default=8192
    tol : float, default=1e-7
    random_state : int, default=0
        As in :func:`solve_seq2seq_state_evolution`.

    Returns
    -------
    StateEvolutionResult
        ``params`` also holds ``m_hat_identity`` (m̂_I) and ``seq2lab_s_error`` (the
        start's ``‖Ŝ − S0‖²_F/d``); ``n_iter`` counts both solves.
    """
    problem = getattr(seq2lab, "problem", None)
    if problem is None or not hasattr(seq2lab, "trace"):
        raise TypeError(f"seq2lab must be a StateEvolutionResult with its problem, got "
                        f"{type(seq2lab).__name__}.")
    check_choice(loss, "loss", ("seq2seq", "seq2lab"))
    if loss == "seq2lab" and problem.attention != "softmax":
        raise ValueError("loss='seq2lab' is routed for softmax attention only; linear seq2lab "
                         "is the Gaussian state evolution at α_eff (solve_state_evolution).")
    extra, source = {}, "exact-Gram state evolution, skattn.theory.seq2seq"
    if problem.attention == "softmax":     # docs: Theory §4: routed by its measurements
        seq = solve_seq2seq_softmax_state_evolution(seq2lab.alpha, problem, loss=loss,
                                                    n_nodes=n_nodes, tol=tol, init=seq2lab,
                                                    random_state=random_state)
        # T = 2: the bulk prox's certificate; T ≥ 3: a multi-start, not certified (0)
        extra, source = {"certified_fraction": seq.certified_fraction}, source + "_softmax"
    else:
        seq = solve_seq2seq_state_evolution(seq2lab.alpha, problem, model="bartlett",
                                            loss="seq2seq", n_nodes=n_nodes, tol=tol,
                                            init=seq2lab, random_state=random_state)
    message = ("converged" if seq.converged else
               f"fixed-point residual {seq.residual:.2e} above tol={tol:.1e}")
    return replace(
        seq2lab, m=seq.m, q=seq.q, sigma=seq.sigma, m_hat=seq.m_hat, q_hat=seq.q_hat,
        sigma_hat=seq.sigma_hat,
        test_error=seq.test_error if loss == "seq2seq" else seq.seq2lab_test_error,
        train_error=seq.train_error,
        train_objective=seq.train_objective, eta=seq.eta, delta=seq.delta,
        epsilon=seq.epsilon, converged=seq.converged, residual=seq.residual,
        n_iter=seq2lab.n_iter + seq.n_calls, finite_eigenvalues=seq.spectrum,
        message=message + f" ({loss}: {source})", **extra,
        params={**seq2lab.params, "trace": seq.trace, "m_hat_identity": seq.m_hat_identity,
                "seq2lab_s_error": seq2lab.s_error})
