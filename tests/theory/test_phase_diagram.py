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


def test_certified_fraction_and_uncertified_effect_grids(request):
    pd = solve_phase_diagram([0.2, 0.4], [0.01], backend="sequential", **KW)
    np.testing.assert_array_equal(pd.certified_fraction, np.ones((1, 2)))
    np.testing.assert_array_equal(pd.uncertified_effect, np.zeros((1, 2)))
    # without the certificate every softmax node is uncertified: the effect is estimated
    request.getfixturevalue("without_certificate")
    pd = solve_phase_diagram([0.3, 0.5], [0.01], backend="sequential", n_tokens=2,
                             beta=1.5, target_beta=1.5, noise=0.1,
                             target=WishartTarget(0.5), n_nodes=1024)
    assert pd.converged.all()
    assert np.all(pd.certified_fraction < 1)
    assert np.all(pd.uncertified_effect > 0.01)
    j = 1
    ref = solve_state_evolution(pd.alphas[j], reg_lambda=0.01, n_tokens=2, beta=1.5,
                                target_beta=1.5, noise=0.1, target=WishartTarget(0.5),
                                options=dict(n_nodes=1024, init=None))
    assert pd.uncertified_effect[0, j] == pytest.approx(
        ref.extras["uncertified_effect"]["test_error"] / ref.test_error, rel=1e-3)


def test_plot_marks_points_the_certificate_leaves_open():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.ones((2, 3))
    pd = PhaseDiagram(alphas=np.array([0.1, 0.2, 0.3]), reg_lambdas=np.array([0.01, 0.1]),
                      test_error=grid, train_error=grid, train_objective=grid, m=grid,
                      q=grid, sigma=grid, converged=grid > 0, certified_fraction=grid,
                      uncertified_effect=np.array([[0.0, 0.02, np.nan], [0.005, 0.0, 0.5]]))
    fig, ax = plt.subplots()
    pd.plot(ax)
    marks = ax.collections[-1].get_offsets()
    np.testing.assert_array_equal(np.asarray(marks), [[0.2, 0.01], [0.3, 0.1]])
    assert "uncertified effect > 1%" in ax.get_legend().get_texts()[0].get_text()
    fig2, ax2 = plt.subplots()
    pd.plot(ax2, mark_uncertified=False)
    assert len(ax2.collections) == 1 and ax2.get_legend() is None
    # a diagram made before the effect was recorded: no marks, and no map of it
    old = PhaseDiagram(alphas=pd.alphas, reg_lambdas=pd.reg_lambdas, test_error=grid,
                       train_error=grid, train_objective=grid, m=grid, q=grid, sigma=grid,
                       converged=grid > 0)
    old.plot(ax2)
    with pytest.raises(ValueError, match="no uncertified_effect"):
        old.plot(ax2, "uncertified_effect")
    plt.close("all")


def test_effect_share_edge_cases():
    from types import SimpleNamespace

    from skattn.theory.problem import effect_share

    def result(effect, test_error):
        return SimpleNamespace(extras={"uncertified_effect": effect}, test_error=test_error)

    assert effect_share(result({"test_error": 0.1}, 2.0)) == pytest.approx(0.05)
    assert np.isnan(effect_share(result(None, 1.0)))          # not estimated
    assert effect_share(result({"test_error": 0.0}, 0.0)) == 0.0   # perfect recovery
    assert effect_share(result({"test_error": 0.1}, 0.0)) == np.inf
