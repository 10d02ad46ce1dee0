"""The documentation is reachable: `skattn docs` and the page titles messages cite."""

from __future__ import annotations

import pathlib
import re

import pytest

from skattn.cli import main
from skattn.documentation import PAGES, documentation, format_documentation

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def _title(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    for above, line in zip(lines, lines[1:]):
        if line and len(set(line)) == 1 and line[0] in "=-~" \
                and len(line) >= len(above.strip()) > 0 \
                and not above.startswith(".."):
            return above.strip()
    raise AssertionError(f"{path} has no title")


@pytest.mark.parametrize("title", sorted(PAGES))
def test_every_listed_page_exists_and_carries_its_title(title):
    path = DOCS / f"{PAGES[title]}.rst"
    assert path.is_file(), path
    # the page's own title starts with the one messages cite ("Theory: the specification")
    assert _title(path).startswith(title), (title, _title(path))


def test_documentation_finds_the_sources_of_a_checkout_and_refuses_unknown_pages():
    info = documentation("where")
    assert info["title"] == "Where the predictions hold"
    assert info["source"].endswith("domain.rst")
    assert "built" in format_documentation(info) or "make docs" in format_documentation(info)
    with pytest.raises(ValueError, match="page must be one of"):
        documentation("no such page")
    with pytest.raises(ValueError, match="unique prefix"):
        documentation("v")  # "Validation" and "Validation report" both start so


def test_skattn_docs_command(capsys):
    assert main(["docs", "--list"]) == 0
    assert "Validation report" in capsys.readouterr().out
    assert main(["docs", "Theory"]) == 0
    assert "theory.rst" in capsys.readouterr().out
    assert main(["docs", "nonsense"]) != 0


def _cited_titles():
    """``(file, text)`` for every ``docs: TITLE`` the package cites, line breaks (and the
    comment markers of a wrapped comment) read as spaces."""
    root = pathlib.Path(__file__).resolve().parents[2] / "skattn"
    for path in sorted(root.rglob("*.py")):
        text = re.sub(r"\s*\n\s*(?:#:?\s*)?", " ", path.read_text(encoding="utf-8"))
        for match in re.finditer(r"docs: ([A-Z][^;,)(.\"]{0,40})", text):
            yield path.relative_to(root.parent), match.group(1)


def test_messages_cite_pages_by_title_not_by_source_path():
    # a wheel user has no docs/*.rst; the package cites titles that `skattn docs` resolves
    root = pathlib.Path(__file__).resolve().parents[2] / "skattn"
    paths = [str(p.relative_to(root.parent)) for p in sorted(root.rglob("*.py"))
             if re.search(r"docs/[a-z_/]+\.rst", p.read_text(encoding="utf-8"))]
    assert paths == []
    cited = list(_cited_titles())
    assert len(cited) > 50  # the scan finds the citations
    unknown = [(str(f), t) for f, t in cited if not any(t.startswith(k) for k in PAGES)]
    assert unknown == []


def test_the_slow_solve_howto_runs_as_written():
    """docs/howto/slow_or_unconverged.rst: its example and its floor recipe run against
    the current API (names of options, fields and extras); the recipe also where the
    example's result carries a floor."""
    text = (DOCS / "howto" / "slow_or_unconverged.rst").read_text(encoding="utf-8")
    (example,) = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", text)
    (recipe,) = re.findall(r"::\n\n((?:      .*\n)+)", text)
    namespace = {}
    exec(compile("\n".join(line[3:] for line in example.splitlines()),
                 "slow_or_unconverged.rst", "exec"), namespace)
    res = namespace["res"]
    assert res.n_iter > 0 and 0 <= res.certified_fraction <= 1
    assert set(res.extras["uncertified_effect"]) >= {"m", "q", "sigma", "test_error"}
    # the recipe, at a floor: from the result, with a tol twice the floor
    res.extras["stall_floor"] = 1e-4
    exec(compile("\n".join(line[6:] for line in recipe.splitlines()),
                 "slow_or_unconverged.rst", "exec"), namespace)
    assert namespace["res"] is not res and namespace["res"].converged
