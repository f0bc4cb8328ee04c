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

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from star_lib.experiments.artifacts import CHECKPOINT_DIR
from star_lib.experiments.config import ConfigError, parse_difficulty
from star_lib.io import write_json_atomic, write_parquet_atomic
from star_lib.experiments.stages import Registry, Stage

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


def read_queries(path: Path) -> list[Any]:
    """Query records from a JSONL file (``QueryRecord.to_dict`` rows)."""
    from star_lib.types import QueryRecord

    records = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                records.append(QueryRecord.from_dict(json.loads(line)))
    return records


def load_world(folder: Path) -> Any:
    """Return the world a ``world`` stage wrote."""
    from star_lib.travel.world import World

    return World.from_csv_dir(folder)


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
    compute: Callable[[int, Sequence[Any]], Any],
) -> tuple[list[Any], list[dict[str, Any]]]:
    """Run ``compute(start, chunk)`` over consecutive chunks, checkpointing each result; resume after a stop.

    Each finished chunk is saved (atomically) as ``_checkpoints/chunks/<start>.parquet`` — ``compute`` returns
    a polars frame — and logged in ``_checkpoints/progress.jsonl`` with the process id and the Slurm restart
    count, so a resumed run can be told apart from a rerun.

    Returns:
        The frames in order, and the log of which process computed which chunk (for ``stage.json``).

    """
    import polars as pl

    folder = work / CHECKPOINT_DIR / "chunks"
    folder.mkdir(parents=True, exist_ok=True)
    log_path = work / CHECKPOINT_DIR / "progress.jsonl"
    frames = []
    for start in range(0, len(items), chunk_size):
        path = folder / f"{start:08d}.parquet"
        if path.is_file():
            frames.append(pl.read_parquet(path))
            continue
        frame = compute(start, items[start : start + chunk_size])
        write_parquet_atomic(path, frame)
        with open(log_path, "a", encoding="utf-8") as log:
            restart = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
            log.write(
                json.dumps({"start": start, "restart": restart, "pid": os.getpid(), "t": time.time()}) + "\n"
            )
        frames.append(frame)
    entries = (
        [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
        if (log_path.is_file())
        else []
    )
    return frames, entries


# ───────────────────────────── world ─────────────────────────────

WORLD_SOURCES: tuple[str, ...] = ("synthetic", "csv")


@dataclass(frozen=True)
class WorldStageConfig:
    """Which database the experiment plans over."""

    source: str = "synthetic"
    """``synthetic`` (seeded generator) or ``csv`` (official TravelPlanner CSVs in ``csv_dir``)."""
    scale: str = "small"
    """Synthetic world size: ``tiny`` | ``small`` | ``full`` (default ``small``: the ``tiny`` world has too
    few routes for varied SFT/test splits of every difficulty)."""
    data_seed: int = 0
    """Seed of the synthetic world."""
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
    """Build or load the world and write it as official CSVs under ``db/``."""
    from star_lib.travel.world import World

    world = (
        World.synthetic(seed=cfg.data_seed, scale=cfg.scale)
        if cfg.source == "synthetic"
        else (World.from_csv_dir(cfg.csv_dir))
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
    """Records of the SFT/test pool (split train/val/test by ``splits``)."""
    base_mix: str = "4:3:3"
    """Difficulty mix of the SFT/test pool."""
    data_seed: int = 0
    """Seed of the synthesis (the RL prompts use a derived seed)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Other ``star_lib.synth.SynthConfig`` fields (e.g. ``splits``, ``tie_break``, ``realiser``)."""

    def __post_init__(self) -> None:
        if self.n_base < 1:
            raise ValueError(f"n_base must be >= 1, got {self.n_base}")
        parse_difficulty(self.base_mix)


def _synth_config(**values: Any) -> Any:
    from star_lib.synth.config import SynthConfig

    return SynthConfig(**values)


def run_synth(cfg: SynthStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Synthesise the SFT/test pool (``base/``) and the RL prompts (``rl/``) with ``star_lib.synth``."""
    from star_lib.synth import synthesize, write_dataset

    world = load_world(inputs["world"])
    base = synthesize(world, _synth_config(n=cfg.n_base, mix=cfg.base_mix, seed=cfg.data_seed, **cfg.options))
    write_dataset(base, out / "base")
    rl_options = {**cfg.options, "splits": (1.0, 0.0, 0.0)}
    rl_mix = ":".join(str(w) for w in parse_difficulty(cfg.difficulty))
    rl = synthesize(
        world, _synth_config(n=cfg.rl_data_size, mix=rl_mix, seed=cfg.data_seed + 7919, **rl_options)
    )
    write_dataset(rl, out / "rl")
    rows = metrics_rows(
        {"synth/base_records": _count_lines(out / "base"), "synth/rl_records": _count_lines(out / "rl")}
    )
    write_metrics(out, rows)
    return {}


def _count_lines(folder: Path) -> int:
    return sum(sum(1 for line in open(p, encoding="utf-8") if line.strip()) for p in folder.glob("*.jsonl"))


# ───────────────────────────── teacher ─────────────────────────────

TEACHERS: tuple[str, ...] = ("expert",)


@dataclass(frozen=True)
class TeacherStageConfig:
    """Trajectories for SFT, written by a teacher acting out the synthesised tasks (``train`` split)."""

    teacher: str = "expert"
    """``expert``: the programmatic expert acting out each record's reference plan."""
    teacher_seed: int = 0
    """Seed of the expert's wording choices."""
    max_records: int | None = None
    """Use at most this many records (None: all)."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.agent.RolloutConfig`` fields (``max_turns``, …)."""

    def __post_init__(self) -> None:
        if self.teacher not in TEACHERS:
            raise ValueError(f"teacher {self.teacher!r} is not allowed; choose one of {list(TEACHERS)}")
        if self.max_records is not None and self.max_records < 1:
            raise ValueError(f"max_records must be >= 1 or null, got {self.max_records}")


def _rollout_config(**values: Any) -> Any:
    from star_lib.agent.config import RolloutConfig

    return RolloutConfig(**values)


def run_teacher(cfg: TeacherStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Act out the records with the expert; writes the TRL conversational SFT set ``train.jsonl``."""
    from star_lib.agent.expert import ExpertPolicy
    from star_lib.agent.teacher import build_sft_dataset

    world = load_world(inputs["world"])
    queries = read_queries(inputs["data"])[: cfg.max_records]
    stats = build_sft_dataset(
        ExpertPolicy(seed=cfg.teacher_seed),
        queries,
        world,
        out,
        _rollout_config(**{"reward": "none", **cfg.options}),
    )
    if (out / "episodes.parquet").is_file():
        os.replace(out / "episodes.parquet", out / "rollouts.parquet")
    write_metrics(out, metrics_rows({f"teacher/{k}": v for k, v in stats.to_dict().items()}))
    return {}


# ───────────────────────────── eval ─────────────────────────────


@dataclass(frozen=True)
class EvalStageConfig:
    """Evaluate the latest policy on held-out tasks (TravelPlanner metrics, spec §5)."""

    seed: int = 0
    """Evaluation seed (axis): fault draws of episode ``i`` use ``seed + i``."""
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
    max_queries: int | None = None
    """Evaluate at most this many queries (None: the whole split)."""
    chunk_size: int = 8
    """Episodes per checkpointed chunk (a preempted job resumes after the last chunk)."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.agent.RolloutConfig`` fields (``max_turns``, ``eval_mode``, …)."""

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")
        if self.max_queries is not None and self.max_queries < 1:
            raise ValueError(f"max_queries must be >= 1 or null, got {self.max_queries}")


def _policy(inputs: Mapping[str, Path]) -> tuple[Any, str]:
    """Return the policy to evaluate: the trained model when there is one, else the expert teacher."""
    if "model" in inputs:
        from star_lib.agent.policies import TransformersPolicy

        return TransformersPolicy.from_pretrained(str(inputs["model"])), "model"
    from star_lib.agent.expert import ExpertPolicy

    return ExpertPolicy(), "expert"


def _reward_fn(cfg: EvalStageConfig) -> Callable[[Any, bool], float]:
    from star_lib import rewards

    if cfg.reward == "curriculum":
        return lambda report, malformed: rewards.curriculum_reward(
            report, malformed, progress=1.0, boundaries=cfg.curriculum_boundaries
        )
    return getattr(rewards, f"{cfg.reward}_reward")


def run_eval(cfg: EvalStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Run the policy on held-out queries in checkpointed chunks; write eval/rollout tables and metrics."""
    import polars as pl

    from star_lib.agent.rollout import episodes_frame, run_episodes
    from star_lib.travel.metrics import compute_metrics

    world = load_world(inputs["world"])
    queries = read_queries(inputs["data"])[: cfg.max_queries]
    policy, policy_kind = _policy(inputs)
    reward = _reward_fn(cfg)
    reports: dict[int, Any] = {}

    def compute(start: int, chunk: Sequence[Any]) -> pl.DataFrame:
        rollout = _rollout_config(**{**cfg.options, "seed": cfg.seed + start})
        episodes = run_episodes(policy, chunk, world, rollout, fault_config(cfg, seed=0))
        frame = episodes_frame(episodes).with_columns(
            pl.Series("query_index", [start + i for i in range(len(episodes))], dtype=pl.Int64),
            pl.Series("run_reward", [reward(ep.report, ep.malformed) for ep in episodes], dtype=pl.Float64),
            pl.Series("report", [_report_json(ep.report) for ep in episodes], dtype=pl.String),
            pl.Series(
                "messages", [json.dumps(ep.messages, ensure_ascii=False) for ep in episodes], dtype=pl.String
            ),
        )
        return frame

    frames, chunk_log = run_chunks(queries, cfg.chunk_size, out, compute)
    episodes = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    for row in episodes.select("query_index", "report").iter_rows():
        reports[row[0]] = _report_from_json(row[1])
    metrics = compute_metrics(queries, [reports.get(i) for i in range(len(queries))])
    rows = metrics_rows({f"eval/{k}": v for k, v in metrics.items()})
    rows += metrics_rows(
        {"reward/mean": float(episodes["run_reward"].mean() or 0.0) if episodes.height else 0.0}
    )
    write_metrics(out, rows)
    # eval.parquet: the flat per-episode table; rollouts.parquet adds the transcript and verdicts (explorer).
    eval_cols = [c for c in episodes.columns if c not in ("report", "messages")]
    write_parquet_atomic(out / "eval.parquet", episodes.select(eval_cols))
    write_parquet_atomic(out / "rollouts.parquet", episodes.with_columns(pl.lit(policy_kind).alias("policy")))
    return {"chunk_log": chunk_log, "policy": policy_kind}


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
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.train.sft.SFTRunConfig`` fields (``max_steps``, ``learning_rate``, ``seed``, …)."""


def _sft_config_type() -> type:
    from star_lib.train.sft import SFTRunConfig

    return SFTRunConfig


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
    rows = _training_rows(logged)
    steps = [r["step"] for r in rows if r["step"] is not None]
    last = {r["metric"]: r["value"] for r in rows}  # the last logged value of each metric
    rows += metrics_rows({f"{stage}/steps": max(steps) if steps else 0})
    rows += metrics_rows(
        {f"{stage}/final/{k}": v for k, v in last.items() if not k.startswith(("time/", "stage"))}
    )
    if log_path.is_file():
        os.replace(log_path, out / "train_log.parquet")
    write_metrics(out, rows)


def _training_rows(logged: Any) -> list[dict[str, Any]]:
    """Per-step rows from a training log (one row per log event, one column per metric)."""
    if not getattr(logged, "height", 0) or "step" not in logged.columns:
        return []
    rows = []
    for record in logged.iter_rows(named=True):
        step = record.get("step")
        for key, value in record.items():
            if key in ("step", "stage") or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if value == value:  # drop NaN
                rows.append(
                    {"step": int(step) if step is not None else None, "metric": key, "value": float(value)}
                )
    return rows


# ───────────────────────────── registry ─────────────────────────────


def _eval_inputs(stages: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    inputs = {"world": ("world", "db"), "data": ("synth", "base/test.jsonl")}
    if "rl" in stages:
        inputs["model"] = ("rl", "model")
    elif "sft" in stages:
        inputs["model"] = ("sft", "model")
    return inputs


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
            options_fixed=("seed",),
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
