"""GPU smoke test: vLLM-backed rollouts and 2 RL steps of ``qwen2.5-1.5b`` for GRPO, DAPO and ARPO.

On one CUDA GPU: synthesizes a few queries with reference plans on a synthetic world, then for each algorithm
runs ``--steps`` steps of :func:`star_lib.train.rl.run_rl` with TRL's colocated vLLM engine writing the
rollouts (``use_vllm``, ``vllm_mode="colocate"``; ARPO reads its entropies from vLLM's top-k
log-probabilities).
Each algorithm runs in its own subprocess, so every vLLM engine gets a fresh GPU. Prints, per algorithm,
rollout model-tokens per second, mean step time and the algorithm's counters.

Exits with status 2 and a clear message when there is no CUDA GPU, no vLLM, or no local copy of the model
(the GPU machines cannot reach the hub: set ``$STAR_MODELS_DIR`` or pass ``--model``).

Usage: ``python benchmarks/gpu_smoke.py [--model DIR] [--steps 2] [--algorithms grpo,dapo,arpo]``
(``slurm/gpu_smoke.sh`` wraps it for ``sbatch``). Last line: ``{"gpu": …, "algorithms": {…}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from star_lib.train.algorithms import ALGORITHMS  # noqa: E402  (after the sys.path line)

PRESET = "qwen2.5-1.5b"


class SmokeUnavailable(RuntimeError):
    """The machine cannot run the smoke test (no GPU, no vLLM, no model)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default=None, help="local Qwen2.5-1.5B-Instruct folder (else $STAR_MODELS_DIR)"
    )
    parser.add_argument("--world", default="synthetic:small:0", help="world spec")
    parser.add_argument("--queries", type=int, default=4, help="synthesized queries")
    parser.add_argument("--steps", type=int, default=2, help="RL steps per algorithm")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step")
    parser.add_argument("--group", type=int, default=4, help="episodes per prompt (G)")
    parser.add_argument("--max-turns", type=int, default=8, help="turns per episode")
    parser.add_argument("--max-new-tokens", type=int, default=512, help="tokens per turn")
    parser.add_argument("--max-context", type=int, default=8192, help="context budget per episode")
    parser.add_argument("--gpu-memory", type=float, default=0.3, help="vLLM's share of GPU memory")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS), help="comma-separated subset")
    parser.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: run one algorithm
    return parser.parse_args(argv)


# ───────────────────────────── preflight ─────────────────────────────


def preflight(model: str | None) -> dict[str, Any]:
    """Check GPU, vLLM and the model; return what was found.

    Raises:
        SmokeUnavailable: saying what is missing and how to provide it.

    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a base dependency
        raise SmokeUnavailable("torch is not installed") from exc
    if not torch.cuda.is_available():
        raise SmokeUnavailable("no CUDA GPU visible (torch.cuda.is_available() is False): run on a GPU node")
    try:
        import vllm
    except ImportError as exc:
        raise SmokeUnavailable("vLLM is not installed: pip install 'star-lab[gpu]' (vllm==0.31.0)") from exc
    return {
        "gpu": torch.cuda.get_device_name(0),
        "vllm": getattr(vllm, "__version__", "?"),
        "model": local_model(model),
    }


def local_model(model: str | None) -> str:
    """Resolve the Qwen2.5-1.5B checkpoint to a local folder (or a hub id already in the local cache).

    Raises:
        SmokeUnavailable: when the weights are not on this machine.

    """
    from star_lib.train.models import resolve_model_source

    try:
        source = resolve_model_source(PRESET, model)
    except (FileNotFoundError, ValueError) as exc:
        raise SmokeUnavailable(str(exc)) from exc
    if Path(source).is_dir():
        return source
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(source, "config.json")
    if isinstance(cached, str):
        return str(Path(cached).parent)
    raise SmokeUnavailable(
        f"{source} is neither a local folder nor in the Hugging Face cache: pass --model /path/to/"
        f"Qwen2.5-1.5B-Instruct or set $STAR_MODELS_DIR to a folder holding it"
    )


# ───────────────────────────── one algorithm ─────────────────────────────


def write_queries(args: argparse.Namespace, out: Path) -> Path:
    """Synthesize ``--queries`` easy queries (JSONL) for the runs."""
    from star_lib.synth.config import SynthConfig
    from star_lib.synth.dataset import synthesize, write_dataset
    from star_lib.travel.world import World

    world = World.load(args.world)
    result = synthesize(world, SynthConfig(n=args.queries, mix="1:0:0", seed=0, splits=(1.0, 0.0, 0.0)))
    write_dataset(result, out / "data", parquet=False)
    return out / "data" / "train.jsonl"


def run_one(args: argparse.Namespace, algorithm: str, model: str, data: Path, out: Path) -> dict[str, Any]:
    """Run ``--steps`` RL steps of one algorithm with colocated vLLM; return its measurements."""
    import polars as pl

    from star_lib.train.rl import RLRunConfig, run_rl

    cfg = RLRunConfig(
        data=str(data),
        output_dir=str(out / algorithm),
        model_path=model,
        world=args.world,
        preset=PRESET,
        algorithm=algorithm,
        num_generations=args.group,
        prompts_per_step=args.prompts,
        max_steps=args.steps,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        max_context_tokens=args.max_context,
        save_steps=10_000,
        rollouts_per_step=2,
        use_vllm=True,  # colocate; vllm_max_model_length follows max_context_tokens
        vllm_gpu_memory_utilization=args.gpu_memory,
        trl_overrides={"gradient_checkpointing": True},
    )
    start = time.monotonic()
    result = run_rl(cfg)
    wall = time.monotonic() - start
    rows = pl.read_parquet(result.metrics_path).filter(pl.col("train/reward").is_not_null()).sort("step")

    def mean(key: str) -> float | None:
        values = [v for v in rows[key].to_list() if v is not None] if key in rows.columns else []
        return round(sum(values) / len(values), 4) if values else None

    tokens = (mean("env/model_tokens") or 0.0) * cfg.batch_size
    rollout_s = mean("time/rollout_s") or 0.0
    summary = {
        "algorithm": algorithm,
        "steps": result.steps,
        "step_s": mean("time/step_s"),
        "rollout_s": rollout_s,
        "rollout_model_tokens_per_s": round(tokens / rollout_s, 1) if rollout_s else None,
        "model_tokens_per_episode": mean("env/model_tokens"),
        "reward": mean("train/reward"),
        "tool_calls": mean("env/tool_calls"),
        "format_error_rate": mean("env/format_error_rate"),
        "wall_s": round(wall, 1),
    }
    for key in rows.columns:
        if key.startswith(("dapo/", "arpo/")):
            summary[key] = mean(key)
    return summary


# ───────────────────────────── driver ─────────────────────────────


def main(argv: list[str] | None = None) -> int:
    """Preflight, then one subprocess per algorithm; print one JSON line each and a summary."""
    args = parse_args(argv)
    try:
        found = preflight(args.model)
    except SmokeUnavailable as exc:
        print(f"gpu_smoke: skipped — {exc}", file=sys.stderr)
        print(json.dumps({"skipped": str(exc)}))
        return 2
    out = Path(args.out or tempfile.mkdtemp(prefix="gpu_smoke_"))
    out.mkdir(parents=True, exist_ok=True)
    if args.one:
        data = out / "data" / "train.jsonl"
        print(json.dumps(run_one(args, args.one, found["model"], data, out)), flush=True)
        return 0
    write_queries(args, out)
    results: dict[str, Any] = {}
    for algorithm in [a.strip() for a in args.algorithms.split(",") if a.strip()]:
        command = [sys.executable, __file__, "--one", algorithm, "--out", str(out), *_forwarded(argv)]
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), check=False)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode == 0 and lines:
            results[algorithm] = json.loads(lines[-1])
        else:
            results[algorithm] = {"error": f"exit {done.returncode}", "stderr_tail": done.stderr[-2000:]}
        print(json.dumps({algorithm: results[algorithm]}), flush=True)
    print(json.dumps({**found, "algorithms": results, "out": str(out)}))
    return 0 if all("error" not in r for r in results.values()) else 1


def _forwarded(argv: list[str] | None) -> list[str]:
    """The caller's flags minus ``--out``/``--algorithms`` (the driver sets those per subprocess)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    kept, skip = [], False
    for item in argv:
        if skip:
            skip = False
            continue
        if item in ("--out", "--algorithms", "--one"):
            skip = True
            continue
        if item.startswith(("--out=", "--algorithms=", "--one=")):
            continue
        kept.append(item)
    return kept


if __name__ == "__main__":
    sys.exit(main())
