"""Fixtures of the validation tests: the research scripts of benchmarks/research/ as modules."""

from __future__ import annotations

import importlib
import pathlib
import sys

import pytest

RESEARCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "research"


@pytest.fixture(scope="module")
def research():
    """``research(name)``: the script ``benchmarks/research/<name>.py`` imported as a module
    (its folder on ``sys.path`` for the rest of the test module, as the scripts import
    their neighbours)."""
    sys.path.insert(0, str(RESEARCH))
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(str(RESEARCH))
