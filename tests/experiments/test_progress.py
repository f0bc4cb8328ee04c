"""Progress you can see (issue 16 item 4): the running stage, its step / total, reward and ETA.

The runner records ``current_stage`` in ``run.json`` before each stage and points ``STAR_PROGRESS_RECORD``
at it; the SFT/RL trainers' progress callback adds ``stage_step`` / ``stage_steps``, reward or loss and the
ETA. ``star status`` and ``star run-grid``'s table read them.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

from rich.console import Console

from star_lib.cli import main as star
from star_lib.cli.experiments import GridProgress
from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.runner import read_run_record, run_experiment
from star_lib.experiments.stages import Registry, Stage
from star_lib.experiments.stages.world import WorldStageConfig, run_world
from star_lib.io import read_json, write_json_atomic
from star_lib.train.progress import PROGRESS_ENV

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from conftest import ROUTES, conversation  # noqa: E402

GRID = """\
name: progress-grid
base: {stages: [world, synth, teacher, eval], rl_data_size: 10, synth: {n_base: 30}}
axes: {reward: [sum, success]}
"""


def running_record(**stage) -> dict:
    return {"status": "running", "pid": os.getpid(), "host": socket.gethostname(), "stages": [], **stage}


def make_grid(root: Path, runs: dict[str, dict]) -> Path:
    grid = root / "g"
    for name, record in runs.items():
        (grid / name).mkdir(parents=True)
        (grid / name / "config.yaml").write_text(f"name: {name}\n")
        write_json_atomic(grid / name / "run.json", record)
    return grid


def test_status_shows_the_running_stage_its_step_reward_and_eta(tmp_path, capsys):
    now = time.time()
    grid = make_grid(
        tmp_path,
        {
            "a": running_record(
                current_stage="rl",
                stage_step=3,
                stage_steps=10,
                stage_reward=0.25,
                stage_eta_s=100.0,
                stage_updated=now,
                stages=[{"stage": "sft"}],
            ),
            "b": {"status": "done", "stages": [{"stage": "sft"}, {"stage": "eval"}], "current_stage": None},
            "c": {"status": "failed", "current_stage": "rl", "error": "boom", "stages": [{"stage": "sft"}]},
        },
    )
    assert star(["status", str(grid)]) == 1  # c failed
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "│ a " in line)
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[:5] == ["a", "running", "rl", "3/10", "0.250"], cells
    assert cells[5] in ("1m40s", "1m39s", "1m38s")
    assert [c.strip() for c in next(ln for ln in out.splitlines() if "│ b " in ln).split("│")[1:4]] == [
        "b",
        "done",
        "eval",
    ]
    assert "│ rl " in next(line for line in out.splitlines() if "│ c " in line)  # where it failed
    assert star(["status", str(grid), "--json"]) == 1
    rows = {r["run"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert (rows["a"]["stage"], rows["a"]["step"], rows["a"]["steps"], rows["a"]["reward"]) == (
        "rl",
        3,
        10,
        0.25,
    )
    assert rows["b"]["step"] is None


def test_runner_records_the_current_stage_and_points_the_trainers_at_it(tmp_path):
    seen: list[tuple] = []

    def world(cfg, inputs, out):
        record = os.environ[PROGRESS_ENV]
        seen.append((record, read_json(record).get("current_stage"), read_json(record).get("status")))
        return run_world(cfg, inputs, out)

    registry = Registry()
    registry.add(Stage("world", world, WorldStageConfig))
    run_dir = tmp_path / "runs" / "g" / "one"
    config = ExperimentConfig.from_dict({"name": "one", "stages": ["world"], "world": {"scale": "tiny"}})
    assert run_experiment(config, run_dir, registry=registry).status == "done"
    assert seen == [(str(run_dir.resolve() / "run.json"), "world", "running")]
    record = read_run_record(run_dir)
    assert record["current_stage"] is None and record["stage_step"] is None  # cleared once done
    assert PROGRESS_ENV not in os.environ


def test_sft_reports_progress_and_a_restart_replaces_its_metrics(tmp_path, monkeypatch):
    """The real SFT trainer with the progress callback: run.json ends at step 2 of 2, with loss and ETA; run
    again from scratch, its metrics.parquet steps read 1, 2 (not 1, 2, 1, 2)."""
    import polars as pl

    from star_lib.train.sft import SFTRunConfig, run_sft
    from star_lib.train.tokenizer import TokenizerConfig

    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(conversation(o, d, f, 16)) + "\n" for o, d, f in ROUTES))
    record = tmp_path / "run.json"
    write_json_atomic(record, {"status": "running", "current_stage": "sft"})
    monkeypatch.setenv(PROGRESS_ENV, str(record))
    cfg = SFTRunConfig(
        data=str(data),
        output_dir=str(tmp_path / "sft"),
        max_steps=2,
        per_device_train_batch_size=3,
        logging_steps=1,
        tokenizer=TokenizerConfig(vocab_size=400),
        progress=False,
    )
    run_sft(cfg)
    values = read_json(record)
    assert (values["current_stage"], values["stage_step"], values["stage_steps"]) == ("sft", 2, 2)
    assert values["stage_loss"] > 0 and values["stage_eta_s"] == 0.0 and values["status"] == "running"
    monkeypatch.delenv(PROGRESS_ENV)
    run_sft(cfg)
    steps = pl.read_parquet(tmp_path / "sft" / "metrics.parquet").filter(pl.col("stage") == "sft")["step"]
    assert steps.to_list() == [1, 2, 2]  # logs at steps 1 and 2, the end-of-training summary at 2


def test_run_grid_prints_progress_lines_and_the_final_table(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    assert star(["run-grid", str(grid), "--runs", str(tmp_path / "runs")]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("done") == 2  # the one-line summary per run on stdout
    table = [line for line in captured.err.splitlines() if "│ progress-grid__" in line]
    assert len(table) == 2 and all("│ done " in line and "│ eval " in line for line in table)
    assert "done: 2" in captured.err and "{'loss'" not in captured.out + captured.err


def test_grid_progress_lines_follow_each_change(tmp_path):
    grid = make_grid(tmp_path, {"a": running_record(current_stage="sft", stage_step=1, stage_steps=4)})
    progress = GridProgress(grid, "t", console=Console(file=open(os.devnull, "w")))
    assert progress.lines() == ["a: running sft step 1/4"]
    assert progress.lines() == []  # nothing changed
    write_json_atomic(
        grid / "a" / "run.json",
        running_record(
            current_stage="rl",
            stage_step=2,
            stage_steps=8,
            stage_reward=0.5,
            stage_eta_s=30.0,
            stage_updated=time.time(),
        ),
    )
    (line,) = progress.lines()
    assert line.startswith("a: running rl step 2/8 reward 0.500 ETA ") and line.endswith("s")
