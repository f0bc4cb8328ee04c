"""The RL algorithms a run can choose — GRPO, DAPO, ARPO — one object each, holding what differs.

All three train with TRL's ``GRPOTrainer`` on the same config (:func:`star_lib.train.rl.build_grpo_config`)
and the same rollout bridge (:mod:`star_lib.train.rollouts`). An algorithm object says what it changes:

=========  =======================================  ==========================================
method     GRPO (the base)                          DAPO / ARPO
=========  =======================================  ==========================================
trainer    ``trl.GRPOTrainer``                      DAPO: + dynamic sampling (``DAPOTrainer``)
check      nothing                                  DAPO: token-level loss; ARPO: vLLM logprobs
rewards    the run's reward                         DAPO: + soft overlong punishment
policy     the trained model                        ARPO: the trained model with entropies
episodes   one per prompt                           ARPO: G per group with entropy branching
=========  =======================================  ==========================================

Their counters: DAPO's trainer logs ``dapo/…`` itself, ARPO's episodes return ``arpo/…``.
``algorithm_for(name)`` picks the object once. Importing this module is light (no torch, transformers or
trl): the experiment configs read :data:`ALGORITHMS` at load time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from star_lib.train.rollouts import RolloutBatch

ALGORITHMS: tuple[str, ...] = ("grpo", "dapo", "arpo")
"""RL algorithms: GRPO, DAPO (GRPO + dynamic sampling + overlong shaping), ARPO (adaptive rollouts)."""

VLLM_MAX_LOGPROBS = 20
"""vLLM's default ``max_logprobs`` (TRL's colocated engine keeps it): asking for more top logprobs fails."""


class GRPO:
    """GRPO (TRL's trainer as it is); DAPO and ARPO override what they change."""

    name = "grpo"
    """The ``RLRunConfig.algorithm`` value."""

    def check(self, cfg: Any) -> None:
        """Refuse settings of ``cfg`` (an ``RLRunConfig``) this algorithm cannot run (GRPO: none)."""

    def trainer_class(self) -> type:
        """Return the trainer class (imports TRL)."""
        from trl import GRPOTrainer

        return GRPOTrainer

    def configure_trainer(self, trainer: Any, cfg: Any) -> None:
        """Set the algorithm's attributes on a built trainer (GRPO: none)."""

    def extra_reward_funcs(self, cfg: Any) -> list[Callable[..., list[float]]]:
        """Return reward functions added after the run's reward (GRPO: none)."""
        return []

    def policy_factory(self) -> Callable[[Any, Any], Any]:
        """Return the default ``(trainer, cfg) -> Policy`` writing the rollouts: the trained model."""
        from star_lib.train.rollouts import default_policy

        return default_policy

    def run_episodes(self, cfg: Any, policy: Any, batch: RolloutBatch) -> tuple[list[Any], dict[str, float]]:
        """Run one episode per prompt; return the episodes and the algorithm's counters (GRPO: none).

        Args:
            cfg: The run config (faults, group size, seed).
            policy: Writes the turns.
            batch: The rollout call: TRL's prompts in groups, the world, the episode settings.

        """
        from star_lib.agent.rollout import run_episodes
        from star_lib.train.rollouts import query_from_prompt

        queries = [query_from_prompt(p) for p in batch.prompts]
        episodes = run_episodes(
            policy,
            queries,
            batch.world,
            batch.rollout_cfg,
            cfg.faults,
            group_ids=batch.groups,
            tools=batch.tools,
            tokenizer=batch.tokenizer,
        )
        return episodes, {}


class DAPO(GRPO):
    """DAPO: GRPO's trainer with dynamic sampling, plus soft overlong shaping (:mod:`star_lib.train.dapo`)."""

    name = "dapo"

    def check(self, cfg: Any) -> None:
        """Require the token-level loss (DAPO §3.3).

        Raises:
            ValueError: When ``loss_type`` is not ``dapo``.

        """
        if cfg.loss_type != "dapo":
            raise ValueError(
                f"DAPO trains with the token-level loss: set loss_type: dapo (got {cfg.loss_type!r}) "
                "or choose algorithm: grpo"
            )

    def trainer_class(self) -> type:
        """Return ``DAPOTrainer``: dynamic sampling over ``trl.GRPOTrainer``."""
        from star_lib.train.dapo import dapo_trainer_class

        return dapo_trainer_class()

    def configure_trainer(self, trainer: Any, cfg: Any) -> None:
        """Cap the refill rounds of dynamic sampling at ``dapo.max_refill_rounds``."""
        trainer.max_refill_rounds = cfg.dapo.max_refill_rounds

    def extra_reward_funcs(self, cfg: Any) -> list[Callable[..., list[float]]]:
        """Return the soft overlong punishment on model tokens when ``dapo.overlong_shaping`` is on."""
        if not cfg.dapo.overlong_shaping:
            return []
        from star_lib.train.dapo import overlong_reward

        max_tokens, buffer = cfg.dapo.overlong_limits(int(cfg._pick("max_context_tokens")))
        return [overlong_reward(max_tokens, buffer, cfg.dapo.overlong_penalty)]


class ARPO(GRPO):
    """ARPO: entropy-based adaptive rollouts inside the rollout function (:mod:`star_lib.train.arpo`)."""

    name = "arpo"

    def check(self, cfg: Any) -> None:
        """Refuse more top logprobs than TRL's vLLM engine serves (the entropy estimate asks for them).

        Raises:
            ValueError: When ``use_vllm`` and ``arpo.top_logprobs`` exceeds :data:`VLLM_MAX_LOGPROBS`.

        """
        if cfg.use_vllm and cfg.arpo.top_logprobs > VLLM_MAX_LOGPROBS:
            raise ValueError(
                f"arpo.top_logprobs={cfg.arpo.top_logprobs} exceeds vLLM's max_logprobs "
                f"({VLLM_MAX_LOGPROBS}, the engine TRL starts); set arpo.top_logprobs <= {VLLM_MAX_LOGPROBS}"
            )

    def policy_factory(self) -> Callable[[Any, Any], Any]:
        """Return :func:`star_lib.train.arpo.entropy_policy`: the trained model with entropies."""
        from star_lib.train.arpo import entropy_policy

        return entropy_policy

    def run_episodes(self, cfg: Any, policy: Any, batch: RolloutBatch) -> tuple[list[Any], dict[str, float]]:
        """Run G episodes per group with entropy branching; the counters are ``arpo/…``.

        The branching draws come from ``numpy.random.default_rng([seed, batch.call, 0xA490])``.
        """
        import numpy as np

        from star_lib.train.arpo import ARPOStats, run_arpo_episodes
        from star_lib.train.rollouts import query_from_prompt

        stats = ARPOStats()
        episodes = run_arpo_episodes(
            policy,
            [query_from_prompt(p) for p in batch.prompts[:: cfg.group_size]],
            batch.world,
            batch.rollout_cfg,
            cfg.arpo,
            cfg.group_size,
            np.random.default_rng([cfg.seed, batch.call, 0xA490]),
            faults=cfg.faults,
            tools=batch.tools,
            tokenizer=batch.tokenizer,
            stats=stats,
        )
        return episodes, stats.metrics()


_BY_NAME: dict[str, GRPO] = {algorithm.name: algorithm for algorithm in (GRPO(), DAPO(), ARPO())}


def algorithm_for(name: str) -> GRPO:
    """Return the algorithm object called ``name``.

    >>> algorithm_for("dapo").name
    'dapo'

    Raises:
        ValueError: When ``name`` is not one of :data:`ALGORITHMS`.

    """
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm {name!r} is unknown; choose one of {ALGORITHMS}")
    return _BY_NAME[name]
