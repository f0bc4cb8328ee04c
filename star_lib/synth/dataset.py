"""Datasets: synthesise records by level, split them without leakage, write JSONL/parquet and stats.

Every attempt ``i`` of a level draws from its own generator seeded by ``(seed, level, i)``, and attempts
are consumed in index order, so the output is the same byte for byte whatever the number of workers.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import pickle
import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from statistics import fmean
from typing import Any

from star_lib.io import atomic_dir, read_queries, write_jsonl_atomic, write_parquet_atomic, write_text_atomic
from star_lib.synth.config import SynthConfig, parse_mix
from star_lib.synth.realise import LLMConfig, LLMRealiser, realise_query
from star_lib.synth.sample import NoCandidateError, sample_elements
from star_lib.synth.solver import Rejection, solve
from star_lib.types import LEVELS, QueryRecord

SPLITS: tuple[str, ...] = ("train", "val", "test")
R_NO_ROUTE = "no route of this shape"
R_DUPLICATE = "duplicate record"
R_HELD_OUT = "held-out query"
PAPER_SIZES: tuple[int, ...] = (100, 500, 1000, 2000)
"""Data-quantity axis of the paper (§9): RL prompt counts."""
PAPER_MIXTURES: tuple[str, ...] = tuple(f"mixed-{n}" for n in PAPER_SIZES) + (
    "easy-1000",
    "medium-1000",
    "hard-1000",
)
"""Named mixtures for the paper's axes: sizes at 4:3:3, and the difficulty compositions at 1K."""


# ───────────────────────────── worlds and mixtures ─────────────────────────────


def load_world(spec: str) -> Any:
    """``synthetic:<scale>:<seed>`` (scale tiny|small|full) or a database folder → ``World``.

    Raises:
        ValueError: for a malformed synthetic spec.
        FileNotFoundError: when the folder does not exist.

    """
    from star_lib.travel.world import World

    if spec.startswith("synthetic"):
        parts = spec.split(":")
        scale = parts[1] if len(parts) > 1 and parts[1] else "tiny"
        try:
            seed = int(parts[2]) if len(parts) > 2 else 0
        except ValueError as exc:
            raise ValueError(f"world spec {spec!r}: use synthetic:<tiny|small|full>:<integer seed>") from exc
        return World.synthetic(seed=seed, scale=scale)
    path = Path(spec)
    if not path.exists():
        raise FileNotFoundError(
            f"world folder {path} does not exist: pass a database folder or synthetic:<scale>:<seed>"
        )
    return World.from_csv_dir(path)


def mixture(name: str) -> tuple[int, str]:
    """``<composition>-<size>`` → (n, mix); composition is easy|medium|hard|mixed or ``a:b:c``.

    >>> mixture("mixed-1000"), mixture("2:1:1-500")
    ((1000, '4:3:3'), (500, '2:1:1'))

    Raises:
        ValueError: naming the accepted form.

    """
    comp, _, size = str(name).rpartition("-")
    try:
        n = int(size)
        parse_mix(comp)
    except ValueError as exc:
        raise ValueError(
            f"mixture {name!r}: use <composition>-<size>, composition easy|medium|hard|mixed or a:b:c, "
            f"e.g. {', '.join(PAPER_MIXTURES)}"
        ) from exc
    return n, "4:3:3" if comp == "mixed" else comp


def mixture_config(name: str, base: SynthConfig | None = None) -> SynthConfig:
    """Return ``base`` with ``n`` and ``mix`` taken from a named mixture."""
    n, mix = mixture(name)
    return replace(base or SynthConfig(), n=n, mix=mix)


# ───────────────────────────── one attempt ─────────────────────────────


@dataclass
class Outcome:
    """What one sampling attempt produced."""

    level: str
    attempt: int
    record: QueryRecord | None = None
    rejection: Rejection | None = None
    notes: list[str] = field(default_factory=list)
    realiser: str = "template"
    """``template`` | ``llm`` | ``fallback`` (LLM answer refused or failed; template used)."""


def attempt_seed(seed: int, level: str, i: int) -> str:
    """Return the seed string of attempt ``i`` of ``level`` (stable across processes and Python runs)."""
    return f"star-synth|{seed}|{level}|{i}"


def run_attempt(
    world: Any, cfg: SynthConfig, level: str, i: int, realiser: LLMRealiser | None = None
) -> Outcome:
    """Sample, solve and realise one record; rejections come back as data."""
    rng = random.Random(attempt_seed(cfg.seed, level, i))
    try:
        sampled = sample_elements(world, level, rng, cfg)
    except NoCandidateError as exc:
        return Outcome(level, i, rejection=Rejection(R_NO_ROUTE, str(exc)))
    plan = solve(world, sampled.record, cfg)
    if isinstance(plan, Rejection):
        return Outcome(level, i, rejection=plan, notes=sampled.notes)
    kind = "template"
    if realiser is None:
        query = realise_query(sampled.record, rng)
    else:
        before = realiser.counts["fallback"]
        query = realiser.realise(sampled.record, rng)
        kind = "fallback" if realiser.counts["fallback"] > before else "llm"
    record = replace(sampled.record, query=query, reference_plan=plan)
    return Outcome(level, i, record=record, notes=sampled.notes, realiser=kind)


_WORKER: dict[str, Any] = {}


def _init_worker(
    world_blob: bytes | None, world_spec: str | None, cfg: SynthConfig, llm: LLMConfig | None
) -> None:
    world = load_world(world_spec) if world_spec else pickle.loads(world_blob)  # noqa: S301 - our own bytes
    _WORKER.update(world=world, cfg=cfg, realiser=_make_realiser(cfg, llm))


def _worker_attempt(job: tuple[str, int]) -> Outcome:
    return run_attempt(_WORKER["world"], _WORKER["cfg"], job[0], job[1], _WORKER["realiser"])


def _make_realiser(cfg: SynthConfig, llm: LLMConfig | None) -> LLMRealiser | None:
    return LLMRealiser(llm or LLMConfig()) if cfg.realiser == "llm" else None


# ───────────────────────────── synthesis ─────────────────────────────


def record_key(record: QueryRecord) -> str:
    """Leakage key: (org, dest, dates, constraints). Records sharing it always share a split."""
    return json.dumps([record.org, record.dest, list(record.date), record.local_constraint.to_dict()])


def held_out_key(record: QueryRecord) -> str:
    """Key of a task as a held-out query: origin, destination, dates, local constraints, people, days.

    Cuisines compare as a set (their order does not change the task); budget and wording do not count.
    """
    constraint = record.local_constraint.to_dict()
    if constraint["cuisine"] is not None:
        constraint["cuisine"] = sorted(constraint["cuisine"])
    fields = [record.org, record.dest, list(record.date), constraint, record.people_number, record.days]
    return json.dumps(fields, sort_keys=True)


def held_out_keys(cfg: SynthConfig) -> tuple[set[str], dict[str, Any] | None]:
    """Read ``cfg.exclude_queries``: the held-out keys and a summary for the stats (None when unset).

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: naming the file and record that is not a query record.

    """
    if cfg.exclude_queries is None:
        return set(), None
    from star_lib.io import file_sha256, read_queries

    queries = read_queries(cfg.exclude_queries)
    keys = {held_out_key(q) for q in queries}
    return keys, {
        "file": cfg.exclude_queries,
        "sha256": file_sha256(cfg.exclude_queries),
        "queries": len(queries),
    }


def _identity(record: QueryRecord) -> str:
    return json.dumps(replace(record, query="", reference_plan=None).to_dict(), sort_keys=True)


@dataclass
class SynthResult:
    """Accepted records, their splits and the stats of the run."""

    splits: dict[str, list[QueryRecord]]
    stats: dict[str, Any]
    config: SynthConfig

    @property
    def records(self) -> list[QueryRecord]:
        """All records, train then val then test (``idx`` runs across them)."""
        return [r for name in SPLITS for r in self.splits[name]]


class _Collector:
    """Consumes outcomes in attempt order; keeps counters."""

    def __init__(self, held_out: set[str] | None = None) -> None:
        self.held_out = held_out or set()
        self.accepted: dict[str, list[QueryRecord]] = defaultdict(list)
        self.seen: set[str] = set()
        self.attempts: Counter = Counter()
        self.rejections: Counter = Counter()
        self.notes: Counter = Counter()
        self.realiser: Counter = Counter()

    def add(self, out: Outcome) -> bool:
        self.attempts[out.level] += 1
        self.notes.update(out.notes)
        if out.record is None:
            self.rejections[out.rejection.reason if out.rejection else "unknown"] += 1
            return False
        if self.held_out and held_out_key(out.record) in self.held_out:
            self.rejections[R_HELD_OUT] += 1
            return False
        ident = _identity(out.record)
        if ident in self.seen:
            self.rejections[R_DUPLICATE] += 1
            return False
        self.seen.add(ident)
        self.accepted[out.level].append(out.record)
        self.realiser[out.realiser] += 1
        return True


def _jobs(level: str, start: int, stop: int) -> list[tuple[str, int]]:
    return [(level, i) for i in range(start, stop)]


def synthesize(
    world: Any,
    cfg: SynthConfig | None = None,
    *,
    llm: LLMConfig | None = None,
    progress: bool = False,
    world_spec: str | None = None,
) -> SynthResult:
    """Synthesise ``cfg.n`` feasible records in the ``cfg.mix`` composition and split them.

    Args:
        world: the ``World`` to sample from.
        cfg: synthesis rules; defaults to :class:`SynthConfig`.
        llm: endpoint of the LLM realiser when ``cfg.realiser == "llm"`` (env vars otherwise).
        progress: show a tqdm bar of accepted records.
        world_spec: how worker processes rebuild the world (``load_world`` spec); when None they
            receive a pickled copy.

    With ``cfg.exclude_queries`` set, a record equal (:func:`held_out_key`) to one of those queries is
    rejected under :data:`R_HELD_OUT`, and ``stats["held_out"]`` records the file, its SHA-256, its size and
    the rejections.

    Raises:
        ValueError: when a level that was asked for yields no record at all (the message lists why), or
            the held-out file holds a record that is not a query record.
        FileNotFoundError: when ``cfg.exclude_queries`` does not exist.

    """
    from tqdm.auto import tqdm

    cfg = cfg or SynthConfig()
    targets = cfg.level_counts
    held_out, held_out_summary = held_out_keys(cfg)
    col = _Collector(held_out)
    bar = tqdm(total=cfg.n, desc="synth", unit="rec", disable=not progress)
    pool = _start_pool(world, cfg, llm, world_spec) if cfg.workers > 1 else None
    realiser = _make_realiser(cfg, llm) if pool is None else None
    try:
        for level in LEVELS:
            _fill_level(level, targets[level], world, cfg, col, bar, pool, realiser)
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
            pool.join()
    empty = [lv for lv in LEVELS if targets[lv] and not col.accepted[lv]]
    if empty:
        top = ", ".join(f"{r} ({c})" for r, c in col.rejections.most_common(4))
        raise ValueError(
            f"no feasible {'/'.join(empty)} record in {sum(col.attempts.values())} attempts: {top}"
        )
    splits = split_records(col.accepted, cfg)
    stats = dataset_stats(splits, col, cfg, world)
    if held_out_summary is not None:
        stats["held_out"] = {**held_out_summary, "rejected": col.rejections[R_HELD_OUT]}
    return SynthResult(splits=splits, stats=stats, config=cfg)


def _start_pool(world: Any, cfg: SynthConfig, llm: LLMConfig | None, world_spec: str | None):
    blob = None
    if not world_spec:
        try:
            blob = pickle.dumps(world)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise ValueError(f"workers>1 needs a picklable World or a world_spec: {exc}") from exc
    ctx = mp.get_context("spawn")
    return ctx.Pool(cfg.workers, initializer=_init_worker, initargs=(blob, world_spec, cfg, llm))


def _fill_level(level, target, world, cfg, col: _Collector, bar, pool, realiser) -> None:
    limit = max(1, target) * cfg.max_attempts_factor
    batch = 32 * max(1, cfg.workers)
    i = 0
    while len(col.accepted[level]) < target and i < limit:
        jobs = _jobs(level, i, min(i + batch, limit))
        i += len(jobs)
        if pool is None:
            outcomes: Iterable[Outcome] = (run_attempt(world, cfg, lv, j, realiser) for lv, j in jobs)
        else:
            outcomes = pool.map(_worker_attempt, jobs, chunksize=max(1, len(jobs) // (4 * cfg.workers)))
        for out in outcomes:
            if len(col.accepted[level]) >= target:
                break
            if col.add(out):
                bar.update(1)


# ───────────────────────────── splits ─────────────────────────────


def split_records(accepted: dict[str, list[QueryRecord]], cfg: SynthConfig) -> dict[str, list[QueryRecord]]:
    """Stratified by level, grouped by :func:`record_key` (no key in two splits); ``idx`` across splits."""
    out: dict[str, list[QueryRecord]] = {name: [] for name in SPLITS}
    rng = random.Random(f"star-split|{cfg.seed}")
    for level in LEVELS:
        groups: dict[str, list[QueryRecord]] = {}
        for record in accepted.get(level, []):
            groups.setdefault(record_key(record), []).append(record)
        order = list(groups.values())
        rng.shuffle(order)
        total = sum(len(g) for g in order)
        want = {"test": round(total * cfg.splits[2]), "val": round(total * cfg.splits[1])}
        for group in order:
            name = next((s for s in ("test", "val") if len(_level(out[s], level)) < want[s]), "train")
            out[name].extend(group)
    idx = 0
    for name in SPLITS:
        rows = out[name]
        rng.shuffle(rows)
        out[name] = []
        for record in rows:
            out[name].append(replace(record, idx=idx))
            idx += 1
    return out


def _level(records: list[QueryRecord], level: str) -> list[QueryRecord]:
    return [r for r in records if r.level == level]


# ───────────────────────────── stats and files ─────────────────────────────


def _transport_kinds(record: QueryRecord) -> set[str]:
    kinds = set()
    for day in record.reference_plan or ():
        text = day.transportation
        if text.startswith("Flight Number"):
            kinds.add("flight")
        elif text.startswith("Self-driving"):
            kinds.add("self-driving")
        elif text.startswith("Taxi"):
            kinds.add("taxi")
    return kinds


def dataset_stats(
    splits: dict[str, list[QueryRecord]], col: _Collector, cfg: SynthConfig, world: Any
) -> dict:
    """Summary of a run: composition, constraint types, rejections by reason, acceptance rate."""
    records = [r for name in SPLITS for r in splits[name]]
    attempts = sum(col.attempts.values())
    constraints: Counter = Counter()
    values: dict[str, Counter] = defaultdict(Counter)
    transport: Counter = Counter()
    for r in records:
        lc = r.local_constraint
        constraints.update(lc.requested)
        for name, value in (
            ("house rule", lc.house_rule),
            ("room type", lc.room_type),
            ("transportation", lc.transportation),
        ):
            if value is not None:
                values[name][value] += 1
        values["cuisine"].update(lc.cuisine or ())
        transport.update(_transport_kinds(r))
    budgets = [r.budget for r in records]
    targets = cfg.level_counts
    by_level = Counter(r.level for r in records)
    return {
        "n_requested": cfg.n,
        "n_records": len(records),
        "config": _config_dict(cfg),
        "world": _json_safe(world.summary()) if hasattr(world, "summary") else None,
        "splits": {name: len(splits[name]) for name in SPLITS},
        "levels": _sorted(by_level),
        "shortfall": {lv: targets[lv] - by_level[lv] for lv in LEVELS if by_level[lv] < targets[lv]},
        "days": {str(k): v for k, v in sorted(Counter(r.days for r in records).items())},
        "people": {str(k): v for k, v in sorted(Counter(r.people_number for r in records).items())},
        "constraint_types": _sorted(constraints),
        "constraint_values": {k: _sorted(v) for k, v in sorted(values.items())},
        "transport": _sorted(transport),
        "budget": {"min": min(budgets), "mean": round(fmean(budgets), 1), "max": max(budgets)}
        if budgets
        else {},
        "attempts": {lv: col.attempts[lv] for lv in LEVELS},
        "acceptance_rate": round(len(records) / attempts, 4) if attempts else 0.0,
        "rejections": _sorted(col.rejections),
        "relaxations": _sorted(col.notes),
        "realiser": _sorted(col.realiser),
    }


def _sorted(counter: Counter) -> dict[str, int]:
    return {str(k): int(v) for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))}


def _config_dict(cfg: SynthConfig) -> dict[str, Any]:
    data = asdict(cfg)
    data.pop("workers", None)  # does not change the output
    return _json_safe(data)


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, sort_keys=True))


def record_row(record: QueryRecord) -> dict[str, Any]:
    """Return the JSONL/parquet row: ``QueryRecord.to_dict()`` (official names, plain lists/dicts)."""
    return record.to_dict()


def dataset_files(parquet: bool = True) -> tuple[str, ...]:
    """Return the file names :func:`write_dataset` writes (``train.jsonl`` … ``stats.json``)."""
    names = [f"{name}.{ext}" for name in SPLITS for ext in (("jsonl", "parquet") if parquet else ("jsonl",))]
    return (*names, "stats.json")


def write_dataset(result: SynthResult, out_dir: str | Path, parquet: bool = True) -> dict[str, Path]:
    """Write ``{train,val,test}.jsonl`` (+ ``.parquet``) and ``stats.json`` under ``out_dir``, as one unit.

    The files are written into a temporary folder swapped in as ``out_dir`` (:func:`star_lib.io.atomic_dir`,
    locked while written): a reader, or a writer killed at any moment, sees the previous complete dataset
    or the new one — never an empty ``train.jsonl`` or splits of two runs — and last run's parquet files
    go away when this run writes none. Other files in ``out_dir`` are kept.

    Returns:
        Paths of the written files by name (``train``, ``train.parquet``, …, ``stats``).

    Raises:
        star_lib.io.OutputLockedError: when another process is writing ``out_dir``.

    """
    out = Path(out_dir)
    paths: dict[str, Path] = {}
    with atomic_dir(out, replaces=dataset_files(parquet=True)) as tmp:
        for name in SPLITS:
            rows = [record_row(r) for r in result.splits[name]]
            write_jsonl_atomic(tmp / f"{name}.jsonl", rows)
            paths[name] = out / f"{name}.jsonl"
            if parquet:
                _write_parquet(rows, tmp / f"{name}.parquet")
                paths[f"{name}.parquet"] = out / f"{name}.parquet"
        write_text_atomic(
            tmp / "stats.json", json.dumps(result.stats, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        )
        paths["stats"] = out / "stats.json"
    return paths


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    import polars as pl

    frame = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    return write_parquet_atomic(path, frame)


read_dataset = read_queries
"""Read a JSONL split back into records: :func:`star_lib.io.read_queries` (the one query reader)."""


def synthesize_mixtures(
    world: Any, names: Iterable[str], out_dir: str | Path, base: SynthConfig | None = None, **kwargs: Any
) -> dict[str, SynthResult]:
    """Synthesise and write each named mixture under ``out_dir/<name>/``."""
    results = {}
    for name in names:
        result = synthesize(world, mixture_config(name, base), **kwargs)
        write_dataset(result, Path(out_dir) / name)
        results[name] = result
    return results
