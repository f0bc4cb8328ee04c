"""Hostile experiment configs: each is refused in one line, before any folder is made, and none hangs.

Each case goes through the real ``star`` command. The ones that used to hang (a YAML "billion laughs", a
recursive anchor, a 10 MB file) run in a subprocess with a timeout, so a regression fails instead of
stalling the suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from star_lib.cli import main

ROOT = Path(__file__).resolve().parents[2]
BASE = """\
name: probe
model: tiny
protocol: compact
stages: [world, synth]
world: {source: synthetic-per-query, scale: tiny}
synth: {n_base: 4, base_mix: easy, per_world: 4, n_test: 2, test_per_world: 2}
"""
LAUGHS = """\
sft:
  trl_overrides:
    lr_scheduler_kwargs:
      a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
      h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
"""


def _star_subprocess(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from star_lib.cli import main; sys.exit(main())", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
    )


def _one_line_error(stderr: str, *words: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "error:" in lines[0] and "Traceback" not in stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(
    "body, words",
    [
        (
            BASE.replace("stages: [world, synth]", "stages: [world, synth, teacher, sft]") + LAUGHS,
            ["expands"],
        ),
        (BASE + "rl:\n  trl_overrides: &x {loop: *x}\n", ["recursive anchor"]),
    ],
    ids=["billion-laughs", "recursive-anchor"],
)
def test_run_refuses_a_config_that_expands_without_bound(tmp_path: Path, body: str, words: list[str]) -> None:
    config = tmp_path / "bomb.yaml"
    config.write_text(body)
    done = _star_subprocess("run", str(config), "--runs", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    _one_line_error(done.stderr, "bomb.yaml", *words)
    assert not (tmp_path / "runs").exists()


def test_run_refuses_a_ten_megabyte_config_at_once(tmp_path: Path) -> None:
    config = tmp_path / "huge.yaml"
    config.write_text(BASE + "eval:\n" + "".join(f"  # {'x' * 100}\n" for _ in range(100_000)))
    assert config.stat().st_size > 10_000_000
    done = _star_subprocess("run", str(config), "--runs", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2
    _one_line_error(done.stderr, "huge.yaml", "too large")


@pytest.mark.parametrize("key", ["1", "null", "~", "[a, b]"])
@pytest.mark.parametrize("command", ["run", "run-grid", "study", "plan"])
def test_commands_refuse_a_key_that_is_not_a_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, key: str
) -> None:
    config = tmp_path / "keys.yaml"
    config.write_text(f"name: probe\n{key}: x\n")
    args = {
        "run": ["run", str(config), "--runs", str(tmp_path / "runs")],
        "run-grid": ["run-grid", str(config), "--runs", str(tmp_path / "runs")],
        "study": ["study", "--study", str(config), "--dry-run", "--runs", str(tmp_path / "runs")],
        "plan": ["plan", str(config), "--cluster", str(ROOT / "slurm" / "a100-8gpu.yaml")],
    }[command]
    assert main(args) == 2
    _one_line_error(capsys.readouterr().err, "keys.yaml:2", "is not a name")
    assert not (tmp_path / "runs").exists()


def test_run_refuses_a_repeated_key_naming_both_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "twice.yaml"
    config.write_text(BASE + "reward: sum\nreward: success\n")
    assert main(["run", str(config), "--runs", str(tmp_path / "runs")]) == 2
    _one_line_error(capsys.readouterr().err, "twice.yaml:8", "'reward' appears twice", "line 7")
    assert not (tmp_path / "runs").exists()


def test_yaml_merge_keys_still_load(tmp_path: Path) -> None:
    from star_lib.io import read_yaml

    config = tmp_path / "merge.yaml"
    config.write_text("common: &c {lr: 1, steps: 2}\nrl:\n  <<: *c\n  steps: 3\n")
    assert read_yaml(config) == {"common": {"lr": 1, "steps": 2}, "rl": {"lr": 1, "steps": 3}}


@pytest.mark.parametrize(
    "grid, words",
    [
        ("axes: 5\n", ["axes: 5 is not allowed"]),
        ("axes: {reward: sum}\n", ["axes: reward: 'sum'", "non-empty list"]),
        ("axes: {reward: []}\n", ["axes: reward: []"]),
        ("seeds: 3\n", ["seeds: 3 is not allowed"]),
        ("set: [1, 2]\n", ["set: [1, 2] is not allowed"]),
    ],
)
def test_run_grid_refuses_axes_of_the_wrong_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], grid: str, words: list[str]
) -> None:
    (tmp_path / "base.yaml").write_text(BASE)
    config = tmp_path / "grid.yaml"
    config.write_text("name: g\nbase: base.yaml\n" + grid)
    assert main(["run-grid", str(config), "--runs", str(tmp_path / "runs")]) == 2
    _one_line_error(capsys.readouterr().err, "grid.yaml", *words)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "extra, words",
    [
        ("rl_data_size: 1000000000000000000000\n", ["rl_data_size", "1,000,000"]),
        ("tool_latency_ms: .nan\n", ["tool_latency_ms: nan"]),
        ("tool_latency_ms: .inf\n", ["tool_latency_ms: inf"]),
        ("seed: 99999999999999999999\n", ["seed:"]),
        ("rl: {temperature: -3}\n", ["rl: temperature", "-3"]),
        ("rl: {temperature: .nan}\n", ["rl: temperature"]),
        ("rl: {learning_rate: .inf}\n", ["rl: learning_rate"]),
        ("eval: {temperature: .inf}\n", ["eval: temperature", "inf"]),
        ("sft: {bogus_key: 3}\n", ["sft: unknown key", "bogus_key"]),
        ("rl: {tempreature: 0.7}\n", ["rl: unknown key", "tempreature"]),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_run_refuses_unbounded_values_and_typos_before_any_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, words: list[str]
) -> None:
    """Values of a stage not in ``stages:`` are checked too, and a bad one never creates the run folder."""
    config = tmp_path / "bad.yaml"
    config.write_text(BASE + extra)
    assert main(["run", str(config), "--runs", str(tmp_path / "runs")]) == 2
    _one_line_error(capsys.readouterr().err, "bad.yaml", *words)
    assert not (tmp_path / "runs").exists()


def test_rl_temperature_is_refused_before_earlier_stages_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "late.yaml"
    config.write_text(
        BASE.replace("stages: [world, synth]", "stages: [world, synth, teacher, sft, rl]")
        + "rl: {temperature: -3}\n"
    )
    assert main(["run", str(config), "--runs", str(tmp_path / "runs")]) == 2
    _one_line_error(capsys.readouterr().err, "late.yaml", "temperature")
    assert not (tmp_path / "runs").exists()


def test_plan_finds_the_profiles_accelerate_config_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "plan.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            name: p
            model: tiny
            stages: [world, synth, teacher, sft, rl]
            rl: {prompts_per_step: 8}
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(config), "--cluster", str(ROOT / "slurm" / "a100-8gpu.yaml")]) == 0, (
        capsys.readouterr().err
    )
    assert "fits" in capsys.readouterr().out
