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
