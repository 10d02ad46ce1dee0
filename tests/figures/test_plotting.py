"""skattn.plotting: every function draws on small inputs and returns its axes."""

import re
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from skattn.data import WishartTarget  # noqa: E402
from skattn.plotting import (  # noqa: E402
    MARKERS,
    PALETTE,
    paper_style,
    plot_error_curve,
    plot_error_decomposition,
    plot_learning_curve,
    plot_phase_diagram,
    plot_spectrum,
    plot_thresholds,
    save_figure,
)
from skattn.theory import solve_state_evolution  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def linear_result():
    # T = 1 linear attention: converges in a fraction of a second
    return solve_state_evolution(0.3, n_tokens=1, attention="linear", reg_lambda=0.05,
                                 target=WishartTarget(0.5), options=dict(n_nodes=1024))


def _fake_curve(converged=None):
    alphas = [0.1, 0.2, 0.4, 0.8]
    converged = converged or [True] * 4
    return [SimpleNamespace(alpha=a, test_error=0.3 / (1 + 10 * a), train_objective=0.01 * a,
                            converged=c) for a, c in zip(alphas, converged)]


def test_palette_is_okabe_ito():
    assert len(PALETTE) == 8 and len(MARKERS) == len(PALETTE)
    assert all(re.fullmatch(r"#[0-9A-F]{6}", c) for c in PALETTE)
    assert PALETTE[:3] == ["#0072B2", "#D55E00", "#009E73"]


def test_error_curve_with_simulations():
    ax = plot_error_curve(_fake_curve(), simulations={"alpha": [0.2, 0.4],
                                                      "mean": [0.1, 0.06],
                                                      "sem": [0.01, 0.005]},
                          label="theory", sim_label="Adam", logy=True, logx=True)
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
    assert ax.get_xlabel() == r"$\alpha = n/d^2$"
    assert "test error" in ax.get_ylabel()
    labels = ax.get_legend_handles_labels()[1]
    assert "theory" in labels and "Adam" in labels
    ax.figure.canvas.draw()


def test_error_curve_marks_unconverged_points():
    ax = plot_error_curve(_fake_curve([True, False, True, True]), quantity="train_objective")
    line = ax.get_lines()[0]
    assert np.isnan(line.get_ydata()[1])  # left out of the theory line
    assert "not converged" in ax.get_legend_handles_labels()[1]
    assert "objective" in ax.get_ylabel()


def test_error_curve_on_given_axes(linear_result):
    fig, ax = plt.subplots()
    out = plot_error_curve([linear_result], quantity="s_error", ax=ax, color=PALETTE[2])
    assert out is ax


def test_spectrum_with_eigenvalues(linear_result, rng=np.random.default_rng(0)):
    eig = np.concatenate([np.zeros(20), rng.uniform(0.1, 3.0, 20)])
    ax = plot_spectrum(linear_result, eig, bins=10)
    assert ax.get_xlabel() == "eigenvalue of $S$"
    labels = ax.get_legend_handles_labels()[1]
    assert "theory" in labels
    assert any(lab.startswith("atom at 0") for lab in labels)
    assert any(lab.startswith("zero fraction 0.50") for lab in labels)
    assert ax.get_ylim()[0] == 0
    ax.figure.canvas.draw()


def test_spectrum_theory_only(linear_result):
    ax = plot_spectrum(linear_result)
    assert len(ax.get_lines()) >= 1
    ax.figure.canvas.draw()


def test_spectrum_direct_has_no_atom():
    res = solve_state_evolution(0.3, n_tokens=1, attention="linear", reg_lambda=0.05,
                                target=WishartTarget(0.5), options=dict(n_nodes=1024),
                                parametrization="direct")
    ax = plot_spectrum(res, np.linspace(-0.5, 2.0, 30))
    assert not any(lab.startswith("atom") for lab in ax.get_legend_handles_labels()[1])


def test_thresholds():
    k = np.linspace(0.1, 1, 5)
    ax = plot_thresholds(k, {"α_BO": (k - k ** 2 / 2) / 2, "1/(2K_eff)": np.full(5, 0.25)},
                         logy=True)
    assert ax.get_yscale() == "log"
    assert ax.get_legend_handles_labels()[1] == ["α_BO", "1/(2K_eff)"]


def test_learning_curve():
    n = np.array([100.0, 200, 400, 800])
    err = 3 * n ** -0.6
    ax = plot_learning_curve(n, err, sem=0.05 * err, fit=(3, -0.6), theory=(n, err),
                             label="simulation")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "slope -0.60" in ax.get_legend_handles_labels()[1]


def test_phase_diagram():
    x = np.linspace(1, 2, 6)
    y = np.linspace(-1, 1, 4)
    reg = (x[None, :] > 1.5).astype(int) + (y[:, None] > 0)
    ax = plot_phase_diagram(x, y, reg, labels=["A", "B", "C"])
    assert {t.get_text() for t in ax.texts} == {"A", "B", "C"}
    ax = plot_phase_diagram(x, y, reg, annotate=False)
    assert ax.get_legend() is not None
    with pytest.raises(ValueError, match="shape"):
        plot_phase_diagram(x, y, reg.T)


def test_error_decomposition():
    x = np.linspace(0.1, 1, 5)
    ax = plot_error_decomposition(x, {"over": x / 10, "under": 0.1 - x / 20},
                                  total=0.1 + x / 20, logx=True)
    assert ax.get_xscale() == "log"
    assert "total" in ax.get_legend_handles_labels()[1]


def test_paper_style_and_save(tmp_path, monkeypatch):
    monkeypatch.setenv("SKATTN_FIGURE_DIR", str(tmp_path / "figs"))
    with paper_style():
        fig, ax = plt.subplots()
        assert plt.rcParams["font.size"] == 9
        ax.plot([0, 1], [0, 1])
    path = save_figure(fig, "line")
    assert path.endswith("line.png")
    assert (tmp_path / "figs" / "line.png").read_bytes()[:4] == b"\x89PNG"
    assert save_figure(fig, "line.pdf", directory=tmp_path).endswith("line.pdf")


def test_bad_input_names_the_argument():
    from skattn import plotting as P
    from skattn.data import WishartTarget
    from skattn.theory import solve_state_evolution

    res = solve_state_evolution(0.3, n_tokens=1, reg_lambda=0.1, target=WishartTarget(0.5),
                                attention="linear")
    with pytest.raises(ValueError, match="results"):
        P.plot_error_curve([])
    with pytest.raises(ValueError, match="quantity"):
        P.plot_error_curve([res], quantity="foo")
    with pytest.raises(TypeError, match="results"):
        P.plot_error_curve([1, 2])
    with pytest.raises(ValueError, match="eigenvalues"):
        P.plot_spectrum(res, [np.nan, 1.0])
    with pytest.raises(TypeError, match="result"):
        P.plot_spectrum("x")
    with pytest.raises(ValueError, match="err"):
        P.plot_learning_curve([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="n must be positive"):
        P.plot_learning_curve([0, 2], [1, 2])
    with pytest.raises(ValueError, match="curves"):
        P.plot_thresholds([0.1, 0.2], {"a": [1, 2, 3]})
