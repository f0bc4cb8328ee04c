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


def fake_checkpoint(
    run: Path, step: int, kind: str = "rl", *, world_size: int = 1, deepspeed: bool = False
) -> Path:
    """Write ``<run>/checkpoints/checkpoint-<step>`` as transformers and our callbacks do (tiny files)."""
    import torch
    from safetensors.torch import save_file

    from star_lib.train.resume import COUNTERS_FILE, STATE_FILE

    run.mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(f"{kind}:\n  output_dir: {run}\n")  # what run_sft / run_rl write first
    folder = run / "checkpoints" / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    save_file({"w": torch.ones(64, 64)}, str(folder / "model.safetensors"))
    if deepspeed:  # the engine's own folder holds the optimizer, one shard per rank
        tag = folder / f"global_step{step}"
        tag.mkdir()
        torch.save({"module": 1}, tag / "mp_rank_00_model_states.pt")
        for rank in range(world_size):
            torch.save({"m": torch.ones(64)}, tag / f"bf16_zero_pp_rank_{rank}_mp_rank_00_optim_states.pt")
        (folder / "latest").write_text(tag.name)
    else:
        torch.save({"state": {0: {"exp_avg": torch.ones(64, 64)}}}, folder / "optimizer.pt")
        torch.save({"last_epoch": step}, folder / "scheduler.pt")
    for rank in range(world_size):
        name = "rng_state.pth" if world_size == 1 else f"rng_state_{rank}.pth"
        torch.save({"cpu": torch.random.get_rng_state()}, folder / name)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if kind == "rl":
        (folder / STATE_FILE).write_text(json.dumps({"calls": step}))
    counters = {"train_tokens": 0, "loss_sum": 0.0, "world_size": world_size}
    (folder / COUNTERS_FILE).write_text(json.dumps(counters))
    return folder


def cut_short(file: Path) -> None:
    """Truncate ``file`` to half its length, as a kill during its write leaves it."""
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


def test_resume_picks_the_last_complete_checkpoint(tmp_path):
    from star_lib.train.resume import STATE_FILE, find_checkpoint

    for step in (2, 10, 11):
        fake_checkpoint(tmp_path, step)
    (tmp_path / "checkpoints" / "checkpoint-11" / STATE_FILE).unlink()  # killed between the two writes
    assert find_checkpoint(tmp_path) == tmp_path / "checkpoints" / "checkpoint-10"  # numeric order, complete
    assert find_checkpoint(tmp_path / "checkpoints") == tmp_path / "checkpoints" / "checkpoint-10"
    explicit = tmp_path / "checkpoints" / "checkpoint-2"
    assert find_checkpoint(explicit) == explicit  # a complete checkpoint named explicitly wins


def test_resume_never_falls_back_to_an_incomplete_only_checkpoint(tmp_path):
    """A job preempted while saving its only checkpoint starts afresh, not loading it on every requeue."""
    from star_lib.train.resume import COUNTERS_FILE, STATE_FILE, find_checkpoint, resume_point

    folder = fake_checkpoint(tmp_path, 5)
    (folder / STATE_FILE).unlink()  # killed after trainer_state.json, before our callbacks
    (folder / COUNTERS_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=r"no checkpoint under .* is complete \(checkpoint-5: star_"):
        find_checkpoint(tmp_path)  # an explicit resume (star rl --resume) is told why
    assert resume_point(tmp_path) is None  # the training stage starts from scratch
    with pytest.raises(FileNotFoundError, match="checkpoint-5 is not a complete checkpoint"):
        find_checkpoint(folder)  # named explicitly: refused, not loaded
    (tmp_path / "checkpoints" / "checkpoint-3").mkdir()  # killed before it wrote anything
    assert resume_point(tmp_path) is None


def test_resume_complete_differs_for_sft_and_rl(tmp_path):
    """SFT checkpoints carry no star_state.json; star_counters.json (both kinds' last write) marks done."""
    from star_lib.train.resume import COUNTERS_FILE, STATE_FILE, find_checkpoint

    sft = tmp_path / "sft"
    for step in (2, 4):
        fake_checkpoint(sft, step, "sft")
    newest = sft / "checkpoints" / "checkpoint-4"
    assert not (newest / STATE_FILE).exists() and find_checkpoint(sft) == newest
    (newest / COUNTERS_FILE).unlink()  # killed after trainer_state.json, before the counters callback
    assert find_checkpoint(sft) == sft / "checkpoints" / "checkpoint-2"

    rl = tmp_path / "rl"
    fake_checkpoint(rl, 1, "rl")
    folder = fake_checkpoint(rl, 3, "rl")
    (folder / STATE_FILE).unlink()  # an RL checkpoint needs its rollout RNG streams even with the counters
    assert find_checkpoint(rl) == rl / "checkpoints" / "checkpoint-1"
    from star_lib.train.resume import checkpoint_problem

    assert "star_state.json" in checkpoint_problem(folder)
    assert checkpoint_problem(folder, kind="sft") is None  # the caller may say which kind it resumes
    with pytest.raises(ValueError, match="kind"):
        checkpoint_problem(folder, kind="dpo")


DAMAGES = [
    # (what a kill while saving leaves, what checkpoint_problem then says)
    (lambda c: cut_short(c / "model.safetensors"), "model.safetensors is cut short"),
    (lambda c: (c / "model.safetensors").unlink(), "no model weights"),
    (lambda c: cut_short(c / "optimizer.pt"), "optimizer.pt is not a whole torch.save file"),
    (lambda c: (c / "optimizer.pt").unlink(), "optimizer.pt is missing"),
    (lambda c: (c / "scheduler.pt").unlink(), "scheduler.pt is missing"),
    (lambda c: cut_short(c / "rng_state_1.pth"), "rng_state_1.pth is not a whole"),
    (lambda c: (c / "rng_state_1.pth").unlink(), "rng_state_1.pth missing"),
    (lambda c: cut_short(c / "trainer_state.json"), "trainer_state.json is not whole JSON"),
    (lambda c: cut_short(c / "star_counters.json"), "star_counters.json is not whole JSON"),
]


@pytest.mark.parametrize(("damage", "reason"), DAMAGES, ids=[reason for _, reason in DAMAGES])
def test_resume_skips_a_checkpoint_with_missing_or_cut_short_files(tmp_path, damage, reason):
    from star_lib.train.resume import find_checkpoint

    fake_checkpoint(tmp_path, 1, world_size=2)
    newest = fake_checkpoint(tmp_path, 2, world_size=2)
    assert find_checkpoint(tmp_path) == newest
    damage(newest)
    assert find_checkpoint(tmp_path) == tmp_path / "checkpoints" / "checkpoint-1"
    from star_lib.train.resume import checkpoint_problem

    assert reason in checkpoint_problem(newest)


def test_resume_checks_sharded_and_deepspeed_checkpoints(tmp_path):
    import shutil

    from star_lib.train.resume import find_checkpoint

    sharded = tmp_path / "sharded"
    fake_checkpoint(sharded, 1)
    folder = fake_checkpoint(sharded, 2)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert find_checkpoint(sharded).name == "checkpoint-1"  # the second shard never made it
    shutil.copy(folder / "model-00001-of-00002.safetensors", folder / "model-00002-of-00002.safetensors")
    assert find_checkpoint(sharded) == folder

    ds = tmp_path / "ds"
    fake_checkpoint(ds, 5, world_size=2, deepspeed=True)
    folder = fake_checkpoint(ds, 7, world_size=2, deepspeed=True)
    assert find_checkpoint(ds) == folder  # no optimizer.pt / scheduler.pt: DeepSpeed's folder has them
    (folder / "global_step7" / "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt").unlink()
    assert find_checkpoint(ds).name == "checkpoint-5"
    from star_lib.train.resume import checkpoint_problem

    assert "1 of 2 optimizer shards" in checkpoint_problem(folder)
    (folder / "latest").write_text("global_step9")
    assert "global_step9 folder is missing" in checkpoint_problem(folder)


def test_counters_callback_records_the_world_size_atomically(tmp_path):
    from types import SimpleNamespace

    from star_lib.train.resume import COUNTERS_FILE, TrainerCountersCallback

    trainer = SimpleNamespace(_total_train_tokens=12, _total_loss_scalar=1.5, _tr_loss=None)
    args = SimpleNamespace(output_dir=str(tmp_path), should_save=True, world_size=4)
    TrainerCountersCallback(trainer).on_save(args, SimpleNamespace(global_step=3), None)
    folder = tmp_path / "checkpoint-3"
    assert json.loads((folder / COUNTERS_FILE).read_text()) == {
        "train_tokens": 12,
        "loss_sum": 1.5,
        "world_size": 4,  # a complete checkpoint holds rng_state_0.pth … rng_state_3.pth
    }
    assert [p.name for p in folder.iterdir()] == [COUNTERS_FILE]  # no temporary file left behind
