"""The column rows' lowered problems shared by the star and the double star
(channels/_certify_columns.py). Their proofs' soundness is tested through the two
certificates (test_certify_star.py, test_certify_double.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.theory.channels import _certify_columns as columns
from skattn.theory.channels import _kernels

pytestmark = pytest.mark.skipif(not _kernels.HAVE_NUMBA, reason="certificate needs numba")


def _row(h, H0, nu, w, y, beta):
    """``Σ w (h − H0)² + νᵀh + ‖softmax(βh) − y‖²``."""
    e = np.exp(beta * (h - h.max()))
    s = e / e.sum()
    return float(np.sum(w * (h - H0) ** 2) + nu @ h + np.sum((s - y) ** 2))


@settings(max_examples=80, deadline=None)
@given(T=st.integers(3, 6), seed=st.integers(0, 2 ** 31), n_lowered=st.integers(1, 2),
       share=st.floats(-0.9, 0.95))
def test_lowered_row_is_the_row_less_its_lowering(T, seed, n_lowered, share):
    """The lowered row in the weighted form differs from ``φ(h) − Σ_e [λ_e h_e + k_e (h_e −
    p_e)²]`` by a constant (the proofs compare values at two points of one row)."""
    rng = np.random.default_rng(seed)
    H0, nu, p, lam = (rng.normal(size=T) for _ in range(4))
    w = 10 ** rng.uniform(-2, 0.5, T)
    y = rng.dirichlet(np.ones(T))
    beta = rng.uniform(0.5, 4)
    entries = rng.choice(T, n_lowered, replace=False)
    lowered = {int(e): (share * w[e], p[e], lam[e]) for e in entries}
    h0_low, nu_low, w_low = columns.lowered_row(H0, nu, w, lowered)
    differences = []
    for _ in range(5):
        h = rng.normal(size=T) * 3
        target = _row(h, H0, nu, w, y, beta) - sum(
            lam_e * h[e] + k * (h[e] - p_e) ** 2 for e, (k, p_e, lam_e) in lowered.items())
        differences.append(_row(h, h0_low, nu_low, w_low, y, beta) - target)
    scale = 1 + max(abs(d) for d in differences)
    assert np.ptp(differences) < 1e-9 * scale * (1 + np.max(np.abs(H0)) + 1 / w.min())
    untouched = [e for e in range(T) if e not in lowered]
    np.testing.assert_array_equal(w_low[untouched], w[untouched])
    np.testing.assert_array_equal(h0_low[untouched], H0[untouched])


def test_largest_share_takes_the_first_that_proves():
    """A convex row (large weights, small β) proves with the first share; a share the
    caller rules out is skipped; none proves where every share is ruled out."""
    T = 3
    w = np.full(T, 2.0)
    H0, nu, y = np.zeros(T), np.zeros(T), np.full(T, 1 / 3)
    start = np.zeros(T)         # the row's minimiser: the softmax loss is 0 there
    args = (H0, nu, w, y, 0.5, start, (0,), start, np.zeros(T))
    assert columns.largest_share(*args, (0.8, 0.4), 1e-9, 2000) == 0.8
    assert columns.largest_share(*args, (0.8, 0.4), 1e-9, 2000,
                                 admissible=lambda s: s < 0.5) == 0.4
    assert columns.largest_share(*args, (0.8, 0.4), 1e-9, 2000,
                                 admissible=lambda s: False) is None
