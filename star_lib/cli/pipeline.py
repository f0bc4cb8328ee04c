"""``star pipeline --preset tiny``: world → synth → expert SFT data → SFT → GRPO → evaluation, on CPU.

Example::

    star pipeline --preset tiny --out runs/learning_signal
    star pipeline --preset tiny --out /tmp/quick --train-worlds 100 --sft-steps 60 --rl-steps 10

Prints, for the untrained, SFT and GRPO models on held-out easy queries from unseen worlds: final pass,
commonsense micro, mean SUM reward (± standard error), the share of valid tool calls and of parseable plans;
then the curve of mean SUM reward over RL steps. The last line is a JSON summary. Everything is also written
to ``<out>/summary.json`` (see :mod:`star_lib.train.pipeline`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("--train-worlds", "train_worlds", int, "worlds behind the SFT data"),
    ("--queries-per-world", "queries_per_world", int, "easy queries per training/RL world"),
    ("--rl-worlds", "rl_worlds", int, "worlds behind the RL prompts"),
    ("--eval-queries", "eval_queries", int, "held-out queries (unseen worlds)"),
    ("--warmup-steps", "warmup_steps", int, "copy warm-up steps (0 skips it)"),
    ("--warmup-seconds", "warmup_s", float, "copy warm-up time budget instead of steps"),
    ("--sft-steps", "sft_steps", int, "SFT steps"),
    ("--sft-seconds", "sft_s", float, "SFT time budget instead of steps"),
    ("--sft-lr", "sft_lr", float, "peak SFT learning rate"),
    ("--rl-steps", "rl_steps", int, "GRPO steps"),
    ("--rl-seconds", "rl_s", float, "GRPO time budget (stops at it or at the steps)"),
    ("--rl-lr", "rl_lr", float, "GRPO learning rate"),
    ("--rl-group", "rl_group", int, "GRPO group size G"),
    ("--rl-prompts", "rl_prompts_per_step", int, "prompts per GRPO step"),
    ("--threads", "threads", int, "torch threads (1 is fastest on a shared 2-core machine)"),
)


def register(subparsers: Any) -> None:
    """Add ``star pipeline``."""
    parser = subparsers.add_parser(
        "pipeline",
        help="the learning signal end to end at tiny scale (world → synth → SFT → GRPO → eval)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--preset", default="tiny", choices=["tiny"], help="model preset (tiny only)")
    parser.add_argument("--out", default="runs/learning_signal", help="run folder")
    parser.add_argument("--seed", type=int, default=0, help="base seed (worlds, data, model, sampling)")
    for flag, field, kind, text in _FLAGS:
        parser.add_argument(
            flag, dest=field, type=kind, default=None, help=f"{text} (default: PipelineConfig's)"
        )
    parser.add_argument("--progress", action="store_true", help="show the trainers' progress bars")
    parser.set_defaults(func=run_pipeline_command)


def config_from_args(args: argparse.Namespace) -> Any:
    """Build the :class:`~star_lib.train.pipeline.PipelineConfig` of the parsed flags."""
    from star_lib.train.pipeline import PipelineConfig

    values: dict[str, Any] = {"out_dir": args.out, "preset": args.preset, "seed": args.seed}
    values.update(
        {field: getattr(args, field) for _, field, _, _ in _FLAGS if getattr(args, field) is not None}
    )
    values["progress"] = bool(args.progress)
    return PipelineConfig(**values)


def run_pipeline_command(args: argparse.Namespace) -> int:
    """Run the pipeline, print the report and the JSON summary line."""
    from star_lib.train.pipeline import print_report, run_pipeline

    result = run_pipeline(config_from_args(args))
    print_report(result)
    print(json.dumps(result.final_json()))
    return 0
