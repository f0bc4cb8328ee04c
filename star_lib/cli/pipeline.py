"""``star pipeline --preset tiny``: the tiny learning signal — an alias of ``star run learning-signal``.

Example::

    star pipeline --preset tiny        # configs/learning-signal.yaml into runs/learning-signal/
    star pipeline --preset tiny --quick   # a minute-scale smoke run of the same recipe

Runs the ``learning-signal`` experiment config through the experiment runner (world → synth → teacher →
SFT → GRPO → evaluation of the untrained, SFT and GRPO models on the same held-out tasks from unseen
worlds) and prints final pass, commonsense micro, mean SUM reward (± standard error), the shares of valid
tool calls and parseable plans, the paired RL − SFT difference and the RL reward curve. The last line is a
JSON summary. Stages are cached under ``<runs>/_stages``: a second call reuses them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``star pipeline``."""
    parser = subparsers.add_parser(
        "pipeline",
        help="the tiny learning signal end to end (alias of `star run learning-signal`)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--preset", default="tiny", choices=["tiny"], help="model preset (tiny only)")
    parser.add_argument(
        "--config", default="learning-signal", help="experiment config (default: learning-signal)"
    )
    parser.add_argument("--runs", default="runs", help="runs folder (default: runs)")
    parser.add_argument(
        "--seed", type=int, default=None, help="training/evaluation seed (default: the config's)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="minute-scale budgets (a smoke run, not a result)"
    )
    parser.add_argument("--force", action="store_true", help="rerun even when the run is already complete")
    parser.set_defaults(func=run_pipeline_command)


def run_pipeline_command(args: argparse.Namespace) -> int:
    """Run the learning-signal config, print the report and the JSON summary line."""
    from star_lib.experiments.config import config_path
    from star_lib.experiments.runner import run_experiment
    from star_lib.experiments.signal import (
        GRID,
        learning_signal,
        print_learning_signal,
        quick_config,
        signal_run_dir,
    )
    from star_lib.experiments.stages import load_config
    from star_lib.paths import refuse_overlap

    config = load_config(args.config)
    if args.quick:
        config = quick_config(config).replace(name=f"{config.name}-quick")
    if args.seed is not None:
        config = config.replace(seed=args.seed)
    run_dir = signal_run_dir(args.runs, config)
    refuse_overlap({"--config": config_path(args.config)}, {"--runs (the run folder)": run_dir})
    result = run_experiment(config, run_dir, force=args.force, grid=GRID)
    signal = learning_signal(result.run_dir)
    print_learning_signal(signal)
    print(json.dumps(signal.final_json()))
    return 0
