# Quick start: `make demo` runs the autoscaler end to end locally; `make test` runs every test.
# Both install what they need (virtualenv, pip packages, the azurite npm package) on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TRACES ?= data/traces
DEMO_ARGS ?=
# make benchmark BENCHMARK_SCENARIOS="standard realistic cold hot" adds the hot-partition scenario (about 8 more minutes: 930 runs in 491 s on 2 workers);
# cold starts every trace at 1 instance with nothing learned at busy minutes (seconds)
BENCHMARK_SCENARIOS ?= standard realistic cold

.PHONY: install test test-deep lint demo benchmark benchmark-queue gate optimum stress clean chromium

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

# Headless Chromium for the report page's browser test (tests/e2e/test_report_browser.py): Debian's
# package, installed with apt-get when missing (as root, or through sudo). Without apt the browser
# tests skip and say why.
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		true; \
	elif command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		echo "installing chromium (Debian package) for the report page's browser test"; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	else \
		echo "chromium is missing and apt-get is unavailable: the report page's browser tests will be skipped"; \
	fi

# Spread over the machine's cores (at most 4 workers; tests/conftest.py keeps the tests that share
# a session fixture in one worker). A plain `pytest` runs them in one process.
PYTEST_WORKERS ?= -n auto --maxprocesses 4

test: install lint chromium
	$(PY) -m pytest $(PYTEST_WORKERS)

# The same tests with the long property runs: 100 random fault schedules over a WC98 day instead
# of 10 (on top of the explicit ones), 200 queue-chaos examples on Azurite tables instead of 50,
# 1000 random command lines of pause/pin/resume instead of 100.
test-deep: install lint chromium
	RELIABILITY_EXAMPLES=100 QUEUE_CHAOS_EXAMPLES=200 CLI_EXAMPLES=1000 $(PY) -m pytest $(PYTEST_WORKERS)

demo: install
	$(PY) -m scaling demo $(DEMO_ARGS)

# Every public trace (azure_llm2023_code from its per_minute.csv: docs/benchmark.md says why) and the
# trace family (--family: 30 generated members) in every scenario; then the same traces as one
# Service Bus queue each (one family member per shape), standard and realistic, Azure Monitor
# 1-3 minutes late, the first 3 days of each (docs/benchmark-queue.md; about 8 minutes on 2 free cores).
benchmark: install
	$(PY) -m scaling benchmark --trace $(TRACES)/worldcup98/per_minute.csv --trace $(TRACES)/nasa_jul95/per_minute.csv --trace $(TRACES)/azure_llm2023_code/per_minute.csv --family $(foreach scenario,$(BENCHMARK_SCENARIOS),--scenario $(scenario)) --json out/benchmark.json --markdown docs/benchmark.md --readme README.md --optimum out/optimum.json
	$(MAKE) benchmark-queue

benchmark-queue: install
	$(PY) -m scaling queue-benchmark --trace $(TRACES)/worldcup98/per_minute.csv --trace $(TRACES)/nasa_jul95/per_minute.csv --trace $(TRACES)/azure_llm2023_code/per_minute.csv --family --minutes 4320 --workers 2 --json out/queue-benchmark.json --markdown docs/benchmark-queue.md

# The regression gate: project-default on the baseline's traces and scenarios; fails, naming each
# row, when it got dearer or newly misses the SLO (docs/benchmark.md, "The regression gate").
gate: install
	$(PY) -m scaling benchmark --gate docs/benchmark-baseline.json --traces-dir $(TRACES)

# The offline optimum (its own command: it takes longer than the benchmark's budget); make benchmark reads its rows.
optimum: install
	$(PY) -m scaling optimum --trace $(TRACES)/worldcup98/per_minute.csv --trace $(TRACES)/nasa_jul95/per_minute.csv --json out/optimum.json --markdown docs/optimum.md

stress: install
	$(PY) -m scaling stress --trace $(TRACES)/worldcup98/per_minute.csv --trace $(TRACES)/nasa_jul95/per_minute.csv --json out/stress.json --markdown docs/stress.md
	$(PY) -m scaling stress --set trouble --trace $(TRACES)/worldcup98/per_minute.csv --trace $(TRACES)/nasa_jul95/per_minute.csv --json out/trouble.json --markdown docs/stress-trouble.md

clean:
	rm -rf $(VENV) node_modules out .pytest_cache .ruff_cache
