# evalhub: `make demo` runs tonight's nightly on the embedded default; `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ADDR ?= 127.0.0.1:8000
# Extra pytest arguments for `make test`, e.g. PYTEST_ARGS='-m "not runtime and not database_free"'.
# The reference TypeScript (live-workflow-matrix.ts and its two imports) `make bench` times evalhub
# against; the node comparison says it is skipped when the folder is absent.
REFERENCE_SEED ?= $(abspath ../shared/seed)
PYTEST_ARGS ?=

.PHONY: install demo demo-live test lint bench bench-demo-live serve worker clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The agent runtimes live executions drive (package.json pins them), installed from the npm registry.
# package-lock.json lists only the platform builds of opencode-ai the registry holds (Linux): `npm ci`
# refuses a lock naming an optional package it cannot find. (codex's and the Claude Agent SDK's
# platform builds are all in the registry, so their lock entries stay as npm wrote them.)
RUNTIMES := node_modules/.evalhub-installed
$(RUNTIMES): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(RUNTIMES)

install: $(STAMP) $(RUNTIMES)

demo: install
	$(PY) manage.py migrate --no-input
	$(PY) manage.py load_reference
	$(PY) manage.py setup_schedules
	$(PY) manage.py nightly --execute
	$(PY) manage.py demo_admin
	@echo ""
	@echo "Open the pages: run 'make serve', then visit http://$(ADDR)/ and sign in with the account above."
	@echo "The API is at http://$(ADDR)/api/ (interactive docs at /api/docs/), the admin at /admin/."

# The whole night — Codex, opencode and both ACP agents (claude-agent-acp, codex-acp) — through the
# real runtimes against evalhub's scripted model (loopback only, nothing paid): a run labelled
# "scripted", never mixed with measured history.
demo-live: install
	$(PY) manage.py migrate --no-input
	$(PY) manage.py load_reference
	$(PY) manage.py setup_schedules
	$(PY) manage.py demo_live
	$(PY) manage.py demo_admin
	@echo ""
	@echo "Open the pages: run 'make serve', then visit http://$(ADDR)/ — the scripted run is labelled as such."

serve: install
	$(PY) manage.py runserver $(ADDR)

worker: install
	$(PY) manage.py worker

bench: install
	$(PY) -m pytest -p no:xdist --benchmark-enable --benchmark-columns=min,median,max,rounds -k benchmark tests/test_benchmarks.py tests/test_secrets.py
	$(PY) tests/bench_cluster.py
	$(PY) tests/bench_ratios.py
	$(PY) tests/bench_ratios.py --only schedule,mcp
	$(PY) tests/bench_node.py $(REFERENCE_SEED)

# The whole scripted night through the real runtimes, timed and split (runtime start-up, model
# turns, evalhub's own work, orchestration) on a fresh database: some minutes (docs/benchmarks.md).
bench-demo-live: install
	$(PY) tests/bench_demo_live.py

# --dist loadgroup: the opencode end-to-end tests share their runs on one worker (xdist_group).
test: install
	$(PY) -m pytest -n auto --dist loadgroup $(PYTEST_ARGS)

# ruff (lint and format) and the one-way import layers of docs/DESIGN.md (pyproject.toml's contracts).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) var
