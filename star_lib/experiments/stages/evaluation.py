"""The eval stage's engine: checkpointed chunks of episodes, worker processes, scoring, the turn budget.

``cfg`` throughout is the eval stage's resolved config
(:class:`~star_lib.experiments.stages.eval.EvalStageConfig`). Queries run in chunks, each chunk's episodes
saved under ``_checkpoints/``; a preempted (requeued) job resumes after the last saved chunk, and because
episode ``i`` always seeds its faults with ``seed + i``, the resumed result equals an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from star_lib.experiments.artifacts import CHECKPOINT_DIR
from star_lib.experiments.config import ConfigError
from star_lib.experiments.stages.common import (
    expert,
    fault_config,
    load_world,
    metrics_rows,
    rollout_config,
    write_metrics,
)
from star_lib.io import read_queries, write_parquet_atomic

# ───────────────────────────── chunks ─────────────────────────────


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


# ───────────────────────────── policies and rewards ─────────────────────────────


def load_policy(cfg: Any, path: Path | None) -> Any:
    """Return the policy of a model folder with the configured backend (the expert when ``path`` is None).

    Raises:
        star_lib.agent.protocol.ProtocolMismatchError: The model was trained on another protocol.

    """
    from star_lib.agent.factory import make_policy
    from star_lib.agent.policies import SamplingParams

    if path is None:
        return expert(cfg.protocol, cfg.seed)
    sampling = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, seed=cfg.seed)
    engine = _engine_options(cfg) if cfg.policy == "vllm" else {}
    return make_policy(cfg.policy, model=path, sampling=sampling, protocol=cfg.protocol, **engine)


def _engine_options(cfg: Any) -> dict[str, Any]:
    """Return the vLLM engine keywords: the longest context an episode reaches, the seed, ``cfg.vllm``."""
    contexts = [rollout_config(cfg.protocol, **cfg.options).max_context_tokens]
    if cfg.ood:
        contexts.append(rollout_config(cfg.protocol, **{**cfg.options, **cfg.ood}).max_context_tokens)
    return {"max_model_len": max(contexts), "seed": cfg.seed, **cfg.vllm}


def close_policy(policy: Any) -> None:
    """Free what a policy holds beyond Python's reach (a vLLM engine's GPU memory) before the next loads."""
    close = getattr(policy, "close", None)
    if callable(close):
        close()


def _reward_fn(cfg: Any) -> Callable[[Any], float]:
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


def _faults(cfg: Any) -> Any:
    """Return the evaluation's tool faults (``FaultConfig`` or None); episode ``i`` draws ``seed + i``."""
    return fault_config(cfg.tool_failure_rate, cfg.tool_latency_ms, cfg.tool_corruption_rate, seed=0)


# ───────────────────────────── the evaluation ─────────────────────────────


@contextlib.contextmanager
def eval_workers(cfg: Any, world_dir: Path, chunks: int) -> Iterator[_Workers | None]:
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


def evaluate_models(
    cfg: Any,
    models: Sequence[tuple[str, Path | None]],
    inputs: Mapping[str, Path],
    out: Path,
    queries: list[Any],
    workers: _Workers | None,
) -> dict[str, Any]:
    """Score ``models`` on ``queries`` once the worker processes (if any) are up: every table, metric, file.

    The eval stage's run (:func:`~star_lib.experiments.stages.eval.run_eval`) calls it.
    """
    import polars as pl

    from star_lib.agent.summary import paired_difference

    world = load_world(inputs["world"])
    tables: dict[str, pl.DataFrame] = {}
    rows: list[dict[str, Any]] = []
    chunk_log: list[dict[str, Any]] = []
    for name, path in models:
        tag = name if len(models) > 1 else ""
        first = name == models[0][0]  # the tasks' turn budget is checked once, with the first model's chunks
        tables[name], chunk_log = _episodes(cfg, path, queries, world, out, tag, workers, check=first)
        values = _table_metrics(queries, tables[name])
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
    rows += _eval_splits(cfg, models, out)
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
    cfg: Any,
    models: Sequence[tuple[str, Path | None]],
    queries: Sequence[Any],
    world: Any,
    out: Path,
    noisy: Mapping[str, Any],
    workers: _Workers | None = None,
) -> list[dict[str, Any]]:
    """Score every model again with no tool faults (``eval.also_clean``): ``eval/clean/…`` rows."""
    import dataclasses

    from star_lib.agent.summary import paired_difference

    clean_cfg = dataclasses.replace(cfg, tool_failure_rate=0.0, tool_latency_ms=0.0, tool_corruption_rate=0.0)
    faulty = _faults(cfg) is not None
    rows: list[dict[str, Any]] = []
    for name, path in models:
        table = noisy[name]
        if faulty:
            table, _ = _episodes(clean_cfg, path, queries, world, out, f"clean-{name}", workers, check=False)
        values = _table_metrics(queries, table)
        if len(models) > 1:
            rows += metrics_rows({f"eval/{name}/clean/{k}": v for k, v in values.items()})
        if name == models[-1][0]:
            rows += metrics_rows({f"eval/clean/{k}": v for k, v in values.items()})
            diff = paired_difference(noisy[name]["sum"].to_list(), table["sum"].to_list())
            rows += metrics_rows({f"eval/clean/paired/noisy-clean/{k}": v for k, v in diff.items()})
    return rows


def _score_modes(
    cfg: Any, table: Any, queries: Sequence[Any], world: Any
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


def _eval_ood(
    cfg: Any,
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

    from star_lib.agent.summary import paired_difference
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
        every = _query_reports(table, len(queries))
        values = _table_metrics(queries, table, every)
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


def _eval_splits(cfg: Any, models: Sequence[tuple[str, Path | None]], out: Path) -> list[dict[str, Any]]:
    """Score every model on the official splits of ``eval.splits`` (none: no rows), with clean tools.

    Each split's episodes are scored in their own mode and in ``official`` (the paper's numbers); the last
    model's episodes go to ``split_<name>.parquet``. The turn budget is not checked: the test split has no
    gold plan for the expert to act out.
    """
    if not cfg.splits:
        return []
    import dataclasses

    from star_lib.agent.summary import paired_difference
    from star_lib.experiments.stages.splits import load_splits

    primary_mode = cfg.options.get("eval_mode", "strict")
    modes = tuple(dict.fromkeys(m for m in (*cfg.also_modes, "official") if m != primary_mode))
    clean = dict(tool_failure_rate=0.0, tool_latency_ms=0.0, tool_corruption_rate=0.0)
    split_cfg = dataclasses.replace(cfg, also_modes=modes, **clean)
    loaded, skipped = load_splits(cfg.splits, cfg.split_db, cfg.max_queries)
    rows = metrics_rows({f"{name}/skipped": 1.0 for name in skipped})
    primary = models[-1][0]
    for split in loaded:
        tables: dict[str, Any] = {}
        for name, path in models:
            table, _ = _episodes(
                split_cfg, path, split.queries, split.world, out, f"{split.name}-{name}", check=False
            )
            values = _table_metrics(split.queries, table)
            tables[name], also = _score_modes(split_cfg, table, split.queries, split.world)
            values.update({f"{m}/{k}": v for m, vs in also.items() for k, v in vs.items()})
            if len(models) > 1:
                rows += metrics_rows({f"{split.name}/{name}/{k}": v for k, v in values.items()})
            if name == primary:
                rows += metrics_rows({f"{split.name}/{k}": v for k, v in values.items()})
        for other, _ in models[:-1]:
            for mode in ("", *(f"{m}/" for m in modes)):
                diff = paired_difference(
                    tables[primary][f"{mode}sum"].to_list(), tables[other][f"{mode}sum"].to_list()
                )
                rows += metrics_rows(
                    {f"{split.name}/{mode}paired/{primary}-{other}/{k}": v for k, v in diff.items()}
                )
        keep = [c for c in tables[primary].columns if c not in ("report", "messages")]
        write_parquet_atomic(out / f"split_{split.name}.parquet", tables[primary].select(keep))
    return rows


class TurnBudgetError(ConfigError):
    """An evaluation turn limit the expert cannot finish the tasks in (see :func:`check_turn_budget`)."""


def check_turn_budget(cfg: Any, queries: Sequence[Any], world: Any) -> int:
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
    episodes = run_episodes(expert(cfg.protocol, cfg.seed), with_reference, world, roomy)
    need = max(ep.turns for ep in episodes)
    if need > limit:
        raise TurnBudgetError(
            f"eval.max_turns is {limit} but the {cfg.protocol} expert needs {need} turns on this run's "
            f"tasks: every longer episode would end at the limit; set eval.max_turns >= {need}"
        )
    return need


def _episodes(
    cfg: Any,
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
            policy = load_policy(cfg, model)

            def compute(start: int, chunk: Sequence[Any]) -> pl.DataFrame:
                return _chunk_frame(cfg, policy, world, start, chunk, check)

            try:
                frames, chunk_log = run_chunks(queries, size, out, compute, tag=tag)
            finally:
                close_policy(policy)
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


def _chunk_frame(cfg: Any, policy: Any, world: Any, start: int, chunk: Sequence[Any], check: bool) -> Any:
    """Run one chunk of evaluation episodes (split episode ``i`` seeds its faults with ``seed + i``)."""
    import polars as pl

    from star_lib import rewards
    from star_lib.agent.rollout import episodes_frame, run_episodes

    if check:
        check_turn_budget(cfg, chunk, world)
    reward = _reward_fn(cfg)
    rollout = rollout_config(cfg.protocol, **{**cfg.options, "seed": cfg.seed + start})
    episodes = run_episodes(policy, chunk, world, rollout, _faults(cfg))
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
    cfg: Any,
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
    key = (tag, str(model), cfg.policy, cfg.protocol, cfg.temperature, cfg.top_p, cfg.seed)
    if _WORKER_CACHE.get("policy_key") != key:  # one policy at a time: a new table drops the last one
        _WORKER_CACHE["policy"], _WORKER_CACHE["policy_key"] = load_policy(cfg, model), key
    return _chunk_frame(cfg, _WORKER_CACHE["policy"], _worker_world(world_dir), start, chunk, check)


def _report_json(report: Any) -> str | None:
    """Return an evaluation report as JSON (to checkpoint it with its chunk)."""
    if report is None:
        return None
    from dataclasses import asdict

    return json.dumps(asdict(report), default=str)


def _query_reports(table: Any, n: int) -> list[Any]:
    """Return each of ``n`` queries' evaluation report from an episode table (None: no episode)."""
    reports = dict(table.select("query_index", "report").iter_rows())
    return [_report_from_json(reports.get(i)) for i in range(n)]


def _table_metrics(queries: Sequence[Any], table: Any, reports: list[Any] | None = None) -> dict[str, float]:
    """Return the headline metrics of an episode table (:func:`compute_metrics`) with its episode summary.

    ``reports`` are the table's :func:`_query_reports` when the caller already has them.
    """
    from star_lib.agent.summary import episode_summary
    from star_lib.travel.metrics import compute_metrics

    values = compute_metrics(queries, reports if reports is not None else _query_reports(table, len(queries)))
    values.update({k: v for k, v in episode_summary(table).items() if k not in values})
    return values


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
