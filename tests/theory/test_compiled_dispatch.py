"""The compiled (numba) functions of the theory take no default arguments.

numba sends a call that leaves out a defaulted argument through its slow dispatch path:
about 45 µs a call against 5 µs, measured on ``_descend_row``, which the certificate calls
tens of thousands of times a solve (docs: Changelog, "The double star on by default").
Callers pass every argument (None where an optional array is absent); this test keeps a
new default from slipping in.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

numba = pytest.importorskip("numba")
from numba.core.dispatcher import Dispatcher  # noqa: E402

import skattn.theory  # noqa: E402


def _compiled_functions():
    """(module, name, dispatcher) of every compiled function defined in skattn.theory."""
    found = []
    for info in pkgutil.walk_packages(skattn.theory.__path__, "skattn.theory."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, Dispatcher) and obj.__module__ == module.__name__:
                found.append((module.__name__, name, obj))
    return found


def _defaults(dispatcher):
    parameters = inspect.signature(dispatcher.py_func).parameters.values()
    return [p.name for p in parameters if p.default is not inspect.Parameter.empty]


def test_compiled_functions_are_found():
    """The scan sees the compiled kernels (else the test below would pass on nothing)."""
    names = {(module, name) for module, name, _ in _compiled_functions()}
    assert ("skattn.theory.channels._certify_split", "_descend_row") in names
    assert ("skattn.theory.channels._proxT", "proxT_parallel") in names
    assert len(names) > 50


def test_no_compiled_function_has_default_arguments():
    offenders = {f"{module}.{name}": _defaults(obj)
                 for module, name, obj in _compiled_functions() if _defaults(obj)}
    assert not offenders, offenders


def test_the_check_sees_a_default():
    """A compiled function with a default is reported by the helper the test uses."""
    @numba.njit
    def with_default(x, y=1.0):
        return x + y

    assert _defaults(with_default) == ["y"]
