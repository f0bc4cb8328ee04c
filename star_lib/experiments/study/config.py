"""The study file: ``configs/study/study.yaml`` read into a :class:`StudyConfig`, and the grids it names.

``star study`` runs the grids ``study.yaml`` lists (one YAML per finding beside it), in that order, each
with the study's seeds plus the precision top-ups (:class:`MoreSeeds`) that apply to it. The file also holds
the per-grid time budget, the stage timings of the estimate (:class:`.estimates.Timing`), and how many
runs and evaluation processes run at once.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from star_lib.experiments.config import CONFIGS_DIR, ConfigError
from star_lib.experiments.evalpool import check_processes
from star_lib.experiments.grids import Grid, load_grid
from star_lib.experiments.study.estimates import Timing
from star_lib.io import read_yaml

STUDY_DIR = CONFIGS_DIR / "study"
"""The tiny study's grids and settings (``configs/study/``)."""
STUDY_FILE = STUDY_DIR / "study.yaml"
"""The study's settings (grid order, seeds, budget, timings)."""
MIN_SEEDS = 3
"""Seeds per arm issue 13 asks for (fewer runs, with a note)."""


class StudyError(ConfigError):
    """A study setting, grid or option that is not allowed; the message names it."""


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
    """Runs at once (``star study --jobs`` overrides; :func:`.run.check_jobs`); the estimate divides by it."""
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
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget < float("inf"):
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
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**32 for s in seeds)
    ):
        raise StudyError(
            f"{path}: {key}: give a non-empty list of integers from 0 to 2**32 - 1, got {seeds!r}"
        )
    return tuple(seeds)
