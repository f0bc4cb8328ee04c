"""``star teacher`` and ``star rollout`` end to end at tiny size."""

from __future__ import annotations

import json

import polars as pl
import pytest

from star_lib.cli import main


@pytest.fixture(scope="module")
def queries_file(tmp_path_factory):
    from star_lib.synth import SynthConfig, synthesize
    from star_lib.travel.world import World

    records = synthesize(World.synthetic(seed=2, scale="tiny"), SynthConfig(n=6, seed=2)).records
    path = tmp_path_factory.mktemp("q") / "train.jsonl"
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    return path


def test_cli_teacher_writes_sft_set(queries_file, tmp_path):
    out = tmp_path / "sft"
    code = main(
        [
            "teacher",
            "--queries",
            str(queries_file),
            "--world",
            "synthetic:tiny:2",
            "--out",
            str(out),
            "--faults",
            "0.1",
            "--no-progress",
        ]
    )
    assert code == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["total"] == 6 and stats["kept"] == len((out / "train.jsonl").read_text().splitlines()) >= 5


def test_cli_teacher_rejects_unknown_teacher(queries_file, tmp_path, capsys):
    code = main(
        [
            "teacher",
            "--queries",
            str(queries_file),
            "--world",
            "synthetic:tiny:2",
            "--out",
            str(tmp_path),
            "--teacher",
            "oracle",
        ]
    )
    assert code == 2 and "openai:<model>" in capsys.readouterr().err


def test_cli_teacher_reads_real_train_annotations(tp_dir, real_db_dir, tmp_path):
    code = main(
        [
            "teacher",
            "--queries",
            str(tp_dir / "train.jsonl"),
            "--world",
            str(real_db_dir),
            "--limit",
            "3",
            "--out",
            str(tmp_path),
            "--no-progress",
        ]
    )
    assert code == 0 and json.loads((tmp_path / "stats.json").read_text())["kept"] == 3


def test_cli_rollout_writes_one_row_per_episode(queries_file, tmp_path, tiny_model, qwen_tokenizer):
    model_dir = tmp_path / "model"
    tiny_model.save_pretrained(model_dir)
    qwen_tokenizer.save_pretrained(model_dir)
    out = tmp_path / "runs" / "rollouts.parquet"
    code = main(
        [
            "rollout",
            "--model",
            str(model_dir),
            "--queries",
            str(queries_file),
            "--world",
            "synthetic:tiny:2",
            "--out",
            str(out),
            "--limit",
            "2",
            "--samples",
            "2",
            "--max-turns",
            "2",
            "--max-new-tokens",
            "8",
            "--device",
            "cpu",
            "--no-progress",
        ]
    )
    assert code == 0
    frame = pl.read_parquet(out)
    assert frame.height == 4 and frame["group_id"].to_list() == ["0", "0", "1", "1"]
    assert set(frame["termination"]) <= {"turn_limit", "malformed", "answer", "context_limit"}
    assert (frame["completion_tokens"] > 0).all() and not frame["final_pass"].any()
