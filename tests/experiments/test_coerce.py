"""Configs coerce YAML scalars to the fields' types and refuse the rest by key, before anything is written.

PyYAML (YAML 1.1) reads ``learning_rate: 1e-6`` as the string ``'1e-6'`` and ``"3"`` stays a string; both
become numbers. ``max_steps: ten`` is refused with one sentence naming the key, the value and what is allowed
— by ``star rl`` (its YAML loader) and by every experiment stage section (``Stage.resolve_config``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from star_lib.cli import build_parser, main
from star_lib.cli.train import load_rl_config
from star_lib.experiments.coerce import coerce_fields
from star_lib.experiments.config import ConfigError, ExperimentConfig
from star_lib.experiments.stages import build_registry
from star_lib.experiments.stages.eval import EvalStageConfig
from star_lib.train.rl import RLRunConfig
from star_lib.train.sft import SFTRunConfig


def test_yaml_reads_1e_6_as_a_string():
    """The reason for coercion: what PyYAML gives for the values a researcher writes."""
    assert yaml.safe_load("learning_rate: 1e-6\nmax_steps: '3'") == {
        "learning_rate": "1e-6",
        "max_steps": "3",
    }


@pytest.mark.parametrize("cls", [RLRunConfig, SFTRunConfig])
def test_numbers_written_as_strings_are_coerced(cls):
    values = coerce_fields(cls, {"learning_rate": "1e-6", "max_steps": "3", "seed": 2, "bf16": "false"})
    assert values == {"learning_rate": 1e-06, "max_steps": 3, "seed": 2, "bf16": False}
    assert type(values["max_steps"]) is int and type(values["learning_rate"]) is float


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_steps": "ten"}, "rl.max_steps: 'ten' is not allowed; give an integer"),
        ({"max_steps": "2.5"}, "rl.max_steps: '2.5' is not allowed; give an integer"),
        ({"learning_rate": "fast"}, "rl.learning_rate: 'fast' is not allowed; give a number or null"),
        ({"learning_rate": "nan"}, "rl.learning_rate: 'nan' is not allowed"),
        ({"use_vllm": "maybe"}, "rl.use_vllm: 'maybe' is not allowed; give true or false"),
        (
            {"eval_mode": "lenient"},
            "rl.eval_mode: 'lenient' is not allowed; give one of ['strict', 'official']",
        ),
        (
            {"curriculum_boundaries": [0.3]},
            "rl.curriculum_boundaries: [0.3] is not allowed; give a list of 2",
        ),
        ({"max_steps": True}, "rl.max_steps: True is not allowed"),
    ],
)
def test_values_that_do_not_fit_name_key_value_and_what_is_allowed(values, message):
    with pytest.raises(ConfigError) as info:
        coerce_fields(RLRunConfig, values, "rl.")
    assert str(info.value).startswith(message)


def _experiment(**sections):
    return ExperimentConfig.from_dict({"name": "x", "stages": ["world", "synth", "rl", "eval"], **sections})


def test_stage_sections_are_coerced_for_the_stage_and_its_package_config():
    registry = build_registry()
    config = _experiment(eval={"max_queries": "3", "temperature": "0"}, rl={"learning_rate": "1e-6"})
    resolved = registry.get("eval").resolve_config(config)
    assert isinstance(resolved, EvalStageConfig) and resolved.max_queries == 3 and resolved.temperature == 0.0
    rl = registry.get("rl").resolve_config(config)
    assert rl.options["learning_rate"] == 1e-06


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ({"eval": {"max_queries": "ten"}}, "eval.max_queries: 'ten' is not allowed; give an integer or null"),
        ({"rl": {"max_steps": "ten"}}, "rl.max_steps: 'ten' is not allowed; give an integer"),
        ({"eval": {"max_turns": "ten"}}, "eval.max_turns: 'ten' is not allowed; give an integer"),
    ],
)
def test_stage_sections_refuse_by_key(sections, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        build_registry().validate(_experiment(**sections))


def test_star_run_with_a_bad_value_writes_nothing(tmp_path, capsys):
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\nstages: [world, synth, eval]\neval:\n  max_queries: ten\n")
    code = main(["run", str(path), "--runs", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "eval.max_queries: 'ten' is not allowed" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


@pytest.fixture
def rl_files(tmp_path) -> dict[str, Path]:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "train.jsonl"
    data.write_text("")
    return {"model": model, "data": data, "out": tmp_path / "run"}


def _rl_yaml(tmp_path: Path, files: dict[str, Path], text: str) -> Path:
    path = tmp_path / "rl.yaml"
    base = {"data": files["data"], "output_dir": files["out"], "model_path": files["model"]}
    given = {line.split(":")[0].strip() for line in text.splitlines()}  # a key twice is refused: text wins
    lines = "".join(f"  {key}: {value}\n" for key, value in base.items() if key not in given)
    path.write_text("rl:\n" + lines + text)
    return path


def test_star_rl_coerces_the_yaml(tmp_path, rl_files):
    path = _rl_yaml(tmp_path, rl_files, "  learning_rate: 1e-6\n  max_steps: '3'\n  use_vllm: 'false'\n")
    cfg = load_rl_config(build_parser().parse_args(["rl", "--config", str(path)]))
    assert cfg.learning_rate == 1e-06 and cfg.max_steps == 3 and cfg.use_vllm is False
    assert not rl_files["out"].exists()  # loading writes nothing


@pytest.mark.parametrize(
    ("text", "flags", "message"),
    [
        ("  max_steps: ten\n", [], "max_steps: 'ten' is not allowed; give an integer"),
        ("  learning_rate: 1e-6x\n", [], "learning_rate: '1e-6x' is not allowed; give a number or null"),
        ("", ["--model", "{tmp}/no-model"], "no-model"),
        ("  data: {tmp}/none.jsonl\n", [], "none.jsonl"),
    ],
)
def test_star_rl_refuses_before_writing_config_yaml(tmp_path, rl_files, capsys, text, flags, message):
    path = _rl_yaml(tmp_path, rl_files, text.format(tmp=tmp_path))
    code = main(["rl", "--config", str(path), *[f.format(tmp=tmp_path) for f in flags]])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not rl_files["out"].exists()  # no config.yaml, no run folder
