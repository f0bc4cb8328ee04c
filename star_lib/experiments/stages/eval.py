"""The eval stage: the evaluated models on the held-out tasks (TravelPlanner metrics, spec §5).

Reads the world, synth ``base/test.jsonl`` (and ``ood/`` when synth wrote it) and the models — rl > sft > the
expert teacher, or those ``eval.models`` names; writes ``eval.parquet``, ``rollouts.parquet``, metrics (and
``eval_models.parquet``, ``ood.parquet``). The episodes run in :mod:`.evaluation`. ``options`` are
``star_lib.agent.config.RolloutConfig`` fields, except those the experiment's protocol and seed decide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from star_lib.agent.policies import SamplingParams
from star_lib.experiments.config import ConfigError
from star_lib.experiments.stages.common import protocol_fields, rollout_config_type
from star_lib.experiments.stages.evaluation import eval_workers, evaluate_models
from star_lib.experiments.stages.registry import RunConfigSpec, Stage
from star_lib.experiments.stages.splits import check_splits
from star_lib.io import read_queries

EVAL_MODELS: tuple[str, ...] = ("base", "sft", "rl")
"""Models an eval stage can compare: the untrained model SFT starts from, the SFT model, the RL model."""
POLICY_BACKENDS: tuple[str, ...] = ("transformers", "fast", "vllm")
"""How a model generates: HF ``generate`` (any model), the KV-cached CPU sampler (small Qwen2 models) or a
vLLM engine (GPU; ``pip install 'star-lab[gpu]'``)."""


@dataclass(frozen=True)
class EvalStageConfig:
    """Evaluate policies on held-out tasks (TravelPlanner metrics, spec §5)."""

    seed: int = 0
    """Evaluation seed (axis): fault draws of episode ``i`` use ``seed + i``; sampling (if any) is seeded."""
    reward: str = "sum"
    """Reward design (axis): also reported as ``reward/mean`` over the evaluation episodes."""
    curriculum_boundaries: tuple[float, float] = (1 / 3, 2 / 3)
    """Curriculum boundaries (axis); evaluation scores CURRICULUM at progress 1 (its last phase)."""
    tool_failure_rate: float = 0.0
    """Tool failure rate during evaluation (axis)."""
    tool_latency_ms: float = 0.0
    """Tool latency during evaluation (axis)."""
    tool_corruption_rate: float = 0.0
    """Tool corruption rate during evaluation (axis)."""
    protocol: str = "react"
    """Episode protocol (axis)."""
    models: tuple[str, ...] = ()
    """Models evaluated on the same tasks, from :data:`EVAL_MODELS`; the last one is the run's result
    (``eval/…`` metrics, ``eval.parquet``), each one also reports ``eval/<model>/…`` and the last one its
    paired difference from each other one (``eval/paired/<last>-<other>/mean|se``, SUM per task).
    Empty: the latest trained model (rl, else sft), or the expert when no model is trained."""
    policy: str = "transformers"
    """Generation backend of a model, from :data:`POLICY_BACKENDS`."""
    vllm: dict[str, Any] = field(default_factory=dict, metadata={"key": "when-set"})
    """``vllm.LLM`` engine keywords with ``policy: vllm`` (``gpu_memory_utilization``, ``dtype``,
    ``tensor_parallel_size``, …). The stage sets ``max_model_len`` to the longest context its episodes may
    reach and ``seed`` to the run's, unless given here. One engine per model and split: it is shut down
    before the next one starts."""
    temperature: float = 0.0
    """Sampling temperature; 0 (greedy, the default) makes a score independent of sampling luck."""
    top_p: float = field(default=1.0, metadata={"key": "when-set"})
    """Nucleus sampling with ``temperature`` > 0 (the paper's inference: 0.6 and 0.95); 1 keeps every token.
    Part of the cache key only when set."""
    max_queries: int | None = None
    """Evaluate at most this many queries (None: the whole split); also caps the OOD split."""
    ood: dict[str, Any] = field(default_factory=dict)
    """``star_lib.agent.RolloutConfig`` fields for the OOD split (``synth.ood``) over ``options``: its longer
    trips need more turns and context, e.g. ``{max_turns: 32, max_context_tokens: 2048}``. When the synth
    stage wrote the split, every evaluated model is also scored on it: ``ood/…`` (the last model, like
    ``eval/…``), ``ood/<model>/…`` when several are evaluated, ``ood/long/…`` and ``ood/constraints/…`` on the
    tasks carrying each shift, and ``ood/paired/<last>-<other>/mean|se``; its episodes go to
    ``ood.parquet``."""
    splits: dict[str, str] = field(default_factory=dict, metadata={"key": "when-set"})
    """Official TravelPlanner splits every evaluated model is also scored on, on the official database
    (``split_db``), with clean tools: split name (``validation``, ``test``, ``train``) → a file of its
    official rows (CSV, JSONL or parquet) or ``hub``; a trailing ``?`` (``hub?``) skips a split that cannot
    be reached (``<split>/skipped`` 1) instead of failing. Each split reports ``<split>/…`` in the episodes'
    evaluator mode and ``<split>/official/…`` (the official code's verdicts: the paper's numbers), per model
    ``<split>/<model>/…`` when several are evaluated, ``<split>/paired/<last>-<other>/…``, and writes
    ``split_<split>.parquet``. ``max_queries`` caps each split too (:mod:`.splits`)."""
    split_db: str | None = field(default=None, metadata={"key": "when-set"})
    """The official database the ``splits`` are planned over: a folder of its CSVs (flat or nested), or
    ``hub`` (Agent-STAR's copy of the official database)."""
    chunk_size: int = 8
    """Episodes per checkpointed chunk (a preempted job resumes after the last chunk)."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.agent.RolloutConfig`` fields (``max_turns``, ``eval_mode``, …)."""
    also_modes: tuple[str, ...] = ()
    """Evaluator modes to score the same episodes' plans in as well (``official`` beside the default
    ``strict``): a plan does not depend on the mode, so one set of episodes gives both. Each mode ``m``
    reports ``eval/m/…``, ``eval/<model>/m/…`` and ``eval/m/paired/…``, and adds ``m/…`` verdict columns
    (``m/final_pass``, ``m/cs/<check>``, …) to the episode tables."""
    also_clean: bool = field(default=False, metadata={"key": "when-set"})
    """Also evaluate the same models on the same held-out tasks with no tool faults (the tool-fault axes
    apply to ``eval/…``): reported as ``eval/clean/…`` (``eval/<model>/clean/…`` when several models are
    evaluated) and ``eval/clean/paired/noisy-clean/mean|se`` (SUM per task), so a noise arm is read both
    noisy and clean. Without faults the clean scores are the run's own. Off by default (and then not part
    of the cache key)."""

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")
        _check_ood_options(self.ood)
        check_splits(self.splits, self.split_db)
        object.__setattr__(self, "also_modes", tuple(self.also_modes))
        primary = self.options.get("eval_mode", "strict")
        odd = [m for m in self.also_modes if m not in ("strict", "official") or m == primary]
        if odd or len(set(self.also_modes)) != len(self.also_modes):
            raise ValueError(
                f"also_modes: {list(self.also_modes)} must be distinct evaluator modes from "
                f"['strict', 'official'] other than the episodes' own mode {primary!r}"
            )
        if self.max_queries is not None and self.max_queries < 1:
            raise ValueError(f"max_queries must be >= 1 or null, got {self.max_queries}")
        object.__setattr__(self, "models", tuple(self.models))
        bad = [m for m in self.models if m not in EVAL_MODELS]
        if bad or len(set(self.models)) != len(self.models):
            raise ValueError(f"models: {list(self.models)} must be distinct names from {list(EVAL_MODELS)}")
        if self.policy not in POLICY_BACKENDS:
            raise ValueError(f"policy {self.policy!r} is not allowed; choose one of {list(POLICY_BACKENDS)}")
        if self.vllm and (self.policy != "vllm" or not isinstance(self.vllm, Mapping)):
            raise ValueError(
                f"vllm: engine keywords are a mapping for policy: vllm (policy is {self.policy!r}); "
                "set policy: vllm or drop vllm:"
            )
        SamplingParams(temperature=self.temperature, top_p=self.top_p)  # the rollouts' own rules


def _stage_fields() -> dict[str, Any]:
    """Return the ``RolloutConfig`` fields the stage sets itself: the protocol's, and the episodes' seed."""
    return {**protocol_fields("react"), "seed": 0}


def _check_ood_options(values: Mapping[str, Any]) -> None:
    """Refuse ``eval.ood`` keys that are no ``RolloutConfig`` field (or that the experiment decides)."""
    if not values:
        return
    if not isinstance(values, Mapping):
        raise ValueError(f"ood must be a mapping of RolloutConfig fields, got {values!r}")
    allowed = sorted({f.name for f in dataclasses.fields(rollout_config_type())} - set(_stage_fields()))
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ValueError(f"ood: unknown key(s) {unknown}; allowed keys are {allowed}")


def run_eval(cfg: EvalStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Run each policy on the held-out queries in checkpointed chunks; write episode tables and metrics.

    A greedy evaluation on the fast CPU sampler runs its chunks in ``STAR_EVAL_PROCESSES`` one-thread
    processes when that is set (:mod:`star_lib.experiments.evalpool`); the episodes are the same.
    """
    queries = read_queries(inputs["data"])[: cfg.max_queries]
    models = _eval_models(cfg, inputs)
    with eval_workers(cfg, inputs["world"], -(-len(queries) // cfg.chunk_size)) as workers:
        info = evaluate_models(cfg, models, inputs, out, queries, workers)
    return {**info, "processes": workers.pool.processes if workers else 1}


def _eval_models(cfg: EvalStageConfig, inputs: Mapping[str, Path]) -> list[tuple[str, Path | None]]:
    """Return ``(name, model folder)`` per evaluated policy; ``("expert", None)`` without a trained model."""
    paths = {
        "base": inputs["sft"] / "base" if "sft" in inputs else None,
        "sft": inputs["sft"] / "model" if "sft" in inputs else None,
        "rl": inputs.get("rl"),
    }
    if not cfg.models:
        latest = paths["rl"] or paths["sft"]
        return [("rl" if paths["rl"] else "sft", latest)] if latest else [("expert", None)]
    missing = [m for m in cfg.models if paths[m] is None or not paths[m].is_dir()]  # type: ignore[union-attr]
    if missing:
        raise ConfigError(
            f"eval.models {list(cfg.models)}: no {missing} model in this run — add the stage that trains it "
            f"(base and sft come from sft, rl from rl) or drop it from eval.models"
        )
    return [(m, paths[m]) for m in cfg.models]


def _eval_inputs(stages: tuple[str, ...], config: EvalStageConfig) -> dict[str, tuple[str, str]]:
    """Return the eval inputs: world, tasks, the SFT output (``base/``, ``model/``) and the RL model."""
    inputs = {"world": ("world", "db"), "data": ("synth", "base/test.jsonl"), "ood": ("synth", "ood?")}
    if "sft" in stages:
        inputs["sft"] = ("sft", ".")
    if "rl" in stages:
        inputs["rl"] = ("rl", "model")
    return inputs


STAGE = Stage(
    "eval",
    run_eval,
    EvalStageConfig,
    inputs=_eval_inputs,
    run_config=RunConfigSpec(rollout_config_type, _stage_fields),
    uses_gpu=True,
    scores_plans=True,
)
