# `make demo`, `make test` and `make check` set up everything they need on a fresh machine
# (Python 3.11): a virtualenv in .venv with this package (editable) and the pinned requirements
# -- for `make demo` requirements.txt only (what the project runs on); `make test` and `make
# check` add requirements-test.txt (pytest, pytest-xdist, ruff, PyYAML).  Two stamps, so `make
# demo` then `make test` installs only the difference.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

# Test workers (pytest-xdist; each loads TensorFlow, ~1 GB): one per core, at most 4.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, os.cpu_count() or 1))")
# --no-loadscope-reorder: files go to the workers in collection order, which tests/conftest.py
# starts with the longest files (xdist would order them by their number of tests instead).
# PYTHONDONTWRITEBYTECODE= (empty: unset): the tests' bytecode is cached (__pycache__, git
# ignores it) even where the environment turns caching off, so a run's two workers and the
# next run read pytest's rewritten test modules instead of compiling them again (collection:
# ~12 -> ~6 s of CPU per worker).
PYTEST := PYTHONDONTWRITEBYTECODE= TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: demo demo-memory demo-memory-book test test-fast check benchmark clean

$(STAMP): requirements.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m pip check
	touch $(STAMP)

$(TEST_STAMP): $(STAMP) requirements-test.txt
	$(PY) -m pip install -q -r requirements.txt -r requirements-test.txt
	$(PY) -m pip check
	touch $(TEST_STAMP)

demo: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m demo.run

# ReadTwice(E) vs E(SS) vs a plain encoder on generated long-range QA (~10 min on 2 cores).
demo-memory: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks memory_gap --out_dir demo_output/memory_gap

demo-memory-book: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks memory_gap --out_dir demo_output/memory_gap_book \
	    --sub_document_segments 3

# While working: lint + the tests not marked slow (each < 2 s; tests/duration_guard.py).
test: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(PYTEST) -m "not slow"

# The same (its earlier name).
test-fast: test

# Lint + every test, slow ones included (each < 60 s): what CI (.ci/run) runs.  Here a fast
# test shares the cores with trainings: the duration guard's limits are x1.5.
CHECK_DURATION_SCALE ?= 1.5
check: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	READTWICE_DURATION_SCALE=$(CHECK_DURATION_SCALE) $(PYTEST)

benchmark: $(STAMP)
	$(PY) -m benchmarks.hotpotqa_throughput

clean:
	rm -rf demo_output
