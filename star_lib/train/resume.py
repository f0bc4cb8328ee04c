"""Resuming a training run (RL or SFT) from its last checkpoint with the same data order and RNG streams.

What a resumed run must reproduce, and who restores it:

- model, optimizer, scheduler, global step, data order (TRL's ``RepeatSampler`` is seeded; the trainer
  skips the batches already consumed) and the global Python/NumPy/torch generators (which sample the
  rollout tokens and shuffle the batch) — ``transformers.Trainer`` via ``resume_from_checkpoint``;
- our own streams: every episode's fault-injector seed, ARPO's branching draws and the rollout seed offsets
  derive from the number of ``rollout_func`` calls so far (:class:`RolloutState`), which DAPO's refills make
  data-dependent. :class:`RolloutStateCallback` writes it beside each checkpoint (``star_state.json``) and
  :func:`load_rollout_state` reads it back;
- running totals ``transformers``/TRL keep only in memory (TRL's SFT token count, the loss sum behind the
  end-of-training ``train_loss``) — :class:`TrainerCountersCallback` saves them beside each checkpoint;
- the run's tables: :func:`trim_run_logs` drops ``metrics.parquet`` / ``rollouts.parquet`` rows written
  after the checkpoint (a run killed mid-way), so the resumed run appends to exactly what the checkpoint saw.

Only a complete checkpoint is resumed from (:func:`checkpoint_problem` says what one needs): a job preempted
while saving leaves a half-written folder, and loading it would fail (or silently lose an RNG stream) on
every requeue.
"""

from __future__ import annotations

import json
import re
import struct
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from star_lib.io import write_json_atomic, write_parquet_atomic

STATE_FILE = "star_state.json"
"""Our RNG-stream counters, saved inside each ``checkpoint-<step>`` folder."""
COUNTERS_FILE = "star_counters.json"
"""Running totals of the trainer that ``transformers``/TRL do not restore on resume (in each checkpoint)."""

__all__ = [
    "COUNTERS_FILE",
    "STATE_FILE",
    "RolloutState",
    "RolloutStateCallback",
    "TrainerCountersCallback",
    "checkpoint_problem",
    "checkpoint_step",
    "find_checkpoint",
    "load_rollout_state",
    "trim_run_logs",
]


@dataclass
class RolloutState:
    """Counters behind the rollout RNG streams (episode fault seeds, ARPO draws)."""

    calls: int = 0
    """``rollout_func`` calls so far; call ``n`` seeds its episodes from ``seed + n × batch``."""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutState:
        """Read the JSON form (unknown keys are ignored)."""
        return cls(calls=int(data.get("calls", 0)))


class RolloutStateCallback(TrainerCallback):
    """Write a :class:`RolloutState` into every checkpoint folder the trainer saves."""

    def __init__(self, state: RolloutState) -> None:
        self.state = state

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Save ``star_state.json`` beside the trainer's own state (main process only)."""
        if not getattr(args, "should_save", True):
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        write_json_atomic(folder / STATE_FILE, self.state.to_dict())


class TrainerCountersCallback(TrainerCallback):
    """Save the trainer's running totals with each checkpoint; restore them when resuming from ``checkpoint``.

    Without it a resumed run restarts TRL's SFT ``num_tokens`` count at 0, and its end-of-training
    ``train_loss`` divides only the resumed steps' losses by the whole run's step count.
    """

    def __init__(self, trainer: Any, checkpoint: str | Path | None = None) -> None:
        self.trainer = trainer
        file = Path(checkpoint) / COUNTERS_FILE if checkpoint is not None else None
        self.saved = json.loads(file.read_text(encoding="utf-8")) if file and file.is_file() else {}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Restore the totals (the trainer has just zeroed them for this process)."""
        if self.saved:
            self.trainer._total_train_tokens = self.saved["train_tokens"]
            self.trainer._total_loss_scalar = self.saved["loss_sum"]

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write ``star_counters.json`` into the checkpoint folder (main process only)."""
        if not getattr(args, "should_save", True):
            return
        unlogged = getattr(self.trainer, "_tr_loss", None)  # losses since the last log
        payload = {
            "train_tokens": int(getattr(self.trainer, "_total_train_tokens", 0)),
            "loss_sum": float(getattr(self.trainer, "_total_loss_scalar", 0.0))
            + (float(unlogged.item()) if unlogged is not None else 0.0),
            # how many rng_state_<rank>.pth files a complete checkpoint holds (checkpoint_problem)
            "world_size": int(getattr(args, "world_size", 1) or 1),
        }
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        # atomic: a kill mid-write must not leave a torn file that every later resume fails to parse
        write_json_atomic(folder / COUNTERS_FILE, payload)


CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)")
"""How ``transformers`` names a checkpoint folder (``checkpoint-<global step>``)."""
DEEPSPEED_LATEST = "latest"
"""DeepSpeed's file naming the tag folder (``global_step<N>``) its engine saved into the checkpoint."""


def checkpoint_problem(checkpoint: str | Path, kind: str | None = None) -> str | None:
    """Return why ``checkpoint`` cannot be resumed from, or None when it is complete.

    ``transformers.Trainer._save_checkpoint`` writes, in this order: the weights (``model.safetensors``, or
    shards named by ``model.safetensors.index.json``), ``optimizer.pt`` and ``scheduler.pt`` (under DeepSpeed
    the optimizer, and perhaps the scheduler, live in the engine's ``global_step<N>/`` folder named by
    ``latest``), one RNG file per process (``rng_state.pth`` alone, ``rng_state_<rank>.pth`` when distributed,
    each written by its own rank), then ``trainer_state.json`` on the main process. Our ``on_save`` callbacks
    run after that: the RL trainer's :class:`RolloutStateCallback` (``star_state.json``), then — for both
    kinds, always the last callback added — :class:`TrainerCountersCallback` (``star_counters.json``, which
    records the run's world size). So, per kind:

    - ``"sft"`` (``run_sft``; TRL's ``SFTTrainer`` has no rollouts): the trainer's files and
      ``star_counters.json``; no ``star_state.json``;
    - ``"rl"`` (``run_rl``): the same and ``star_state.json`` (without it the rollout RNG streams are lost);
    - None: read from the run's ``config.yaml`` (``sft:`` or ``rl:``, written before training starts);
      an unknown run needs ``star_state.json`` only where it has one.

    Complete means every file above is there and whole: the JSON files parse, each ``.safetensors`` file
    is as long as its header says, each ``torch.save`` file (``.pt``/``.pth``/``.bin``, a zip archive whose
    directory is written last) opens as a zip — a file cut short by a kill fails these checks. The other
    ranks' RNG files are not ordered before the main process's ``star_counters.json``, so they are counted
    against its ``world_size`` (a checkpoint from before that was recorded needs the rank-0 file).
    """
    if kind not in (None, "sft", "rl"):
        raise ValueError(f"kind must be 'sft', 'rl' or None, not {kind!r}")
    folder = Path(checkpoint)
    if not folder.is_dir():
        return "not a folder"
    trainer_state = _json_problem(folder / "trainer_state.json")
    if trainer_state is not None:
        return trainer_state
    try:
        int(json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))["global_step"])
    except (KeyError, TypeError, ValueError):
        return "trainer_state.json has no global_step"
    counters = _json_problem(folder / COUNTERS_FILE)
    if counters is not None:
        return f"{counters} (the trainer was stopped before its save callbacks ran)"
    kind = kind or _run_kind(folder)
    if kind == "rl" or (folder / STATE_FILE).exists():
        problem = _json_problem(folder / STATE_FILE)
        if problem is not None:
            return f"{problem} (the RL rollout RNG streams)"
    for file in sorted(folder.iterdir()):  # every weights / torch file the folder holds must be whole
        problem = _file_problem(file)
        if problem is not None:
            return problem
    deepspeed = _deepspeed_problem(folder)
    if deepspeed is not None:
        return deepspeed
    if not _has_weights(folder):
        return "no model weights (model.safetensors, its shards, or a DeepSpeed global_step folder)"
    if not (folder / DEEPSPEED_LATEST).is_file():
        for name in ("optimizer.pt", "scheduler.pt"):
            if not (folder / name).is_file():
                return f"{name} is missing"
    return _rng_problem(folder)


def _json_problem(file: Path) -> str | None:
    if not file.is_file():
        return f"{file.name} is missing"
    try:
        json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return f"{file.name} is not whole JSON"
    return None


def _file_problem(file: Path) -> str | None:
    """Say whether a weights or ``torch.save`` file was cut short (None: whole, or not such a file)."""
    if not file.is_file():
        return None
    if file.suffix == ".safetensors":
        return _safetensors_problem(file)
    if file.suffix in (".pt", ".pth", ".bin"):
        try:
            with zipfile.ZipFile(file):  # reads the central directory, the last thing torch.save writes
                return None
        except (OSError, zipfile.BadZipFile, ValueError):
            return f"{file.name} is not a whole torch.save file"
    return None


def _safetensors_problem(file: Path) -> str | None:
    """Say whether a safetensors file holds its 8-byte header length, JSON header and all the data indexed."""
    try:
        size = file.stat().st_size
        with file.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length)) if 8 + length <= size else None
        tensors = [v for k, v in header.items() if k != "__metadata__"]
        expected = 8 + length + max((int(v["data_offsets"][1]) for v in tensors), default=0)
    except (AttributeError, IndexError, KeyError, OSError, TypeError, ValueError, struct.error):
        return f"{file.name} has no whole safetensors header"
    if size != expected:
        return f"{file.name} is cut short ({size} of {expected} bytes)"
    return None


def _has_weights(folder: Path) -> bool:
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            try:
                shards = set(json.loads((folder / index).read_text(encoding="utf-8"))["weight_map"].values())
            except (KeyError, TypeError, ValueError):
                return False
            return bool(shards) and all((folder / shard).is_file() for shard in shards)
    names = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", DEEPSPEED_LATEST)
    return any((folder / name).is_file() for name in names)


def _deepspeed_problem(folder: Path) -> str | None:
    """Say what a DeepSpeed checkpoint lacks: its tag folder, whole ``.pt`` files, one shard per rank."""
    latest = folder / DEEPSPEED_LATEST
    if not latest.is_file():
        return None
    tag = folder / latest.read_text(encoding="utf-8").strip()
    files = sorted(tag.glob("*.pt")) if tag.is_dir() else []
    if not files:
        return f"DeepSpeed's {tag.name or 'tag'} folder is missing or empty"
    for file in files:
        problem = _file_problem(file)
        if problem is not None:
            return f"{tag.name}/{problem}"
    optim = [f for f in files if f.name.endswith("optim_states.pt")]
    world = _world_size(folder)
    if world is not None and optim and len(optim) != world:
        return f"{tag.name} holds {len(optim)} of {world} optimizer shards"
    return None


def _rng_problem(folder: Path) -> str | None:
    world = _world_size(folder)
    if world == 1 or (world is None and (folder / "rng_state.pth").is_file()):
        return None if (folder / "rng_state.pth").is_file() else "rng_state.pth is missing"
    missing = [
        f"rng_state_{rank}.pth"
        for rank in range(world or 1)
        if not (folder / f"rng_state_{rank}.pth").is_file()
    ]
    return f"{', '.join(missing)} missing (one per process)" if missing else None


def _world_size(folder: Path) -> int | None:
    """Return how many processes saved the checkpoint (``star_counters.json``; None: not recorded)."""
    try:
        value = json.loads((folder / COUNTERS_FILE).read_text(encoding="utf-8")).get("world_size")
    except (OSError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) and value >= 1 else None


def _run_kind(checkpoint: Path) -> str | None:
    """Return ``"sft"`` or ``"rl"`` from the first line of the run's ``config.yaml`` (None: unknown)."""
    for run in (checkpoint.parent, checkpoint.parent.parent):  # <run>/checkpoint-N, <run>/checkpoints/…
        config = run / "config.yaml"
        if config.is_file():
            try:
                with config.open(encoding="utf-8") as handle:
                    first = handle.readline().strip()
            except (OSError, UnicodeDecodeError):
                return None
            return {"sft:": "sft", "rl:": "rl"}.get(first)
    return None


def _step(folder: Path) -> int:
    match = CHECKPOINT_NAME.fullmatch(folder.name)
    return int(match.group(1)) if match else -1


def find_checkpoint(path: str | Path, kind: str | None = None) -> Path:
    """Return the checkpoint to resume from: ``path`` itself, or the newest complete one under a run folder.

    Complete is what :func:`checkpoint_problem` says (for ``kind``: ``"sft"``, ``"rl"``, or None to read it
    from the run's ``config.yaml``): a job preempted while saving leaves its newest checkpoint half-written,
    so that one is skipped for the one before it. A checkpoint named explicitly must be complete itself.

    Args:
        path: A ``checkpoint-<step>`` folder, a run folder (with ``checkpoints/``) or its ``checkpoints/``.
        kind: The run's kind (see :func:`checkpoint_problem`).

    Raises:
        FileNotFoundError: When there is no complete checkpoint (saying where it looked and what each one
            lacks), or the named checkpoint is incomplete. A training stage catches it and starts afresh
            (:func:`resume_point`).

    """
    folder = Path(path)
    if (folder / "trainer_state.json").is_file() or CHECKPOINT_NAME.fullmatch(folder.name):
        problem = checkpoint_problem(folder, kind)
        if problem is not None:
            raise FileNotFoundError(
                f"{folder} is not a complete checkpoint: {problem} (a job stopped while saving it); resume "
                f"from the run folder {folder.parent.parent} to take the newest complete one, or start "
                "without resume"
            )
        return folder
    skipped = []
    for candidate in (folder / "checkpoints", folder):
        saved = sorted((p for p in candidate.glob("checkpoint-*") if p.is_dir()), key=_step)
        for checkpoint in reversed(saved):
            problem = checkpoint_problem(checkpoint, kind)
            if problem is None:
                return checkpoint
            skipped.append(f"{checkpoint.name}: {problem}")
    found = f" is complete ({'; '.join(skipped)})" if skipped else ""
    raise FileNotFoundError(
        f"no checkpoint under {folder}{found}: a run saves one every save_steps steps into "
        "<run>/checkpoints/; start without resume, or lower save_steps"
    )


def resume_point(out: str | Path) -> Path | None:
    """Return the checkpoint a training stage in ``out`` resumes from (None: no complete one, start afresh).

    What a requeued job asks, in the stage (in-process) and in every launched rank alike.
    """
    try:
        return find_checkpoint(out)
    except FileNotFoundError:
        return None


def checkpoint_step(checkpoint: str | Path) -> int:
    """Return the global step a checkpoint was saved at (from its ``trainer_state.json``)."""
    data = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
    return int(data["global_step"])


def load_rollout_state(checkpoint: str | Path) -> RolloutState:
    """Read the :class:`RolloutState` saved with a checkpoint.

    Raises:
        FileNotFoundError: When the checkpoint has no ``star_state.json`` (not saved by ``run_rl``).

    """
    file = Path(checkpoint) / STATE_FILE
    if not file.is_file():
        raise FileNotFoundError(
            f"{file} is missing: this checkpoint was not written by star_lib.train.rl.run_rl, so its rollout "
            "RNG streams cannot be restored; start a fresh run instead"
        )
    return RolloutState.from_dict(json.loads(file.read_text(encoding="utf-8")))


def trim_run_logs(run_dir: str | Path, step: int, stages: tuple[str, ...] | None = None) -> dict[str, int]:
    """Drop rows written after checkpoint ``step`` (and end-of-training summaries) from the run's tables.

    ``metrics.parquet`` rows and evaluation episodes carry the step they follow; training episodes in
    ``rollouts.parquet`` carry the step they were sampled at, which the *next* update consumed. With
    ``stages``, only rows of those stages are trimmed (SFT keeps its copy warm-up's ``warmup`` rows, whose
    steps count warm-up steps).

    Returns:
        Rows removed per file name.

    """
    import polars as pl

    removed: dict[str, int] = {}
    for name in ("metrics.parquet", "rollouts.parquet"):
        path = Path(run_dir) / name
        if not path.is_file():
            continue
        frame = pl.read_parquet(path)
        keep = pl.col("step") <= step
        if "stage" in frame.columns and name == "rollouts.parquet":
            # training episodes carry the step they were sampled at (before that step's update)
            keep = pl.when(pl.col("stage") == "train").then(pl.col("step") < step).otherwise(keep)
        summary = [c for c in frame.columns if c.startswith("summary/")]
        if summary:
            keep = keep & pl.all_horizontal([pl.col(c).is_null() for c in summary])
        if stages is not None and "stage" in frame.columns:
            keep = keep | ~pl.col("stage").is_in(list(stages))
        kept = frame.filter(keep)
        removed[name] = frame.height - kept.height
        if removed[name]:
            write_parquet_atomic(path, kept)
    return removed
