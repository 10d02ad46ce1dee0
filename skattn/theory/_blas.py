"""One BLAS thread on the theory engine's hot paths.

OpenBLAS's worker threads spin for a while after each call that woke them. Between the
compiled prox's numba threads (one per core) every such call then takes a core from them:
a threaded T = 4 prox evaluation ran at twice its time right after a 512² product (docs:
Changelog). The solver's own BLAS calls are small (Anderson's least squares, n ≤ 128
eigenvalue problems, products of node arrays), so one BLAS thread costs them little.
"""

from __future__ import annotations

import functools

_CONTROLLER = None


def single_blas_thread():
    """A context with the BLAS pools at one thread (threadpoolctl's public controller,
    built once: it inspects the loaded libraries). Process-wide while it lasts, like every
    BLAS thread setting; on exit the previous limits come back."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


def with_single_blas_thread(function):
    """Decorator: run ``function`` inside :func:`single_blas_thread`."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with single_blas_thread():
            return function(*args, **kwargs)
    return wrapper
