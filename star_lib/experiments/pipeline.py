"""The real stages, wired to ``star_lib``: world → synth → teacher → sft → rl → eval → qa-eval.

Each ``run_<stage>(config, inputs, out_dir)`` calls the stage package's own function and writes the files
the runner gathers (``metrics.parquet`` with ``step``/``metric``/``value``, ``rollouts.parquet``,
``eval.parquet``, ``qa.parquet``). Nothing here computes a result itself: it reads inputs, calls
``star_lib``, writes outputs.

What each stage reads (``inputs``) and writes:

========  ==========================================  ==================================================
stage     reads                                       writes
========  ==========================================  ==================================================
world     —                                           ``db/`` (official CSVs), ``summary.json``
synth     world ``db/``                               ``base/`` (SFT + held-out test), ``rl/`` (RL prompts)
teacher   world, synth ``base/train.jsonl``           ``train.jsonl`` (TRL conversational SFT set), rollouts
sft       teacher ``train.jsonl``                     ``model/``, metrics
rl        sft ``model/`` (or the preset), synth ``rl/``  ``model/``, metrics, rollouts
eval      world, synth ``base/test.jsonl``, the model ``eval.parquet``, ``rollouts.parquet``, metrics
          (rl > sft > the expert teacher)
qa-eval   the latest model                            ``qa.parquet``, metrics
========  ==========================================  ==================================================

The eval stage is checkpointed: it runs its queries in chunks, saving each chunk's episodes under
``_checkpoints/``; a preempted (requeued) job resumes after the last saved chunk, and because episode ``i``
always seeds its faults with ``seed + i``, the resumed result equals an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from star_lib.experiments.artifacts import CHECKPOINT_DIR
from star_lib.experiments.config import ConfigError, ExperimentConfig, parse_difficulty, read_config
from star_lib.experiments.stages import Registry, Stage
from star_lib.io import read_queries, write_json_atomic, write_jsonl_atomic, write_parquet_atomic

# ───────────────────────────── shared helpers ─────────────────────────────


def metrics_rows(values: Mapping[str, float], step: int | None = None) -> list[dict[str, Any]]:
    """Return final (``step=None``) or per-step metric rows from a flat dict, numeric values only."""
    return [
        {"step": step, "metric": key, "value": float(value)}
        for key, value in values.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ]


def write_metrics(out_dir: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``metrics.parquet`` (``step`` nullable int, ``metric``, ``value``) atomically."""
    import polars as pl

    frame = pl.DataFrame(
        {
            "step": pl.Series([r.get("step") for r in rows], dtype=pl.Int64),
            "metric": pl.Series([str(r["metric"]) for r in rows], dtype=pl.String),
            "value": pl.Series([float(r["value"]) for r in rows], dtype=pl.Float64),
        }
    )
    return write_parquet_atomic(out_dir / "metrics.parquet", frame)


def load_world(folder: Path) -> Any:
    """Return the world a ``world`` stage wrote: a ``World``, or a ``WorldSet`` of per-query worlds."""
    from star_lib.travel.worldset import load_worlds

    return load_worlds(folder)


def fault_config(cfg: Any, seed: int) -> Any:
    """Return the experiment's tool-fault axes as a ``FaultConfig`` (None when all are zero)."""
    if not (cfg.tool_failure_rate or cfg.tool_latency_ms or cfg.tool_corruption_rate):
        return None
    from star_lib.travel.faults import FaultConfig

    return FaultConfig(
        failure_rate=float(cfg.tool_failure_rate),
        latency_ms=float(cfg.tool_latency_ms),
        corruption_rate=float(cfg.tool_corruption_rate),
        seed=seed,
    )


def run_chunks(
    items: Sequence[Any],
    chunk_size: int,
    work: Path,
    compute: Callable[[int, Sequence[Any]], Any] | None,
    tag: str = "",
    *,
    parallel: Callable[[list[int]], Iterable[tuple[int, Any]]] | None = None,
) -> tuple[list[Any], list[dict[str, Any]]]:
    """Run ``compute(start, chunk)`` over consecutive chunks, checkpointing each result; resume after a stop.

    Each finished chunk is saved (atomically) as ``_checkpoints/chunks[-<tag>]/<start>.parquet`` —
    ``compute`` returns a polars frame — and logged in ``_checkpoints/progress[-<tag>].jsonl`` with the
    process id and the Slurm restart count, so a resumed run can be told apart from a rerun. A log line torn
    by a kill is skipped (the chunk files, written atomically, are what counts). ``parallel``, when given,
    computes the missing chunks instead of ``compute``: called with their starts, it yields
    ``(start, frame)`` in any order (:mod:`star_lib.experiments.evalpool`).

    Returns:
        The frames in order, and the log of which process computed which chunk (for ``stage.json``).

    """
    import polars as pl

    suffix = f"-{tag}" if tag else ""
    folder = work / CHECKPOINT_DIR / f"chunks{suffix}"
    folder.mkdir(parents=True, exist_ok=True)
    log_path = work / CHECKPOINT_DIR / f"progress{suffix}.jsonl"
    frames = {}
    missing = []
    for start in range(0, len(items), chunk_size):
        path = folder / f"{start:08d}.parquet"
        if path.is_file():
            frames[start] = pl.read_parquet(path)
        else:
            missing.append(start)
    if parallel is None:
        assert compute is not None, "run_chunks needs compute or parallel"
        computed = ((start, compute(start, items[start : start + chunk_size])) for start in missing)
    else:
        computed = parallel(missing) if missing else iter(())
    for start, frame in computed:
        write_parquet_atomic(folder / f"{start:08d}.parquet", frame)
        torn = log_path.is_file() and log_path.stat().st_size and not log_path.read_bytes().endswith(b"\n")
        with open(log_path, "a", encoding="utf-8") as log:
            restart = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
            entry = {"start": start, "restart": restart, "pid": os.getpid(), "t": time.time()}
            log.write(("\n" if torn else "") + json.dumps(entry) + "\n")
        frames[start] = frame
    return [frames[start] for start in sorted(frames)], _log_entries(log_path)


def _log_entries(path: Path) -> list[dict[str, Any]]:
    """Return the complete lines of a progress log (a line torn by a kill is skipped)."""
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


# ───────────────────────────── world ─────────────────────────────

WORLD_SOURCES: tuple[str, ...] = ("synthetic", "synthetic-per-query", "csv")


@dataclass(frozen=True)
class WorldStageConfig:
    """Which database the experiment plans over."""

    source: str = "synthetic"
    """``synthetic`` (one seeded generated world), ``synthetic-per-query`` (every task in its own seeded
    world, :mod:`star_lib.travel.worldset`: the tiny recipe) or ``csv`` (official TravelPlanner CSVs in
    ``csv_dir``)."""
    scale: str = "small"
    """Synthetic world size: ``tiny`` | ``small`` | ``full`` (default ``small``: one ``tiny`` world has too
    few routes for varied SFT/test splits of every difficulty; per-query worlds are ``tiny``)."""
    data_seed: int = 0
    """Seed of the synthetic world (per-query worlds take theirs from the tasks)."""
    csv_dir: str | None = None
    """Folder of official CSVs (flat or nested layout) when ``source: csv``."""

    def __post_init__(self) -> None:
        if self.source not in WORLD_SOURCES:
            raise ValueError(f"source {self.source!r} is not allowed; choose one of {list(WORLD_SOURCES)}")
        if self.scale not in ("tiny", "small", "full"):
            raise ValueError(f"scale {self.scale!r} is not allowed; choose one of ['tiny', 'small', 'full']")
        if self.source == "csv" and not self.csv_dir:
            raise ValueError("source csv needs csv_dir (a folder of official TravelPlanner CSVs)")


def run_world(cfg: WorldStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Build or load the world and write it as official CSVs under ``db/`` (per-query: its spec only)."""
    from star_lib.travel.world import World
    from star_lib.travel.worldset import WorldSet

    if cfg.source == "synthetic-per-query":
        worlds = WorldSet(cfg.scale)
        worlds.write_spec(out / "db")
        summary: dict[str, Any] = {"kind": worlds.spec, "scale": cfg.scale}
    else:
        world = (
            World.synthetic(seed=cfg.data_seed, scale=cfg.scale)
            if cfg.source == "synthetic"
            else World.from_csv_dir(cfg.csv_dir)
        )
        world.to_csv_dir(out / "db")
        summary = world.summary()
    write_json_atomic(out / "summary.json", summary)
    write_metrics(out, metrics_rows({f"world/{k}": v for k, v in summary.items()}))
    return {}


# ───────────────────────────── synth ─────────────────────────────


@dataclass(frozen=True)
class SynthStageConfig:
    """Tasks: an SFT/test pool, and the RL prompts (their size and difficulty mix are experiment axes)."""

    rl_data_size: int = 1000
    """RL prompts (axis)."""
    difficulty: str = "4:3:3"
    """RL prompt difficulty mix (axis)."""
    n_base: int = 200
    """Records of the SFT/test pool (split train/val/test by ``splits``); with per-query worlds, the SFT
    tasks (from ``n_base / per_world`` training worlds)."""
    base_mix: str = "4:3:3"
    """Difficulty mix of the SFT/test pool."""
    data_seed: int = 0
    """Seed of the synthesis (the RL prompts use a derived seed; per-query world seeds derive from it)."""
    ood: dict[str, Any] = field(default_factory=dict)
    """The out-of-distribution split (:mod:`star_lib.experiments.ood`; per-query worlds only): ``n`` tasks
    (``per_world`` per fresh world) drawn with ``days_choices`` and ``mix``, kept when their trip length or
    constraint combination occurs in no training task; written as ``ood/test.jsonl`` + ``ood/shift.json``.
    Empty (the default): no split, and the eval stage scores the held-out tasks only."""
    per_world: int = 4
    """Per-query worlds only: tasks synthesised in each training and RL world."""
    n_test: int = 200
    """Per-query worlds only: held-out tasks, from worlds no training task comes from."""
    test_per_world: int = 2
    """Per-query worlds only: held-out tasks per evaluation world."""
    test_mix: str | None = field(default=None, metadata={"key": "when-set"})
    """Per-query worlds only: difficulty mix of the held-out tasks (None: ``base_mix``). The tiny study's
    difficulty grid scores its arms on ``4:3:3`` tasks while the SFT data stays easy."""
    options: dict[str, Any] = field(default_factory=dict)
    """Other ``star_lib.synth.SynthConfig`` fields (e.g. ``splits``, ``tie_break``, ``days_choices``)."""
    test_queries: str | None = None
    """A query file (``.jsonl``/``.csv``/``.parquet``, official fields, read by ``star_lib.io.read_queries``)
    that is the held-out set instead of a synthesised test split — the 45 real TravelPlanner train queries
    in ``configs/real-tiny.yaml``. All synthesised tasks then train (``splits`` defaults to 1/0/0), and
    synthesis rejects any task equal to one of these queries (``exclude_queries`` defaults to this file)."""

    def __post_init__(self) -> None:
        if self.ood:
            from star_lib.experiments.ood import OODConfig

            OODConfig.from_section(self.ood)  # a bad synth.ood is refused when the config loads
        for name in ("n_base", "per_world", "n_test", "test_per_world"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        parse_difficulty(self.base_mix)
        if self.test_mix is not None:
            parse_difficulty(self.test_mix)
        if self.test_queries is not None and not str(self.test_queries).strip():
            raise ValueError("test_queries is empty: name a query file or leave it out")


def _synth_config(**values: Any) -> Any:
    from star_lib.synth.config import SynthConfig

    return SynthConfig(**values)


def run_synth(cfg: SynthStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Synthesise the SFT/test pool (``base/``) and the RL prompts (``rl/``) with ``star_lib.synth``."""
    from star_lib.synth import synthesize, write_dataset

    world = load_world(inputs["world"])
    rl_mix = ":".join(str(w) for w in parse_difficulty(cfg.difficulty))
    held_out = _test_queries(cfg)
    if held_out is not None:
        from dataclasses import replace

        fixed = {"exclude_queries": cfg.test_queries, "splits": (1.0, 0.0, 0.0)}
        cfg = replace(cfg, options={**fixed, **cfg.options})
    if hasattr(world, "for_query"):
        _synth_per_world(cfg, world, rl_mix, out)
    else:
        if cfg.ood:
            raise ConfigError(
                "synth.ood needs world.source synthetic-per-query: OOD tasks come from worlds no training "
                "task comes from, and a single world has none"
            )
        if cfg.test_mix is not None:
            raise ConfigError(
                "synth.test_mix needs world.source synthetic-per-query: in a single world the test split "
                "is drawn from the base pool, with base_mix"
            )
        options = {"mix": cfg.base_mix, "seed": cfg.data_seed, **cfg.options}
        base = synthesize(world, _synth_config(n=cfg.n_base, **options))
        write_dataset(base, out / "base")
        rl_options = {**cfg.options, "splits": (1.0, 0.0, 0.0)}
        rl = synthesize(
            world, _synth_config(n=cfg.rl_data_size, mix=rl_mix, seed=cfg.data_seed + 7919, **rl_options)
        )
        write_dataset(rl, out / "rl")
    if held_out is not None:
        from star_lib.synth.dataset import record_row

        write_jsonl_atomic(out / "base" / "test.jsonl", [record_row(q) for q in held_out])
        (out / "base" / "test.parquet").unlink(missing_ok=True)  # the empty synthesised split
    counts = {"synth/base_records": _count_lines(out / "base"), "synth/rl_records": _count_lines(out / "rl")}
    if held_out is not None:
        counts["synth/test_queries"] = len(held_out)
    if not (out / "base" / "test.jsonl").is_file() or not _count_lines(out / "base", "test.jsonl"):
        raise ConfigError(
            f"synth produced no held-out test tasks from n_base={cfg.n_base}: raise synth.n_base "
            "(or synth.n_test with per-query worlds) so the test split is not empty"
        )
    write_metrics(out, metrics_rows(counts))
    return {}


def _synth_per_world(cfg: SynthStageConfig, worlds: Any, rl_mix: str, out: Path) -> None:
    """Tasks in per-query worlds: SFT tasks, RL prompts and held-out tasks from disjoint world seeds."""
    import math

    from star_lib.synth.dataset import record_row
    from star_lib.synth.per_world import synthesize_per_world, world_seeds

    def tasks(kind: str, n: int, per_world: int, mix: str, spare: int = 0) -> list[Any]:
        seeds = world_seeds(cfg.data_seed, kind, math.ceil(n / per_world) + spare)
        return synthesize_per_world(worlds, seeds, per_world, mix, cfg.options)[:n]

    base = tasks("train", cfg.n_base, cfg.per_world, cfg.base_mix)
    test_mix = cfg.base_mix if cfg.test_mix is None else cfg.test_mix
    held_out = tasks("eval", cfg.n_test, cfg.test_per_world, test_mix, spare=5)  # a few worlds fail
    rl = tasks("rl", cfg.rl_data_size, cfg.per_world, rl_mix)
    for rel, records in (("base/train.jsonl", base), ("base/test.jsonl", held_out), ("rl/train.jsonl", rl)):
        write_jsonl_atomic(out / rel, [record_row(r) for r in records])
    if cfg.ood:
        _synth_ood(cfg, worlds, [*base, *rl], out)


def _synth_ood(cfg: SynthStageConfig, worlds: Any, training: Sequence[Any], out: Path) -> None:
    """Write the OOD split (``ood/``): tasks outside the training tasks' lengths or constraint combinations.

    Raises:
        ConfigError: Too few such tasks, naming the ``synth.ood`` setting to change.

    """
    from star_lib.experiments.ood import OODConfig, build_ood_split, write_ood_split

    try:
        ood = OODConfig.from_section(cfg.ood)
        records, payload = build_ood_split(ood, worlds, training, cfg.data_seed, cfg.options)
    except ValueError as exc:
        raise ConfigError(f"synth.{exc}") from None
    write_ood_split(out, records, payload)


def _test_queries(cfg: SynthStageConfig) -> list[Any] | None:
    """Return the held-out queries of ``synth.test_queries`` (None when the test split is synthesised).

    Raises:
        ConfigError: The file is missing or holds no query, naming the option and the file.

    """
    if cfg.test_queries is None:
        return None
    path = Path(cfg.test_queries)
    if not path.is_file():
        raise ConfigError(
            f"synth.test_queries: {cfg.test_queries!r} is not a file "
            f"(relative paths are read from {Path.cwd()})"
        )
    queries = list(read_queries(path))
    if not queries:
        raise ConfigError(f"synth.test_queries: {cfg.test_queries!r} holds no query")
    return with_annotated_plans(path, queries)


def with_annotated_plans(path: Path, queries: list[Any]) -> list[Any]:
    """Give the queries of a JSONL file their ``annotated_plan`` as ``reference_plan``.

    The official train split carries its gold plans; with them the expert can act the queries out (the
    eval stage's turn-budget check, an expert baseline).

    Raises:
        ConfigError: An annotated plan that does not parse, naming the file and the line.

    """
    from dataclasses import replace

    from star_lib.io import read_jsonl
    from star_lib.travel.plan import PlanParseError, parse_plan

    if path.suffix != ".jsonl":
        return queries
    rows = [row for row in read_jsonl(path, "queries") if isinstance(row, dict)]
    if len(rows) != len(queries):
        return queries
    out = []
    for number, (query, row) in enumerate(zip(queries, rows, strict=True), start=1):
        if query.reference_plan is None and row.get("annotated_plan"):
            try:
                query = replace(query, reference_plan=parse_plan(row["annotated_plan"]))
            except (PlanParseError, ValueError) as exc:
                raise ConfigError(f"{path}: line {number}: annotated_plan: {exc}") from None
        out.append(query)
    return out


def _count_lines(folder: Path, pattern: str = "*.jsonl") -> int:
    return sum(sum(1 for line in open(p, encoding="utf-8") if line.strip()) for p in folder.glob(pattern))


# ───────────────────────────── teacher ─────────────────────────────

TEACHERS: tuple[str, ...] = ("expert",)


@dataclass(frozen=True)
class TeacherStageConfig:
    """Trajectories for SFT, written by a teacher acting out the synthesised tasks (``train`` split)."""

    teacher: str = "expert"
    """``expert``: the programmatic expert of the experiment's protocol acting out each reference plan."""
    teacher_seed: int = 0
    """Seed of the expert's wording choices."""
    max_records: int | None = None
    """Use at most this many records (None: all)."""
    protocol: str = "react"
    """Episode protocol (axis): the teacher writes its trajectories in it."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.agent.RolloutConfig`` fields (``max_turns``, …)."""

    def __post_init__(self) -> None:
        if self.teacher not in TEACHERS:
            raise ValueError(f"teacher {self.teacher!r} is not allowed; choose one of {list(TEACHERS)}")
        if self.max_records is not None and self.max_records < 1:
            raise ValueError(f"max_records must be >= 1 or null, got {self.max_records}")


def rollout_config(protocol: str, **values: Any) -> Any:
    """Return the episode settings of ``protocol`` with ``values`` on top (compact: its short limits)."""
    from star_lib.agent.compact import compact_rollout_config
    from star_lib.agent.config import RolloutConfig

    return compact_rollout_config(**values) if protocol == "compact" else RolloutConfig(**values)


def _expert(protocol: str, seed: int) -> Any:
    """Return the programmatic expert that speaks ``protocol``."""
    from star_lib.agent.factory import make_policy

    return make_policy("expert", protocol=protocol, seed=seed)


def run_teacher(cfg: TeacherStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Act out the records with the expert; writes the TRL conversational SFT set ``train.jsonl``."""
    from star_lib.agent.teacher import build_sft_dataset

    world = load_world(inputs["world"])
    queries = read_queries(inputs["data"])[: cfg.max_records]
    values = {"reward": "none", **({"max_turns": 30} if cfg.protocol == "compact" else {}), **cfg.options}
    stats = build_sft_dataset(
        _expert(cfg.protocol, cfg.teacher_seed), queries, world, out, rollout_config(cfg.protocol, **values)
    )
    if (out / "episodes.parquet").is_file():
        os.replace(out / "episodes.parquet", out / "rollouts.parquet")
    write_metrics(out, metrics_rows({f"teacher/{k}": v for k, v in stats.to_dict().items()}))
    return {}


# ───────────────────────────── eval ─────────────────────────────


EVAL_MODELS: tuple[str, ...] = ("base", "sft", "rl")
"""Models an eval stage can compare: the untrained model SFT starts from, the SFT model, the RL model."""
POLICY_BACKENDS: tuple[str, ...] = ("transformers", "fast")
"""How a model generates: HF ``generate`` (any model) or the KV-cached CPU sampler (small Qwen2 models)."""


@dataclass(frozen=True)
class EvalStageConfig:
    """Evaluate policies on held-out tasks (TravelPlanner metrics, spec §5)."""

    seed: int = 0
    """Evaluation seed (axis): fault draws of episode ``i`` use ``seed + i``; sampling (if any) is seeded."""
    reward: str = "sum"
    """Reward design (axis): also reported as ``reward/mean`` over the evaluation episodes."""
    curriculum_boundaries: tuple[float, float] = (1 / 3, 2 / 3)
    """Curriculum boundaries (axis); evaluation scores CURRICULUM at progress 1 (its last phase)."""
    tool_failure_rate: float = 0.0
    """Tool failure rate during evaluation (axis)."""
    tool_latency_ms: float = 0.0
    """Tool latency during evaluation (axis)."""
    tool_corruption_rate: float = 0.0
    """Tool corruption rate during evaluation (axis)."""
    protocol: str = "react"
    """Episode protocol (axis)."""
    models: tuple[str, ...] = ()
    """Models evaluated on the same tasks, from :data:`EVAL_MODELS`; the last one is the run's result
    (``eval/…`` metrics, ``eval.parquet``), each one also reports ``eval/<model>/…`` and the last one its
    paired difference from each other one (``eval/paired/<last>-<other>/mean|se``, SUM per task).
    Empty: the latest trained model (rl, else sft), or the expert when no model is trained."""
    policy: str = "transformers"
    """Generation backend of a model, from :data:`POLICY_BACKENDS`."""
    temperature: float = 0.0
    """Sampling temperature; 0 (greedy, the default) makes a score independent of sampling luck."""
    max_queries: int | None = None
    """Evaluate at most this many queries (None: the whole split); also caps the OOD split."""
    ood: dict[str, Any] = field(default_factory=dict)
    """``star_lib.agent.RolloutConfig`` fields for the OOD split (``synth.ood``) over ``options``: its longer
    trips need more turns and context, e.g. ``{max_turns: 32, max_context_tokens: 2048}``. When the synth
    stage wrote the split, every evaluated model is also scored on it: ``ood/…`` (the last model, like
    ``eval/…``), ``ood/<model>/…`` when several are evaluated, ``ood/long/…`` and ``ood/constraints/…`` on the
    tasks carrying each shift, and ``ood/paired/<last>-<other>/mean|se``; its episodes go to
    ``ood.parquet``."""
    chunk_size: int = 8
    """Episodes per checkpointed chunk (a preempted job resumes after the last chunk)."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.agent.RolloutConfig`` fields (``max_turns``, ``eval_mode``, …)."""
    also_modes: tuple[str, ...] = ()
    """Evaluator modes to score the same episodes' plans in as well (``official`` beside the default
    ``strict``): a plan does not depend on the mode, so one set of episodes gives both. Each mode ``m``
    reports ``eval/m/…``, ``eval/<model>/m/…`` and ``eval/m/paired/…``, and adds ``m/…`` verdict columns
    (``m/final_pass``, ``m/cs/<check>``, …) to the episode tables."""
    also_clean: bool = field(default=False, metadata={"key": "when-set"})
    """Also evaluate the same models on the same held-out tasks with no tool faults (the tool-fault axes
    apply to ``eval/…``): reported as ``eval/clean/…`` (``eval/<model>/clean/…`` when several models are
    evaluated) and ``eval/clean/paired/noisy-clean/mean|se`` (SUM per task), so a noise arm is read both
    noisy and clean. Without faults the clean scores are the run's own. Off by default (and then not part
    of the cache key)."""

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")
        _check_ood_options(self.ood)
        object.__setattr__(self, "also_modes", tuple(self.also_modes))
        primary = self.options.get("eval_mode", "strict")
        odd = [m for m in self.also_modes if m not in ("strict", "official") or m == primary]
        if odd or len(set(self.also_modes)) != len(self.also_modes):
            raise ValueError(
                f"also_modes: {list(self.also_modes)} must be distinct evaluator modes from "
                f"['strict', 'official'] other than the episodes' own mode {primary!r}"
            )
        if self.max_queries is not None and self.max_queries < 1:
            raise ValueError(f"max_queries must be >= 1 or null, got {self.max_queries}")
        object.__setattr__(self, "models", tuple(self.models))
        bad = [m for m in self.models if m not in EVAL_MODELS]
        if bad or len(set(self.models)) != len(self.models):
            raise ValueError(f"models: {list(self.models)} must be distinct names from {list(EVAL_MODELS)}")
        if self.policy not in POLICY_BACKENDS:
            raise ValueError(f"policy {self.policy!r} is not allowed; choose one of {list(POLICY_BACKENDS)}")
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")


def _eval_models(cfg: EvalStageConfig, inputs: Mapping[str, Path]) -> list[tuple[str, Path | None]]:
    """Return ``(name, model folder)`` per evaluated policy; ``("expert", None)`` without a trained model."""
    paths = {
        "base": inputs["sft"] / "base" if "sft" in inputs else None,
        "sft": inputs["sft"] / "model" if "sft" in inputs else None,
        "rl": inputs.get("rl"),
    }
    if not cfg.models:
        latest = paths["rl"] or paths["sft"]
        return [("rl" if paths["rl"] else "sft", latest)] if latest else [("expert", None)]
    missing = [m for m in cfg.models if paths[m] is None or not paths[m].is_dir()]  # type: ignore[union-attr]
    if missing:
        raise ConfigError(
            f"eval.models {list(cfg.models)}: no {missing} model in this run — add the stage that trains it "
            f"(base and sft come from sft, rl from rl) or drop it from eval.models"
        )
    return [(m, paths[m]) for m in cfg.models]


def _load_policy(cfg: EvalStageConfig, path: Path | None) -> Any:
    """Return the policy of a model folder with the configured backend (the expert when ``path`` is None).

    Raises:
        star_lib.agent.protocol.ProtocolMismatchError: The model was trained on another protocol.

    """
    from star_lib.agent.factory import make_policy
    from star_lib.agent.policies import SamplingParams

    if path is None:
        return _expert(cfg.protocol, cfg.seed)
    sampling = SamplingParams(temperature=cfg.temperature, seed=cfg.seed)
    return make_policy(cfg.policy, model=path, sampling=sampling, protocol=cfg.protocol)


def _reward_fn(cfg: EvalStageConfig) -> Callable[[Any], float]:
    """Return the run's reward of an evaluation episode (CURRICULUM at its end, MILESTONE with its credit)."""
    from star_lib import rewards

    def reward(ep: Any) -> float:
        credit = None
        if cfg.reward == "milestone":
            credit = rewards.milestone_reward(ep.plan, ep.steps, ep.query, ep.malformed, ep.report)
        return rewards.reward_value(
            cfg.reward, ep.report, ep.malformed, boundaries=cfg.curriculum_boundaries, credit=credit
        )

    return reward


def run_eval(cfg: EvalStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Run each policy on the held-out queries in checkpointed chunks; write episode tables and metrics.

    A greedy evaluation on the fast CPU sampler runs its chunks in ``STAR_EVAL_PROCESSES`` one-thread
    processes when that is set (:mod:`star_lib.experiments.evalpool`); the episodes are the same.
    """
    queries = read_queries(inputs["data"])[: cfg.max_queries]
    with _eval_workers(cfg, inputs["world"], -(-len(queries) // cfg.chunk_size)) as workers:
        info = _evaluate(cfg, inputs, out, queries, workers)
    return {**info, "processes": workers.pool.processes if workers else 1}


@contextlib.contextmanager
def _eval_workers(cfg: EvalStageConfig, world_dir: Path, chunks: int) -> Iterator[_Workers | None]:
    """Worker processes for a greedy fast-sampler evaluation when ``STAR_EVAL_PROCESSES`` asks (else None)."""
    from star_lib.experiments.evalpool import ChunkPool, eval_processes, pool_size, splittable

    requested = eval_processes()
    if requested <= 1 or not splittable(cfg.policy, cfg.temperature):
        yield None
        return
    import torch

    threads = torch.get_num_threads()
    processes = pool_size(requested, threads, chunks)
    if processes <= 1:
        yield None
        return
    try:
        with ChunkPool(processes, max(1, threads // processes)) as pool:
            yield _Workers(pool, world_dir)
    finally:
        _WORKER_CACHE.clear()  # this process computed chunks too: drop its copy of the policy and world


def _evaluate(
    cfg: EvalStageConfig, inputs: Mapping[str, Path], out: Path, queries: list[Any], workers: _Workers | None
) -> dict[str, Any]:
    """:func:`run_eval` once its worker processes (if any) are up: every table, metric and file it writes."""
    import polars as pl

    from star_lib.agent.summary import episode_summary, paired_difference
    from star_lib.travel.metrics import compute_metrics

    world = load_world(inputs["world"])
    models = _eval_models(cfg, inputs)
    tables: dict[str, pl.DataFrame] = {}
    rows: list[dict[str, Any]] = []
    chunk_log: list[dict[str, Any]] = []
    for name, path in models:
        tag = name if len(models) > 1 else ""
        first = name == models[0][0]  # the tasks' turn budget is checked once, with the first model's chunks
        tables[name], chunk_log = _episodes(cfg, path, queries, world, out, tag, workers, check=first)
        pairs = tables[name].select("query_index", "report").iter_rows()
        reports = {i: _report_from_json(text) for i, text in pairs}
        values = compute_metrics(queries, [reports.get(i) for i in range(len(queries))])
        values.update({k: v for k, v in episode_summary(tables[name]).items() if k not in values})
        tables[name], also = _score_modes(cfg, tables[name], queries, world)
        if len(models) > 1:
            rows += metrics_rows({f"eval/{name}/{k}": v for k, v in values.items()})
            rows += metrics_rows({f"eval/{name}/{m}/{k}": v for m, vs in also.items() for k, v in vs.items()})
    primary, episodes = models[-1][0], tables[models[-1][0]]
    rows += metrics_rows({f"eval/{k}": v for k, v in values.items()})
    rows += metrics_rows({f"eval/{m}/{k}": v for m, vs in also.items() for k, v in vs.items()})
    for mode in cfg.also_modes:
        for other, _ in models[:-1]:
            diff = paired_difference(
                episodes[f"{mode}/sum"].to_list(), tables[other][f"{mode}/sum"].to_list()
            )
            rows += metrics_rows({f"eval/{mode}/paired/{primary}-{other}/{k}": v for k, v in diff.items()})
    mean_reward = float(episodes["run_reward"].mean() or 0.0) if episodes.height else 0.0
    rows += metrics_rows({"reward/mean": mean_reward})
    for other, _ in models[:-1]:
        diff = paired_difference(episodes["sum"].to_list(), tables[other]["sum"].to_list())
        rows += metrics_rows({f"eval/paired/{primary}-{other}/{k}": v for k, v in diff.items()})
    rows += _eval_ood(cfg, inputs, models, world, out, workers)
    if cfg.also_clean:
        rows += _eval_clean(cfg, models, queries, world, out, tables, workers)
    write_metrics(out, rows)
    # eval.parquet: the flat per-episode table; rollouts.parquet adds the transcript and verdicts (explorer).
    every = pl.concat(
        [t.with_columns(pl.lit(m).alias("model")) for m, t in tables.items()], how="diagonal_relaxed"
    )
    eval_cols = [c for c in every.columns if c not in ("report", "messages")]
    write_parquet_atomic(out / "eval.parquet", episodes.select([c for c in eval_cols if c != "model"]))
    if len(models) > 1:
        write_parquet_atomic(out / "eval_models.parquet", every.select(eval_cols))
    policy_kind = "expert" if models[-1][1] is None else "model"
    write_parquet_atomic(out / "rollouts.parquet", episodes.with_columns(pl.lit(policy_kind).alias("policy")))
    return {"chunk_log": chunk_log, "policy": policy_kind, "models": [m for m, _ in models]}


def _eval_clean(
    cfg: EvalStageConfig,
    models: Sequence[tuple[str, Path | None]],
    queries: Sequence[Any],
    world: Any,
    out: Path,
    noisy: Mapping[str, Any],
    workers: _Workers | None = None,
) -> list[dict[str, Any]]:
    """Score every model again with no tool faults (``eval.also_clean``): ``eval/clean/…`` rows."""
    import dataclasses

    from star_lib.agent.summary import episode_summary, paired_difference
    from star_lib.travel.metrics import compute_metrics

    clean_cfg = dataclasses.replace(cfg, tool_failure_rate=0.0, tool_latency_ms=0.0, tool_corruption_rate=0.0)
    faulty = fault_config(cfg, seed=0) is not None
    rows: list[dict[str, Any]] = []
    for name, path in models:
        table = noisy[name]
        if faulty:
            table, _ = _episodes(clean_cfg, path, queries, world, out, f"clean-{name}", workers, check=False)
        reports = dict(table.select("query_index", "report").iter_rows())
        values = compute_metrics(queries, [_report_from_json(reports.get(i)) for i in range(len(queries))])
        values.update({k: v for k, v in episode_summary(table).items() if k not in values})
        if len(models) > 1:
            rows += metrics_rows({f"eval/{name}/clean/{k}": v for k, v in values.items()})
        if name == models[-1][0]:
            rows += metrics_rows({f"eval/clean/{k}": v for k, v in values.items()})
            diff = paired_difference(noisy[name]["sum"].to_list(), table["sum"].to_list())
            rows += metrics_rows({f"eval/clean/paired/noisy-clean/{k}": v for k, v in diff.items()})
    return rows


def _score_modes(
    cfg: EvalStageConfig, table: Any, queries: Sequence[Any], world: Any
) -> tuple[Any, dict[str, dict[str, float]]]:
    """Score a model's episodes in each of ``cfg.also_modes``; add ``hard_total`` and ``<mode>/…`` columns.

    Returns:
        The table with the new columns, and per mode the headline metrics of :func:`compute_metrics`.

    """
    import polars as pl

    from star_lib import rewards
    from star_lib.travel.evaluate import evaluate_plan
    from star_lib.travel.metrics import compute_metrics, hard_denominator
    from star_lib.types import COMMONSENSE_KEYS, HARD_KEYS, DayPlan

    index = table["query_index"].to_list()
    table = table.with_columns(
        pl.Series("hard_total", [hard_denominator(queries[i]) for i in index], pl.Int64)
    )
    values: dict[str, dict[str, float]] = {}
    for mode in cfg.also_modes:
        reports = []
        for i, plan_json, malformed in table.select("query_index", "plan", "malformed").iter_rows():
            plan = None if plan_json is None else tuple(DayPlan(**d) for d in json.loads(plan_json))
            query = queries[i]
            own = world.for_query(query) if hasattr(world, "for_query") else world
            reports.append((evaluate_plan(query, plan, own, mode), bool(malformed)))
        columns: dict[str, list[Any]] = {
            "delivered": [r.delivered for r, _ in reports],
            "commonsense_pass": [bool(r.commonsense_all) for r, _ in reports],
            "hard_pass": [bool(r.hard_all) for r, _ in reports],
            "final_pass": [bool(r.final_pass) for r, _ in reports],
            "cs_micro": [float(r.cs_micro) for r, _ in reports],
            "hard_micro": [float(r.hard_micro) for r, _ in reports],
            "sum": [float(rewards.sum_reward(r, m)) for r, m in reports],
        }
        for key in COMMONSENSE_KEYS:
            columns[f"cs/{key}"] = [_verdict(r.commonsense.get(key)) for r, _ in reports]
        for key in HARD_KEYS:
            columns[f"hard/{key}"] = [_verdict((r.hard or {}).get(key)) for r, _ in reports]
        table = table.with_columns(
            [pl.Series(f"{mode}/{k}", v, dtype=pl.Boolean if k.startswith(("cs/", "hard/")) else None)
             for k, v in columns.items()]
        )  # fmt: skip
        by_index = {i: r for i, (r, _) in zip(index, reports, strict=True)}
        values[mode] = compute_metrics(queries, [by_index.get(i) for i in range(len(queries))])
    return table, values


def _verdict(result: Any) -> bool | None:
    """Return a check's verdict as a table cell (None: the check did not apply)."""
    return None if result is None else result.passed


def _check_ood_options(values: Mapping[str, Any]) -> None:
    """Refuse ``eval.ood`` keys that are no ``RolloutConfig`` field (or that the experiment decides)."""
    if not values:
        return
    if not isinstance(values, Mapping):
        raise ValueError(f"ood must be a mapping of RolloutConfig fields, got {values!r}")
    import dataclasses

    from star_lib.agent.config import RolloutConfig

    allowed = sorted({f.name for f in dataclasses.fields(RolloutConfig)} - {"seed", *_PROTOCOL_FIELDS})
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ValueError(f"ood: unknown key(s) {unknown}; allowed keys are {allowed}")


def _eval_ood(
    cfg: EvalStageConfig,
    inputs: Mapping[str, Path],
    models: Sequence[tuple[str, Path | None]],
    world: Any,
    out: Path,
    workers: _Workers | None = None,
) -> list[dict[str, Any]]:
    """Score every model on the OOD split the synth stage wrote (none: no rows); writes ``ood.parquet``.

    Raises:
        ConfigError: An OOD turn limit the expert cannot finish in, naming ``eval.ood.max_turns``.

    """
    if "ood" not in inputs:
        return []
    import dataclasses

    import polars as pl

    from star_lib.agent.summary import episode_summary, paired_difference
    from star_lib.experiments.ood import SHIFTS, read_shifts
    from star_lib.travel.metrics import compute_metrics

    queries = read_queries(inputs["ood"] / "test.jsonl")[: cfg.max_queries]
    shifts = {s: flags[: len(queries)] for s, flags in read_shifts(inputs["ood"]).items()}
    ood_cfg = dataclasses.replace(cfg, options={**cfg.options, **cfg.ood})
    rows: list[dict[str, Any]] = []
    tables: dict[str, Any] = {}
    primary = models[-1][0]
    for name, path in models:
        tag, first = f"ood-{name}", name == models[0][0]
        try:
            table, _ = _episodes(ood_cfg, path, queries, world, out, tag, workers, check=first)
        except TurnBudgetError as exc:
            raise TurnBudgetError(f"on the OOD split, {str(exc).replace('eval.', 'eval.ood.')}") from None
        tables[name] = table
        reports = dict(table.select("query_index", "report").iter_rows())
        every = [_report_from_json(reports.get(i)) for i in range(len(queries))]
        values = compute_metrics(queries, every)
        values.update({k: v for k, v in episode_summary(table).items() if k not in values})
        for shift in SHIFTS:
            picked = [i for i, flag in enumerate(shifts[shift]) if flag]
            if picked:
                part = compute_metrics([queries[i] for i in picked], [every[i] for i in picked])
                values.update({f"{shift}/{k}": v for k, v in part.items()})
        if len(models) > 1:
            rows += metrics_rows({f"ood/{name}/{k}": v for k, v in values.items()})
        if name == primary:
            rows += metrics_rows({f"ood/{k}": v for k, v in values.items()})
    for other, _ in models[:-1]:
        diff = paired_difference(tables[primary]["sum"].to_list(), tables[other]["sum"].to_list())
        rows += metrics_rows({f"ood/paired/{primary}-{other}/{k}": v for k, v in diff.items()})
    episodes = tables[primary]
    flags = [pl.Series(s, [shifts[s][i] for i in episodes["query_index"].to_list()]) for s in SHIFTS]
    keep = [c for c in episodes.columns if c not in ("report", "messages")]
    write_parquet_atomic(out / "ood.parquet", episodes.select(keep).with_columns(flags))
    return rows


class TurnBudgetError(ConfigError):
    """An evaluation turn limit the expert cannot finish the tasks in (see :func:`check_turn_budget`)."""


def check_turn_budget(cfg: EvalStageConfig, queries: Sequence[Any], world: Any) -> int:
    """Refuse an evaluation whose turn limit is below what the expert needs on its tasks; returns that need.

    An episode cut by the turn limit scores 0 whatever the policy knows, so a limit the programmatic expert
    cannot finish in measures the limit, not the policy (every arm then reads 0 %). The eval stage checks
    each chunk's tasks just before the model runs them (their worlds are then built once for both).

    Raises:
        TurnBudgetError: naming both numbers and what to change.

    """
    from star_lib.agent.rollout import run_episodes

    limit = rollout_config(cfg.protocol, **cfg.options).max_turns
    with_reference = [q for q in queries if q.reference_plan]
    if not with_reference:
        return 0
    roomy = rollout_config(cfg.protocol, **{**cfg.options, "max_turns": max(limit, 64), "reward": "none"})
    episodes = run_episodes(_expert(cfg.protocol, cfg.seed), with_reference, world, roomy)
    need = max(ep.turns for ep in episodes)
    if need > limit:
        raise TurnBudgetError(
            f"eval.max_turns is {limit} but the {cfg.protocol} expert needs {need} turns on this run's "
            f"tasks: every longer episode would end at the limit; set eval.max_turns >= {need}"
        )
    return need


def _episodes(
    cfg: EvalStageConfig,
    model: Path | None,
    queries: Sequence[Any],
    world: Any,
    out: Path,
    tag: str,
    workers: _Workers | None = None,
    *,
    check: bool = True,
) -> tuple[Any, list[dict[str, Any]]]:
    """One model's episodes on ``queries`` as a table (checkpointed by chunk), and the chunk log.

    ``model`` is the model's folder (None: the expert). With ``workers`` the chunks are computed in its
    worker processes, each loading the model and the world once. With ``check`` each chunk's tasks pass
    :func:`check_turn_budget` first.

    Raises:
        TurnBudgetError: The turn limit is too low for the expert on these tasks (the need of all of them).

    """
    import polars as pl

    size = cfg.chunk_size
    try:
        if workers is None:
            policy = _load_policy(cfg, model)

            def compute(start: int, chunk: Sequence[Any]) -> pl.DataFrame:
                return _chunk_frame(cfg, policy, world, start, chunk, check)

            frames, chunk_log = run_chunks(queries, size, out, compute, tag=tag)
        else:

            def parallel(starts: list[int]) -> Iterable[tuple[int, pl.DataFrame]]:
                where = (cfg, model, tag, check, workers.world_dir)
                jobs = [(s, (*where, s, list(queries[s : s + size]))) for s in starts]
                return workers.pool.imap(_chunk_in_worker, jobs)

            frames, chunk_log = run_chunks(queries, size, out, None, tag=tag, parallel=parallel)
    except TurnBudgetError:
        check_turn_budget(cfg, queries, world)  # one chunk's tasks fell short: name the whole split's need
        raise
    return (pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()), chunk_log


def _chunk_frame(
    cfg: EvalStageConfig, policy: Any, world: Any, start: int, chunk: Sequence[Any], check: bool
) -> Any:
    """Run one chunk of evaluation episodes (split episode ``i`` seeds its faults with ``seed + i``)."""
    import polars as pl

    from star_lib import rewards
    from star_lib.agent.rollout import episodes_frame, run_episodes

    if check:
        check_turn_budget(cfg, chunk, world)
    reward = _reward_fn(cfg)
    rollout = rollout_config(cfg.protocol, **{**cfg.options, "seed": cfg.seed + start})
    episodes = run_episodes(policy, chunk, world, rollout, fault_config(cfg, seed=0))
    return episodes_frame(episodes).with_columns(
        pl.Series("query_index", [start + i for i in range(len(episodes))], dtype=pl.Int64),
        pl.Series("run_reward", [reward(ep) for ep in episodes], dtype=pl.Float64),
        pl.Series("sum", [rewards.sum_reward(ep.report, ep.malformed) for ep in episodes], pl.Float64),
        pl.Series("report", [_report_json(ep.report) for ep in episodes], dtype=pl.String),
        pl.Series(
            "messages", [json.dumps(ep.messages, ensure_ascii=False) for ep in episodes], dtype=pl.String
        ),
    )


@dataclass(frozen=True)
class _Workers:
    """The eval stage's worker processes and the world folder they load."""

    pool: Any
    """A :class:`~star_lib.experiments.evalpool.ChunkPool`."""
    world_dir: Path


_WORKER_CACHE: dict[str, Any] = {}
"""In a process computing chunks for a pool: the world and the policy it loaded (and their keys)."""


def _worker_world(world_dir: Path) -> Any:
    if _WORKER_CACHE.get("world_key") != str(world_dir):
        _WORKER_CACHE["world"], _WORKER_CACHE["world_key"] = load_world(world_dir), str(world_dir)
    return _WORKER_CACHE["world"]


def _chunk_in_worker(
    cfg: EvalStageConfig,
    model: Path | None,
    tag: str,
    check: bool,
    world_dir: Path,
    start: int,
    chunk: list[Any],
) -> Any:
    """:func:`_chunk_frame` in a worker process.

    The world is loaded once per process, the policy once per process and table (``tag``): like
    :func:`_episodes` in one process, each table's episodes start from a fresh policy (an empty KV cache).
    """
    key = (tag, str(model), cfg.policy, cfg.protocol, cfg.temperature, cfg.seed)
    if _WORKER_CACHE.get("policy_key") != key:  # one policy at a time: a new table drops the last one
        _WORKER_CACHE["policy"], _WORKER_CACHE["policy_key"] = _load_policy(cfg, model), key
    return _chunk_frame(cfg, _WORKER_CACHE["policy"], _worker_world(world_dir), start, chunk, check)


def _report_json(report: Any) -> str | None:
    """Return an evaluation report as JSON (to checkpoint it with its chunk)."""
    if report is None:
        return None
    from dataclasses import asdict

    return json.dumps(asdict(report), default=str)


def _report_from_json(text: str | None) -> Any:
    """Rebuild an :class:`EvaluationReport` from :func:`_report_json`."""
    if text is None:
        return None
    from star_lib.types import CheckResult, EvaluationReport

    data = json.loads(text)
    hard = data.get("hard")
    return EvaluationReport(
        commonsense={k: CheckResult(**v) for k, v in data["commonsense"].items()},
        hard=None if hard is None else {k: CheckResult(**v) for k, v in hard.items()},
        mode=data.get("mode", "strict"),
        delivered=data.get("delivered", True),
        hard_applicable=data.get("hard_applicable", 1),
    )


# ───────────────────────────── sft ─────────────────────────────


@dataclass(frozen=True)
class SFTStageConfig:
    """Supervised fine-tuning on the teacher's trajectories (``star_lib.train.sft``)."""

    model: str = "tiny"
    """Model preset (axis)."""
    protocol: str = "react"
    """Episode protocol the teacher data speaks (axis); recorded in the checkpoint."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.train.sft.SFTRunConfig`` fields (``max_steps``, ``learning_rate``, ``seed``, …)."""


def _sft_config_type() -> type:
    from star_lib.train.sft import SFTRunConfig

    return SFTRunConfig


def _sft_key_facts(cfg: SFTStageConfig) -> dict[str, Any]:
    """Return the shape of a from-scratch preset (``tiny-s`` …) for the key: a new shape is a new model."""
    from star_lib.train.models import PRESETS

    preset = PRESETS.get(cfg.model)
    if preset is None or preset.architecture is None:
        return {}  # a hub model: its name is its identity
    return {"architecture": asdict(preset.architecture)}


def run_sft_stage(cfg: SFTStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Run SFT into ``out``, resuming from the newest checkpoint a preempted job left there.

    Under torchrun/accelerate when the job holds several GPUs (see :mod:`star_lib.experiments.launch`).
    """
    from star_lib.train.sft import SFTRunConfig, run_sft

    values = {"progress": False, **cfg.options}
    checkpoint = resume_point(out)  # a requeued job continues from what its previous attempt saved here
    run_cfg = SFTRunConfig(
        data=str(inputs["sft_data"]),
        output_dir=str(out),
        preset=cfg.model,
        resume_from_checkpoint=str(checkpoint) if checkpoint else None,
        **values,
    )
    _train(run_cfg, out, "sft", run_sft)
    return {"resumed_from": checkpoint.name if checkpoint else None}


def _train(run_cfg: Any, out: Path, stage: str, run_fn: Callable[[Any], Any]) -> None:
    """Run a training function in-process or under the job's launcher; then turn its log into metrics rows."""
    import polars as pl

    from star_lib.experiments.launch import run_launched, wants_launcher

    if wants_launcher():
        run_launched(stage, run_cfg, out)
    else:
        run_fn(run_cfg)
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    log_path = out / "metrics.parquet"
    logged = pl.read_parquet(log_path) if log_path.is_file() else pl.DataFrame()
    rows = _training_rows(logged, stage)
    own = [r for r in rows if r["phase"] == stage]
    steps = [r["step"] for r in own if r["step"] is not None]
    last = {r["metric"]: r["value"] for r in own}  # the last logged value of each metric
    rows += metrics_rows({f"{stage}/steps": max(steps) if steps else 0})
    rows += metrics_rows(
        {f"{stage}/final/{k}": v for k, v in last.items() if not k.startswith(("time/", "stage"))}
    )
    if log_path.is_file():
        os.replace(log_path, out / "train_log.parquet")
    write_metrics(out, rows)


def _training_rows(logged: Any, stage: str) -> list[dict[str, Any]]:
    """Per-step rows from a training log (one row per log event, one column per metric).

    Rows the log holds for another phase (the copy warm-up before SFT) are prefixed with it:
    ``warmup/train/loss``.
    """
    if not getattr(logged, "height", 0) or "step" not in logged.columns:
        return []
    rows = []
    for record in logged.iter_rows(named=True):
        step = record.get("step")
        phase = record.get("stage")
        prefix = f"{phase}/" if phase and phase != stage else ""
        for key, value in record.items():
            if key in ("step", "stage") or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if value == value:  # drop NaN
                rows.append(
                    {
                        "step": int(step) if step is not None else None,
                        "metric": f"{prefix}{key}",
                        "value": float(value),
                        "phase": phase or stage,
                    }
                )
    return rows


# ───────────────────────────── registry ─────────────────────────────


_PROTOCOL_FIELDS: tuple[str, ...] = (
    "protocol",
    "tools_in_system_prompt",
    "system_prompt",
    "context_limit_prompt",
)
"""``RolloutConfig`` fields the experiment's ``protocol`` decides (a stage section may not set them)."""


def _eval_inputs(stages: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """Return the eval inputs: world, tasks, the SFT output (``base/``, ``model/``) and the RL model."""
    inputs = {"world": ("world", "db"), "data": ("synth", "base/test.jsonl"), "ood": ("synth", "ood?")}
    if "sft" in stages:
        inputs["sft"] = ("sft", ".")
    if "rl" in stages:
        inputs["rl"] = ("rl", "model")
    return inputs


def load_config(spec: str | Path) -> ExperimentConfig:
    """Load and validate an experiment YAML (a path or a named config), nested stage sections included.

    Raises:
        ConfigError: naming the file, the offending key and what is allowed.

    """
    config = read_config(spec)
    try:
        build_registry().validate(config)
    except ConfigError as exc:
        raise ConfigError(f"{spec}: {exc}") from None
    return config


def build_registry() -> Registry:
    """Return the registry of every stage wired to ``star_lib`` (unavailable ones say what is missing)."""
    registry = Registry()
    registry.add(Stage("world", run_world, WorldStageConfig, requires=("star_lib.travel.world:World",)))
    registry.add(
        Stage(
            "synth",
            run_synth,
            SynthStageConfig,
            inputs=lambda stages: {"world": ("world", "db")},
            requires=("star_lib.synth:synthesize", "star_lib.synth:write_dataset"),
            options_type=lambda: __import__("star_lib.synth.config", fromlist=["SynthConfig"]).SynthConfig,
            options_fixed=("n", "mix", "seed"),
        )
    )
    registry.add(
        Stage(
            "teacher",
            run_teacher,
            TeacherStageConfig,
            inputs=lambda stages: {"world": ("world", "db"), "data": ("synth", "base/train.jsonl")},
            requires=("star_lib.agent.teacher:build_sft_dataset", "star_lib.agent.expert:ExpertPolicy"),
            options_type=lambda: (
                __import__("star_lib.agent.config", fromlist=["RolloutConfig"]).RolloutConfig
            ),
            options_fixed=_PROTOCOL_FIELDS,
        )
    )
    registry.add(
        Stage(
            "sft",
            run_sft_stage,
            SFTStageConfig,
            inputs=lambda stages: {"sft_data": ("teacher", "train.jsonl")},
            requires=("star_lib.train.sft:run_sft",),
            uses_gpu=True,
            distributed=True,
            options_type=_sft_config_type,
            options_fixed=("data", "output_dir", "preset", "resume_from_checkpoint"),
            options_required={"data": "-", "output_dir": "-"},
            key_facts=_sft_key_facts,
        )
    )
    registry.add(
        Stage(
            "rl",
            run_rl_stage,
            RLStageConfig,
            inputs=lambda stages: {
                "world": ("world", "db"),
                "data": ("synth", "rl/train.jsonl"),
                "model": ("sft", "model"),
            },
            requires=("star_lib.train.rl:run_rl",),
            uses_gpu=True,
            distributed=True,
            options_type=_rl_config_type,
            options_fixed=(
                "data",
                "output_dir",
                "model_path",
                "world",
                "preset",
                "reward",
                "curriculum_boundaries",
                "faults",
                "seed",
                "algorithm",
                "protocol",
            ),
            options_required={"data": "-", "output_dir": "-", "model_path": "-"},
        )
    )
    registry.add(
        Stage(
            "eval",
            run_eval,
            EvalStageConfig,
            inputs=_eval_inputs,
            requires=(
                "star_lib.agent.rollout:run_episodes",
                "star_lib.agent.expert:ExpertPolicy",
                "star_lib.travel.metrics:compute_metrics",
            ),
            uses_gpu=True,
            options_type=lambda: (
                __import__("star_lib.agent.config", fromlist=["RolloutConfig"]).RolloutConfig
            ),
            options_fixed=("seed", *_PROTOCOL_FIELDS),
        )
    )
    registry.add(
        Stage(
            "qa-eval",
            run_qa_eval,
            QAStageConfig,
            inputs=_qa_inputs,
            requires=("star_lib.qa.evaluate:evaluate_qa",),
            uses_gpu=True,
            options_type=lambda: __import__("star_lib.qa.evaluate", fromlist=["QAEvalConfig"]).QAEvalConfig,
            options_fixed=("seed",),
        )
    )
    return registry


@dataclass(frozen=True)
class RLStageConfig:
    """RL from the SFT checkpoint on the RL prompts (``star_lib.train.rl``)."""

    model: str = "tiny"
    """Model preset (axis)."""
    reward: str = "sum"
    """Reward design (axis)."""
    curriculum_boundaries: tuple[float, float] = (1 / 3, 2 / 3)
    """Curriculum boundaries (axis)."""
    algorithm: str = "grpo"
    """Algorithm (axis)."""
    seed: int = 0
    """Training seed (axis): data order, sampling, fault draws."""
    tool_failure_rate: float = 0.0
    """Tool failure rate during training (axis)."""
    tool_latency_ms: float = 0.0
    """Tool latency during training (axis)."""
    tool_corruption_rate: float = 0.0
    """Tool corruption rate during training (axis)."""
    protocol: str = "react"
    """Episode protocol of the rollouts (axis)."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.train.rl.RLRunConfig`` fields (``max_steps``, ``num_generations``, …)."""

    def __post_init__(self) -> None:
        supported = _rl_algorithms()
        if self.algorithm not in supported:
            raise ValueError(
                f"algorithm {self.algorithm!r} is not implemented by star_lib.train.rl in this checkout "
                f"(it runs {list(supported)}); pick one of those"
            )


def _rl_config_type() -> type:
    from star_lib.train.rl import RLRunConfig

    return RLRunConfig


def _rl_algorithms() -> tuple[str, ...]:
    """Algorithms ``RLRunConfig`` can run: its ``algorithm`` field's choices, else GRPO only."""
    import dataclasses

    try:
        names = {f.name for f in dataclasses.fields(_rl_config_type())}
    except ImportError:
        return ("grpo",)
    if "algorithm" in names:
        from star_lib.train import rl

        return tuple(getattr(rl, "ALGORITHMS", ("grpo", "dapo", "arpo")))
    return ("grpo",)


def run_rl_stage(cfg: RLStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Run RL from the SFT model on the RL prompts; the policy sees the experiment's tool faults."""
    import dataclasses

    from star_lib.train.rl import RLRunConfig, run_rl

    values: dict[str, Any] = {
        "data": str(inputs["data"]),
        "output_dir": str(out),
        "model_path": str(inputs["model"]),
        "world": str(inputs["world"]),
        "preset": cfg.model,
        "reward": cfg.reward,
        "curriculum_boundaries": tuple(cfg.curriculum_boundaries),
        "faults": fault_config(cfg, seed=cfg.seed),
        "seed": cfg.seed,
        "protocol": cfg.protocol,
        **cfg.options,
    }
    if "algorithm" in {f.name for f in dataclasses.fields(RLRunConfig)}:
        values["algorithm"] = cfg.algorithm
    checkpoint = resume_point(out)  # a requeued job continues from what its previous attempt saved here
    _train(RLRunConfig(**values), out, "rl", lambda run_cfg: run_rl(run_cfg, resume=checkpoint or False))
    return {"resumed_from": checkpoint.name if checkpoint else None}


def resume_point(out: Path) -> Path | None:
    """Return the checkpoint a training stage in ``out`` resumes from (None: no complete one, start afresh).

    The trainer writes ``trainer_state.json`` last: a job stopped while saving its first checkpoint has none.
    """
    from star_lib.train.resume import find_checkpoint

    try:
        return find_checkpoint(out)
    except FileNotFoundError:
        return None


QA_POLICIES: tuple[str, ...] = ("model", "baseline")


@dataclass(frozen=True)
class QAStageConfig:
    """Out-of-domain QA (Search-R1 protocol) with the trained model (``star_lib.qa.evaluate``)."""

    seed: int = 0
    """Seed of the per-set question sample (axis)."""
    data_dir: str | None = None
    """Folder of the QA test sets (``nq.jsonl``, ``hotpotqa.jsonl``, … or FlashRAG layout)."""
    corpus: str | None = None
    """Passage corpus (JSONL/TSV) the Search tool retrieves from."""
    retriever: str = "bm25"
    """``bm25`` (local, offline) or ``dense``."""
    policy: str = "model"
    """``model``: the latest trained model (rl, else sft); ``baseline``: the programmatic search baseline."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.qa.evaluate.QAEvalConfig`` fields (``datasets``, ``limit``, ``top_k``, ``max_turns``, …)."""

    def __post_init__(self) -> None:
        if self.policy not in QA_POLICIES:
            raise ValueError(f"policy {self.policy!r} is not allowed; choose one of {list(QA_POLICIES)}")
        if not self.data_dir or not self.corpus:
            raise ValueError(
                "qa-eval needs data_dir (QA test sets) and corpus (passages for the Search tool)"
            )


def _qa_config(**values: Any) -> Any:
    from star_lib.qa.evaluate import QAEvalConfig

    if isinstance(values.get("datasets"), list):
        values["datasets"] = tuple(values["datasets"])
    return QAEvalConfig(**values)


def run_qa_eval(cfg: QAStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Run the OOD QA sets with the trained model (or the baseline); write ``qa.parquet`` and metrics."""
    from star_lib.qa.evaluate import evaluate_qa

    if cfg.policy == "model":
        if "model" not in inputs:
            raise ConfigError("qa-eval with policy 'model' needs a trained model: add sft or rl to stages")
        from star_lib.agent.policies import TransformersPolicy

        policy: Any = TransformersPolicy.from_pretrained(str(inputs["model"]))
    else:
        from star_lib.qa.baseline import BaselineAgent

        policy = BaselineAgent()
    results, summary = evaluate_qa(
        policy,
        cfg.data_dir,
        cfg.corpus,
        _qa_config(**{**cfg.options, "seed": cfg.seed}),
        retriever=cfg.retriever,
        cache_dir=out / CHECKPOINT_DIR / "index",
        model=cfg.policy,
    )
    write_parquet_atomic(out / "qa.parquet", results)
    rows = [{"step": None, "metric": f"qa/{d}/{m}", "value": v} for d, m, v in summary.iter_rows() if v == v]
    write_metrics(out, rows)
    return {}


def _qa_inputs(stages: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    if "rl" in stages:
        return {"model": ("rl", "model")}
    if "sft" in stages:
        return {"model": ("sft", "model")}
    return {}
