"""``star teacher``, ``star rollout`` and ``star serve``: run agents on query sets.

- ``star teacher``: a teacher (the programmatic expert or an OpenAI-compatible model) plays every query;
  format-valid, strictly passing episodes become a TRL conversational SFT set (``train.jsonl``) with
  ``stats.json`` and ``episodes.parquet``.
- ``star rollout``: evaluate any model (a checkpoint folder, a preset, a vLLM engine or an endpoint) on
  a query set; one parquet row per episode (plan, verdicts, turns, tokens, termination).
- ``star serve``: an OpenAI-compatible HTTP endpoint for a transformers checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from star_lib.cli import device, non_negative_float, positive_int, probability, rate


def register(sub: Any) -> None:
    """Add the ``teacher``, ``rollout`` and ``serve`` subcommands."""
    _register_teacher(sub)
    _register_rollout(sub)
    _register_serve(sub)


# ───────────────────────────── shared arguments ─────────────────────────────


def _episode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queries", nargs="+", required=True, help="JSONL file(s) of query records")
    p.add_argument("--world", required=True, help="database folder, or synthetic:<tiny|small|full>:<seed>")
    p.add_argument("--limit", type=positive_int, default=None, help="use only the first N queries")
    p.add_argument(
        "--max-turns", type=positive_int, default=30, help="assistant turns per episode (default 30)"
    )
    p.add_argument("--max-new-tokens", type=positive_int, default=1024, help="tokens per turn (default 1024)")
    p.add_argument(
        "--max-context", type=positive_int, default=32768, help="context budget in tokens (default 32768)"
    )
    p.add_argument("--faults", type=rate, default=0.0, help="tool failure rate, e.g. 0.1 (default 0)")
    p.add_argument("--corruption", type=rate, default=0.0, help="tool result corruption rate (default 0)")
    p.add_argument("--eval-mode", choices=("strict", "official"), default="strict")
    p.add_argument("--seed", type=int, default=0, help="seed of sampling and fault injection")
    p.add_argument("--chunk-size", type=positive_int, default=64, help="episodes run in lockstep at once")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _endpoint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"
    )
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="NAME of the env var holding the API key")
    p.add_argument("--concurrency", type=positive_int, default=8, help="requests in flight (default 8)")
    p.add_argument(
        "--temperature", type=non_negative_float, default=0.6, help="sampling temperature (default 0.6)"
    )
    p.add_argument("--top-p", type=probability, default=0.95, help="nucleus mass in (0, 1] (default 0.95)")
    p.add_argument(
        "--tools-mode",
        choices=("system", "template"),
        default="system",
        help="endpoint: tools in the system text (hosted APIs) or as tools= (vLLM / star serve)",
    )


def load_queries(paths: list[str], limit: int | None = None) -> list[Any]:
    """Read query records with :func:`star_lib.io.read_queries`; an ``annotated_plan`` is the reference plan.

    Records without an ``idx`` get their position among all the files' records.

    Raises:
        FileNotFoundError: When a file is missing.
        ValueError: When a record is not a query record (the message names file and line), or ``limit`` < 1.

    """
    from star_lib.io import read_queries

    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be >= 1, got {limit}")
    records: list[Any] = []
    for name in paths:
        file_records = read_queries(name)
        if not file_records:
            raise ValueError(f"--queries {name}: the file holds no query records")
        if any(r.reference_plan is None for r in file_records):
            file_records = _attach_annotated_plans(Path(name), file_records)
        for record in file_records:
            if record.idx is None:
                record = dataclasses.replace(record, idx=len(records))
            records.append(record)
    return records[:limit] if limit is not None else records


def _attach_annotated_plans(path: Path, records: list[Any]) -> list[Any]:
    """Give records of the official train split (JSONL) their ``annotated_plan`` as ``reference_plan``."""
    from star_lib.io import read_jsonl
    from star_lib.travel.plan import PlanParseError, parse_plan

    if path.suffix != ".jsonl":
        return records
    rows = [row for row in read_jsonl(path, "queries") if isinstance(row, dict)]
    if len(rows) != len(records):
        return records
    out = []
    for number, (record, row) in enumerate(zip(records, rows, strict=True), start=1):
        if record.reference_plan is None and row.get("annotated_plan"):
            try:
                plan = parse_plan(row["annotated_plan"])
            except (PlanParseError, ValueError) as exc:
                raise ValueError(f"{path}: record {number}: annotated_plan: {exc}") from None
            record = dataclasses.replace(record, reference_plan=plan)
        out.append(record)
    return out


def _rollout_config(args: argparse.Namespace, **extra: Any) -> Any:
    from star_lib.agent.config import RolloutConfig

    return RolloutConfig(
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        max_context_tokens=args.max_context,
        eval_mode=args.eval_mode,
        seed=args.seed,
        **extra,
    )


def _faults(args: argparse.Namespace) -> Any:
    if not args.faults and not args.corruption:
        return None
    from star_lib.travel.faults import FaultConfig

    return FaultConfig(failure_rate=args.faults, corruption_rate=args.corruption, seed=args.seed)


def _openai_policy(model: str, args: argparse.Namespace, tokenizer: Any = None) -> Any:
    from star_lib.agent.openai_policy import OpenAIConfig, OpenAIPolicy
    from star_lib.agent.policies import SamplingParams

    config = OpenAIConfig(
        model=model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        concurrency=args.concurrency,
        tools_mode=args.tools_mode,
        tool_messages="tool" if args.tools_mode == "template" else "user",
    )
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    return OpenAIPolicy(config, sampling, tokenizer=tokenizer)


# ───────────────────────────── star teacher ─────────────────────────────


def _register_teacher(sub: Any) -> None:
    p = sub.add_parser(
        "teacher",
        help="teacher trajectories → TRL SFT dataset",
        description=(
            "Run a teacher on every query, keep format-valid episodes whose plan passes the strict "
            "evaluator, and write train.jsonl (messages + tools), stats.json and episodes.parquet."
        ),
    )
    _episode_args(p)
    _endpoint_args(p)
    p.add_argument("--teacher", default="expert", help="expert | openai:<model name>")
    p.add_argument("--tokenizer", default=None, help="tokenizer folder, to report token counts")
    p.add_argument("--out", default="data/sft", help="output folder (default data/sft)")
    p.set_defaults(func=run_teacher)


def run_teacher(args: argparse.Namespace) -> int:
    """Build the SFT dataset and print its statistics; return the exit code."""
    from star_lib.agent.expert import ExpertPolicy
    from star_lib.agent.teacher import TEACHER_FILES, build_sft_dataset
    from star_lib.io import atomic_dir, check_output_dir, lock_output
    from star_lib.paths import refuse_overlap
    from star_lib.synth import load_world

    out = check_output_dir(args.out)  # before any work: a bad --out must not cost the whole run
    inputs = {"--queries": args.queries, "--world": args.world, "--tokenizer": args.tokenizer}
    refuse_overlap(inputs, {"--out": out})
    if not (args.teacher == "expert" or (args.teacher.startswith("openai:") and len(args.teacher) > 7)):
        raise ValueError(f"--teacher must be 'expert' or 'openai:<model>', got {args.teacher!r}")
    with lock_output(out):
        tokenizer = _load_tokenizer(args.tokenizer) if args.tokenizer else None
        if args.teacher == "expert":
            policy: Any = ExpertPolicy(seed=args.seed)
        else:
            policy = _openai_policy(args.teacher.split(":", 1)[1], args, tokenizer)
        queries = load_queries(args.queries, args.limit)
        if args.teacher == "expert" and any(q.reference_plan is None for q in queries):
            raise ValueError(
                "the expert needs queries with reference_plan (or annotated_plan): use `star synth` output"
            )
        world = load_world(args.world)
        cfg = _rollout_config(args, reward="none")
        # the dataset is built in a temporary folder: a run that keeps nothing leaves the old output as it was
        with atomic_dir(out, replaces=TEACHER_FILES) as tmp:
            stats = build_sft_dataset(
                policy,
                queries,
                world,
                tmp,
                cfg,
                _faults(args),
                tokenizer=tokenizer,
                chunk_size=args.chunk_size,
                progress=not args.no_progress,
            )
            if stats.kept == 0:
                cause = _failure_cause(tmp / "episodes.parquet")
                raise NothingSucceededError(
                    f"the teacher kept 0 of {stats.total} episodes ({cause}); {out} was left as it was"
                )
    _print_table(f"star teacher → {out}", stats.to_dict())
    return 0


class NothingSucceededError(ValueError):
    """A run in which no episode succeeded (a dead endpoint, a wrong model name): nothing worth writing."""


def _failure_cause(episodes: Any) -> str:
    """Describe why episodes failed: the most common backend error, else the terminations."""
    import polars as pl

    frame = pl.read_parquet(episodes) if isinstance(episodes, Path) else episodes
    if frame.height == 0:
        return "no episodes"
    errors = frame.filter(pl.col("error").is_not_null())
    if errors.height:
        top = errors["error"].value_counts(sort=True).row(0)
        return f"{errors.height} ended with a backend error, most often {str(top[0])[:160]!r}"
    terms = ", ".join(
        f"{k}: {v}"
        for k, v in zip(
            *frame["termination"].value_counts(sort=True).to_dict(as_series=False).values(), strict=True
        )
    )
    return f"terminations {terms}"


def _load_tokenizer(path: str) -> Any:
    from star_lib.train.tokenizer import load_tokenizer

    if not Path(path).is_dir():
        raise FileNotFoundError(f"--tokenizer {path}: no such tokenizer folder")
    tokenizer = load_tokenizer(path)
    if not tokenizer.chat_template:
        raise ValueError(f"tokenizer {path} has no chat template; use a Qwen2.5-style tokenizer folder")
    return tokenizer


# ───────────────────────────── star rollout ─────────────────────────────


def _register_rollout(sub: Any) -> None:
    p = sub.add_parser(
        "rollout",
        help="evaluate a model on a query set → per-episode parquet",
        description="Play every query with a model and write one row per episode (plan, verdicts, tokens).",
    )
    _episode_args(p)
    _endpoint_args(p)
    p.add_argument("--model", required=True, help="checkpoint folder, preset name, or endpoint model name")
    p.add_argument("--backend", choices=("transformers", "vllm", "openai"), default="transformers")
    p.add_argument(
        "--samples", type=positive_int, default=1, help="episodes per query (group_id = query position)"
    )
    p.add_argument(
        "--batch-size", type=positive_int, default=16, help="sequences per generate call (transformers)"
    )
    p.add_argument("--device", type=device, default=None, help="cpu | cuda (default: cuda when available)")
    p.add_argument("--token-ids", choices=("canonical", "sampled"), default="canonical")
    p.add_argument("--out", default="runs/rollout/rollouts.parquet", help="parquet file to write")
    p.set_defaults(func=run_rollout)


def run_rollout(args: argparse.Namespace) -> int:
    """Run the episodes, write the parquet and print a summary; return the exit code."""
    from star_lib.io import check_output_file, lock_output
    from star_lib.paths import refuse_overlap

    if args.samples < 1 or args.chunk_size < 1:
        raise ValueError("--samples and --chunk-size must be >= 1")
    out = check_output_file(args.out)  # before any work: a bad --out must not cost the whole run
    refuse_overlap({"--queries": args.queries, "--world": args.world, "--model": args.model}, {"--out": out})
    with lock_output(out):
        return _rollout(args, out)


def _rollout(args: argparse.Namespace, out: Path) -> int:
    from star_lib.agent.rollout import RolloutStats, episodes_frame, run_episodes
    from star_lib.io import write_parquet_atomic
    from star_lib.synth import load_world

    queries = load_queries(args.queries, args.limit)
    policy = _rollout_policy(args)
    world = load_world(args.world)
    cfg = _rollout_config(args, token_ids=args.token_ids)
    jobs = [(q, i) for i, q in enumerate(queries) for _ in range(args.samples)]
    stats = RolloutStats()
    episodes: list[Any] = []
    for start in range(0, len(jobs), args.chunk_size):
        chunk = jobs[start : start + args.chunk_size]
        run = run_episodes(
            policy,
            [q for q, _ in chunk],
            world,
            cfg,
            _faults(args),
            group_ids=[g for _, g in chunk],
            stats=stats,
            progress=not args.no_progress,
        )
        for ep in run:
            ep.index += start
        episodes.extend(run)
    frame = episodes_frame(episodes)
    failed = sum(1 for ep in episodes if ep.error is not None)
    if episodes and failed == len(episodes):
        raise NothingSucceededError(
            f"all {failed} episodes failed in the backend ({_failure_cause(frame)}); {out} was not written"
        )
    write_parquet_atomic(out, frame)
    if failed:
        import sys

        print(
            f"star rollout: warning: {failed} of {len(episodes)} episodes failed in the backend "
            f"({_failure_cause(frame)})",
            file=sys.stderr,
        )
    _print_table(f"star rollout → {out}", _summary(frame, stats))
    return 0


def _rollout_policy(args: argparse.Namespace) -> Any:
    from star_lib.agent.policies import SamplingParams, TransformersPolicy, VLLMPolicy

    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    if args.backend == "openai":
        return _openai_policy(args.model, args)
    if args.backend == "vllm":
        import importlib.util

        from star_lib.train.models import resolve_model_source

        if importlib.util.find_spec("vllm") is None:
            raise ValueError(
                "--backend vllm needs vLLM, which is not installed here: pip install 'star-lab[gpu]' on a "
                "CUDA machine, or use --backend transformers"
            )
        return VLLMPolicy(resolve_model_source(args.model), sampling=sampling)
    model, tokenizer = load_model(args.model, args.device)
    return TransformersPolicy(model, tokenizer, sampling, batch_size=args.batch_size)


def load_model(name: str, device_name: str | None, option: str = "--model") -> tuple[Any, Any]:
    """Load a checkpoint folder, preset or hub model for inference on a checked device.

    Raises:
        ValueError: naming ``--device`` when the device is not here, or ``option`` when the model cannot be
            loaded (a hub id with no hub reachable and no cached copy, a folder without weights).

    """
    from star_lib.cli import check_device
    from star_lib.train.models import load_model_and_tokenizer

    device_name = check_device(device_name)
    try:
        model, tokenizer = load_model_and_tokenizer(name, device=device_name)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or exc.errno is not None:
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"{option} {name!r} could not be loaded ({first}); pass a local checkpoint folder, or put the "
            "model in the Hugging Face cache / $STAR_MODELS_DIR while the hub is unreachable"
        ) from None
    return model.eval(), tokenizer


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _summary(frame: Any, stats: Any) -> dict[str, Any]:
    n = frame.height
    return {
        "episodes": n,
        "delivery": frame["delivered"].mean() if n else 0.0,
        "commonsense_macro": frame["commonsense_pass"].mean() if n else 0.0,
        "hard_macro": frame["hard_pass"].mean() if n else 0.0,
        "final_pass": frame["final_pass"].mean() if n else 0.0,
        "cs_micro": frame["cs_micro"].mean() if n else 0.0,
        "mean_turns": frame["turns"].mean() if n else 0.0,
        "mean_model_tokens": frame["model_tokens"].mean() if n else 0.0,
        "terminations": dict(
            zip(*frame["termination"].value_counts().to_dict(as_series=False).values(), strict=True)
        ),
        "episodes_per_s": n / stats.total_s if stats.total_s else 0.0,
        "env_share": stats.env_share,
    }


def _print_table(title: str, values: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value")
    for key, value in values.items():
        if isinstance(value, float):
            text = f"{value:.4g}"
        elif isinstance(value, dict):
            text = ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
        else:
            text = str(value)
        table.add_row(key, text)
    Console().print(table)


# ───────────────────────────── star serve ─────────────────────────────


def _register_serve(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a transformers checkpoint over an OpenAI-compatible HTTP API",
        description="POST /v1/chat/completions for one local model (for demos, tests and local teachers). "
        "One generation runs at a time; --max-queue more wait, further requests get 429 with Retry-After.",
    )
    p.add_argument("--model", required=True, help="checkpoint folder or preset name")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback)")
    p.add_argument("--port", type=_tcp_port, default=8000, help="TCP port 1..65535 (default 8000)")
    p.add_argument("--api-key-env", default=None, help="NAME of an env var: require its value as Bearer key")
    p.add_argument("--device", type=device, default=None, help="cpu | cuda (default: cuda when available)")
    p.add_argument(
        "--max-queue", type=positive_int, default=32, help="requests waiting for the model (default 32)"
    )
    p.add_argument(
        "--max-connections", type=positive_int, default=128, help="connections served at once (default 128)"
    )
    p.add_argument(
        "--socket-timeout",
        type=_seconds,
        default=30.0,
        help="seconds before an idle or stalled connection is closed (default 30)",
    )
    p.add_argument(
        "--max-context",
        type=positive_int,
        default=None,
        help="prompt + completion tokens allowed (default: the model's max_position_embeddings)",
    )
    p.set_defaults(func=run_serve)


def _tcp_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number; use 1..65535") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is outside 1..65535")
    return port


def _seconds(text: str) -> float:
    value = non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds > 0")
    return value


def run_serve(args: argparse.Namespace) -> int:
    """Serve until interrupted; return the exit code.

    The address and the model path are checked before the model loads, so a port in use, a bad host or
    a missing folder fail at once with one sentence naming the option (``ValueError``/``FileNotFoundError``).
    """
    from star_lib.agent.policies import TransformersPolicy
    from star_lib.agent.serve import ChatServer, check_listen_address
    from star_lib.cli import check_device, check_model
    from star_lib.train.models import load_model_and_tokenizer

    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise ValueError(f"environment variable {args.api_key_env} is empty: export the key to require")
    check_listen_address(args.host, args.port, host_option="--host", port_option="--port")
    check_model(args.model)
    model, tokenizer = load_model_and_tokenizer(args.model, device=check_device(args.device))
    server = ChatServer(
        TransformersPolicy(model.eval(), tokenizer, batch_size=1),
        model_name=args.model,
        host=args.host,
        port=args.port,
        api_key=key,
        max_queue=args.max_queue,
        max_connections=args.max_connections,
        socket_timeout_s=args.socket_timeout,
        max_context_tokens=args.max_context,
    )
    print(f"serving {args.model} at {server.base_url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
