"""The one way skattn runs many independent jobs: sequentially, on joblib, or on dask.

:func:`map_jobs` is the engine under :func:`skattn.sweep.run_sweep` (which adds a store that
survives a kill), the experiment runners of :mod:`skattn.experiments` and the parallel
chunks of :func:`skattn.theory.state_evolution_curve`. It imports neither torch nor any
other layer of skattn, so the theory may use it.

Results reach the caller in the parent process, one at a time as they finish, through
``on_result``; the parent is therefore the only writer of anything the caller stores.

Worker processes stop with their parent. A joblib (loky) worker busy in a long job would
otherwise keep running after the parent is killed (SIGKILL gives the parent no chance to
stop it). Each job first makes sure its worker process runs a daemon thread that checks
every :data:`PARENT_CHECK_INTERVAL` seconds whether the process that submitted the job is
still its parent (``os.getppid()``), and ends the worker with ``os._exit`` when it is not.
The check is portable (no ``prctl``) and costs one system call per interval; it is skipped
for jobs that run in the submitting process itself (sequential, threads) and for workers
that are not its direct children (a dask worker under ``joblib.parallel_config``), whose
lifetime their own cluster manages.
"""

from __future__ import annotations

import numbers
import os
import threading
import time
import uuid

__all__ = ["BACKENDS", "map_jobs", "check_backend", "n_workers"]

BACKENDS = ("sequential", "joblib", "dask")

#: Seconds between two checks of a worker process that its parent is alive.
PARENT_CHECK_INTERVAL = 0.5

_watchdog_lock = threading.Lock()
_watched_parent = None  # the parent pid this worker process already watches


def _exit_with_parent(parent_pid):
    """In a worker process: start (once) a daemon thread that exits when the parent dies.

    Does nothing in ``parent_pid`` itself, or in a process that is not its direct child.
    """
    global _watched_parent
    if os.getpid() == parent_pid or os.getppid() != parent_pid:
        return
    with _watchdog_lock:
        if _watched_parent == parent_pid:
            return
        _watched_parent = parent_pid

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_INTERVAL)
        os._exit(1)  # the parent is gone: nobody will read this worker's results

    threading.Thread(target=watch, name="skattn-exit-with-parent", daemon=True).start()


def check_backend(backend, n_jobs, scheduler_address=None):
    """Validate the runner arguments shared by every caller; return ``n_jobs`` as int.

    Raises
    ------
    ValueError
        Naming ``backend``, ``n_jobs`` or ``scheduler_address``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, "
                         f"got {backend!r}.")
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a non-zero integer, got {n_jobs!r}.")
    if scheduler_address is not None:
        if backend != "dask":
            raise ValueError("scheduler_address is only used with backend='dask', got "
                             f"backend={backend!r}.")
        if not isinstance(scheduler_address, str) or not scheduler_address:
            raise ValueError(f"scheduler_address must be a non-empty str or None, got "
                             f"{scheduler_address!r}.")
    return int(n_jobs)


def n_workers(n_jobs):
    """Workers that joblib's ``n_jobs`` means on this machine (``-1`` = all CPUs)."""
    cpus = os.cpu_count() or 1
    return n_jobs if n_jobs > 0 else max(1, cpus + 1 + n_jobs)


def _run_sequential(func, jobs, emit, **_):
    for index, args in enumerate(jobs):
        emit(index, func(*args))


def _run_joblib(func, jobs, emit, *, n_jobs, **_):
    from joblib import Parallel, delayed

    parent_pid = os.getpid()

    def tagged(index, args):
        _exit_with_parent(parent_pid)
        return index, func(*args)

    try:
        parallel = Parallel(n_jobs=n_jobs, return_as="generator_unordered")
    except ValueError:  # pragma: no cover - joblib < 1.4: in-order generator
        parallel = Parallel(n_jobs=n_jobs, return_as="generator")
    for index, result in parallel(delayed(tagged)(i, args) for i, args in enumerate(jobs)):
        emit(index, result)


def _run_dask(func, jobs, emit, *, n_jobs, scheduler_address, on_lost, **_):
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:
        raise ImportError(
            "backend='dask' needs dask.distributed: `pip install 'skattn[distributed]'` "
            "or `pip install 'dask[distributed]'`."
        ) from exc
    cluster = None
    if scheduler_address is None:
        cluster = LocalCluster(processes=False, n_workers=1,
                               threads_per_worker=n_workers(n_jobs),
                               dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(scheduler_address)
    try:
        tag = uuid.uuid4().hex[:8]
        futures = {client.submit(func, *args, key=f"skattn-{tag}-{i}", pure=False): i
                   for i, args in enumerate(jobs)}
        for future in as_completed(list(futures)):
            index = futures.pop(future)  # drop our reference: results leave the cluster
            try:
                result = future.result()
            except Exception as exc:  # the task raised, or its worker died
                if on_lost is None:
                    raise
                result = on_lost(index, exc)
            emit(index, result)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


_RUNNERS = {"sequential": _run_sequential, "joblib": _run_joblib, "dask": _run_dask}


def map_jobs(func, jobs, *, backend="sequential", n_jobs=1, scheduler_address=None,
             on_result=None, on_lost=None):
    """Evaluate ``func(*args)`` for every ``args`` in ``jobs``; return the results in order.

    Parameters
    ----------
    func : callable
        Must be picklable for ``backend="joblib"`` with ``n_jobs != 1`` and for
        ``backend="dask"`` (cloudpickle: closures are fine).
    jobs : sequence of tuple
        The positional arguments of each call.
    backend : {"sequential", "joblib", "dask"}, default="sequential"
        ``"joblib"`` honours an enclosing ``joblib.parallel_config``; ``"dask"`` uses the
        scheduler at ``scheduler_address``, or an in-process ``LocalCluster`` with
        ``n_jobs`` threads, closed at the end.
    n_jobs : int, default=1
        joblib semantics (``-1`` = all CPUs).
    scheduler_address : str or None, default=None
        With ``backend="dask"`` only.
    on_result : callable or None
        Called in this process as ``on_result(index, result)`` as each job finishes (in
        completion order): the place to store or report finished work at once.
    on_lost : callable or None
        dask only: ``on_lost(index, exc)`` turns a task whose worker died (or that raised)
        into a result instead of raising.

    Returns
    -------
    list
        ``func(*jobs[i])`` at position ``i``. An exception raised by ``func`` propagates
        (after ``on_result`` has seen every job finished before it).
    """
    n_jobs = check_backend(backend, n_jobs, scheduler_address)
    jobs = [tuple(args) for args in jobs]
    results = [None] * len(jobs)

    def emit(index, result):
        results[index] = result
        if on_result is not None:
            on_result(index, result)

    if jobs:
        _RUNNERS[backend](func, jobs, emit, n_jobs=n_jobs,
                          scheduler_address=scheduler_address, on_lost=on_lost)
    return results
