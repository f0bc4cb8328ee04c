from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rl_support import GARBAGE, WORLD, rl_config  # noqa: E402

VOLATILE = ("time", "time/", "train/step_time", "epoch")
"""Metric keys that measure the clock (or restart) rather than the run."""


class CoinPolicy:
    """Each episode flips torch's global generator once: expert (reward 1) or garbage (reward 0).

    The episodes therefore depend on every stream a resumed run must restore: the global torch RNG
    (saved by the trainer), the data order (which query), the fault seeds (our rollout counter) and,
    for ARPO, the branching draws and entropies.
    """

    tokenizer = None

    def __init__(self) -> None:
        from star_lib.agent.expert import ExpertPolicy

        self.expert, self.kinds = ExpertPolicy(), {}

    def generate(self, conversations, *, max_new_tokens):
        import torch

        from star_lib.train.arpo import EntropyGeneration

        out = []
        for conv in conversations:
            turn = sum(m["role"] == "assistant" for m in conv.messages)
            if conv.key not in self.kinds:
                self.kinds[conv.key] = "expert" if torch.rand(()).item() < 0.6 else "garbage"
            if self.kinds[conv.key] == "garbage":
                text = GARBAGE
            else:
                text = self.expert.next_turn(
                    conv.query, [m for m in conv.messages if GARBAGE not in m["content"]]
                )
            entropy = 0.2 if turn == 0 else float(torch.rand(()).item())
            out.append(EntropyGeneration(text=text, entropies=[entropy] * 10))
        return out


class StopAt:
    """Stop training after step ``k`` (the checkpoint of step ``k`` is still written)."""

    def __init__(self, k: int) -> None:
        from transformers import TrainerCallback

        class _Stop(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step >= k:
                    control.should_training_stop = True

        self.callback = _Stop()


def stable_rows(path: Path) -> list[dict]:
    """The per-step training rows of a metrics file, without clock readings."""
    import polars as pl

    frame = pl.read_parquet(path).filter(pl.col("train/reward").is_not_null()).sort("step")
    keep = [c for c in frame.columns if not c.startswith(VOLATILE)]
    return frame.select(keep).to_dicts()


def weights(model_dir: Path) -> list:
    from star_lib.train.models import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer("tiny", path=model_dir)
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("algorithm", ["grpo", "dapo", "arpo"])
def test_resume_after_a_stop_equals_an_uninterrupted_run(rl_dir, tmp_path, algorithm):
    import numpy as np
    import torch

    from star_lib.train.rl import run_rl

    kwargs = dict(
        algorithm=algorithm,
        max_steps=3,
        save_steps=1,
        learning_rate=1e-2,
        faults={"failure_rate": 0.3, "sleep": False},
        num_generations=4 if algorithm == "arpo" else 2,
        seed=7,
    )
    policy = lambda t, c: CoinPolicy()  # noqa: E731
    whole = run_rl(rl_config(rl_dir, tmp_path / "whole", **kwargs), policy_factory=policy)
    cfg = rl_config(rl_dir, tmp_path / "split", **kwargs)
    first = run_rl(cfg, policy_factory=policy, callbacks=[StopAt(2).callback])
    assert first.steps == 2
    torch.manual_seed(12345)  # the stopped process's generators moved on: resume must restore them
    np.random.seed(12345)
    random.seed(12345)
    resumed = run_rl(cfg, policy_factory=policy, resume=True)
    assert resumed.steps == 3
    expected, got = stable_rows(whole.metrics_path), stable_rows(resumed.metrics_path)
    assert [r["step"] for r in got] == [1, 2, 3]
    assert got == expected
    assert len({r["train/reward"] for r in got}) > 1 or len({r["env/faults"] for r in got}) > 1  # not trivial
    assert all(
        torch.equal(a, b) for a, b in zip(weights(whole.model_dir), weights(resumed.model_dir), strict=True)
    )
    assert not all(
        torch.equal(a, b) for a, b in zip(weights(whole.model_dir), weights(rl_dir / "model"), strict=True)
    )


def test_resume_from_a_killed_run_drops_rows_after_the_checkpoint(rl_dir, tmp_path):
    import polars as pl

    from star_lib.train.resume import STATE_FILE, checkpoint_step, find_checkpoint, load_rollout_state
    from star_lib.train.rl import run_rl

    cfg = rl_config(rl_dir, tmp_path, max_steps=2, save_steps=1, save_total_limit=None)
    run_rl(cfg, policy_factory=lambda t, c: CoinPolicy())
    run = Path(cfg.output_dir)
    checkpoints = run / "checkpoints"
    assert json.loads((checkpoints / "checkpoint-1" / STATE_FILE).read_text()) == {"calls": 1}
    # simulate a kill right after step 1's checkpoint: step 2's checkpoint never made it to disk
    import shutil

    shutil.rmtree(checkpoints / "checkpoint-2")
    assert (
        find_checkpoint(run) == checkpoints / "checkpoint-1"
        and checkpoint_step(checkpoints / "checkpoint-1") == 1
    )
    assert load_rollout_state(checkpoints / "checkpoint-1").calls == 1
    before = stable_rows(run / "metrics.parquet")
    resumed = run_rl(cfg, policy_factory=lambda t, c: CoinPolicy(), resume=True)
    frame = pl.read_parquet(resumed.metrics_path)
    assert frame.filter(pl.col("train/reward").is_not_null())["step"].to_list() == [
        1,
        2,
    ]  # no duplicate step 2
    assert frame.filter(pl.col("summary/runtime").is_not_null()).height == 1  # only the resumed run's summary
    assert stable_rows(resumed.metrics_path)[0] == before[0]
    rollouts = pl.read_parquet(resumed.rollouts_path)
    assert rollouts.group_by("step").len().sort("step")["len"].to_list() == [2, 2]


def test_resume_without_a_checkpoint_says_what_to_do(tmp_path):
    from star_lib.train.resume import find_checkpoint, load_rollout_state, trim_run_logs

    with pytest.raises(FileNotFoundError, match="save_steps"):
        find_checkpoint(tmp_path)
    (tmp_path / "checkpoint-3").mkdir()
    (tmp_path / "checkpoint-3" / "trainer_state.json").write_text('{"global_step": 3}')
    with pytest.raises(FileNotFoundError, match="star_state.json"):
        load_rollout_state(tmp_path / "checkpoint-3")
    assert trim_run_logs(tmp_path, 3) == {}


def test_resume_cli_flag_continues_the_run(rl_dir, tmp_path, capsys):
    import yaml

    from star_lib.cli import main

    cfg = {
        "data": str(rl_dir / "data" / "train.jsonl"),
        "output_dir": str(tmp_path / "run"),
        "model_path": str(rl_dir / "model"),
        "world": WORLD,
        "num_generations": 2,
        "prompts_per_step": 1,
        "max_turns": 2,
        "max_new_tokens": 16,
        "max_context_tokens": 4000,
        "save_steps": 1,
        "max_steps": 1,
    }
    path = tmp_path / "rl.yaml"
    path.write_text(yaml.safe_dump({"rl": cfg}))
    assert main(["rl", "--config", str(path), "--algorithm", "dapo"]) == 0
    assert main(["rl", "--config", str(path), "--algorithm", "dapo", "--max-steps", "2", "--resume"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 2 and summary["algorithm"] == "dapo"
    assert (tmp_path / "run" / "checkpoints" / "checkpoint-2" / "star_state.json").is_file()


def test_resume_picks_the_last_complete_checkpoint(tmp_path):
    from star_lib.train.resume import STATE_FILE, find_checkpoint

    for step, complete in ((2, True), (10, True), (11, False)):
        folder = tmp_path / "checkpoints" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        if complete:
            (folder / STATE_FILE).write_text('{"calls": 1}')
    assert find_checkpoint(tmp_path) == tmp_path / "checkpoints" / "checkpoint-10"  # numeric order, complete
    assert (
        find_checkpoint(tmp_path / "checkpoints" / "checkpoint-11").name == "checkpoint-11"
    )  # explicit wins
