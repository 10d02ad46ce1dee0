"""Vectorised safeguarded Newton iteration on brackets (edges, x ↦ u inversion)."""

from __future__ import annotations

import numpy as np

_EPS = np.finfo(float).eps
_TINY = 1e-300


# Kept over scipy's elementwise.find_root, which was 3x slower here at the same accuracy
def _bracketed_newton(fun, lo, hi, x0, *, increasing, xtol=1e-14, maxiter=100):
    """Vectorised safeguarded Newton for a monotone function on brackets ``[lo, hi]``.

    ``fun(x, idx)`` returns ``(f, f')`` at the points ``x`` (``idx`` are their indices in
    the full problem). ``increasing`` is a bool array (or scalar): sign of the slope.
    """
    lo = np.array(lo, dtype=float, copy=True)
    hi = np.array(hi, dtype=float, copy=True)
    x = np.clip(np.array(x0, dtype=float, copy=True), lo, hi)
    inc = np.broadcast_to(np.asarray(increasing, dtype=bool), x.shape).copy()
    active = np.arange(x.size)
    for _ in range(maxiter):
        if active.size == 0:
            break
        xa = x[active]
        f, fp = fun(xa, active)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = f / fp
        scale = np.maximum(np.abs(xa), _TINY)
        done = (f == 0) | (np.abs(step) <= xtol * scale)
        # update brackets: where f has the sign of the right end, x is a new hi
        above = (f > 0) == inc[active]
        hi[active] = np.where(above, xa, hi[active])
        lo[active] = np.where(~above, xa, lo[active])
        la, ha = lo[active], hi[active]
        xn = xa - step
        bad = ~np.isfinite(xn) | (xn < la) | (xn > ha)
        xn = np.where(bad & ~done, 0.5 * (la + ha), xn)
        xn = np.where(done & ~np.isfinite(xn), xa, xn)
        done |= (ha - la) <= xtol * np.maximum(np.abs(ha), np.abs(la))
        x[active] = xn
        active = active[~done]
    return x
