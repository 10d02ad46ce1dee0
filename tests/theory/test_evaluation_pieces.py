"""Pieces of one state-evolution evaluation made cheaper without changing what they compute:
the compiled T = 2 convexity test, the compiled divided differences of the sampled prior
side, the Wishart kernel's edges of U in scalar arithmetic and the nodes' contiguous
blocks. Each computes what it replaces to the last bit (the state evolution's path at a
rough point turns on the last bit: a reordered sum changed a T = 3 result by 1 %)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.theory.channels import GaussianNodes, _kernels
from skattn.theory.channels.prox import _curvature_floor, _curvature_table
from skattn.theory.denoisers import _capped_atoms
from skattn.theory.laws import WishartLaw
from skattn.theory.spectral import _compiled
from skattn.theory.spectral.kernels import _WishartKernel

needs_numba = pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="needs numba")


@needs_numba
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10 ** 6), beta=st.floats(0.2, 6.0),
       lam_p=st.floats(1e-3, 10.0), spread=st.floats(0.0, 4.0))
def test_compiled_convexity_test_is_the_numpy_one_bit_for_bit(seed, beta, lam_p, spread):
    rng = np.random.default_rng(seed)
    n = 2000
    # label entries of softmax rows (p + r = 1) and, beyond them, c = 1 + p − r anywhere
    # around and outside the table [−2, 4], its edges included
    p = rng.uniform(0.0, 1.0, (n, 2))
    r = 1.0 - p
    p[n // 2:] = rng.uniform(-1.5 - spread, 2.5 + spread, (n - n // 2, 2))
    r[n // 2:] = rng.uniform(-1.5, 1.5, (n - n // 2, 2))
    p[:4], r[:4] = np.array([[-3.0, 3.0]]), 0.0          # c = −2 and c = 4 exactly
    sigma = 10.0 ** rng.uniform(-3, 3, n)
    lower = np.min(_curvature_floor(1 + p - r), axis=1) * beta ** 2
    want = lam_p / sigma * (1 - 1e-3) + 1.05 * np.minimum(lower, 0) > 0
    grid, table = _curvature_table()
    got = _kernels.convex2(p, r, sigma, float(beta ** 2), lam_p, grid[0], grid[-1],
                           grid[1] - grid[0], table)
    assert np.array_equal(got, want)


@needs_numba
def test_a_node_with_a_nan_label_is_not_convex():
    grid, table = _curvature_table()
    p = np.array([[0.5, np.nan], [0.5, 0.5]])
    got = _kernels.convex2(p, 1 - p, np.full(2, 1e-3), 1.0, 1.0, grid[0], grid[-1],
                           grid[1] - grid[0], table)
    assert got.tolist() == [False, True]


def _pairwise_divided_differences(x, eps, rank):
    """The (d, d) numpy form the compiled sum replaces."""
    x = np.sort(x)
    d = x.size
    kept = np.zeros(d)
    kept[d - rank:] = 1.0
    g = kept * np.maximum(x - eps, 0.0)
    gap = x[:, None] - x[None, :]
    same = gap == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        dd = np.where(same, 0.5 * (kept[:, None] + kept[None, :]) * (x[:, None] > eps),
                      (g[:, None] - g[None, :]) / np.where(same, 1.0, gap))
    return np.sum(dd) / d ** 2


@needs_numba
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10 ** 6), d=st.integers(2, 200), eps=st.floats(-1.0, 1.5),
       rank_share=st.floats(0.0, 1.0), repeats=st.booleans())
def test_compiled_divided_differences_match_the_pairwise_form(seed, d, eps, rank_share,
                                                              repeats):
    x = np.random.default_rng(seed).standard_normal(d)
    if repeats:                      # coinciding atoms take the derivative's branch
        x = np.round(x, 1)
    rank = max(1, int(round(rank_share * d)))
    got = _capped_atoms(x, eps, rank).divided_difference
    want = _pairwise_divided_differences(x, eps, rank)
    assert got == want                # the same elements, summed by numpy: to the last bit


def test_divided_differences_without_numba_are_the_pairwise_form(monkeypatch):
    x = np.random.default_rng(0).standard_normal(50)
    monkeypatch.setattr(_compiled, "HAVE_NUMBA", False)
    assert _capped_atoms(x, 0.1, 30).divided_difference == \
        _pairwise_divided_differences(x, 0.1, 30)


@settings(max_examples=40, deadline=None)
@given(kappa=st.floats(0.1, 3.0), log_delta=st.floats(-2.0, 0.5))
def test_wishart_edges_of_u_solve_the_edge_equation(kappa, log_delta):
    """At an end of U, ``∫ μ0(dt)/(u − t)² = 1/δ²`` (the definition, not the quartic): the
    difference changes sign within a millionth of each end's distance to the support of μ0
    (F0 is steep near the support, where small δ puts the ends), or within a thousand
    units in the last place of the end where that distance is below the double's
    resolution of it."""
    delta = 10.0 ** log_delta
    law = WishartLaw(kappa)
    kernel = _WishartKernel(law)
    ends = np.ravel(kernel.edges_u(delta))
    assert np.all(np.diff(ends) > 0)
    support = list(law.bulk_edges()) + ([0.0] if law.atom_mass > 0 else [])
    distance = np.min(np.abs(ends[:, None] - np.array(support)[None, :]), axis=1)
    assert np.all(distance > 0)
    step = np.maximum(1e-6 * distance, 1e3 * np.spacing(np.abs(ends)))
    below = kernel.F0(ends - step) * delta ** 2 - 1.0
    above = kernel.F0(ends + step) * delta ** 2 - 1.0
    assert np.all(below * above <= 0), (ends, below, above)


def test_node_blocks_are_contiguous_copies_of_the_column_slices():
    nodes = GaussianNodes(6, n_points=512, seed=1)
    first, rest = nodes.blocks(3)
    assert first.flags.c_contiguous and rest.flags.c_contiguous
    np.testing.assert_array_equal(first, nodes.points[:, :3])
    np.testing.assert_array_equal(rest, nodes.points[:, 3:])
    assert nodes.blocks(3)[0] is first                   # kept for the next call
    assert nodes.blocks(2)[0].shape == (512, 2)          # another k: the other blocks
    sub = nodes.subset(128)                              # a prefix has its own blocks
    np.testing.assert_array_equal(sub.blocks(3)[1], nodes.points[:128, 3:])
    with pytest.raises(ValueError, match="k"):
        nodes.blocks(7)
