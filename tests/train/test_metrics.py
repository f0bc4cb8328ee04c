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


def test_metrics_only_rank_zero_writes_the_parquet(tmp_path, monkeypatch):
    from accelerate.state import PartialState

    from star_lib.train.metrics import MetricsLog, is_main_process

    monkeypatch.setattr(PartialState, "_shared_state", {})  # no accelerator: the launcher's $RANK decides
    assert is_main_process({"RANK": "0"}) and not is_main_process({"RANK": "5"}) and is_main_process({})
    monkeypatch.setenv("RANK", "5")
    other = MetricsLog(tmp_path / "metrics.parquet")
    other.append("rl", 1, {"loss": 0.5})
    assert other.rows and not other.path.exists()  # rows kept in memory, nothing written
    monkeypatch.setenv("RANK", "0")
    main = MetricsLog(tmp_path / "metrics.parquet")
    main.append("rl", 1, {"loss": 0.5})
    assert main.path.is_file()


def test_metrics_rank_comes_from_the_accelerator_once_it_exists(monkeypatch):
    from accelerate.state import DistributedType, PartialState

    from star_lib.train.metrics import is_main_process

    # the shared state of an initialised PartialState on rank 3 of 8 (what the trainer's accelerator sets up)
    state = {"process_index": 3, "num_processes": 8, "distributed_type": DistributedType.MULTI_GPU}
    monkeypatch.setattr(PartialState, "_shared_state", state)
    monkeypatch.setenv("RANK", "0")  # a stale variable loses to the live accelerator state
    assert not is_main_process()
    state["process_index"] = 0
    assert is_main_process()
