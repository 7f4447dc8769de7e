# Two set-up-free entry points: `make demo` and `make test`.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: test demo docs lint typecheck pytest bench gpu-wheels clean

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

# Two workers, each taking whole modules (a module's shared fits run once); the longest modules
# are collected first (tests/conftest.py).
pytest: $(VENV)/.dev
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadscope --durations=15

test: lint typecheck pytest

demo: $(VENV)/.demo
	$(BIN)/python examples/demo.py

# The HTML docs, warnings as errors; -E rereads every page and docstring, so that a warning is never
# hidden by what an earlier build kept.
$(VENV)/.docs: $(VENV)/.dev pyproject.toml
	$(BIN)/python -m pip install -q -e ".[docs]"
	touch $@

docs: $(VENV)/.docs
	$(BIN)/sphinx-build -q -W -E -b html docs build/docs/html
	@echo "docs built: build/docs/html/index.html"

bench: $(VENV)/.dev
	$(BIN)/python benchmarks/bench_sparsemax.py

# Wheels for benchmarks/gpu_check.sh on an offline GPU machine (Python 3.12 with a CUDA torch,
# scikit-learn, pandas, pyarrow, onnx, tqdm): safetensors (a runtime dependency of tabsparse),
# the references pytorch-tabnet and entmax, and pytest with what the CUDA tests import.
# Downloads with any pip (no virtual environment needed); gpu_check.sh installs them offline.
GPU_WHEELS ?= safetensors==0.8.0 pytorch-tabnet==4.1.0 entmax==1.3 \
	pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pygments==2.21.0 \
	pytest-timeout==2.4.0 hypothesis==6.170.17 sortedcontainers==2.4.0
gpu-wheels:
	rm -rf benchmarks/wheels
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
		--implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
		-d benchmarks/wheels $(GPU_WHEELS)
	du -sh benchmarks/wheels

clean:
	rm -rf $(VENV) build *.egg-info
