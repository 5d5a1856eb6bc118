# The two commands of the README: `make run` and `make test`. Each builds its own virtualenv.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench fuzz lint clean

$(STAMP): requirements.txt requirements-dev.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=python3"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

run: $(STAMP)
	PYTHONPATH=. $(PY) -m localdev.run

test: $(STAMP)
	PYTHONPATH=. $(PY) -m pytest -q -p no:cacheprovider tests

bench: $(STAMP)
	PYTHONPATH=. $(PY) bench/run_all.py

# the layer contracts (.importlinter) and ruff (ruff.toml); `make test` runs both too
lint: $(STAMP)
	PYTHONPATH=. $(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .

# schemathesis against the local server (its own moto), driven by /v3/api-docs; ~2-4 min.
fuzz: $(STAMP)
	PYTHONPATH=. $(PY) tests/fuzz_api.py

clean:
	rm -rf $(VENV) .local
