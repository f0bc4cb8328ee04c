"""The repo's own install files agree with each other (CI installs only what they name)."""

from __future__ import annotations

from pathlib import Path

import tomllib
import yaml

REPO = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_packaging_environment_yml_carries_the_same_pins_as_pyproject():
    deps = set(_pyproject()["project"]["dependencies"])
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    conda_pins = {line for line in pip_section if not line.startswith("-e")}
    assert conda_pins == deps


def test_packaging_torch_and_trl_pinned_as_the_stack_requires():
    deps = _pyproject()["project"]["dependencies"]
    assert "torch==2.13.0" in deps and "trl==1.16.0" in deps
    assert _pyproject()["project"]["optional-dependencies"]["gpu"] == ["vllm==0.31.0", "deepspeed>=0.18.6"]


def test_packaging_ci_runs_exactly_make_test():
    lines = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()]
    commands = [ln for ln in lines if ln and not ln.startswith("#") and not ln.startswith(("set ", "cd "))]
    assert commands == ["make test"]


def test_packaging_makefile_installs_torch_before_the_package():
    text = (REPO / "Makefile").read_text()
    assert text.index("torch==2.13.0") < text.index('-e ".[dev]"')
