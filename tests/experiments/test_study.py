"""The tiny study's machinery: the OOD split, the study grids and their estimate, published run summaries,
resuming a killed study, and ``--commit``. Every run here is the compact expert on a few tasks (seconds)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml

from star_lib.cli import main
from star_lib.experiments.config import ConfigError, ExperimentConfig
from star_lib.experiments.runner import run_experiment

OOD = {"n": 6, "per_world": 2, "days_choices": [3, 5, 7], "mix": "2:1:1"}
TOY = {
    "model": "tiny",
    "protocol": "compact",
    "difficulty": "easy",
    "rl_data_size": 4,
    "stages": ["world", "synth", "eval"],
    "world": {"source": "synthetic-per-query", "scale": "tiny"},
    "synth": {"n_base": 8, "base_mix": "easy", "n_test": 4, "days_choices": [3, 5], "ood": OOD},
    "eval": {"max_turns": 16, "chunk_size": 4, "ood": {"max_turns": 40, "max_context_tokens": 4096}},
}
"""Expert-only runs in per-query worlds with an OOD split whose tasks carry both shifts."""
REQUIRED = ("finding", "run", "seed", "commit", "config_hash", "wall_s", "eval/final_pass", "ood/final_pass")


def toy(**changes) -> ExperimentConfig:
    return ExperimentConfig.from_dict({**json.loads(json.dumps(TOY)), **changes})


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stage_dir(cache: Path, stage: str) -> Path:
    (found,) = [p for p in (cache / stage).iterdir() if p.is_dir() and not p.name.endswith(".partial")]
    return found


# ───────────────────────────── the OOD split ─────────────────────────────


@pytest.fixture(scope="module")
def ood_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("ood")
    result = run_experiment(toy(name="ood"), root / "g" / "ood", cache=root / "_stages")
    assert result.status == "done", result.error
    return root


def test_ood_split_holds_long_and_unseen_constraint_tasks_none_of_them_trained_on(ood_run):
    from star_lib.experiments.ood import constraint_signature
    from star_lib.synth.dataset import held_out_key
    from star_lib.travel.worldset import IDX_STRIDE
    from star_lib.types import QueryRecord

    synth = stage_dir(ood_run / "_stages", "synth")
    training = [
        QueryRecord.from_dict(r) for r in jsonl(synth / "base/train.jsonl") + jsonl(synth / "rl/train.jsonl")
    ]
    held_out = [QueryRecord.from_dict(r) for r in jsonl(synth / "base/test.jsonl")]
    ood = [QueryRecord.from_dict(r) for r in jsonl(synth / "ood/test.jsonl")]
    assert len(ood) == OOD["n"]
    train_days = {r.days for r in training}
    train_combos = {constraint_signature(r) for r in training}
    assert train_days == {3, 5} and train_combos == {()}  # the easy 3/5-day recipe
    long = [r for r in ood if r.days not in train_days]
    unseen = [r for r in ood if constraint_signature(r) not in train_combos]
    assert long and all(r.days == 7 for r in long)  # 7-day trips
    assert unseen and all(
        r.level in ("medium", "hard") for r in unseen
    )  # constraint combinations never trained
    assert all(r in long or r in unseen for r in ood)  # nothing in-distribution
    worlds = {r.idx // IDX_STRIDE for r in ood}
    assert not worlds & {r.idx // IDX_STRIDE for r in training + held_out}  # unseen worlds
    assert not {held_out_key(r) for r in ood} & {held_out_key(r) for r in training}  # no OOD task trained on
    shift = json.loads((synth / "ood/shift.json").read_text())
    assert [t["long"] for t in shift["tasks"]] == [r.days == 7 for r in ood]
    assert [t["constraints"] for t in shift["tasks"]] == [bool(constraint_signature(r)) for r in ood]


def test_eval_scores_the_ood_split_beside_the_held_out_tasks(ood_run):
    metrics = pl.read_parquet(ood_run / "g" / "ood" / "metrics.parquet").filter(pl.col("step").is_null())
    values = dict(metrics.select("metric", "value").iter_rows())
    assert values["eval/n"] == 4 and values["ood/n"] == OOD["n"]
    assert values["ood/final_pass"] == 1.0  # the expert solves them: the limits of eval.ood suffice
    assert 0 < values["ood/long/n"] < OOD["n"] and 0 < values["ood/constraints/n"] < OOD["n"]
    episodes = pl.read_parquet(stage_dir(ood_run / "_stages", "eval") / "ood.parquet")
    assert episodes.height == OOD["n"] and {"long", "constraints"} <= set(episodes.columns)


def test_without_synth_ood_the_eval_stage_reads_no_ood_input_and_reports_no_ood_metrics(tmp_path):
    synth = {k: v for k, v in TOY["synth"].items() if k != "ood"}
    result = run_experiment(toy(name="plain", synth=synth), tmp_path / "g" / "plain")
    assert result.status == "done", result.error
    (evaluated,) = [p for p in (tmp_path / "_stages" / "eval").iterdir() if p.is_dir()]
    assert set(json.loads((evaluated / "stage.json").read_text())["inputs"]) == {
        "world",
        "data",
    }  # key as before
    names = set(pl.read_parquet(tmp_path / "g" / "plain" / "metrics.parquet")["metric"])
    assert "eval/final_pass" in names and not any(n.startswith("ood/") for n in names)


@pytest.mark.parametrize(
    ("section", "value", "match"),
    [
        ("synth", {"ood": {"n": 0}}, r"ood.n must be an integer >= 1"),
        ("synth", {"ood": {"days": [7]}}, r"ood: unknown key\(s\) \['days'\]"),
        ("synth", {"ood": {"days_choices": [6]}}, r"ood.days_choices"),
        ("eval", {"ood": {"max_turn": 3}}, r"eval: ood: unknown key\(s\) \['max_turn'\]"),
    ],
)
def test_bad_ood_settings_are_refused_when_the_config_loads(tmp_path, section, value, match):
    from star_lib.experiments.stages import load_config

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(toy(**{section: {**TOY[section], **value}}).to_dict()))
    with pytest.raises(ConfigError, match=match):
        load_config(path)


def test_synth_test_mix_sets_the_held_out_levels_and_leaves_the_training_tasks_alone(tmp_path):
    from star_lib.types import QueryRecord

    plain = {k: v for k, v in TOY["synth"].items() if k != "ood"}
    levels = {}
    for name, synth in (("easy", plain), ("mixed", {**plain, "test_mix": "0:1:1"})):
        cache = tmp_path / name / "_stages"
        result = run_experiment(toy(name=name, synth=synth, stages=["world", "synth"]), tmp_path / name / "r",
                                cache=cache)  # fmt: skip
        assert result.status == "done", result.error
        synth_dir = stage_dir(cache, "synth")
        levels[name] = {
            split: [QueryRecord.from_dict(r).level for r in jsonl(synth_dir / f"base/{split}.jsonl")]
            for split in ("train", "test")
        }
    assert set(levels["easy"]["test"]) == {"easy"}
    assert set(levels["mixed"]["test"]) == {"medium", "hard"} and len(levels["mixed"]["test"]) == 4
    assert levels["mixed"]["train"] == levels["easy"]["train"] == ["easy"] * 8  # the SFT data is unchanged
    single = toy(world={"source": "synthetic", "scale": "small"}, synth={"n_base": 60, "test_mix": "hard"})
    with pytest.raises(ConfigError, match="synth.test_mix needs world.source synthetic-per-query"):
        run_experiment(single, tmp_path / "g" / "single")


def test_synth_ood_in_a_single_world_is_refused_naming_the_world_source(tmp_path):
    config = toy(world={"source": "synthetic", "scale": "small"}, synth={"n_base": 60, "ood": {"n": 2}})
    with pytest.raises(ConfigError, match="synth.ood needs world.source synthetic-per-query"):
        run_experiment(config, tmp_path / "g" / "single")


# ───────────────────────────── the study's grids ─────────────────────────────


def test_study_dry_run_lists_every_finding_with_three_seeds_per_arm_and_flags_grids_over_budget(capsys):
    from star_lib.experiments.grids import FINDINGS
    from star_lib.experiments.study import read_study

    assert main(["study", "--scale", "tiny", "--dry-run"]) == 0
    out = capsys.readouterr().out
    study = read_study()
    every = study.load_grids()
    pilots = [g for g in every if g.finding is None]  # issue 21: the pilots run first, each with its curve
    grids = every[len(pilots) :]
    assert [g.name for g in pilots][:1] == ["pilot"] and all(g.name.startswith("pilot") for g in pilots)
    for pilot in pilots:
        assert f"  {pilot.runs[0].name} " in out
        assert all(config.rl["eval_data"] == "held-out" for config in pilot.runs)
    assert {g.finding for g in grids} == {*FINDINGS, "interactions"}
    for grid in grids:
        arms: dict[str, set[int]] = {}
        for config in grid.runs:
            arms.setdefault(config.name.rsplit("__s", 1)[0], set()).add(config.seed)
            assert f"  {config.name} " in out
            assert config.synth["ood"]["n"] >= 200 and config.synth["n_test"] >= 200  # issue 13: >= 200
        assert arms and all(len(seeds) >= 3 for seeds in arms.values()), grid.name
        assert f"{grid.name} (finding {grid.finding}): {len(grid)} runs" in out
    # every grid of 3 seeds per arm is estimated within grid_budget_minutes; those with the largest precision
    # top-ups (study.yaml more_seeds) trade that budget for intervals of at most +-5 pts (the estimate counts
    # the reward grid's top-ups that copy later grids' runs as new runs: it measured 70.5 min)
    grid, over = "", set()
    for line in out.splitlines():
        grid = line.split(" (finding ")[0] if " (finding " in line else grid
        if "OVER the 90-minute budget" in line:
            over.add(grid)
    # the pilots are long curves by design (300-600 RL steps a seed), so any pilot may run over
    assert over - {g.name for g in pilots} <= {"algorithm", "interactions", "reward"}, over
    models = {c.model for g in grids for c in g.runs}
    assert models == {"tiny-s", "tiny", "tiny-l"}  # the scale axis


def test_more_seeds_tops_up_one_block_of_a_grid_and_yields_to_explicit_seeds(toy_study):
    from star_lib.experiments.study import StudyError, read_study

    path = toy_study / "study.yaml"
    top_up = {"grids": ["rewards"], "match": "*success*", "seeds": [3, 4]}
    path.write_text(yaml.safe_dump({"grids": ["rewards"], "seeds": [0, 1], "more_seeds": [top_up]}))
    (grid,) = read_study(path).load_grids()
    names = sorted(c.name for c in grid.runs)
    assert names == [
        "rewards__success__s0", "rewards__success__s1", "rewards__success__s3", "rewards__success__s4",
        "rewards__sum__s0", "rewards__sum__s1",
    ]  # fmt: skip
    (explicit,) = read_study(path).load_grids(seeds=[7])  # --seeds names every seed itself
    assert sorted(c.name for c in explicit.runs) == ["rewards__success__s7", "rewards__sum__s7"]
    for bad, said in (
        ({**top_up, "grids": ["nope"]}, "grids"),
        ({**top_up, "seeds": [-1]}, "seeds"),
        ({"grids": ["rewards"], "seeds": [3]}, "run-name glob"),  # no match: the usage
    ):
        path.write_text(yaml.safe_dump({"grids": ["rewards"], "more_seeds": [bad]}))
        with pytest.raises(StudyError, match=f"study.yaml: more_seeds: .*{said}"):
            read_study(path)


def test_the_study_tops_up_the_tiny_l_blocks_and_arms_whose_intervals_were_wide():
    from star_lib.experiments.study import read_study

    algorithm, interactions = read_study().load_grids(["algorithm", "interactions"])
    wide = {
        "algorithm__arpo_tiny-l": 8,
        "algorithm__dapo_tiny-l": 7,
        "interactions__curriculum_tiny-l_fail=0": 10,
    }
    for grid in (algorithm, interactions):
        seeds: dict[str, set[int]] = {}
        for config in grid.runs:
            seeds.setdefault(config.name.rsplit("__s", 1)[0], set()).add(config.seed)
        for arm, got in seeds.items():
            count = wide.get(arm, 5 if "tiny-l" in arm else 3)
            assert got == set(range(count)), arm


def test_study_estimate_shares_sft_across_arms_and_grids():
    from star_lib.experiments.study import Timing, estimate, read_study

    study = read_study()
    scale, reward, data = study.load_grids(["scale", "reward", "data"])
    first, second, third = estimate([scale, reward, data], Timing())
    assert first.count("sft") == 3 and second.count("sft") == 0 and third.count("sft") == 0
    assert third.count("teacher") == 0 and third.count("synth") == 3  # more RL prompts, the same SFT tasks
    assert second.count("rl") == len(reward) - 6  # its SUM arms are the scale grid's runs
    assert second.seconds < second.alone_s


def test_study_estimate_counts_the_held_out_curve_of_the_pilot():
    from star_lib.experiments.grids import Grid
    from star_lib.experiments.study import Timing, estimate, read_study

    (pilot,) = read_study().load_grids(["pilot"], seeds=[0])
    run = pilot.runs[0]
    timing = Timing(eval_episode=0.5)
    (with_curve,) = estimate([pilot], timing)
    (without,) = estimate([Grid("plain", (run.replace(rl={**run.rl, "eval_data": None}),))], timing)
    scored = min(run.rl["eval_limit"], run.synth["n_test"])
    evaluations = -(-run.rl["max_steps"] // run.rl["eval_steps"])  # every eval_steps, and the last step
    extra = with_curve.runs[0].new["rl"] - without.runs[0].new["rl"]
    assert extra == pytest.approx(evaluations * scored * 0.5)


def test_only_an_rl_stage_that_scores_the_held_out_curve_depends_on_the_held_out_tasks(tmp_path):
    import dataclasses

    from star_lib.experiments.stages import build_registry

    def model_only(cfg, inputs, out):  # stands in for training: the keys are what is tested
        (out / "model").mkdir()
        (out / "model" / "weights").write_text("w")

    registry = build_registry()
    for name in ("sft", "rl"):
        stage = registry.get(name)
        inputs = (lambda stages, config: {}) if name == "sft" else stage.inputs  # the real RL inputs
        registry.add(dataclasses.replace(stage, run=model_only, inputs=inputs))
    cache = tmp_path / "_stages"
    synth = {k: v for k, v in TOY["synth"].items() if k != "ood"}
    for eval_data, shared in ((None, True), ("held-out", False)):
        keys = []
        for test_mix in ("easy", "0:1:0"):  # other held-out tasks, the same RL prompts and SFT data
            config = toy(
                name=f"{eval_data}-{test_mix}".replace(":", "-"),
                stages=["world", "synth", "sft", "rl"],
                synth={**synth, "test_mix": test_mix},
                rl={"eval_data": eval_data} if eval_data else {},
            )
            result = run_experiment(config, tmp_path / "g" / config.name, cache=cache, registry=registry)
            assert result.status == "done", result.error
            keys.append({s["stage"]: s["key"] for s in result.stages})
        assert keys[0]["synth"] != keys[1]["synth"] and keys[0]["sft"] == keys[1]["sft"]
        assert (keys[0]["rl"] == keys[1]["rl"]) is shared, eval_data


def test_study_estimate_divides_only_greedy_fast_evaluations_by_the_split_speedup():
    from star_lib.experiments.grids import Grid
    from star_lib.experiments.study import Timing, estimate, read_study

    (scale,) = read_study().load_grids(["scale"])
    timing = Timing(eval_split=2.0)
    (one,) = estimate([scale], timing)
    (split,) = estimate([scale], timing, eval_processes=2)
    for a, b in zip(one.runs, split.runs, strict=True):
        assert b.new["eval"] == pytest.approx(a.new["eval"] / 2), a.run
        assert {**b.new, "eval": 0} == {**a.new, "eval": 0}  # every other stage as before
    first = scale.runs[0]
    sampled = first.replace(eval={**first.eval, "temperature": 0.7})
    (alone,) = estimate([Grid("sampled", (sampled,))], timing, eval_processes=2)
    assert alone.runs[0].new["eval"] == pytest.approx(one.runs[0].new["eval"])  # sampled: never split


def test_study_estimate_predicts_which_stages_the_cache_reuses(tmp_path):
    from star_lib.experiments.grids import factorial
    from star_lib.experiments.runner import read_run_record
    from star_lib.experiments.study import Timing, estimate, run_study

    synth = {k: v for k, v in TOY["synth"].items() if k != "ood"}
    base = {**TOY, "synth": synth, "stages": ["world", "synth", "teacher", "eval"]}
    grid = factorial("sizes", base, {"rl_data_size": [4, 6], "reward": ["sum", "success"]}, finding="data")
    (predicted,) = estimate([grid], Timing())
    run_study([grid], tmp_path / "runs", tmp_path / "published")
    for config, run in zip(grid.runs, predicted.runs, strict=True):
        record = read_run_record(tmp_path / "runs" / "sizes" / config.name)
        computed = {s["stage"] for s in record["stages"] if not s["reused"]}
        assert computed == set(run.new), config.name
    assert [set(r.new) for r in predicted.runs[1:]] == [{"eval"}, {"synth"}, set()]  # teacher, eval shared


# ───────────────────────────── running a study ─────────────────────────────


@pytest.fixture
def toy_study(tmp_path):
    folder = tmp_path / "study"
    folder.mkdir()
    grid = {
        "name": "rewards",
        "finding": "reward",
        "base": TOY,
        "axes": {"reward": ["sum", "success"]},
        "seeds": [0],
    }
    (folder / "rewards.yaml").write_text(yaml.safe_dump(grid))
    (folder / "study.yaml").write_text(yaml.safe_dump({"grids": ["rewards"], "seeds": [0]}))
    return folder


def study_args(tmp_path, study, *extra, isolate: bool = False) -> list[str]:
    """``star study`` on the toy study; each run in this process unless ``isolate`` (star study's default)."""
    return [
        "study", "--study", str(study / "study.yaml"), "--runs", str(tmp_path / "runs"),
        "--out", str(tmp_path / "published"), "--no-report", *extra, *([] if isolate else ["--in-process"]),
    ]  # fmt: skip


def test_a_two_run_study_publishes_one_summary_per_run_and_a_rerun_reruns_nothing(
    tmp_path, toy_study, capsys
):
    from star_lib.experiments.results import load_study
    from star_lib.experiments.runner import read_run_record

    assert main(study_args(tmp_path, toy_study, isolate=True)) == 0  # each run in its own process
    captured = capsys.readouterr()
    assert "note: 1 seed(s) per arm" in captured.err
    record = read_run_record(tmp_path / "runs" / "rewards" / "rewards__sum__s0")
    assert record["status"] == "done" and record["pid"] != os.getpid()
    assert "measured wall time: rewards " in captured.out and "min (2 runs); total " in captured.out
    paths = sorted((tmp_path / "published" / "reward").glob("*.parquet"))
    assert [p.name for p in paths] == ["rewards__success__s0.parquet", "rewards__sum__s0.parquet"]
    table = load_study(tmp_path / "published")
    assert table.height == 2 and set(REQUIRED) <= set(table.columns)
    row = table.filter(pl.col("run") == "rewards__sum__s0").row(0, named=True)
    assert row["finding"] == "reward" and row["seed"] == 0 and row["arm"] == "sum" and len(row["commit"]) >= 7
    assert row["wall_s"] > 0 and row["reward"] == "sum" and row["eval/final_pass"] == 1.0
    assert row["cpu"]  # the machine that ran it: a rerun elsewhere may round differently
    config = ExperimentConfig.from_dict(json.loads(row["config"]))
    assert config.fingerprint() == row["config_hash"]  # the summary says how to rerun it exactly
    for split in ("eval", "ood"):  # per-query outcomes of the RL (here: the expert) model, for bootstraps
        n = int(row[f"{split}/n"])
        assert n > 0 and len(row[f"{split}_query"]) == n and len(set(row[f"{split}_query"])) == n
        for rate in ("final_pass", "cs_macro", "hard_macro", "cs_micro"):
            assert len(row[f"{split}_{rate}"]) == n
            assert sum(row[f"{split}_{rate}"]) / n == pytest.approx(row[f"{split}/{rate}"]), (split, rate)
        assert sum(row[f"{split}_sum"]) / n == pytest.approx(row[f"{split}/sum"])
    assert "messages" not in table.columns and "plan" not in table.columns  # no trajectories
    stamps = [p.stat().st_mtime_ns for p in paths]
    assert main(study_args(tmp_path, toy_study)) == 0
    assert capsys.readouterr().out.count("published rewards__") == 2
    assert [p.stat().st_mtime_ns for p in paths] == stamps  # nothing rewritten
    assert main([*study_args(tmp_path, toy_study), "--rerun"]) == 0
    assert capsys.readouterr().out.count("skipped") == 2  # finished under runs/: nothing rerun either
    assert [p.stat().st_mtime_ns for p in paths] == stamps


def test_a_run_whose_process_is_killed_fails_alone_and_the_study_goes_on(
    tmp_path, toy_study, monkeypatch, capsys
):
    from star_lib.experiments.runner import read_run_record

    hook = tmp_path / "hook"
    hook.mkdir()
    marker = tmp_path / "kill-the-next-run"
    marker.touch()
    (hook / "sitecustomize.py").write_text(  # the first run's process dies as the OOM killer would kill it
        "import os, signal\n"
        "marker = os.environ.get('STAR_TEST_KILL_MARKER')\n"
        "if marker and os.path.exists(marker):\n"
        "    os.remove(marker)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(hook))
    monkeypatch.setenv("STAR_TEST_KILL_MARKER", str(marker))
    assert main(study_args(tmp_path, toy_study, isolate=True)) == 1
    out = capsys.readouterr().out
    assert "failed   rewards__sum__s0  the run's process was killed by SIGKILL (the kernel's" in out
    assert "done     rewards__success__s0" in out and "study: 1 of 2 runs finished" in out
    record = read_run_record(tmp_path / "runs" / "rewards" / "rewards__sum__s0")
    assert record["status"] == "failed" and "SIGKILL" in record["error"]
    assert [p.name for p in (tmp_path / "published" / "reward").glob("*.parquet")] == [
        "rewards__success__s0.parquet"
    ]
    assert main(study_args(tmp_path, toy_study, isolate=True)) == 0  # the next study runs it
    assert "done     rewards__sum__s0" in capsys.readouterr().out


def test_a_study_that_lost_its_runs_folder_runs_nothing_it_published(tmp_path, toy_study, capsys):
    assert main(study_args(tmp_path, toy_study)) == 0
    paths = sorted((tmp_path / "published" / "reward").glob("*.parquet"))
    stamps = [p.stat().st_mtime_ns for p in paths]
    shutil.rmtree(tmp_path / "runs")  # a new machine: the runs folder and the stage cache are gone
    capsys.readouterr()
    assert main(study_args(tmp_path, toy_study)) == 0
    out = capsys.readouterr().out
    assert "published rewards__sum__s0" in out and "published rewards__success__s0" in out
    assert not (tmp_path / "runs" / "rewards" / "rewards__sum__s0").exists()  # not run again
    assert [p.stat().st_mtime_ns for p in paths] == stamps


def test_the_dry_run_says_how_many_runs_are_left_once_some_are_published(tmp_path, toy_study, capsys):
    assert main([*study_args(tmp_path, toy_study), "--dry-run"]) == 0
    assert "left to run: all 2 runs (none published in " in capsys.readouterr().out
    assert main([*study_args(tmp_path, toy_study), "--only", "rewards", "--seeds", "0"]) == 0
    (tmp_path / "published" / "reward" / "rewards__success__s0.parquet").unlink()
    capsys.readouterr()
    assert main([*study_args(tmp_path, toy_study), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "left to run: 1 of 2 runs (1 published in " in out and "0 copies of a published run" in out


def test_a_run_of_a_published_runs_config_in_another_grid_is_published_as_its_copy(
    tmp_path, toy_study, monkeypatch, capsys
):
    import star_lib.experiments.runner as runner

    again = {"name": "again", "finding": "algorithm", "base": TOY, "axes": {"algorithm": ["grpo"]}}
    (toy_study / "again.yaml").write_text(yaml.safe_dump({**again, "seeds": [0]}))
    (toy_study / "study.yaml").write_text(yaml.safe_dump({"grids": ["rewards", "again"], "seeds": [0]}))
    real, calls = runner.run_experiment, []

    def counted(config, run_dir, **kwargs):
        calls.append(config.name)
        return real(config, run_dir, **kwargs)

    monkeypatch.setattr(runner, "run_experiment", counted)
    assert main(study_args(tmp_path, toy_study)) == 0
    assert "shared   again__grpo__s0" in capsys.readouterr().out
    assert calls == ["rewards__sum__s0", "rewards__success__s0"]  # TOY's reward is sum, its algorithm grpo
    published = tmp_path / "published"
    twin = pl.read_parquet(published / "reward" / "rewards__sum__s0.parquet").row(0, named=True)
    copy = pl.read_parquet(published / "algorithm" / "again__grpo__s0.parquet").row(0, named=True)
    assert copy["run"] == "again__grpo__s0" and copy["grid"] == "again" and copy["finding"] == "algorithm"
    assert copy["arm"] == "grpo" and copy["same_as"] == "rewards__sum__s0" and copy["wall_s"] == 0.0
    assert twin["wall_s"] > 0 and copy["config_hash"] == twin["config_hash"]
    for column in [c for c in twin if c.startswith(("eval", "ood"))] + ["rl_reward", "commit", "seed"]:
        assert copy[column] == twin[column], column
    assert main([*study_args(tmp_path, toy_study), "--runs", str(tmp_path / "again"), "--rerun"]) == 0
    assert calls[2:] == ["rewards__sum__s0", "rewards__success__s0", "again__grpo__s0"]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="two one-thread runs at once need 2 cores")
def test_jobs_2_runs_two_runs_at_once_and_a_copy_waits_for_the_run_it_copies(tmp_path, toy_study, capsys):
    from star_lib.experiments.results import load_study

    one_thread = {**TOY, "threads": 1}
    again = {"name": "again", "finding": "algorithm", "base": one_thread, "axes": {"algorithm": ["grpo"]}}
    rewards = yaml.safe_load((toy_study / "rewards.yaml").read_text())
    (toy_study / "rewards.yaml").write_text(yaml.safe_dump({**rewards, "base": one_thread}))
    (toy_study / "again.yaml").write_text(yaml.safe_dump({**again, "seeds": [0]}))
    (toy_study / "study.yaml").write_text(yaml.safe_dump({"grids": ["rewards", "again"], "seeds": [0]}))
    assert main([*study_args(tmp_path, toy_study, isolate=True), "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "done     rewards__sum__s0" in out and "done     rewards__success__s0" in out
    assert "shared   again__grpo__s0" in out  # queued behind its twin, then copied, not run
    table = load_study(tmp_path / "published")
    runs = {r["run"]: r for r in table.iter_rows(named=True)}
    assert runs["again__grpo__s0"]["same_as"] == "rewards__sum__s0"
    (a_end, a_wall), (b_end, b_wall) = [
        (runs[n]["finished"], runs[n]["wall_s"]) for n in ("rewards__sum__s0", "rewards__success__s0")
    ]
    assert max(a_end - a_wall, b_end - b_wall) < min(a_end, b_end)  # the two runs overlapped in time
    busy = (max(a_end, b_end) - min(a_end - a_wall, b_end - b_wall)) / 60
    assert f"rewards {busy:.1f} min (2 runs)" in out  # the grid's wall time: elapsed, not the sum
    assert not (tmp_path / "runs" / "again" / "again__grpo__s0").exists()


def test_jobs_that_would_put_more_torch_threads_than_cores_are_refused_naming_the_setting(
    tmp_path, toy_study
):
    from star_lib.experiments.study import StudyError, check_jobs, read_study

    grids = read_study(toy_study / "study.yaml").load_grids()  # TOY leaves threads at 0: one per core
    with pytest.raises(
        StudyError, match=r"--jobs 2: runs with threads: 2 would ask for 4 torch threads on 2 "
    ):
        check_jobs(2, grids, cores=2)
    check_jobs(1, grids, cores=2)
    rewards = yaml.safe_load((toy_study / "rewards.yaml").read_text())
    (toy_study / "rewards.yaml").write_text(yaml.safe_dump({**rewards, "base": {**TOY, "threads": 1}}))
    check_jobs(2, read_study(toy_study / "study.yaml").load_grids(), cores=2)  # 2 runs x 1 thread
    with pytest.raises(StudyError, match="--jobs 0: give 1 or more"):
        check_jobs(0, grids, cores=2)


def test_the_studys_jobs_fall_back_to_one_run_at_a_time_where_the_cores_cannot_hold_them(
    tmp_path, toy_study, capsys
):
    from star_lib.experiments.study import StudyError, read_study

    path = toy_study / "study.yaml"
    path.write_text(yaml.safe_dump({"grids": ["rewards"], "seeds": [0], "jobs": 64}))
    assert read_study(path).jobs == 64
    assert main(study_args(tmp_path, toy_study, isolate=True)) == 0  # TOY runs on every core: no room
    captured = capsys.readouterr()
    assert "note: one run at a time: --jobs 64: runs with threads: " in captured.err
    assert "done     rewards__sum__s0" in captured.out and "done     rewards__success__s0" in captured.out
    assert main([*study_args(tmp_path, toy_study, isolate=True), "--jobs", "64"]) == 2  # asked for: refused
    assert "--jobs 64: runs with threads: " in capsys.readouterr().err
    path.write_text(yaml.safe_dump({"grids": ["rewards"], "jobs": 0}))
    with pytest.raises(StudyError, match="study.yaml: jobs: give the number of runs at once"):
        read_study(path)


def test_a_grids_wall_time_counts_overlapping_runs_once():
    from star_lib.cli.study import busy_seconds

    assert busy_seconds([(0, 10), (5, 12), (20, 25)]) == 17  # 0-12 and 20-25
    assert busy_seconds([(0, 10), (2, 3)]) == 10
    assert busy_seconds([]) == 0


def test_verify_finds_a_rerun_in_a_fresh_folder_reproduced_and_names_a_published_number_that_differs(
    tmp_path, toy_study, capsys
):
    assert main(study_args(tmp_path, toy_study)) == 0
    fresh = ["--runs", str(tmp_path / "rerun")]  # an empty runs folder and cache: every stage again
    assert main([*study_args(tmp_path, toy_study), *fresh, "--rerun"]) == 0
    capsys.readouterr()
    assert main([*study_args(tmp_path, toy_study), *fresh, "--verify"]) == 0
    out = capsys.readouterr().out
    assert "reproduced   rewards__sum__s0" in out and ": 2 reproduced" in out
    path = tmp_path / "published" / "reward" / "rewards__sum__s0.parquet"
    table = pl.read_parquet(path)
    table.with_columns(pl.lit(0.25).alias("eval/final_pass")).write_parquet(path)
    assert main([*study_args(tmp_path, toy_study), *fresh, "--verify"]) == 1
    out = capsys.readouterr().out
    assert "differs      rewards__sum__s0" in out and "eval/final_pass: 0.25 -> 1" in out
    assert "1 reproduced, 1 differs" in out and "published on" not in out  # same machine: no excuse
    changed = {"eval/final_pass": 0.25, "cpu": "Other CPU (avx512_bf16)"}
    table.with_columns(*(pl.lit(v).alias(k) for k, v in changed.items())).write_parquet(path)
    assert main([*study_args(tmp_path, toy_study), *fresh, "--verify"]) == 1
    assert "published on Other CPU (avx512_bf16), rerun on " in capsys.readouterr().out
    assert main([*study_args(tmp_path, toy_study), "--runs", str(tmp_path / "none"), "--verify"]) == 0
    assert "verify: 0 of 2 runs are finished" in capsys.readouterr().out


def test_study_match_runs_only_the_runs_it_names_and_refuses_a_pattern_that_names_none(
    tmp_path, toy_study, capsys
):
    from star_lib.experiments.grids import Grid

    grid = yaml.safe_load((toy_study / "rewards.yaml").read_text())
    (toy_study / "other.yaml").write_text(yaml.safe_dump({**grid, "name": "other", "finding": "noise"}))
    (toy_study / "study.yaml").write_text(yaml.safe_dump({"grids": ["rewards", "other"], "seeds": [0]}))
    assert main([*study_args(tmp_path, toy_study), "--match", "*__success__*"]) == 0
    out = capsys.readouterr().out  # a pattern need not match a run in every grid
    assert "done     rewards__success__s0" in out and "other__success__s0" in out and "__sum__" not in out
    published = [p.name for p in (tmp_path / "published" / "reward").glob("*.parquet")]
    assert published == ["rewards__success__s0.parquet"]
    assert not (tmp_path / "runs" / "rewards" / "rewards__sum__s0").exists()
    manifest = Grid.from_manifest(tmp_path / "runs" / "rewards" / "grid.yaml")
    assert [r.name for r in manifest.runs] == ["rewards__sum__s0", "rewards__success__s0"]  # the whole grid
    assert main([*study_args(tmp_path, toy_study), "--match", "*_tiny-xl_*", "--dry-run"]) == 2
    said = "--match *_tiny-xl_*: ['*_tiny-xl_*'] matches no run of ['rewards', 'other']"
    assert said in capsys.readouterr().err


def test_a_second_study_on_the_same_runs_folder_is_refused_naming_the_pid_that_holds_it(
    tmp_path, toy_study, capsys
):
    from star_lib.experiments.study import study_lock

    with study_lock(tmp_path / "runs"):  # a study already running on this runs folder
        assert main(study_args(tmp_path, toy_study)) == 2
        err = capsys.readouterr().err
        assert f"another star study (pid {os.getpid()}) is running on {tmp_path / 'runs'}" in err
        assert not (tmp_path / "published").exists()  # nothing ran
    assert main(study_args(tmp_path, toy_study)) == 0  # released when the first one ends
    assert len(list((tmp_path / "published" / "reward").glob("*.parquet"))) == 2


def test_a_run_with_its_own_stage_cache_still_lists_its_per_query_outcomes(tmp_path, toy_study):
    from star_lib.experiments.results import load_study

    elsewhere = tmp_path / "elsewhere"
    assert main([*study_args(tmp_path, toy_study), "--cache", str(elsewhere)]) == 0
    row = load_study(tmp_path / "published").filter(pl.col("run") == "rewards__sum__s0").row(0, named=True)
    assert not (tmp_path / "runs" / "_stages").exists() and (elsewhere / "eval").is_dir()
    for split in ("eval", "ood"):
        assert len(row[f"{split}_query"]) == int(row[f"{split}/n"]) > 0


def test_per_query_outcomes_follow_the_split_order_and_count_an_undelivered_plan_as_failed(tmp_path):
    from star_lib.experiments.results import held_out_outcomes, load_study

    run = tmp_path / "run"
    run.mkdir()
    pl.DataFrame(
        {
            "query_index": [2, 0, 1, 3],
            "idx": [12, 10, 11, 13],
            "delivered": [True, True, False, True],
            "final_pass": [False, True, True, True],  # query 1's verdicts pass, its plan was not delivered
            "commonsense_pass": [True, True, True, True],
            "hard_pass": [False, True, True, True],
            "cs_micro": [1.0, 1.0, 0.875, 0.5],
            "sum": [0.6, 1.0, 0.1, 0.9],
        }
    ).write_parquet(run / "eval.parquet")
    outcomes = held_out_outcomes(run)
    assert outcomes["eval_query"] == [10, 11, 12, 13]
    assert outcomes["eval_final_pass"] == [1, 0, 0, 1] and outcomes["eval_cs_macro"] == [1, 0, 1, 1]
    assert outcomes["eval_cs_micro"] == [1.0, 0.0, 1.0, 0.5] and outcomes["eval_sum"] == [1.0, 0.1, 0.6, 0.9]
    assert not any(k.startswith("ood_") for k in outcomes)  # no OOD episodes, no OOD lists
    assert held_out_outcomes(tmp_path / "nothing") == {}
    old = tmp_path / "published" / "reward"
    old.mkdir(parents=True)
    pl.DataFrame(
        {"finding": ["reward"], "grid": ["g"], "run": ["g__sum__s0"], "eval/final_pass": [0.5]}
    ).write_parquet(old / "g__sum__s0.parquet")
    pl.DataFrame(
        {"finding": ["reward"], "grid": ["g"], "run": ["g__sum__s1"], "eval_final_pass": [[1, 0]]}
    ).write_parquet(old / "g__sum__s1.parquet")
    table = load_study(tmp_path / "published")  # an old summary without the lists still reads
    assert table.height == 2 and table["eval_final_pass"].to_list() == [None, [1, 0]]


def test_a_killed_study_continues_where_it_stopped(tmp_path, toy_study, monkeypatch, capsys):
    import star_lib.experiments.runner as runner

    real = runner.run_experiment
    calls = []

    def killed_on_the_second_run(config, run_dir, **kwargs):
        calls.append(config.name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the session ends mid-study
        return real(config, run_dir, **kwargs)

    monkeypatch.setattr(runner, "run_experiment", killed_on_the_second_run)
    assert main(study_args(tmp_path, toy_study)) == 130
    published = tmp_path / "published" / "reward"
    assert [p.name for p in published.glob("*.parquet")] == ["rewards__sum__s0.parquet"]
    first = (published / "rewards__sum__s0.parquet").stat().st_mtime_ns
    monkeypatch.setattr(runner, "run_experiment", real)
    capsys.readouterr()
    assert main(study_args(tmp_path, toy_study)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "published rewards__sum__s0" in lines and "done     rewards__success__s0" in lines
    assert (published / "rewards__sum__s0.parquet").stat().st_mtime_ns == first


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def test_study_commit_commits_exactly_each_summary_file(tmp_path, toy_study, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "other.txt").write_text("staged, not the study's\n")
    (repo / "loose.txt").write_text("unstaged\n")
    git(repo, "add", "other.txt")
    args = study_args(tmp_path, toy_study, "--commit")
    args[args.index("--out") + 1] = str(repo / "reports" / "tiny-study")
    assert main(args) == 0
    assert capsys.readouterr().out.count("committed") == 2
    commits = git(repo, "rev-list", "HEAD").split()
    files = sorted(git(repo, "show", "--name-only", "--format=", sha).split() for sha in commits)
    assert files == [
        ["reports/tiny-study/reward/rewards__success__s0.parquet"],
        ["reports/tiny-study/reward/rewards__sum__s0.parquet"],
    ]
    subjects = sorted(git(repo, "log", "-1", "--format=%s", sha).strip() for sha in commits)
    assert subjects[0].startswith("tiny study: rewards__success__s0 ")  # the message names the run
    assert git(repo, "diff", "--cached", "--name-only").split() == [
        "other.txt"
    ]  # still staged, not committed
    assert main(args) == 0 and "committed" not in capsys.readouterr().out  # nothing new to commit


def test_study_commit_into_a_folder_git_ignores_is_refused_before_any_run(tmp_path, toy_study, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("/reports/*\n!/reports/tiny-study/\n")
    args = study_args(tmp_path, toy_study, "--commit")
    args[args.index("--out") + 1] = str(repo / "reports" / "elsewhere")
    assert main(args) == 2
    assert "--commit: git ignores " in capsys.readouterr().err
    assert not (tmp_path / "runs" / "rewards").exists()  # refused before any run


def test_study_commit_outside_a_git_repository_says_so(tmp_path, toy_study, capsys):
    assert main(study_args(tmp_path, toy_study, "--commit")) == 2
    assert "is not inside a git repository" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "rewards").exists()  # refused before any run


def test_study_only_an_unknown_grid_is_refused_naming_the_study_grids(tmp_path, toy_study, capsys):
    assert main(study_args(tmp_path, toy_study, "--only", "rewardz")) == 2
    assert "['rewardz'] is not a grid of the study ['rewards']" in capsys.readouterr().err


def test_study_config_of_prints_the_yaml_star_run_reruns(tmp_path, toy_study, capsys):
    assert main(study_args(tmp_path, toy_study, "--config-of", "rewards__success__s0")) == 0
    data = yaml.safe_load(capsys.readouterr().out)
    assert data["name"] == "rewards__success__s0" and data["reward"] == "success"
    assert data["synth"]["ood"] == OOD


# ───────────────────────────── the milestone arm and clean + noisy evaluation ─────────────────────────────


def test_the_reward_grid_has_the_milestone_arm_and_the_noise_grid_evaluates_clean_too():
    from star_lib.experiments.stages import build_registry
    from star_lib.experiments.study import read_study

    reward, extra, noise = read_study().load_grids(["reward", "milestone", "noise"])
    assert {c.reward for c in reward.runs} == {"sum", "macro", "success", "curriculum"}
    assert extra.finding == "reward" and {c.reward for c in extra.runs} == {"milestone"}  # the fifth arm
    # on the models and seeds of the reward grid (whose tiny-l arms have more precision top-ups)
    assert {(c.model, c.seed) for c in extra.runs} <= {(c.model, c.seed) for c in reward.runs}
    assert {c.model for c in extra.runs} == {c.model for c in reward.runs}
    registry = build_registry()
    stage = registry.get("eval")
    milestone = extra.runs[0]
    assert registry.get("rl").resolve_config(milestone).axes["reward"] == "milestone"
    assert stage.resolve_config(milestone).reward == "milestone"
    assert all(stage.resolve_config(c).also_clean for c in noise.runs)
    assert not any(stage.resolve_config(c).also_clean for c in reward.runs)


def test_an_option_left_at_its_default_stays_out_of_the_eval_cache_key():
    from star_lib.experiments.stages import build_registry
    from star_lib.experiments.stages.eval import EvalStageConfig

    stage = build_registry().get("eval")
    assert "also_clean" not in stage.config_dict(EvalStageConfig())  # runs without it keep their keys
    assert stage.config_dict(EvalStageConfig(also_clean=True))["also_clean"] is True


def test_also_clean_scores_a_noisy_arm_with_clean_tools_too_and_milestone_is_the_eval_reward(tmp_path):
    synth = {k: v for k, v in TOY["synth"].items() if k != "ood"}
    evaluation = {k: v for k, v in TOY["eval"].items() if k != "ood"}
    config = toy(
        name="noisy",
        synth=synth,
        reward="milestone",
        tool_failure_rate=0.3,
        eval={**evaluation, "also_clean": True},
    )
    result = run_experiment(config, tmp_path / "g" / "noisy")
    assert result.status == "done", result.error
    metrics = pl.read_parquet(tmp_path / "g" / "noisy" / "metrics.parquet").filter(pl.col("step").is_null())
    values = dict(metrics.select("metric", "value").iter_rows())
    assert values["eval/n"] == values["eval/clean/n"] == 4
    assert values["eval/faults"] > 0 and values["eval/clean/faults"] == 0  # the same tasks, clean tools
    assert values["eval/clean/final_pass"] == 1.0  # the expert, undisturbed
    paired = values["eval/clean/paired/noisy-clean/mean"]
    sums = pl.read_parquet(stage_dir(tmp_path / "_stages", "eval") / "eval.parquet")["sum"]
    assert paired == pytest.approx(sums.mean() - 1.0)  # noisy SUM per task minus the clean one (1.0)
    # reward/mean is MILESTONE's (SUM + credit) / 2: the expert retrieves all its plan needs despite retries
    table = pl.read_parquet(stage_dir(tmp_path / "_stages", "eval") / "eval.parquet")
    assert values["reward/mean"] == pytest.approx(table["run_reward"].mean())
    assert values["reward/mean"] > 0


def test_eval_processes_come_from_the_study_file_or_the_option_and_reach_the_runs(
    tmp_path, toy_study, monkeypatch
):
    import os

    from star_lib.experiments.evalpool import ENV_VAR
    from star_lib.experiments.study import StudyError, read_study

    monkeypatch.setenv(ENV_VAR, "1")  # restored after the test: `star study` sets it for its runs
    path = toy_study / "study.yaml"
    path.write_text(yaml.safe_dump({"grids": ["rewards"], "seeds": [0], "eval_processes": 2}))
    assert read_study(path).eval_processes == 2
    assert main(study_args(tmp_path, toy_study, "--match", "rewards__sum__s0")) == 0
    assert os.environ[ENV_VAR] == "2"
    assert main(study_args(tmp_path, toy_study, "--eval-processes", "3", "--match", "rewards__sum__s0")) == 0
    assert os.environ[ENV_VAR] == "3"
    assert main(study_args(tmp_path, toy_study, "--eval-processes", "0")) == 2
    path.write_text(yaml.safe_dump({"grids": ["rewards"], "eval_processes": "two"}))
    with pytest.raises(StudyError, match=r"study.yaml: eval_processes: 'two' is not allowed"):
        read_study(path)


def test_an_ood_turn_limit_the_expert_cannot_finish_in_names_the_ood_setting(ood_run):
    config = toy(name="short-ood", eval={**TOY["eval"], "ood": {"max_turns": 6, "max_context_tokens": 4096}})
    with pytest.raises(ConfigError, match=r"on the OOD split, eval.ood.max_turns is 6 but the compact"):
        run_experiment(config, ood_run / "g" / "short-ood", cache=ood_run / "_stages")


@pytest.mark.parametrize(
    "values, said",
    [
        ({"grid_budget_minutes": float("nan")}, "grid_budget_minutes: give a positive number"),
        ({"grid_budget_minutes": float("inf")}, "grid_budget_minutes: give a positive number"),
        ({"seeds": [2**40]}, "seeds: give a non-empty list of integers from 0 to 2\\*\\*32 - 1"),
        ({"seeds": [True]}, "seeds: give a non-empty list"),
    ],
)
def test_unbounded_study_values_are_refused_naming_the_key(toy_study, values, said):
    from star_lib.experiments.study import StudyError, read_study

    path = toy_study / "study.yaml"
    path.write_text(yaml.safe_dump({"grids": ["rewards"], **values}))
    with pytest.raises(StudyError, match=f"study.yaml: {said}"):
        read_study(path)


def test_a_summary_keeps_the_held_out_curve_rl_scored_during_training(tmp_path):
    from star_lib.experiments.grids import Grid
    from star_lib.experiments.study.publish import run_summary

    rows = [("rl", 25, "eval/final_pass", 0.1), ("rl", 50, "eval/final_pass", 0.2)]
    rows += [
        ("rl", 25, "eval/cs_micro", 0.5),
        ("rl", 50, "eval/cs_micro", 0.6),
        ("rl", 50, "train/reward", 0.3),
    ]
    rows += [("eval", None, "eval/final_pass", 0.25), ("rl", None, "eval/final_pass", 0.9)]
    rows += [("rl", None, "rl/mean/dapo/refill_rounds", 1.5), ("rl", None, "rl/final/train/loss", 0.1)]
    frame = pl.DataFrame(rows, schema=["stage", "step", "metric", "value"], orient="row")
    (tmp_path / "run").mkdir()
    frame.write_parquet(tmp_path / "run" / "metrics.parquet")
    config = toy(name="pilot__sum__s0")
    grid = Grid(name="pilot", runs=(config,), axes={"reward": ["sum"]})
    row = run_summary(grid, config, tmp_path / "run", ("abc1234", False)).row(0, named=True)
    assert row["heldout_steps"] == [25, 50] and row["heldout_final_pass"] == [0.1, 0.2]
    assert row["heldout_cs_micro"] == [0.5, 0.6] and "heldout_parseable_plans" not in row
    assert row["eval/final_pass"] == 0.25 and row["rl_steps"] == [50]  # the eval stage's score, the RL curve
    assert row["rl/mean/dapo/refill_rounds"] == 1.5 and "rl/final/train/loss" not in row  # step means only
    # a run whose RL scored nothing during training has no curve columns
    frame.filter(pl.col("stage") != "rl").write_parquet(tmp_path / "run" / "metrics.parquet")
    assert "heldout_steps" not in run_summary(grid, config, tmp_path / "run", ("abc1234", False)).columns
