"""The compiled tests that a certificate's searches run once per combination of intervals,
and the T ≥ 3 Newton run's objective and indefinite solve, take no references to their
arrays.

numba takes a reference to each array a compiled function is passed (an atomic
increment, and a decrement where it dies); its pruning pass removes the pair only where
the function calls no other compiled function that stays a call and every path drops the
array at one place. The Krawczyk test written as one function calling its parts paid
two atomic operations per array per combination, a third of the star search's time
(docs: Changelog, "References"). A later edit that adds a second return or a call to one
of these functions would bring that back without changing a number; this test sees it
in the compiled code (a fresh, uncached compilation: numba does not show the code it
loads from its cache).
"""

from __future__ import annotations

import re

import numba
import numpy as np
import pytest

from skattn.theory.channels import (_certify_dual, _kernels, _prox_newton, _star_search,
                                    _stationarity)

T = 4
N = T + 2


def _arguments():
    rng = np.random.default_rng(0)
    y = rng.dirichlet(np.ones(T))
    x, r = rng.normal(size=N), np.full(N, 0.1)
    kappa, b = rng.uniform(1, 2, T), rng.normal(size=T)
    work, scratch = np.zeros((7, N, N)), np.ones((4, T))
    Kc, Kr, lo, hi = np.zeros(N), np.ones(N), np.full(N, -1.0), np.ones(N)
    nc = np.full(T, 2, np.int64)
    ivs = np.tile(np.array([[-2.0, -1.5], [-1.5, -1.0]]), (T, 1, 1))
    tags = np.zeros((T, 2), np.int64)
    K = T * (T + 1) // 2
    vectors, matrices, rotations = _prox_newton.newton_workspace(K)
    A = rng.normal(size=(K, K))
    B, index = rng.normal(size=(K, K - 1)), rng.integers(0, K, size=(T, T))
    return {
        (_prox_newton, "_objectiveT"): (rng.normal(size=K - 1), rng.normal(size=K),
                                        np.tile(y, (T, 1)), 0.5, B, index,
                                        np.ones((T, T)), 2.0, vectors),
        (_prox_newton, "_abs_inverse_solve"): (A + A.T, rng.normal(size=K), matrices[2],
                                               matrices[3], vectors[0], vectors[1],
                                               vectors[2], rotations, np.zeros(K)),
        (_certify_dual, "_contract_from_ends"): (x.copy(), r.copy(), y, 1e-12, scratch),
        (_certify_dual, "_value_floor"): (x, r, kappa, y, 0.0, scratch),
        (_stationarity, "_krawczyk_centre"): (x, kappa, y, b, np.zeros(T), work),
        (_stationarity, "_krawczyk_image"): (x, r, kappa, y, Kc, Kr, work, True, scratch),
        (_certify_dual, "_krawczyk_rest"): (x.copy(), r.copy(), kappa, y, 0.0, 1.0, True,
                                           lo, hi, Kc, Kr, scratch),
        (_star_search, "_combinations"): (nc, ivs, tags, np.zeros((T, 1)),
                                          np.ones((T, 1)), y, -1.0, 1.0, 1.0, 1e-12,
                                          np.empty((16, T), np.int64),
                                          np.empty((5, T, 2)), np.empty((5, T + 1)),
                                          np.empty(T, np.int64), np.empty((5, T + 1))),
    }


def _own_code(dispatcher):
    """The LLVM code of the function itself (not of the functions linked beside it)."""
    code = dispatcher.inspect_llvm(dispatcher.signatures[0])
    name = dispatcher.py_func.__name__
    start = re.search(rf"\ndefine [^\n]*@_ZN[^\n(]*{len(name)}{name}B", code)
    assert start is not None, f"no definition of {name} in its compiled code"
    body = code[start.start() + 1:]
    return body[:body.index("\n}\n")]


@pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("module, name", list(_arguments()),
                         ids=[name for _, name in _arguments()])
def test_per_combination_tests_take_no_references(module, name):
    fresh = numba.njit(nogil=True, error_model="numpy")(getattr(module, name).py_func)
    fresh(*_arguments()[module, name])
    body = _own_code(fresh)
    assert "@NRT_incref(" not in body and "@NRT_decref(" not in body


def test_the_check_sees_references():
    """The Krawczyk test as one function (``_krawczyk``: the centre's part, then the
    image, each a call) keeps its references: the check reports them."""
    args = _arguments()
    x, r, kappa, y, Kc, Kr, work = (args[_stationarity, "_krawczyk_image"][i]
                                    for i in range(7))
    fresh = numba.njit(nogil=True, error_model="numpy")(_stationarity._krawczyk.py_func)
    fresh(x, r, kappa, y, np.zeros(T), Kc, Kr, work)
    assert "@NRT_incref(" in _own_code(fresh)
