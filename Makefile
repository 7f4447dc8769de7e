# Two set-up-free entry points: `make demo` and `make test`.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: test demo docs lint typecheck pytest bench clean

# The virtual environment with torch (installed first so that no other package pulls a CUDA build).
$(VENV)/.torch:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	touch $@

# What the demo needs: the package, its demo data and plots.
$(VENV)/.demo: $(VENV)/.torch pyproject.toml
	$(BIN)/python -m pip install -q -e ".[demo,plot]"
	touch $@

# What the tests need: everything, including the reference libraries.
$(VENV)/.dev: $(VENV)/.torch pyproject.toml
	$(BIN)/python -m pip install -q -e ".[dev,demo]"
	touch $@

lint: $(VENV)/.dev
	$(BIN)/ruff check tabsparse tests examples benchmarks
	$(BIN)/ruff format --check tabsparse tests examples benchmarks

typecheck: $(VENV)/.dev
	$(BIN)/mypy tabsparse

pytest: $(VENV)/.dev
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --durations=15

test: lint typecheck pytest

demo: $(VENV)/.demo
	$(BIN)/python examples/demo.py

docs: $(VENV)/.dev
	$(BIN)/python -m pip install -q -e ".[docs]"
	$(BIN)/sphinx-build -q -W -b html docs docs/_build/html
	@echo "docs built: docs/_build/html/index.html"

bench: $(VENV)/.dev
	$(BIN)/python benchmarks/bench_sparsemax.py

clean:
	rm -rf $(VENV) build *.egg-info docs/_build
