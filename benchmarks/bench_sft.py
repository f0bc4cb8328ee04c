"""SFT throughput of the ``tiny`` preset on CPU: non-padding tokens per second through TRL's SFTTrainer.

Builds seeded synthetic conversations in the teacher's format (a system prompt with tool schemas, tool calls,
tool results, a final ``<answer>``; ~``--turns`` tool calls each), trains the tiny tokenizer and model on them
(``run_sft``, the code path of ``star sft --preset tiny``), runs ``--steps`` optimizer steps with the preset's
batch size, and reports tokens/s from TRL's ``num_tokens`` counter over the steps after the first (which
carries one-off start-up costs).

Usage: ``python benchmarks/bench_sft.py [--steps 20] [--turns 6] [--no-bf16]``.
Last line: ``{"tokens_per_s": …, "bf16": …, "params": …, …}``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CITIES = [
    "Sarasota",
    "Chicago",
    "Denver",
    "Austin",
    "Boston",
    "Miami",
    "Seattle",
    "Dallas",
    "Phoenix",
    "Atlanta",
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    for name in ("FlightSearch", "AccommodationSearch", "RestaurantSearch", "AttractionSearch")
]


def conversation(rng: random.Random, turns: int) -> dict:
    """One synthetic trajectory with ``turns`` tool calls and a final plan."""
    org, dest = rng.sample(CITIES, 2)
    messages = [
        {"role": "system", "content": "You are a travel planner. Think, call tools, then answer."},
        {
            "role": "user",
            "content": f"Plan a 3-day trip from {org} to {dest} on 2022-03-{rng.randint(10, 28)}.",
        },
    ]
    for _ in range(turns):
        tool = rng.choice(TOOLS)["function"]["name"]
        call = json.dumps({"name": tool, "arguments": {"city": dest}})
        messages.append(
            {"role": "assistant", "content": f"<think>Need {tool}.</think><tool_call>{call}</tool_call>"}
        )
        rows = [f"F{rng.randint(1000, 9999)} {org} {dest} {rng.randint(5, 20)}:10 ${rng.randint(50, 900)}"]
        messages.append({"role": "tool", "content": "\n".join(rows * rng.randint(2, 5))})
    plan = [
        {"days": d, "current_city": dest, "breakfast": "-", "lunch": "-", "dinner": "-"} for d in (1, 2, 3)
    ]
    messages.append(
        {"role": "assistant", "content": f"<think>Done.</think><answer>{json.dumps(plan)}</answer>"}
    )
    return {"messages": messages, "tools": TOOLS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()

    import polars as pl

    from star_lib.train.models import PRESETS, load_model_and_tokenizer
    from star_lib.train.sft import SFTRunConfig, run_sft
    from star_lib.train.tokenizer import TokenizerConfig

    preset = PRESETS["tiny"]
    batch = preset.sft.per_device_train_batch_size
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "sft.jsonl"
        rows = [conversation(rng, args.turns) for _ in range(batch * (args.steps + 1))]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        cfg = SFTRunConfig(
            data=str(data),
            output_dir=str(Path(tmp) / "run"),
            max_steps=args.steps,
            logging_steps=1,
            save_steps=10**6,
            bf16=args.bf16,
            tokenizer=TokenizerConfig(vocab_size=2048),
            progress=False,
        )
        result = run_sft(cfg)
        frame = pl.read_parquet(result.metrics_path).filter(pl.col("stage") == "sft").drop_nulls("train/loss")
        tokens = frame["train/num_tokens"].to_list()
        times = frame["time"].to_list()
        steady = (tokens[-1] - tokens[0]) / (times[-1] - times[0])
        model, tok = load_model_and_tokenizer("tiny", path=result.model_dir)
        params = sum(p.numel() for p in model.parameters())
    print(
        json.dumps(
            {
                "tokens_per_s": round(steady, 1),
                "tokens_per_s_with_startup": round(result.tokens_per_s, 1),
                "bf16": args.bf16,
                "batch": batch,
                "tokens_per_conversation": round(result.train_tokens / (batch * result.steps), 1),
                "steps": result.steps,
                "params": params,
                "vocab": len(tok),
                "loss_first": round(result.first_loss, 3),
                "loss_last": round(result.last_loss, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
