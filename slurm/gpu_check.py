"""Device check: 3 GRPO steps of the multi-turn ReAct rollout with a Qwen2.5-1.5B-shaped model on one GPU.

Run through ``slurm/gpu_check.sh`` (it puts TRL and its missing dependencies on the path from carried wheels).
Nothing is downloaded: the model is built from the Qwen2.5-1.5B-Instruct shape (hidden 1536, 28 layers, 12/2
heads, vocabulary 151,936; ``star_lib.experiments.memory.MODEL_SHAPES``) with random weights, the tokenizer
is the tiny BPE one trained on the episodes' own text, and the world and queries are synthetic. The weights
load in fp32 (the master copy) and train under bf16 autocast, as the paper presets do; rollouts run through
``model.generate`` (no vLLM on that machine). A random model breaks the protocol every turn, so each
episode is ``max_format_errors`` turns of ``max_new_tokens`` tokens: a fixed, comparable workload.

Prints one JSON line: rollout model-tokens/s, step time, peak GPU memory, what ran. ``--cpu --tiny`` runs
the same code on a small model on CPU in seconds (the test suite does).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout without installing the package
    sys.path.insert(0, str(REPO))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run on CPU (no CUDA needed)")
    parser.add_argument("--tiny", action="store_true", help="a small model instead of the 1.5B shape")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps (default 3)")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step (default 2)")
    parser.add_argument("--group", type=int, default=4, help="episodes per prompt, G (default 4)")
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="tokens per turn (default 128; tiny 16)"
    )
    parser.add_argument("--max-turns", type=int, default=4, help="turns per episode (default 4)")
    parser.add_argument("--work", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if min(args.steps, args.prompts, args.max_turns) < 1 or args.group < 2:
        parser.error("--steps, --prompts and --max-turns must be >= 1 and --group >= 2")
    return args


def build_model_dir(root: Path, tiny: bool, device: str) -> tuple[Path, int]:
    """Write the queries' tokenizer and a randomly initialised Qwen2 model of the chosen shape to ``root``."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from star_lib.agent.config import RolloutConfig
    from star_lib.agent.expert import ExpertPolicy
    from star_lib.agent.rollout import run_episodes
    from star_lib.experiments.memory import MODEL_SHAPES
    from star_lib.synth.config import SynthConfig
    from star_lib.synth.dataset import synthesize, write_dataset
    from star_lib.train.sft import normalise_rows, tokenizer_corpus
    from star_lib.train.tokenizer import TokenizerConfig, train_tokenizer
    from star_lib.travel.world import World

    world = World.load("synthetic:small:0")
    result = synthesize(
        world, SynthConfig(n=8, mix="1:0:0", seed=0, splits=(1.0, 0.0, 0.0), days_choices=(3,))
    )
    write_dataset(result, root / "data", parquet=False)
    episodes = run_episodes(ExpertPolicy(), result.splits["train"], world, RolloutConfig())
    rows = normalise_rows({"messages": ep.messages, "tools": ep.tool_schemas} for ep in episodes)
    tokenizer = train_tokenizer(tokenizer_corpus(rows), TokenizerConfig(vocab_size=1500))
    if tiny:
        shape = dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=len(tokenizer),
            tie_word_embeddings=True,
        )
    else:
        s = MODEL_SHAPES["qwen2.5-1.5b"]
        shape = dict(
            hidden_size=s.hidden_size,
            intermediate_size=s.intermediate_size,
            num_hidden_layers=s.num_hidden_layers,
            num_attention_heads=s.num_attention_heads,
            num_key_value_heads=s.num_key_value_heads,
            vocab_size=s.vocab_size,
            tie_word_embeddings=s.tie_word_embeddings,
        )
    config = Qwen2Config(
        **shape,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the GPU: seconds instead of a minute of CPU init
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    folder = root / "model"
    model.to(torch.bfloat16).save_pretrained(folder)  # stored in bf16 like the hub's Qwen checkpoints
    tokenizer.save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    del model
    return folder, params


def main(argv: list[str] | None = None) -> int:
    """Run the check and print its JSON line."""
    args = parse_args(argv)
    start = time.perf_counter()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print(json.dumps({"ok": False, "error": "no CUDA device: run with --cpu (and --tiny) or on a GPU"}))
        return 2
    device = "cpu" if args.cpu else "cuda"
    if args.cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the trainer must not find a GPU either
    from star_lib.train.rl import RLRunConfig, run_rl

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="star-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    model_dir, params = build_model_dir(work, args.tiny, device)
    built = time.perf_counter()
    preset = "tiny" if args.tiny else "qwen2.5-1.5b"
    max_new = args.max_new_tokens or (16 if args.tiny else 128)
    cfg = RLRunConfig(
        data=str(work / "data" / "train.jsonl"),
        output_dir=str(work / "run"),
        model_path=str(model_dir),
        world="synthetic:small:0",
        preset=preset,
        num_generations=args.group,
        prompts_per_step=args.prompts,
        max_steps=args.steps,
        max_turns=args.max_turns,
        max_new_tokens=max_new,
        max_context_tokens=8192,
        micro_batch_size=args.group if args.tiny else 2,
        bf16=not args.cpu,  # bf16 autocast over fp32 master weights on the GPU, fp32 on CPU
        save_steps=10_000,  # no checkpoint: only the timing matters
        rollouts_per_step=0,
        world_size=1,
        trl_overrides={"disable_tqdm": True},
    )
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    result = run_rl(cfg)
    rows = [r for r in _metric_rows(result.metrics_path) if r.get("stage") == "rl"]
    step_rows = [r for r in rows if r.get("time/rollout_s") is not None]
    episodes = cfg.batch_size
    rollout_s = [float(r["time/rollout_s"]) for r in step_rows]
    tokens = [float(r.get("env/model_tokens") or 0.0) * episodes for r in step_rows]
    step_s = [float(r["time/step_s"]) for r in step_rows if r.get("time/step_s") is not None]
    line = {
        "ok": result.steps == args.steps,
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "model": f"{preset}-shaped, random weights",
        "parameters": params,
        "torch": torch.__version__,
        "steps": result.steps,
        "episodes_per_step": episodes,
        "max_new_tokens": max_new,
        "rollout_model_tokens": int(sum(tokens)),
        "rollout_tokens_per_s": round(sum(tokens) / sum(rollout_s), 1) if sum(rollout_s) else None,
        "rollout_s_mean": round(sum(rollout_s) / len(rollout_s), 2) if rollout_s else None,
        "step_s": [round(s, 2) for s in step_s],
        "step_s_mean": round(sum(step_s) / len(step_s), 2) if step_s else None,
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None,
        "build_s": round(built - start, 1),
        "total_s": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(line), flush=True)
    return 0 if line["ok"] else 1


def _metric_rows(path: Path) -> list[dict]:
    import polars as pl

    return pl.read_parquet(path).to_dicts() if path.is_file() else []


if __name__ == "__main__":
    sys.exit(main())
