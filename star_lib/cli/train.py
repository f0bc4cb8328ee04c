"""``star sft`` (SFT cold start, TRL SFTTrainer) and ``star rl`` (multi-turn GRPO / DAPO / ARPO on TRL).

Example::

    star sft --data data/sft/ --preset tiny --out runs/tiny/sft --copy-warmup-steps 1500 --time-budget 600
    star sft --data data/sft/ --preset qwen2.5-1.5b --model /models/Qwen2.5-1.5B-Instruct --out runs/q15/sft
    star rl --config configs/rl_tiny.yaml --max-steps 40
    star rl --config configs/rl_tiny.yaml --algorithm dapo --out runs/tiny/dapo
    star rl --config configs/rl_tiny.yaml --out runs/tiny/dapo --resume   # from the last checkpoint

``star sft`` flags left out take the preset's values (``star_lib.train.models.PRESETS``). ``star rl`` reads
an :class:`star_lib.train.rl.RLRunConfig` from YAML (fields at top level or under ``rl:``); its flags
override the file. Run folders receive ``config.yaml``, ``checkpoints/``, ``model/`` and ``metrics.parquet``
(and ``rollouts.parquet`` for RL); the last line printed is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from star_lib.cli import positive_float

SFT_DESCRIPTION = """\
Supervised fine-tuning on teacher trajectories (the SFT cold start, TRL SFTTrainer).

Flags left out take the preset's values (star_lib.train.models.PRESETS). The run folder (--out) receives
config.yaml, checkpoints/, model/ and metrics.parquet; the last line printed is a JSON summary.

examples:
  star sft --data data/sft/ --preset tiny --out runs/tiny/sft --copy-warmup-steps 1500 --time-budget 600
  star sft --data data/sft/ --preset qwen2.5-1.5b --model /models/Qwen2.5-1.5B-Instruct --out runs/q15/sft
  star sft --data data/sft/ --out runs/tiny/sft --resume runs/tiny/sft/checkpoints/checkpoint-500
"""
RL_DESCRIPTION = """\
Multi-turn RL in the travel environment: GRPO, DAPO or ARPO (TRL GRPOTrainer).

--config is a YAML file of RLRunConfig fields (at top level or under rl:); the flags override it. Values are
checked before anything is written: YAML scalars are read as the fields' types (learning_rate: 1e-6 is a
number), and a value that does not fit is refused naming its key. The run folder receives config.yaml,
checkpoints/, model/, metrics.parquet and rollouts.parquet; the last line printed is a JSON summary.

examples:
  star rl --config configs/rl_tiny.yaml --max-steps 40
  star rl --config configs/rl_tiny.yaml --algorithm dapo --out runs/tiny/dapo
  star rl --config configs/rl_tiny.yaml --out runs/tiny/dapo --resume   # from the last checkpoint
"""


def register(subparsers: Any) -> None:
    """Add ``star sft``."""
    from star_lib.train.models import PRESETS

    parser = subparsers.add_parser(
        "sft",
        help="supervised fine-tuning on teacher trajectories (TRL SFTTrainer)",
        description=SFT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data", required=True, help="SFT JSONL file or folder of *.jsonl (messages + tools)"
    )
    parser.add_argument("--out", required=True, help="run folder, e.g. runs/<experiment>/<run>")
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS), help="model preset")
    parser.add_argument(
        "--model", default=None, help="start from this checkpoint folder instead of the preset's"
    )
    parser.add_argument("--eval-data", default=None, help="held-out SFT JSONL file or folder")
    parser.add_argument("--max-steps", type=int, default=-1, help="optimizer steps (-1: run the epochs)")
    parser.add_argument("--epochs", type=positive_float, default=None, help="passes over the data")
    parser.add_argument("--lr", type=positive_float, default=None, help="peak learning rate")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="conversations per device per micro-batch"
    )
    parser.add_argument("--grad-accum", type=int, default=None, help="micro-batches per optimizer step")
    parser.add_argument("--max-length", type=int, default=None, help="longest tokenised conversation")
    parser.add_argument("--warmup-ratio", type=float, default=None, help="share of steps warming up the lr")
    parser.add_argument(
        "--bf16", action=argparse.BooleanOptionalAction, default=None, help="bf16 mixed precision"
    )
    parser.add_argument(
        "--time-budget", type=positive_float, default=None, help="stop SFT after this many seconds"
    )
    parser.add_argument("--logging-steps", type=int, default=10, help="log every this many steps")
    parser.add_argument("--save-steps", type=int, default=500, help="checkpoint every this many steps")
    parser.add_argument("--seed", type=int, default=0, help="seed")
    parser.add_argument("--vocab-size", type=int, default=None, help="tiny: BPE vocabulary size")
    parser.add_argument(
        "--copy-warmup-steps", type=int, default=0, help="copy-task warm-up steps before SFT (0: none)"
    )
    parser.add_argument(
        "--copy-warmup-time", type=positive_float, default=None, help="copy warm-up time budget (seconds)"
    )
    parser.add_argument("--resume", default=None, help="checkpoint folder to resume from")
    parser.set_defaults(func=run_sft_command)

    rl = subparsers.add_parser(
        "rl",
        help="multi-turn RL in the travel environment: GRPO, DAPO or ARPO (TRL GRPOTrainer)",
        description=RL_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rl.add_argument("--config", required=True, help="YAML file of RLRunConfig fields")
    rl.add_argument("--out", default=None, help="run folder (overrides output_dir)")
    rl.add_argument("--model", default=None, help="policy to start from (overrides model_path)")
    rl.add_argument("--data", default=None, help="training queries JSONL (overrides data)")
    rl.add_argument("--max-steps", type=int, default=None, help="optimizer steps (overrides max_steps)")
    rl.add_argument("--reward", default=None, help="sum | macro | success | curriculum (overrides reward)")
    rl.add_argument("--seed", type=int, default=None, help="seed (overrides seed)")
    rl.add_argument("--algorithm", default=None, help="grpo | dapo | arpo (overrides algorithm)")
    rl.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        metavar="CHECKPOINT",
        help="continue from the last checkpoint of the run folder (or from CHECKPOINT) with the same "
        "data order and RNG streams",
    )
    rl.set_defaults(func=run_rl_command)


def config_from_args(args: argparse.Namespace) -> Any:
    """Build the :class:`star_lib.train.sft.SFTRunConfig` the flags describe."""
    from star_lib.train.sft import SFTRunConfig
    from star_lib.train.tokenizer import TokenizerConfig
    from star_lib.train.warmup import CopyWarmupConfig

    warmup = None
    if args.copy_warmup_steps > 0:
        warmup = CopyWarmupConfig(
            steps=args.copy_warmup_steps, time_budget_s=args.copy_warmup_time, seed=args.seed
        )
    tokenizer = TokenizerConfig(vocab_size=args.vocab_size) if args.vocab_size else TokenizerConfig()
    return SFTRunConfig(
        data=args.data,
        output_dir=args.out,
        preset=args.preset,
        model_path=args.model,
        eval_data=args.eval_data,
        max_steps=args.max_steps,
        num_train_epochs=args.epochs,
        learning_rate=args.lr,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_length=args.max_length,
        warmup_ratio=args.warmup_ratio,
        bf16=args.bf16,
        time_budget_s=args.time_budget,
        logging_steps=args.logging_steps,
        save_steps=args.save_steps,
        seed=args.seed,
        copy_warmup=warmup,
        tokenizer=tokenizer,
        resume_from_checkpoint=args.resume,
    )


def run_sft_command(args: argparse.Namespace) -> int:
    """Run ``star sft``: train, then print a table and a JSON summary line."""
    from star_lib.io import check_output_dir
    from star_lib.paths import refuse_overlap
    from star_lib.train.sft import run_sft

    check_output_dir(args.out)
    # --resume is left out: a checkpoint of the run folder itself is what it resumes from
    inputs = {"--data": args.data, "--model": args.model, "--eval-data": args.eval_data}
    refuse_overlap(inputs, {"--out": args.out})
    if not Path(args.data).exists():
        raise FileNotFoundError(f"--data {args.data}: no such SFT JSONL file or folder (see star teacher)")
    config = config_from_args(args)
    _check_sft_model_and_bf16(args)  # before run_sft writes config.yaml and base/
    result = run_sft(config)
    summary = {
        "model_dir": str(result.model_dir),
        "steps": result.steps,
        "first_loss": round(result.first_loss, 4),
        "last_loss": round(result.last_loss, 4),
        "train_tokens": result.train_tokens,
        "seconds": round(result.seconds, 1),
        "tokens_per_s": round(result.tokens_per_s, 1),
        "warmup_steps": result.warmup.steps if result.warmup else 0,
        "warmup_final_loss": round(result.warmup.final_loss, 4) if result.warmup else None,
    }
    return _show_summary(f"star sft → {Path(args.out)}", summary)


def _check_sft_model_and_bf16(args: argparse.Namespace) -> None:
    """Refuse a missing ``--model``, an unloadable hub preset, and bf16 on a CPU without native bf16."""
    from star_lib.cli import check_model
    from star_lib.train.models import (
        check_bf16,
        check_hub_model,
        get_preset,
        has_accelerator,
        resolve_model_source,
    )

    if args.model is not None:
        check_model(args.model, preset=args.preset)
    elif get_preset(args.preset).hub_id is not None:
        source = resolve_model_source(args.preset)
        if not Path(source).is_dir():
            try:
                check_hub_model(source)
            except FileNotFoundError as exc:
                raise FileNotFoundError(f"--preset {args.preset}: {exc}") from None
    bf16 = get_preset(args.preset).sft.bf16 if args.bf16 is None else args.bf16
    try:
        check_bf16(bf16, on_accelerator=has_accelerator())
    except ValueError:
        whose = "" if args.bf16 else f" (the {args.preset} preset's default)"
        raise ValueError(
            f"--bf16{whose}: this CPU has no native bf16 (no avx512_bf16/amx_bf16 in /proc/cpuinfo), where "
            "bf16 runs about 10x slower than fp32; pass --no-bf16"
        ) from None


_RL_FLAGS = {"data": "--data", "output_dir": "--out", "model_path": "--model"}
"""RLRunConfig fields a ``star rl`` flag can supply."""


def check_rl_yaml(args: argparse.Namespace) -> None:
    """Check ``--config`` before training: a mapping of fields that, with the flags, sets every required one.

    The fields sit at top level or under ``rl:``.

    Raises:
        FileNotFoundError: when the file is missing.
        ValueError: naming the file when it is empty, not a mapping, or lacks required fields (and the flags
            that would supply them).

    """
    from dataclasses import MISSING, fields

    from star_lib.io import read_yaml
    from star_lib.train.rl import RLRunConfig

    if not Path(args.config).is_file():
        raise FileNotFoundError(f"--config {args.config}: no such RL config file")
    data = read_yaml(args.config)
    section = data.get("rl", data) if isinstance(data, dict) else data
    if section is not None and not isinstance(section, dict):
        raise ValueError(
            f"{args.config}: expected a mapping of RLRunConfig fields (at top level or under rl:), "
            f"got a {type(section).__name__}"
        )
    section = section or {}
    required = [f.name for f in fields(RLRunConfig) if f.default is MISSING and f.default_factory is MISSING]
    missing = [
        name
        for name in required
        if section.get(name) is None
        and getattr(args, _RL_FLAGS.get(name, "")[2:].replace("-", "_"), None) is None
    ]
    if missing:
        hints = ", ".join(f"{name} (or {_RL_FLAGS[name]})" if name in _RL_FLAGS else name for name in missing)
        raise ValueError(f"{args.config}: the RL config does not set {hints}")


def load_rl_config(args: argparse.Namespace) -> Any:
    """Build the ``RLRunConfig`` of ``--config`` and the flags, checking everything before any work.

    YAML values are coerced to the fields' types (``learning_rate: 1e-6``, which YAML 1.1 reads as a string,
    becomes a number); a value that does not fit (``max_steps: ten``), a missing required field, the model
    folder and the output folder are refused before anything is written.

    Raises:
        FileNotFoundError: the config file, or the model folder, does not exist.
        ValueError: naming the file and the key, its value and what is allowed.

    """
    from star_lib.experiments.coerce import coerce_fields
    from star_lib.io import check_output_dir, read_yaml
    from star_lib.paths import refuse_overlap
    from star_lib.train.models import resolve_model_source
    from star_lib.train.rl import RLRunConfig

    check_rl_yaml(args)
    data = read_yaml(args.config) or {}
    section = data.get("rl", data) or {}
    flags = {
        "output_dir": args.out,
        "model_path": args.model,
        "data": args.data,
        "max_steps": args.max_steps,
        "reward": args.reward,
        "seed": args.seed,
        "algorithm": args.algorithm,
    }
    values = coerce_fields(RLRunConfig, section, f"{args.config}: ")
    try:
        cfg = RLRunConfig.from_yaml(
            args.config, **{**values, **{k: v for k, v in flags.items() if v is not None}}
        )
    except (TypeError, ValueError) as exc:  # a refused value; a nested section (faults…) with an unknown key
        message = str(exc)
        raise ValueError(
            message if message.startswith(str(args.config)) else f"{args.config}: {message}"
        ) from None
    check_output_dir(cfg.output_dir, "--out (output_dir)")
    inputs = {"--config": args.config, "--data (data)": cfg.data, "--model (model_path)": cfg.model_path}
    inputs.update({"--config world": cfg.world, "--config eval_data": cfg.eval_data})
    refuse_overlap(inputs, {"--out (output_dir)": cfg.output_dir})
    resolve_model_source(cfg.preset, cfg.model_path)  # a missing model folder before config.yaml is written
    if not Path(cfg.data).exists():
        raise FileNotFoundError(
            f"{args.config}: data {cfg.data}: no such training queries file (see star synth)"
        )
    return cfg


def run_rl_command(args: argparse.Namespace) -> int:
    """Run ``star rl``: GRPO / DAPO / ARPO from a YAML config, then print a table and a JSON summary line."""
    from star_lib.train.rl import run_rl

    cfg = load_rl_config(args)
    result = run_rl(cfg, resume=args.resume)
    summary = {
        "model_dir": str(result.model_dir),
        "algorithm": cfg.algorithm,
        "steps": result.steps,
        "seconds": round(result.seconds, 1),
        "reward_first": round(result.rewards[0], 4) if result.rewards else None,
        "reward_last": round(result.rewards[-1], 4) if result.rewards else None,
        "metrics": str(result.metrics_path),
        "rollouts": str(result.rollouts_path),
    }
    return _show_summary(f"star rl → {result.output_dir}", summary)


def _show_summary(title: str, summary: dict[str, Any]) -> int:
    """Print a run's summary as a table on stderr and as one JSON line on stdout; return exit code 0."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key, str(value))
    Console(stderr=True).print(table)
    print(json.dumps(summary))
    return 0
