"""The rollout bridge: TRL's ``rollout_func`` running whole multi-turn episodes, and what it logs.

TRL hands :func:`make_rollout_func`'s function the batch's prompts, each repeated ``num_generations`` times in
consecutive groups. Every prompt is a JSON query record (:func:`prompt_dataset`); the function runs the
batch's episodes through the run's algorithm (:mod:`star_lib.train.algorithms`: one episode per prompt, or
ARPO's branching groups) with the current policy, the tools and optional fault injection, and returns TRL's
rows: ``prompt_ids``, ``completion_ids`` (all turns, tool responses included), ``env_mask`` (1 on model
tokens only — tool output never enters the loss), ``logprobs`` (vLLM), plus ``progress``/``milestone``/
``model_tokens`` columns for the reward functions.

- **Truncation** (the paper's overlong masking): an episode that hit the turn or context limit gets an
  all-zero ``env_mask`` (:func:`mask_truncated_episodes`): it leaves the loss and the token normaliser, but
  its reward still enters its group's mean and standard deviation.
- **Metrics** per call, handed to TRL's per-step averaging: ``env/…`` and ``reward/…``
  (:func:`episode_metrics`), the algorithm's counters, ``curriculum/…``, ``time/rollout_s``; sample episodes
  go to ``rollouts.parquet`` (:class:`RolloutLog`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datasets import Dataset

    from star_lib.agent.env import Episode
    from star_lib.train.resume import RolloutState

PolicyFactory = Callable[[Any, Any], Any]
"""``(trainer, cfg) -> Policy``: builds the policy that writes the rollout turns (tests inject scripts)."""


@dataclass(frozen=True)
class RolloutBatch:
    """One call of TRL's rollout function: what an algorithm needs to run its episodes."""

    prompts: Sequence[Any]
    """TRL's prompts (JSON query records), each repeated G times in a row."""
    groups: list[int]
    """Each prompt's group index."""
    world: Any
    """The database behind tools and evaluator."""
    rollout_cfg: Any
    """The call's :class:`~star_lib.agent.config.RolloutConfig` (limits, reward, seed)."""
    call: int
    """Rollout calls before this one (seeds per-call random streams)."""
    tokenizer: Any
    """The trainer's tokenizer (chat template)."""
    tools: Any
    """Tools to use instead of the world's registry (None: the world's)."""


# ───────────────────────────── data ─────────────────────────────


def read_queries(path: str | Path, limit: int | None = None) -> list[Any]:
    """Read the query records of a JSONL split (``star synth`` output).

    Raises:
        FileNotFoundError: saying how to make the file.

    """
    from star_lib.io import read_queries as read_query_file

    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"queries {file} do not exist; write them with `star synth`")
    queries = read_query_file(file)
    if not queries:
        raise ValueError(f"{file}: no query records")
    return queries[:limit] if limit else queries


def prompt_dataset(queries: Sequence[Any]) -> Dataset:
    """Build the prompt dataset: each ``prompt`` is a query record as JSON (the rollout rebuilds the task)."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": json.dumps(q.to_dict(), ensure_ascii=False)} for q in queries])


def query_from_prompt(prompt: Any) -> Any:
    """Rebuild the :class:`~star_lib.types.QueryRecord` a prompt of :func:`prompt_dataset` carries."""
    from star_lib.types import QueryRecord

    if not isinstance(prompt, str):
        raise ValueError("GRPO prompts must be JSON query records (build the dataset with prompt_dataset)")
    return QueryRecord.from_dict(json.loads(prompt))


def group_ids(prompts: Sequence[Any], group_size: int) -> list[int]:
    """Return each prompt's group index, checking that TRL repeated each prompt ``group_size`` times in a row.

    Raises:
        ValueError: when the prompts do not come in groups (the advantages would compare the wrong episodes).

    """
    if len(prompts) % group_size:
        raise ValueError(f"{len(prompts)} prompts is not a multiple of num_generations={group_size}")
    for start in range(0, len(prompts), group_size):
        if any(p != prompts[start] for p in prompts[start : start + group_size]):
            raise ValueError(
                "rollout prompts are not in consecutive groups of num_generations identical prompts"
            )
    return [i // group_size for i in range(len(prompts))]


# ───────────────────────────── rollouts ─────────────────────────────


def mask_truncated_episodes(output: dict[str, Any], episodes: Sequence[Episode]) -> dict[str, Any]:
    """Zero the ``env_mask`` of episodes that hit the turn or context limit (in place; returns ``output``).

    They then contribute no loss and no tokens to the normaliser, while their rewards stay in the group
    statistics — TRL computes advantages from every row before masking.
    """
    for i, ep in enumerate(episodes):
        if ep.termination.truncated:
            output["env_mask"][i] = [0] * len(output["env_mask"][i])
    return output


def episode_metrics(
    episodes: Sequence[Episode],
    prefix: str = "env/",
    gather: Callable[[list[Any]], list[Any]] | None = None,
) -> dict[str, float]:
    """Return the one episode summary (:func:`star_lib.agent.summary.episode_summary`) under ``prefix``.

    Keys: ``{prefix}<summary key>`` (``final_pass``, ``cs_micro``, ``truncation_rate``, ``faults``, …) with
    the training reward as ``{prefix}reward`` / ``{prefix}reward_se``; and ``reward/<ingredient>`` (before
    the format gate) with ``reward/format_ok``. With ``gather`` (``accelerate.utils.gather_object`` under
    several processes) the summary is over every rank's episodes, the same on each rank.
    """
    import polars as pl

    from star_lib.agent.rollout import episodes_frame
    from star_lib.agent.summary import episode_summary
    from star_lib.rewards import reward_components

    if not episodes:
        return {}
    frame = episodes_frame(episodes)
    parts = [reward_components(ep.report, ep.malformed) for ep in episodes]
    if gather is not None:  # every rank's episodes, as this rank's frame types them
        frame = pl.from_dicts(gather(frame.to_dicts()), schema=frame.schema)
        parts = gather(parts)
    summary = episode_summary(frame, reward_column="reward")
    metrics = {f"{prefix}{k}": float(v) for k, v in summary.items()}
    components: dict[str, list[float]] = {}
    for part in parts:
        for key, value in part.items():
            components.setdefault(key, []).append(float(value))
    # reward_components names its keys ``reward/<ingredient>`` (before the format gate) + ``reward/format_ok``
    metrics.update({k if "/" in k else f"reward/{k}": sum(v) / len(v) for k, v in components.items()})
    return metrics


class RolloutLog:
    """Sample episodes appended to ``rollouts.parquet`` (rewritten atomically; an existing file is kept).

    Only the main process (global rank 0) records and writes: the other ranks' episodes are the same kind of
    sample, and several writers would race on one file.
    """

    def __init__(self, path: str | Path, *, write: bool | None = None) -> None:
        from star_lib.train.metrics import is_main_process

        self.path = Path(path)
        self.write = is_main_process() if write is None else write
        """Whether :meth:`append` records anything (default: on the main process only)."""
        self.queries: list[list[int | None]] = []
        """The query ``idx`` of every episode this process rolled out, one list per rollout call (every rank
        keeps its own, for ``ranks.json``; not part of a checkpoint)."""
        self.frames: list[Any] = []
        if self.path.is_file():
            import polars as pl

            self.frames.append(pl.read_parquet(self.path))

    def append(self, step: int, stage: str, episodes: Sequence[Episode]) -> None:
        """Add rows (``episode_row`` + ``step``, ``stage``, the conversation as JSON); rewrite the file."""
        import polars as pl

        from star_lib.agent.rollout import episodes_frame

        if not episodes or not self.write:
            return
        frame = episodes_frame(episodes).with_columns(
            pl.lit(step).alias("step"),
            pl.lit(stage).alias("stage"),
            pl.Series("messages", [json.dumps(ep.messages, ensure_ascii=False) for ep in episodes]),
        )
        self.frames.append(frame)
        merged = pl.concat(self.frames, how="diagonal_relaxed")
        self.frames = [merged]
        from star_lib.io import write_parquet_atomic

        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(self.path, merged)


def default_policy(trainer: Any, cfg: Any) -> Any:
    """Wrap the current model as a sampling policy.

    vLLM when TRL colocates an engine (:class:`~star_lib.agent.policies.VLLMPolicy` handles sleep mode and
    tensor-parallel groups); else :class:`~star_lib.agent.fastgen.FastPolicy` with
    ``fast_generation``; else ``model.generate``.
    """
    from star_lib.agent.policies import SamplingParams, TransformersPolicy, VLLMPolicy

    sampling = SamplingParams(temperature=float(cfg._pick("temperature")), top_p=cfg.top_p)
    tokenizer = trainer.processing_class
    if getattr(trainer, "use_vllm", False):  # colocate (server mode is refused by RLRunConfig)
        # the TRL generation object: the policy wakes its KV cache, follows its TP group, sleeps it after
        return VLLMPolicy(trainer.vllm_generation, tokenizer, sampling)
    model = trainer.accelerator.unwrap_model(trainer.model)
    if cfg.fast_generation:
        from star_lib.agent.fastgen import FastPolicy

        return FastPolicy(model, tokenizer, sampling)  # built per batch: the weights changed since the last
    return TransformersPolicy(model, tokenizer, sampling, batch_size=cfg.batch_size)


@contextlib.contextmanager
def generation_mode(trainer: Any):
    """Unwrap the model for generation (turns gradient checkpointing off and back on, as TRL does).

    Under DeepSpeed ZeRO-3 the shards are gathered into whole parameters for the block only when TRL's
    ``ds3_gather_for_generation`` says so (its default, True); set it False (``rl.trl_overrides``) for a
    model whose whole parameters do not fit one GPU beside its training state.
    """
    from trl.models import unwrap_model_for_generation

    with unwrap_model_for_generation(
        trainer.model_wrapped,
        trainer.accelerator,
        gather_deepspeed3_params=bool(getattr(trainer.args, "ds3_gather_for_generation", True)),
        gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
    ) as unwrapped:
        was_training = unwrapped.training
        unwrapped.eval()
        try:
            yield unwrapped
        finally:
            unwrapped.train(was_training)


def rollout_context(trainer: Any) -> contextlib.AbstractContextManager[Any]:
    """Return the context a training rollout generates inside: :func:`generation_mode`, or none with vLLM.

    A vLLM rollout never touches the training model: TRL pushed its weights to the engine before calling
    the ``rollout_func`` (under ZeRO-3 one gathered parameter at a time). Unwrapping it anyway would gather
    every ZeRO-3 shard on every GPU for the whole multi-turn rollout (14 GB more per GPU for a 7B model in
    bf16), which is what sharding is there to avoid.
    """
    if getattr(trainer, "use_vllm", False):
        return contextlib.nullcontext()
    return generation_mode(trainer)


def log_metrics(trainer: Any, metrics: dict[str, float]) -> None:
    """Hand metrics to TRL's per-step averaging (they appear in the step's log row)."""
    log = getattr(trainer, "_log_metric", None)
    for key, value in metrics.items():
        if log is not None:
            log(key, value)
        else:
            trainer._metrics["train"][key].append(value)


def make_rollout_func(
    cfg: Any,
    world: Any,
    algorithm: Any,
    *,
    policy_factory: PolicyFactory | None = None,
    tools: Any = None,
    rollout_log: RolloutLog | None = None,
    state: RolloutState | None = None,
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """Build TRL's ``rollout_func(prompts, trainer) -> dict``: the batch's full episodes.

    Args:
        cfg: the run's ``RLRunConfig`` (episode limits, faults, group size, reward).
        world: the database behind tools and evaluator.
        algorithm: the run's :class:`~star_lib.train.algorithms.GRPO` object (or DAPO's, ARPO's): it runs
            the episodes and gives the default policy.
        policy_factory: ``(trainer, cfg) -> Policy``; defaults to the algorithm's (the trained model; ARPO:
            :func:`star_lib.train.arpo.entropy_policy`, which also returns entropies).
        tools: tools to use instead of the world's registry (tests).
        rollout_log: where sample episodes go (``rollouts_per_step`` of them per call).
        state: the counters behind the RNG streams (saved with checkpoints; see :mod:`star_lib.train.resume`).

    """
    from star_lib.train.resume import RolloutState

    state = state if state is not None else RolloutState()
    if policy_factory is None:
        policy_factory = algorithm.policy_factory()

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from star_lib.agent.rollout import trl_rollout_output

        start = time.perf_counter()
        step = int(trainer.state.global_step)
        call = state.calls
        state.calls += 1
        rollout_cfg = cfg.rollout_config(seed_offset=call * len(prompts))
        with rollout_context(trainer):
            policy = policy_factory(trainer, cfg)
            try:
                groups = group_ids(prompts, cfg.group_size)
                batch = RolloutBatch(
                    prompts, groups, world, rollout_cfg, call, trainer.processing_class, tools
                )
                episodes, metrics = algorithm.run_episodes(cfg, policy, batch)
            finally:
                release = getattr(policy, "release", None)
                if callable(release):  # vLLM: drain the TP group, put the engine back to sleep
                    release()
        output = mask_truncated_episodes(trl_rollout_output(episodes), episodes)
        gather = None  # several processes: the step's metrics cover every rank's episodes
        if getattr(getattr(trainer, "accelerator", None), "num_processes", 1) > 1:
            from accelerate.utils import gather_object as gather
        _add_reward_inputs(cfg, output, episodes, step, metrics, gather)
        metrics["time/rollout_s"] = time.perf_counter() - start
        log_metrics(trainer, metrics)
        if rollout_log is not None:
            rollout_log.queries.append([ep.query.idx for ep in episodes])
        if rollout_log is not None and cfg.rollouts_per_step:
            rollout_log.append(step, "train", episodes[: cfg.rollouts_per_step])
        return output

    return rollout_func


def _add_reward_inputs(
    cfg: Any,
    output: dict[str, Any],
    episodes: Sequence[Episode],
    step: int,
    metrics: dict[str, float],
    gather: Callable[[list[Any]], list[Any]] | None = None,
) -> None:
    """Shape TRL's rows for the rewards; add ``env/``, ``reward/``, ``curriculum/`` metrics (in place).

    Drops the ``episode``/``reward`` columns and adds ``progress`` (the curriculum's input), ``milestone``
    (MILESTONE's step-level credit) and ``model_tokens`` (DAPO's overlong shaping input).
    """
    output.pop("episode", None)  # not a reward input; keeps TRL's per-row merge cheap
    output.pop("reward", None)  # the trainer's reward functions recompute it (curriculum needs progress)
    progress = min(1.0, step / max(1, cfg.max_steps))
    output["progress"] = [progress] * len(episodes)
    if cfg.reward == "milestone":  # the reward function's input: each episode's step-level credit
        from star_lib.rewards import milestone_reward

        output["milestone"] = [
            milestone_reward(ep.plan, ep.steps, ep.query, ep.malformed, ep.report) for ep in episodes
        ]
        metrics["reward/milestone_credit"] = sum(output["milestone"]) / max(1, len(episodes))
    output["model_tokens"] = [sum(mask) for mask in output["env_mask"]]  # overlong shaping input
    metrics.update(episode_metrics(episodes, gather=gather))
    if cfg.reward == "curriculum":
        from star_lib.rewards import CURRICULUM_STAGES, curriculum_stage

        stage = curriculum_stage(progress, cfg.curriculum_boundaries)
        metrics["curriculum/stage"] = float(CURRICULUM_STAGES.index(stage))
        metrics["curriculum/progress"] = progress
