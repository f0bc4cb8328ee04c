"""Grids: the runs of one study — one grid per finding of the paper, and a factorial builder for any axes.

Each finding exists at two scales: ``paper`` (the paper's models and data sizes, for GPUs/Slurm) and ``tiny``
(the learning-signal recipe on CPU, ``configs/learning-signal.yaml``; the model axis collapses to ``tiny`` and
the data sizes are :data:`TINY_DATA_SIZES`, so a laptop runs the same code path).

A grid can also be a YAML file::

    name: reward-x-noise
    base: {model: tiny, stages: [world, synth, teacher, eval]}   # or a path to an experiment YAML
    axes: {reward: [sum, success], tool_failure_rate: [0.0, 0.05]}
    seeds: [0, 1]

Axes may name nested stage settings with a dot (``synth.n_base``). Run names follow ``grid__run__seed``.

``base`` may also name a config (``learning-signal``) or a *base file*: a YAML holding only ``base`` and
``set``. ``set`` gives settings every run of the grid shares (top-level axes or dotted stage settings, applied
over the base, not part of the run names) — the tiny study's grids (``configs/study/``) are the
learning-signal recipe with the study's evaluation (``configs/study/base.yaml``) and their own RL budget::

    name: reward
    finding: reward
    base: base.yaml                      # base: learning-signal, set: {synth.ood: …, eval.models: [rl]}
    set: {rl.max_steps: 40}
    axes: {reward: [sum, macro, success, curriculum], model: [tiny-s, tiny-l]}
    seeds: [0, 1, 2]
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from star_lib.experiments.config import (
    AXES,
    CONFIGS_DIR,
    FOLDER_NAME,
    NAME_RULE,
    STAGE_NAMES,
    ConfigError,
    ExperimentConfig,
    read_config,
)
from star_lib.experiments.stages import load_config
from star_lib.io import read_yaml, write_yaml_atomic

RUN_SETTINGS: tuple[str, ...] = ("stages", "threads")
"""Top-level settings of a run a grid may set beside the axes (``set: {threads: 1}``)."""
SCALES: tuple[str, ...] = ("tiny", "paper")
"""Grid scales."""
PAPER_MODELS: tuple[str, ...] = ("qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b")
"""The paper's three model sizes."""
_AXIS_LABELS: dict[str, str] = {
    "model": "",
    "reward": "",
    "algorithm": "",
    "difficulty": "diff",
    "rl_data_size": "n",
    "tool_failure_rate": "fail",
    "tool_latency_ms": "lat",
    "tool_corruption_rate": "corr",
    "curriculum_boundaries": "cb",
}


@dataclass(frozen=True)
class Grid:
    """A named set of experiment configs (the runs of one study)."""

    name: str
    """Grid name (folder under ``runs/``)."""
    runs: tuple[ExperimentConfig, ...]
    """One config per run; names are unique."""
    axes: tuple[str, ...] = ()
    """The axes the grid varies (seed included when several seeds)."""
    finding: str | None = None
    """The paper finding this grid reproduces (``reward``, ``scale``, …), if any."""

    def __post_init__(self) -> None:
        if not FOLDER_NAME.fullmatch(self.name):
            raise ConfigError(f"grid name {self.name!r} is not allowed; {NAME_RULE}")
        names = [r.name for r in self.runs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"grid {self.name}: run names must be unique, repeated: {duplicates}")

    def __len__(self) -> int:
        return len(self.runs)

    def run(self, name: str) -> ExperimentConfig:
        """Return the run called ``name``."""
        for config in self.runs:
            if config.name == name:
                return config
        raise KeyError(f"grid {self.name} has no run {name!r}; runs: {[r.name for r in self.runs]}")

    def with_stages(self, stages: Sequence[str]) -> Grid:
        """Return the same grid with every run's stage list replaced (e.g. to stop before ``rl``)."""
        return Grid(
            self.name, tuple(r.replace(stages=list(stages)) for r in self.runs), self.axes, self.finding
        )

    def to_dict(self) -> dict[str, Any]:
        """Manifest form: name, finding, axes, every run's full config."""
        return {
            "name": self.name,
            "finding": self.finding,
            "axes": list(self.axes),
            "runs": [r.to_dict() for r in self.runs],
        }

    def write_manifest(self, folder: str | os.PathLike[str]) -> Path:
        """Write ``<folder>/grid.yaml`` (what ``star status`` and the results store read)."""
        return write_yaml_atomic(Path(folder) / "grid.yaml", self.to_dict())

    @classmethod
    def from_manifest(cls, path: str | os.PathLike[str]) -> Grid:
        """Read a ``grid.yaml`` manifest written by :meth:`write_manifest`."""
        data = read_yaml(path)
        return cls(
            name=data["name"],
            runs=tuple(ExperimentConfig.from_dict(r) for r in data["runs"]),
            axes=tuple(data.get("axes") or ()),
            finding=data.get("finding"),
        )


# ───────────────────────────── factorial builder ─────────────────────────────


def _set_key(data: dict[str, Any], key: str, value: Any) -> None:
    """Set a top-level axis or a dotted nested stage setting (``synth.n_base``) in a config dict."""
    head, _, rest = key.partition(".")
    if not rest:
        if head not in AXES and head not in RUN_SETTINGS:
            raise ConfigError(
                f"grid axis {key!r} is not allowed; use one of {list(AXES)}, {list(RUN_SETTINGS)} or a "
                "'<stage>.<key>' setting"
            )
        data[head] = value
        return
    section = head.replace("-", "_")
    if section not in {s.replace("-", "_") for s in STAGE_NAMES}:
        raise ConfigError(f"grid axis {key!r}: {head!r} is not a stage; stages are {list(STAGE_NAMES)}")
    data.setdefault(section, {})
    data[section] = {**(data[section] or {}), rest: value}


def _label(key: str, value: Any) -> str:
    """Short, file-name-safe label of one axis value (``fail=0.05``, ``sum``, ``n=100``)."""
    if isinstance(value, (list, tuple)):
        text = "-".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    text = re.sub(r"[^A-Za-z0-9.=-]+", "-", text.replace(":", "-"))
    prefix = _AXIS_LABELS.get(key, key.split(".")[-1])
    return f"{prefix}={text}" if prefix else text


def factorial(
    name: str,
    base: ExperimentConfig | Mapping[str, Any],
    axes: Mapping[str, Iterable[Any]],
    seeds: Iterable[int] = (0,),
    finding: str | None = None,
) -> Grid:
    """Cross any subset of axes (every combination × every seed) into a grid.

    Example:
        >>> axes = {"reward": ["sum", "success"], "tool_failure_rate": [0, 0.1]}
        >>> g = factorial("rx", {"model": "tiny"}, axes)
        >>> [r.name for r in g.runs][:2]
        ['rx__sum_fail=0__s0', 'rx__sum_fail=0.1__s0']

    Raises:
        ConfigError: an axis that does not exist or a value it does not allow (validated per run).

    """
    base_dict = base.to_dict() if isinstance(base, ExperimentConfig) else dict(base)
    axis_values = {key: list(values) for key, values in axes.items()}
    empty = [k for k, v in axis_values.items() if not v]
    if empty:
        raise ConfigError(f"grid axis {empty[0]!r} has no values; give at least one")
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds: give at least one seed")
    runs = []
    for combo in itertools.product(*axis_values.values()):
        for seed in seeds:
            data = copy.deepcopy(base_dict)
            for key, value in zip(axis_values, combo, strict=True):
                _set_key(data, key, value)
            data["seed"] = seed
            label = "_".join(_label(k, v) for k, v in zip(axis_values, combo, strict=True)) or "base"
            data["name"] = f"{name}__{label}__s{seed}"
            runs.append(ExperimentConfig.from_dict(data))
    varied = tuple(axis_values) + (("seed",) if len(seeds) > 1 else ())
    return Grid(name=name, runs=tuple(runs), axes=varied, finding=finding)


# ───────────────────────────── the paper's findings ─────────────────────────────


TINY_RECIPE = "learning-signal"
"""The named config every ``tiny`` finding grid starts from: the recipe that learns on 2 CPU cores
(``configs/learning-signal.yaml``). Runs that differ only in RL axes share its world, data, teacher and SFT
stages through the content-addressed stage cache, so a grid trains SFT once."""


PAPER_RL: dict[str, Any] = {
    "use_vllm": True,  # rollouts through a colocated vLLM engine, not HF generate re-prefilling 32k tokens
    "vllm_mode": "colocate",  # server mode is refused (the turn-by-turn rollouts need the engine in-process)
    "vllm_sleep_mode": True,  # the engine releases its memory during the update; VLLMPolicy wakes it
    "vllm_gpu_memory_utilization": 0.3,  # weights (bf16) + KV cache of one 32k context fit (star plan)
    "prompts_per_step": 16,  # × G 8 = 128 episodes per step (global): 16 per GPU on 8, 8 on 16
    "max_steps": 125,  # 2,000 prompt draws: every data arm (≤ 2,000 prompts) sees its pool at least once
    "save_steps": 5,  # a checkpoint every ~25-40 min: a step is ~5-8 min of 128 episodes of ≤ 60 turns
}
"""RL settings of every paper-scale grid (``star plan`` checks them against a cluster profile). Not from the
paper, which gives neither its rollout batch nor its step count: 128 episodes split into whole groups on 8
and 16 GPUs; 125 steps so that the data arms differ in epochs over the same number of draws (100 prompts
seen 20 times … 2,000 once) and each CURRICULUM phase gets ≥ 40 steps (41.7); a checkpoint every 5 steps so
a requeued job loses at most about half an hour of GPU time."""
PAPER_SYNTH: dict[str, Any] = {"n_base": 1000}
"""Synthesis of every paper-scale grid: ~1 k SFT tasks, as many as Agent-STAR's ~1 k SFT trajectories."""
PAPER_SFT: dict[str, Any] = {"save_steps": 20}
"""SFT settings of every paper-scale grid beyond the preset's (4 epochs, lr 5e-6, 20,480-token cutoff): a
checkpoint every 20 steps (64 trajectories of ≤ 20,480 tokens a step on 8 GPUs, ~1-2 min a step; ~1 k
trajectories × 4 epochs are ~60 steps)."""
PAPER_EVAL: dict[str, Any] = {
    "policy": "vllm",  # Agent-STAR's inference engine; one GPU, bf16 (transformers' fp32 generate: hours)
    "vllm": {"dtype": "bfloat16", "gpu_memory_utilization": 0.85},
    "temperature": 0.6,  # Agent-STAR's inference decoding
    "top_p": 0.95,
    "max_turns": 60,
    "also_modes": ["official"],  # the official evaluator's verdicts beside the strict ones
    # the paper's numbers: the official validation set (180) and, when the hub is reachable, the test set
    # (1,000), on the official database, scored by the official code (validation/official/…, test/official/…)
    "splits": {"validation": "hub", "test": "hub?"},
    "split_db": "hub",
}
"""Evaluation settings of every paper-scale grid: the paper's decoding, scored in both evaluator modes on
the synthetic held-out tasks (``eval/…``) and on the official splits (``validation/…``, ``test/…``)."""


def base_config(scale: str) -> ExperimentConfig:
    """Return the base experiment of every finding grid at ``scale`` (``tiny`` or ``paper``)."""
    if scale == "tiny":
        return read_config(TINY_RECIPE).replace(name="run")
    if scale == "paper":
        return ExperimentConfig.from_dict(
            {
                "model": "qwen2.5-3b",
                "rl_data_size": 1000,  # spec §7: ~1K RL prompts
                "world": {"source": "synthetic", "scale": "full"},
                "synth": dict(PAPER_SYNTH),
                "sft": dict(PAPER_SFT),
                "rl": dict(PAPER_RL),
                "eval": dict(PAPER_EVAL),
            }
        )
    raise ConfigError(f"scale: {scale!r} is not allowed; choose one of {list(SCALES)}")


REHEARSAL: dict[str, dict[str, Any]] = {
    "world": {"scale": "small"},
    "synth": {"n_base": 30},
    "sft": {"max_steps": 2, "save_steps": 1, "logging_steps": 1},
    "rl": {
        "use_vllm": False,  # CPU: rollouts through transformers' generate
        "max_steps": 3,
        "save_steps": 1,
        "prompts_per_step": 2,  # × G 2: one whole group per rank on 2 processes
        "num_generations": 2,
        "max_turns": 2,
        "max_new_tokens": 32,
        "rollouts_per_step": 1,
    },
    "eval": {"policy": "transformers", "max_queries": 2, "max_new_tokens": 32},
}
OFFICIAL_DATA = CONFIGS_DIR.parent.parent / "shared" / "data" / "travelplanner"
"""The real TravelPlanner train split and database excerpt beside the checkout (``../shared/data``): the
rehearsal's stand-in for the official validation set (the 45 train queries) when it is there."""
"""What :func:`rehearsal` changes in each stage section: sizes and step counts (minutes on CPU), the
generation backends (no vLLM in training or evaluation) and a checkpoint every step (so a preempted job
has a mid-run one to resume)."""


def rehearsal(grid: Grid, preset: str = "tiny-s") -> Grid:
    """Return ``grid`` with every run's model swapped for ``preset`` and the :data:`REHEARSAL` budgets.

    Everything else stays the grid's own — stages, protocol, rewards, algorithms, the rollout batch's split
    into whole groups per rank, checkpointing, the evaluation's decoding and modes — so a paper grid runs
    end to end on a CPU cluster profile (``processes_per_node: 2``) before it is sent to the GPUs.

    Raises:
        ConfigError: ``preset`` is not a tiny preset (the rehearsal runs on CPU).

    """
    from star_lib.train.models import PRESETS

    if preset not in PRESETS or not PRESETS[preset].is_tiny:
        tiny = [name for name, p in PRESETS.items() if p.is_tiny]
        raise ConfigError(f"rehearse: {preset!r} is not allowed; choose a tiny preset from {tiny}")
    runs = []
    for config in grid.runs:
        changes: dict[str, Any] = {"model": preset}
        for section, values in REHEARSAL.items():
            current = config.section(section)
            if section in ("rl", "eval"):  # the vLLM engine's settings go with it
                current = {k: v for k, v in current.items() if not k.startswith("vllm")}
            changes[section] = {**current, **values}
        if changes["eval"].get("splits"):  # no hub on a CPU rehearsal: the train split stands in, or none
            changes["eval"].update(_rehearsal_splits())
        runs.append(config.replace(**changes))
    return dataclasses.replace(grid, runs=tuple(runs))


def _rehearsal_splits() -> dict[str, Any]:
    """Return a rehearsal's official splits: the real train split as ``validation``, else none.

    The train split stands in when it lies beside the checkout (:data:`OFFICIAL_DATA`).
    """
    queries, database = OFFICIAL_DATA / "train.jsonl", OFFICIAL_DATA / "database"
    if not (queries.is_file() and database.is_dir()):
        return {"splits": {}, "split_db": None}
    return {"splits": {"validation": str(queries.resolve())}, "split_db": str(database.resolve())}


def _models(scale: str, paper: Sequence[str]) -> list[str]:
    return list(paper) if scale == "paper" else ["tiny"]


PAPER_DATA_SIZES: tuple[int, ...] = (100, 500, 1000, 2000)
"""The paper's RL prompt counts (spec §9, data quantity)."""
TINY_DATA_SIZES: tuple[int, ...] = (20, 80, 300, 600)
"""Their tiny stand-ins, position for position (the tiny study's data grid, ``configs/study/data.yaml``): one
tiny run draws 72 prompts (36 RL steps x 2 prompts), so the counts go from each prompt seen about 4 times
to most prompts never seen."""


def _data_sizes(scale: str) -> list[int]:
    return list(PAPER_DATA_SIZES if scale == "paper" else TINY_DATA_SIZES)


FINDINGS: dict[str, str] = {
    "reward": "reward design: SUM / MACRO / SUCCESS / CURRICULUM × 1.5B / 3B / 7B",
    "scale": "model scale: 1.5B / 3B / 7B",
    "data": "RL data quantity: 100 / 500 / 1000 / 2000 prompts",
    "difficulty": "RL data difficulty: easy / medium / hard / 4:3:3",
    "algorithm": "algorithm: GRPO / DAPO / ARPO × 1.5B / 7B",
    "noise": "tool-failure noise: 0 / 1 / 5 / 10 % at 3B",
}
"""The paper's findings, each a grid (spec §9)."""


def finding_axes(finding: str, scale: str) -> dict[str, list[Any]]:
    """Return the axes (and values) a finding varies at ``scale``."""
    table: dict[str, dict[str, list[Any]]] = {
        "reward": {
            "reward": ["sum", "macro", "success", "curriculum"],
            "model": _models(scale, PAPER_MODELS),
        },
        "scale": {"model": _models(scale, PAPER_MODELS)},
        "data": {"rl_data_size": _data_sizes(scale)},
        "difficulty": {"difficulty": ["easy", "medium", "hard", "4:3:3"]},
        "algorithm": {
            "algorithm": ["grpo", "dapo", "arpo"],
            "model": _models(scale, ("qwen2.5-1.5b", "qwen2.5-7b")),
        },
        "noise": {"tool_failure_rate": [0.0, 0.01, 0.05, 0.10], "model": _models(scale, ("qwen2.5-3b",))},
    }
    if finding not in table:
        raise ConfigError(f"finding: {finding!r} is not allowed; choose one of {list(FINDINGS)}")
    if scale not in SCALES:
        raise ConfigError(f"scale: {scale!r} is not allowed; choose one of {list(SCALES)}")
    return table[finding]


def finding_grid(
    finding: str,
    scale: str = "tiny",
    seeds: Iterable[int] = (0,),
    stages: Sequence[str] | None = None,
    base: ExperimentConfig | None = None,
) -> Grid:
    """Return the grid reproducing one finding, named ``<finding>-<scale>``."""
    axes = finding_axes(finding, scale)
    config = base or base_config(scale)
    if stages is not None:
        config = config.replace(stages=list(stages))
    return factorial(f"{finding}-{scale}", config, axes, seeds=seeds, finding=finding)


def load_grid(spec: str | os.PathLike[str], seeds: Iterable[int] | None = None) -> Grid:
    """Return a grid from a YAML file, or a finding name ``<finding>[-<scale>]`` (e.g. ``noise-paper``).

    Raises:
        ConfigError: an unknown finding/scale or a bad grid file, naming what is allowed.

    """
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return _grid_from_file(path, seeds)
    finding, _, scale = str(spec).partition("-")
    if finding not in FINDINGS:
        raise ConfigError(
            f"grid {spec!r} is neither a YAML file nor a finding; findings are {list(FINDINGS)} "
            f"(optionally suffixed -tiny or -paper)"
        )
    return finding_grid(finding, scale or "tiny", seeds=seeds or (0,))


def _grid_from_file(path: Path, seeds: Iterable[int] | None) -> Grid:
    if not path.is_file():
        raise FileNotFoundError(f"grid file {path} not found")
    data = read_yaml(path) or {}
    allowed = ["name", "base", "set", "axes", "seeds", "finding"]
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a grid file is a mapping with the keys {allowed}")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"{path}: unknown grid key(s) {unknown}; allowed keys are {allowed}")
    _check_grid_shapes(path, data)
    finding = data.get("finding")
    findings = [*FINDINGS, "interactions"]
    if finding is not None and finding not in findings:
        raise ConfigError(
            f"{path}: finding: {finding!r} is not allowed; choose one of {findings} (the notebook that reads "
            "the grid's runs), or leave the key out for runs no finding notebook reads"
        )
    try:
        base = _with_settings(_grid_base(path, data.get("base") or {}), data.get("set") or {}, path)
        return factorial(
            data.get("name") or path.stem,
            base,
            data.get("axes") or {},
            seeds=seeds if seeds is not None else (data.get("seeds") or [0]),
            finding=finding,
        )
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _check_grid_shapes(path: Path, data: Mapping[str, Any]) -> None:
    """Refuse a grid file whose ``axes``, ``set`` or ``seeds`` is not the shape the builder reads."""
    shapes = {
        "axes": (dict, "axes: {reward: [sum, macro]}"),
        "set": (dict, "set: {rl.max_steps: 40}"),
        "seeds": (list, "seeds: [0, 1, 2]"),
    }
    for key, (kind, example) in shapes.items():
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise ConfigError(f"{path}: {key}: {data[key]!r} is not allowed; write it as e.g. {example}")
    for axis, values in (data.get("axes") or {}).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(
                f"{path}: axes: {axis}: {values!r} is not allowed; give a non-empty list of values, "
                f"e.g. {axis}: [{values!r}]"
            )


def _grid_base(path: Path, base: Any, depth: int = 0) -> dict[str, Any]:
    """Return a grid file's ``base`` as a config dict.

    ``base`` is a mapping, a named config, an experiment YAML, or a base file (only ``base`` and ``set``)
    resolved recursively; paths are relative to the file naming them.

    Raises:
        ConfigError: a base that is none of those, or base files that name each other in a loop.

    """
    if isinstance(base, Mapping):
        return dict(base)
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(
            f"{path}: base: {base!r} is not allowed; give a mapping, a config name or a YAML path"
        )
    if depth > 8:
        raise ConfigError(f"base: the base files under {path.parent} name each other in a loop")
    target = path.parent / base
    if not target.is_file() and Path(base).suffix not in (".yaml", ".yml"):
        return load_config(base).to_dict()  # a named config: configs/<base>.yaml
    data = read_yaml(target) if target.is_file() else None
    if isinstance(data, dict) and data and set(data) <= {"base", "set"}:
        inner = _grid_base(target, data.get("base") or {}, depth + 1)
        return _with_settings(inner, data.get("set") or {}, target)
    return load_config(target).to_dict()


def _with_settings(base: Mapping[str, Any], settings: Any, path: Path) -> dict[str, Any]:
    """Apply a grid file's ``set`` (top-level axes or dotted stage settings) to a base config dict."""
    if not isinstance(settings, Mapping):
        raise ConfigError(f"set: must be a mapping of settings (in {path.name}), got {settings!r}")
    data = copy.deepcopy(dict(base))
    for key, value in settings.items():
        _set_key(data, str(key), value)
    return data
