"""The learning signal at tiny scale, through the experiment runner: ``configs/learning-signal.yaml``.

world (per-query tiny worlds) → synth → compact expert SFT data → copy warm-up + TRL SFT → TRL GRPO (SUM,
FastPolicy rollouts) → greedy evaluation of the untrained, SFT and GRPO models on the same held-out tasks
from unseen worlds (compact plans expanded to the official format, strict evaluator). The same run as
``star run learning-signal`` and ``star pipeline --preset tiny``.

Targets (issue 11): SFT commonsense micro >= 60 %; GRPO raises mean SUM over SFT by >= 0.05 and by more than
two paired standard errors; SFT final pass >= 30 %; <= 20 minutes on 2 CPU cores. The stages count steps, so
the numbers do not depend on the machine's speed, only the minutes do.

Usage: ``python benchmarks/learning_signal.py [--runs runs] [--seed 0] [--quick] [--force]``.
Last line: ``{"cs_micro_base": …, "cs_micro_sft": …, "sum_sft": …, "sum_rl": …, "sum_rl_se": …,
"success_sft": …, "success_rl": …, "minutes": …}``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", default="runs", help="runs folder")
    parser.add_argument("--seed", type=int, default=None, help="training/evaluation seed")
    parser.add_argument("--quick", action="store_true", help="minute-scale smoke run")
    parser.add_argument("--force", action="store_true", help="rerun a finished run")
    args = parser.parse_args()

    from star_lib.cli import main as star

    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")
    argv = ["pipeline", "--preset", "tiny", "--runs", args.runs]
    argv += ["--seed", str(args.seed)] if args.seed is not None else []
    argv += ["--quick"] if args.quick else []
    argv += ["--force"] if args.force else []
    code = star(argv)  # prints the table, then the JSON line last
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
