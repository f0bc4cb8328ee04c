"""The real-data tiny recipe (issue 14): ``configs/real-tiny.yaml``, ``synth.test_queries``, the eval stage's
second evaluator mode, and the per-level / per-length breakdown of an episode table."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from star_lib.experiments.config import ConfigError
from star_lib.experiments.stages import build_registry, load_config
from star_lib.experiments.stages.eval import EvalStageConfig, run_eval
from star_lib.experiments.stages.synth import SynthStageConfig, run_synth
from star_lib.experiments.stages.world import run_world
from star_lib.io import read_queries
from star_lib.synth.dataset import held_out_key
from star_lib.travel.evaluate import evaluate_plan
from star_lib.travel.metrics import RATE_KEYS, check_failures, episode_breakdown, metrics_frame
from star_lib.types import COMMONSENSE_KEYS, HARD_KEYS

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def config():
    return load_config("real-tiny")


@pytest.fixture(scope="module")
def stages(config):
    """The config's stage sections as the runner resolves them (paths relative to the project root)."""
    return build_registry().check(config)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, stages, tp_dir):
    """Run world + synth of real-tiny (a small n_base) from the project root: held-out and training tasks."""
    import dataclasses
    import os

    root = tmp_path_factory.mktemp("real")
    here = os.getcwd()
    os.chdir(REPO)
    try:
        run_world(stages["world"], {}, root / "world")
        synth = dataclasses.replace(stages["synth"], n_base=90, rl_data_size=45)
        run_synth(synth, {"world": root / "world" / "db"}, root / "synth")
    finally:
        os.chdir(here)
    return root


def test_real_tiny_config_names_the_real_data_and_both_modes(config, stages):
    assert config.stages == ("world", "synth", "teacher", "sft", "rl", "eval")
    world = stages["world"]
    assert (
        world.source == "csv"
        and (REPO / world.csv_dir).resolve() == (REPO.parent / "shared/data/travelplanner/database").resolve()
    )
    synth = stages["synth"]
    assert (REPO / synth.test_queries).resolve() == (
        REPO.parent / "shared/data/travelplanner/train.jsonl"
    ).resolve()
    assert synth.base_mix == "1:1:1" and sorted(set(synth.options["days_choices"])) == [3, 5, 7]
    sft = config.to_dict()["sft"]
    assert sft["tokenizer"]["whole_words"].startswith("real-entities:")
    assert (
        Path(REPO / sft["tokenizer"]["whole_words"].split(":", 1)[1]).resolve()
        == (REPO / world.csv_dir).resolve()
    )
    evaluation = stages["eval"]
    assert evaluation.models == ("base", "sft", "rl") and evaluation.also_modes == ("official",)
    assert evaluation.temperature == 0.0
    # the eval turn and context limits leave room for a 7-day trajectory
    assert evaluation.options["max_turns"] >= 15 and evaluation.options["max_context_tokens"] >= 1536


def test_held_out_is_the_45_real_queries_with_their_gold_plans(real_run, tp_dir):
    test = read_queries(real_run / "synth" / "base" / "test.jsonl")
    real = read_queries(tp_dir / "train.jsonl")
    assert [held_out_key(q) for q in test] == [held_out_key(q) for q in real]
    assert all(q.reference_plan for q in test)  # annotated_plan → reference_plan: the expert can act them out
    assert {(q.level, q.days) for q in test} == {
        (lv, d) for lv in ("easy", "medium", "hard") for d in (3, 5, 7)
    }
    assert not (real_run / "synth" / "base" / "test.parquet").exists()  # no stale synthesised test split


def test_real_tiny_synth_never_reproduces_a_held_out_query(real_run, tp_dir):
    held_out = {held_out_key(q) for q in read_queries(tp_dir / "train.jsonl")}
    train = read_queries(real_run / "synth" / "base" / "train.jsonl")
    rl = read_queries(real_run / "synth" / "rl" / "train.jsonl")
    assert len(train) == 90 and len(rl) == 45
    assert {q.level for q in train} == {"easy", "medium", "hard"} and {q.days for q in train} == {3, 5, 7}
    assert not [q for q in train + rl if held_out_key(q) in held_out]
    stats = json.loads((real_run / "synth" / "base" / "stats.json").read_text())
    assert stats["held_out"]["queries"] == 45  # the exclusion was on (it defaults to test_queries)


def test_synth_without_test_queries_keeps_a_synthesised_split_and_no_exclusion(
    real_run, tmp_path, monkeypatch
):
    monkeypatch.chdir(REPO)
    run_synth(SynthStageConfig(n_base=20, rl_data_size=5), {"world": real_run / "world" / "db"}, tmp_path)
    stats = json.loads((tmp_path / "base" / "stats.json").read_text())
    assert stats.get("held_out") is None
    assert read_queries(tmp_path / "base" / "test.jsonl")


def test_test_queries_errors_name_the_option(real_run, tmp_path):
    with pytest.raises(ConfigError, match=r"synth.test_queries: '/no/such.jsonl' is not a file"):
        run_synth(
            SynthStageConfig(test_queries="/no/such.jsonl"), {"world": real_run / "world" / "db"}, tmp_path
        )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ConfigError, match="holds no query"):
        run_synth(
            SynthStageConfig(test_queries=str(empty)), {"world": real_run / "world" / "db"}, tmp_path / "o"
        )
    with pytest.raises(ValueError, match="test_queries is empty"):
        SynthStageConfig(test_queries=" ")


def _spoiled(real_run: Path) -> Path:
    """The first 12 held-out queries, a few with plans the evaluators fail, so breakdowns are not all 1.0.

    Query 1 gets a budget of 100 (a hard failure), query 4 a first day without accommodation (commonsense
    failures), query 7 a dinner that does not exist (a sandbox failure in both modes).
    """
    from dataclasses import replace

    from star_lib.io import write_jsonl_atomic
    from star_lib.synth.dataset import record_row

    queries = read_queries(real_run / "synth" / "base" / "test.jsonl")[:12]
    queries[1] = replace(queries[1], budget=100)
    plan = list(queries[4].reference_plan)
    plan[0] = replace(plan[0], accommodation="-")
    queries[4] = replace(queries[4], reference_plan=tuple(plan))
    plan = list(queries[7].reference_plan)
    plan[1] = replace(plan[1], dinner=f"Nowhere Diner, {plan[1].current_city.split(' to ')[-1]}")
    queries[7] = replace(queries[7], reference_plan=tuple(plan))
    return write_jsonl_atomic(real_run / "spoiled.jsonl", [record_row(q) for q in queries])


@pytest.fixture(scope="module")
def expert_eval(real_run):
    """The expert on 12 of the real held-out queries, scored strict and official."""
    out = real_run / "eval"
    cfg = EvalStageConfig(
        protocol="compact", max_queries=12, chunk_size=6, also_modes=("official",), options={"max_turns": 16}
    )
    inputs = {"world": real_run / "world" / "db", "data": _spoiled(real_run)}
    run_eval(cfg, inputs, out)
    return out


def test_eval_reports_the_same_episodes_in_both_modes(expert_eval, real_run):
    table = pl.read_parquet(expert_eval / "eval.parquet")
    assert table.height == 12
    for column in (
        "hard_total",
        "official/final_pass",
        "official/cs/is_valid_information_in_sandbox",
        "official/hard/valid_cost",
    ):
        assert column in table.columns
    metrics = pl.read_parquet(expert_eval / "metrics.parquet")
    values = {m: v for m, v in metrics.select("metric", "value").iter_rows()}
    for key in RATE_KEYS:
        assert f"eval/{key}" in values and f"eval/official/{key}" in values
    # the official column is what the official evaluator says of that episode's own plan
    queries = read_queries(real_run / "spoiled.jsonl")
    from star_lib.experiments.stages.common import load_world
    from star_lib.types import DayPlan

    world = load_world(real_run / "world" / "db")
    for row in table.iter_rows(named=True):
        plan = tuple(DayPlan(**d) for d in json.loads(row["plan"]))
        query = queries[row["query_index"]]
        assert row["official/final_pass"] == evaluate_plan(query, plan, world, "official").final_pass
        assert row["final_pass"] == evaluate_plan(query, plan, world, "strict").final_pass
    assert values["eval/official/final_pass"] == pytest.approx(table["official/final_pass"].mean())
    assert values["eval/final_pass"] == pytest.approx(table["final_pass"].mean())


def test_also_modes_refuses_the_episodes_own_mode_or_an_unknown_one():
    with pytest.raises(ValueError, match="other than the episodes' own mode 'strict'"):
        EvalStageConfig(also_modes=("strict",))
    with pytest.raises(ValueError, match="must be distinct evaluator modes"):
        EvalStageConfig(also_modes=("lenient",))
    assert EvalStageConfig(also_modes=["strict"], options={"eval_mode": "official"}).also_modes == ("strict",)


def test_breakdown_of_the_eval_table_equals_metrics_from_reports(expert_eval, real_run):
    table = pl.read_parquet(expert_eval / "eval.parquet")
    queries = read_queries(real_run / "spoiled.jsonl")
    from star_lib.experiments.stages.common import load_world
    from star_lib.types import DayPlan

    world = load_world(real_run / "world" / "db")
    assert 0 < table["final_pass"].sum() < table.height  # the spoiled plans fail
    for mode in ("strict", "official"):
        reports = []
        for row in table.sort("query_index").iter_rows(named=True):
            plan = tuple(DayPlan(**d) for d in json.loads(row["plan"])) if row["plan"] else None
            reports.append(evaluate_plan(queries[row["query_index"]], plan, world, mode))
        for by in ("level", "days", ["level", "days"]):
            ours = episode_breakdown(table, by=by, mode=mode)
            reference = metrics_frame(queries, reports, by=by)
            keys = ["level", "days"] if isinstance(by, list) else [by]
            assert (
                ours.select(keys, "n", "hard_total").rows()
                == reference.select(keys, "n", "hard_total").rows()
            )
            for key in RATE_KEYS:
                assert ours[key].to_list() == pytest.approx(reference[key].to_list()), (mode, by, key)


def _row(level, days, delivered, cs_fail=(), hard=None, hard_fail=(), final=None):
    """One hand-made episode row: every commonsense check passes except ``cs_fail``; ``hard`` applies."""
    hard = hard if hard is not None else ("valid_cost",)
    row = {"level": level, "days": days, "delivered": delivered, "hard_total": len(hard)}
    for key in COMMONSENSE_KEYS:
        row[f"cs/{key}"] = (key not in cs_fail) if delivered else None
    for key in HARD_KEYS:
        row[f"hard/{key}"] = ((key not in hard_fail) if key in hard else None) if delivered else None
    row["commonsense_pass"] = delivered and not cs_fail
    row["hard_pass"] = delivered and not hard_fail
    row["final_pass"] = row["commonsense_pass"] and row["hard_pass"] if final is None else final
    return row


@pytest.fixture
def hand_table():
    rows = [
        _row("easy", 3, True),  # passes everything
        _row("easy", 3, True, cs_fail=("is_reasonable_visiting_city",)),
        _row("easy", 5, False),  # no plan
        _row(
            "hard",
            7,
            True,
            hard=("valid_cost", "valid_cuisine", "valid_room_type"),
            hard_fail=("valid_cuisine",),
        ),
    ]
    return pl.DataFrame(
        rows, schema_overrides={k: pl.Boolean for k in rows[0] if k.startswith(("cs/", "hard/"))}
    )


def test_breakdown_by_level_and_days_on_a_hand_made_table(hand_table):
    n = len(COMMONSENSE_KEYS)
    by_level = {r["level"]: r for r in episode_breakdown(hand_table, by="level").to_dicts()}
    easy, hard = by_level["easy"], by_level["hard"]
    assert easy["n"] == 3 and easy["hard_total"] == 3
    assert easy["delivery"] == pytest.approx(2 / 3)
    assert easy["cs_micro"] == pytest.approx((n + n - 1) / (3 * n))
    assert easy["cs_macro"] == pytest.approx(1 / 3)
    assert easy["hard_micro"] == pytest.approx(2 / 3)  # two budgets passed, the undelivered one counts
    assert easy["hard_macro"] == pytest.approx(2 / 3)
    assert easy["final_pass"] == pytest.approx(1 / 3)
    assert (
        hard["hard_micro"] == pytest.approx(2 / 3) and hard["hard_macro"] == 0.0 and hard["final_pass"] == 0.0
    )
    cells = {(r["level"], r["days"]): r for r in episode_breakdown(hand_table).to_dicts()}
    assert set(cells) == {("easy", 3), ("easy", 5), ("hard", 7)}
    assert cells[("easy", 3)]["final_pass"] == 0.5 and cells[("easy", 5)]["delivery"] == 0.0
    overall = episode_breakdown(hand_table, by=None).to_dicts()[0]
    assert overall["n"] == 4 and overall["hard_micro"] == pytest.approx(4 / 6)


def test_breakdown_keeps_models_apart_and_needs_the_asked_mode(hand_table):
    two = pl.concat([hand_table.with_columns(pl.lit(m).alias("model")) for m in ("sft", "rl")])
    frame = episode_breakdown(two, by="level")
    assert frame.columns[:2] == ["model", "level"] and frame.height == 4
    with pytest.raises(ValueError, match="no 'official' verdicts"):
        episode_breakdown(hand_table, mode="official")
    with pytest.raises(ValueError, match=r"cannot group by \['city'\]"):
        episode_breakdown(hand_table, by="city")
    with pytest.raises(ValueError, match="no hard_total column"):
        episode_breakdown(hand_table.drop("hard_total"))


def test_check_failures_on_a_hand_made_table(hand_table):
    failures = check_failures(hand_table)
    rows = {(r["kind"], r["check"]): r for r in failures.to_dicts()}
    assert rows[("delivery", "delivered")]["failed"] == 1
    visiting = rows[("commonsense", "is_reasonable_visiting_city")]
    assert (visiting["n"], visiting["checked"], visiting["failed"]) == (4, 3, 1)
    assert visiting["fail_rate"] == pytest.approx(0.25)
    cuisine = rows[("hard", "valid_cuisine")]
    assert (cuisine["checked"], cuisine["failed"]) == (1, 1)
    assert rows[("hard", "valid_room_rule")]["checked"] == 0  # no query asked for a house rule
    assert sum(r["failed"] for r in failures.to_dicts()) == 3
    per_level = check_failures(hand_table, by="level")
    assert (
        per_level.filter((pl.col("level") == "hard") & (pl.col("check") == "valid_cuisine"))["failed"].item()
        == 1
    )


# ── the notebook's readers (star_lib.experiments.real) ──


def _fake_run(root: Path, expert_eval: Path, name: str = "real-tiny", status: str = "done") -> Path:
    """A finished real-tiny run folder built from the expert's episodes relabelled as sft and rl models."""
    from star_lib.io import write_json_atomic, write_parquet_atomic, write_yaml_atomic

    run = root / "adhoc" / name
    episodes = pl.read_parquet(expert_eval / "eval.parquet")
    sft = episodes.with_columns(pl.lit(False).alias("final_pass"), pl.lit("sft").alias("model"))
    every = pl.concat([sft, episodes.with_columns(pl.lit("rl").alias("model"))], how="diagonal_relaxed")
    write_parquet_atomic(root / "_stages" / "eval" / "k1" / "eval_models.parquet", every)
    write_parquet_atomic(run / "eval.parquet", episodes)
    rollouts = pl.read_parquet(expert_eval / "rollouts.parquet").with_columns(pl.lit("eval").alias("stage"))
    write_parquet_atomic(run / "rollouts.parquet", rollouts)
    paired = ["eval/paired/rl-sft/mean", "eval/paired/rl-sft/se"]
    metrics = pl.DataFrame(
        {"stage": ["eval"] * 2, "step": [None, None], "metric": paired, "value": [0.25, 0.05]},
        schema={"stage": pl.String, "step": pl.Int64, "metric": pl.String, "value": pl.Float64},
    )
    write_parquet_atomic(run / "metrics.parquet", metrics)
    write_json_atomic(run / "run.json", {"status": status, "stages": [{"stage": "eval", "key": "k1"}]})
    write_yaml_atomic(
        run / "config.yaml",
        {"name": name, "synth": {"test_queries": str(expert_eval.parent / "spoiled.jsonl")}},
    )
    return run


def test_find_real_run_prefers_a_finished_full_run(expert_eval, tmp_path):
    from star_lib.experiments.real import find_real_run, real_data_paths, real_run_episodes

    assert find_real_run(tmp_path / "nothing") is None
    quick = _fake_run(tmp_path, expert_eval, "real-tiny-quick")
    assert find_real_run(tmp_path) == quick
    _fake_run(tmp_path, expert_eval, "real-tiny-other")  # another config's name is never taken
    assert find_real_run(tmp_path) == quick
    full = _fake_run(tmp_path, expert_eval)
    assert find_real_run(tmp_path) == full
    _fake_run(tmp_path / "r2", expert_eval, status="running")
    assert find_real_run(tmp_path / "r2") is None
    episodes = real_run_episodes(full)  # the eval stage's multi-model table, from the stage cache
    assert episodes["model"].unique().sort().to_list() == ["rl", "sft"]
    queries, database = real_data_paths(full, REPO)
    assert queries == (expert_eval.parent / "spoiled.jsonl").resolve()
    assert database == (REPO.parent / "shared/data/travelplanner/database").resolve()  # not in the config


def test_a_published_run_is_read_like_the_run_and_holds_no_weights(expert_eval, tmp_path):
    from star_lib.experiments.real import find_real_run, publish_run, real_run_episodes

    run = _fake_run(tmp_path / "runs", expert_eval)
    teacher = pl.read_parquet(run / "rollouts.parquet").with_columns(pl.lit("teacher").alias("stage"))
    rollouts = pl.concat([pl.read_parquet(run / "rollouts.parquet"), teacher])
    rollouts.write_parquet(run / "rollouts.parquet")
    (run / "checkpoint.safetensors").write_bytes(b"weights")
    out = publish_run(run, tmp_path / "published")
    assert out == tmp_path / "published" / "adhoc" / "real-tiny"
    assert find_real_run(tmp_path / "published") == out
    assert not (out / "checkpoint.safetensors").exists()
    episodes = real_run_episodes(out)  # the multi-model table travels with the published run
    assert episodes["model"].unique().sort().to_list() == ["rl", "sft"]
    assert pl.read_parquet(out / "rollouts.parquet")["stage"].unique().to_list() == ["eval"]
    running = _fake_run(tmp_path / "r2", expert_eval, status="running")
    with pytest.raises(FileNotFoundError, match="not a finished run"):
        publish_run(running, tmp_path / "published2")


def test_real_query_table_lists_all_levels_and_lengths_per_model(hand_table):
    from star_lib.experiments.real import paper_final_pass, real_query_table

    two = pl.concat([hand_table.with_columns(pl.lit(m).alias("model")) for m in ("sft", "expert")])
    table = real_query_table(two)
    assert table.columns == ["model", "group", "n", *RATE_KEYS]
    assert table.filter(pl.col("model") == "sft")["group"].to_list() == [
        "all",
        "easy",
        "hard",
        "3 days",
        "5 days",
        "7 days",
    ]
    row = table.filter((pl.col("model") == "sft") & (pl.col("group") == "3 days")).to_dicts()[0]
    assert row["n"] == 2 and row["final_pass"] == 0.5
    paper = paper_final_pass()
    assert dict(paper.select("label", "value").iter_rows())["qwen2.5-7b RL (sum)"] == pytest.approx(0.628)
    assert "<" in paper["relation"].to_list()  # Kimi-K2.5 < 15 %


def test_notebook_08_reads_a_run(expert_eval, tmp_path):
    """The notebook on a runs folder holding a real-tiny run: the run's models, its paired difference."""
    import nbformat
    import papermill as pm

    _fake_run(tmp_path / "runs", expert_eval)
    out = tmp_path / "08.ipynb"
    notebook = REPO / "notebooks" / "08_real_queries.ipynb"
    parameters = {"results_dir": str(tmp_path / "runs")}
    pm.execute_notebook(
        str(notebook),
        str(out),
        parameters=parameters,
        cwd=str(REPO),
        progress_bar=False,
        kernel_name="python3",
    )
    nb = nbformat.read(str(out), as_version=4)
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "RL − SFT, strict: +0.250 ± 0.050" in text
    verdicts = [(o.get("metadata") or {}).get("star", {}).get("verdict") for o in outputs]
    verdict = next(v for v in verdicts if v)
    assert verdict.startswith(
        "On the 12 real train queries the best tiny model (rl) reaches 75% final pass "
        "(strict; easy 75%, medium –, hard –) against the expert's 75%"
    )
    tables = {(o.get("metadata") or {}).get("star", {}).get("table") for o in outputs}
    assert {"08_real_queries/strict", "08_real_queries/official", "08_real_queries/checks"} <= tables
