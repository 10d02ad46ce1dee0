"""skattn.experiments and skattn.reporting called directly: rows, fits, the demo table."""

import csv
import io
import json
import math
import re

import joblib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn import experiments
from skattn.data import PowerLawTarget, WishartTarget
from skattn.demo import DEMO_COLUMNS, demo_table
from skattn.experiments import (MODEL_PARAMETERS, SPREAD_COLUMNS, THEORY_RESULT_COLUMNS,
                                fit_one, make_target, parameter_grid, row_problem, run_fits,
                                simulate_rows, theory_point, theory_rows, theory_sweep_rows)
from skattn.reporting import format_cell, format_rows, format_table, to_jsonable

# T = 1 linear attention: the fast, always-converging theory and fits
LINEAR = dict(n_features=None, n_tokens=1, reg_lambda=0.05, target="wishart", kappa0=0.5,
              gamma=None, width_ratio=1.0, beta=1.0, target_beta=1.0, noise=0.0,
              attention="linear", task="seq2lab")
FIT = dict(LINEAR, n_features=8, solver="lbfgs", n_test=100)


def linear_group(**changes):
    return {**LINEAR, "parametrization": "factored", **changes}


# ------------------------------------------------------------------------ grids, targets
def test_parameter_grid_drops_irrelevant_parameters_and_duplicates():
    rows = parameter_grid({"target": ["wishart", "powerlaw"], "kappa0": [0.5],
                           "gamma": [1.0, 2.0], "parametrization": ["factored", "direct"],
                           "width_ratio": [0.5, 1.0]})
    wishart = [r for r in rows if r["target"] == "wishart"]
    assert all(r["gamma"] is None for r in wishart)
    assert all(r["kappa0"] is None for r in rows if r["target"] == "powerlaw")
    assert all(r["width_ratio"] is None for r in rows if r["parametrization"] == "direct")
    # wishart: 2 factored widths + 1 direct; powerlaw: 2 gammas × (2 widths + 1 direct)
    assert len(wishart) == 3 and len(rows) == 3 + 6
    assert len({tuple(r.items()) for r in rows}) == len(rows)


def test_parameter_grid_rejects_an_empty_list():
    with pytest.raises(ValueError, match="reg_lambda"):
        parameter_grid({"alpha": [0.1], "reg_lambda": []})


def test_make_target():
    assert isinstance(make_target("wishart", kappa0=0.5), WishartTarget)
    assert isinstance(make_target("powerlaw", gamma=1.5), PowerLawTarget)
    with pytest.raises(ValueError, match="target must be one of"):
        make_target("gaussian")


# ------------------------------------------------------------------------------- theory
def test_theory_rows_linear_continuum():
    rows = theory_rows([linear_group()], [0.5, 0.25, 0.5], n_nodes=1024)
    assert [r["alpha"] for r in rows] == [0.25, 0.5]  # sorted, duplicates once
    for r in rows:
        assert set(THEORY_RESULT_COLUMNS) <= set(r)
        assert r["converged"] and r["reg_lambda"] == 0.05
    assert rows[1]["test_error"] < rows[0]["test_error"]


@pytest.mark.parametrize("change,alpha,name", [
    ({}, -0.1, "alpha"),
    ({"reg_lambda": -1.0}, 0.2, "reg_lambda"),
    ({"attention": "softmax"}, 0.2, "n_tokens"),  # softmax needs T >= 2
    ({"parametrization": "direct", "reg_lambda": 0.0}, 0.2, "reg_lambda"),
    ({"n_features": 1}, 0.2, "n_features"),
    ({"target": "powerlaw", "kappa0": None, "gamma": 1.0}, 0.2, "n_features"),
])
def test_theory_rows_checks_every_point_before_solving(monkeypatch, change, alpha, name):
    def never(*args, **kwargs):  # pragma: no cover - reached only if the check is missing
        raise AssertionError("solved before checking")
    monkeypatch.setattr("skattn.theory.state_evolution_curve", never)
    # the bad group comes second: nothing of the first may run either
    with pytest.raises(ValueError, match=name):
        theory_rows([linear_group(), linear_group(**change)], [0.3, alpha], n_nodes=1024)


def test_theory_rows_spread_is_the_quadrature_spread():
    """With ``spread``, each row's standard deviations are those of quadrature_spread on
    the point's own result (the same solves, the same scramblings)."""
    from skattn.theory import quadrature_spread, solve_state_evolution

    group = linear_group()
    (row,) = theory_rows([group], [0.3], n_nodes=1024, spread=3)
    result = solve_state_evolution(0.3, row_problem(group), options={"n_nodes": 1024})
    std = quadrature_spread(result, 3, options={"n_nodes": 1024}).std
    assert row["test_error_quadrature_std"] == pytest.approx(std["test_error"], rel=1e-6)
    assert row["train_error_quadrature_std"] == pytest.approx(std["train_error"], rel=1e-6)
    assert 0 < row["test_error_quadrature_std"] < 0.05 * row["test_error"]
    (plain,) = theory_rows([group], [0.3], n_nodes=1024)
    assert not set(SPREAD_COLUMNS) & set(plain)


def test_theory_rows_spread_shows_one_bar_over_the_points(capsys):
    """verbose with ``spread``: one bar over every point's spread (with the curve's own
    bar), not one bar per point."""
    rows = theory_rows([linear_group()], [0.3, 0.5], n_nodes=1024, spread=2, verbose=1)
    err = capsys.readouterr().err
    assert len(rows) == 2 and all(r["test_error_quadrature_std"] > 0 for r in rows)
    assert re.search(r"quadrature spread: 100%[^\r\n]*2/2", err)
    # no per-point bar of quadrature_spread's own solves
    assert "1/1" not in err


@pytest.mark.parametrize("bad", [1, 0, 2.5, "3"])
def test_theory_rows_bad_spread(monkeypatch, bad):
    def never(*args, **kwargs):  # pragma: no cover - reached only if the check is missing
        raise AssertionError("solved before checking")
    monkeypatch.setattr("skattn.theory.state_evolution_curve", never)
    with pytest.raises((ValueError, TypeError), match="spread"):
        theory_rows([linear_group()], [0.3], n_nodes=1024, spread=bad)


def test_theory_point_matches_theory_rows():
    (row,) = theory_rows([linear_group()], [0.3], n_nodes=1024)
    (job,) = theory_sweep_rows([linear_group()], [0.3], n_nodes=1024)
    assert job == {"alpha": 0.3, **linear_group(), "n_nodes": 1024, "tol": None,
                   "max_iter": None, "correction": "auto"}
    point = theory_point(**job)
    assert list(point) == list(THEORY_RESULT_COLUMNS)
    assert point["test_error"] == pytest.approx(row["test_error"], rel=1e-6)
    assert point["converged"] is True


def test_theory_sweep_rows_checks_points():
    with pytest.raises(ValueError, match="alpha"):
        theory_sweep_rows([linear_group()], [0.2, 0.0])


# ---------------------------------------------------------------------------- simulations
@pytest.mark.parametrize("estimator", ["tied", "direct", "amp"])
def test_fit_one(estimator):
    out = fit_one(estimator=estimator, alpha=0.5, seed=1, **FIT)
    assert out["n_samples"] == 32  # round(0.5 · 8²)
    for key in ("test_error", "train_error", "train_objective", "fit_time"):
        assert isinstance(out[key], float) and math.isfinite(out[key]), key
    assert 0 <= out["train_error"] and 0 < out["train_objective"]
    assert isinstance(out["converged"], bool) and isinstance(out["n_iter"], int)
    assert "eigenvalues" not in out


def test_fit_one_is_reproducible_and_returns_eigenvalues():
    a = fit_one(estimator="tied", alpha=0.5, seed=3, return_eigenvalues=True, **FIT)
    b = fit_one(estimator="tied", alpha=0.5, seed=3, **FIT)
    assert a["test_error"] == b["test_error"]
    assert a["eigenvalues"].shape == (8,)


def test_fit_one_rejects_an_unknown_estimator():
    with pytest.raises(ValueError, match="estimator must be one of"):
        fit_one(estimator="ridge", alpha=0.5, **FIT)


def test_run_fits_reports_progress_in_order():
    jobs = [dict(estimator="tied", alpha=0.3, seed=s, **FIT) for s in (0, 1, 2)]
    seen = []
    results = run_fits(jobs, n_jobs=None,
                       progress=lambda i, n, job, r: seen.append((i, n, job["seed"], r)))
    assert [(i, n, s) for i, n, s, _ in seen] == [(1, 3, 0), (2, 3, 1), (3, 3, 2)]
    assert [r for *_, r in seen] == results


def test_run_fits_in_parallel_matches_sequential():
    jobs = [dict(estimator="tied", alpha=0.3, seed=s, **FIT) for s in (0, 1)]
    seen = []
    # threads: the joblib path of run_fits without the start-up of worker processes
    with joblib.parallel_config(backend="threading"):
        parallel = run_fits(jobs, n_jobs=2, progress=lambda i, n, job, r: seen.append(i))
    sequential = run_fits(jobs, n_jobs=1)
    assert sorted(seen) == [1, 2]
    assert [r["test_error"] for r in parallel] == [r["test_error"] for r in sequential]


def test_simulate_rows_mean_over_seeds_with_theory():
    group = dict(LINEAR, n_features=8, parametrization="factored")
    (row,) = simulate_rows([group], [0.5], [0, 1], estimators=["tied"], solver="lbfgs",
                           n_test=100, theory=True, n_nodes=1024)
    per_seed = simulate_rows([group], [0.5], [0, 1], estimators=["tied"], solver="lbfgs",
                             n_test=100, per_seed=True)
    assert row["n_seeds"] == 2 and row["n_samples"] == 32 and "seed" not in row
    errors = [r["test_error"] for r in per_seed]
    assert [r["seed"] for r in per_seed] == [0, 1]
    assert row["test_error"] == pytest.approx(np.mean(errors))
    assert row["test_error_sem"] == pytest.approx(abs(errors[0] - errors[1]) / 2)
    assert row["prediction_converged"] is True
    assert 0 < row["predicted_test_error"] < 1
    for r in per_seed + [row]:
        assert not {"n_test", "device", "max_iter", "torch_threads"} & set(r)


def test_simulate_rows_skips_direct_at_other_widths():
    group = dict(LINEAR, n_features=8, width_ratio=0.5)
    assert simulate_rows([group], [0.5], [0], estimators=["direct"]) == []


@pytest.mark.parametrize("change,name", [({"n_features": None}, "n_features"),
                                         ({"noise": -1.0}, "noise")])
def test_simulate_rows_checks_before_fitting(monkeypatch, change, name):
    monkeypatch.setattr(experiments, "run_fits", None)  # any fit would fail differently
    with pytest.raises(ValueError, match=name):
        simulate_rows([{**LINEAR, "n_features": 8, **change}], [0.5], [0],
                      estimators=["tied"])


# ------------------------------------------------------------------------ demo, reporting
def demo_row(**changes):
    row = dict(alpha=0.2, **{"lambda": 0.01}, e_test_theory=0.05, e_test_sim=0.09,
               e_test_sem=0.0004, obj_theory=0.0056, obj_sim=0.006, obj_sem=0.0008,
               theory_converged=True, fits_converged=True)
    return {**row, **changes}


def test_demo_table():
    text = demo_table([demo_row(), demo_row(alpha=0.6, e_test_sem=float("nan"),
                                            fits_converged=False)])
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["α", "λ"]
    assert "0.09 ± 0.0004" in lines[2] and "*" not in lines[2]
    assert lines[3].rstrip().endswith("0.006 ± 0.0008") and "0.09 *" in lines[3]
    assert lines[-1].startswith("* a state-evolution point or a fit did not converge")
    with pytest.raises(ValueError, match="rows"):
        demo_table([])


def test_demo_columns_are_the_rows_keys():
    assert list(demo_row()) == DEMO_COLUMNS


def test_format_rows_csv_and_json():
    rows = [{"a": 0.1, "b": None, "c": float("nan"), "d": np.int64(3), "e": np.bool_(True)}]
    cols = ["a", "b", "c", "d", "e"]
    (got,) = csv.DictReader(io.StringIO(format_rows(rows, cols, "csv")))
    assert got == {"a": "0.1", "b": "", "c": "", "d": "3", "e": "True"}
    assert json.loads(format_rows(rows, cols, "json")) == [
        {"a": 0.1, "b": None, "c": None, "d": 3, "e": True}]
    assert format_rows(rows, cols) == format_table(rows, cols)
    with pytest.raises(ValueError, match="fmt must be one of"):
        format_rows(rows, cols, "xml")


def test_cells_and_json_values():
    assert [format_cell(v) for v in (None, True, False, 7, 0.123456, float("inf"), "x")] == [
        "-", "yes", "NO", "7", "0.1235", "nan", "x"]
    assert to_jsonable(np.float32(0.5)) == 0.5 and to_jsonable(float("nan")) is None
    with pytest.raises(ValueError, match="headers"):
        format_table([{"a": 1}], ["a"], headers=["a", "b"])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["x", "yy", "zzz"]),
                                st.one_of(st.none(), st.booleans(), st.integers(),
                                          st.floats(allow_nan=True), st.text("ab -", max_size=5)),
                                max_size=3), max_size=6))
def test_format_table_lines_align(rows):
    text = format_table(rows, ["x", "yy", "zzz"])
    lines = text.splitlines()
    assert text.endswith("\n") and len(lines) == len(rows) + 2
    assert len({len(line) for line in lines}) == 1

