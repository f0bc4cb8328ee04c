"""The end SFT and RL share: train, then save the final model, its tokenizer and protocol, and the metrics.

Run folder after it: ``model/`` (weights, tokenizer, the protocol its episodes speak) and an up-to-date
``metrics.parquet``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from star_lib.train.metrics import MetricsLog


def train_and_save(
    trainer: Any,
    checkpoint: Path | None,
    out: Path,
    *,
    tokenizer: Any,
    protocol: str,
    metrics: MetricsLog,
) -> tuple[Path, float]:
    """Run ``trainer.train()``, save the model under ``out/model`` and flush ``metrics``.

    Args:
        trainer: A configured ``transformers.Trainer`` (TRL's SFT or GRPO trainer).
        checkpoint: The checkpoint to resume from; None: a fresh run.
        out: The run folder.
        tokenizer: The tokenizer saved beside the model.
        protocol: The episode protocol written beside the model (``react`` | ``compact``).
        metrics: The run's metrics log, written after the model.

    Returns:
        ``(model_dir, seconds)``: the final model's folder and the wall-clock time of ``trainer.train()``.

    """
    from star_lib.agent.protocol import write_protocol
    from star_lib.train.metrics import is_main_process

    start = time.monotonic()
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    seconds = time.monotonic() - start
    model_dir = out / "model"
    trainer.save_model(str(model_dir))  # transformers saves on the main process only
    if is_main_process():
        tokenizer.save_pretrained(model_dir)
        write_protocol(model_dir, protocol)
    metrics.flush()
    return model_dir, seconds
