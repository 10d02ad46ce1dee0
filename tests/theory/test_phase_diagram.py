"""Phase diagrams over (α, λ): shape, warm-started rows equal to the single points."""

import numpy as np
import pytest

from skattn.data import WishartTarget
from skattn.theory import solve_state_evolution
from skattn.theory.phase_diagram import PhaseDiagram, solve_phase_diagram

KW = dict(n_tokens=1, attention="linear", target=WishartTarget(0.5))


def test_tiny_grid_matches_single_points():
    alphas, lams = [0.6, 0.2, 0.4], [0.01, 0.1]
    pd = solve_phase_diagram(alphas, lams, n_jobs=2, **KW)
    assert isinstance(pd, PhaseDiagram)
    assert pd.test_error.shape == pd.converged.shape == (2, 3)
    assert pd.converged.all()
    # both axes come back sorted, whatever the order given
    np.testing.assert_array_equal(pd.alphas, sorted(alphas))
    np.testing.assert_array_equal(pd.reg_lambdas, sorted(lams))
    for i, lam in enumerate(pd.reg_lambdas):
        for j, a in enumerate(pd.alphas):
            ref = solve_state_evolution(a, reg_lambda=lam, **KW)
            assert pd.test_error[i, j] == pytest.approx(ref.test_error, rel=1e-5)
            assert pd.m[i, j] == pytest.approx(ref.m, rel=1e-5)


def test_softmax_row_sequential():
    pd = solve_phase_diagram([0.2, 0.4], [0.01], backend="sequential", n_tokens=2,
                             target=WishartTarget(0.5), n_nodes=1024)
    assert pd.converged.all() and np.all(np.isfinite(pd.test_error))


def test_plot_and_bad_input():
    pd = solve_phase_diagram([0.2, 0.4], [0.01, 0.1], backend="sequential", **KW)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    _, ax = plt.subplots()
    assert pd.plot(ax, "train_error") is ax
    assert ax.get_xlabel() == "α"
    with pytest.raises(ValueError, match="quantity"):
        pd.plot(ax, "nope")
    with pytest.raises(ValueError, match="ax"):
        pd.plot(None)
    plt.close("all")
    with pytest.raises(ValueError, match="alphas"):
        solve_phase_diagram([0.0, 0.1], [0.1], **KW)
    with pytest.raises(ValueError, match="reg_lambdas"):
        solve_phase_diagram([0.1], [-1.0], **KW)
    with pytest.raises(ValueError, match="init"):
        solve_phase_diagram([0.1], [0.1], init=(1, 1, 1), **KW)


def test_problem_object_and_plot_cells():
    from skattn.theory import StateEvolutionProblem

    problem = StateEvolutionProblem(reg_lambda=5.0, **KW)   # its λ is replaced by the grid's
    pd = solve_phase_diagram([0.3, 0.1], [0.1, 0.01], problem, backend="sequential")
    ref = solve_phase_diagram([0.3, 0.1], [0.1, 0.01], backend="sequential", **KW)
    np.testing.assert_array_equal(pd.test_error, ref.test_error)
    assert pd.problem == problem
    with pytest.raises(ValueError, match="problem"):
        solve_phase_diagram([0.1], [0.1], problem, n_tokens=1)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    pd.plot(ax, log_alpha=True)
    mesh = ax.collections[0]
    # one cell per grid point, centred on it (geometric edges on log axes)
    assert mesh.get_array().shape == (2, 2)
    edges = mesh.get_coordinates()[0, :, 0]
    assert np.allclose(np.sqrt(edges[:-1] * edges[1:]), [0.1, 0.3])
    plt.close(fig)
    with pytest.raises(ValueError, match="quantity"):
        pd.plot(ax, quantity="nope")
