"""The learning signal at tiny scale: world → synth → expert SFT data → SFT → GRPO (SUM) → evaluation.

Runs :func:`star_lib.train.pipeline.run_pipeline` (also ``star pipeline --preset tiny``) on the CPU and
prints, for the untrained, SFT and GRPO models on held-out easy queries from unseen worlds (greedy
decoding, compact plans expanded to the official format, strict evaluator): final pass, commonsense micro,
mean SUM reward with its standard error, the share of valid tool calls and of parseable plans; the paired
RL − SFT difference; the curve of mean SUM reward over RL steps; and the tokens/s of the fast sampler
against HF ``generate``.

Targets (issue 10): SFT commonsense micro >= 60 %; GRPO raises mean SUM over SFT by >= 0.05 (more than two
standard errors); <= 20 minutes in all on 2 CPU cores. Stretch: SFT final pass >= 30 %. The stages count
steps (copy warm-up 1100, SFT 490, GRPO 140), so the numbers do not depend on the machine's speed.

Usage: ``python benchmarks/learning_signal.py [--out runs/learning_signal] [--seed 0] [--quick]``.
Last line: ``{"cs_micro_base": …, "cs_micro_sft": …, "sum_sft": …, "sum_rl": …, "sum_rl_se": …,
"success_sft": …, "success_rl": …, "minutes": …}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUICK = {
    "train_worlds": 60,
    "rl_worlds": 10,
    "eval_queries": 20,
    "warmup_steps": 80,
    "sft_steps": 40,
    "rl_steps": 10,
}
"""A minute-scale smoke run (numbers meaningless; checks that every stage runs)."""


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="runs/learning_signal", help="run folder")
    parser.add_argument("--seed", type=int, default=0, help="base seed")
    parser.add_argument("--quick", action="store_true", help="minute-scale smoke run")
    parser.add_argument("--progress", action="store_true", help="show the trainers' progress bars")
    args = parser.parse_args()

    from star_lib.train.pipeline import PipelineConfig, print_report, run_pipeline

    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 cores)")
    values = dict(QUICK) if args.quick else {}
    cfg = PipelineConfig(out_dir=args.out, seed=args.seed, progress=args.progress, **values)
    result = run_pipeline(cfg)
    print_report(result)
    speed = result.stages.get("generation_speed", {})
    if speed:
        fast, hf = speed["fast_tokens_per_s"], speed["hf_tokens_per_s"]
        print(
            f"generation in {int(speed['fast_tokens'])}-token greedy SFT episodes: FastPolicy "
            f"{fast:.0f} tokens/s vs HF generate {hf:.0f} tokens/s "
            f"(x{speed['speedup']:.1f}; identical episodes: {100 * speed['same_episodes']:.0f} %)"
        )
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(json.dumps(result.final_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
