"""The ``star`` command: one subcommand module per stage.

Each module in :data:`COMMAND_MODULES` defines ``register(subparsers)``, adding its subcommands with a
``func`` default that takes the parsed ``argparse.Namespace`` and returns an exit code. Heavy imports
(torch, transformers) happen inside those functions, so ``star --help`` and ``star tool`` stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

COMMAND_MODULES: tuple[str, ...] = (
    "world",  # star world synth | info, star tool
    "evaluate",  # star eval
    "synth",  # star synth
    "agent",  # star teacher | rollout
    "train",  # star sft | rl
    "pipeline",  # star pipeline (the tiny-scale learning signal, end to end)
    "qa",  # star qa-eval
    "experiments",  # star run | submit | status
    "report",  # star report
    "demo",  # star demo
)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every stage's subcommands that exist in this checkout."""
    parser = argparse.ArgumentParser(prog="star", description="STAR lab kit: the TravelPlanner RL pipeline.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        module_name = f"{__name__}.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue  # stage not in this checkout yet
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``star`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        print(f"star {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
