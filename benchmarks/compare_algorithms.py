"""GRPO vs DAPO vs ARPO at tiny scale: same start model, queries, seed and step budget.

Builds (unless ``--model`` is given) a tiny world, synthesized queries with reference plans, expert
trajectories and a briefly SFT-trained tiny model (``run_sft``, the ``star sft --preset tiny`` path), then
runs ``--steps`` RL steps of each algorithm through :func:`star_lib.train.rl.run_rl` (the trained model
writes the rollouts, the held-out split is evaluated greedily at the end). Each run keeps its
``metrics.parquet`` under ``<out>/<algorithm>/``; ``<out>/comparison.json`` holds the summary.

Per algorithm: mean training reward (first, last, mean), training success, held-out success and commonsense
micro score, wall time, mean step time, rollout model-tokens per second, episodes generated per step, and the
algorithm's own counters (DAPO refill rounds / dropped groups / filler rows; ARPO branches per group, top-ups,
entropy change). Numbers on 2 shared cores are contended; compare them relative to each other.

With ``--protocol compact --model runs/learning_signal/sft/model`` every algorithm starts from the SFT model
of ``star pipeline`` (compact protocol, easy 3- and 5-day trips) — a start model that already earns reward,
so the algorithms have a learning signal to differ on; GRPO and DAPO then sample with ``FastPolicy``.

Usage: ``python benchmarks/compare_algorithms.py [--steps 4] [--sft-steps 300] [--model DIR] [--out DIR]
[--protocol compact --days 3,5]``.
Last line: ``{"algorithms": {...}, "seed": …, "steps": …, …}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from star_lib.train.algorithms import ALGORITHMS  # noqa: E402  (after the sys.path line)

COUNTERS = (
    "dapo/refill_rounds",
    "dapo/dropped_groups",
    "dapo/kept_groups",
    "dapo/filler_rows",
    "arpo/branches_per_group",
    "arpo/topup_chains",
    "arpo/entropy_delta_mean",
    "arpo/branch_prob_mean",
)


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    parser.add_argument("--model", default=None, help="start every run from this model folder (skip SFT)")
    parser.add_argument("--world", default="synthetic:tiny:0", help="world spec for tools and evaluation")
    parser.add_argument("--queries", type=int, default=24, help="synthesized queries (train + held-out)")
    parser.add_argument("--sft-steps", type=int, default=300, help="SFT steps for the start model")
    parser.add_argument("--sft-time", type=float, default=180.0, help="SFT time budget in seconds")
    parser.add_argument("--steps", type=int, default=4, help="RL steps per algorithm")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per RL step")
    parser.add_argument("--group", type=int, default=4, help="episodes per prompt (G)")
    parser.add_argument("--max-turns", type=int, default=8, help="turns per episode")
    parser.add_argument("--max-new-tokens", type=int, default=128, help="tokens per turn")
    parser.add_argument("--eval-limit", type=int, default=8, help="held-out queries evaluated at the end")
    parser.add_argument("--seed", type=int, default=0, help="seed shared by all runs")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS), help="comma-separated subset")
    parser.add_argument(
        "--protocol",
        choices=("react", "compact"),
        default="react",
        help="episode protocol; compact needs --model from `star pipeline`",
    )
    parser.add_argument("--days", default=None, help="trip lengths of the queries, e.g. 3,5 (default: all)")
    parser.add_argument("--lr", type=float, default=None, help="RL learning rate (default: the preset's)")
    parser.add_argument("--temperature", type=float, default=None, help="rollout temperature")
    args = parser.parse_args()
    if args.protocol == "compact" and not args.model:
        parser.error("--protocol compact needs --model: the SFT model of `star pipeline` (its sft/model)")
    return args


def prepare_data(args: argparse.Namespace, root: Path) -> tuple[Path, Path]:
    """Synthesize queries (train / held-out JSONL) and write expert SFT trajectories."""
    from star_lib.agent.config import RolloutConfig
    from star_lib.agent.expert import ExpertPolicy
    from star_lib.agent.teacher import build_sft_dataset
    from star_lib.synth.config import SynthConfig
    from star_lib.synth.dataset import synthesize, write_dataset
    from star_lib.travel.world import World

    world = World.load(args.world)
    days = {"days_choices": tuple(int(d) for d in args.days.split(","))} if args.days else {}
    result = synthesize(
        world,
        SynthConfig(n=args.queries, mix="1:0:0", seed=args.seed, splits=(0.75, 0.0, 0.25), **days),
    )
    write_dataset(result, root / "data", parquet=False)
    build_sft_dataset(ExpertPolicy(), result.splits["train"], world, root / "teacher", RolloutConfig())
    # the teacher writes ``tools`` as a JSON string, ``run_sft`` reads a list (the pipeline bridges it too)
    rows = [json.loads(line) for line in (root / "teacher" / "train.jsonl").read_text().splitlines() if line]
    for row in rows:
        if isinstance(row.get("tools"), str):
            row["tools"] = json.loads(row["tools"])
    (root / "sft").mkdir(parents=True, exist_ok=True)
    (root / "sft" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root / "data" / "train.jsonl", root / "data" / "test.jsonl"


def prepare_model(args: argparse.Namespace, root: Path) -> tuple[Path, float]:
    """SFT a tiny model on the expert trajectories; return its folder and the SFT seconds."""
    from star_lib.train.sft import SFTRunConfig, run_sft

    start = time.monotonic()
    result = run_sft(
        SFTRunConfig(
            data=str(root / "sft" / "train.jsonl"),
            output_dir=str(root / "sft_run"),
            preset="tiny",
            max_steps=args.sft_steps,
            time_budget_s=args.sft_time,
            seed=args.seed,
            progress=False,
        )
    )
    return result.model_dir, time.monotonic() - start


def run_algorithm(
    args: argparse.Namespace, algorithm: str, data: Path, held_out: Path, model: Path, out: Path
):
    """One RL run; return its summary row."""
    import polars as pl

    from star_lib.train.rl import RLRunConfig, run_rl

    protocol: dict[str, Any] = {}
    if args.protocol == "compact":  # the recipe of `star pipeline`
        protocol = {
            "protocol": "compact",
            "rollout_overrides": {"on_format_error": "stop", "max_format_errors": 1},
            "fast_generation": True,  # all three on the KV-cached sampler (it gives ARPO its entropies)
            "token_ids": "sampled",
        }
    cfg = RLRunConfig(
        data=str(data),
        output_dir=str(out / algorithm),
        model_path=str(model),
        world=args.world,
        preset="tiny",
        algorithm=algorithm,
        num_generations=args.group,
        prompts_per_step=args.prompts,
        max_steps=args.steps,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        max_context_tokens=1024 if args.protocol == "compact" else 4096,
        learning_rate=args.lr,
        temperature=args.temperature,
        eval_data=str(held_out),
        eval_steps=args.steps,
        eval_limit=args.eval_limit,
        save_steps=max(args.steps, 1),
        rollouts_per_step=2,
        seed=args.seed,
        **protocol,
    )
    result = run_rl(cfg)
    frame = pl.read_parquet(result.metrics_path)
    train = frame.filter(pl.col("train/reward").is_not_null()).sort("step")
    evaluation = frame.filter(pl.col("stage") == "eval").sort("step")
    return summarise(algorithm, cfg, result, train, evaluation)


def _mean(frame: Any, key: str) -> float | None:
    if key not in frame.columns:
        return None
    values = [v for v in frame[key].to_list() if v is not None]
    return round(statistics.fmean(values), 4) if values else None


def summarise(algorithm: str, cfg: Any, result: Any, train: Any, evaluation: Any) -> dict[str, Any]:
    """Reduce one run's metrics to the comparison row."""
    rewards = train["train/reward"].to_list()
    rollout_s = _mean(train, "time/rollout_s") or 0.0
    tokens = (_mean(train, "env/model_tokens") or 0.0) * cfg.batch_size
    last_eval = evaluation.row(-1, named=True) if evaluation.height else {}
    row: dict[str, Any] = {
        "algorithm": algorithm,
        "steps": result.steps,
        "reward_first": round(rewards[0], 4) if rewards else None,
        "reward_last": round(rewards[-1], 4) if rewards else None,
        "reward_mean": round(statistics.fmean(rewards), 4) if rewards else None,
        "train_success": _mean(train, "env/success"),
        "format_error_rate": _mean(train, "env/format_error_rate"),
        "tool_calls": _mean(train, "env/tool_calls"),
        "frac_reward_zero_std": _mean(train, "train/frac_reward_zero_std"),
        "eval_success": last_eval.get("eval/success"),
        "eval_cs_micro": last_eval.get("eval/cs_micro"),
        "seconds": round(result.seconds, 2),
        "step_s": _mean(train, "time/step_s"),
        "rollout_model_tokens_per_s": round(tokens / rollout_s, 1) if rollout_s else None,
        "metrics": str(result.metrics_path),
    }
    for key in COUNTERS:
        if key.startswith(algorithm + "/"):
            row[key] = _mean(train, key)
    return row


def main() -> None:
    """Prepare the start model once, run each algorithm with the same budget, print the JSON summary."""
    args = parse_args()
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    unknown = sorted(set(algorithms) - set(ALGORITHMS))
    if unknown:
        raise SystemExit(f"unknown algorithms {unknown}; choose from {ALGORITHMS}")
    root = Path(args.out or tempfile.mkdtemp(prefix="compare_algorithms_"))
    root.mkdir(parents=True, exist_ok=True)
    data, held_out = prepare_data(args, root)
    sft_seconds = 0.0
    model = Path(args.model) if args.model else None
    if model is None:
        model, sft_seconds = prepare_model(args, root)
    rows = {}
    for algorithm in algorithms:
        rows[algorithm] = run_algorithm(args, algorithm, data, held_out, model, root)
        print(json.dumps(rows[algorithm]), flush=True)
    summary = {
        "algorithms": rows,
        "seed": args.seed,
        "steps": args.steps,
        "batch": f"{args.prompts} prompts x G={args.group}",
        "start_model": str(model),
        "protocol": args.protocol,
        "sft_seconds": round(sft_seconds, 1),
        "out": str(root),
    }
    (root / "comparison.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
