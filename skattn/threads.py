"""Thread limits for fits run side by side (no torch import of its own).

A torch fit uses ``torch.get_num_threads()`` intra-op threads, by default one per core; the
BLAS under numpy and scipy (used by the theory and AMP) has its own pool. Two fits in
parallel on a machine with as many cores as one of them wants *oversubscribe* it: the
threads of both fight for the cores and both run slower than one after the other.

What already holds, and what :func:`limit_threads` adds:

- ``GridSearchCV(n_jobs=k)`` and every ``n_jobs`` of skattn run on joblib's ``loky``
  processes by default. joblib starts each worker with ``OMP_NUM_THREADS`` (and the BLAS
  equivalents) set to ``max(1, cpu_count // k)``, which torch reads at import, so the fits
  in a search share the cores without oversubscribing. To choose the per-worker count
  yourself, use joblib's public ``joblib.parallel_config(inner_max_num_threads=n)``
  around the search.
- In the main process (``n_jobs=1``, a notebook, the threading backend) nothing limits
  threads; wrap the work in :func:`limit_threads` when other processes load the machine
  or when fits run in threads.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import sys

from threadpoolctl import threadpool_limits

__all__ = ["limit_threads"]


@contextlib.contextmanager
def limit_threads(n_threads):
    """Run the enclosed code with at most ``n_threads`` torch, numba and BLAS/OpenMP
    threads.

    Sets ``torch.set_num_threads`` (when torch is imported; this module never imports it),
    ``numba.set_num_threads`` (the theory's compiled prox, for the calling thread) and,
    through threadpoolctl, the BLAS and OpenMP pools that numpy and scipy use; on exit
    restores the previous settings. On a machine that other processes load, one thread
    is often the faster: threads that wait for a descheduled partner spin.

    Parameters
    ----------
    n_threads : int
        Number of threads, from 1 to the machine's CPU count (more is no limit).

    Yields
    ------
    None

    Raises
    ------
    ValueError
        If ``n_threads`` is not an integer in ``[1, os.cpu_count()]``.

    Notes
    -----
    The torch setting is process-wide, not per thread: use this around the whole parallel
    section (or inside a worker process), not around one of several fits run in threads.

    Examples
    --------
    >>> import skattn
    >>> with skattn.limit_threads(1):
    ...     pass  # fits here run single-threaded
    """
    n_cpu = os.cpu_count() or 1
    if isinstance(n_threads, bool) or not isinstance(n_threads, numbers.Integral) \
            or not 1 <= n_threads <= n_cpu:
        raise ValueError(f"n_threads must be an integer in [1, {n_cpu}] (the CPU count), "
                         f"got {n_threads!r}.")
    n_threads = int(n_threads)
    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch is not None else None
    # torch imported inside the block reads OMP_NUM_THREADS when it starts
    saved_env = os.environ.get("OMP_NUM_THREADS")
    if torch is None:
        os.environ["OMP_NUM_THREADS"] = str(n_threads)
    numba_previous = _numba_threads(n_threads)
    try:
        with threadpool_limits(limits=n_threads):
            if torch is not None:
                torch.set_num_threads(n_threads)
            try:
                yield
            finally:
                late = sys.modules.get("torch") if torch is None else None
                if previous is not None:
                    torch.set_num_threads(previous)
                elif late is not None:
                    # imported inside the block: give it what it would have had outside
                    late.set_num_threads(int(saved_env) if saved_env and saved_env.isdigit()
                                         and int(saved_env) > 0 else n_cpu)
    finally:
        if numba_previous is not None:
            _numba_threads(numba_previous)
        if torch is None:
            if saved_env is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved_env


def _numba_threads(n_threads):
    """Set the threads of numba's parallel loops (the theory's compiled prox) for this
    thread, at most numba's configured count; returns the previous count (None without
    numba)."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))
    return previous
