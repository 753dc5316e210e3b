# The two commands: `make run` (the quick study, ending in a report) and
# `make test` (lint, then the whole suite). Both install what is missing first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: run test deps deps-test venv lint bench clean

run: deps venv
	$(BIN)/pgrig run

# Lint first: a finding (ruff, formatting, mypy --strict) fails the run before
# the slow suite starts. Then the suite on two workers (pytest-xdist; a test
# file stays on one worker, so its module-scoped cluster is made once), and
# last, alone, the tests marked `exclusive` (CPU hogs, I/O caps): a neighbour
# test would change what they measure.
test: deps-test venv lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not exclusive" --durations=15
	$(BIN)/python -m pytest -q -m exclusive --durations=5

deps:
	scripts/install-deps.sh run

deps-test:
	scripts/install-deps.sh test

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy src

bench: deps venv
	$(BIN)/python bench/harness_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info
