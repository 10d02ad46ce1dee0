"""Progress reporting shared by every iterative routine (tqdm only: the theory may use it).

The ``verbose`` convention, the same for every estimator, solver and runner of skattn:

- ``verbose=0`` (or False): silent;
- ``verbose=1`` (or True): one tqdm progress bar per loop. A loop whose length is known
  (α points of ``state_evolution_curve``, λ rows of ``solve_phase_diagram``, rows of a
  sweep or of a finite-size-scaling grid) shows a bar over that total. A loop that stops
  when it converges (the optimiser iterations of the estimators' ``fit``, AMP) shows no
  total, since ``max_iter`` is only a cap and an ETA from it would be false: the
  iterations done, the elapsed time and the current objective or change; so does one
  state-evolution solve (``options={"verbose": 1}``, its map's evaluations). A long call
  with no loop of its own to report (an estimator's one solve) shows a ticker of the
  elapsed time (:func:`ticker`);
- ``verbose=2``: the bar, plus one log line per iteration or per point (written through
  ``tqdm.write``, so it does not break the bar), where the routine has per-step numbers to
  report (the torch training loop, AMP, the state-evolution solve).

The estimators and :func:`skattn.sweep.run_sweep` reject negative values; pass 0, 1 or 2
everywhere (larger values act as 2).
"""

from __future__ import annotations

import contextlib
import threading
import time

from tqdm.auto import tqdm

__all__ = ["progress_bar", "iteration_bar", "finish_progress", "log_step", "ticker"]

# seconds between two refreshes of a ticker, and before it shows at all
_TICK = 0.5
_TICKER_DELAY = 1.0


def progress_bar(total, verbose, desc, **kwargs):
    """A tqdm bar over ``total`` steps, shown when ``verbose >= 1``."""
    return tqdm(total=total, disable=not verbose or verbose < 1, desc=desc, **kwargs)


def iteration_bar(verbose, desc, **kwargs):
    """A tqdm bar with no total for a loop that stops when it converges, shown when
    ``verbose >= 1``: "lbfgs: 174it [00:09, 19.3it/s, objective/d²=…]"."""
    return tqdm(total=None, disable=not verbose or verbose < 1, desc=desc, **kwargs)


@contextlib.contextmanager
def ticker(verbose, desc, *, delay=None, **kwargs):
    """Show ``desc`` with the elapsed time, refreshed every half second, while the body
    runs (``verbose >= 1``); at the end the line reads "desc: done in 12.3 s" (or
    "failed in …" when the body raises).

    For a long call that reports no steps of its own (e.g. one state-evolution solve): the
    user sees that it runs and for how long, and no invented fraction of completion. A
    body that ends within ``delay`` seconds (default 1) shows nothing (a quick result, or
    an error message, is not preceded by a line of progress).
    """
    if not verbose or verbose < 1:
        yield
        return
    delay = _TICKER_DELAY if delay is None else delay
    stop = threading.Event()
    state = {"bar": None}
    lock = threading.Lock()

    def tick():
        if stop.wait(delay):
            return
        with lock:
            state["bar"] = tqdm(total=None, desc=desc,
                                bar_format="{desc}: {elapsed} elapsed", **kwargs)
        while not stop.wait(_TICK):
            with lock:
                state["bar"].refresh()

    thread = threading.Thread(target=tick, daemon=True)
    start = time.perf_counter()
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        thread.join()
        bar = state["bar"]
        if bar is not None:
            elapsed = time.perf_counter() - start
            bar.bar_format = "{desc}: " + f"{'done' if ok else 'failed'} in {elapsed:.1f} s"
            bar.close()


def finish_progress(bar, completed=True):
    """Close ``bar``; when ``completed`` (the loop converged) first set its total to the
    steps done, so an early stop reads e.g. "79/79 100%" rather than "79/5000".

    Returns
    -------
    total : int or None
        The bar's total when closed.
    """
    if completed and bar.total is not None and bar.n < bar.total:  # a bar with a total
        bar.total = bar.n
        bar.refresh()
    bar.close()
    return bar.total


def log_step(verbose, message):
    """Write one log line (through tqdm, above any bar) when ``verbose >= 2``."""
    if verbose and verbose >= 2:
        tqdm.write(message)
