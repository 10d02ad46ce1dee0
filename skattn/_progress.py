"""Progress reporting shared by every iterative routine (tqdm only: the theory may use it).

The ``verbose`` convention, the same for every estimator, solver and runner of skattn:

- ``verbose=0`` (or False): silent;
- ``verbose=1`` (or True): one tqdm progress bar per loop: optimiser iterations (the
  estimators' ``fit``, AMP), α points (``state_evolution_curve``), λ rows
  (``solve_phase_diagram``), rows of a sweep or of a finite-size-scaling grid. A loop that
  stops early because it converged ends at 100 %: its total becomes the count done;
- ``verbose=2``: the bar, plus one log line per iteration or per point (written through
  ``tqdm.write``, so it does not break the bar), where the routine has per-step numbers to
  report (the torch training loop, AMP).

The estimators and :func:`skattn.sweep.run_sweep` reject negative values; pass 0, 1 or 2
everywhere (larger values act as 2).
"""

from __future__ import annotations

from tqdm.auto import tqdm

__all__ = ["progress_bar", "finish_progress", "log_step"]


def progress_bar(total, verbose, desc, **kwargs):
    """A tqdm bar over ``total`` steps, shown when ``verbose >= 1``."""
    return tqdm(total=total, disable=not verbose or verbose < 1, desc=desc, **kwargs)


def finish_progress(bar, completed=True):
    """Close ``bar``; when ``completed`` (the loop converged) first set its total to the
    steps done, so an early stop reads e.g. "79/79 100%" rather than "79/5000".

    Returns
    -------
    total : int or None
        The bar's total when closed.
    """
    if completed and bar.total is not None and bar.n < bar.total:
        bar.total = bar.n
        bar.refresh()
    bar.close()
    return bar.total


def log_step(verbose, message):
    """Write one log line (through tqdm, above any bar) when ``verbose >= 2``."""
    if verbose and verbose >= 2:
        tqdm.write(message)
