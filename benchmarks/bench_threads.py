"""Torch threads on a small CPU machine: one run on every core, one run per core, or two runs at once.

The tiny study's runs decode with :class:`star_lib.agent.fastgen.FastQwen2` (batches of a GRPO step's 16
rollouts, one token at a time) and train with ordinary forward+backward passes of the ``tiny-l`` shape (the
study's largest model). Their matrices are small (256 wide), so a second torch thread may cost more in
synchronisation than it computes. This script times the same work (random weights, seeded) in fresh
processes:

- ``baseline``: one process with ``--cores`` torch threads (the study's setting on 2 cores: ``threads: 2``);
- ``one_thread``: one process with one thread;
- ``side_by_side``: ``--cores`` processes with one thread each, started together (``star study --jobs``).

Each process prefills ``--prompt`` tokens, decodes ``--decode`` tokens for 16 rows, then runs ``--train``
forward+backward passes of 16 x 512 tokens. Throughput ratios are against the baseline of the same
invocation: ``decode_speedup`` and ``train_speedup`` for ``one_thread`` (per process), and
``throughput_ratio`` for ``side_by_side`` (work done per second by all processes together).

Measured on a quiet 2-core AMD EPYC (avx512_bf16), 2026-12-03, four invocations: ``train_speedup`` 0.55-0.59,
``side_by_side_train_ratio`` 1.01-1.18, ``decode_speedup`` 0.63-1.04, ``side_by_side_decode_ratio`` 1.13-1.78.
One thread trains at little more than half the speed, and two one-thread processes train about as fast as one
two-thread process, so on 2 cores the study keeps ``threads: 2`` and one run at a time; only generation-heavy
work (evaluation) gains from processes side by side.

Usage: ``python benchmarks/bench_threads.py [--cores 2] [--decode 300] [--train 3]``.
Last line: ``{"decode_speedup": …, "train_speedup": …, "side_by_side_decode_ratio": …, …}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class Vocabulary:
    """What :func:`build_tiny_model` reads of a tokenizer: its size and its end/padding ids."""

    eos_token_id = 0
    pad_token_id = 0

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


def work(threads: int, prompt: int, decode: int, train: int) -> dict[str, float]:
    """Time prefill, decoding and training of the ``tiny-l`` shape with ``threads`` torch threads."""
    import torch

    sys.path.insert(0, str(REPO))
    from star_lib.agent.fastgen import FastQwen2
    from star_lib.train.models import PRESETS, build_tiny_model

    torch.set_num_threads(threads)
    vocab, rows = 2700, 16  # about the study tokenizer's size; a GRPO step's 2 prompts x 8 rollouts
    model = build_tiny_model(Vocabulary(vocab), PRESETS["tiny-l"].architecture, seed=0).eval()
    engine = FastQwen2(model)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        cache = engine.new_cache(rows, prompt + decode + 1)
        ids = torch.randint(0, vocab, (rows, prompt), generator=generator)
        start = time.perf_counter()
        engine.forward(ids, torch.arange(prompt).expand(rows, prompt), cache)
        prefill_s = time.perf_counter() - start
        start = time.perf_counter()
        for position in range(prompt, prompt + decode):
            token = torch.randint(0, vocab, (rows, 1), generator=generator)
            engine.logits(engine.forward(token, torch.full((rows, 1), position), cache))
        decode_s = time.perf_counter() - start
    model.train()
    batch = torch.randint(0, vocab, (16, 512), generator=generator)
    start = time.perf_counter()
    for _ in range(train):
        model(input_ids=batch, labels=batch).loss.backward()
    train_s = (time.perf_counter() - start) / max(train, 1)
    return {"threads": threads, "prefill_s": prefill_s, "decode_s": decode_s, "train_step_s": train_s}


def spawn(threads: int, args: argparse.Namespace) -> subprocess.Popen[str]:
    """Start one measuring process (its result is its last stdout line)."""
    command = [sys.executable, __file__, "--child", str(threads), "--prompt", str(args.prompt)]
    command += ["--decode", str(args.decode), "--train", str(args.train)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def result(process: subprocess.Popen[str]) -> dict[str, float]:
    out, _ = process.communicate()
    if process.returncode:
        raise SystemExit(f"a measuring process failed (exit {process.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2, help="cores to fill (the study's machine: 2)")
    parser.add_argument("--prompt", type=int, default=400, help="prompt tokens per row")
    parser.add_argument("--decode", type=int, default=300, help="tokens decoded per row")
    parser.add_argument("--train", type=int, default=3, help="forward+backward passes of 16 x 512 tokens")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(work(args.child, args.prompt, args.decode, args.train)))
        return
    baseline = result(spawn(args.cores, args))
    print("baseline    ", json.dumps(baseline))
    alone = result(spawn(1, args))
    print("one_thread  ", json.dumps(alone))
    together = [result(p) for p in [spawn(1, args) for _ in range(args.cores)]]
    for row in together:
        print("side_by_side", json.dumps(row))
    slowest_decode = max(r["decode_s"] for r in together)
    slowest_train = max(r["train_step_s"] for r in together)
    print(
        json.dumps(
            {
                "cores": args.cores,
                "decode_speedup": round(baseline["decode_s"] / alone["decode_s"], 2),
                "train_speedup": round(baseline["train_step_s"] / alone["train_step_s"], 2),
                "side_by_side_decode_ratio": round(args.cores * baseline["decode_s"] / slowest_decode, 2),
                "side_by_side_train_ratio": round(args.cores * baseline["train_step_s"] / slowest_train, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
