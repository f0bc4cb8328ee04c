"""Device check: 3 GRPO steps of the multi-turn ReAct rollout with a Qwen2.5-1.5B-shaped model on one GPU.

Run through ``slurm/gpu_check.sh`` (it puts TRL and its missing dependencies on the path from carried wheels).
Nothing is downloaded: the model is built from the Qwen2.5-1.5B-Instruct shape (hidden 1536, 28 layers, 12/2
heads, vocabulary 151,936; ``star_lib.experiments.memory.MODEL_SHAPES``) with random weights, the tokenizer is
the real Qwen2.5 one (``--tokenizer``, default ``../shared/data/qwen2.5-tokenizer``: 151,669 ids, with the
stock instruct chat template), and the world and queries are synthetic. The embedding rows past the
tokenizer's last id (the checkpoint's padding) are suppressed in generation, so every sampled id decodes.
The weights load in fp32 (the master copy) and train under bf16 autocast, as the paper presets do; rollouts
run through ``model.generate`` (no vLLM on that machine). A random model breaks the protocol every turn, so
each episode is ``max_format_errors`` turns of up to ``max_new_tokens`` tokens: a fixed, comparable workload.

Prints one JSON line: every generated token counted where the policy returns it, rollout and ``generate``
tokens/s, step time, peak GPU memory, what ran. ``--cpu --tiny`` runs the same code on a small model on
CPU (the test suite does). ``--wheels`` prints the wheels a bare GPU machine lacks; ``--shrink-wheels DIR``
strips and LZMA-recompresses them so they fit the 64 MiB a device call carries.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout without installing the package
    sys.path.insert(0, str(REPO))

BARE_MACHINE = ("torch", "transformers", "accelerate", "peft", "tokenizers", "safetensors")
"""What a bare GPU machine has (with their own dependencies); the check needs nothing else but ``WHEELS``."""
WHEELS = (
    "trl==1.16.0",  # GRPOTrainer
    "datasets==5.2.0",  # TRL's dataset type; the RL prompts
    "dill==0.4.1",  # datasets
    "multiprocess==0.70.19",  # datasets
    "xxhash==4.1.0",  # datasets (fingerprints)
    "fsspec==2026.9.0",  # datasets caps it (<=2026.9.0); torch's may be newer
    "pyarrow==26.0.1",  # datasets (requires >=24), TRL
    "pandas==3.1.1",  # datasets, TRL
    "python-dateutil==4.0.0",  # pandas
    "tzdata==2026.6",  # python-dateutil
    "polars==2.1.0",  # star_lib's tables (metrics.parquet, rollouts, episode summaries)
    "polars-runtime-32==2.1.0",  # polars' compiled core
)
"""Pinned wheels of every import the check makes beyond ``BARE_MACHINE`` (tests/test_gpu_check.py checks)."""
DEFAULT_TOKENIZER = REPO.parent / "shared" / "data" / "qwen2.5-tokenizer"
CHAT_TEMPLATE_FILE = "qwen2.5_instruct_chat_template.jinja"
"""A file beside the tokenizer that holds the stock Qwen2.5-Instruct template (wins over the config's)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run on CPU (no CUDA needed)")
    parser.add_argument("--tiny", action="store_true", help="a small model instead of the 1.5B shape")
    parser.add_argument("--tokenizer", default=str(DEFAULT_TOKENIZER), help="Qwen2.5 tokenizer folder")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps (default 3)")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step (default 2)")
    parser.add_argument("--group", type=int, default=4, help="episodes per prompt, G (default 4)")
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="tokens per turn (default 128; tiny 16)"
    )
    parser.add_argument("--max-turns", type=int, default=4, help="turns per episode (default 4)")
    parser.add_argument("--work", default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--wheels", action="store_true", help="print the wheel list and exit")
    parser.add_argument("--shrink-wheels", metavar="DIR", help="shrink the large wheels in DIR and exit")
    args = parser.parse_args(argv)
    if min(args.steps, args.prompts, args.max_turns) < 1 or args.group < 2:
        parser.error("--steps, --prompts and --max-turns must be >= 1 and --group >= 2")
    return args


def load_qwen_tokenizer(folder: Path) -> Any:
    """Load the Qwen2.5 tokenizer with the stock instruct template (``CHAT_TEMPLATE_FILE``, when there)."""
    from star_lib.agent.tokenizer import load_tokenizer

    if not (folder / "tokenizer_config.json").is_file():
        raise FileNotFoundError(f"no Qwen2.5 tokenizer in {folder}: pass --tokenizer DIR")
    tokenizer = load_tokenizer(folder)
    template = folder / CHAT_TEMPLATE_FILE
    if template.is_file():
        tokenizer.chat_template = template.read_text(encoding="utf-8")
    return tokenizer


def model_shape(tiny: bool, tokenizer_size: int) -> dict[str, Any]:
    """Return the Qwen2 config fields: the 1.5B preset's, or a small model's over the same vocabulary."""
    if tiny:  # the vocabulary padded to a multiple of 128 like Qwen's, so the suppression runs here too
        vocab = -(-tokenizer_size // 128) * 128
        return dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=vocab,
            tie_word_embeddings=True,
        )
    from star_lib.experiments.memory import MODEL_SHAPES

    s = MODEL_SHAPES["qwen2.5-1.5b"]
    return dict(
        hidden_size=s.hidden_size,
        intermediate_size=s.intermediate_size,
        num_hidden_layers=s.num_hidden_layers,
        num_attention_heads=s.num_attention_heads,
        num_key_value_heads=s.num_key_value_heads,
        vocab_size=s.vocab_size,
        tie_word_embeddings=s.tie_word_embeddings,
    )


def build_model_dir(root: Path, tokenizer_dir: Path, tiny: bool, device: str) -> tuple[Path, int, int]:
    """Write the Qwen2.5 tokenizer and a randomly initialised Qwen2 model of the chosen shape to ``root``.

    Returns:
        ``(folder, parameter count, tokenizer size)``.

    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tokenizer = load_qwen_tokenizer(tokenizer_dir)
    shape = model_shape(tiny, len(tokenizer))
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
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        suppress_tokens=list(range(len(tokenizer), shape["vocab_size"])) or None,  # rows with no token
    )
    folder = root / "model"
    model.to(torch.bfloat16).save_pretrained(folder)  # stored in bf16 like the hub's Qwen checkpoints
    tokenizer.save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    del model
    return folder, params, len(tokenizer)


def write_queries(root: Path) -> Path:
    """Synthesise 8 three-day queries over ``synthetic:small:0``; return the ``train.jsonl`` path."""
    from star_lib.synth.config import SynthConfig
    from star_lib.synth.dataset import synthesize, write_dataset
    from star_lib.travel.world import World

    world = World.load("synthetic:small:0")
    result = synthesize(
        world, SynthConfig(n=8, mix="1:0:0", seed=0, splits=(1.0, 0.0, 0.0), days_choices=(3,))
    )
    write_dataset(result, root / "data", parquet=False)
    return root / "data" / "train.jsonl"


class GenerationCounter:
    """Every token the rollout policy sampled, the time inside ``generate``, and the ids no token has."""

    def __init__(self) -> None:
        self.tokens = 0
        """Sampled ids returned by the policy (each turn's end-of-turn id included when emitted)."""
        self.turns = 0
        """Generated turns."""
        self.generate_s = 0.0
        """Seconds inside ``policy.generate``."""
        self.undecodable = 0
        """Sampled ids at or past the tokenizer's size (must stay 0)."""
        self.suppressed: int | None = None
        """Ids the model's generation config suppresses, as seen at the first call."""


class CountingPolicy:
    """A rollout policy that tallies what ``inner.generate`` returns into a :class:`GenerationCounter`."""

    def __init__(self, inner: Any, counter: GenerationCounter) -> None:
        self.inner = inner
        self.tokenizer = inner.tokenizer
        self.counter = counter

    def generate(self, conversations: Any, **kwargs: Any) -> list[Any]:
        """Call the inner policy; count its sampled ids and time."""
        counter = self.counter
        if counter.suppressed is None:
            counter.suppressed = len(self.inner.model.generation_config.suppress_tokens or ())
        start = time.perf_counter()
        generations = self.inner.generate(conversations, **kwargs)
        counter.generate_s += time.perf_counter() - start
        size = len(self.tokenizer)
        for generation in generations:
            ids = generation.token_ids or []
            counter.tokens += len(ids)
            counter.turns += 1
            counter.undecodable += sum(1 for i in ids if i >= size)
        return generations


def counting_policy_factory(counter: GenerationCounter) -> Any:
    """Build ``(trainer, cfg) -> policy``: ``model.generate`` on the trained model, as without vLLM."""

    def factory(trainer: Any, cfg: Any) -> CountingPolicy:
        from star_lib.agent.policies import SamplingParams, TransformersPolicy

        model = trainer.accelerator.unwrap_model(trainer.model)
        sampling = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p)
        policy = TransformersPolicy(model, trainer.processing_class, sampling, batch_size=cfg.batch_size)
        return CountingPolicy(policy, counter)

    return factory


def rl_config(args: argparse.Namespace, work: Path, model_dir: Path, data: Path) -> Any:
    """Configure the RL run: the preset's settings with the check's small budget and no checkpoints."""
    from star_lib.train.rl import RLRunConfig

    return RLRunConfig(
        data=str(data),
        output_dir=str(work / "run"),
        model_path=str(model_dir),
        world="synthetic:small:0",
        preset="tiny" if args.tiny else "qwen2.5-1.5b",
        num_generations=args.group,
        prompts_per_step=args.prompts,
        max_steps=args.steps,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens or (16 if args.tiny else 128),
        max_context_tokens=8192,
        micro_batch_size=args.group if args.tiny else 2,
        temperature=1.0,  # the presets' rollout temperature
        bf16=not args.cpu,  # bf16 autocast over fp32 master weights on the GPU, fp32 on CPU
        save_steps=10_000,  # no checkpoint: only the timing matters
        rollouts_per_step=0,
        world_size=1,
        trl_overrides={"disable_tqdm": True},
    )


def main(argv: list[str] | None = None) -> int:
    """Run the check and print its JSON line."""
    args = parse_args(argv)
    if args.wheels or args.shrink_wheels:
        print("\n".join(WHEELS) if args.wheels else shrink_wheels(Path(args.shrink_wheels)))
        return 0
    start = time.perf_counter()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print(json.dumps({"ok": False, "error": "no CUDA device: run with --cpu (and --tiny) or on a GPU"}))
        return 2
    device = "cpu" if args.cpu else "cuda"
    if args.cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the trainer must not find a GPU either
    from star_lib.train.rl import run_rl

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="star-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    model_dir, params, vocabulary = build_model_dir(work, Path(args.tokenizer), args.tiny, device)
    cfg = rl_config(args, work, model_dir, write_queries(work))
    built = time.perf_counter()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    counter = GenerationCounter()
    result = run_rl(cfg, policy_factory=counting_policy_factory(counter))
    line = {
        "ok": result.steps == args.steps and counter.undecodable == 0 and counter.tokens > 0,
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "model": f"{cfg.preset}-shaped, random weights",
        "parameters": params,
        "tokenizer": f"Qwen2.5 ({vocabulary} ids)",
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "trl": _version("trl"),
        **timings(result, cfg, counter),
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None,
        "build_s": round(built - start, 1),
        "total_s": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(line), flush=True)
    return 0 if line["ok"] else 1


def timings(result: Any, cfg: Any, counter: GenerationCounter) -> dict[str, Any]:
    """Return the counts and speeds: generated tokens per rollout and ``generate`` second, step times."""
    rows = [r for r in _metric_rows(result.metrics_path) if r.get("stage") == "rl"]
    steps = [r for r in rows if r.get("time/rollout_s") is not None]  # not the end-of-training summary row
    rollout_s = [float(r["time/rollout_s"]) for r in steps]
    step_s = [float(r["time/step_s"]) for r in steps if r.get("time/step_s") is not None]
    generate_s = counter.generate_s
    return {
        "steps": result.steps,
        "episodes_per_step": cfg.batch_size,
        "max_new_tokens": cfg.max_new_tokens,
        "generated_turns": counter.turns,
        "generated_tokens": counter.tokens,
        "undecodable_ids": counter.undecodable,
        "suppressed_ids": counter.suppressed,
        "rollout_tokens_per_s": round(counter.tokens / sum(rollout_s), 1) if sum(rollout_s) else None,
        "generate_tokens_per_s": round(counter.tokens / generate_s, 1) if generate_s else None,
        "rollout_s_mean": round(sum(rollout_s) / len(rollout_s), 2) if rollout_s else None,
        "step_s": [round(s, 2) for s in step_s],
        "step_s_mean": round(sum(step_s) / len(step_s), 2) if step_s else None,
    }


def shrink_wheels(folder: Path) -> str:
    """Strip the shared libraries of each wheel in ``folder`` and recompress it with LZMA, in place.

    pip installs LZMA-compressed wheels (``zipfile`` reads them); ``RECORD`` gets the stripped files' new
    hashes and sizes; a wheel already in LZMA is left alone. polars-runtime-32 2.1.0 goes from 53.9 MB to
    30.6 MB (minutes of CPU). Returns one line per wheel.
    """
    lines = []
    for wheel in sorted(folder.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            if all(info.compress_type == zipfile.ZIP_LZMA for info in archive.infolist()):
                continue
        before = wheel.stat().st_size
        _repack_wheel(wheel)
        lines.append(f"{wheel.name}: {before / 1e6:.2f} MB -> {wheel.stat().st_size / 1e6:.2f} MB")
    return "\n".join(lines) or f"nothing to shrink in {folder}"


def _repack_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as src:
        infos = src.infolist()
        entries = {info.filename: src.read(info) for info in infos}
    changed = {name: _stripped(data) for name, data in entries.items() if ".so" in Path(name).suffixes}
    changed = {name: data for name, data in changed.items() if data != entries[name]}
    entries.update(changed)
    record = next(name for name in entries if name.endswith(".dist-info/RECORD"))
    rows = entries[record].decode().splitlines()
    for i, row in enumerate(rows):
        name = row.split(",", 1)[0]
        if name in changed:
            digest = base64.urlsafe_b64encode(hashlib.sha256(changed[name]).digest()).rstrip(b"=").decode()
            rows[i] = f"{name},sha256={digest},{len(changed[name])}"
    entries[record] = ("\n".join(rows) + "\n").encode()
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_LZMA) as out:
        for info in infos:  # same names, order, dates and permission bits
            out.writestr(info, entries[info.filename], compress_type=zipfile.ZIP_LZMA)
    tmp.replace(wheel)


def _stripped(data: bytes) -> bytes:
    if shutil.which("strip") is None:
        return data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lib.so"
        path.write_bytes(data)
        subprocess.run(["strip", "--strip-unneeded", str(path)], check=True)
        return path.read_bytes()


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _metric_rows(path: Path) -> list[dict]:
    import polars as pl

    return pl.read_parquet(path).to_dicts() if path.is_file() else []


if __name__ == "__main__":
    sys.exit(main())
