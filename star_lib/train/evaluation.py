"""Held-out evaluation during RL: greedy episodes on held-out queries every ``eval_steps`` and at the end.

The metrics go to ``metrics.parquet`` under stage ``eval`` (``eval/…`` keys, the SUM reward too), sample
episodes to ``rollouts.parquet``. Tools run under the run's ``eval_faults``, independent of the training
rollouts' ``faults`` (train noisy / test clean and vice versa).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from star_lib.train.rollouts import RolloutLog, episode_metrics, generation_mode

if TYPE_CHECKING:
    from star_lib.agent.config import RolloutConfig
    from star_lib.train.metrics import MetricsLog


def evaluate_policy(policy: Any, queries: Sequence[Any], world: Any, rollout_cfg: RolloutConfig, **kw: Any):
    """Run one episode per query and return ``(episodes, metrics)`` with ``eval/…`` keys (SUM reward too)."""
    from dataclasses import replace

    from star_lib.agent.rollout import run_episodes

    episodes = run_episodes(policy, list(queries), world, replace(rollout_cfg, reward="sum"), **kw)
    metrics = episode_metrics(episodes, prefix="eval/")
    metrics = {k if k.startswith("eval/") else "eval/" + k: v for k, v in metrics.items()}
    return episodes, metrics


def _greedy_policy(model: Any, tokenizer: Any) -> Any:
    from star_lib.agent.policies import SamplingParams, TransformersPolicy

    return TransformersPolicy(model, tokenizer, SamplingParams(temperature=0.0), batch_size=16)


def _fast_greedy_policy(model: Any, tokenizer: Any) -> Any:
    from star_lib.agent.fastgen import FastPolicy
    from star_lib.agent.policies import SamplingParams

    return FastPolicy(model, tokenizer, SamplingParams(temperature=0.0))  # built per evaluation: new weights


class HeldOutEvalCallback:
    """Greedy evaluation on held-out queries every ``eval_steps`` and at the end (stage ``eval``).

    Tools run under ``cfg.eval_faults`` (independent of the training rollouts' ``cfg.faults``). The policy is
    the trained model, decoding greedily (with the KV-cached CPU sampler under ``cfg.fast_generation``),
    unless ``policy_factory(model, tokenizer)`` builds another (tests).
    """

    def __init__(
        self,
        cfg: Any,
        queries: Sequence[Any],
        world: Any,
        metrics: MetricsLog,
        rollout_log: RolloutLog | None = None,
        policy_factory: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.cfg, self.queries, self.world = cfg, list(queries), world
        self.metrics, self.rollout_log = metrics, rollout_log
        fast = getattr(cfg, "fast_generation", False)
        self.policy_factory = policy_factory or (_fast_greedy_policy if fast else _greedy_policy)
        self.trainer: Any = None
        self.done_steps: set[int] = set()

    def callback(self) -> Any:
        """Return the ``transformers.TrainerCallback`` to register."""
        from transformers import TrainerCallback

        outer = self

        class _Callback(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                if state.global_step % outer.cfg.eval_steps == 0:
                    outer.run(state.global_step)

            def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                outer.run(state.global_step)

        return _Callback()

    def run(self, step: int) -> dict[str, float]:
        """Evaluate now (once per step) and log the metrics."""
        if step in self.done_steps or self.trainer is None:
            return {}
        self.done_steps.add(step)
        start = time.perf_counter()
        with generation_mode(self.trainer) as model:
            policy = self.policy_factory(model, self.trainer.processing_class)
            episodes, metrics = evaluate_policy(
                policy, self.queries, self.world, self.cfg.rollout_config(), faults=self.cfg.eval_faults
            )
        metrics["eval/seconds"] = time.perf_counter() - start
        self.metrics.append("eval", step, metrics)
        if self.rollout_log is not None:
            self.rollout_log.append(step, "eval", episodes[: self.cfg.rollouts_per_step])
        return metrics
