"""One row of a validation run: the teacher of a (d, seed), its trained estimator, its
same-instance prediction and the continuum prediction (the public row API of
:mod:`skattn.validation`; :func:`fss_row` is the function a sweep maps).
"""

from __future__ import annotations

import json
import re
import time

import numpy as np

from .._validation import check_choice, check_scalar_range
from .config import FSSConfig

__all__ = ["SEED_STREAMS", "seed_for", "make_teacher", "simulation_row", "fss_row",
           "domain_reasons", "describe_failure", "same_instance_se_row",
           "TOKEN_LEVERAGE_MAX_D", "token_leverage_row", "continuum_row"]


#: The random streams of one (d, seed) row, as the ``stream`` argument of :func:`seed_for`.
SEED_STREAMS = {"teacher": 0, "train": 1, "test": 2, "estimator": 3, "token_leverage": 4}


def seed_for(seed, d, stream):
    """The integer random state of one stream of the (d, seed) row of a validation run.

    Every row of :func:`finite_size_scaling` and of the validation grid draws its teacher,
    training set, test set and estimator initialisation from these seeds, so a script that
    calls ``seed_for(seed, d, "teacher")`` gets the very teacher the grid trained on.

    Parameters
    ----------
    seed : int
        The seed index of the row (``0 … n_seeds - 1``).
    d : int
        Token dimension of the row.
    stream : {"teacher", "train", "test", "estimator", "token_leverage"} or int
        Which draw (see :data:`SEED_STREAMS`).

    Returns
    -------
    int
    """
    if isinstance(stream, str):
        check_choice(stream, "stream", tuple(SEED_STREAMS))
        stream = SEED_STREAMS[stream]
    parts = [check_scalar_range(v, name, low=0, integer=True)
             for v, name in ((seed, "seed"), (d, "d"), (stream, "stream"))]
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


def make_teacher(config, d, seed):
    """The teacher of the (d, seed) row of a validation run.

    Parameters
    ----------
    config : FSSConfig or dict
    d : int
    seed : int

    Returns
    -------
    AttentionIndexedModel
        Drawn with the configuration's T, β0, Δ and attention, from
        ``seed_for(seed, d, "teacher")``.
    """
    from ..data import AttentionIndexedModel

    cfg = FSSConfig.from_dict(config)
    return AttentionIndexedModel(d, n_tokens=cfg.n_tokens, target=cfg.make_target(),
                                 beta=cfg.target_beta, noise=cfg.noise,
                                 attention=cfg.attention,
                                 random_state=seed_for(seed, d, "teacher"))


def simulation_row(config, d, seed, *, n_test=4000, same_instance_se=False,
                   correction="auto"):
    """Train the estimator of one configuration at (d, seed): one row of a validation run.

    Parameters
    ----------
    config : FSSConfig or dict
    d : int
        Token dimension.
    seed : int
        Seed index; the draws are :func:`seed_for` ``(seed, d, stream)``.
    n_test : int, default=4000
        Fresh test samples.
    same_instance_se : bool, default=False
        Also solve the same-instance finite-d SE of the teacher
        (:func:`same_instance_se_row`) and the token-leverage prediction where it applies
        (:func:`token_leverage_row`).
    correction : str, default="auto"
        The finite-size correction of the same-instance prediction.

    Returns
    -------
    dict
        ``test_error``, ``train_objective``, ``train_error``, ``n_iter``, ``converged``,
        ``fit_seconds``, ``n_samples`` (and the columns of the two functions above).
    """
    import torch

    from ..estimators import DirectAttentionRegressor, TiedAttentionRegressor
    from ..metrics import attention_error

    cfg = FSSConfig.from_dict(config)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    teacher = make_teacher(cfg, d, seed)
    n = max(1, int(round(cfg.alpha * d * d)))
    X, y = teacher.sample(n, task=cfg.task, random_state=seed_for(seed, d, "train"),
                          layout="tokens")
    Xt, yt = teacher.sample(n_test, task=cfg.task, random_state=seed_for(seed, d, "test"),
                            layout="tokens")
    common = dict(reg_lambda=cfg.reg_lambda, beta=cfg.beta, attention=cfg.attention,
                  task=cfg.task, solver=cfg.solver, max_iter=cfg.max_iter, tol=cfg.tol,
                  dtype=cfg.dtype, device="cpu",
                  random_state=seed_for(seed, d, "estimator"))
    if cfg.estimator == "tied":
        est = TiedAttentionRegressor(width=cfg.width_ratio, **common)
    else:
        est = DirectAttentionRegressor(**common)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence is recorded in the row instead
        est.fit(X, y)
    out = {"test_error": attention_error(yt, est.predict(Xt), task=cfg.task),
           "train_objective": float(est.train_objective_),
           "train_error": float(est.train_error_), "n_iter": int(est.n_iter_),
           "converged": bool(est.converged_), "fit_seconds": time.perf_counter() - t0,
           "n_samples": n}
    if same_instance_se:
        out.update(same_instance_se_row(cfg, teacher, correction=correction))
        out.update(token_leverage_row(cfg, teacher,
                                      random_state=seed_for(seed, d, "token_leverage")))
    return out


def fss_row(kind, config, d=None, seed=None, n_test=None, same_instance_se=None,
            correction="auto"):
    """One sweep row of a validation run (the function :func:`skattn.sweep.run_sweep` maps).

    Parameters
    ----------
    kind : {"simulation", "continuum_se"}
        Train at (d, seed) (:func:`simulation_row`) or solve the continuum SE
        (:func:`continuum_row`).
    config : str
        The configuration as :meth:`FSSConfig.to_json` (a sweep parameter).
    d, seed, n_test, same_instance_se, correction
        As for :func:`simulation_row` (``kind="simulation"`` only).

    Returns
    -------
    dict
    """
    check_choice(kind, "kind", ("simulation", "continuum_se"))
    cfg = FSSConfig.from_dict(json.loads(config) if isinstance(config, str) else config)
    if kind == "continuum_se":
        return continuum_row(cfg)
    return simulation_row(cfg, d, seed, n_test=n_test, correction=correction,
                          same_instance_se=bool(same_instance_se))


def domain_reasons(messages):
    """The short reasons in ``DomainWarning`` text (``["spiky target", ...]``).

    The package's messages read ``"outside the validated domain: <reason>: <details>"``;
    a sweep row joins them with ``"; "`` (and may truncate the last one).

    Parameters
    ----------
    messages : str

    Returns
    -------
    list of str
        The distinct reasons, in order of appearance.
    """
    found = re.findall(r"outside the validated domain: ([^:.;]+)", str(messages))
    return list(dict.fromkeys(r.strip() for r in found))


def describe_failure(exc):
    """``"<kind>: Type: message"`` of a failed prediction, with whether a rerun can help.

    A rerun of the store retries failed rows only; a prediction that failed inside a
    finished training row is deterministic (same teacher, same solver), so only a changed
    setting helps: the memory limit, the arguments, or a fix of the solver.
    """
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ValueError) and "SKATTN_MEMORY_LIMIT_GB" in str(exc):
        kind = ("memory guard (a rerun does not help; raise SKATTN_MEMORY_LIMIT_GB or use "
                "a smaller d)")
    elif isinstance(exc, MemoryError):
        kind = "out of memory (a rerun helps only with more free memory)"
    elif isinstance(exc, (ValueError, ArithmeticError, np.linalg.LinAlgError)):
        kind = "domain error of the prediction (deterministic: a rerun does not help)"
    else:
        kind = ("internal error of the prediction (deterministic: a rerun does not help; "
                "please report it)")
    return f"{kind}: {text}"


def same_instance_se_row(config, teacher, correction="auto"):
    """The same-instance finite-d SE of one teacher, as sweep-row columns.

    Solves ``solve_state_evolution(..., target=teacher)``: the teacher's own S0 at its d
    (:meth:`skattn.theory.StateEvolutionProblem.from_teacher`; factored linear attention
    at ``α d/(d + 1)``, :meth:`~skattn.theory.StateEvolutionProblem.effective_alpha`).

    Parameters
    ----------
    config : FSSConfig
    teacher : AttentionIndexedModel
        Drawn with the configuration's T, β0, Δ and attention.
    correction : str, default="auto"
        The finite-size correction (:func:`skattn.theory.solve_state_evolution`).

    Returns
    -------
    dict
        ``se_same_instance_correction`` (the correction used),
        ``se_same_instance_test_error``, ``se_same_instance_train_objective``,
        ``se_same_instance_converged``, ``se_same_instance_message``,
        ``se_same_instance_domain`` (the DomainWarning reasons, "" inside the domain) and
        ``se_same_instance_seconds``; the errors are NaN when the solve did not converge.
    """
    import warnings

    from ..theory import DomainWarning, solve_state_evolution

    t0 = time.perf_counter()
    domain, used = "", "none"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DomainWarning)
            res = solve_state_evolution(target=teacher, correction=correction,
                                        **config.se_kwargs())
        domain = "; ".join(str(w.message) for w in caught
                           if issubclass(w.category, DomainWarning))
        ok, msg, used = bool(res.converged), str(res.message), res.correction
        te, obj = (float(res.test_error), float(res.train_objective)) if ok else (np.nan,
                                                                                  np.nan)
    except Exception as exc:  # noqa: BLE001 - never lose the finished training of the row
        ok, msg, te, obj = False, describe_failure(exc), np.nan, np.nan
    return {"se_same_instance_test_error": te, "se_same_instance_train_objective": obj,
            "se_same_instance_converged": ok, "se_same_instance_message": msg[:200],
            "se_same_instance_domain": domain[:300], "se_same_instance_correction": used,
            "se_same_instance_seconds": time.perf_counter() - t0}


#: Rows get the token-leverage prediction up to this d (about 10 s a row at d = 100; the
#: cost grows like d³).
TOKEN_LEVERAGE_MAX_D = 160


def token_leverage_row(config, teacher, random_state=0):
    """The token-leverage prediction of one teacher, as sweep-row columns, where it applies.

    For factored linear attention with one token (seq2lab; a width whose rank cap does not
    bind is the full-width problem at ``√κ λ``) and ``d ≤ TOKEN_LEVERAGE_MAX_D``, inside the
    validated domain of :func:`skattn.theory.solve_token_state_evolution` (docs: Theory
    §4, "Token leverage"); elsewhere, including where that solver would warn (a binding
    cap among its reasons), no columns.

    Parameters
    ----------
    config : FSSConfig
    teacher : AttentionIndexedModel
    random_state : int, default=0
        Seed of the solver's Monte Carlo draws.

    Returns
    -------
    dict
        ``se_token_test_error`` (NaN when the solve did not converge) and
        ``se_token_mc_error``, or empty.
    """
    import warnings

    from ..theory import DomainWarning
    from ..theory.token_leverage import solve_token_state_evolution

    if not (config.attention == "linear" and config.n_tokens == 1 and config.task == "seq2lab"
            and config.estimator == "tied" and teacher.n_features <= TOKEN_LEVERAGE_MAX_D):
        return {}
    with warnings.catch_warnings():
        # the solver warns before it starts: outside its domain it adds nothing
        warnings.simplefilter("error", DomainWarning)
        try:
            res = solve_token_state_evolution(config.alpha, target=teacher,
                                              reg_lambda=config.reg_lambda,
                                              width_ratio=config.width_ratio,
                                              random_state=random_state)
        except DomainWarning:
            return {}
        except Exception:  # noqa: BLE001 - an optional column: the training row is kept
            return {"se_token_test_error": np.nan, "se_token_mc_error": np.nan}
    return {"se_token_test_error": float(res.test_error) if res.converged else np.nan,
            "se_token_mc_error": float(res.mc_standard_error)}


def continuum_row(config):
    """The continuum (d → ∞) state evolution of a configuration, as sweep-row columns.

    Parameters
    ----------
    config : FSSConfig or dict

    Returns
    -------
    dict
        ``se_available`` (False for power-law targets, which have no d → ∞ law, and where a
        rank constraint width < 1 binds: ``se_rank_active``), ``se_test_error``,
        ``se_train_objective``, ``se_converged``, ``se_message`` and
        ``se_positive_fraction``.
    """
    from ..theory import solve_state_evolution

    cfg = FSSConfig.from_dict(config)

    if not cfg.has_continuum:
        return {"se_available": False, "se_message": "power-law target: no d → ∞ law",
                "se_test_error": None, "se_train_objective": None, "se_converged": False,
                "se_rank_active": False}
    kw = cfg.se_kwargs()
    kappa = kw["width_ratio"]
    if kappa < 1:  # same problem without the rank constraint: λ̃ = √κ λ (docs: Theory §2)
        kw["reg_lambda"] *= np.sqrt(kappa)
        kw["width_ratio"] = 1.0
    res = solve_state_evolution(target=cfg.make_target(), **kw)
    positive = 1.0 - res.atom_mass if kw["parametrization"] == "factored" else 1.0
    active = bool(kappa < 1 and positive > kappa)
    ok = bool(res.converged)
    return {"se_available": ok and not active, "se_message": str(res.message)[:200],
            "se_test_error": float(res.test_error) if ok else None,
            "se_train_objective": float(res.train_objective) if ok else None,
            "se_converged": ok, "se_rank_active": active, "se_positive_fraction": positive}
