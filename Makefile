# `make demo` and `make test` set up everything they need on a fresh machine (Python 3.11):
# a virtualenv in .venv with the pinned requirements and this package (editable).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo demo-memory test benchmark clean

$(STAMP): requirements.txt requirements-test.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -r requirements-test.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m pip check
	touch $(STAMP)

demo: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m demo.run

# ReadTwice(E) vs E(SS) vs a plain encoder on generated long-range QA (~10 min on 2 cores).
demo-memory: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.memory_gap --out_dir demo_output/memory_gap

test: $(STAMP)
	$(VENV)/bin/ruff check .
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q

benchmark: $(STAMP)
	$(PY) -m benchmarks.hotpotqa_throughput

clean:
	rm -rf demo_output
