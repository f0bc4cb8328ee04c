"""GRPO steps per minute of a trained tiny run, old sampler vs new, measured side by side in one process.

An RL step is a rollout (16 multi-turn episodes decoded by ``star_lib.agent.fastgen.FastPolicy`` at the
recipe's temperature, tools and evaluator included) plus the update (forward + backward of those episodes).
This benchmark changes only the rollout, so it times the rollout and reads the update from the run itself:

1. Setup (not timed): the RL stage's ``config.yaml`` of a finished run (``--rl DIR``, a
   ``runs/_stages/rl/<key>`` folder): its SFT model, world, RL prompts and episode settings.
2. ``--rounds`` rounds; each rolls out the same batch (``prompts_per_step`` prompts × ``num_generations``,
   the same seed) once with the **old** sampler — ``torch.multinomial`` over the vocabulary and rotary
   cos/sin computed at every call, as ``FastPolicy`` did before the inverse-CDF sampler and the rotary
   table — and once with the **new** one (the library's code), alternating which goes first. Episodes
   differ between the two (another way of drawing from the same distribution), so each round's batches
   are compared by their seconds per sampled token as well as by seconds per rollout.
3. The update's seconds per step: the median of ``train/step_time - time/rollout_s`` over the run's own
   training log (the same machine only if the run was made here; ``--update-s`` overrides it).

Usage: ``python benchmarks/bench_rl_rollout.py --rl runs/_stages/rl/<key> [--rounds 4] [--threads 2]``.
Last line: ``{"rollout_s_old": …, "rollout_s_new": …, "update_s": …, "steps_per_min_old": …,
"steps_per_min_new": …, "ratio": …, …}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from star_lib.agent import fastgen  # noqa: E402

LIBRARY_SAMPLE = fastgen.sample_tokens
"""The library's sampler (``old_path`` swaps ``fastgen.sample_tokens`` out)."""


def legacy_sample(logits: Any, sampling: Any, generator: Any = None) -> tuple[Any, Any]:
    """The sampler before the inverse-CDF one: ``torch.multinomial`` (an exponential per vocabulary entry)."""
    if sampling.temperature == 0:
        return LIBRARY_SAMPLE(logits, sampling, generator)  # greedy: unchanged
    logp = fastgen.sampling_logprobs(logits, sampling)
    token = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return token, logp.gather(-1, token.unsqueeze(-1)).squeeze(-1)


def legacy_rope(self: Any, positions: Any, span: int) -> tuple[Any, Any]:
    """Rotary cos/sin computed at every call, as before the rotary table."""
    freqs = positions.unsqueeze(-1).to(self.inv_freq.dtype) * self.inv_freq  # (B, N, D/2)
    emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)  # (B, 1, N, D)
    return emb.cos() * self.rope_scale, emb.sin() * self.rope_scale


@contextlib.contextmanager
def old_path() -> Iterator[None]:
    """Run ``FastPolicy`` with the old sampler and rotary code."""
    sample, rope = fastgen.sample_tokens, fastgen.FastQwen2._rope
    fastgen.sample_tokens, fastgen.FastQwen2._rope = legacy_sample, legacy_rope
    try:
        yield
    finally:
        fastgen.sample_tokens, fastgen.FastQwen2._rope = sample, rope


def load_run(rl_dir: Path) -> tuple[Any, Any, Any, Any, list[Any]]:
    """The run's RL config, SFT model, tokenizer, world and RL prompts."""
    from star_lib.train.models import load_model_and_tokenizer
    from star_lib.train.rl import RLRunConfig
    from star_lib.train.rollouts import read_queries
    from star_lib.travel.worldset import load_worlds

    cfg = RLRunConfig.from_yaml(rl_dir / "config.yaml")
    model, tokenizer = load_model_and_tokenizer(cfg.preset, path=cfg.model_path)
    model.eval()
    return cfg, model, tokenizer, load_worlds(cfg.world), read_queries(cfg.data)


def rollout(cfg: Any, model: Any, tokenizer: Any, world: Any, prompts: list[Any], call: int) -> dict:
    """One step's rollout of ``prompts`` (each ``num_generations`` times): seconds and sampled tokens."""
    from star_lib.agent.policies import SamplingParams
    from star_lib.agent.rollout import run_episodes

    batch = [q for q in prompts for _ in range(cfg.group_size)]
    groups = [i // cfg.group_size for i in range(len(batch))]
    sampling = SamplingParams(temperature=float(cfg._pick("temperature")), top_p=cfg.top_p, seed=call)
    policy = fastgen.FastPolicy(model, tokenizer, sampling)
    start = time.perf_counter()
    run_episodes(
        policy,
        batch,
        world,
        cfg.rollout_config(seed_offset=call),
        cfg.faults,
        group_ids=groups,
        tokenizer=tokenizer,
    )
    return {"s": time.perf_counter() - start, "tokens": policy.stats.new_tokens}


def update_seconds(rl_dir: Path) -> float:
    """Median update time per step of the run: its step time minus its rollout time."""
    import polars as pl

    log = pl.read_parquet(rl_dir / "train_log.parquet").drop_nulls(["train/step_time", "time/rollout_s"])
    return float((log["train/step_time"] - log["time/rollout_s"]).median())


def main() -> None:
    """Parse arguments, alternate old and new rollouts, print the JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rl", required=True, help="a finished RL stage folder (runs/_stages/rl/<key>)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--update-s", type=float, default=None, help="update seconds per step (default: the run's)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rl_dir = Path(args.rl)
    cfg, model, tokenizer, world, queries = load_run(rl_dir)
    results: dict[str, list[dict]] = {"old": [], "new": []}
    rollout(cfg, model, tokenizer, world, queries[: cfg.prompts_per_step], 0)  # warm-up, not counted
    for r in range(args.rounds):
        prompts = queries[r * cfg.prompts_per_step : (r + 1) * cfg.prompts_per_step]
        for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
            with old_path() if name == "old" else contextlib.nullcontext():
                row = rollout(cfg, model, tokenizer, world, prompts, r + 1)
            results[name].append(row)
            print(f"round {r}: {name:3s} {row['s']:6.2f} s  {row['tokens']:5d} sampled tokens")
    update = args.update_s if args.update_s is not None else update_seconds(rl_dir)
    summary: dict[str, Any] = {"threads": args.threads, "rounds": args.rounds, "update_s": round(update, 3)}
    for name, rows in results.items():
        seconds = statistics.median(row["s"] for row in rows)
        per_token = statistics.median(row["s"] / max(row["tokens"], 1) for row in rows)
        summary[f"rollout_s_{name}"] = round(seconds, 3)
        summary[f"ms_per_token_{name}"] = round(per_token * 1e3, 3)
        summary[f"steps_per_min_{name}"] = round(60 / (seconds + update), 2)
    summary["rollout_ratio"] = round(summary["rollout_s_old"] / summary["rollout_s_new"], 3)
    summary["ratio"] = round(summary["steps_per_min_new"] / summary["steps_per_min_old"], 3)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
