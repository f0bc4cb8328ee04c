"""Episode throughput of the lockstep runner with the tiny preset model on CPU, and where the time goes.

What is measured (one process, 1 torch thread per core as torch picks):

1. Setup (not timed): a ``small`` synthetic world, ``--episodes`` synthesized queries (4:3:3) with
   reference plans, a tiny BPE tokenizer trained on expert trajectories of *other* queries
   (``star_lib.train.tokenizer``) and the ``tiny`` preset architecture with random weights
   (``star_lib.train.models.build_tiny_model``; 16,384 positions instead of the preset's 4,096, which
   7-day trajectories exceed).
2. ``shadow`` run — the headline numbers. A random model writes no valid turn, so on its own it never
   exercises tools or evaluation. Here each lockstep turn the tiny model generates exactly as many tokens
   as the expert's next turn (``min_new_tokens = max_new_tokens``; a batch runs as long as its longest
   turn), and the environment then receives the expert's text: real tool calls, real plan parsing and
   strict evaluation, at the generation cost of a model writing turns of realistic length.
3. ``model`` run — the tiny model plays by itself (``--model-turns`` turns of ``--model-tokens`` tokens).

``env_share`` = time inside the environment (turn parsing, tools, plan parsing, evaluation, reward) /
wall time of ``run_episodes``; ``tokenize_share`` = chat-template rendering + segment tokenisation;
``generation_share`` = time inside ``policy.generate``. Target: ``env_share`` <= 2 %.

Usage: ``python benchmarks/bench_rollout.py [--episodes 8] [--seed 0]``.
Last line: ``{"episodes_per_s": …, "env_share": …, …}`` (shadow run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from star_lib.agent import (  # noqa: E402
    ExpertPolicy,
    Generation,
    RolloutConfig,
    RolloutStats,
    TransformersPolicy,
    run_episodes,
)
from star_lib.agent.policies import SamplingParams  # noqa: E402


class ShadowPolicy:
    """Spend the tiny model's generation time of the expert's turns; hand the expert's text on."""

    def __init__(self, model_policy: TransformersPolicy, expert: ExpertPolicy) -> None:
        self.model = model_policy
        self.expert = expert
        self.tokenizer = model_policy.tokenizer

    def generate(self, conversations: list[Any], *, max_new_tokens: int) -> list[Generation]:
        turns = self.expert.generate(conversations)
        lengths = [len(self.tokenizer.encode(t.text, add_special_tokens=False)) + 1 for t in turns]
        n = min(max(lengths), max_new_tokens)
        self.model.generate(conversations, max_new_tokens=n, min_new_tokens=n)
        return [Generation(text=t.text) for t in turns]


def setup(episodes: int, seed: int) -> tuple[Any, list[Any], Any, Any]:
    """World, queries, tokenizer and tiny model (untimed)."""
    from dataclasses import replace

    from star_lib.synth import SynthConfig, synthesize
    from star_lib.train.models import PRESETS, build_tiny_model
    from star_lib.train.tokenizer import train_tokenizer
    from star_lib.travel.world import World

    world = World.synthetic(seed=seed, scale="small")
    records = synthesize(world, SynthConfig(n=episodes + 32, seed=seed)).records
    corpus_eps = run_episodes(ExpertPolicy(), records[episodes:], world, RolloutConfig(reward="none"))
    texts = [m["content"] for ep in corpus_eps for m in ep.messages]
    texts += [json.dumps(ep.tool_schemas) for ep in corpus_eps[:1]]
    tokenizer = train_tokenizer(texts)
    # the tiny preset's shape, with room for 7-day trajectories (they exceed its 4,096 positions)
    arch = replace(PRESETS["tiny"].architecture, max_position_embeddings=16_384)
    model = build_tiny_model(tokenizer, arch, seed=seed).eval()
    return world, records[:episodes], tokenizer, model


def measure(policy: Any, queries: list[Any], world: Any, cfg: RolloutConfig) -> dict[str, Any]:
    """Run the episodes once and report throughput and time shares."""
    stats = RolloutStats()
    episodes = run_episodes(policy, queries, world, cfg, stats=stats)
    total = stats.total_s
    return {
        "episodes": len(episodes),
        "episodes_per_s": len(episodes) / total,
        "env_share": stats.env_s / total,
        "tokenize_share": stats.tokenize_s / total,
        "generation_share": stats.generation_s / total,
        "wall_s": total,
        "turns": stats.turns,
        "model_tokens": sum(ep.model_tokens for ep in episodes),
        "final_pass": sum(bool(ep.report and ep.report.final_pass) for ep in episodes) / len(episodes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8, help="episodes per run (one lockstep batch)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model-turns", type=int, default=4, help="turn limit of the model-only run")
    parser.add_argument("--model-tokens", type=int, default=64, help="tokens per turn in the model-only run")
    args = parser.parse_args()

    t0 = time.perf_counter()
    world, queries, tokenizer, model = setup(args.episodes, args.seed)
    print(
        f"setup {time.perf_counter() - t0:.1f}s: {len(queries)} queries, vocab {len(tokenizer)}",
        file=sys.stderr,
    )
    sampling = SamplingParams(temperature=1.0, seed=args.seed)
    model_policy = TransformersPolicy(model, tokenizer, sampling, batch_size=args.episodes)

    shadow_cfg = RolloutConfig(max_turns=30, max_new_tokens=2048, max_context_tokens=32_768)
    shadow = measure(ShadowPolicy(model_policy, ExpertPolicy()), queries, world, shadow_cfg)
    print(f"shadow: {json.dumps(shadow)}", file=sys.stderr)

    model_cfg = RolloutConfig(
        max_turns=args.model_turns, max_new_tokens=args.model_tokens, max_format_errors=0
    )
    alone = measure(model_policy, queries, world, model_cfg)
    print(f"model:  {json.dumps(alone)}", file=sys.stderr)

    result = {
        "episodes_per_s": round(shadow["episodes_per_s"], 4),
        "env_share": round(shadow["env_share"], 5),
        "tokenize_share": round(shadow["tokenize_share"], 5),
        "generation_share": round(shadow["generation_share"], 4),
        "model_tokens_per_episode": round(shadow["model_tokens"] / shadow["episodes"], 1),
        "expert_final_pass": shadow["final_pass"],
        "model_only_episodes_per_s": round(alone["episodes_per_s"], 4),
        "model_only_env_share": round(alone["env_share"], 5),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
