"""star_lib.train: model presets, the tiny tokenizer, SFT cold start and multi-turn GRPO on TRL.

Modules (import them directly; this package imports nothing heavy):

- :mod:`star_lib.train.models` — ``PRESETS`` (``tiny``, ``qwen2.5-1.5b``, ``qwen2.5-3b``, ``qwen2.5-7b``),
  ``load_model_and_tokenizer``, ``build_tiny_model``, ``build_tiny``.
- :mod:`star_lib.train.tokenizer` — ``train_tokenizer`` (byte-level BPE with Qwen2.5's tokens and TRL's
  ``qwen2_5`` chat template), ``align_chat_template``.
- :mod:`star_lib.train.warmup` — the copy-task warm-up for from-scratch models.
- :mod:`star_lib.train.sft` — ``SFTRunConfig`` → ``run_sft`` (TRL ``SFTTrainer``, assistant-only loss).
- :mod:`star_lib.train.rl` — ``RLRunConfig`` → ``run_rl`` (TRL ``GRPOTrainer`` + multi-turn ``rollout_func``;
  ``algorithm: grpo | dapo | arpo``).
- :mod:`star_lib.train.algorithms` — ``ALGORITHMS`` and one object per algorithm (trainer class, checks,
  extra rewards, rollout policy and episodes), picked by ``algorithm_for(name)``; imports nothing heavy.
- :mod:`star_lib.train.rollouts` — the rollout bridge: TRL's ``rollout_func``, truncation masks, per-episode
  metrics, ``rollouts.parquet``.
- :mod:`star_lib.train.evaluation` — the held-out evaluation during RL.
- :mod:`star_lib.train.batching` — how a step's batch splits over ranks and micro-batches.
- :mod:`star_lib.train.importance_sampling` — counts of TRL's vLLM importance-sampling correction.
- :mod:`star_lib.train.finish` — the end SFT and RL share: train, save the model, flush the metrics.
- :mod:`star_lib.train.dapo` — DAPO's dynamic sampling (drop zero-variance groups, refill) and soft overlong
  shaping that counts model tokens only.
- :mod:`star_lib.train.arpo` — ARPO's entropy-based adaptive rollouts (branch after tool responses).
- :mod:`star_lib.train.resume` — checkpoints with the rollout RNG state, so ``--resume`` replays exactly.
- :mod:`star_lib.train.metrics` — ``metrics.parquet`` logging.

The learning signal end to end is an experiment config (``configs/learning-signal.yaml``) run by
:mod:`star_lib.experiments` (``star run learning-signal``, alias ``star pipeline --preset tiny``).
"""
