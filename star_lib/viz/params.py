"""The notebooks' one config: :class:`NotebookParams`, built from the ``parameters`` cell's plain values.

Every notebook in ``notebooks/`` starts with a papermill ``parameters`` cell holding exactly these fields as
plain values (strings), and its first code cell is::

    params = NotebookParams(results_dir=results_dir, scale=scale, launch=launch, cluster=cluster,
                            stages=stages, figures_dir=figures_dir)

so ``papermill -p scale paper …`` and ``star report`` override them, and a bad value fails in that first cell
with a message that says what to change. ``tests/notebooks`` checks that every notebook's parameters (as
``papermill.inspect_notebook`` reads them) are exactly these fields with these defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

SCALES: tuple[str, ...] = ("tiny", "paper")
"""Grid scales (``star_lib.experiments.grids.SCALES``)."""
LAUNCH_MODES: tuple[str, ...] = ("none", "local", "slurm")
"""What a notebook does about missing runs: nothing, run them here and wait, or submit them to Slurm."""


@dataclass(frozen=True)
class NotebookParams:
    """Where a finding notebook reads runs from, at which scale, and whether it launches missing runs."""

    results_dir: str = "runs"
    """The runs folder (``runs/<grid>/<run>/``) the results store reads and launched runs write into."""
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

    @property
    def stage_list(self) -> list[str] | None:
        """The stages as a list, or None for the grid's own."""
        items = [s.strip() for s in self.stages.split(",") if s.strip()]
        return items or None

    @property
    def results_path(self) -> Path:
        """``results_dir`` as a path."""
        return Path(self.results_dir)

    @property
    def figures_path(self) -> Path | None:
        """``figures_dir`` as a path, or None when figures are only shown."""
        return Path(self.figures_dir) if self.figures_dir.strip() else None

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """Field name → default value (what the notebooks' ``parameters`` cells must hold)."""
        return {f.name: f.default for f in fields(cls)}
