# `make demo` and `make test` set up everything they need on a fresh machine (Python 3.11):
# a virtualenv in .venv with this package (editable) and the pinned requirements -- for `make
# demo` requirements.txt only (what the project runs on); `make test` and `make test-fast` add
# requirements-test.txt (pytest, ruff, PyYAML).  Two stamps, so `make demo` then `make test-fast`
# installs only the difference.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo demo-memory demo-memory-book test test-fast benchmark clean

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
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.memory_gap --out_dir demo_output/memory_gap

demo-memory-book: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.memory_gap --out_dir demo_output/memory_gap_book \
	    --sub_document_segments 3

# Every test (~40 minutes on 2 cores): what CI (.ci/run) runs.
test: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q

# While working: lint + the tests not marked slow (each < 2 s).
test-fast: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -m "not slow"

benchmark: $(STAMP)
	$(PY) -m benchmarks.hotpotqa_throughput

clean:
	rm -rf demo_output
