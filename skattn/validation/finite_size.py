"""Finite-size scaling of simulations against the state evolution (docs: Theory §10).

The trained test error converges to the state evolution slowly: the diagonal
pre-activations are quadratic forms whose skewness decays like ``1/√d`` (docs: Theory,
"Status of the equations").
A gap at one d is therefore no evidence of a bug. :func:`finite_size_scaling` trains the
estimator of one configuration at several d on fresh teachers, fits

    ``e(d) = e_inf + c · d^(−1/2)``   and   ``e(d) = e_inf + c · d^(−1)``

by weighted least squares (the seed spread gives the weights), keeps the better fit (AIC),
and compares the extrapolated ``e_inf`` with the continuum state evolution of docs: Theory §4
(§5 for the direct model). The same is done for the training objective ``L/d²``.

Where the continuum does not exist — power-law targets (docs: Theory §8) or a rank constraint
``p < #{positive eigenvalues}`` that binds — the reference is the *same-instance* finite-d
state evolution (the teacher's own S0 at its d, docs: Theory §4 "at finite d") and what is
extrapolated is the paired gap ``simulation − SE_d`` (which should vanish).

Every (d, seed) training and the continuum solve are rows of one
:func:`skattn.sweep.run_sweep` store, so an interrupted run loses no finished row, a second
call resumes, and ``backend="dask"`` spreads the rows on a cluster. The validation grid of
docs: Theory §10 lives in :mod:`skattn.validation.grid`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .._validation import check_choice, check_scalar_range
from .._warnings import warn
from ..theory.corrections import check_correction
from .config import FSSConfig
# the row API lives in rows.py; re-exported here, where it used to be
from .rows import (SEED_STREAMS, TOKEN_LEVERAGE_MAX_D, continuum_row, describe_failure,
                   domain_reasons, fss_row, make_teacher, same_instance_se_row, seed_for,
                   simulation_row, token_leverage_row)
from .fits import (
    EXPONENTS,
    MIN_D,
    SEM_FLOOR,
    FiniteSizeFit,
    _check_d_values,
    fit_finite_size,
    UndecidedVerdictWarning,
    form_robust_verdict,
    select_fit,
    undecided_reason,
)

__all__ = [
    "FSSConfig", "FiniteSizeFit", "FiniteSizeComparison", "FiniteSizeResult",
    "fit_finite_size", "select_fit", "finite_size_scaling", "same_instance_se_row",
    "domain_reasons", "token_leverage_row", "seed_for", "SEED_STREAMS", "make_teacher",
    "simulation_row", "continuum_row", "fss_row", "UndecidedVerdictWarning",
    "describe_failure", "TOKEN_LEVERAGE_MAX_D",
    "MIN_D", "EXPONENTS", "SEM_FLOOR",
]


# --------------------------------------------------------------------------------------
# Comparison of one quantity with its reference
# --------------------------------------------------------------------------------------

@dataclass
class FiniteSizeComparison:
    """Finite-size analysis of one quantity (test error or objective) of one configuration.

    Attributes
    ----------
    quantity : str
        ``"test_error"`` or ``"train_objective"``.
    d : ndarray of int
    mean, sem : ndarray
        Mean of the simulation over seeds at each d, and its standard error.
    n_seeds : ndarray of int
        Seeds that finished at each d.
    fits : dict
        ``exponent -> FiniteSizeFit`` of the fitted quantity (the simulation, or the paired
        gap ``simulation − SE_d`` with ``reference_kind="same-instance"``).
    chosen : FiniteSizeFit
        The fit with the lower AIC; ``chosen_weight`` its Akaike weight.
    reference : float
        The continuum SE value (``reference_kind="continuum"``), or the mean same-instance
        SE at the largest d.
    reference_kind : {"continuum", "same-instance", "none"}
    se_finite_mean : ndarray
        Mean same-instance finite-d SE at each d (NaN where not computed).
    extrapolated : float
        ``e_inf`` of the chosen fit (continuum), or ``reference + gap_inf``.
    extrapolated_ci : tuple of float
    relative_gap : float
        ``extrapolated / reference − 1``.
    relative_gap_ci : tuple of float
    verdict : str
        ``"consistent ..."``, ``"gap of ..."``, or ``"undecided: <why> (fits: <verdict>)"``
        when the data cannot decide (too few seeds or values of d, or an interval wider
        than the finite-size effect at the largest d; :func:`undecided_reason`).
    decided : bool
        False for an "undecided" verdict.
    """

    quantity: str
    d: np.ndarray
    mean: np.ndarray
    sem: np.ndarray
    n_seeds: np.ndarray
    fits: dict
    chosen: FiniteSizeFit
    chosen_weight: float
    reference: float
    reference_kind: str
    se_finite_mean: np.ndarray
    extrapolated: float
    extrapolated_ci: tuple
    relative_gap: float
    relative_gap_ci: tuple
    verdict: str
    decided: bool = True

    def plot(self, ax=None, *, exponent=None, color=None, label=None):
        """Simulation means with error bars against ``d^(−a)``, both fits and the SE value.

        Parameters
        ----------
        ax : matplotlib Axes or None
            Created when None.
        exponent : float or None
            Abscissa ``d^(−exponent)``; the chosen fit's exponent when None.
        color, label : optional
            Colour of the points and a legend label.

        Returns
        -------
        ax : matplotlib Axes
        """
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(5, 3.6), constrained_layout=True)
        a = self.chosen.exponent if exponent is None else exponent
        x = self.d.astype(float) ** (-a)
        gap = self.reference_kind == "same-instance"
        shift = np.nan_to_num(self.se_finite_mean) if gap else 0.0
        ax.errorbar(x, self.mean, yerr=self.sem, fmt="o", color=color, capsize=3,
                    label=label or "simulation")
        xx = np.linspace(0.0, x.max() * 1.05, 100)
        for fit in self.fits.values():
            style = "-" if fit is self.chosen else ":"
            # each fit is linear in its own variable d^(-e) = xx^(e/a)
            yy = fit.e_inf + fit.c * xx ** (fit.exponent / a)
            if gap:  # the fit is on the gap: draw it on top of the largest-d SE
                yy = yy + self.reference
            ax.plot(xx, yy, style, lw=1.2,
                    label=f"fit {fit.form}" + (" (chosen)" if fit is self.chosen else ""))
        if gap:
            ax.plot(x, shift, "s", mfc="none", color="k", label="same-instance SE")
        if np.isfinite(self.reference):
            ax.axhline(self.reference, color="k", lw=0.8, ls="--",
                       label="continuum SE" if not gap else "SE (largest d)")
        lo, hi = self.extrapolated_ci
        if np.isfinite(lo) and np.isfinite(hi):
            ax.errorbar([0.0], [self.extrapolated], yerr=[[self.extrapolated - lo],
                                                          [hi - self.extrapolated]],
                        fmt="D", color="C3", capsize=3, label="extrapolated")
        ax.set_xlabel(f"d^(-{a:g})")
        ax.set_ylabel(self.quantity.replace("_", " "))
        ax.legend(fontsize="small")
        return ax


def _seed_stats(rows, key, ds):
    mean, sem, n = [], [], []
    for d in ds:
        v = np.array([r[key] for r in rows if r["d"] == d], dtype=float)
        v = v[np.isfinite(v)]
        n.append(v.size)
        mean.append(v.mean() if v.size else np.nan)
        sem.append(v.std(ddof=1) / np.sqrt(v.size) if v.size >= 2 else np.nan)
    return np.array(mean), np.array(sem), np.array(n)


def _verdict(rel, rel_ci, z, rtol, kind):
    lo, hi = rel_ci
    if not np.isfinite(rel):
        return "no reference"
    within = "consistent within 2σ" if abs(z) <= 2 else (
        f"consistent within {rtol:.0%}" if abs(rel) <= rtol else None)
    where = f" (gap {rel:+.1%}, {kind})"
    if within:
        return within + where
    # z uses the standard error of the extrapolation; the interval is the fit's (Student's
    # t when the reduced χ² exceeds 1), so it can still contain 0 with few d values
    return (f"gap of {rel:+.1%} beyond 2σ (z = {z:+.1f}; fit interval "
            f"[{lo:+.1%}, {hi:+.1%}]) ({kind})")


def _compare(quantity, rows, ds, reference, reference_kind, level, rtol):
    mean, sem, n = _seed_stats(rows, quantity, ds)
    se_key = f"se_same_instance_{quantity}"
    se_mean = _seed_stats(rows, se_key, ds)[0] if any(se_key in r for r in rows) \
        else np.full(ds.shape, np.nan)
    if np.any(n < 2):
        bad = [int(d) for d, k in zip(ds, n) if k < 2]
        raise ValueError(f"n_seeds: fewer than 2 finished seeds at d={bad} for "
                         f"{quantity}; an interval needs >= 2 (rerun to resume).")
    if reference_kind == "same-instance":
        gaps = [dict(d=r["d"], gap=r[quantity] - r[se_key]) for r in rows]
        y, y_sem, _ = _seed_stats(gaps, "gap", ds)
        if not (np.all(np.isfinite(y)) and np.all(np.isfinite(y_sem))):
            bad = sorted({int(r["d"]) for r in rows if not np.isfinite(r[se_key])})
            causes = list(dict.fromkeys(
                str(r.get("se_same_instance_message") or "not converged") for r in rows
                if not np.isfinite(r[se_key])))
            raise ValueError(
                f"the same-instance SE gave a finite {quantity} for fewer than 2 seeds at "
                f"d={bad} (the trained rows are kept in the store); the prediction failed: "
                + " | ".join(causes[:3]))
        reference = float(se_mean[np.argmax(ds)])
    else:
        y, y_sem = mean, sem
    fits = {a: fit_finite_size(ds, y, y_sem, a, level=level) for a in EXPONENTS}
    chosen, weight = select_fit(list(fits.values()))
    if reference_kind == "same-instance":
        extrap = reference + chosen.e_inf
        ci = (reference + chosen.e_inf_ci[0], reference + chosen.e_inf_ci[1])
        z = chosen.e_inf / chosen.e_inf_se if chosen.e_inf_se > 0 else np.inf
    else:
        extrap, ci = chosen.e_inf, chosen.e_inf_ci
        z = (chosen.e_inf - reference) / chosen.e_inf_se if chosen.e_inf_se > 0 else np.inf
    if np.isfinite(reference) and reference != 0:
        rel = extrap / reference - 1
        rel_ci = (ci[0] / reference - 1, ci[1] / reference - 1)
    else:
        rel, rel_ci = np.nan, (np.nan, np.nan)
    kind = f"{reference_kind} SE, fit {chosen.form}"
    if reference_kind == "none":
        verdict = f"no SE reference (extrapolated {extrap:.4g}, fit {chosen.form})"
    else:  # a gap must hold under every plausible finite-size form, not only the AIC-best
        target = 0.0 if reference_kind == "same-instance" else reference
        robust = (form_robust_verdict(fits.values(), target, reference, rtol=rtol,
                                      kind=f"{reference_kind} SE")
                  if np.isfinite(rel) else None)
        verdict = robust or _verdict(rel, rel_ci, z, rtol, kind)
    decided = True
    if reference_kind != "none" and np.isfinite(rel):
        # the finite-size effect the extrapolation has to tell from a gap: the excess of
        # the simulations at the largest d over the reference
        top = int(np.argmax(ds))
        excess = (y[top] / reference if reference_kind == "same-instance"
                  else mean[top] / reference - 1)
        # the interval of the fit that carries the verdict (another plausible form's when
        # only it is consistent)
        carrier = next((f for f in fits.values() if robust and f"under fit {f.form} only"
                        in robust), chosen)
        offset = reference if reference_kind == "same-instance" else 0.0
        ci_v = ((offset + carrier.e_inf_ci[0]) / reference - 1,
                (offset + carrier.e_inf_ci[1]) / reference - 1)
        why = undecided_reason(verdict, int(n.min()), int(ds.size), ci_v, excess)
        if why is not None:
            decided = False
            verdict = f"undecided: {why} (fits: {verdict})"
            warn(f"finite-size {quantity}: {verdict}; add seeds or larger d.",
                 UndecidedVerdictWarning)
    return FiniteSizeComparison(
        quantity=quantity, d=ds, mean=mean, sem=sem, n_seeds=n, fits=fits, chosen=chosen,
        chosen_weight=weight, reference=float(reference), reference_kind=reference_kind,
        se_finite_mean=se_mean, extrapolated=float(extrap),
        extrapolated_ci=(float(ci[0]), float(ci[1])), relative_gap=float(rel),
        relative_gap_ci=(float(rel_ci[0]), float(rel_ci[1])), verdict=verdict,
        decided=decided)


# --------------------------------------------------------------------------------------
# The result and the driver
# --------------------------------------------------------------------------------------

@dataclass
class FiniteSizeResult:
    """Outcome of :func:`finite_size_scaling` for one configuration.

    Attributes
    ----------
    config : FSSConfig
    test : FiniteSizeComparison
        The test error.
    objective : FiniteSizeComparison
        The training objective ``L/d²``.
    se : dict
        The continuum state-evolution row (``se_test_error``, ``se_train_objective``,
        ``se_converged``, ``se_message``, ``se_rank_active``, ...), empty without one.
    rows : list of dict
        The sweep rows (one per (d, seed)) used.
    n_run, n_skipped : int
        Rows computed by this call, and rows found finished in the store.
    wall_time : float
        Seconds spent by this call.
    output : str
        The sweep store.

    The properties ``d``, ``mean``, ``sem``, ``fits``, ``chosen_fit``, ``se_prediction``,
    ``relative_gap``, ``relative_gap_ci`` and ``verdict`` are those of :attr:`test`;
    ``domain_warnings`` and ``outside_domain`` say whether the same-instance predictions at
    the largest d left the stated domain (docs: Where the predictions hold).
    """

    config: FSSConfig
    test: FiniteSizeComparison
    objective: FiniteSizeComparison
    se: dict
    rows: list
    n_run: int
    n_skipped: int
    wall_time: float
    output: str

    d = property(lambda self: self.test.d, doc="The d values.")
    mean = property(lambda self: self.test.mean, doc="Mean test error at each d.")
    sem = property(lambda self: self.test.sem, doc="Its standard error over seeds.")
    fits = property(lambda self: self.test.fits, doc="Both fits of the test error.")
    chosen_fit = property(lambda self: self.test.chosen, doc="The chosen (lower-AIC) fit.")
    se_prediction = property(lambda self: self.test.reference, doc="The SE test error.")
    relative_gap = property(lambda self: self.test.relative_gap, doc="Extrapolated/SE − 1.")
    relative_gap_ci = property(lambda self: self.test.relative_gap_ci, doc="Its interval.")
    verdict = property(lambda self: self.test.verdict, doc="The test-error verdict.")

    @property
    def domain_warnings(self):
        """The ``DomainWarning`` reasons of the same-instance predictions at the largest d.

        Returns
        -------
        dict
            ``reason -> fraction of the seeds`` at the largest d whose prediction raised a
            :class:`~skattn.theory.DomainWarning` for that reason (e.g. ``"spiky target"``,
            ``"strong rank cap"``); empty inside the stated domain (docs: Where the
            predictions hold).
        """
        if not self.rows:
            return {}
        d_max = max(r["d"] for r in self.rows)
        top = [r for r in self.rows if r["d"] == d_max]
        counts = {}
        for r in top:
            for reason in domain_reasons(r.get("se_same_instance_domain") or ""):
                counts[reason] = counts.get(reason, 0) + 1
        return {k: v / len(top) for k, v in sorted(counts.items())}

    @property
    def outside_domain(self):
        """True when a same-instance prediction at the largest d left the stated domain."""
        return bool(self.domain_warnings)

    def plot(self, ax=None, *, quantity="test_error"):
        """Plot one quantity (see :meth:`FiniteSizeComparison.plot`).

        Parameters
        ----------
        ax : matplotlib Axes or None
        quantity : {"test_error", "train_objective"}, default="test_error"

        Returns
        -------
        ax : matplotlib Axes
        """
        check_choice(quantity, "quantity", ("test_error", "train_objective"))
        comp = self.test if quantity == "test_error" else self.objective
        ax = comp.plot(ax)
        ax.set_title(self.config.describe(), fontsize="small")
        return ax

    def summary(self):
        """One flat dict (for the validation table)."""
        out = {"label": self.config.describe(),
               "outside_gaussian_equivalence": self.config.outside_gaussian_equivalence,
               "domain_warnings": self.domain_warnings}
        for name, comp in (("test", self.test), ("objective", self.objective)):
            out.update({f"{name}_reference": comp.reference,
                        f"{name}_reference_kind": comp.reference_kind,
                        f"{name}_extrapolated": comp.extrapolated,
                        f"{name}_extrapolated_ci": comp.extrapolated_ci,
                        f"{name}_relative_gap": comp.relative_gap,
                        f"{name}_relative_gap_ci": comp.relative_gap_ci,
                        f"{name}_fit": comp.chosen.form,
                        f"{name}_verdict": comp.verdict})
            out.update({f"{name}_d{int(d)}": (float(m), float(s))
                        for d, m, s in zip(comp.d, comp.mean, comp.sem)})
        return out

    def table_rows(self):
        """One row per (quantity, d) and one per quantity for d → ∞, for tables.

        Returns
        -------
        list of dict
            Keys ``quantity, d, mean, sem, reference, verdict`` (``d`` is ``"inf"`` on the
            extrapolated row, whose ``sem`` is half the width of its interval).
        """
        out = []
        for comp in (self.test, self.objective):
            for d, m, s in zip(comp.d, comp.mean, comp.sem):
                out.append({"quantity": comp.quantity, "d": int(d), "mean": float(m),
                            "sem": float(s), "reference": float(comp.reference),
                            "verdict": ""})
            lo, hi = comp.extrapolated_ci
            out.append({"quantity": comp.quantity, "d": "inf",
                        "mean": float(comp.extrapolated), "sem": float(hi - lo) / 2,
                        "reference": float(comp.reference), "verdict": comp.verdict})
        return out


def _rows_for(cfg, d, n_seeds, n_test, same_instance_se, correction="auto"):
    cj = cfg.to_json()
    # "auto" rows keep the keys of stores written before the correction table existed
    extra = {} if correction == "auto" else {"correction": correction}
    rows = [{"kind": "continuum_se", "config": cj}]
    rows += [{"kind": "simulation", "config": cj, "d": int(di), "seed": int(s),
              "n_test": int(n_test), "same_instance_se": bool(same_instance_se), **extra}
             for di in d for s in range(n_seeds)]
    return rows


def _check_run_args(d, n_seeds, n_test, level, rtol):
    d = np.unique(_check_d_values(d))
    n_seeds = check_scalar_range(n_seeds, "n_seeds", low=2, integer=True)
    n_test = check_scalar_range(n_test, "n_test", low=100, integer=True)
    level = check_scalar_range(level, "level", low=0, high=1, low_inclusive=False,
                               high_inclusive=False)
    rtol = check_scalar_range(rtol, "rtol", low=0)
    return d, n_seeds, n_test, level, rtol


def _analyse(cfg, sweep_rows, d, level, rtol, *, n_run=0, n_skipped=0, wall=0.0, output=""):
    cj = cfg.to_json()
    mine = [r for r in sweep_rows if r.get("config") == cj]
    failed = [r for r in mine if r["status"] != "ok"]
    se_rows = [r for r in mine if r["kind"] == "continuum_se" and r["status"] == "ok"]
    sims = [r for r in mine if r["kind"] == "simulation" and r["status"] == "ok"
            and r["d"] in set(d.tolist())]
    if not sims:
        msg = failed[0]["error"] if failed else "no finished row"
        raise RuntimeError(f"no simulation row finished for {cfg.describe()!r}: {msg} "
                           "(finished rows are kept; rerun to resume).")
    short = [int(di) for di in d if sum(r["d"] == di for r in sims) < 2]
    failed_sims = [r for r in failed if r["kind"] == "simulation" and r.get("d") in short]
    if short and failed_sims:  # name the cause, not only the count
        causes = list(dict.fromkeys(str(r["error"])[:300] for r in failed_sims))
        hint = ("the memory guard refused it: a rerun does not help; raise "
                "SKATTN_MEMORY_LIMIT_GB or drop that d"
                if all("SKATTN_MEMORY_LIMIT_GB" in c for c in causes) else
                "a rerun retries failed rows, so it helps only if the cause was transient")
        raise ValueError(
            f"n_seeds: fewer than 2 finished seeds at d={short} for {cfg.describe()!r}: the "
            f"training failed ({' | '.join(causes[:3])}); {hint} (finished rows are kept).")
    se = dict(se_rows[0]) if se_rows else {}
    if se.get("se_available"):
        kind = "continuum"
    elif any(r.get("same_instance_se") for r in sims):
        kind = "same-instance"
    else:
        kind = "none"
    comps = {}
    for q, key in (("test_error", "se_test_error"), ("train_objective", "se_train_objective")):
        ref = se.get(key) if kind == "continuum" else np.nan
        comps[q] = _compare(q, sims, d, np.nan if ref is None else ref, kind, level, rtol)
    return FiniteSizeResult(config=cfg, test=comps["test_error"],
                            objective=comps["train_objective"], se=se, rows=sims,
                            n_run=n_run, n_skipped=n_skipped, wall_time=wall,
                            output=str(output))


def finite_size_scaling(config, d=(60, 100, 160, 250), n_seeds=3, *, output=None,
                        backend="sequential", n_jobs=1, n_test=4000, same_instance_se=True,
                        level=0.95, rtol=0.01, scheduler_address=None, verbose=0,
                        correction="auto"):
    """Train one configuration at several d, extrapolate d → ∞ and compare with the SE.

    Parameters
    ----------
    config : FSSConfig or dict
        The configuration (see :class:`FSSConfig`).
    d : sequence of int, default=(60, 100, 160, 250)
        Token dimensions; at least 3 distinct values, each ``>= MIN_D`` (8).
    n_seeds : int, default=3
        Fresh teachers, training and test sets per d; ``>= 2`` (the seed spread gives the
        weights and intervals).
    output : str or path-like or None
        The sweep store (anything :func:`skattn.sweep.run_sweep` accepts, e.g.
        ``"fss.csv"``). None uses a temporary file (no resume across calls).
    backend : {"sequential", "joblib", "dask"}, default="sequential"
    n_jobs : int, default=1
        Workers of the backend (joblib) or threads of the local dask cluster.
    n_test : int, default=4000
        Fresh test samples per (d, seed), ``>= 100``.
    same_instance_se : bool, default=True
        Also solve the finite-d SE of each teacher (its own S0 at its d) and record it in
        the row; required as the reference for power-law targets and binding rank
        constraints. Costs about one training at the same d.
    level : float, default=0.95
        Confidence level of the intervals.
    rtol : float, default=0.01
        A relative gap below ``rtol`` counts as consistent even when outside 2σ (the SE's
        own quadrature accuracy is ~1e-3 relative).
    scheduler_address : str or None
        With ``backend="dask"``, a running scheduler.
    verbose : int, default=0
    correction : str, default="auto"
        The finite-size correction of the same-instance predictions
        (:func:`skattn.theory.solve_state_evolution`; one of
        :data:`skattn.theory.CORRECTION_NAMES`).

    Returns
    -------
    FiniteSizeResult

    Raises
    ------
    ValueError
        If ``d`` has fewer than 3 distinct values or one below 8, ``n_seeds < 2``, or the
        config is invalid.
    RuntimeError
        If no simulation row finished (the finished rows stay in ``output``).
    """
    cfg = FSSConfig.from_dict(config)
    d, n_seeds, n_test, level, rtol = _check_run_args(d, n_seeds, n_test, level, rtol)
    from ..sweep import run_sweep

    tmp = None
    if output is None:
        import tempfile

        tmp = tempfile.TemporaryDirectory()
        output = f"{tmp.name}/fss.csv"
    t0 = time.perf_counter()
    try:
        res = run_sweep(fss_row, _rows_for(cfg, d, n_seeds, n_test, same_instance_se,
                                           check_correction(correction)),
                        output=output, backend=backend, n_jobs=n_jobs,
                        scheduler_address=scheduler_address, verbose=verbose)
        return _analyse(cfg, res.rows, d, level, rtol, n_run=res.n_run,
                        n_skipped=res.n_skipped, wall=time.perf_counter() - t0,
                        output=output)
    finally:
        if tmp is not None:
            tmp.cleanup()
