"""The research scripts of benchmarks/research/ keep running (their ``--quick`` modes).

Each script is a study behind a table of the validation report; a quick run (small d, two
seeds) exercises every library call it makes, so a renamed or changed function breaks this
test instead of the study. The full quick runs are slow (a training and a solve each, about
15 s a script on 2 loaded cores); the fast test below only imports every script.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys

import pytest

RESEARCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "research"
SCRIPTS = sorted(p.stem for p in RESEARCH.glob("*.py") if not p.name.startswith("_"))


def _load(name):
    sys.path.insert(0, str(RESEARCH))
    try:
        spec = importlib.util.spec_from_file_location(f"research_{name}", RESEARCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(RESEARCH))


def test_every_research_script_is_listed():
    assert len(SCRIPTS) >= 16, SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_imports_and_has_a_quick_mode(name, monkeypatch):
    module = _load(name)
    assert callable(getattr(module, "main", None)), f"{name} has no main(argv)"
    # the parser accepts --quick and --results-dir (a --help run exits 0 and lists them)
    out = []
    monkeypatch.setattr(argparse.ArgumentParser, "exit",
                        lambda self, status=0, message=None: (_ for _ in ()).throw(
                            SystemExit(status)))
    monkeypatch.setattr(argparse.ArgumentParser, "print_help",
                        lambda self, file=None: out.append(self.format_help()))
    with pytest.raises(SystemExit) as exc:
        module.main(["--help"])
    assert exc.value.code == 0
    assert "--quick" in out[0] and "--results-dir" in out[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", SCRIPTS)
def test_quick_mode_writes_its_result_with_command_and_date(name, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    module = _load(name)
    sys.path.insert(0, str(RESEARCH))  # scripts import their neighbours at call time
    try:
        module.main(["--quick", "--results-dir", str(tmp_path)])
    finally:
        sys.path.remove(str(RESEARCH))
    written = [p for p in tmp_path.iterdir() if p.suffix in (".json", ".jsonl")]
    assert written, f"{name} --quick wrote no result file"
    for path in written:
        first = path.read_text(encoding="utf-8").splitlines()[0] if path.suffix == ".jsonl" \
            else path.read_text(encoding="utf-8")
        meta = json.loads(first)
        assert meta["command"].startswith(f"python benchmarks/research/{name}.py")
        assert "--quick" in meta["command"] and meta["quick"] is True
        assert meta["date"][:4].isdigit() and "T" in meta["date"]
