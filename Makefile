# Two set-up-free entry points: `make demo` and `make test`.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo docs lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev,demo]"
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check tabsparse tests examples benchmarks
	$(BIN)/ruff format --check tabsparse tests examples benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy tabsparse

docs: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[docs]"
	$(BIN)/sphinx-build -q -W -b html docs docs/_build/html
	@echo "docs built: docs/_build/html/index.html"

pytest: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --durations=15

test: lint typecheck pytest

demo: $(STAMP)
	$(BIN)/python examples/demo.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_sparsemax.py

clean:
	rm -rf $(VENV) build *.egg-info
