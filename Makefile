# STAR lab kit — the two commands of the README, plus helpers.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo install lab lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first: the pinned CPU wheel (a bare `torch` would pull a multi-GB CUDA build).
	$(BIN)/pip install --quiet torch==2.13.0

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	$(BIN)/star demo

lint: $(STAMP)
	$(BIN)/ruff check star_lib tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_tools.py
	$(BIN)/python benchmarks/bench_eval.py

clean:
	rm -rf $(VENV) data runs .pytest_cache
