# Podium: `make demo` runs the site on http://127.0.0.1:8000; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.podium-installed

.PHONY: demo test lint clean-venv

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip setuptools wheel
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	bash scripts/demo.sh

test: $(STAMP)
	bash scripts/test.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean-venv:
	rm -rf $(VENV)
