"""The gallery as package code: the registry, rendering, the output directory rule."""

import ast
from pathlib import Path

import matplotlib
import pytest

from skattn.figures import list_figures, render

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_list_figures_names_and_titles():
    figures = list_figures()
    assert figures, "no figures registered"
    assert {"error_vs_alpha", "spectra", "thresholds"} <= set(figures)
    for name, title in figures.items():
        assert name.isidentifier() and title.strip() and "\n" not in title


def test_every_figure_has_a_gallery_script_with_its_title():
    """examples/plot_NAME.py exists for every figure, is titled like it, and holds no
    computation of its own (one call into skattn.figures)."""
    scripts = {p.stem[len("plot_"):]: p for p in (ROOT / "examples").glob("plot_*.py")}
    assert set(scripts) == set(list_figures())
    for name, title in list_figures().items():
        source = scripts[name].read_text()
        doc = ast.get_docstring(ast.parse(source)).splitlines()
        assert " ".join(doc[0].split()) == title, name
        assert f'render("{name}"' in source
        assert len([ln for ln in source.split('"""', 2)[2].splitlines()
                    if ln.strip() and not ln.lstrip().startswith("#")]) <= 3, name


def test_render_cheapest_figure_writes_png(tmp_path):
    paths = render("thresholds", tmp_path, quick=True)
    assert paths == [str(tmp_path / "thresholds.png")]
    data = Path(paths[0]).read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000


def test_render_honours_figure_dir_variable(tmp_path, monkeypatch):
    target = tmp_path / "from_env"
    monkeypatch.setenv("SKATTN_FIGURE_DIR", str(target))
    monkeypatch.chdir(tmp_path)
    paths = render("thresholds", quick=True)
    assert paths == [str(target / "thresholds.png")]
    assert Path(paths[0]).read_bytes()[:8] == PNG_MAGIC


def test_render_defaults_to_current_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("SKATTN_FIGURE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert render("thresholds", quick=True) == [str(tmp_path / "thresholds.png")]


def test_render_logs_progress(tmp_path):
    messages = []
    render("thresholds", tmp_path, quick=True, log=messages.append)
    assert any("saved" in m for m in messages)


def test_unknown_name_lists_the_names():
    with pytest.raises(ValueError, match="name must be one of") as info:
        render("no_such_figure")
    for name in list_figures():
        assert name in str(info.value)


@pytest.mark.parametrize("kwargs,exc", [({"quick": 1}, TypeError),
                                        ({"log": "print"}, TypeError),
                                        ({"out_dir": 3}, TypeError)])
def test_bad_arguments_are_rejected(kwargs, exc):
    with pytest.raises(exc):
        render("thresholds", **kwargs)


def test_figures_is_the_top_layer():
    """Nothing else in skattn (but the command line) imports skattn.figures."""
    for path in (ROOT / "skattn").rglob("*.py"):
        parts = path.relative_to(ROOT / "skattn").parts
        if "figures" in parts or parts[0] == "cli":
            continue
        assert "skattn.figures" not in path.read_text() and \
            "from .figures" not in path.read_text() and \
            "from ..figures" not in path.read_text(), path


def test_every_draw_documents_its_parameters():
    """The shared Parameters/Returns block is attached to every figure's ``draw``, with its
    own description of ``quick``."""
    import importlib

    quick_texts = set()
    for name in list_figures():
        doc = importlib.import_module(f"skattn.figures.{name}").draw.__doc__
        for heading in ("Parameters", "out_dir : str", "quick : bool", "log : callable",
                        "close : bool", "Returns", "paths : list of str"):
            assert heading in doc, (name, heading)
        quick_texts.add(doc.split("quick : bool, default=False")[1].split("log :")[0].strip())
    assert len(quick_texts) == len(list_figures())
