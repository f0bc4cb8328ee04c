from __future__ import annotations

import dataclasses
import json

import polars as pl
import pytest

from star_lib.agent import ExpertPolicy, RolloutConfig, run_episodes
from star_lib.synth import synthesize
from star_lib.synth.config import SynthConfig
from star_lib.train.rollouts import RolloutLog
from star_lib.travel.evaluate import evaluate_plan
from star_lib.travel.faults import FaultConfig, FaultInjector
from star_lib.travel.tools import ToolRegistry
from star_lib.travel.world import World
from star_lib.viz import explorer as ex
from star_lib.viz.explorer import FAIL, PASS, TrajectoryExplorer


@pytest.fixture(scope="module")
def world():
    return World.synthetic(seed=0, scale="small")


@pytest.fixture(scope="module")
def expert_episodes(world):
    queries = synthesize(world, SynthConfig(n=8, seed=1, splits=(1.0, 0.0, 0.0))).records
    return run_episodes(
        ExpertPolicy(), queries, world, RolloutConfig(), FaultConfig(failure_rate=0.3, seed=0)
    )


@pytest.fixture(scope="module")
def rl_rollouts(expert_episodes, tmp_path_factory):
    """A rollouts.parquet written by the RL stage's own writer (with the conversations)."""
    path = tmp_path_factory.mktemp("rl") / "rollouts.parquet"
    log = RolloutLog(path)
    log.append(1, "train", expert_episodes[:4])
    log.append(2, "eval", expert_episodes[4:])
    return path


def test_explorer_runner_rollouts_selecting_an_episode_updates_the_verdicts(noise_runs):
    explorer = TrajectoryExplorer.from_results(noise_runs)
    assert set(explorer.run.options) == {
        f"noise-tiny/{p.name}" for p in (noise_runs / "noise-tiny").iterdir() if p.is_dir()
    }
    run = next(r for r in explorer.run.options if "fail=0.1" in r)
    explorer.select(run=run)
    frame = pl.read_parquet(noise_runs / run / "rollouts.parquet")
    assert set(frame["stage"]) == {"teacher", "eval"}
    evals = [i for i, s in enumerate(frame["stage"]) if s == "eval"]
    assert explorer.stage.value == "eval" and [v for _, v in explorer.episode.options] == evals
    rows = [(i, frame.row(i, named=True)) for i in evals]
    failed = next(i for i, r in rows if not r["final_pass"])
    passed = next(i for i, r in rows if r["final_pass"])
    explorer.select(episode=passed)
    passed_view = explorer.verdict_view.value
    assert "verdict-fail" not in passed_view and "verdict-pass" in passed_view
    explorer.select(episode=failed)
    assert explorer.verdict_view.value != passed_view
    failed_checks = [k for k in frame.columns if k.startswith(("cs/", "hard/")) and frame[k][failed] is False]
    assert explorer.verdict_view.value.count("verdict-fail") == len(failed_checks)
    assert f"#{failed}" in explorer.header_view.value and "failed" in explorer.header_view.value
    # The eval stage stores each transcript: stepping through turns shows the real tool calls.
    assert "No transcript stored" not in explorer.turn_view.value
    explorer.select(turn=2)
    assert "Search" in explorer.turn_view.value and "turn 2 of" in explorer.turn_view.value


def test_explorer_failure_filter_narrows_the_episode_list(noise_runs):
    explorer = TrajectoryExplorer.from_results(noise_runs)
    run = next(r for r in explorer.run.options if "fail=0.1" in r)
    frame = pl.read_parquet(noise_runs / run / "rollouts.parquet")
    explorer.select(run=run, stage="all", failure="turn limit")
    expected = [i for i, t in enumerate(frame["termination"]) if t == "turn_limit"]
    assert [v for _, v in explorer.episode.options] == expected
    assert f"{len(expected)} of {frame.height} episodes" in explorer.count.value
    explorer.select(stage="eval")
    assert [v for _, v in explorer.episode.options] == [i for i in expected if frame["stage"][i] == "eval"]
    explorer.select(failure="passed")
    assert all(frame["final_pass"][v] for _, v in explorer.episode.options)
    explorer.select(failure="hard/valid_room_type")
    if not explorer.episode.options:
        assert "No episode matches" in explorer.header_view.value


def test_explorer_steps_through_turns_of_a_real_rl_rollouts_file(rl_rollouts, expert_episodes):
    explorer = TrajectoryExplorer(rl_rollouts)
    explorer.select(failure="tool faults")
    assert explorer.episode.options, "30 % failures should hit some episode"
    index = explorer.episode.value
    turns = explorer.transcript()
    assert len(turns) == expert_episodes[index].turns
    assert (explorer.turn.min, explorer.turn.max, explorer.turn.value) == (1, len(turns), 1)
    assert "turn 1 of" in explorer.turn_view.value  # the label and the slider agree
    if explorer.row()["termination"] == "answer":
        assert turns[-1].kind == "answer" and turns[-1].observation is None
    fault_turn = next(t.index for t in turns if t.observation_kind == "injected failure")
    explorer.select(turn=fault_turn + 1)
    assert "[injected failure]" in explorer.turn_view.value
    assert f"turn {fault_turn + 1} of {len(turns)}" in explorer.turn_view.value
    explorer.step(+1)
    assert explorer.turn.value == fault_turn + 2
    assert f"turn {fault_turn + 2} of {len(turns)}" in explorer.turn_view.value
    explorer.select(turn=explorer.turn.max)
    explorer.step(+1)
    assert explorer.turn.value == explorer.turn.max  # stays inside the episode
    assert "turn 1 of" not in explorer.turn_view.value


def test_explorer_from_episodes_shows_reasons_and_colours_the_failing_day(world, expert_episodes):
    ep = next(e for e in expert_episodes if e.report.final_pass and e.query.days >= 3)
    day = next(i for i, d in enumerate(ep.plan) if d.breakfast != "-" and "from" not in d.current_city)
    other = next(i for i, d in enumerate(ep.plan) if i != day and d.breakfast != "-")
    broken = list(ep.plan)
    broken[day] = dataclasses.replace(broken[day], breakfast=f"Nowhere Diner, {broken[day].current_city}")
    bad = dataclasses.replace(ep, plan=tuple(broken), report=evaluate_plan(ep.query, broken, world))
    explorer = TrajectoryExplorer.from_episodes({"expert": [ep], "broken": [bad]})
    assert "verdict-fail" not in explorer.verdict_view.value
    explorer.select(run="broken")
    verdicts = ex.episode_verdicts(explorer.row())
    failing = [v for v in verdicts if v.passed is False]
    assert failing and all(v.reason for v in failing)
    assert {v.days for v in failing} == {(day + 1,)}  # every reason names the broken day
    assert any(v.passed is False for v in ex.cell_verdicts(verdicts, day + 1, "breakfast"))
    assert all(v.passed is not False for v in ex.cell_verdicts(verdicts, other + 1, "breakfast"))
    plan_html = explorer.plan_view.value
    assert f"background:{FAIL}" in plan_html and f"background:{PASS}" in plan_html
    assert "Nowhere Diner" in plan_html and "invalid in the sandbox" in explorer.verdict_view.value


def test_explorer_injected_failure_pattern_matches_every_fault_message(world):
    tools = FaultInjector(ToolRegistry(world), FaultConfig(failure_rate=1.0, seed=3))
    messages = {tools.call("SearchCity", {"state": world.states[0]}).text for _ in range(60)}
    assert len(messages) >= 4
    assert all(ex._observation_kind("tool", m) == "injected failure" for m in messages)
    normal = ToolRegistry(world).call("SearchCity", {"state": world.states[0]}).text
    assert ex._observation_kind("tool", normal) == "ok"


def test_explorer_parse_transcript_marks_format_errors():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "plan a trip"},
        {"role": "assistant", "content": "no tags at all"},
        {"role": "tool", "content": "Format error: expected one <think>…</think> block. Reply again."},
        {
            "role": "assistant",
            "content": '<think>ok</think><tool_call>{"name": "SearchCity", "arguments": '
            '{"state": "X"}}</tool_call>',
        },
        {"role": "tool", "content": "Cities in X: A."},
    ]
    turns = ex.parse_transcript(messages)
    assert [t.kind for t in turns] == ["format_error", "tool_call"]
    assert turns[0].observation_kind == "format error" and turns[1].action == 'SearchCity {"state": "X"}'
    assert turns[1].think == "ok" and turns[1].observation_kind == "ok"


def test_explorer_display_bundle_has_widget_and_snapshot(rl_rollouts):
    explorer = TrajectoryExplorer(rl_rollouts)
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == explorer.html() and 'class="star-plan"' in bundle["text/html"]


def test_explorer_no_rollouts_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no rollouts to explore"):
        TrajectoryExplorer(tmp_path)
    with pytest.raises(FileNotFoundError, match="neither a rollouts.parquet"):
        TrajectoryExplorer(tmp_path / "missing")


def test_explorer_failure_types_cover_the_row():
    row = {
        "final_pass": False,
        "plan": None,
        "termination": "turn_limit",
        "malformed": True,
        "format_errors": 2,
        "faults": json.dumps({"failure": 1}),
        "cs/is_not_absent": False,
        "hard/valid_cost": None,
    }
    assert ex.failure_types(row) == {
        "all",
        "failed",
        "no plan",
        "turn limit",
        "malformed",
        "format errors",
        "tool faults",
        "cs/is_not_absent",
    }


def test_explorer_reads_compact_protocol_transcripts(world, expert_episodes):
    compact = pytest.importorskip("star_lib.agent.compact")
    queries = [ep.query for ep in expert_episodes[:3]]
    episodes = run_episodes(
        compact.CompactExpert(),
        queries,
        world,
        compact.compact_rollout_config(max_turns=30),
        FaultConfig(failure_rate=0.3, seed=0),
    )
    explorer = TrajectoryExplorer.from_episodes({"compact": episodes})
    for index, ep in enumerate(episodes):
        turns = explorer.transcript(index)
        assert len(turns) == ep.turns
        assert not [t for t in turns if t.kind == "format_error"]  # compact calls parse as calls
        shown = sum(t.observation_kind == "injected failure" for t in turns)
        replaced = sum(t.kind == "tool_call" and t.observation_kind == "prompt" for t in turns)
        # every injected failure is marked, except on a call whose result the context-limit prompt replaced
        assert ep.faults.get("failure", 0) - replaced <= shown <= ep.faults.get("failure", 0)


def test_explorer_verdict_table_and_check_pass_rates(world, expert_episodes):
    ep = expert_episodes[0]
    table = ex.verdict_table(ex.report_verdicts(ep.report))
    assert table.columns == ["group", "check", "verdict", "reason"]
    assert table.height == len(ep.report.commonsense) + len(ep.report.hard or {})
    broken = list(ep.plan)
    broken[0] = dataclasses.replace(broken[0], transportation="Teleport, from A to B")
    bad = dataclasses.replace(ep, plan=tuple(broken), report=evaluate_plan(ep.query, broken, world))
    rates = ex.check_pass_rates({"expert": [ep], "broken": [bad]})
    by = {(p, c): r for p, c, r in rates.iter_rows()}
    assert by[("expert", "final_pass")] == 1.0 and by[("broken", "final_pass")] == 0.0
    failed = {v.check for v in ex.report_verdicts(bad.report) if v.passed is False}
    assert failed and all(by[("broken", f"cs/{c}")] == 0.0 for c in failed if ("broken", f"cs/{c}") in by)


MALFORMED = "<think>I will search</think> SearchCity(state=Texas) and then plan"
"""A reply without the tool-call tags: the parser refuses it."""


def test_explorer_shows_the_raw_text_of_a_malformed_turn_beside_the_parser_error_once():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "plan a trip"},
        {"role": "assistant", "content": MALFORMED},
        {"role": "tool", "content": "Format error: expected one <tool_call> or <answer> block. Reply again."},
        {"role": "assistant", "content": "<think>x</think><answer>[]</answer>"},
    ]
    turns = ex.parse_transcript(messages)
    assert turns[0].kind == "format_error" and turns[0].content == MALFORMED
    view = ex.render_turn(turns, 0)
    assert "what the model wrote" in view and ex._esc(MALFORMED) in view  # the raw text, not only the error
    assert view.count(ex._esc(turns[0].action)) == 1  # the parser's error once (not again as observation)
    assert 'class="star-raw"' in view and 'class="star-parse-error"' in view
    assert "what the model wrote" not in ex.render_turn(turns, 1)


def test_explorer_stage_filter_opens_on_eval_episodes(rl_rollouts):
    explorer = TrajectoryExplorer(rl_rollouts)
    assert explorer.stages() == ["train", "eval"] and explorer.stage.options == ("all", "train", "eval")
    assert explorer.stage.value == "eval" and [v for _, v in explorer.episode.options] == [4, 5, 6, 7]
    explorer.select(stage="train")
    assert [v for _, v in explorer.episode.options] == [
        0,
        1,
        2,
        3,
    ] and "<b>stage</b> train" in explorer.html()
    explorer.select(stage="all")
    assert len(explorer.episode.options) == 8
    with pytest.raises(ValueError, match="stage 'teacher' is not one of"):
        explorer.select(stage="teacher")
