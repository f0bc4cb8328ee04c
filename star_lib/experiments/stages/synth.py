"""The synth stage: the SFT/test task pool (``base/``), the RL prompts (``rl/``) and an optional OOD split.

Reads the world stage's ``db/``; writes ``base/train.jsonl`` + ``base/test.jsonl`` (per-query worlds: tasks
from disjoint world seeds; one world: ``star_lib.synth`` splits), ``rl/train.jsonl`` and, with ``synth.ood``,
``ood/``. The size and difficulty mix of the RL prompts are experiment axes; ``options`` are the other
``star_lib.synth.config.SynthConfig`` fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from star_lib.experiments.config import ConfigError, parse_difficulty
from star_lib.experiments.stages.common import load_world, metrics_rows, write_metrics
from star_lib.experiments.stages.registry import RunConfigSpec, Stage
from star_lib.io import read_queries, write_jsonl_atomic


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


def synth_fields(n: int, mix: str, seed: int) -> dict[str, Any]:
    """Return the ``SynthConfig`` fields the stage sets itself per task set (a section sets any other)."""
    return {"n": n, "mix": mix, "seed": seed}


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
        base_fields = synth_fields(cfg.n_base, cfg.base_mix, cfg.data_seed)
        base = synthesize(world, _synth_config(**base_fields, **cfg.options))
        write_dataset(base, out / "base")
        rl_options = {**cfg.options, "splits": (1.0, 0.0, 0.0)}
        rl_fields = synth_fields(cfg.rl_data_size, rl_mix, cfg.data_seed + 7919)
        rl = synthesize(world, _synth_config(**rl_fields, **rl_options))
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


def _synth_config_type() -> type:
    from star_lib.synth.config import SynthConfig

    return SynthConfig


STAGE = Stage(
    "synth",
    run_synth,
    SynthStageConfig,
    inputs=lambda stages, config: {"world": ("world", "db")},
    run_config=RunConfigSpec(_synth_config_type, lambda: synth_fields(1, "easy", 0)),
    scores_plans=True,  # reference plans are verified by the strict evaluator
)
