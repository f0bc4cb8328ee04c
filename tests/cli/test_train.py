from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from star_lib.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from conftest import ROUTES, conversation  # noqa: E402


def test_train_sft_command_trains_and_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(conversation(o, d, f, 16)) + "\n" for o, d, f in ROUTES))
    out = tmp_path / "run"
    code = main(
        [
            "sft",
            "--data",
            str(data),
            "--out",
            str(out),
            "--max-steps",
            "2",
            "--batch-size",
            "3",
            "--vocab-size",
            "400",
            "--logging-steps",
            "1",
            "--copy-warmup-steps",
            "2",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 2 and summary["warmup_steps"] == 2 and summary["tokens_per_s"] > 0
    assert (out / "model" / "config.json").is_file() and (out / "metrics.parquet").is_file()


def test_train_sft_command_reports_missing_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code = main(["sft", "--data", str(tmp_path / "none"), "--out", str(tmp_path / "run")])
    assert code == 2
    assert "star teacher" in capsys.readouterr().err


def test_train_rl_command_runs_one_step_with_the_model_as_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """The default policy (the tiny model itself, untrained) through `star rl`, with held-out evaluation."""
    import polars as pl

    from star_lib.synth.config import SynthConfig
    from star_lib.synth.dataset import synthesize, write_dataset
    from star_lib.train.models import TinyArchitecture, build_tiny_model
    from star_lib.train.tokenizer import TokenizerConfig, train_tokenizer
    from star_lib.travel.world import World

    world = World.load("synthetic:small:0")
    result = synthesize(
        world, SynthConfig(n=3, mix="1:0:0", seed=1, splits=(1.0, 0.0, 0.0), days_choices=(3,))
    )
    write_dataset(result, tmp_path / "data", parquet=False)
    tokenizer = train_tokenizer([q.query for q in result.splits["train"]], TokenizerConfig(vocab_size=400))
    arch = TinyArchitecture(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=32,
    )
    build_tiny_model(tokenizer, arch).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    queries = str(tmp_path / "data" / "train.jsonl")
    (tmp_path / "rl.yaml").write_text(
        f"rl:\n  data: {queries}\n  eval_data: {queries}\n  eval_limit: 2\n"
        f"  output_dir: {tmp_path / 'unused'}\n"
        f"  model_path: {tmp_path / 'model'}\n  world: synthetic:small:0\n  num_generations: 2\n"
        "  prompts_per_step: 1\n  max_turns: 2\n  max_new_tokens: 8\n  max_context_tokens: 8000\n"
    )
    out = tmp_path / "run"
    assert main(["rl", "--config", str(tmp_path / "rl.yaml"), "--out", str(out), "--max-steps", "1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 1 and (out / "model" / "config.json").is_file()
    stages = set(pl.read_parquet(out / "metrics.parquet")["stage"])
    assert stages == {"rl", "eval"}
    assert set(pl.read_parquet(out / "rollouts.parquet")["stage"]) == {"train", "eval"}
