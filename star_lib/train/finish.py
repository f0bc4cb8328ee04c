"""The end SFT and RL share: train, then save the final model, its tokenizer and protocol, and the metrics.

Run folder after it: ``model/`` (weights, tokenizer, the protocol its episodes speak), an up-to-date
``metrics.parquet`` and, when several processes trained, ``ranks.json``: what each rank did and a digest of
its final weights (they must be one set; ranks that diverged fail the run).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from star_lib.train.metrics import MetricsLog

RANKS_FILE = "ranks.json"
"""What each training process did (:func:`record_ranks`), in the run folder."""


def train_and_save(
    trainer: Any,
    checkpoint: Path | None,
    out: Path,
    *,
    tokenizer: Any,
    protocol: str,
    metrics: MetricsLog,
    rank_facts: dict[str, Any] | None = None,
) -> tuple[Path, float]:
    """Run ``trainer.train()``, save the model under ``out/model`` and flush ``metrics``.

    Args:
        trainer: A configured ``transformers.Trainer`` (TRL's SFT or GRPO trainer).
        checkpoint: The checkpoint to resume from; None: a fresh run.
        out: The run folder.
        tokenizer: The tokenizer saved beside the model.
        protocol: The episode protocol written beside the model (``react`` | ``compact``).
        metrics: The run's metrics log, written after the model.
        rank_facts: What this process trained on, for :func:`record_ranks` (e.g. its rollouts' queries).

    Returns:
        ``(model_dir, seconds)``: the final model's folder and the wall-clock time of ``trainer.train()``.

    """
    from star_lib.agent.protocol import write_protocol
    from star_lib.train.metrics import is_main_process

    if checkpoint:
        _cpu_ranks_load_on_cpu(trainer)
    start = time.monotonic()
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    seconds = time.monotonic() - start
    record_ranks(trainer, out, rank_facts or {})
    model_dir = out / "model"
    trainer.save_model(str(model_dir))  # transformers saves on the main process only
    if is_main_process():
        tokenizer.save_pretrained(model_dir)
        write_protocol(model_dir, protocol)
    metrics.flush()
    return model_dir, seconds


def _cpu_ranks_load_on_cpu(trainer: Any) -> None:
    """Make CPU ranks restore a checkpoint's optimizer onto ``cpu``, not ``cpu:0``.

    Several CPU processes (accelerate's MULTI_CPU, the rehearsal's gloo ranks) get the device
    ``torch.device("cpu", 0)``; the Trainer resumes with ``torch.load(map_location=args.device)`` when
    ``world_size > 1``, and torch has no restore location named ``cpu:0`` — every resumed run fails. The
    device is a cached property of the arguments: point it at plain ``cpu`` (the same memory).
    """
    import torch

    device = trainer.args.device
    if device.type == "cpu" and device.index is not None:
        trainer.args.__dict__["_setup_devices"] = torch.device("cpu")


def record_ranks(trainer: Any, out: Path, facts: dict[str, Any]) -> None:
    """Gather each rank's facts and weight digest to rank 0, which writes ``out/ranks.json``.

    Only when several processes train (DDP: every rank holds the whole model). Every rank raises when the
    digests differ: data-parallel ranks that end with different weights trained different models.
    """
    from accelerate.utils import gather_object

    from star_lib.io import write_json_atomic

    accelerator = trainer.accelerator
    if accelerator.num_processes < 2:
        return
    mine = {
        "rank": accelerator.process_index,
        "world_size": accelerator.num_processes,
        "distributed_type": str(accelerator.distributed_type),
        "backend": str(accelerator.state.backend),
        "weights_sha256": weights_digest(accelerator.unwrap_model(trainer.model)),
        **facts,
    }
    ranks = sorted(gather_object([mine]), key=lambda r: r["rank"])
    if accelerator.is_main_process:
        write_json_atomic(out / RANKS_FILE, {"ranks": ranks})
    if len({r["weights_sha256"] for r in ranks}) > 1:
        raise RuntimeError(
            f"the {len(ranks)} training processes ended with different weights ({out / RANKS_FILE}): "
            "they did not train one data-parallel model"
        )


def weights_digest(model: Any) -> str:
    """SHA-256 of a model's parameters and buffers (names and whole values, in name order).

    Under DeepSpeed ZeRO-3 a rank holds a shard of each parameter (its local tensor is empty): each one is
    gathered whole for its turn, one at a time, so the digest is of the weights the ranks share, not of
    their shards. That gather is collective: every rank must call this.
    """
    import contextlib
    import hashlib

    import torch

    tensors = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name]
        whole = contextlib.nullcontext()
        if hasattr(tensor, "ds_id"):  # a ZeRO-3 partitioned parameter
            import deepspeed

            whole = deepspeed.zero.GatheredParameters([tensor], modifier_rank=None)
        with whole:
            data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        digest.update(name.encode())
        digest.update(data)
    return digest.hexdigest()
