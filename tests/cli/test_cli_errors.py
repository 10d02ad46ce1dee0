"""One-line CLI errors, output paths checked before the work, a guard on grid sizes (#28)."""

import time

from skattn.cli import main


def test_validate_errors_are_one_line(capsys):
    assert main(["validate", "--d", "3", "--output", "unused.sqlite"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("skattn validate: error:") and "d must hold" in err[0]
    assert "usage" not in err[0] and "validation_grid" not in err[0]


def test_range_and_grid_size_guards(capsys):
    t0 = time.perf_counter()
    assert main(["theory", "--alpha", "0.1:1:100000000"]) == 2
    assert "NUM must be <=" in capsys.readouterr().err
    assert main(["theory", "--alpha", "0.1:1:1000", "--reg-lambda", "0.1:1:1000"]) == 1
    err = capsys.readouterr().err
    assert "parameter grid has 1000000 points" in err and len(err.strip().splitlines()) == 1
    assert time.perf_counter() - t0 < 30  # refused, not run


def test_figure_folder_checked_before_the_work(tmp_path, capsys):
    missing = tmp_path / "no" / "such" / "fig.png"
    t0 = time.perf_counter()
    assert main(["phase-diagram", "--alpha", "0.1:1:40", "--reg-lambda", "0.01:1:40",
                 "--figure", str(missing)]) == 1
    err = capsys.readouterr().err
    assert "--figure" in err and "does not exist" in err
    assert time.perf_counter() - t0 < 5  # 1600 points would take minutes
    assert main(["finite-size", "--alpha", "0.3", "--figure", str(missing)]) == 1
    assert "--figure" in capsys.readouterr().err


def test_output_into_a_file_fails_before_the_work(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    t0 = time.perf_counter()
    assert main(["phase-diagram", "--alpha", "0.1:1:40", "--reg-lambda", "0.01:1:40",
                 "--output", str(blocker / "out.csv")]) == 1
    assert "--output" in capsys.readouterr().err
    assert time.perf_counter() - t0 < 5


def test_abbreviated_options_are_refused(capsys):
    # argparse would read '--d 80' as '--device 80' (the only simulate option with that
    # prefix) and run on a device called '80'; the parsers must refuse and say why
    assert main(["simulate", "--alpha", "0.3", "--d", "80"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "unrecognized arguments: --d 80" in err[0]
    assert "abbreviations are not accepted" in err[0] and "--device" in err[0]
    assert main(["theory", "--alpha", "0.3", "--reg-lam=0.1"]) == 2
    err = capsys.readouterr().err
    assert "--reg-lam" in err and "did you mean --reg-lambda" in err
    assert main(["--deb", "docs"]) == 2  # the top-level parser refuses them too
    assert "--deb is not an option" in capsys.readouterr().err
