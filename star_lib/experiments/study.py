"""The tiny study (issue 13): every finding grid run in order, one published summary per finished run.

``star study --scale tiny`` reads ``configs/study/study.yaml`` (:class:`StudyConfig`): the grids to run (one
YAML per finding under ``configs/study/``), the seeds, the per-grid time budget and the stage timings the
estimate uses. It runs every grid's runs through the experiment runner (:func:`.runner.run_experiment`:
finished runs are skipped and stages come from the content-addressed cache, so a killed study continues
where it stopped and SFT is trained once per model size for the whole study), writes each finished run's
summary to ``reports/tiny-study/<finding>/<run>.parquet`` (:func:`write_summary`, no weights), optionally
commits that one file (``--commit``), and finally runs ``star report``.

The published table (:func:`star_lib.experiments.results.load_study`) has one row per run with
:data:`SUMMARY_COLUMNS`, the run's axes, its held-out metrics (``eval/…`` and ``ood/…``), the stage wall
times (``cost/…``), the RL training curve (``rl_steps`` / ``rl_reward``) and the per-query outcomes of both
splits (``eval_query``, ``eval_final_pass``, …, ``ood_sum``: lists, one entry per query).

:func:`estimate` predicts the compute each grid adds, in study order: a stage whose content (its resolved
config and its inputs' content) an earlier run already produced costs nothing, exactly as in the cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from star_lib.experiments.artifacts import stable_hash
from star_lib.experiments.config import CONFIGS_DIR, ConfigError, ExperimentConfig
from star_lib.experiments.evalpool import check_processes, splittable
from star_lib.experiments.grids import Grid, load_grid
from star_lib.experiments.runner import git_commit_of
from star_lib.io import atomic_path, read_yaml

STUDY_DIR = CONFIGS_DIR / "study"
"""The tiny study's grids and settings (``configs/study/``)."""
STUDY_FILE = STUDY_DIR / "study.yaml"
"""The study's settings (grid order, seeds, budget, timings)."""
PROJECT_ROOT = CONFIGS_DIR.parent
"""The checkout whose commit a summary records (the code that ran)."""
PUBLISHED_DIR = Path("reports") / "tiny-study"
"""Where the published per-run summaries live (relative to the project root)."""
SUMMARY_COLUMNS: tuple[str, ...] = (
    "finding",
    "grid",
    "run",
    "arm",
    "seed",
    "commit",
    "dirty",
    "config_hash",
    "wall_s",
    "compute_s",
    "finished",
)
"""Columns every summary row has (beside the axes, the metrics and the RL curve; ``cpu`` since 6703336)."""
HELD_OUT_PREFIXES: tuple[str, ...] = ("eval/", "ood/")
"""Metrics a summary keeps: the held-out and OOD scores (``cost/…`` too, and the RL curve)."""
MIN_SEEDS = 3
"""Seeds per arm issue 13 asks for (fewer runs, with a note)."""
LOCK_FILE = ".study.lock"
"""File in the runs folder a running study holds (:func:`study_lock`)."""


class StudyError(ConfigError):
    """A study setting, grid or option that is not allowed; the message names it."""


# ───────────────────────────── settings ─────────────────────────────


@dataclass(frozen=True)
class Timing:
    """Seconds per unit of work on 2 CPU cores, for :func:`estimate` (``timing:`` in ``study.yaml``)."""

    world: float = 2.0
    """A world stage."""
    synth: float = 60.0
    """A synth stage."""
    teacher: float = 100.0
    """A teacher stage."""
    warmup_step: float = 0.15
    """One copy warm-up step of ``tiny``."""
    sft_step: float = 1.2
    """One SFT step of ``tiny``."""
    rl_episode: float = 0.27
    """One RL episode of ``tiny`` (rollout and update)."""
    eval_episode: float = 0.1
    """One held-out evaluation episode of ``tiny``."""
    ood_episode: float = 0.25
    """One OOD evaluation episode of ``tiny``."""
    eval_split: float = 1.0
    """How many times faster a greedy evaluation runs split over processes (``eval_processes`` > 1) than in
    one (``benchmarks/bench_eval_processes.py`` measures it); the estimate divides evaluation time by it."""
    model_factor: dict[str, float] = field(
        default_factory=lambda: {"tiny-s": 0.6, "tiny": 1.0, "tiny-l": 2.0}
    )
    """Cost of a model size relative to ``tiny`` (others: 1)."""
    algorithm_factor: dict[str, float] = field(
        default_factory=lambda: {"grpo": 1.0, "dapo": 1.8, "arpo": 1.2}
    )
    """Cost of an RL algorithm relative to GRPO."""


@dataclass(frozen=True)
class MoreSeeds:
    """A precision top-up: the runs of some grids that also run with further seeds.

    Added where the study's seeds left an arm's 95 % interval wider than the study aims for: for a block
    of arms (every ``tiny-l`` run of a grid), or for one arm. Each arm's interval bootstraps its own seeds,
    so arms with more seeds than their neighbours are compared as fairly as balanced ones.
    """

    grids: tuple[str, ...]
    """Grid names the top-up applies to."""
    match: str
    """Glob of the run names that get the seeds, as ``star study --match`` takes it (``*_tiny-l_*``)."""
    seeds: tuple[int, ...]
    """The further seeds."""


@dataclass(frozen=True)
class StudyConfig:
    """``study.yaml``: which grids, in which order, with which seeds, budget and timings."""

    grids: tuple[str, ...]
    """Grid names (``<name>.yaml`` beside ``study.yaml``), in the order they run."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Seeds of every arm."""
    scale: str = "tiny"
    """The study's scale (only ``tiny`` has a study file)."""
    grid_budget_minutes: float = 90.0
    """Most minutes a grid's estimate may take (the dry run flags the ones above)."""
    timing: Timing = field(default_factory=Timing)
    """Stage timings of the estimate."""
    folder: Path = STUDY_DIR
    """Folder of the grid files."""
    more_seeds: tuple[MoreSeeds, ...] = ()
    """Precision top-ups (``more_seeds`` in ``study.yaml``), applied when ``--seeds`` is not given."""
    jobs: int = 1
    """Runs at once (``star study --jobs`` overrides; :func:`check_jobs`); the estimate divides by it."""
    eval_processes: int = 1
    """Processes each run's greedy evaluation is split over (``star study --eval-processes`` overrides;
    :mod:`star_lib.experiments.evalpool`): the run's ``threads`` as one-thread processes, same episodes."""

    def grid_path(self, name: str) -> Path:
        """Return the YAML file of grid ``name``."""
        return self.folder / f"{name}.yaml"

    def load_grids(self, only: Sequence[str] = (), seeds: Sequence[int] | None = None) -> list[Grid]:
        """Return the study's grids in order (``only``: those grid names only), each with ``seeds``.

        Without ``seeds``, each grid runs with the study's seeds plus its :attr:`more_seeds` top-ups.

        Raises:
            StudyError: ``only`` names no grid of the study.

        """
        wanted = list(self.grids)
        if only:
            unknown = [name for name in only if name not in self.grids]
            if unknown:
                raise StudyError(
                    f"--only {','.join(only)}: {unknown} is not a grid of the study {list(self.grids)}"
                )
            wanted = [name for name in self.grids if name in only]
        if seeds is not None:
            return [load_grid(self.grid_path(name), seeds=list(seeds)) for name in wanted]
        grids = [load_grid(self.grid_path(name), seeds=list(self.seeds)) for name in wanted]
        return [self._with_more_seeds(grid) for grid in grids]

    def _with_more_seeds(self, grid: Grid) -> Grid:
        """Add the runs of the top-ups that apply to ``grid``."""
        runs = list(grid.runs)
        for more in self.more_seeds:
            if grid.name in more.grids:
                extra = load_grid(self.grid_path(grid.name), seeds=list(more.seeds)).runs
                have = {r.name for r in runs}
                runs += [r for r in extra if r.name not in have and fnmatch.fnmatch(r.name, more.match)]
        return grid if len(runs) == len(grid.runs) else replace(grid, runs=tuple(runs))


def read_study(path: str | os.PathLike[str] = STUDY_FILE) -> StudyConfig:
    """Read a study file (``configs/study/study.yaml``).

    Raises:
        FileNotFoundError: the file, or one of the grid files it names, is missing.
        StudyError: an unknown key or a bad value, naming the file and the key.

    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"study file {path} not found")
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise StudyError(f"{path}: a study file is a mapping of settings, got {type(data).__name__}")
    allowed = [
        "scale", "seeds", "grids", "grid_budget_minutes", "timing", "more_seeds", "jobs", "eval_processes"
    ]  # fmt: skip
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise StudyError(f"{path}: unknown key(s) {unknown}; allowed keys are {allowed}")
    grids = data.get("grids")
    if not isinstance(grids, list) or not grids or not all(isinstance(g, str) for g in grids):
        raise StudyError(f"{path}: grids: give a non-empty list of grid names (files beside {path.name})")
    missing = [g for g in grids if not (path.parent / f"{g}.yaml").is_file()]
    if missing:
        raise FileNotFoundError(f"{path}: grids {missing} have no file {path.parent}/<grid>.yaml")
    seeds = _seed_list(path, "seeds", data.get("seeds", [0, 1, 2]))
    timing = data.get("timing") or {}
    fields_ = set(Timing.__dataclass_fields__)
    if not isinstance(timing, dict) or set(timing) - fields_:
        raise StudyError(f"{path}: timing: allowed keys are {sorted(fields_)}, got {timing!r}")
    budget = data.get("grid_budget_minutes", 90.0)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0:
        raise StudyError(f"{path}: grid_budget_minutes: give a positive number of minutes, got {budget!r}")
    jobs = data.get("jobs", 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise StudyError(f"{path}: jobs: give the number of runs at once (1 or more), got {jobs!r}")
    try:
        eval_processes = check_processes(data.get("eval_processes", 1), "eval_processes")
    except ValueError as exc:
        raise StudyError(f"{path}: {exc}") from None
    return StudyConfig(
        grids=tuple(grids),
        seeds=seeds,
        more_seeds=_more_seeds(path, data.get("more_seeds") or [], grids),
        scale=str(data.get("scale", "tiny")),
        grid_budget_minutes=float(budget),
        timing=Timing(**timing),
        folder=path.parent,
        jobs=jobs,
        eval_processes=eval_processes,
    )


def _more_seeds(path: Path, entries: Any, grids: Sequence[str]) -> tuple[MoreSeeds, ...]:
    """Read ``more_seeds``: a list of ``{grids: [...], match: "<glob>", seeds: [...]}`` (:class:`MoreSeeds`).

    Raises:
        StudyError: an entry of another shape, naming the file and the entry.

    """
    usage = 'give a list of {grids: [<grid>, ...], match: "<run-name glob>", seeds: [<int>, ...]}'
    if not isinstance(entries, list):
        raise StudyError(f"{path}: more_seeds: {usage}, got {entries!r}")
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != {"grids", "match", "seeds"}:
            raise StudyError(f"{path}: more_seeds: {usage}, got {entry!r}")
        names, match, seeds = entry["grids"], entry["match"], entry["seeds"]
        if not isinstance(names, list) or not names or any(n not in grids for n in names):
            raise StudyError(
                f"{path}: more_seeds: grids {names!r} must name grids of the study {list(grids)}"
            )
        if not isinstance(match, str) or not match:
            raise StudyError(f"{path}: more_seeds: match must be a glob of run names, got {match!r}")
        out.append(MoreSeeds(tuple(names), match, _seed_list(path, "more_seeds: seeds", seeds)))
    return tuple(out)


def _seed_list(path: Path, key: str, seeds: Any) -> tuple[int, ...]:
    """Return ``seeds`` as a tuple, or raise :class:`StudyError` naming the file and ``key``."""
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise StudyError(f"{path}: {key}: give a non-empty list of integers >= 0, got {seeds!r}")
    return tuple(seeds)


# ───────────────────────────── estimate ─────────────────────────────


_BASE_ONLY: dict[tuple[str, str], tuple[str, ...]] = {
    ("synth", "base"): ("rl_data_size", "difficulty", "ood")
}
"""Outputs that do not depend on some of their stage's settings (the SFT/test tasks ignore the RL axes and
the OOD split), so runs differing only there share what reads them, as the cache does."""
_WRITTEN_WHEN: dict[tuple[str, str], Callable[[Any], bool]] = {("synth", "ood"): lambda cfg: bool(cfg.ood)}
"""Optional outputs (inputs ending in ``?``) and when their stage writes them."""


@dataclass
class RunEstimate:
    """The stages one run adds, and their seconds."""

    run: str
    """Run name."""
    new: dict[str, float]
    """Stage → seconds, for the stages no earlier run produced."""

    @property
    def seconds(self) -> float:
        """Seconds of the new stages."""
        return sum(self.new.values())


@dataclass
class GridEstimate:
    """A grid's estimate: per run, the new stages it computes."""

    grid: Grid
    """The grid."""
    runs: list[RunEstimate]
    """One per run, in order."""
    alone_s: float
    """Seconds the grid takes run on its own (an empty cache)."""

    @property
    def seconds(self) -> float:
        """Seconds the grid adds in study order (stages earlier grids computed are free)."""
        return sum(r.seconds for r in self.runs)

    def count(self, stage: str) -> int:
        """Return how many runs compute ``stage`` anew."""
        return sum(1 for r in self.runs if stage in r.new)


def _stage_seconds(name: str, config: ExperimentConfig, timing: Timing, eval_processes: int = 1) -> float:
    """Seconds one stage of ``config`` takes, from its budgets (steps, episodes) and :class:`Timing`.

    With ``eval_processes`` > 1 a greedy evaluation is split (:mod:`star_lib.experiments.evalpool`), so it
    takes ``1 / timing.eval_split`` of the time.
    """
    factor = timing.model_factor.get(config.model, 1.0)
    if name in ("world", "synth", "teacher"):
        return float(getattr(timing, name))
    if name == "sft":
        warm = (config.sft.get("copy_warmup") or {}).get("steps", 0)
        return factor * (warm * timing.warmup_step + config.sft.get("max_steps", 0) * timing.sft_step)
    if name == "rl":
        rl = config.rl
        episodes = rl.get("max_steps", 50) * rl.get("prompts_per_step", 2) * rl.get("num_generations", 8)
        return factor * timing.algorithm_factor.get(config.algorithm, 1.0) * episodes * timing.rl_episode
    if name == "eval":
        models = len(config.eval.get("models") or [None])
        cap = config.eval.get("max_queries")
        held_out = config.synth.get("n_test", 200)
        ood = (config.synth.get("ood") or {}).get("n", 0) if config.synth.get("ood") else 0
        if cap:
            held_out, ood = min(held_out, cap), min(ood, cap)
        greedy_fast = splittable(config.eval.get("policy"), config.eval.get("temperature", 0.0))
        split = timing.eval_split if eval_processes > 1 and greedy_fast else 1.0
        return factor * models * (held_out * timing.eval_episode + ood * timing.ood_episode) / split
    return 0.0


def stage_signatures(config: ExperimentConfig, registry: Any = None) -> dict[str, str]:
    """Return a content signature per stage of ``config``: equal signatures mean the cache shares the stage.

    A stage's signature hashes its resolved config and the signatures of the outputs it reads, as the stage
    cache's key hashes the inputs' content; the SFT/test tasks (``synth`` ``base/``) ignore the RL axes.
    """
    from star_lib.experiments.pipeline import build_registry

    registry = registry or build_registry()
    resolved = registry.check(config)
    signatures: dict[str, str] = {}
    reads: dict[str, dict[str, str]] = {}
    for name, stage_config in resolved.items():
        stage = registry.get(name)
        inputs = {}
        for input_name, (source, spec) in stage.inputs(config.stages).items():
            if source not in signatures:
                continue
            top = spec.removesuffix("?").split("/")[0]
            written = _WRITTEN_WHEN.get((source, top))
            if spec.endswith("?") and written is not None and not written(resolved[source]):
                continue  # the runner leaves an optional input out when its stage did not write it
            ignored = _BASE_ONLY.get((source, top))
            if ignored:
                own = registry.get(source).config_dict(resolved[source])
                part = {k: v for k, v in own.items() if k not in ignored}
                inputs[input_name] = stable_hash({"config": part, "inputs": reads[source], "out": spec})
            else:
                inputs[input_name] = stable_hash({"sig": signatures[source], "out": spec})
        reads[name] = inputs
        signatures[name] = stable_hash(
            {"stage": name, "config": stage.config_dict(stage_config), "inputs": inputs}
        )
    return signatures


def estimate(
    grids: Sequence[Grid],
    timing: Timing,
    done: Iterable[str] = (),
    skip: Mapping[str, str] | None = None,
    *,
    eval_processes: int = 1,
) -> list[GridEstimate]:
    """Estimate each grid's compute in order: stages an earlier run (or ``done``) produced cost nothing.

    ``skip`` maps the runs the study will not run (:func:`publication_status`) to why: they add nothing,
    so the estimate is what is left to run with an empty cache; ``alone_s`` still counts every run.
    ``eval_processes`` is the study's split of greedy evaluations (see :func:`_stage_seconds`).
    """
    from star_lib.experiments.pipeline import build_registry

    registry = build_registry()
    skip = skip or {}
    seen = set(done)
    out = []
    for grid in grids:
        runs = []
        alone: set[str] = set()
        alone_s = 0.0
        for config in grid.runs:
            signatures = stage_signatures(config, registry)
            new = {}
            for name, signature in signatures.items():
                seconds = _stage_seconds(name, config, timing, eval_processes)
                if signature not in alone:
                    alone.add(signature)
                    alone_s += seconds
                if signature not in seen and config.name not in skip:
                    seen.add(signature)
                    new[name] = seconds
            runs.append(RunEstimate(config.name, new))
        out.append(GridEstimate(grid, runs, alone_s))
    return out


def publication_status(grids: Sequence[Grid], out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Map each run :func:`run_study` will not run to ``published`` (its summary is out) or ``shared``."""
    published = published_runs(out_dir)
    status = {}
    for grid in grids:
        for config in grid.runs:
            fingerprint = config.fingerprint()
            if published_hash(summary_path(out_dir, grid, config.name)) == fingerprint:
                status[config.name] = "published"
            elif fingerprint in published:
                status[config.name] = "shared"
    return status


def describe_estimates(estimates: Sequence[GridEstimate], budget_minutes: float, jobs: int = 1) -> str:
    """Return the dry run's text: every run with the stages it adds, and per grid its minutes.

    With ``jobs`` runs at once a grid takes about its compute divided by ``jobs``: a rough guess, as the
    timings are of one run at a time and runs side by side share the memory bandwidth.
    """
    lines = []
    total = 0.0
    for est in estimates:
        grid = est.grid
        arms = sorted({r.name.rsplit("__s", 1)[0] for r in grid.runs})
        seeds = sorted({r.seed for r in grid.runs})
        shape = f"= {len(arms)} arms x {len(seeds)} seeds {seeds}"
        if len(grid) != len(arms) * len(seeds):  # a top-up (study.yaml more_seeds) gave some arms more seeds
            shape = f"over {len(arms)} arms, seeds {seeds} (more_seeds: some arms have more)"
        lines.append(
            f"{grid.name} (finding {grid.finding}): {len(grid)} runs {shape}; "
            f"axes {[a for a in grid.axes if a != 'seed']}"
        )
        for run in est.runs:
            added = ", ".join(f"{s} {v / 60:.1f}" for s, v in run.new.items()) or "all stages shared"
            lines.append(f"  {run.run:48s} {run.seconds / 60:6.1f} min  ({added})")
        minutes, alone = est.seconds / 60 / jobs, est.alone_s / 60 / jobs
        flag = "" if minutes <= budget_minutes else f"  OVER the {budget_minutes:g}-minute budget"
        lines.append(
            f"  = {minutes:.0f} min in study order ({est.count('sft')} SFT, {est.count('rl')} RL, "
            f"{est.count('eval')} eval stages new); {alone:.0f} min run alone{flag}"
        )
        total += est.seconds / jobs
    runs = sum(len(e.grid) for e in estimates)
    at_once = f", {jobs} runs at once" if jobs > 1 else ""
    lines.append(f"study: {total / 3600:.1f} h estimated (2-core timings) for {runs} runs{at_once}")
    return "\n".join(lines)


# ───────────────────────────── summaries ─────────────────────────────


def summary_path(out_dir: str | os.PathLike[str], grid: Grid, run: str) -> Path:
    """Return where a run's summary is published: ``<out>/<finding>/<run>.parquet``."""
    return Path(out_dir) / (grid.finding or grid.name) / f"{run}.parquet"


def run_summary(grid: Grid, config: ExperimentConfig, run_dir: Path, commit: tuple[str, bool]) -> Any:
    """Return a finished run's one-row summary (a polars frame): ids, axes, held-out metrics, costs, curve.

    The commit is the one the run's ``run.json`` recorded when it started (``commit``, the checkout now,
    only for runs older than that record).

    Beside the rates it lists the run's per-query outcomes on the held-out and OOD splits
    (:func:`star_lib.experiments.results.held_out_outcomes`: ``eval_query``, ``eval_final_pass``, …,
    ``ood_sum``), so intervals can be bootstrapped over queries as well as seeds; no trajectories.

    Raises:
        FileNotFoundError: the run has no ``metrics.parquet`` (it has not finished).

    """
    import polars as pl

    from star_lib.experiments.results import AXIS_SCHEMA, RL_CURVE, held_out_outcomes, outcome_schema
    from star_lib.experiments.runner import read_run_record

    path = run_dir / "metrics.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run {config.name} has not finished")
    metrics = pl.read_parquet(path)
    record = read_run_record(run_dir) or {}
    final = metrics.filter(pl.col("step").is_null())
    values: dict[str, float] = {}
    for stage, metric, value in final.select("stage", "metric", "value").iter_rows():
        if metric.startswith(HELD_OUT_PREFIXES) and stage == "eval":
            values[metric] = value
        elif metric == "cost/stage_wall_s":
            values[f"cost/{stage}_s"] = value
    curve = metrics.filter((pl.col("stage") == "rl") & (pl.col("metric") == RL_CURVE)).sort("step")
    outcomes = held_out_outcomes(run_dir)
    # the code that ran, as run.json recorded it at the start; `commit` only for runs older than that record
    ran_at = (record["commit"], bool(record.get("dirty"))) if record.get("commit") else commit
    axes = config.axes()
    axes["curriculum_boundaries"] = ",".join(f"{b:.4g}" for b in config.curriculum_boundaries)
    row: dict[str, Any] = {
        "finding": grid.finding or grid.name,
        "grid": grid.name,
        "run": config.name,
        "arm": _arm(config.name),
        "seed": config.seed,
        "commit": ran_at[0],
        "dirty": ran_at[1],
        "config_hash": config.fingerprint(),
        "wall_s": float(record.get("wall_s") or 0.0),
        "compute_s": float(sum(s.get("wall_s", 0.0) for s in record.get("stages") or [])),
        "finished": float(record.get("finished") or time.time()),
        "cpu": str((record.get("machine") or {}).get("cpu", "")),
        **{k: axes[k] for k in AXIS_SCHEMA},
        "config": json.dumps(config.to_dict(), sort_keys=True),
        "rl_steps": [int(s) for s in curve["step"].to_list()],
        "rl_reward": [float(v) for v in curve["value"].to_list()],
        **values,
        **outcomes,
    }
    schema = {
        **{k: AXIS_SCHEMA[k] for k in AXIS_SCHEMA},
        "rl_steps": pl.List(pl.Int64),
        "rl_reward": pl.List(pl.Float64),
        **outcome_schema(outcomes),
    }
    return pl.DataFrame([row], schema_overrides=schema)


def published_hash(path: Path) -> str | None:
    """Return the ``config_hash`` of a published summary (None when there is none or it cannot be read)."""
    import polars as pl

    try:
        return pl.read_parquet(path, columns=["config_hash"])["config_hash"][0]
    except (OSError, pl.exceptions.PolarsError, IndexError):
        return None


def write_summary(frame: Any, path: Path) -> Path:
    """Write a run summary atomically."""
    with atomic_path(path) as tmp:
        frame.write_parquet(tmp)
    return path


def git_root(folder: str | os.PathLike[str]) -> Path:
    """Return the top of the git work tree holding ``folder`` (or its nearest existing parent).

    Raises:
        StudyError: it is not inside a git repository.

    """
    here = Path(folder).resolve()
    while not here.exists():
        here = here.parent
    top = subprocess.run(
        ["git", "-C", str(here), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if top.returncode != 0:
        raise StudyError(f"--commit: {folder} is not inside a git repository")
    return Path(top.stdout.strip())


def check_committable(out_dir: str | os.PathLike[str]) -> None:
    """Refuse ``--commit`` into a folder git would not track: outside a repository, or ignored.

    Raises:
        StudyError: naming the folder and what to change.

    """
    root = git_root(out_dir)
    probe = Path(out_dir).resolve() / "finding" / "run.parquet"  # a summary's path (need not exist)
    ignored = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "-q", "--no-index", "--", str(probe)], capture_output=True
    )
    if ignored.returncode == 0:
        raise StudyError(
            f"--commit: git ignores {out_dir} (a .gitignore rule matches its summaries); publish into a "
            "tracked folder (--out) or add a '!' rule for it to .gitignore"
        )


def commit_file(path: Path, message: str, attempts: int = 5) -> bool:
    """``git commit`` exactly ``path`` (other staged or changed files stay as they are); False if unchanged.

    Raises:
        StudyError: ``path`` is not inside a git repository, or git refuses the commit (its message).

    """
    root = str(git_root(path.parent))
    rel = os.path.relpath(path.resolve(), Path(root).resolve())
    for attempt in range(attempts):
        add = subprocess.run(["git", "-C", root, "add", "--", rel], capture_output=True, text=True)
        if add.returncode == 0:
            changed = subprocess.run(["git", "-C", root, "diff", "--cached", "--quiet", "--", rel])
            if changed.returncode == 0:
                return False
            done = subprocess.run(
                ["git", "-C", root, "commit", "-q", "-m", message, "--only", "--", rel],
                capture_output=True,
                text=True,
            )
            if done.returncode == 0:
                return True
            error = (done.stderr or done.stdout).strip()
        else:
            error = add.stderr.strip()
        if "index.lock" not in error or attempt == attempts - 1:
            raise StudyError(
                f"--commit: git refused to commit {rel}: {error.splitlines()[-1] if error else '?'}"
            )
        time.sleep(2.0)
    return False


# ───────────────────────────── the study ─────────────────────────────


@dataclass
class StudyRun:
    """What happened to one run of the study."""

    grid: str
    """Grid name."""
    run: str
    """Run name."""
    status: str
    """``done`` (ran now), ``skipped`` (finished under the runs folder), ``published`` (its summary was
    published before; not run), ``shared`` (published as a copy of the same config's run) or ``failed``."""
    summary: Path | None = None
    """The published summary (None when the run failed)."""
    committed: bool = False
    """Whether ``--commit`` committed the summary now."""
    error: str | None = None
    """Last line of the error of a failed run."""


def run_study(
    grids: Sequence[Grid],
    runs_root: str | os.PathLike[str] = "runs",
    out_dir: str | os.PathLike[str] = PUBLISHED_DIR,
    *,
    cache: str | os.PathLike[str] | None = None,
    commit: bool = False,
    rerun: bool = False,
    isolate: bool = False,
    match: Sequence[str] = (),
    jobs: int = 1,
    on_run: Callable[[StudyRun], None] | None = None,
) -> list[StudyRun]:
    """Run every grid's runs in order, publishing each finished run's summary (and committing it).

    A run whose summary is already published for its config is not run again (``published``): the summary
    is the result, so a study resumed on a machine that lost its runs folder and cache goes on where the
    published study stops. A run of the same config as another published run (another grid's, under
    another name) is published as a copy of that one (``shared``, :func:`shared_summary`), exactly what a
    full cache hit would give. ``rerun=True`` runs those too (into ``runs_root``, to check them with
    :func:`verify_study`). A run already finished under ``runs_root`` is skipped by the runner; its summary
    is rewritten only when the published one is of another config. A failed run is reported and the study
    goes on. ``isolate=True`` runs each run in its own process (:func:`.runner.run_experiment_isolated`),
    as ``star study`` does, so no run inherits the memory of the ones before it. ``match`` (glob patterns
    of run names, :func:`matching`) leaves every other run alone; each grid's manifest still lists all.

    ``jobs`` runs that many runs at once, in study order, each in its own process (:func:`check_jobs` says
    when the cores allow it). A stage two of them need is built once (the cache locks it), a run of the
    same config as one in progress waits for it and is published as its copy, and ``on_run`` hears of each
    run as it ends. Each run's numbers are those it gets alone: it computes on its own ``threads``.
    """
    from star_lib.experiments.runner import CACHE_DIRNAME, grid_dir

    if commit:
        check_committable(out_dir)  # refused before any run, not after the first one
    if jobs > 1 and not isolate:
        raise StudyError(f"jobs={jobs} runs runs side by side, each in its own process: pass isolate=True")
    cache = cache or Path(runs_root) / CACHE_DIRNAME
    published = {} if rerun else published_runs(out_dir)
    results: list[StudyRun] = []
    running: dict[futures.Future[StudyRun], str] = {}  # each run in progress -> its config fingerprint

    def finish(fingerprint: str, outcome: StudyRun) -> None:
        if outcome.summary is not None and not rerun:
            published.setdefault(fingerprint, outcome.summary)
        results.append(outcome)
        if on_run is not None:
            on_run(outcome)

    def collect(done: Iterable[futures.Future[StudyRun]]) -> None:
        for future in done:
            finish(running.pop(future), future.result())

    with study_lock(runs_root), futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for grid in grids:
            folder = grid_dir(runs_root, grid)
            grid.write_manifest(folder)
            for config in (c for c in grid.runs if _matches(c.name, match)):
                fingerprint = config.fingerprint()
                if jobs <= 1:  # in this thread, so Ctrl-C stops an in-process run at once
                    twin = published.get(fingerprint)
                    finish(
                        fingerprint,
                        _study_run(
                            grid, config, folder, out_dir, cache, twin, commit=commit, isolate=isolate
                        ),
                    )
                    continue
                twin_running = [f for f, fp in running.items() if fp == fingerprint and not rerun]
                if twin_running or len(running) >= jobs:
                    collect(futures.wait(twin_running or running, return_when=futures.FIRST_COMPLETED).done)
                future = pool.submit(
                    _study_run, grid, config, folder, out_dir, cache, published.get(fingerprint),
                    commit=commit, isolate=isolate,
                )  # fmt: skip
                running[future] = fingerprint
        collect(futures.as_completed(list(running)))
    return results


def check_jobs(jobs: int, grids: Sequence[Grid], cores: int | None = None) -> None:
    """Refuse ``jobs`` runs at once when their torch threads would outnumber the cores.

    Runs side by side on more threads than cores wait on each other at every operation (measured: a copy
    warm-up step took 2.9 s instead of 0.2 s), so ``--jobs 2`` on 2 cores needs ``threads: 1`` in every run.

    Raises:
        StudyError: ``jobs`` < 1, or ``jobs`` times a run's ``threads`` (0: one per core) exceeds ``cores``.

    """
    cores = cores or os.cpu_count() or 1
    if jobs < 1:
        raise StudyError(f"--jobs {jobs}: give 1 or more runs at once")
    if jobs == 1:
        return
    widest = max((c.threads or cores for g in grids for c in g.runs), default=1)
    if jobs * widest > cores:
        raise StudyError(
            f"--jobs {jobs}: runs with threads: {widest} would ask for {jobs * widest} torch threads on "
            f"{cores} cores; set threads: {max(1, cores // jobs)} in the study's runs "
            "(configs/study/base.yaml) or run fewer jobs"
        )


def matching(grids: Sequence[Grid], patterns: Sequence[str]) -> list[Grid]:
    """Return each grid with only the runs whose name matches one of the glob ``patterns`` (all when none).

    ``star study --match '*_tiny_*'`` runs one model size's block of a grid, e.g. to rerun it whole on one
    machine. A grid left with no run keeps its place, empty.

    Raises:
        StudyError: a pattern matches no run of ``grids`` (naming it).

    """
    names = [config.name for grid in grids for config in grid.runs]
    unmatched = [p for p in patterns if not fnmatch.filter(names, p)]
    if unmatched:
        raise StudyError(
            f"--match {','.join(patterns)}: {unmatched} matches no run of {[g.name for g in grids]}"
        )
    return [
        Grid(g.name, tuple(c for c in g.runs if _matches(c.name, patterns)), g.axes, g.finding) for g in grids
    ]


def _matches(run: str, patterns: Sequence[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(run, p) for p in patterns)


@contextlib.contextmanager
def study_lock(runs_root: str | os.PathLike[str]) -> Iterator[None]:
    """Hold ``<runs_root>/.study.lock`` for the block: one study at a time per runs folder.

    Two studies at once would be correct (each stage is built under its own lock) but slow: each run asks
    for ``threads`` torch threads, and two runs' threads on 2 cores wait on each other at every operation
    (measured: a copy warm-up step took 2.9 s instead of 0.2 s). The lock is released when the process
    ends, however it ends.

    Raises:
        StudyError: another process holds the lock (the message names its pid).

    """
    path = Path(runs_root) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise StudyError(
                f"another star study (pid {holder}) is running on {runs_root} ({path} is locked); wait for "
                "it to end or stop it: two studies on the same cores slow each other down about 15x"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _study_run(
    grid: Grid,
    config: ExperimentConfig,
    folder: Path,
    out_dir: Any,
    cache: Any,
    twin: Path | None,
    *,
    commit: bool,
    isolate: bool,
) -> StudyRun:
    """One run of the study: already published, published as a copy of ``twin``, or run and published."""
    from star_lib.experiments.runner import _last_line, run_experiment, run_experiment_isolated

    path = summary_path(out_dir, grid, config.name)
    if twin is not None and published_hash(path) == config.fingerprint():
        return StudyRun(grid.name, config.name, "published", path)
    if twin is not None:
        write_summary(shared_summary(grid, config, twin), path)
        committed = commit and commit_file(path, _commit_message(grid, config))
        return StudyRun(grid.name, config.name, "shared", path, committed)
    run = run_experiment_isolated if isolate else run_experiment
    try:
        result = run(config, folder / config.name, cache=cache, grid=grid.name)
    except Exception as exc:  # the run's run.json says where it failed; the study goes on
        return StudyRun(grid.name, config.name, "failed", error=_last_line(exc))
    if result.status == "failed":
        return StudyRun(grid.name, config.name, "failed", error=result.error)
    summary, committed = _publish(grid, config, result.run_dir, out_dir, commit)
    return StudyRun(grid.name, config.name, result.status, summary, committed)


def published_runs(out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Map each config fingerprint published under ``out_dir`` to a summary of it (the first by path)."""
    found: dict[str, Path] = {}
    for path in sorted(Path(out_dir).glob("*/*.parquet")):
        fingerprint = published_hash(path)
        if fingerprint is not None:
            found.setdefault(fingerprint, path)
    return found


def shared_summary(grid: Grid, config: ExperimentConfig, twin: Path) -> Any:
    """Return ``config``'s summary as a copy of ``twin``, the published summary of the same config.

    Every stage of the two runs has the same content, so every metric, per-query outcome and the RL curve
    are the twin's; only the names change (``finding``, ``grid``, ``run``, ``arm``), ``wall_s`` is 0 (the
    run added no compute, as with a full cache hit) and ``same_as`` names the published run it copies.
    """
    import polars as pl

    frame = pl.read_parquet(twin)
    if frame["config_hash"][0] != config.fingerprint():
        raise StudyError(f"{twin} is not a summary of {config.name}'s config")
    names = {
        "finding": grid.finding or grid.name,
        "grid": grid.name,
        "run": config.name,
        "arm": _arm(config.name),
        "same_as": frame["same_as"][0] if "same_as" in frame.columns else frame["run"][0],
    }
    return frame.with_columns(
        *(pl.lit(v, dtype=pl.String).alias(k) for k, v in names.items()),
        pl.lit(0.0).alias("wall_s"),
        pl.lit(time.time()).alias("finished"),
    )


def _arm(run: str) -> str:
    return run.split("__")[1] if run.count("__") >= 2 else run


def _commit_message(grid: Grid, config: ExperimentConfig) -> str:
    return f"tiny study: {config.name} ({grid.finding or grid.name} grid), held-out and OOD summary"


def _publish(
    grid: Grid, config: ExperimentConfig, run_dir: Path, out_dir: Any, commit: bool
) -> tuple[Path, bool]:
    """Write a finished run's summary unless the same config's is published; commit it when asked."""
    path = summary_path(out_dir, grid, config.name)
    if published_hash(path) != config.fingerprint():
        write_summary(run_summary(grid, config, run_dir, git_commit_of(PROJECT_ROOT)), path)
    if not commit:
        return path, False
    return path, commit_file(path, _commit_message(grid, config))


# ───────────────────────────── reproducing published runs ─────────────────────────────

REPRODUCED_PREFIXES: tuple[str, ...] = ("eval/", "ood/", "eval_", "ood_")
"""Columns a rerun must match exactly: the held-out and OOD metrics and the per-query outcomes."""


@dataclass
class Reproduction:
    """How one rerun compares with its published summary."""

    run: str
    """Run name."""
    status: str
    """``reproduced`` (every held-out metric equal), ``differs``, ``other config`` or ``not rerun``."""
    gaps: list[str] = field(default_factory=list)
    """The columns that differ, as ``column: published -> rerun``."""
    machines: tuple[str, str] | None = None
    """The CPUs of the published run and of the rerun when they differ (another CPU's kernels may round
    differently, so a rerun there is not expected to match bit for bit); None when the same or unknown."""


def reproduction_gaps(published: Any, rerun: Any) -> list[str]:
    """Name each held-out metric, per-query outcome or RL-curve value where a rerun differs from its summary.

    Both are one-row summaries (:func:`run_summary`). Equality is exact (NaN equals NaN): step budgets and
    seeded, greedy evaluation make a rerun of the same config at the same commit give the same numbers.
    """
    old, new = published.row(0, named=True), rerun.row(0, named=True)
    columns = [c for c in old if c.startswith(REPRODUCED_PREFIXES)] + ["rl_reward"]
    gaps = []
    for column in columns:
        a, b = old.get(column), new.get(column)
        if not _same(a, b):
            gaps.append(f"{column}: {_short(a)} -> {_short(b)}")
    return gaps


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


def _short(value: Any) -> str:
    if isinstance(value, list):
        return f"[{len(value)} values]"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def verify_study(
    grids: Sequence[Grid], runs_root: str | os.PathLike[str], out_dir: str | os.PathLike[str]
) -> list[Reproduction]:
    """Compare every finished run under ``runs_root`` with its published summary in ``out_dir``; run nothing.

    A run that is not finished under ``runs_root`` (or not published) is ``not rerun``; one whose config
    fingerprint is not the published one is ``other config`` (its numbers are not expected to match).
    """
    import polars as pl

    from star_lib.experiments.runner import grid_dir

    out = []
    for grid in grids:
        for config in grid.runs:
            path = summary_path(out_dir, grid, config.name)
            run_dir = grid_dir(runs_root, grid) / config.name
            if not path.is_file() or not (run_dir / "metrics.parquet").is_file():
                out.append(Reproduction(config.name, "not rerun"))
                continue
            published = pl.read_parquet(path)
            if published["config_hash"][0] != config.fingerprint():
                out.append(Reproduction(config.name, "other config"))
                continue
            rerun = run_summary(grid, config, run_dir, ("", False))
            gaps = reproduction_gaps(published, rerun)
            cpus = (_cpu_of(published), _cpu_of(rerun))
            machines = cpus if all(cpus) and cpus[0] != cpus[1] else None
            out.append(Reproduction(config.name, "differs" if gaps else "reproduced", gaps, machines))
    return out


def _cpu_of(summary: Any) -> str:
    return str(summary["cpu"][0] or "") if "cpu" in summary.columns else ""
