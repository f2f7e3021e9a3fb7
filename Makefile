# Podium: `make demo` runs the site on http://127.0.0.1:8000; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.podium-installed
VLLM_STAMP := $(VENV)/.podium-vllm

.PHONY: demo test lint clean-venv

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip setuptools wheel
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $(STAMP)

# vLLM (the CPU build here, CUDA vllm where a GPU answers): the suite's vLLM tests need it; the demo
# only with PODIUM_DEMO_BACKEND=vllm.
$(VLLM_STAMP): $(STAMP) scripts/install_vllm.sh
	bash scripts/install_vllm.sh $(VENV)
	touch $(VLLM_STAMP)

demo: $(STAMP)
	@if [ "$${PODIUM_DEMO_BACKEND:-hf}" = vllm ]; then $(MAKE) --no-print-directory $(VLLM_STAMP); fi
	bash scripts/demo.sh

test: $(STAMP) $(VLLM_STAMP)
	bash scripts/test.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean-venv:
	rm -rf $(VENV)
