"""Sphinx configuration of the skattn documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html`` (``make docs``). Set
``SKATTN_DOCS_NO_GALLERY_EXEC=1`` to build the gallery pages without running the examples
(as CI does); otherwise sphinx-gallery executes ``examples/plot_*.py`` (a few minutes each),
or only those whose path matches the regex ``SKATTN_DOCS_GALLERY_PATTERN``.
"""

import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE / "_ext"))  # validation_report: tables from benchmarks/results
os.environ.setdefault("MPLBACKEND", "Agg")

import skattn  # noqa: E402

project = "skattn"
author = "the skattn developers"
copyright = "2026, the skattn developers"
release = skattn.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "validation_report",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints",
                    "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.codeobj.json", "auto_examples/*.zip"]
root_doc = "index"
default_role = "literal"
nitpicky = False

# -- autodoc / autosummary / numpydoc ----------------------------------------------------
autosummary_generate = True
# autosummary rewrites the stubs it needs but never deletes one whose object is gone (a
# renamed function), which -W then reports: start each build from no stubs (the gallery's
# backreferences below gen_modules/ stay)
for _stub in (Path(__file__).parent / "gen_modules").glob("skattn.*.rst"):
    _stub.unlink()
autosummary_imported_members = False
autodoc_default_options = {}
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_attributes_as_param_list = True
numpydoc_validation_checks = set()

intersphinx_mapping = {}  # offline builds: no inventories are fetched

# -- sphinx-gallery ----------------------------------------------------------------------
_no_exec = os.environ.get("SKATTN_DOCS_NO_GALLERY_EXEC", "").lower() not in ("", "0",
                                                                              "false", "no")
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    # SKATTN_DOCS_GALLERY_PATTERN (a regex on the path) executes only some examples
    "filename_pattern": os.environ.get("SKATTN_DOCS_GALLERY_PATTERN", r"/plot_"),
    "plot_gallery": "False" if _no_exec else "True",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "capture_repr": (),
    "abort_on_example_error": True,
    "show_memory": False,
    "promote_jupyter_magic": False,
    "min_reported_time": 1,
    "backreferences_dir": "gen_modules/backreferences",
    "doc_module": ("skattn",),
    "reference_url": {"skattn": None},
}

# -- HTML --------------------------------------------------------------------------------
html_theme = "alabaster"
html_static_path = ["_static"]
html_title = f"skattn {release}"
html_theme_options = {
    "description": "Single-head tied attention in high dimensions",
    "fixed_sidebar": True,
    "page_width": "1100px",
    "sidebar_width": "230px",
}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html",
                        "searchbox.html"]}


# -- the command-line help, generated from the argparse parser ---------------------------
def _write_cli_help(app):
    import argparse
    import io
    from contextlib import redirect_stdout

    from skattn.cli import build_parser

    out = HERE / "gen_modules" / "cli_help"
    out.mkdir(parents=True, exist_ok=True)
    parser = build_parser()
    os.environ["COLUMNS"] = "88"
    pages = {"skattn": parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                pages[f"skattn_{name}"] = sub
    for name, p in pages.items():
        buf = io.StringIO()
        with redirect_stdout(buf):
            p.print_help()
        text = buf.getvalue()
        path = out / f"{name}.txt"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


# -- numpydoc renders parameter *types* as reST: a word ending in "_" (a fitted attribute
# such as ``width_``) would be read as a hyperlink reference. Escape it.
_TYPE_LINE = re.compile(r"^(\s*\*{0,2}[A-Za-z_][\w, ]*\s:\s)(.*)$")
_TRAILING_UNDERSCORE = re.compile(r"(?<![`\\\w])([A-Za-z]\w*)_(?=[\s,)\]]|$)")


def _escape_type_references(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        m = _TYPE_LINE.match(line)
        if m and "`" not in m.group(2):
            lines[i] = m.group(1) + _TRAILING_UNDERSCORE.sub(r"\1\\_", m.group(2))


# -- scikit-learn's metadata-routing methods (set_*_request) are generated per class and
# document sklearn's own glossary: leave them out.
_SKIP_MEMBERS = re.compile(r"^(set_\w+_request|get_metadata_routing)$")


def _skip_sklearn_plumbing(app, what, name, obj, skip, options):
    if _SKIP_MEMBERS.match(name):
        return True
    return None


def setup(app):
    app.connect("builder-inited", _write_cli_help)
    app.connect("autodoc-skip-member", _skip_sklearn_plumbing)
    app.connect("autodoc-process-docstring", _escape_type_references, priority=400)
