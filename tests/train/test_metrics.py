from __future__ import annotations

from pathlib import Path

from star_lib.train.metrics import MetricsLog, metric_key


def test_metrics_keys_are_grouped_by_prefix():
    assert metric_key("loss") == "train/loss"
    assert metric_key("eval_loss") == "eval/loss"
    assert metric_key("train_runtime") == "summary/runtime"
    assert metric_key("train_loss") == "summary/loss"
    assert metric_key("entropy") == "train/entropy"
    assert metric_key("reward/sum") == "reward/sum"


def test_metrics_log_writes_parquet_and_resumes(tmp_path: Path):
    import polars as pl

    path = tmp_path / "run" / "metrics.parquet"
    log = MetricsLog(path)
    log.append("sft", 1, {"loss": 2.0, "num_tokens": 10, "note": "text", "nan": float("nan"), "flag": True})
    log.append("sft", 2, {"loss": 1.5, "eval_loss": 1.7})
    frame = pl.read_parquet(path)
    assert frame["train/loss"].to_list() == [2.0, 1.5]
    assert frame["eval/loss"].to_list() == [None, 1.7]
    assert "note" not in " ".join(frame.columns) and "train/nan" not in frame.columns
    assert "train/flag" not in frame.columns
    resumed = MetricsLog(path)
    resumed.append("rl", 3, {"reward/sum": 0.5})
    assert pl.read_parquet(path)["step"].to_list() == [1, 2, 3]
    assert not list(path.parent.glob("*.tmp*"))
