"""What a training rollout unwraps: the ZeRO-3 gather follows ``ds3_gather_for_generation``, and a vLLM
rollout leaves the training model alone (issue 20, defect 8)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rl_support import ScriptedPolicy, queries, rl_config  # noqa: E402


def test_rollouts_gather_zero3_parameters_only_when_they_generate_with_the_training_model(
    rl_dir, world, tmp_path, monkeypatch
):
    import torch
    import trl.models

    from star_lib.train.algorithms import algorithm_for
    from star_lib.train.models import load_model_and_tokenizer
    from star_lib.train.rollouts import make_rollout_func, prompt_dataset

    gathers: list[bool] = []

    @contextlib.contextmanager
    def recording_unwrap(model, accelerator, gather_deepspeed3_params=True, **kwargs):
        gathers.append(gather_deepspeed3_params)  # True: every ZeRO-3 shard gathered on every GPU
        yield model

    monkeypatch.setattr(trl.models, "unwrap_model_for_generation", recording_unwrap)
    _, tokenizer = load_model_and_tokenizer("tiny", path=rl_dir / "model")
    cfg = rl_config(rl_dir, tmp_path)
    prompts = list(prompt_dataset(queries(rl_dir)[:1])["prompt"]) * cfg.group_size
    rollout = make_rollout_func(
        cfg, world, algorithm_for("grpo"), policy_factory=lambda t, c: ScriptedPolicy(lambda q, m: "expert")
    )
    for use_vllm, gather in ((True, True), (False, True), (False, False)):
        trainer = SimpleNamespace(
            use_vllm=use_vllm,
            model_wrapped=torch.nn.Linear(1, 1),
            accelerator=SimpleNamespace(num_processes=1),
            args=SimpleNamespace(ds3_gather_for_generation=gather, gradient_checkpointing_kwargs=None),
            state=SimpleNamespace(global_step=0),
            processing_class=tokenizer,
            _log_metric=lambda key, value: None,
        )
        output = rollout(prompts, trainer)
        assert len(output["completion_ids"]) == cfg.group_size  # the episodes ran either way
    # the vLLM rollout unwrapped nothing; the others followed ds3_gather_for_generation
    assert gathers == [True, False]
