"""``labelled_logits_only`` on vs off: SFT and copy warm-up step times of the ``tiny`` preset on CPU.

In one process: trains (or loads, ``--base``) the tiny model with the real-entities tokenizer of
``configs/real-tiny.yaml`` (~18.4 k tokens, every TravelPlanner entity name one token), keeps the teacher
trajectories of ``--data`` whose tokenised length is in ``[--min-tokens, --max-tokens]``, then times
``--steps`` SFT steps (TRL ``SFTTrainer``, real-tiny's batch and ``max_length``) and ``--warmup-steps``
copy warm-up steps with the full LM head and with the labelled-only one, on copies of the same model and the
same batches. The first step of each SFT run (start-up) is dropped. Absolute times are noisy when the CPU is
shared; the ratio is what it measures.

``--data`` is a teacher ``train.jsonl`` of the real database, e.g. the teacher stage of
``star run configs/real-tiny.yaml --stages world,synth,teacher`` (``runs/_stages/teacher/<key>/train.jsonl``).

Usage: ``nice -n 19 python benchmarks/bench_labelled_logits.py --data runs/_stages/teacher/<key>/train.jsonl
[--base DIR] [--steps 4] [--warmup-steps 10] [--warmup-rounds 4] [--no-sft]``. Last line:
``{"sft_ratio": …, "sft_cpu_ratio": …, "warmup_ratio": …, "warmup_cpu_ratio": …, …}`` (full seconds per
step / labelled seconds per step, in wall-clock and in this process's CPU time, which a shared CPU disturbs
less).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATABASE = "../shared/data/travelplanner/database"


def load_model(base: str | None, rows: list[dict], tmp: Path):
    """The tiny model + real-entities tokenizer: from ``base``, or built on ``rows`` as real-tiny does."""
    from star_lib.train.models import build_tiny, load_model_and_tokenizer
    from star_lib.train.sft import tokenizer_corpus
    from star_lib.train.tokenizer import TokenizerConfig
    from star_lib.travel.vocabulary import whole_words

    if base is None:
        config = TokenizerConfig(
            vocab_size=1024, digits="single", whole_words=whole_words(f"real-entities:{DATABASE}")
        )
        base = str(build_tiny(tokenizer_corpus(rows), tmp / "base", tokenizer_config=config).path)
    return load_model_and_tokenizer("tiny", path=base)


def time_sft(model, tokenizer, rows: list[dict], args: argparse.Namespace, labelled: bool, out: Path) -> dict:
    """Seconds per SFT step (first dropped) and the share of positions with a label."""
    from transformers import TrainerCallback

    from star_lib.train.sft import SFTRunConfig, make_sft_trainer

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.ends: list[tuple[float, float]] = []

        def on_step_end(self, *_, **__) -> None:
            self.ends.append((time.monotonic(), time.process_time()))

    cfg = SFTRunConfig(
        data="unused",
        output_dir=str(out),
        max_steps=args.steps + 1,
        per_device_train_batch_size=args.batch,
        max_length=args.max_length,
        learning_rate=2e-3,
        logging_steps=10**6,
        save_steps=10**6,
        labelled_logits_only=labelled,
        progress=False,
    )
    clock = Clock()
    trainer = make_sft_trainer(cfg, model, tokenizer, rows, callbacks=[clock])
    labels = [lab for example in trainer.train_dataset for lab in example["labels"][1:]]
    clock.ends = [(time.monotonic(), time.process_time())]
    trainer.train()
    steps = [b[0] - a[0] for a, b in zip(clock.ends, clock.ends[1:], strict=False)][1:]
    cpu = [b[1] - a[1] for a, b in zip(clock.ends, clock.ends[1:], strict=False)][1:]
    return {
        "s_per_step": statistics.mean(steps),
        "cpu_s_per_step": statistics.mean(cpu),
        "steps": steps,
        "labelled": sum(x != -100 for x in labels) / len(labels),
    }


def time_warmup(model, tokenizer, args: argparse.Namespace) -> dict[str, float]:
    """Seconds per copy warm-up step (real-tiny's settings) of each mode, in alternating rounds.

    ``--warmup-rounds`` rounds of ``--warmup-steps`` steps a mode, the order flipped every round, so that a
    change in the CPU's load hits both modes alike.
    """
    from star_lib.train.warmup import CopyWarmupConfig, copy_warmup

    models = {"full": copy.deepcopy(model), "labelled": copy.deepcopy(model)}
    seconds = {"full": 0.0, "labelled": 0.0}
    cpu = {"full": 0.0, "labelled": 0.0}
    steps = {"full": 0, "labelled": 0}
    for round_ in range(args.warmup_rounds):
        order = ("full", "labelled") if round_ % 2 == 0 else ("labelled", "full")
        for name in order:
            cfg = CopyWarmupConfig(
                steps=args.warmup_steps,
                batch_size=16,
                max_tokens=40,
                pool="all",
                stop_loss=None,
                log_every=args.warmup_steps,
                seed=round_,
                labelled_logits_only=name == "labelled",
            )
            start = time.process_time()
            result = copy_warmup(models[name], tokenizer, cfg)
            cpu[name] += time.process_time() - start
            seconds[name] += result.seconds
            steps[name] += result.steps
    return {
        **{name: seconds[name] / steps[name] for name in seconds},
        **{f"{name}_cpu": cpu[name] / steps[name] for name in cpu},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="a teacher train.jsonl of the real database")
    parser.add_argument("--base", help="a tiny model folder with the real-entities tokenizer (else built)")
    parser.add_argument("--steps", type=int, default=4, help="timed SFT steps per mode (one more is run)")
    parser.add_argument("--warmup-steps", type=int, default=10, help="copy warm-up steps a mode a round")
    parser.add_argument("--warmup-rounds", type=int, default=4)
    parser.add_argument("--sft", action=argparse.BooleanOptionalAction, default=True, help="time SFT too")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=1536)
    parser.add_argument("--min-tokens", type=int, default=800)
    parser.add_argument("--max-tokens", type=int, default=1300)
    args = parser.parse_args()

    import torch

    from star_lib.train.sft import read_sft_rows, render_conversations

    torch.set_num_threads(2)  # as real-tiny (threads: 2)
    rows = read_sft_rows(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        model, tokenizer = load_model(args.base, rows, Path(tmp))
        lengths = [len(tokenizer(text)["input_ids"]) for text in render_conversations(rows, tokenizer)]
        kept = [r for r, n in zip(rows, lengths, strict=True) if args.min_tokens <= n <= args.max_tokens]
        need = args.batch * (args.steps + 1)
        if len(kept) < need:
            raise SystemExit(
                f"{args.data}: {len(kept)} trajectories of {args.min_tokens}-{args.max_tokens} "
                f"tokens, {need} needed; widen the range or lower --steps"
            )
        kept = kept[:need]
        report: dict = {}
        if args.sft:
            sft = {
                name: time_sft(copy.deepcopy(model), tokenizer, kept, args, labelled, Path(tmp) / name)
                for name, labelled in (("full", False), ("labelled", True))
            }
            report["sft_ratio"] = round(sft["full"]["s_per_step"] / sft["labelled"]["s_per_step"], 2)
            report["sft_cpu_ratio"] = round(
                sft["full"]["cpu_s_per_step"] / sft["labelled"]["cpu_s_per_step"], 2
            )
            report["sft_s_per_step"] = {k: round(v["s_per_step"], 2) for k, v in sft.items()}
            report["sft_cpu_s_per_step"] = {k: round(v["cpu_s_per_step"], 2) for k, v in sft.items()}
            report["sft_steps_s"] = {k: [round(s, 2) for s in v["steps"]] for k, v in sft.items()}
            report["labelled_share"] = round(sft["full"]["labelled"], 3)
        warm = time_warmup(model, tokenizer, args)
    kept_lengths = [n for n in lengths if args.min_tokens <= n <= args.max_tokens][:need]
    report["warmup_ratio"] = round(warm["full"] / warm["labelled"], 2)
    report["warmup_cpu_ratio"] = round(warm["full_cpu"] / warm["labelled_cpu"], 2)
    report["warmup_s_per_step"] = {k: round(v, 3) for k, v in warm.items()}
    report.update(vocab=len(tokenizer), mean_tokens=round(statistics.mean(kept_lengths), 1))
    report.update(batch=args.batch, steps=args.steps)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
