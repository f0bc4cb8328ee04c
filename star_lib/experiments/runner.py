"""Run experiments: one run locally (``star run``), a grid locally, or a grid on Slurm through submitit.

A run lives in ``runs/<grid>/<run>/``:

- ``config.yaml`` — the experiment config;
- ``run.json`` — status (pending / running / done / failed), the error's last line, wall time, GPU-hours,
  the stage keys it used and whether each was reused, the Slurm job id; while running, ``current_stage``
  (and the stage it failed in) and, for SFT/RL, ``stage_step`` / ``stage_steps``, ``stage_reward`` /
  ``stage_loss`` and ``stage_eta_s`` (the trainers write them: :mod:`star_lib.train.progress`);
- ``metrics.parquet`` (``stage``, ``step``, ``metric``, ``value``), ``rollouts.parquet``, ``eval.parquet``,
  ``qa.parquet`` — gathered from the stage outputs, written atomically.

Stage outputs are content-addressed in a shared cache (default ``runs/_stages``, see :mod:`.artifacts`), so
runs of a grid share what they have in common and a rerun reuses everything. A finished run (``run.json``
status ``done`` with the same config fingerprint) is skipped altogether.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from star_lib.experiments.artifacts import StageOutput, StageStore, machine_facts
from star_lib.experiments.config import CONFIGS_DIR, ConfigError, ExperimentConfig, save_config
from star_lib.experiments.preflight import check_grid
from star_lib.experiments.stages import Registry, Stage, build_registry
from star_lib.io import atomic_path, read_json, write_json_atomic, write_parquet_atomic
from star_lib.train.progress import PROGRESS_ENV

if TYPE_CHECKING:
    import polars as pl

    from star_lib.experiments.grids import Grid
    from star_lib.experiments.profiles import ClusterProfile

RUN_FILE = "run.json"
JOB_FILE = "job.json"
CACHE_DIRNAME = "_stages"
"""Stage cache folder beside the grids: ``runs/_stages``."""
COPIED_OUTPUTS: dict[str, str] = {"eval.parquet": "eval", "qa.parquet": "qa-eval"}
"""Run files copied from one stage's output."""
GATHERED_OUTPUTS: tuple[str, ...] = ("metrics.parquet", "rollouts.parquet")
"""Run files concatenated from every stage that wrote one (with a ``stage`` column)."""
_NO_STAGE: dict[str, Any] = {
    "current_stage": None,
    "stage_started": None,
    "stage_step": None,
    "stage_steps": None,
    "stage_reward": None,
    "stage_loss": None,
    "stage_eta_s": None,
}
"""``run.json``'s running-stage fields, cleared between stages (the trainers fill them: train.progress)."""


@dataclass
class RunResult:
    """What happened to one run."""

    name: str
    """Run name."""
    run_dir: Path
    """The run folder."""
    status: str
    """``done`` (ran now), ``skipped`` (was already done) or ``failed``."""
    wall_s: float = 0.0
    """Wall time of this invocation."""
    gpu_hours: float = 0.0
    """GPU-hours of the stages the run used (computed now or earlier)."""
    stages: list[dict[str, Any]] = field(default_factory=list)
    """Per stage: name, key, reused, wall_s, gpus."""
    error: str | None = None
    """Last line of the error, when failed."""


def default_cache(run_dir: Path) -> Path:
    """Return the stage cache of a run folder ``<root>/<grid>/<run>``: ``<root>/_stages``."""
    return Path(run_dir).resolve().parent.parent / CACHE_DIRNAME


def read_run_record(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``run.json`` of a run folder, or None when there is none (or it cannot be read)."""
    path = Path(run_dir) / RUN_FILE
    try:
        return read_json(path)
    except (FileNotFoundError, ValueError):
        return None


def update_run_record(run_dir: Path, **changes: Any) -> dict[str, Any]:
    """Merge ``changes`` into ``run.json`` (atomically) and return the new record."""
    record = read_run_record(run_dir) or {}
    record.update(changes)
    write_json_atomic(run_dir / RUN_FILE, record)
    return record


def is_complete(config: ExperimentConfig, run_dir: str | os.PathLike[str]) -> bool:
    """Return True when ``run_dir`` holds a finished run of exactly this config."""
    record = read_run_record(run_dir)
    return bool(
        record and record.get("status") == "done" and record.get("fingerprint") == config.fingerprint()
    )


def _gpus_here() -> int:
    """Count the GPUs this job holds: Slurm's allocation, else CUDA_VISIBLE_DEVICES, else torch's count."""
    per_node = os.environ.get("SLURM_GPUS_ON_NODE")
    if per_node and per_node.isdigit():
        return int(per_node) * int(os.environ.get("SLURM_JOB_NUM_NODES", "1") or 1)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    torch = __import__("sys").modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return int(torch.cuda.device_count())
    return 0


def _global_rank() -> int:
    """Rank of this task in a multi-node job (0 outside Slurm)."""
    return int(os.environ.get("SLURM_PROCID", "0") or 0)


# ───────────────────────────── one run ─────────────────────────────


def run_stages(
    config: ExperimentConfig,
    store: StageStore,
    registry: Registry,
    on_stage: Callable[[str, StageOutput], None] | None = None,
    on_start: Callable[[str], None] | None = None,
) -> dict[str, StageOutput]:
    """Run (or reuse) every stage of ``config`` in order; returns stage name → output.

    ``on_start(name)`` is called before a stage is looked up or run, ``on_stage(name, output)`` after it.
    An input whose path ends in ``?`` is optional: absent from the source's output, it is not passed (and
    not part of the stage's key, so adding one changes no existing key).

    Raises:
        ConfigError: a stage is unavailable, misconfigured, or lacks an input stage.

    """
    resolved = registry.check(config)
    outputs: dict[str, StageOutput] = {}
    with torch_threads(config.threads):
        for name, stage_config in resolved.items():
            outputs[name] = _run_stage(config, store, registry, name, stage_config, outputs, on_start)
            if on_stage is not None:
                on_stage(name, outputs[name])
    return outputs


def input_paths(
    stage: Stage, stages: Sequence[str], folders: Mapping[str, Path], config: Any
) -> dict[str, Path]:
    """Return the paths ``stage`` (of resolved config ``config``) reads, given each earlier stage's folder.

    An optional input (its spec ends in ``?``, e.g. ``ood?``) whose source did not write it is left out.

    Raises:
        ConfigError: A required input's source stage is not among ``folders``.

    """
    paths: dict[str, Path] = {}
    for input_name, (source, spec) in stage.inputs(tuple(stages), config).items():
        rel = spec.removesuffix("?")
        if spec.endswith("?") and (source not in folders or not (folders[source] / rel).exists()):
            continue
        if source not in folders:
            raise ConfigError(f"stage {stage.name!r} reads {source!r} output; add {source!r} to stages")
        paths[input_name] = folders[source] / rel if rel not in ("", ".") else folders[source]
    return paths


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` torch CPU threads (0: leave torch's default), then restore them."""
    if threads <= 0:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _run_stage(
    config: ExperimentConfig,
    store: StageStore,
    registry: Registry,
    name: str,
    stage_config: Any,
    outputs: Mapping[str, StageOutput],
    on_start: Callable[[str], None] | None,
) -> StageOutput:
    """Look up or build one stage from the outputs of the stages before it."""
    stage = registry.get(name)
    folders = {source: out.path for source, out in outputs.items()}
    inputs = input_paths(stage, config.stages, folders, stage_config)
    hashes = {
        input_name: outputs[source].file_hash(spec.removesuffix("?"))
        for input_name, (source, spec) in stage.inputs(config.stages, stage_config).items()
        if input_name in inputs
    }
    config_dict = stage.config_dict(stage_config)
    key = store.key(name, stage.cache_version, config_dict, hashes)
    info = {
        "config": config_dict,
        "inputs": hashes,
        "version": stage.cache_version,
        "threads": config.threads,
    }
    if on_start is not None:
        on_start(name)
    if _global_rank() != 0:  # node > 0 of a multi-node job: join distributed stages, wait for the rest
        if stage.distributed and store.lookup(name, key) is None:
            from star_lib.experiments.launch import follow_launched

            follow_launched(name, store.root / name / f"{key}.partial")
        return _wait_for(store, name, key)
    return store.build(name, key, _producer(stage, stage_config, inputs), info)


def _producer(stage: Any, stage_config: Any, inputs: Mapping[str, Path]) -> Callable[[Path], dict[str, Any]]:
    def produce(work: Path) -> dict[str, Any]:
        extra = stage.run(stage_config, inputs, work) or {}
        extra.setdefault("gpus", _gpus_here() if stage.uses_gpu else 0)
        return extra

    return produce


def _wait_for(store: StageStore, stage: str, key: str, poll_s: float = 5.0) -> StageOutput:
    """On ranks > 0 of a multi-node job: wait until rank 0 has built a non-distributed stage."""
    while (found := store.lookup(stage, key)) is None:
        time.sleep(poll_s)
    return found


def git_commit_of(folder: str | os.PathLike[str] = ".") -> tuple[str, bool]:
    """Return the commit checked out at ``folder`` ("unknown" outside git) and whether its code differs.

    Code means ``star_lib`` and ``configs``: uncommitted changes there make the run's numbers untraceable.
    """
    try:
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--", "star_lib", "configs"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False
    return head, bool(status.strip())


def run_experiment(
    config: ExperimentConfig,
    run_dir: str | os.PathLike[str],
    *,
    cache: str | os.PathLike[str] | None = None,
    registry: Registry | None = None,
    force: bool = False,
    grid: str | None = None,
) -> RunResult:
    """Run one experiment into ``run_dir`` (skipped when already complete unless ``force``).

    Errors inside a stage are recorded in ``run.json`` (status ``failed`` with the error's last line) and
    re-raised. Preemption (``SystemExit`` from submitit's signal handler) leaves the status ``running`` so a
    requeued job resumes.
    """
    run_dir = Path(run_dir)
    if not force and is_complete(config, run_dir):
        return _skipped(config, run_dir)
    registry = registry or build_registry()
    store = StageStore(cache or default_cache(run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(config, run_dir / "config.yaml")
    started = time.time()
    _record_start(config, run_dir, store, grid, started)
    stage_rows: list[dict[str, Any]] = []
    on_stage, on_start = _stage_recorders(run_dir, stage_rows)
    with _progress_reported_to(run_dir.resolve() / RUN_FILE):  # SFT/RL report step, reward, ETA there
        try:
            outputs = run_stages(config, store, registry, on_stage, on_start)
            if _global_rank() != 0:
                return RunResult(config.name, run_dir, "done", time.time() - started, 0.0, stage_rows)
            gpu_hours = sum(r["wall_s"] * r["gpus"] for r in stage_rows) / 3600.0
            wall_s = time.time() - started
            _assemble_outputs(run_dir, outputs, wall_s, gpu_hours)
        except Exception as exc:  # recorded for `star status` (current_stage: where it failed), re-raised
            update_run_record(
                run_dir, status="failed", error=last_line(exc), traceback=traceback.format_exc()[-4000:]
            )
            raise
    update_run_record(
        run_dir,
        status="done",
        finished=time.time(),
        wall_s=wall_s,
        gpu_hours=gpu_hours,
        stages=stage_rows,
        **_NO_STAGE,
    )
    return RunResult(config.name, run_dir, "done", wall_s, gpu_hours, stage_rows)


def _record_start(
    config: ExperimentConfig, run_dir: Path, store: StageStore, grid: str | None, started: float
) -> None:
    """Write ``run.json`` as a run starts: status ``running``, where, on what and at which commit."""
    commit, dirty = git_commit_of(CONFIGS_DIR.parent)  # the checkout whose code runs
    update_run_record(
        run_dir,
        name=config.name,
        grid=grid or run_dir.parent.name,
        fingerprint=config.fingerprint(),
        status="running",
        error=None,
        started=started,
        host=socket.gethostname(),
        machine=machine_facts(),
        cache=str(store.root.resolve()),
        pid=os.getpid(),
        restarts=int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0),
        commit=commit,
        dirty=dirty,
    )


def _stage_recorders(
    run_dir: Path, stage_rows: list[dict[str, Any]]
) -> tuple[Callable[[str, StageOutput], None], Callable[[str], None]]:
    """Return ``(on_stage, on_start)`` for :func:`run_stages`: they keep ``run.json`` up to date.

    ``on_start`` records the stage now running; ``on_stage`` appends the finished stage's row to
    ``stage_rows`` (name, key, reused, wall time, GPUs) and writes them all.
    """

    def on_stage(name: str, out: StageOutput) -> None:
        row = {
            "stage": name,
            "key": out.key,
            "reused": out.reused,
            "wall_s": float(out.info.get("wall_s", 0.0)),
            "gpus": int(out.info.get("gpus", 0)),
        }
        stage_rows.append(row)
        update_run_record(run_dir, stages=stage_rows, **_NO_STAGE)

    def on_start(name: str) -> None:
        update_run_record(run_dir, **{**_NO_STAGE, "current_stage": name, "stage_started": time.time()})

    return on_stage, on_start


@contextlib.contextmanager
def _progress_reported_to(path: Path) -> Iterator[None]:
    """Point the trainers' progress reports (:data:`PROGRESS_ENV`) at ``path`` for the block, then restore."""
    previous = os.environ.get(PROGRESS_ENV)
    os.environ[PROGRESS_ENV] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = previous


def last_line(exc: BaseException) -> str:
    """Return the last line of an error as ``Type: message``."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


def _assemble_outputs(
    run_dir: Path, outputs: Mapping[str, StageOutput], wall_s: float, gpu_hours: float
) -> None:
    """Copy/concatenate the stage outputs into the run folder (atomic writes)."""
    import polars as pl

    for filename, stage in COPIED_OUTPUTS.items():
        if stage in outputs and (outputs[stage].path / filename).is_file():
            with atomic_path(run_dir / filename) as tmp:
                shutil.copyfile(outputs[stage].path / filename, tmp)
    for filename in GATHERED_OUTPUTS:
        frames = [
            pl.read_parquet(out.path / filename).with_columns(pl.lit(name).alias("stage"))
            for name, out in outputs.items()
            if (out.path / filename).is_file()
        ]
        if filename == "metrics.parquet":
            frames.append(_cost_metrics(outputs, wall_s, gpu_hours))
        if frames:
            frame = pl.concat(
                [_metrics_schema(f) if filename == "metrics.parquet" else f for f in frames],
                how="diagonal_relaxed",
            )
            write_parquet_atomic(run_dir / filename, frame)


def _metrics_schema(frame: pl.DataFrame) -> pl.DataFrame:
    """Metrics rows as ``stage``, ``step`` (nullable int), ``metric``, ``value`` (float)."""
    import polars as pl

    if "step" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("step"))
    return frame.select(
        pl.col("stage").cast(pl.String),
        pl.col("step").cast(pl.Int64),
        pl.col("metric").cast(pl.String),
        pl.col("value").cast(pl.Float64),
    )


def _cost_metrics(outputs: Mapping[str, StageOutput], wall_s: float, gpu_hours: float) -> pl.DataFrame:
    """Cost rows: the run's wall time and GPU-hours, and each stage's wall time (computed or reused)."""
    import polars as pl

    rows = [("run", "cost/wall_s", wall_s), ("run", "cost/gpu_hours", gpu_hours)]
    rows += [(name, "cost/stage_wall_s", float(out.info.get("wall_s", 0.0))) for name, out in outputs.items()]
    return pl.DataFrame(
        {
            "stage": [r[0] for r in rows],
            "step": pl.Series([None] * len(rows), dtype=pl.Int64),
            "metric": [r[1] for r in rows],
            "value": [float(r[2]) for r in rows],
        }
    )


# ───────────────────────────── grids ─────────────────────────────


def _checkpointable_base() -> type:
    try:
        from submitit.helpers import Checkpointable
    except ImportError:  # pragma: no cover - submitit is a base dependency
        return object
    return Checkpointable


class RunJob(_checkpointable_base()):  # type: ignore[misc]
    """A picklable, checkpointable job: run one experiment; on preemption submitit requeues the same call.

    Resuming needs no state in the job object: finished stages are reused from the cache and an interrupted
    stage resumes from the ``_checkpoints`` it saved in its work folder.
    """

    def __init__(
        self, cache: str | None = None, grid: str | None = None, launch: dict[str, str] | None = None
    ) -> None:
        self.cache = cache
        self.grid = grid
        self.launch = dict(launch or {})

    def __call__(self, config: dict[str, Any], run_dir: str) -> dict[str, Any]:
        """Run the experiment; returns the :class:`RunResult` as a dict (what ``job.result()`` gives)."""
        os.environ.update(self.launch)  # how training stages start their per-GPU processes
        result = run_experiment(ExperimentConfig.from_dict(config), run_dir, cache=self.cache, grid=self.grid)
        return {**result.__dict__, "run_dir": str(result.run_dir)}


def grid_dir(runs_root: str | os.PathLike[str], grid: Grid) -> Path:
    """Folder of a grid: ``<runs_root>/<grid name>``."""
    return Path(runs_root) / grid.name


_CHILD = (
    "import sys; from star_lib.experiments.runner import run_config_file; "
    "sys.exit(run_config_file(*sys.argv[1:]))"
)
"""The program :func:`run_experiment_isolated` runs in its child process."""


def run_experiment_isolated(
    config: ExperimentConfig,
    run_dir: str | os.PathLike[str],
    *,
    cache: str | os.PathLike[str] | None = None,
    grid: str | None = None,
) -> RunResult:
    """Run one experiment as :func:`run_experiment` does, but in a fresh Python process of the same code.

    What a run leaves in memory goes away with its process, and a run the kernel kills (out of memory) is
    a failed run (``run.json`` says how it ended) instead of the end of its caller: the tiny study in one
    process grew to 24 GB over 13 runs and was killed in the 14th (commit 10ed877). The child's output
    (progress bars) goes where the caller's goes; a failed run is returned, not raised.
    """
    run_dir = Path(run_dir)
    if is_complete(config, run_dir):
        return _skipped(config, run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.yaml"
    save_config(config, path)
    code = str(Path(__file__).resolve().parents[2])  # this star_lib, whatever the child's cwd would import
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (code, os.environ.get("PYTHONPATH")) if p)}
    cache = str(cache or default_cache(run_dir))
    started = time.time()
    child = [sys.executable, "-c", _CHILD, str(path), str(run_dir), cache, grid or run_dir.parent.name]
    returncode = subprocess.run(child, env=env, check=False).returncode
    record = read_run_record(run_dir) or {}
    if returncode == 0 and record.get("status") == "done":
        return RunResult(
            config.name,
            run_dir,
            "done",
            float(record.get("wall_s") or time.time() - started),
            float(record.get("gpu_hours") or 0.0),
            record.get("stages", []),
        )
    error = record.get("error") if record.get("status") == "failed" else None
    if not error:
        error = exit_reason(returncode)
        update_run_record(run_dir, status="failed", error=error)
    return RunResult(config.name, run_dir, "failed", time.time() - started, error=error)


def run_config_file(config_path: str, run_dir: str, cache: str, grid: str) -> int:
    """Run one saved config into ``run_dir`` (the child of :func:`run_experiment_isolated`); 0 when done."""
    from star_lib.experiments.stages import load_config

    run_experiment(load_config(config_path), run_dir, cache=cache, grid=grid)
    return 0


def exit_reason(returncode: int) -> str:
    """Say how a run's process ended without recording an error (a signal, or an exit status)."""
    if returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else -returncode
        why = " (the kernel's out-of-memory killer, or kill -9)" if returncode == -signal.SIGKILL else ""
        return f"the run's process was killed by {name}{why}"
    return f"the run's process exited with status {returncode} before it finished"


def _skipped(config: ExperimentConfig, run_dir: Path) -> RunResult:
    """Return the result of a run found complete in ``run_dir`` (its recorded GPU-hours and stages)."""
    record = read_run_record(run_dir) or {}
    return RunResult(
        config.name, run_dir, "skipped", 0.0, record.get("gpu_hours", 0.0), record.get("stages", [])
    )


def run_grid_local(
    grid: Grid,
    runs_root: str | os.PathLike[str] = "runs",
    *,
    cache: str | os.PathLike[str] | None = None,
    registry: Registry | None = None,
    keep_going: bool = True,
) -> list[RunResult]:
    """Run every run of ``grid`` in this process, one after another (finished runs are skipped)."""
    folder = grid_dir(runs_root, grid)
    grid.write_manifest(folder)
    cache = cache or Path(runs_root) / CACHE_DIRNAME
    results = []
    for config in grid.runs:
        try:
            results.append(
                run_experiment(config, folder / config.name, cache=cache, registry=registry, grid=grid.name)
            )
        except Exception as exc:
            if not keep_going:
                raise
            results.append(RunResult(config.name, folder / config.name, "failed", error=last_line(exc)))
    return results


def submit_grid(
    grid: Grid,
    profile: ClusterProfile,
    runs_root: str | os.PathLike[str] = "runs",
    *,
    cache: str | os.PathLike[str] | None = None,
    skip_complete: bool = True,
) -> list[Any]:
    """Submit the grid's unfinished runs as submitit job arrays; returns the submitit jobs, in run order.

    Every run to submit is checked first (:func:`.preflight.check_grid`: its stages resolve, its training
    fits the profile's GPUs); a :class:`ConfigError` leaves nothing written or submitted. On Slurm, runs
    that share their stages up to SFT (:func:`shared_training`) go in two arrays: one run per shared SFT
    first, the others after it ends (``--dependency=afterany``), so no job holds GPUs idle while it waits
    on another's SFT in the stage cache (and a failed first job still lets the others try). Each run's
    ``job.json`` records its job id, the submitit folder and the job it waited for, so ``star status`` can
    ask Slurm about runs that never started or died without a word (cancelled, killed, out of memory).
    """
    folder = grid_dir(runs_root, grid)
    todo = [c for c in grid.runs if not (skip_complete and is_complete(c, folder / c.name))]
    check_grid(todo, profile)  # a run that cannot start or fit is refused before anything is written
    grid.write_manifest(folder)
    if not todo:
        return []
    for config in todo:
        run_dir = folder / config.name
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(config, run_dir / "config.yaml")
        (run_dir / JOB_FILE).unlink(missing_ok=True)
        update_run_record(
            run_dir,
            name=config.name,
            grid=grid.name,
            fingerprint=config.fingerprint(),
            status="pending",
            error=None,
        )
    submitit_dir = (folder / "_submitit").resolve()
    executor = profile.executor(submitit_dir, job_name=grid.name)
    job_fn = RunJob(
        cache=str(Path(cache or Path(runs_root) / CACHE_DIRNAME).resolve()),
        grid=grid.name,
        launch=profile.launch_env(),
    )
    waves = shared_training(todo) if profile.cluster == "slurm" else (todo, [])
    jobs: dict[str, Any] = {}
    after: str | None = None
    for wave in waves:
        if not wave:
            continue
        if after is not None:  # the array that trains each shared SFT first: wait for it to end
            extra = {**profile.additional, "dependency": f"afterany:{after}"}
            executor.update_parameters(slurm_additional_parameters=extra)
        submitted = executor.map_array(
            job_fn, [c.to_dict() for c in wave], [str((folder / c.name).resolve()) for c in wave]
        )
        for config, job in zip(wave, submitted, strict=True):
            jobs[config.name] = job
            # job.json is the submitter's file; run.json belongs to the job (no write races between the two)
            write_json_atomic(
                folder / config.name / JOB_FILE,
                {
                    "id": str(job.job_id),
                    "folder": str(submitit_dir),
                    "cluster": profile.cluster,
                    "submitted": time.time(),
                    "after": after,
                },
            )
        after = str(submitted[0].job_id).split("_")[0]
    return [jobs[c.name] for c in todo]


def shared_training(
    runs: Sequence[ExperimentConfig],
) -> tuple[list[ExperimentConfig], list[ExperimentConfig]]:
    """Split runs into those that train each distinct SFT first and those that reuse one of them.

    Two runs share their training prefix when every stage up to ``sft`` resolves to the same config (then
    the stage cache gives them the same SFT output). Runs without an SFT stage, and the first run of each
    prefix, come first; the other runs of a prefix after. Order within each list is the runs' own.
    """
    registry = build_registry()
    first: list[ExperimentConfig] = []
    later: list[ExperimentConfig] = []
    seen: set[str] = set()
    for config in runs:
        if "sft" not in config.stages:
            first.append(config)
            continue
        resolved = list(registry.check(config).items())
        prefix = repr(resolved[: [name for name, _ in resolved].index("sft") + 1])
        (later if prefix in seen else first).append(config)
        seen.add(prefix)
    return first, later
