"""Small argument checks shared by every layer (numpy only).

Each check raises an exception that names the argument and the expected range, so a user
knows what to change without reading the source.
"""

from __future__ import annotations

import functools
import numbers
import os

import numpy as np

__all__ = [
    "check_random_state_arg",
    "is_random_state",
    "InvalidParameterError",
    "Interval",
    "Options",
    "Predicate",
    "NONE",
    "BOOLEAN",
    "VERBOSE",
    "RANDOM_STATE",
    "validate_parameters",
    "check_scalar_range",
    "check_finite_array",
    "check_choice",
    "check_finite_result",
    "check_memory",
    "memory_limit_bytes",
    "channel_memory_bytes",
    "atomic_fit",
    "MEMORY_LIMIT_ENV",
    "DEFAULT_MEMORY_LIMIT_GB",
    "MAX_INVERSE_TEMPERATURE",
    "MAX_NOISE",
    "MAX_ALPHA",
    "MAX_REG_LAMBDA",
    "MIN_ALPHA",
    "MIN_INVERSE_TEMPERATURE",
    "MIN_TARGET_SCALE",
    "MAX_TARGET_SCALE",
    "MIN_RANK_RATIO",
    "MAX_INT",
    "check_target_scale",
    "broadcast_to_grid",
]

# Documented ranges of the model scalars. Beyond them the state evolution's root finding
# and exponentials leave float64 (OverflowError, failed edge search) and the torch
# objective leaves float32; every solver converges or reports non-convergence inside them.
MAX_INVERSE_TEMPERATURE = 1e6  # beta, target_beta
MAX_NOISE = 1e6  # label noise Delta
MAX_ALPHA = 1e6  # sample ratio n/d^2
MAX_REG_LAMBDA = 1e6  # weight decay lambda
# Lower ends, found by the adversarial pass of issue #28: below them float64 underflows
# inside the state evolution (alpha <= 1e-50: failed edge search, 1e-310: NaN in a linear
# solve; beta = 1e-300: a division by zero; target_beta <= 1e-15 loses digits; a Wishart
# rank ratio <= 1e-10 does not converge). Inside them the solver gives finite results.
MIN_ALPHA = 1e-12  # sample ratio (the prediction is that of alpha -> 0 long before)
MIN_INVERSE_TEMPERATURE = 1e-6  # beta, target_beta
MIN_RANK_RATIO = 1e-6  # kappa0 of a Wishart target, in the state evolution
# Root-mean-square eigenvalue sqrt(Tr S0^2 / d) of a target the state evolution takes:
# below 1e-8 the conjugates underflow (NaN at 1e-20), above 1e3 the quadrature of the
# saturated softmax needs minutes (1e2: 50 s at T = 2, d = 10), and at 1e100 its panels
# grow without bound. Targets of this package have scale of order 1. The denoisers refuse
# the upper end at once and the lower end where the conjugates underflow (the spiked route
# denoises a target's bulk, which may be zero up to rounding).
MIN_TARGET_SCALE = 1e-8
MAX_TARGET_SCALE = 1e3
# The largest integer argument (counts, iterations, sizes): past a C int64 numpy and torch
# cannot hold it, and long before it every size runs out of memory.
MAX_INT = 2 ** 63 - 1
_FLOAT_MAX = float(np.finfo(float).max)  # a Python float: compared exactly with any int


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
    if isinstance(value, numbers.Integral):
        value = int(value)  # exact at any size (np.isfinite fails on ints past int64)
        if integer and high is None and value > MAX_INT:
            high = MAX_INT  # what numpy and torch can hold
        if not integer:
            try:
                value = float(value)
            except OverflowError:
                raise ValueError(f"{name} must be finite, got an int of {value.bit_length()} "
                                 "bits (beyond float64).") from None
    else:
        value = float(value)
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


_MAX_SEED = 2 ** 32 - 1  # numpy's RandomState accepts seeds in [0, 2**32 - 1]


def check_random_state_arg(random_state, name="random_state"):
    """Turn a seed argument into a ``numpy.random.RandomState``, or raise naming it.

    The one random-state helper of skattn: every layer (data, estimators, training,
    theory) seeds through it, so every layer accepts the same values.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        None: numpy's global RandomState; an int in ``[0, 2**32 - 1]``: a fresh
        RandomState seeded with it; a RandomState: itself; a Generator: a RandomState
        drawing from the Generator's bit generator (the two share one stream, so draws
        through either advance the Generator, as they would a passed RandomState).
    name : str, default="random_state"
        The argument's name, for the error message.

    Returns
    -------
    rng : numpy.random.RandomState

    Raises
    ------
    ValueError
        Naming ``name``, for a negative or too large int, a bool, or any other type.
    """
    from sklearn.utils import check_random_state

    if isinstance(random_state, np.random.Generator):
        return np.random.RandomState(random_state.bit_generator)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state,
                                                                     (bool, np.bool_)):
        if not 0 <= random_state <= _MAX_SEED:
            raise ValueError(f"{name} must be None, an int in [0, {_MAX_SEED}], a numpy "
                             f"RandomState or a numpy Generator, got {random_state!r}.")
        return check_random_state(int(random_state))
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return check_random_state(random_state)
    raise ValueError(f"{name} must be None, an int in [0, {_MAX_SEED}], a numpy RandomState "
                     f"or a numpy Generator, got {random_state!r}.")


def is_random_state(value):
    """Whether :func:`check_random_state_arg` accepts ``value`` (for parameter tables)."""
    try:
        check_random_state_arg(value)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------- estimator parameters
class InvalidParameterError(ValueError, TypeError):
    """An estimator parameter has the wrong type or value (raised by ``fit``).

    A subclass of both :class:`ValueError` and :class:`TypeError` (as scikit-learn's own),
    so code catching either keeps working.
    """


class Interval:
    """Numbers of one kind in a range, for a parameter table.

    Parameters
    ----------
    kind : {"int", "real", "real_not_int"}
        "int": integers; "real": any real number (ints included); "real_not_int": real
        numbers that are not ints (so that an int and a float can mean different things,
        as for ``width``). Bools are never accepted, and real values must be finite.
    low, high : float or None
        Bounds (None: unbounded).
    closed : {"left", "right", "both", "neither"}, default="left"
        Which bounds belong to the range.
    """

    _KINDS = {"int": "an int", "real": "a float", "real_not_int": "a float"}

    def __init__(self, kind, low=None, high=None, *, closed="left"):
        check_choice(kind, "kind", tuple(self._KINDS))
        check_choice(closed, "closed", ("left", "right", "both", "neither"))
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def accepts(self, value):
        if isinstance(value, (bool, np.bool_)):
            return False
        if self.kind == "int" and not isinstance(value, numbers.Integral):
            return False
        if not isinstance(value, numbers.Real):
            return False
        if self.kind == "real_not_int" and isinstance(value, numbers.Integral):
            return False
        if isinstance(value, numbers.Integral):
            # compared exactly: np.isfinite fails on Python ints past int64
            value = int(value)
            if self.kind == "int" and self.high is None and value > MAX_INT:
                return False
            if self.kind != "int" and abs(value) > _FLOAT_MAX:
                return False  # a real parameter becomes a float64
        elif not np.isfinite(value):
            return False
        low_closed = self.closed in ("left", "both")
        high_closed = self.closed in ("right", "both")
        above_low = self.low is None or (value >= self.low if low_closed else value > self.low)
        below_high = self.high is None or (
            value <= self.high if high_closed else value < self.high)
        return above_low and below_high

    def __str__(self):
        left = "(-inf" if self.low is None else (
            ("[" if self.closed in ("left", "both") else "(") + f"{self.low}")
        if self.high is None and self.kind == "int":
            right = f"{MAX_INT}]"  # the largest numpy and torch hold
        else:
            right = "inf)" if self.high is None else (
                f"{self.high}" + ("]" if self.closed in ("right", "both") else ")"))
        return f"{self._KINDS[self.kind]} in the range {left}, {right}"


class Options:
    """One of a fixed set of strings, for a parameter table."""

    def __init__(self, *options):
        self.options = options

    def accepts(self, value):
        return isinstance(value, str) and value in self.options

    def __str__(self):
        return "a str among {" + ", ".join(repr(o) for o in self.options) + "}"


class Predicate:
    """Values a function accepts, described in words, for a parameter table."""

    def __init__(self, test, description):
        self.test, self.description = test, description

    def accepts(self, value):
        return bool(self.test(value))

    def __str__(self):
        return self.description


NONE = Predicate(lambda value: value is None, "None")
BOOLEAN = Predicate(lambda value: isinstance(value, (bool, np.bool_)), "a bool")
# the meaning of each verbose level, the same everywhere: skattn/_progress.py
VERBOSE = Predicate(
    lambda value: isinstance(value, (bool, np.bool_)) or Interval("int", 0).accepts(value),
    "an int in the range [0, inf) or a bool")
RANDOM_STATE = Predicate(
    is_random_state,
    f"None, an int in [0, {_MAX_SEED}], a numpy RandomState or a numpy Generator")


def validate_parameters(owner, params, constraints):
    """Check each parameter against its table entry; raise naming the first that fails.

    Parameters
    ----------
    owner : str
        The estimator's class name, for the message.
    params : dict
        Parameter name -> value (e.g. ``estimator.get_params(deep=False)``).
    constraints : dict
        Parameter name -> list of accepted kinds (:class:`Interval`, :class:`Options`,
        :class:`Predicate`); a value passes when any kind accepts it. Parameters absent
        from the table are not checked.

    Raises
    ------
    InvalidParameterError
        ``The 'name' parameter of Owner must be ... Got value instead.``
    """
    for name, accepted in constraints.items():
        value = params[name]
        if any(kind.accepts(value) for kind in accepted):
            continue
        described = [str(kind) for kind in accepted]
        expected = described[0] if len(described) == 1 else (
            ", ".join(described[:-1]) + " or " + described[-1])
        shown = repr(value)
        if len(shown) > 80:  # e.g. an int of 400 digits
            shown = f"{shown[:30]}... ({len(shown)} characters)"
        raise InvalidParameterError(f"The {name!r} parameter of {owner} must be {expected}. "
                                    f"Got {shown} instead.")


# ------------------------------------------------------------------ memory and overflow
MEMORY_LIMIT_ENV = "SKATTN_MEMORY_LIMIT_GB"
DEFAULT_MEMORY_LIMIT_GB = 8.0
_GIB = 2 ** 30


def memory_limit_bytes(limit_gb=None):
    """The memory limit of one skattn computation, in bytes.

    Parameters
    ----------
    limit_gb : float or None, default=None
        The limit in GiB; None reads the environment variable ``SKATTN_MEMORY_LIMIT_GB``
        (default 8).

    Returns
    -------
    limit : float

    Raises
    ------
    ValueError
        If the limit (or the environment variable) is not a positive finite number.
    """
    name = "limit_gb"
    if limit_gb is None:
        raw = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
        if not raw:
            return DEFAULT_MEMORY_LIMIT_GB * _GIB
        name = f"the environment variable {MEMORY_LIMIT_ENV}"
        try:
            limit_gb = float(raw)
        except ValueError:
            raise ValueError(f"{name} must be a positive number of GiB, got {raw!r}.") from None
    return check_scalar_range(limit_gb, name, low=0, low_inclusive=False) * _GIB


def check_memory(estimate_bytes, what, *, limit_gb=None):
    """Raise before a computation whose estimated memory exceeds the limit.

    Called before the large allocations, so a too large problem fails in milliseconds
    with a message instead of being killed by the system.

    Parameters
    ----------
    estimate_bytes : int or float
        Estimated peak memory of the computation.
    what : str
        The arguments that set the size, starting with the argument's name (e.g.
        ``"n_tokens=40 (...)"``), so the message names what to lower.
    limit_gb : float or None, default=None
        See :func:`memory_limit_bytes`.

    Raises
    ------
    ValueError
        ``<what> needs about X GiB of memory, above the limit of Y GiB; ...``.
    """
    limit = memory_limit_bytes(limit_gb)
    if estimate_bytes > limit:
        raise ValueError(
            f"{what} needs about {estimate_bytes / _GIB:.3g} GiB of memory, above the "
            f"limit of {limit / _GIB:.3g} GiB; use a smaller problem, or raise the limit "
            f"with the environment variable {MEMORY_LIMIT_ENV}.")


def channel_memory_bytes(n_tokens, n_points):
    """Estimated peak memory (bytes) of an attention channel evaluated at ``n_points``.

    The channel of T tokens works in ``K = T(T+1)/2`` coordinates: it holds a
    ``T³ × K²`` contraction table, and per point ``T³`` row Hessians, ``K × K``
    Hessians and prox systems, and ``T² × K`` Jacobians (float64).

    Parameters
    ----------
    n_tokens : int
    n_points : int
        Quadrature nodes of the state evolution, or samples of AMP (0: the channel alone).

    Returns
    -------
    estimate : int
    """
    T = int(n_tokens)
    K = T * (T + 1) // 2
    return 8 * (T ** 3 * K ** 2 + int(n_points) * (T ** 3 + 3 * K * K + 2 * T * T * K + 4 * K))


def check_finite_result(values, name, array):
    """Raise naming the input ``name`` when a forward pass on it overflowed float64.

    Parameters
    ----------
    values : ndarray
        The computed result (e.g. pre-activations or attention maps).
    name : str
        The input's name (e.g. ``"X"``).
    array : ndarray
        The input, whose largest entry is reported.

    Returns
    -------
    values : ndarray
        Unchanged, when every entry is finite.

    Raises
    ------
    ValueError
        Naming ``name`` and the scale of its entries, when ``values`` has NaN or inf.
    """
    values = np.asarray(values)
    if values.size and not np.all(np.isfinite(values)):
        scale = float(np.max(np.abs(array))) if np.size(array) else 0.0
        raise ValueError(
            f"{name} has entries up to {scale:.3g} in absolute value, at which the "
            f"forward pass (the pre-activation x_a^T S x_b, quadratic in {name}) overflows "
            f"float64 to inf or NaN; rescale {name} (standardised tokens have entries of "
            f"order 1).")
    return values


def atomic_fit(keep=None):
    """Decorate an estimator's ``fit`` so that a failing fit leaves the estimator unchanged.

    The estimator's attributes are saved before ``fit`` and restored when it raises, so a
    fit that fails half-way (after input validation has reset ``n_features_in_``, or after
    a first stage has computed) never leaves new fitted attributes next to old ones.

    Parameters
    ----------
    keep : callable or None, default=None
        ``keep(exc) -> bool``: True for an exception after which the attributes ``fit``
        set are kept (a documented partial result, e.g. the last finite parameters of a
        diverged training).

    Returns
    -------
    decorator : callable
    """
    def decorate(fit):
        @functools.wraps(fit)
        def wrapper(self, *args, **kwargs):
            saved = dict(vars(self))
            try:
                return fit(self, *args, **kwargs)
            except BaseException as exc:
                if keep is None or not keep(exc):
                    vars(self).clear()
                    vars(self).update(saved)
                raise
        return wrapper
    return decorate


def check_target_scale(second_moment, name="target"):
    """Refuse a target whose eigenvalues the state evolution cannot hold in float64.

    Parameters
    ----------
    second_moment : float
        ``Tr S0² / d`` of the target (the second moment of its spectral law).
    name : str, default="target"
        The argument, for the message.

    Raises
    ------
    ValueError
        Naming ``name``, when the root-mean-square eigenvalue ``√(Tr S0²/d)`` lies outside
        ``[MIN_TARGET_SCALE, MAX_TARGET_SCALE]`` (1e-8, 1e3), or is not finite.
    """
    scale = float(np.sqrt(second_moment)) if second_moment >= 0 else float("nan")
    if not (MIN_TARGET_SCALE <= scale <= MAX_TARGET_SCALE):
        raise ValueError(
            f"{name} has root-mean-square eigenvalue sqrt(Tr S0^2/d) = {scale:.3g}, outside "
            f"[{MIN_TARGET_SCALE:g}, {MAX_TARGET_SCALE:g}] where the state evolution holds in "
            f"float64; rescale the target (the package's targets have scale of order 1; "
            f"target_beta sets the softmax's temperature).")


def broadcast_to_grid(value, name, shape, grid_name):
    """``value`` (a scalar or one value per grid point) as an array of ``shape``.

    Parameters
    ----------
    value : float or array-like
    name : str
        The argument, for the message (e.g. ``"reg_lambda"``).
    shape : tuple of int
        The grid's shape.
    grid_name : str
        The grid's argument (e.g. ``"alphas"``).

    Raises
    ------
    ValueError
        Naming ``name`` and both lengths, when ``value`` cannot be broadcast to ``shape``
        (instead of numpy's "operands could not be broadcast").
    """
    arr = check_finite_array(value, name)
    try:
        return np.broadcast_to(arr, shape)
    except ValueError:
        raise ValueError(f"{name} must be a scalar or have one value per point of "
                         f"{grid_name} (shape {tuple(shape)}), got shape {arr.shape}.") from None
