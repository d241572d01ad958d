# evalhub: `make demo` runs tonight's nightly on the embedded default; `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ADDR ?= 127.0.0.1:8000

.PHONY: install demo demo-live test bench serve worker clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The agent runtimes live executions drive (package.json pins them), installed from the npm registry.
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

# Tonight's Codex entries through the real codex app-server against evalhub's scripted model
# (loopback only, nothing paid): a run labelled "scripted", never mixed with measured history.
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
	$(PY) manage.py qcluster

bench: install
	$(PY) -m pytest -p no:xdist --benchmark-enable --benchmark-columns=min,median,max,rounds -k benchmark tests/test_benchmarks.py tests/test_secrets.py

test: install
	$(PY) -m pytest -n auto

clean:
	rm -rf $(VENV) var
