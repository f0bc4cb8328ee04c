"""The notebooks' one config: :class:`NotebookParams`, built from the ``parameters`` cell's plain values.

Every notebook in ``notebooks/`` starts with a papermill ``parameters`` cell holding exactly these fields as
plain values (strings), and its first code cell is::

    params = NotebookParams(results_dir=results_dir, scale=scale, launch=launch, cluster=cluster,
                            stages=stages, figures_dir=figures_dir)

so ``papermill -p scale paper …`` and ``star report`` override them, and a bad value fails in that first cell
with a message that says what to change.

Relative paths (``results_dir``, ``figures_dir``, ``cluster``) resolve against the project root
(:func:`project_root`), not the kernel's working directory: JupyterLab (``star lab`` starts it in
``notebooks/``), papermill and ``star report`` all read the same ``runs/`` folder at the repository root. Set
``STAR_PROJECT_ROOT`` to use another root. ``tests/notebooks`` checks that every notebook's parameters (as
``papermill.inspect_notebook`` reads them) are exactly these fields with these defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

SCALES: tuple[str, ...] = ("tiny", "paper")
"""Grid scales (``star_lib.experiments.grids.SCALES``)."""
LAUNCH_MODES: tuple[str, ...] = ("none", "local", "slurm")
"""What a notebook does about missing runs: nothing, run them here and wait, or submit them to Slurm."""
PROJECT_ROOT_ENV = "STAR_PROJECT_ROOT"
"""Environment variable naming the project root that relative notebook paths resolve against."""
PROJECT_MARKERS: tuple[str, ...] = ("pyproject.toml", "configs")
"""What makes a folder the project root: it holds both (the repository root of this kit)."""
PATH_FIELDS: tuple[str, ...] = ("results_dir", "figures_dir", "cluster")
"""Parameters that name paths (resolved against :func:`project_root` when relative)."""


def project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """Return the folder relative notebook paths resolve against.

    In order: ``$STAR_PROJECT_ROOT``; else the nearest folder at or above ``start`` (default: the working
    directory) that holds ``pyproject.toml`` and ``configs/``; else ``start`` itself.

    Raises:
        ValueError: ``STAR_PROJECT_ROOT`` is set to something that is not a folder.

    """
    configured = os.environ.get(PROJECT_ROOT_ENV, "").strip()
    if configured:
        root = Path(configured).expanduser()
        if not root.is_dir():
            raise ValueError(
                f"{PROJECT_ROOT_ENV}={configured!r} is not a folder; unset it or name the project folder"
            )
        return root.resolve()
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_MARKERS[0]).is_file() and (folder / PROJECT_MARKERS[1]).is_dir():
            return folder
    return here


def resolve_path(value: str, root: str | os.PathLike[str] | None = None) -> str:
    """Return ``value`` as an absolute path: kept when absolute, else under ``root`` (or the project root)."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    return str((Path(root) if root is not None else project_root()) / path)


@dataclass(frozen=True)
class NotebookParams:
    """Where a finding notebook reads runs from, at which scale, and whether it launches missing runs."""

    results_dir: str = "runs"
    """The runs folder (``runs/<grid>/<run>/``) the results store reads and launched runs write into;
    relative = under the project root (:func:`project_root`)."""
    scale: str = "tiny"
    """Grid scale: ``tiny`` (CPU preset, minutes) or ``paper`` (Qwen2.5 models on GPUs)."""
    launch: str = "none"
    """Missing runs: ``none`` (only report them), ``local`` (run them here and wait), ``slurm`` (submit them
    through submitit with the ``cluster`` profile and show the job status)."""
    cluster: str = ""
    """Cluster profile YAML used when ``launch`` is ``slurm`` (e.g. ``slurm/a100-8gpu.yaml``)."""
    stages: str = ""
    """Comma-separated stages of launched runs (e.g. ``world,synth,teacher,eval``); empty = the grid's own."""
    figures_dir: str = ""
    """Folder where the notebook also saves its figures as PNG (``star report`` sets ``reports/figures``);
    empty = only show them."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, str):
                raise ValueError(f"{f.name}: give a string in the parameters cell, got {value!r}")
        if self.scale not in SCALES:
            raise ValueError(f"scale: {self.scale!r} is not allowed; set scale to one of {list(SCALES)}")
        if self.launch not in LAUNCH_MODES:
            raise ValueError(
                f"launch: {self.launch!r} is not allowed; set launch to one of {list(LAUNCH_MODES)}"
            )
        if not self.results_dir.strip():
            raise ValueError("results_dir is empty; set it to the runs folder, e.g. 'runs'")
        if self.launch == "slurm" and not self.cluster.strip():
            raise ValueError(
                "launch='slurm' needs cluster: set it to a cluster profile YAML, e.g. 'slurm/a100-8gpu.yaml'"
            )
        if self.stages.strip():
            from star_lib.experiments.config import STAGE_NAMES

            unknown = [s for s in self.stage_list if s not in STAGE_NAMES]
            if unknown:
                raise ValueError(
                    f"stages: {unknown} unknown; use a comma-separated subset of {list(STAGE_NAMES)}"
                )
        root = None
        for name in PATH_FIELDS:  # the same folder whatever the kernel's working directory
            value = getattr(self, name).strip()
            if value and not Path(value).expanduser().is_absolute():
                root = root or project_root()
                object.__setattr__(self, name, resolve_path(value, root))

    @property
    def stage_list(self) -> list[str] | None:
        """The stages as a list, or None for the grid's own."""
        items = [s.strip() for s in self.stages.split(",") if s.strip()]
        return items or None

    @property
    def results_path(self) -> Path:
        """``results_dir`` as an absolute path."""
        return Path(self.results_dir)

    @property
    def figures_path(self) -> Path | None:
        """``figures_dir`` as an absolute path, or None when figures are only shown."""
        return Path(self.figures_dir) if self.figures_dir.strip() else None

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """Field name → default value (what the notebooks' ``parameters`` cells must hold)."""
        return {f.name: f.default for f in fields(cls)}
