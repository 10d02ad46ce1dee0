"""The learning-curve figure's theory line covers the simulated range (at d = 40 the
simulations reach n/d = 40 = d; the line stopped at n = d²/2, n/d = 20)."""

import numpy as np
import pytest

from skattn.figures.learning_curves import (C_LAMBDA, NOISE, T, simulated_sizes,
                                            theory_sizes)


@pytest.mark.parametrize("d", [40, 100])
def test_theory_sizes_cover_the_simulations(d):
    sizes = simulated_sizes(d)
    ns = theory_sizes(d, sizes, 10)
    assert ns.min() <= sizes.min() and ns.max() >= sizes.max()
    assert np.all(np.diff(ns) > 0)


def test_quick_theory_line_reaches_n_over_d_40():
    from skattn.data import PowerLawTarget
    from skattn.theory.powerlaw import theory_learning_curve

    d = 40  # the --quick figure
    sizes = simulated_sizes(d)
    assert sizes.max() / d == 40
    lc = theory_learning_curve(theory_sizes(d, sizes, 3), n_features=d,
                               reg_lambda=C_LAMBDA / d, target=PowerLawTarget(1.25),
                               n_tokens=T, lambda_exponent=0.5, attention="linear",
                               noise=NOISE)
    assert lc.n_samples.max() / d == pytest.approx(40)
    assert np.all(np.isfinite(lc.excess)) and np.all(lc.excess > 0)
