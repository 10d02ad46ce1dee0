"""Small argument checks shared by every layer (numpy only).

Each check raises an exception that names the argument and the expected range, so a user
knows what to change without reading the source.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "check_random_state_arg",
    "check_scalar_range",
    "check_finite_array",
    "check_choice",
]


def check_scalar_range(value, name, *, low=None, high=None, low_inclusive=True,
                       high_inclusive=True, integer=False):
    """Validate a real (or integer) scalar and return it as a Python number.

    Raises
    ------
    TypeError
        If ``value`` is not a real number (or not an integer when ``integer=True``).
    ValueError
        If ``value`` is not finite or lies outside the range.
    """
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a {'integer' if integer else 'real number'}, got bool.")
    kind = numbers.Integral if integer else numbers.Real
    if not isinstance(value, kind):
        raise TypeError(
            f"{name} must be {'an integer' if integer else 'a real number'}, "
            f"got {type(value).__name__} ({value!r})."
        )
    value = int(value) if integer else float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}.")
    lo_ok = low is None or (value >= low if low_inclusive else value > low)
    hi_ok = high is None or (value <= high if high_inclusive else value < high)
    if not (lo_ok and hi_ok):
        left = "(-inf" if low is None else ("[" if low_inclusive else "(") + f"{low}"
        right = "inf)" if high is None else f"{high}" + ("]" if high_inclusive else ")")
        raise ValueError(f"{name} must lie in {left}, {right}, got {value}.")
    return value


def check_finite_array(array, name, *, ndim=None, dtype=float):
    """Convert to a numpy array, checking dimension and that every entry is finite."""
    try:
        raw = np.asarray(array)
        if np.iscomplexobj(raw):
            raise TypeError("complex values are not accepted")
        arr = np.asarray(raw, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers: {exc}") from exc
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            raise ValueError(
                f"{name} must have {' or '.join(map(str, allowed))} dimensions, "
                f"got shape {arr.shape}."
            )
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return arr


def check_choice(value, name, choices):
    """Check that ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}.")
    return value


def check_random_state_arg(random_state, name="random_state"):
    """``sklearn.utils.check_random_state`` with an error that names the argument."""
    from sklearn.utils import check_random_state

    try:
        return check_random_state(random_state)
    except ValueError as exc:
        raise ValueError(f"{name} must be None, an int or a numpy RandomState/Generator, "
                         f"got {random_state!r}.") from exc
