# Two commands a newcomer needs: `make demo` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	@echo "make: installing memory-plane and its dependencies into $(VENV) (first run only, about a minute)..."
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# setuptools warns on every editable install (about folders beside the package); the warnings are only noise.
	PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install --quiet -e '.[dev,mcp,fleet]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/memplane demo

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy memory_plane
	@echo "make: running every test, the slow ones too (about 5 minutes on 2 cores; .venv/bin/python -m pytest -m 'not slow' is the quick run)"
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy memory_plane

bench: $(STAMP)
	$(VENV)/bin/memplane bench all --json

clean:
	rm -rf $(VENV) .memplane-demo build *.egg-info .pytest_cache .ruff_cache .mypy_cache
