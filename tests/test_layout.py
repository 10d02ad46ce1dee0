"""The layer order of the package, checked on the source (README "Layout").

- theory: numpy/scipy only — no torch, no estimator, no plotting, nothing from data;
- data: of the theory, only the spectral laws;
- estimators: no plotting, no CLI;
- cli and experiments: only public names of other skattn modules;
- validation depends on estimators and theory, never the reverse (only the CLI imports it);
- no import cycle between skattn modules; no module over 800 lines.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "skattn"
MAX_LINES = 800


def _module_name(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path):
    """(imported module, imported names, at top level?) for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top_level = {id(node) for node in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append((alias.name, (), id(node) in top_level))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((module, tuple(a.name for a in node.names), id(node) in top_level))
    return out


def _skattn_targets(module, names, modules):
    """The skattn modules an import statement reaches (a ``from pkg import submodule`` too)."""
    if not module.startswith("skattn"):
        return []
    targets = [module]
    for n in names:
        if f"{module}.{n}" in modules:
            targets.append(f"{module}.{n}")
    return targets


MODULES = _modules()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_size(name):
    n_lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert n_lines <= MAX_LINES, f"{name} has {n_lines} lines (> {MAX_LINES})"


def _reaches(name):
    return [(t, names) for module, names, _ in _imports(MODULES[name])
            for t in _skattn_targets(module, names, MODULES)] + \
        [(module, names) for module, names, _ in _imports(MODULES[name])]


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("skattn.theory")))
def test_theory_imports_no_torch_and_no_upper_layer(name):
    for module, _ in _reaches(name):
        root = module.split(".")[0]
        assert root not in ("torch", "matplotlib", "sklearn"), f"{name} imports {module}"
        if module.startswith("skattn."):
            # skattn._warnings: the package's one warning helper (standard library only);
            # skattn._progress: the verbose convention's bars (tqdm only)
            allowed = module.startswith(("skattn.theory", "skattn._validation",
                                         "skattn._warnings", "skattn._progress",
                                         "skattn.parallel"))
            assert allowed, f"{name} (theory) imports {module}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("skattn.data")))
def test_data_uses_only_the_laws_of_theory(name):
    for module, _ in _reaches(name):
        if module.startswith("skattn.theory"):
            assert module == "skattn.theory.laws", f"{name} imports {module}"
        assert not module.startswith(("skattn.estimators", "skattn.nn", "skattn.plotting",
                                      "skattn.cli", "skattn.experiments")), \
            f"{name} imports {module}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES
                                        if n.startswith(("skattn.estimators", "skattn.nn"))))
def test_estimators_import_no_plotting(name):
    for module, _ in _reaches(name):
        assert not module.startswith(("skattn.plotting", "skattn.cli", "skattn.figures",
                                      "matplotlib")), f"{name} imports {module}"


@pytest.mark.parametrize("name", [n for n in MODULES
                                  if n == "skattn.experiments" or n.startswith("skattn.cli")])
def test_cli_and_experiments_use_public_names(name):
    for module, names, _ in _imports(MODULES[name]):
        if not module.startswith("skattn"):
            continue
        assert not any(part.startswith("_") for part in module.split(".")), \
            f"{name} imports private module {module}"
        private = [n for n in names if n.startswith("_")
                   and not (n.startswith("__") and n.endswith("__"))]
        assert not private, f"{name} imports private names {private} from {module}"
    # attribute access to another module's private name (``mod._helper``)
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    imported_modules = {a.asname or a.name for node in ast.walk(tree)
                        if isinstance(node, ast.ImportFrom)
                        for a in node.names if f"{node.module}.{a.name}" in MODULES}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in imported_modules:
            assert not node.attr.startswith("_"), \
                f"{name} uses private {node.value.id}.{node.attr}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES
                                        if not n.startswith(("skattn.validation", "skattn.cli"))))
def test_nothing_but_the_cli_imports_validation(name):
    """The evidence layer sits on top: theory, estimators, data, experiments know nothing of it."""
    for module, _ in _reaches(name):
        assert not module.startswith("skattn.validation"), f"{name} imports {module}"


def test_no_import_cycles():
    """Imports form a DAG: top-level ones and those inside functions alike (a lazy import
    that closes a cycle hides the cycle, it does not remove it)."""
    graph = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, names, _ in _imports(path):
            for target in _skattn_targets(module, names, MODULES):
                if target in MODULES and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    state = {}

    def visit(node, stack):
        state[node] = "active"
        for nxt in graph[node]:
            if state.get(nxt) == "active":
                cycle = stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [node])


RESEARCH = PACKAGE.parent / "benchmarks" / "research"


@pytest.mark.parametrize("path", sorted(RESEARCH.glob("*.py")), ids=lambda p: p.name)
def test_research_scripts_use_public_names_only(path):
    """A study imports what a user could: no private skattn module, name or attribute."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("skattn"):
            assert not any(p.startswith("_") for p in node.module.split(".")), \
                f"{path.name} imports private module {node.module}"
            private = [a.name for a in node.names if a.name.startswith("_")]
            assert not private, f"{path.name} imports private {private} from {node.module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("skattn"):
                    assert not any(p.startswith("_") for p in alias.name.split(".")), \
                        f"{path.name} imports private module {alias.name}"
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            assert not (isinstance(base, ast.Name) and base.id == "skattn"), \
                f"{path.name} uses private skattn attribute {node.attr}"


def test_cycle_check_sees_function_level_imports():
    """The import scan behind the cycle check reads imports inside functions too."""
    found = _imports(MODULES["skattn.theory.powerlaw._solving"])
    assert ("skattn.theory.state_evolution", ("solve_state_evolution",), False) in found


TESTS = PACKAGE.parent / "tests"


def test_tests_are_laid_out_like_the_package():
    """tests/<subpackage>/ for each skattn subpackage (api/ for the cross-cutting checks),
    top-level modules' tests in tests/; basenames unique (pytest imports them by name)."""
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in TESTS.iterdir()
               if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders <= subpackages | {"api"}, folders - subpackages
    assert {"theory", "estimators", "validation"} <= folders
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    for path in TESTS.glob("test_*.py"):  # no test of a subpackage left at the top
        assert path.stem[len("test_"):] not in subpackages, path


def test_readme_is_short_and_names_no_issue():
    """The README: at most 1,500 words, no issue numbers, no "previous round" (the history
    lives in the changelog)."""
    import re

    text = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    assert len(text.split()) <= 1500, len(text.split())
    assert not re.search(r"(?i)issue\s*#?\d|#\d{1,3}\b|previous round", text)
