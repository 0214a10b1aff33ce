# Two commands a newcomer needs: `make demo` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/memplane demo

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy memory_plane episodes device_memory lifecycle prompts
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy memory_plane episodes device_memory lifecycle prompts

bench: $(STAMP)
	$(VENV)/bin/memplane bench all --json

clean:
	rm -rf $(VENV) .memplane-demo build *.egg-info .pytest_cache .ruff_cache .mypy_cache
