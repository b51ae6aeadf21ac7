# Quick start: `make demo` runs the autoscaler end to end locally; `make test` runs every test.
# Both install what they need (virtualenv, pip packages, the azurite npm package) on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TRACES ?= ../shared/traces
DEMO_ARGS ?=

.PHONY: install test lint demo benchmark docs-benchmark clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: $(VENV)/.installed node_modules/.installed

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports --no-cache

test: install lint
	$(PY) -m pytest

demo: install
	$(PY) -m scaling demo $(DEMO_ARGS)

benchmark: install
	$(PY) -m scaling benchmark --trace $(TRACES)/worldcup98/per_minute.csv --trace $(TRACES)/nasa_jul95/per_minute.csv --json out/benchmark.json --markdown docs/benchmark.md

clean:
	rm -rf $(VENV) node_modules out .pytest_cache .ruff_cache
