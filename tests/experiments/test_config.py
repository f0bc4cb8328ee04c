"""Validation of every axis of the experiment config, and of nested stage sections."""

from __future__ import annotations

import pytest

from star_lib.experiments.config import (
    AXES,
    STAGE_NAMES,
    ConfigError,
    ExperimentConfig,
    parse_difficulty,
    save_config,
)
from star_lib.experiments.stages import build_registry, load_config


def make(**changes):
    return ExperimentConfig.from_dict(changes)


def test_config_defaults_are_the_paper_defaults():
    cfg = ExperimentConfig()
    assert cfg.difficulty == "4:3:3"
    assert cfg.difficulty_mix == pytest.approx({"easy": 0.4, "medium": 0.3, "hard": 0.3})
    assert cfg.curriculum_boundaries == pytest.approx((1 / 3, 2 / 3))
    assert cfg.stages == tuple(s for s in STAGE_NAMES if s != "qa-eval")  # no QA data named: it cannot run
    with_qa = ExperimentConfig(qa_eval={"data_dir": "qa", "corpus": "corpus.jsonl"})
    assert with_qa.stages == STAGE_NAMES


def test_config_unknown_top_level_key_names_key_and_allowed_keys():
    with pytest.raises(ConfigError) as err:
        make(rewrd="sum")
    assert "rewrd" in str(err.value) and "reward" in str(err.value)


@pytest.mark.parametrize(
    ("axis", "bad", "allowed_hint"),
    [
        ("model", "qwen2.5-14b", "qwen2.5-7b"),
        ("reward", "f1", "curriculum"),
        ("algorithm", "ppo", "arpo"),
        ("difficulty", "extreme", "4:3:3"),
        ("difficulty", "0:0:0", "4:3:3"),
        ("rl_data_size", 0, "positive integer"),
        ("rl_data_size", 2.5, "positive integer"),
        ("tool_failure_rate", 1.5, "[0, 1]"),
        ("tool_failure_rate", -0.01, "[0, 1]"),
        ("tool_corruption_rate", "5%", "[0, 1]"),
        ("tool_latency_ms", -1, ">= 0"),
        ("seed", -1, ">= 0"),
        ("seed", True, ">= 0"),
        ("curriculum_boundaries", [0.7, 0.3], "increasing"),
        ("curriculum_boundaries", [0.0, 0.5], "strictly between 0 and 1"),
        ("curriculum_boundaries", [0.5], "two"),
        ("stages", ["world", "dream"], "qa-eval"),
        ("stages", ["synth", "world"], "pipeline order"),
        ("stages", [], "non-empty"),
        ("name", "has space", "letters"),
    ],
)
def test_config_rejects_bad_axis_values_naming_the_key(axis, bad, allowed_hint):
    with pytest.raises(ConfigError) as err:
        make(**{axis: bad})
    message = str(err.value)
    assert message.startswith(axis.split("_")[0]) or axis in message
    assert allowed_hint in message


@pytest.mark.parametrize(
    ("axis", "good"),
    [
        ("model", "qwen2.5-1.5b"),
        ("reward", "curriculum"),
        ("algorithm", "dapo"),
        ("rl_data_size", 2000),
        ("tool_failure_rate", 0.1),
        ("tool_latency_ms", 250),
        ("tool_corruption_rate", 0.05),
        ("seed", 3),
        ("curriculum_boundaries", [0.25, 0.75]),
    ],
)
def test_config_accepts_every_axis_value(axis, good):
    cfg = make(**{axis: good})
    value = getattr(cfg, axis)
    assert value == (tuple(good) if isinstance(good, list) else good)
    assert axis in AXES


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("easy", "easy"), ("HARD", "hard"), ("4:3:3", "4:3:3"), ("1:0:0", "easy"), (" 2 : 1 : 1 ", "2:1:1")],
)
def test_config_difficulty_is_canonicalised(text, canonical):
    assert make(difficulty=text).difficulty == canonical


def test_config_parse_difficulty_weights():
    assert parse_difficulty("medium") == (0, 1, 0)
    assert parse_difficulty("4:3:3") == (4, 3, 3)


def test_config_yaml_round_trip(tmp_path):
    cfg = make(name="r1", reward="macro", difficulty="hard", stages=["world", "synth"], synth={"n_base": 40})
    path = save_config(cfg, tmp_path / "c.yaml")
    assert load_config(path) == cfg
    assert load_config(path).fingerprint() == cfg.fingerprint()


def test_config_load_validates_nested_sections(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("stages: [world, synth, teacher, eval]\neval: {chunk_sise: 4}\n")
    with pytest.raises(
        ConfigError, match=r"c.yaml: eval: unknown key\(s\) \['chunk_sise'\]; allowed keys are .*chunk_size"
    ):
        load_config(path)


def test_config_load_error_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("reward: bonus\n")
    with pytest.raises(ConfigError, match="bad.yaml: reward"):
        load_config(path)


def test_config_fingerprint_ignores_name_only():
    assert make(name="a").fingerprint() == make(name="b").fingerprint()
    assert make(seed=1).fingerprint() != make(seed=2).fingerprint()


# ───────────────────────────── nested stage sections ─────────────────────────────


def test_config_stage_section_unknown_key_lists_allowed_keys():
    registry = build_registry()
    cfg = make(stages=["world"], world={"sclae": "small"})
    with pytest.raises(ConfigError) as err:
        registry.check(cfg)
    assert "world: unknown key(s) ['sclae']" in str(err.value) and "scale" in str(err.value)


def test_config_stage_section_bad_value_is_refused():
    registry = build_registry()
    with pytest.raises(ConfigError, match="source 'ftp' is not allowed"):
        registry.check(make(stages=["world"], world={"source": "ftp"}))


def test_config_stage_section_may_not_set_an_axis():
    registry = build_registry()
    with pytest.raises(ConfigError, match="eval.seed: set it at the top level"):
        registry.check(make(stages=["world", "synth", "eval"], eval={"seed": 3}))


def test_config_stage_section_passes_package_options_through_and_validates_them():
    registry = build_registry()
    resolved = registry.check(make(stages=["world", "synth"], synth={"n_base": 20, "tie_break": "random"}))
    assert resolved["synth"].options == {"tie_break": "random"}
    assert resolved["synth"].rl_data_size == 1000  # the axis reaches the stage
    with pytest.raises(ConfigError, match="tie_break"):
        registry.check(make(stages=["world", "synth"], synth={"tie_break": "priciest"}))
    with pytest.raises(ConfigError, match="unknown key"):
        registry.check(make(stages=["world", "synth"], synth={"seed": 3}))  # synth's seed is data_seed


def test_config_unregistered_stage_is_an_error_not_a_fake():
    from star_lib.experiments.stages import Registry
    from star_lib.experiments.stages.world import STAGE

    registry = Registry()
    registry.add(STAGE)
    with pytest.raises(ConfigError, match="stage 'synth' is not registered"):
        registry.check(make(stages=["world", "synth"]))
