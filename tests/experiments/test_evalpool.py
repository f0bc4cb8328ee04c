"""Greedy evaluation split over worker processes (``STAR_EVAL_PROCESSES``) gives the one-process episodes."""

from __future__ import annotations

import json

import polars as pl
import pytest

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.evalpool import ENV_VAR, check_processes, eval_processes, pool_size
from star_lib.experiments.runner import input_paths, run_experiment, torch_threads
from star_lib.experiments.stages import build_registry
from star_lib.experiments.stages.eval import run_eval
from star_lib.experiments.stages.evaluation import run_chunks


def test_eval_processes_reads_the_variable_and_names_it_when_wrong():
    assert eval_processes({}) == 1
    assert eval_processes({ENV_VAR: " "}) == 1
    assert eval_processes({ENV_VAR: "3"}) == 3
    for bad in ("0", "two", "-1", "1.5"):
        with pytest.raises(ValueError, match=rf"{ENV_VAR}='{bad}' is not allowed"):
            eval_processes({ENV_VAR: bad})
    assert check_processes(2) == 2
    with pytest.raises(ValueError, match=r"--eval-processes: 0 is not allowed"):
        check_processes(0)
    with pytest.raises(ValueError, match=r"eval_processes: True is not allowed"):
        check_processes(True, "eval_processes")


def test_pool_size_is_bounded_by_threads_and_chunks():
    assert pool_size(4, threads=2, chunks=10) == 2
    assert pool_size(2, threads=8, chunks=1) == 1
    assert pool_size(2, threads=2, chunks=12) == 2


def test_chunk_pool_yields_every_job_once_and_raises_a_jobs_error():
    import math

    from star_lib.experiments.evalpool import ChunkPool

    with ChunkPool(2, threads=1) as pool:
        results = dict(pool.imap(math.sqrt, [(i, (float(i * i),)) for i in range(12)]))
        assert results == {i: float(i) for i in range(12)}
        with pytest.raises(ValueError, match="math domain error"):
            list(pool.imap(math.sqrt, [(i, (float(i - 5),)) for i in range(12)]))
    with pytest.raises(ValueError, match="needs 2 or more processes"):
        ChunkPool(1, threads=1)


def test_run_chunks_saves_chunks_finished_out_of_order_and_returns_them_in_order(tmp_path):
    asked: list[list[int]] = []

    def parallel(starts):
        asked.append(list(starts))
        for start in reversed(starts):  # a pool hands chunks back as they finish
            yield start, pl.DataFrame({"i": list(range(start, min(start + 2, 7)))})

    frames, log = run_chunks(list(range(7)), 2, tmp_path, None, parallel=parallel)
    assert pl.concat(frames)["i"].to_list() == list(range(7))
    assert [e["start"] for e in log] == [6, 4, 2, 0]
    (tmp_path / "_checkpoints" / "chunks" / "00000002.parquet").unlink()
    frames, _ = run_chunks(list(range(7)), 2, tmp_path, None, parallel=parallel)
    assert asked[-1] == [2]  # only the missing chunk is computed again
    assert pl.concat(frames)["i"].to_list() == list(range(7))


EXPERIMENT = {
    "name": "split",
    "threads": 2,
    "protocol": "compact",
    "rl_data_size": 8,
    "tool_failure_rate": 0.2,  # fault draws are seeded per episode: they must not depend on the process
    "stages": ["world", "synth", "teacher", "sft", "eval"],
    "synth": {"n_base": 60},
    "sft": {"max_steps": 2, "logging_steps": 1},
    # a barely trained model writes malformed turns: with `observe` every episode runs several turns, so the
    # conversation cache is reused between turns and across chunks as in a real evaluation
    "eval": {"policy": "fast", "chunk_size": 2, "max_queries": 7, "max_turns": 30, "max_new_tokens": 24,
             "on_format_error": "observe", "max_format_errors": 3, "also_clean": True},
}  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(the experiment, its eval stage config, the eval inputs in its cache) after a run through eval."""
    root = tmp_path_factory.mktemp("split")
    config = ExperimentConfig.from_dict(EXPERIMENT)
    result = run_experiment(config, root / "g" / "split", cache=root / "_stages")
    assert result.status == "done", result.error
    folders = {s["stage"]: root / "_stages" / s["stage"] / s["key"] for s in result.stages}
    stage = build_registry().get("eval")
    resolved = stage.resolve_config(config)
    return config, resolved, input_paths(stage, config.stages, folders, resolved)


def test_split_evaluation_gives_the_episodes_and_metrics_of_one_process(trained, tmp_path, monkeypatch):
    _, cfg, inputs = trained
    outputs = {}
    for processes in ("1", "2"):
        monkeypatch.setenv(ENV_VAR, processes)
        out = tmp_path / f"eval-{processes}"
        out.mkdir()
        with torch_threads(2):
            info = run_eval(cfg, inputs, out)
        assert info["processes"] == int(processes)
        outputs[processes] = out
    one, two = (pl.read_parquet(outputs[p] / "eval.parquet") for p in ("1", "2"))
    assert one.height >= 6 and one["turns"].min() > 1
    assert one.equals(two)
    assert json.loads(one["faults"][0]) == json.loads(two["faults"][0])
    m1, m2 = (pl.read_parquet(outputs[p] / "metrics.parquet") for p in ("1", "2"))
    assert m1.filter(pl.col("metric").str.starts_with("eval/clean/")).height > 0
    assert m1.equals(m2)


def test_a_turn_limit_too_low_for_one_chunk_names_the_whole_splits_need(trained, tmp_path, monkeypatch):
    from dataclasses import replace

    from star_lib.experiments.stages.common import load_world
    from star_lib.experiments.stages.evaluation import TurnBudgetError, check_turn_budget
    from star_lib.io import read_queries

    _, cfg, inputs = trained
    queries = read_queries(inputs["data"])[: cfg.max_queries]
    need = check_turn_budget(cfg, queries, load_world(inputs["world"]))
    short = replace(cfg, options={**cfg.options, "max_turns": 4})
    assert need > 4
    for processes in ("1", "2"):
        monkeypatch.setenv(ENV_VAR, processes)
        out = tmp_path / f"short-{processes}"
        out.mkdir()
        message = rf"max_turns is 4 but .* needs {need} turns"
        with torch_threads(2), pytest.raises(TurnBudgetError, match=message):
            run_eval(short, inputs, out)


def test_a_sampled_evaluation_stays_in_one_process(tmp_path, monkeypatch):
    from star_lib.experiments.stages.eval import EvalStageConfig
    from star_lib.experiments.stages.evaluation import eval_workers

    monkeypatch.setenv(ENV_VAR, "2")
    with torch_threads(2):
        for cfg in (EvalStageConfig(policy="fast", temperature=0.7), EvalStageConfig(policy="transformers")):
            with eval_workers(cfg, tmp_path, chunks=8) as workers:
                assert workers is None
