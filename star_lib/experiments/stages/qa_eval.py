"""The qa-eval stage: out-of-domain QA (Search-R1 protocol) with the latest trained model (``star_lib.qa``).

Reads the rl model (else the sft one); writes ``qa.parquet`` and ``qa/<set>/<metric>`` metrics. ``options``
are ``star_lib.qa.evaluate.QAEvalConfig`` fields, except the seed (the experiment's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from star_lib.experiments.artifacts import CHECKPOINT_DIR
from star_lib.experiments.config import ConfigError
from star_lib.experiments.stages.common import write_metrics
from star_lib.experiments.stages.registry import RunConfigSpec, Stage
from star_lib.io import write_parquet_atomic

QA_POLICIES: tuple[str, ...] = ("model", "baseline")


@dataclass(frozen=True)
class QAStageConfig:
    """Out-of-domain QA (Search-R1 protocol) with the trained model (``star_lib.qa.evaluate``)."""

    seed: int = 0
    """Seed of the per-set question sample (axis)."""
    data_dir: str | None = None
    """Folder of the QA test sets (``nq.jsonl``, ``hotpotqa.jsonl``, … or FlashRAG layout)."""
    corpus: str | None = None
    """Passage corpus (JSONL/TSV) the Search tool retrieves from."""
    retriever: str = "bm25"
    """``bm25`` (local, offline) or ``dense``."""
    policy: str = "model"
    """``model``: the latest trained model (rl, else sft); ``baseline``: the programmatic search baseline."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.qa.evaluate.QAEvalConfig`` fields (``datasets``, ``limit``, ``top_k``, ``max_turns``, …)."""

    def __post_init__(self) -> None:
        if self.policy not in QA_POLICIES:
            raise ValueError(f"policy {self.policy!r} is not allowed; choose one of {list(QA_POLICIES)}")
        if not self.data_dir or not self.corpus:
            raise ValueError(
                "qa-eval needs data_dir (QA test sets) and corpus (passages for the Search tool)"
            )


def axis_fields(seed: int) -> dict[str, Any]:
    """Return the ``QAEvalConfig`` fields the experiment axes decide: the seed of the question sample."""
    return {"seed": seed}


def _qa_config(**values: Any) -> Any:
    from star_lib.qa.evaluate import QAEvalConfig

    if isinstance(values.get("datasets"), list):
        values["datasets"] = tuple(values["datasets"])
    return QAEvalConfig(**values)


def run_qa_eval(cfg: QAStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Run the OOD QA sets with the trained model (or the baseline); write ``qa.parquet`` and metrics."""
    from star_lib.qa.evaluate import evaluate_qa

    if cfg.policy == "model":
        if "model" not in inputs:
            raise ConfigError("qa-eval with policy 'model' needs a trained model: add sft or rl to stages")
        from star_lib.agent.policies import TransformersPolicy

        policy: Any = TransformersPolicy.from_pretrained(str(inputs["model"]))
    else:
        from star_lib.qa.baseline import BaselineAgent

        policy = BaselineAgent()
    results, summary = evaluate_qa(
        policy,
        cfg.data_dir,
        cfg.corpus,
        _qa_config(**{**cfg.options, **axis_fields(cfg.seed)}),
        retriever=cfg.retriever,
        cache_dir=out / CHECKPOINT_DIR / "index",
        model=cfg.policy,
    )
    write_parquet_atomic(out / "qa.parquet", results)
    rows = [{"step": None, "metric": f"qa/{d}/{m}", "value": v} for d, m, v in summary.iter_rows() if v == v]
    write_metrics(out, rows)
    return {}


def _qa_inputs(stages: tuple[str, ...], config: Any) -> dict[str, tuple[str, str]]:
    if "rl" in stages:
        return {"model": ("rl", "model")}
    if "sft" in stages:
        return {"model": ("sft", "model")}
    return {}


def _qa_config_type() -> type:
    from star_lib.qa.evaluate import QAEvalConfig

    return QAEvalConfig


STAGE = Stage(
    "qa-eval",
    run_qa_eval,
    QAStageConfig,
    inputs=_qa_inputs,
    run_config=RunConfigSpec(_qa_config_type, lambda: axis_fields(0)),
    uses_gpu=True,
)
