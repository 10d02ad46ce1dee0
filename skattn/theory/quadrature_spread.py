"""How far the quadrature moves a prediction: the same problem solved on independent
scramblings of its quasi-Monte Carlo nodes.

The Gaussian expectations of the fixed-point map are averages over scrambled Sobol nodes
(``SolverOptions.n_nodes``, seeded by ``random_state``). Each scrambling is an unbiased
randomisation of the same rule, so the spread of a prediction over a few of them measures
the quadrature's error, and the map's slow directions amplify it alike (docs: Theory,
"The quadrature's error").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from .._validation import check_scalar_range
from .._warnings import warn
from .core.options import resolve_options
from .corrections import check_correction
from .result import StateEvolutionResult

__all__ = ["QuadratureSpread", "quadrature_spread", "SPREAD_QUANTITIES"]

#: the quantities whose spread is reported, as fields of a StateEvolutionResult
SPREAD_QUANTITIES = ("test_error", "train_error", "m", "q", "sigma")


@dataclass(frozen=True)
class QuadratureSpread:
    """A prediction on ``n`` independent scramblings of its quadrature nodes.

    Attributes
    ----------
    random_states : tuple of int
        The scrambling of each solve (the first: the result passed in).
    values : dict of str to ndarray of shape (n,)
        Each of :data:`SPREAD_QUANTITIES` per solve.
    converged : ndarray of bool, shape (n,)
        Whether each solve converged (a solve that did not is reported, not dropped).
    certified_fraction : ndarray of shape (n,)
        Each solve's share of certified prox minimisers (NaN where not applicable).
    """

    random_states: tuple
    values: dict
    converged: np.ndarray
    certified_fraction: np.ndarray

    @property
    def n_replicates(self):
        """The number of scramblings."""
        return len(self.random_states)

    @property
    def mean(self):
        """Each quantity's mean over the scramblings."""
        return {k: float(np.mean(v)) for k, v in self.values.items()}

    @property
    def std(self):
        """Each quantity's standard deviation over the scramblings (ddof=1): the error of
        one solve, as one standard deviation."""
        return {k: float(np.std(v, ddof=1)) for k, v in self.values.items()}

    @property
    def standard_error(self):
        """The standard error of the mean over the scramblings (``std/√n``)."""
        return {k: s / np.sqrt(self.n_replicates) for k, s in self.std.items()}

    @property
    def relative_std(self):
        """``std/|mean|`` of each quantity (∞ where the mean is 0 and the spread is not)."""
        out = {}
        for k, s in self.std.items():
            m = abs(self.mean[k])
            out[k] = s / m if m > 0 else (0.0 if s == 0 else np.inf)
        return out

    def __str__(self):
        rows = [f"{k:>11}: {self.mean[k]:.6g} ± {self.std[k]:.2g} "
                f"({100 * self.relative_std[k]:.2g} %)" for k in SPREAD_QUANTITIES]
        head = (f"QuadratureSpread over {self.n_replicates} scramblings "
                f"({int(np.sum(self.converged))} converged); mean ± one solve's std:")
        return "\n".join([head] + rows)


def _solve_replicate(alpha, problem, correction, options):
    # module level: picklable for the joblib workers
    from .state_evolution import solve_state_evolution   # lazily: no import cycle

    result = solve_state_evolution(alpha, problem, correction=correction, options=options)
    return _spread_row(result)


def _spread_row(result):
    # the quantities, converged and the certified fraction of one solve
    return ({k: float(getattr(result, k)) for k in SPREAD_QUANTITIES},
            bool(result.converged), float(result.certified_fraction))


def quadrature_spread(result, n_replicates=4, *, correction="auto", options=None,
                      n_jobs=None, verbose=0):
    """Solve ``result``'s problem again on ``n_replicates − 1`` other scramblings of the
    quadrature nodes and report the spread of the prediction.

    Each new solve starts at ``result``'s fixed point (``init``), with ``random_state``
    ``options.random_state + 1``, ``+ 2``, … and otherwise the same ``correction`` and
    options as ``result``. The standard deviation over the scramblings is the error of one
    solve due to the quadrature (one standard deviation); the certificate's part is
    separate (``result.extras["uncertified_effect"]``). A solve that does not converge is
    kept and flagged (``converged``), with a warning.

    Parameters
    ----------
    result : StateEvolutionResult
        A prediction of :func:`~skattn.theory.solve_state_evolution` (it carries its
        ``problem``).
    n_replicates : int, default=4
        The number of scramblings, ``result``'s own included (≥ 2).
    correction : str, default="auto"
        The ``correction`` ``result`` was solved with (as for
        :func:`~skattn.theory.solve_state_evolution`).
    options : SolverOptions or dict or None, default=None
        The options ``result`` was solved with (None: the defaults). Their ``n_nodes`` is
        the quadrature whose error is measured.
    n_jobs : int or None, default=None
        The new solves in parallel on joblib (:func:`skattn.parallel.map_jobs`); None or 1:
        one after another.
    verbose : int, default=0
        ≥ 1 shows a progress bar over the solves.

    Returns
    -------
    QuadratureSpread

    Warns
    -----
    UserWarning
        Where a solve did not converge or a value is not finite (then the statistics of
        that quantity are NaN, and ``values`` shows which solve).

    Raises
    ------
    TypeError
        If ``result`` is not a StateEvolutionResult or carries no problem.
    ValueError
        If ``n_replicates`` < 2, ``correction`` is not a known name, or ``options`` are
        invalid.
    """
    if not isinstance(result, StateEvolutionResult):
        raise TypeError(f"result must be a StateEvolutionResult, got "
                        f"{type(result).__name__}.")
    if result.problem is None:
        raise TypeError("result carries no problem (result.problem is None): pass a result "
                        "of solve_state_evolution.")
    n_replicates = check_scalar_range(n_replicates, "n_replicates", low=2, integer=True)
    correction = check_correction(correction)
    options = resolve_options(options)
    base = options.random_state
    if base + n_replicates - 1 >= 2 ** 32:
        raise ValueError(f"options.random_state + n_replicates - 1 must stay below 2**32, "
                         f"got random_state={base} and n_replicates={n_replicates}.")
    states = tuple(base + r for r in range(n_replicates))
    jobs = [(result.alpha, result.problem, correction,
             options.replace(init=result, random_state=s)) for s in states[1:]]
    rows = [_spread_row(result)] + [None] * len(jobs)
    bar = tqdm(total=len(jobs), disable=not verbose, desc="quadrature spread")

    def done(index, row):
        rows[index + 1] = row
        bar.update(1)

    try:
        if n_jobs is None or n_jobs == 1:
            for i, args in enumerate(jobs):
                done(i, _solve_replicate(*args))
        else:
            from ..parallel import map_jobs   # lazily: the theory's import graph

            map_jobs(_solve_replicate, jobs, backend="joblib", n_jobs=n_jobs,
                     on_result=done)
    finally:
        bar.close()
    values = {k: np.array([row[0][k] for row in rows]) for k in SPREAD_QUANTITIES}
    converged = np.array([row[1] for row in rows])
    finite = np.all([np.isfinite(v) for v in values.values()], axis=0)
    if not (converged.all() and finite.all()):
        bad = [s for s, ok in zip(states, converged & finite) if not ok]
        warn(f"quadrature_spread: the solves at random_state {bad} did not converge or "
             f"have a value that is not finite; they are kept in the spread (see its "
             f"converged and values).", UserWarning)
    return QuadratureSpread(random_states=states, values=values, converged=converged,
                            certified_fraction=np.array([row[2] for row in rows]))
