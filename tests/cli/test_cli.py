"""The ``skattn`` command line: help, output formats, sweeps of parameters, user errors."""

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skattn.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
# fast, converging theory settings: T = 1 linear attention, few quadrature nodes
LINEAR = ["--attention", "linear", "--n-tokens", "1", "--n-nodes", "1024"]
LAM = ["--reg-lambda", "0.05"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -------------------------------------------------------------------------------- help
def test_help_lists_commands(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for cmd in ("demo", "theory", "simulate", "figure", "sweep"):
        assert cmd in out


@pytest.mark.parametrize("cmd", ["demo", "theory", "simulate", "figure", "sweep"])
def test_subcommand_help(capsys, cmd):
    code, out, _ = run(capsys, cmd, "--help")
    assert code == 0
    assert f"usage: skattn {cmd}" in out


def test_every_option_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        for action in p._actions:
            assert action.help, f"skattn {name} {action.option_strings} has no help"


def test_model_parameters_match_the_library():
    from skattn.cli.arguments import theory_param_names as _theory_param_names
    from skattn.experiments import MODEL_PARAMETERS
    assert _theory_param_names() == list(MODEL_PARAMETERS) + ["parametrization"]


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("skattn ")


def test_no_command_prints_help(capsys):
    code, _, err = run(capsys)
    assert code == 2 and "usage: skattn" in err


def test_python_dash_m():
    res = subprocess.run([sys.executable, "-m", "skattn", "theory", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0
    assert "--reg-lambda" in res.stdout


# ------------------------------------------------------------------------------ theory
def test_theory_csv_softmax(capsys):
    code, out, err = run(capsys, "theory", "--alpha", "0.1,0.3", "--reg-lambda", "0.01",
                         "--n-tokens", "2", "--kappa0", "0.5", "--n-nodes", "1024",
                         "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [float(r["alpha"]) for r in rows] == [0.1, 0.3]
    for col in ("alpha", "n_tokens", "reg_lambda", "kappa0", "test_error", "train_error",
                "train_objective", "atom_mass", "m", "q", "sigma", "converged", "message"):
        assert col in rows[0]
    for r in rows:
        assert r["converged"] == "True"
        assert r["n_tokens"] == "2" and float(r["reg_lambda"]) == 0.01
        assert 0 < float(r["test_error"]) < 2
    # more data, lower test error
    assert float(rows[1]["test_error"]) < float(rows[0]["test_error"])


def test_theory_json_cartesian_product(capsys):
    code, out, err = run(capsys, "theory", "--alpha", "0.25,0.5", "--reg-lambda",
                         "0.03,0.05", "--kappa0", "0.5", *LINEAR, "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 4
    assert {(r["alpha"], r["reg_lambda"]) for r in rows} == {
        (0.25, 0.03), (0.5, 0.03), (0.25, 0.05), (0.5, 0.05)}
    for r in rows:
        assert r["attention"] == "linear" and r["n_tokens"] == 1
        assert r["converged"] is True
        assert isinstance(r["test_error"], float)
        assert r["gamma"] is None  # irrelevant for a Wishart target


def test_theory_ranges_and_columns(capsys, tmp_path):
    out_file = tmp_path / "sub" / "curve.csv"
    code, out, err = run(capsys, "theory", "--alpha", "0.1:0.4:3", *LINEAR, *LAM,
                         "--columns", "alpha,test_error,converged", "--format", "csv",
                         "--output", str(out_file))
    assert code == 0, err
    assert out == ""
    rows = list(csv.DictReader(out_file.open()))
    assert list(rows[0]) == ["alpha", "test_error", "converged"]
    assert [float(r["alpha"]) for r in rows] == pytest.approx([0.1, 0.25, 0.4])


def test_theory_log_range(capsys):
    code, out, _ = run(capsys, "theory", "--alpha", "0.1:1:3:log", *LINEAR, *LAM, "--format",
                       "json", "--columns", "alpha")
    assert code == 0
    assert [r["alpha"] for r in json.loads(out)] == pytest.approx([0.1, 0.316227766, 1.0])


def test_theory_spread(capsys):
    code, out, err = run(capsys, "theory", "--alpha", "0.25,0.5", *LINEAR, *LAM, "--spread",
                         "3", "--format", "json")
    assert code == 0, err
    for r in json.loads(out):
        assert 0 < r["test_error_quadrature_std"] < 0.05 * r["test_error"]
        assert r["train_error_quadrature_std"] >= 0
    code, _, err = run(capsys, "theory", "--alpha", "0.25", *LINEAR, "--spread", "1")
    assert code == 2 and "--spread" in err and ">= 2" in err


def test_theory_table(capsys):
    code, out, _ = run(capsys, "theory", "--alpha", "0.25", "--reg-lambda", "0.03,0.05",
                       *LINEAR)
    assert code == 0
    header = out.splitlines()[0].split()
    assert header[:2] == ["reg_lambda", "alpha"]  # the varying parameter comes first
    assert "test_error" in header and "converged" in header
    assert len(out.strip().splitlines()) == 4  # header, rule, 2 rows


def test_theory_direct_parametrization(capsys):
    code, out, err = run(capsys, "theory", "--alpha", "0.25", "--parametrization",
                         "factored,direct", *LINEAR, *LAM, "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["parametrization"] for r in rows] == ["factored", "direct"]
    assert rows[1]["width_ratio"] is None and rows[1]["atom_mass"] == 0.0


# ---------------------------------------------------------------------- user mistakes
BAD = [
    (["theory"], 2),                                          # --alpha missing
    (["theory", "--alpha", "abc"], 2),
    (["theory", "--alpha", "0.1,"], 2),
    (["theory", "--alpha", "0.1:1"], 2),
    (["theory", "--alpha", "0.1", "--target", "gaussian"], 2),
    (["theory", "--alpha", "0.1", "--format", "xml"], 2),
    (["theory", "--alpha", "0.1", "--bogus"], 2),
    (["theory", "--alpha", "-0.1"], 1),
    (["theory", "--alpha", "0.1", "--reg-lambda", "-1"], 1),
    (["theory", "--alpha", "0.1", "--kappa0", "0"], 1),
    (["theory", "--alpha", "0.1", "--n-tokens", "1"], 1),      # softmax needs T >= 2
    (["theory", "--alpha", "0.1", "--target", "powerlaw"], 1),  # needs --n-features
    (["theory", "--alpha", "0.1", "--columns", "nope"], 1),
    (["theory", "--alpha", "0.1", "--parametrization", "direct", "--reg-lambda", "0"], 1),
    (["simulate", "--alpha", "0.1", "--n-features", "inf"], 1),
    (["simulate", "--alpha", "0.1", "--n-features", "1"], 1),
    (["simulate", "--alpha", "0.1", "--seeds", "0", "--n-seeds", "2"], 2),
    (["demo", "--n-features", "1"], 2),
    (["demo", "--solver", "sgd"], 2),
    (["figure", "no_such_figure"], 1),
    (["sweep", "--alpha", "0.1", "--output", "out.txt"], 1),
    (["frobnicate"], 2),
]


@pytest.mark.parametrize("argv,status", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_user_mistakes_give_one_line(capsys, argv, status, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code == status
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error" in lines[0]


def test_user_mistake_in_a_real_process():
    res = subprocess.run([sys.executable, "-m", "skattn", "theory", "--alpha", "-1"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    assert res.stderr.strip().count("\n") == 0
    assert "--alpha" in res.stderr


# ---------------------------------------------------------------------- simulate, sweep
def test_simulate_json_with_theory(capsys):
    code, out, err = run(capsys, "simulate", "--alpha", "0.5", "--n-features", "10",
                         "--n-seeds", "2", "--solver", "lbfgs", "--theory", "--n-test",
                         "200", *LINEAR, *LAM, "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["n_samples"] == 50 and row["n_seeds"] == 2
    for key in ("test_error", "test_error_sem", "train_objective", "train_objective_sem",
                "predicted_test_error", "predicted_train_objective", "fit_time"):
        assert isinstance(row[key], float), key
    assert row["estimator"] == "tied"


def test_simulate_per_seed_csv(capsys):
    code, out, err = run(capsys, "simulate", "--alpha", "0.3", "--n-features", "8",
                         "--seeds", "3,4", "--solver", "lbfgs", "--estimator",
                         "tied,direct", "--n-test", "100", *LINEAR, *LAM, "--per-seed",
                         "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["estimator"], r["seed"]) for r in rows] == [
        ("tied", "3"), ("tied", "4"), ("direct", "3"), ("direct", "4")]


def test_sweep_resumes(capsys, tmp_path):
    out = tmp_path / "se.csv"
    args = ["sweep", "--alpha", "0.25,0.5", *LINEAR, *LAM, "--output", str(out),
            "--backend", "sequential"]
    code, _, err = run(capsys, *args)
    assert code == 0, err
    assert "2 run, 0 already done" in err
    code, _, err = run(capsys, *args)
    assert code == 0 and "0 run, 2 already done" in err
    from skattn.sweep import read_sweep
    rows = read_sweep(out)
    assert sorted(r["alpha"] for r in rows) == [0.25, 0.5]
    assert all(r["status"] == "ok" and r["converged"] for r in rows)


# ---------------------------------------------------------------------------- figure
@pytest.fixture
def fake_figures(monkeypatch):
    """Two cheap figures in place of the real ones: one writes a file, one fails."""
    import skattn.figures as figures

    calls = []

    def fake_render(name, out_dir=None, *, quick=False, log=None, close=True):
        calls.append(dict(name=name, out_dir=out_dir, quick=quick))
        if name == "broken":
            raise RuntimeError("boom")
        directory = out_dir or os.environ.get("SKATTN_FIGURE_DIR") or os.getcwd()
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{name}.txt")
        Path(path).write_text("hi")
        return [path]

    monkeypatch.setattr(figures, "list_figures",
                        lambda: {"broken": "Broken", "hello": "Hello figure"})
    monkeypatch.setattr(figures, "render", fake_render)
    return calls


def test_figure_list(capsys, fake_figures):
    code, out, _ = run(capsys, "figure", "--list")
    assert code == 0
    assert "hello" in out and "Hello figure" in out and "broken" in out


def test_figure_renders_into_out(capsys, fake_figures, tmp_path):
    out_dir = tmp_path / "figs"
    code, out, err = run(capsys, "figure", "plot_hello.py", "--out", str(out_dir), "--quick")
    assert code == 0, err
    assert (out_dir / "hello.txt").read_text() == "hi"
    assert out.strip() == str(out_dir / "hello.txt")
    assert fake_figures == [dict(name="hello", out_dir=str(out_dir), quick=True)]


def test_figure_out_overrides_variable_which_overrides_cwd(capsys, fake_figures, tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKATTN_FIGURE_DIR", raising=False)
    assert run(capsys, "figure", "hello")[0] == 0
    assert (tmp_path / "hello.txt").exists()
    monkeypatch.setenv("SKATTN_FIGURE_DIR", str(tmp_path / "env"))
    assert run(capsys, "figure", "hello")[0] == 0
    assert (tmp_path / "env" / "hello.txt").exists()
    assert run(capsys, "figure", "hello", "--out", str(tmp_path / "opt"))[0] == 0
    assert (tmp_path / "opt" / "hello.txt").exists()


def test_figure_failure_is_reported(capsys, fake_figures, tmp_path):
    code, _, err = run(capsys, "figure", "broken", "--out", str(tmp_path))
    assert code == 1
    assert "RuntimeError: boom" in err.strip().splitlines()[-1]


def test_figure_help_states_the_output_rule(capsys):
    code, out, _ = run(capsys, "figure", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "--out if given, else to $SKATTN_FIGURE_DIR if set, else to the current" in text


def test_real_figures_are_listed_without_a_checkout(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no examples/ directory here
    code, out, _ = run(capsys, "figure", "--list")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert "error_vs_alpha" in names and "spectra" in names


def test_real_figure_renders_in_process(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKATTN_FIGURE_DIR", str(tmp_path / "env"))
    code, out, err = run(capsys, "figure", "thresholds", "--quick")
    assert code == 0, err
    assert out.strip() == str(tmp_path / "env" / "thresholds.png")


def test_examples_have_gallery_headers():
    """Every example opens with a docstring whose reST title sphinx-gallery can render."""
    for path in sorted((ROOT / "examples").glob("plot_*.py")):
        lines = path.read_text().splitlines()
        assert lines[0] == '"""', f"{path.name}: must start with a docstring"
        title, rule = lines[1], lines[2]
        assert title.strip() and set(rule) == {"="}, f"{path.name}: no '=' title"
        assert len(rule) >= len(title), f"{path.name}: title underline too short"


# ------------------------------------------------------------------------------ demo
def test_quick_demo_writes_png_and_table(capsys, tmp_path):
    code, out, err = run(capsys, "demo", "--quick", "--out", str(tmp_path))
    assert code == 0, err
    png = tmp_path / "skattn_demo.png"
    assert png.exists() and png.stat().st_size > 10_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = out.strip().splitlines()
    assert "e_test theory" in lines[0] and "obj/d² sim ± sem" in lines[0]
    assert len(lines) == 2 + 4  # header, rule, 2 α × 2 λ
    rows = list(csv.DictReader((tmp_path / "skattn_demo.csv").open()))
    assert {float(r["lambda"]) for r in rows} == {0.01, 0.1}
    for r in rows:
        # even at d = 32 the objective/d² is within 10% of the prediction
        assert float(r["obj_sim"]) == pytest.approx(float(r["obj_theory"]), rel=0.1)


# ------------------------------------------------------------------------------ docs
@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    pytest.importorskip("sphinx_gallery")
    env = dict(os.environ, SKATTN_DOCS_NO_GALLERY_EXEC="1")
    # generated sources (gen_modules/, auto_examples/) go to docs/, ignored by git
    res = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html",
                          "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"),
                          str(tmp_path / "html")],
                         capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "html" / "index.html").exists()
    assert (tmp_path / "html" / "auto_examples" / "index.html").exists()
    assert (tmp_path / "html" / "gen_modules" / "skattn.TiedAttentionRegressor.html").exists()


# ---------------------------------------------------------------- phase-diagram, finite-size
def test_phase_diagram_command(capsys, tmp_path):
    png = tmp_path / "pd.png"
    code, out, err = run(capsys, "phase-diagram", "--alpha", "0.2,0.4", "--reg-lambda",
                         "0.01,0.1", "--n-tokens", "1", "--attention", "linear",
                         "--n-nodes", "512", "--format", "csv", "--quiet",
                         "--figure", str(png))
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("alpha,reg_lambda,test_error") and len(lines) == 5
    assert png.stat().st_size > 0
    code, out, err = run(capsys, "phase-diagram", "--alpha", "0.2", "--reg-lambda", "0.1",
                         "--n-tokens", "1,2")
    assert code == 1 and "only --alpha and --reg-lambda" in err


def test_finite_size_command(capsys, tmp_path):
    store = tmp_path / "fss.sqlite"
    args = ["finite-size", "--alpha", "0.3", "--n-tokens", "1", "--attention", "linear",
            "--reg-lambda", "0.05", "--d", "8,10,12", "--n-seeds", "2", "--n-test", "200",
            "--no-same-instance-se", "--store", str(store), "--quiet", "--format", "csv"]
    from skattn.validation import UndecidedVerdictWarning

    with pytest.warns(UndecidedVerdictWarning, match="undecided: 2 seeds"):
        code, out, err = run(capsys, *args)
    assert code == 0, err
    rows = out.strip().splitlines()
    assert rows[0] == "quantity,d,mean,sem,reference,verdict" and len(rows) == 1 + 2 * 4
    # 2 seeds and 3 values of d cannot decide: the verdict says so, not "consistent"
    verdicts = [r for r in rows[1:] if ",inf," in r]
    assert len(verdicts) == 2 and all("undecided: 2 seeds at some d" in r for r in verdicts)
    assert store.exists()
    code, out, err = run(capsys, *args[:-2], "--d", "8,10", "--format", "csv")
    assert code == 1 and "at least 3 distinct values" in err and err.count("\n") == 1


@pytest.mark.parametrize("module", ["skattn", "skattn.cli"])
def test_runs_as_a_module(module):
    res = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.startswith("skattn "), res.stderr
