# Every target creates .venv on a fresh machine and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install numba-cache demo test test-slow bench bench-gpu docs validate clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch is pinned explicitly before the package: an unpinned torch would pull a multi-GB CUDA build.
$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

# numba's on-disk cache is checked against each function's own file only: a caller
# compiled before an edit to a function it calls (another module) keeps the old code.
# The package's cache is dropped whenever any of its sources changed.
SOURCES_HASH := $(VENV)/.sources-hash
numba-cache: $(STAMP)
	@h=$$(find skattn -name '*.py' | LC_ALL=C sort | xargs cat | sha256sum); \
	if [ "$$h" != "$$(cat $(SOURCES_HASH) 2>/dev/null)" ]; then \
		find skattn \( -name '*.nbi' -o -name '*.nbc' \) -delete; echo "$$h" > $(SOURCES_HASH); \
	fi

demo: $(STAMP) numba-cache
	MPLBACKEND=Agg $(PY) -m skattn demo

# on every core (pytest-xdist): most tests are single-threaded
test: $(STAMP) numba-cache
	$(PY) -m pytest -q -p no:cacheprovider -n auto

test-slow: $(STAMP) numba-cache
	$(PY) -m pytest -q -p no:cacheprovider -m slow

bench: $(STAMP) numba-cache
	$(PY) benchmarks/run_benchmarks.py
	$(PY) benchmarks/prediction_engine.py

# on a machine with a GPU: throughput and fits on CUDA against the CPU (skips without CUDA)
bench-gpu: $(STAMP)
	$(PY) benchmarks/run_benchmarks.py --device cuda --sections ae

# simulation vs state evolution on the validation grid (skattn.validation), extrapolated
# in d; resumable: rerun after an interruption. VALIDATE_OUT=... to change the store. The
# table (with its command and date) and the figure replace those of the validation report.
VALIDATE_OUT ?= out/validate.sqlite
VALIDATE_TABLE ?= benchmarks/results/validate_table.rst
VALIDATE_FIGURE ?= docs/_static/figures/validation_gaps.png
validate: $(STAMP)
	MPLBACKEND=Agg $(PY) -m skattn.validation --output $(VALIDATE_OUT) --backend joblib --n-jobs 2 \
		--table $(VALIDATE_TABLE) --figure $(VALIDATE_FIGURE)

DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[test,docs]"
	touch $(DOCS_STAMP)

# SKATTN_DOCS_NO_GALLERY_EXEC=1 make docs builds without running the gallery (~30 s)
docs: $(DOCS_STAMP)
	MPLBACKEND=Agg $(PY) -m sphinx -W -b html docs docs/_build/html

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache docs/_build docs/gen_modules docs/auto_examples
