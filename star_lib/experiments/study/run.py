"""Running the study: every grid's runs in order, each published as it ends, one study per runs folder.

:func:`run_study` runs each run through the experiment runner
(:func:`star_lib.experiments.runner.run_experiment`: finished runs are skipped and stages come from the
content-addressed cache, so a killed study continues where it stopped and SFT is trained once per model
size for the whole study), publishes each finished run's summary (:mod:`.publish`) and, with ``jobs`` > 1,
runs several at once (:func:`check_jobs` says when the cores allow it). :func:`study_lock` keeps a second
study off the same runs folder; :func:`matching` picks runs by name.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.grids import Grid
from star_lib.experiments.runner import CACHE_DIRNAME, grid_dir
from star_lib.experiments.study.config import StudyError
from star_lib.experiments.study.publish import (
    PUBLISHED_DIR,
    check_committable,
    commit_file,
    commit_message,
    publish_run,
    published_hash,
    published_runs,
    shared_summary,
    summary_path,
    write_summary,
)

LOCK_FILE = ".study.lock"
"""File in the runs folder a running study holds (:func:`study_lock`)."""


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

    A run whose summary is already published for its config is not run again (``published``): the summary is
    the result, so a study resumed on a machine that lost its runs folder and cache goes on where the
    published study stops. A run of the same config as another published run (another grid's, under
    another name) is published as a copy of that one (``shared``, :func:`.publish.shared_summary`),
    exactly what a full cache hit would give. ``rerun=True`` runs those too (into ``runs_root``, to check
    them with :func:`.verify.verify_study`). A run already finished under ``runs_root`` is skipped by the
    runner; its summary is rewritten only when the published one is of another config. A failed run is
    reported and the study goes on. ``isolate=True`` runs each run in its own process
    (:func:`star_lib.experiments.runner.run_experiment_isolated`), as ``star study`` does, so no run
    inherits the memory of the ones before it. ``match`` (glob patterns of run names, :func:`matching`)
    leaves every other run alone; each grid's manifest still lists all.

    ``jobs`` runs that many runs at once, in study order, each in its own process (:func:`check_jobs` says
    when the cores allow it). A stage two of them need is built once (the cache locks it), a run of the
    same config as one in progress waits for it and is published as its copy, and ``on_run`` hears of each
    run as it ends. Each run's numbers are those it gets alone: it computes on its own ``threads``.
    """
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
    # looked up at each call, so a replaced runner.run_experiment is the one that runs
    from star_lib.experiments.runner import last_line, run_experiment, run_experiment_isolated

    path = summary_path(out_dir, grid, config.name)
    if twin is not None and published_hash(path) == config.fingerprint():
        return StudyRun(grid.name, config.name, "published", path)
    if twin is not None:
        write_summary(shared_summary(grid, config, twin), path)
        committed = commit and commit_file(path, commit_message(grid, config))
        return StudyRun(grid.name, config.name, "shared", path, committed)
    run = run_experiment_isolated if isolate else run_experiment
    try:
        result = run(config, folder / config.name, cache=cache, grid=grid.name)
    except Exception as exc:  # the run's run.json says where it failed; the study goes on
        return StudyRun(grid.name, config.name, "failed", error=last_line(exc))
    if result.status == "failed":
        return StudyRun(grid.name, config.name, "failed", error=result.error)
    summary, committed = publish_run(grid, config, result.run_dir, out_dir, commit)
    return StudyRun(grid.name, config.name, result.status, summary, committed)


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
