"""The per-GPU memory planner and ``star plan``: known figures pinned, the paper's 7B layout decided."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from star_lib.cli import main
from star_lib.experiments.config import ConfigError
from star_lib.experiments.memory import (
    BYTES_PER_PARAM_ADAM,
    GIB,
    MODEL_SHAPES,
    TrainingPlanInput,
    gpu_memory_of_profile,
    plan_training,
    strategy_of_accelerate_config,
)
from star_lib.experiments.profiles import load_profile

REPO = Path(__file__).resolve().parents[2]
SLURM = REPO / "slurm"


def test_memory_parameter_counts_match_the_published_sizes():
    published = {"qwen2.5-1.5b": 1.54e9, "qwen2.5-3b": 3.09e9, "qwen2.5-7b": 7.62e9, "smollm2-135m": 134.5e6}
    for name, size in published.items():
        assert MODEL_SHAPES[name].parameters == pytest.approx(size, rel=0.005), name


def test_memory_mixed_precision_adam_is_16_bytes_per_parameter():
    assert BYTES_PER_PARAM_ADAM == 16
    p = MODEL_SHAPES["qwen2.5-7b"].parameters
    ddp = plan_training(TrainingPlanInput("qwen2.5-7b"), gpus=8, gpu_memory_gib=80, strategy="ddp")
    state = ddp.terms["weights"] + ddp.terms["gradients"] + ddp.terms["optimizer"]
    assert state * GIB == pytest.approx(16 * p)  # fp32 weights 4 + gradients 4 + Adam moments 8
    assert ddp.terms["weights"] * GIB == pytest.approx(4 * p)  # fp32 master weights, replicated
    zero2 = plan_training(TrainingPlanInput("qwen2.5-7b"), gpus=8, gpu_memory_gib=80, strategy="zero2")
    assert zero2.terms["weights"] == ddp.terms["weights"] and zero2.terms["optimizer"] * 8 == pytest.approx(
        ddp.terms["optimizer"]
    )
    zero3 = plan_training(TrainingPlanInput("qwen2.5-7b"), gpus=16, gpu_memory_gib=80, strategy="zero3")
    sharded = zero3.terms["weights"] + zero3.terms["gradients"] + zero3.terms["optimizer"]
    assert sharded * 16 == pytest.approx(state)


def test_memory_7b_full_fine_tuning_does_not_fit_80gb_under_ddp_but_fits_zero3_on_16():
    run = TrainingPlanInput("qwen2.5-7b", use_vllm=True)
    ddp = plan_training(run, gpus=8, gpu_memory_gib=80, strategy="ddp")
    assert not ddp.fits and ddp.peak_gib > 80
    assert "--strategy zero3" in ddp.problems[0]
    zero3 = plan_training(run, gpus=16, gpu_memory_gib=80, strategy="zero3")
    assert zero3.fits and zero3.peak_gib < 0.95 * 80


def test_memory_logits_and_context_dominate_activations_and_checkpointing_matters():
    base = TrainingPlanInput("qwen2.5-1.5b", context_tokens=32768)
    plan = plan_training(base, gpus=8, gpu_memory_gib=80, strategy="ddp")
    # bf16 logits + their gradient over Qwen's 151,936-token vocabulary for 32k tokens
    assert plan.terms["logits"] == pytest.approx(4 * 151936 * 32768 / GIB)
    every_layer = TrainingPlanInput("qwen2.5-1.5b", gradient_checkpointing=False)
    no_ckpt = plan_training(every_layer, gpus=8, gpu_memory_gib=80, strategy="ddp")
    assert no_ckpt.terms["activations"] > 10 * plan.terms["activations"]
    assert any("gradient_checkpointing" in p for p in no_ckpt.problems)


def test_memory_vllm_share_must_hold_the_weights_and_a_context():
    small = TrainingPlanInput("qwen2.5-7b", use_vllm=True, vllm_gpu_memory_utilization=0.1)
    plan = plan_training(small, gpus=16, gpu_memory_gib=80, strategy="zero3")
    assert not plan.fits and any("vllm_gpu_memory_utilization" in p for p in plan.problems)
    awake = TrainingPlanInput("qwen2.5-7b", use_vllm=True, vllm_sleep_mode=False)
    asleep = TrainingPlanInput("qwen2.5-7b", use_vllm=True)
    kept = plan_training(awake, gpus=16, gpu_memory_gib=80, strategy="zero3").update_gib
    released = plan_training(asleep, gpus=16, gpu_memory_gib=80, strategy="zero3").update_gib
    assert kept - released == pytest.approx(0.3 * 80 - 1.0)


def test_memory_profiles_say_their_gpu_memory_and_accelerate_configs_their_strategy():
    assert gpu_memory_of_profile(load_profile(SLURM / "a100-8gpu.yaml")) == 80.0
    with pytest.raises(ConfigError, match="--gpu-memory-gb"):
        gpu_memory_of_profile(load_profile(SLURM / "local.yaml"))
    strategies = {
        p.name: strategy_of_accelerate_config(yaml.safe_load(p.read_text()))
        for p in (SLURM / "accelerate").glob("*.yaml")
    }
    assert strategies == {
        "ddp.yaml": "ddp",
        "zero3.yaml": "zero3",
        "zero3-2node.yaml": "zero3",
        "zero3-cpu.yaml": "zero3",
    }


def _experiment(tmp_path: Path, model: str) -> Path:
    from star_lib.experiments.grids import base_config

    path = tmp_path / f"{model}.yaml"
    stages = ["world", "synth", "teacher", "sft", "rl", "eval"]  # qa-eval would need QA data paths
    config = base_config("paper").replace(model=model, name="plan", stages=stages)  # the paper RL defaults
    path.write_text(yaml.safe_dump(config.to_dict()))
    return path


def test_star_plan_refuses_7b_under_ddp_on_8_a100s_and_accepts_zero3_on_16(tmp_path, capsys):
    config = _experiment(tmp_path, "qwen2.5-7b")
    code = main(["plan", str(config), "--cluster", str(SLURM / "a100-8gpu.yaml"), "--stage", "rl"])
    out, err = capsys.readouterr()
    assert code == 2 and "does NOT fit" in out and "weights" in out and "vllm" in out
    assert err.startswith("star plan: error:") and "--strategy zero3" in err and len(err.splitlines()) == 1
    code = main(
        [
            "plan",
            str(config),
            "--cluster",
            str(SLURM / "a100-16gpu-2node.yaml"),
            "--accelerate-config",
            str(SLURM / "accelerate" / "zero3-2node.yaml"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "16 GPU(s) of 80 GiB, zero3" in out and out.count(": fits") == 2  # sft and rl


def test_star_plan_paper_1_5b_fits_one_node_under_ddp_but_3b_rl_needs_zero3(tmp_path, capsys):
    """With DDP's gradient buckets counted, the 3B RL update (32k context) outgrows 80 GiB under DDP."""
    node = ["--cluster", str(SLURM / "a100-8gpu.yaml")]
    code = main(["plan", str(_experiment(tmp_path, "qwen2.5-1.5b")), *node])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.count(": fits") == 2 and out.count("ddp_buckets           5.8 GiB") == 2  # sft and rl
    code = main(["plan", str(_experiment(tmp_path, "qwen2.5-3b")), *node])
    out, err = capsys.readouterr()
    assert code == 2 and "rl of qwen2.5-3b does not fit 8 × 80 GiB under ddp" in err
    assert "DDP's gradient buckets take 11.5 GiB" in out and "zero3" in err
    zero3 = ["--accelerate-config", str(SLURM / "accelerate" / "zero3.yaml")]
    code = main(["plan", str(_experiment(tmp_path, "qwen2.5-3b")), *node, *zero3])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "8 GPU(s) of 80 GiB, zero3" in out and out.count(": fits") == 2


def test_memory_ddp_gradient_buckets_are_a_second_fp32_copy_of_the_gradients():
    """PyTorch DDP all-reduces through buckets covering every parameter (gradient_as_bucket_view=False)."""
    p = MODEL_SHAPES["qwen2.5-1.5b"].parameters
    run = TrainingPlanInput("qwen2.5-1.5b", use_vllm=True)
    ddp = plan_training(run, gpus=8, gpu_memory_gib=80, strategy="ddp")
    assert ddp.terms["ddp_buckets"] * GIB == pytest.approx(4 * p) == ddp.terms["gradients"] * GIB
    assert "  ddp_buckets           5.8 GiB" in ddp.table().splitlines()  # a line of its own in star plan
    views = plan_training(
        TrainingPlanInput("qwen2.5-1.5b", use_vllm=True, gradient_as_bucket_view=True),
        gpus=8,
        gpu_memory_gib=80,
        strategy="ddp",
    )
    assert views.terms["ddp_buckets"] == 0.0
    assert (ddp.update_gib - views.update_gib) * GIB == pytest.approx(4 * p)
    assert (ddp.rollout_gib - views.rollout_gib) * GIB == pytest.approx(4 * p)  # kept while rolling out
    one_gpu = plan_training(run, gpus=1, gpu_memory_gib=80, strategy="ddp")  # no DDP wrapper on one GPU
    assert one_gpu.terms["ddp_buckets"] == 0.0
    for strategy in ("zero2", "zero3", "fsdp2"):  # their own (sharded) reduce buffers, not DDP's
        assert plan_training(run, gpus=8, gpu_memory_gib=80, strategy=strategy).terms["ddp_buckets"] == 0.0


def test_star_plan_refuses_a_batch_that_does_not_split_over_the_cluster(tmp_path, capsys):
    rl = tmp_path / "rl.yaml"
    rl.write_text(yaml.safe_dump({"rl": {"preset": "qwen2.5-1.5b", "prompts_per_step": 4, "use_vllm": True}}))
    code = main(["plan", str(rl), "--cluster", str(SLURM / "a100-8gpu.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "rl.yaml" in err and "prompts_per_step a multiple of 8" in err


@pytest.mark.parametrize(
    ("extra", "culprit"),
    [
        (["--strategy", "zero9"], "--strategy"),
        (["--stage", "eval"], "--stage"),
        (["--gpu-memory-gb", "0"], "--gpu-memory-gb"),
    ],
)
def test_star_plan_bad_options_are_one_line(tmp_path, capsys, extra, culprit):
    config = _experiment(tmp_path, "qwen2.5-1.5b")
    code = main(["plan", str(config), "--cluster", str(SLURM / "a100-8gpu.yaml"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and culprit in err


def test_memory_tiny_study_shapes_come_from_the_presets_architectures():
    from star_lib.experiments.memory import TINY_VOCAB, model_shape, tiny_shape
    from star_lib.train.models import PRESETS, TINY_SCALE

    counts = [MODEL_SHAPES[name].parameters for name in TINY_SCALE]
    assert counts == sorted(counts) and len(set(counts)) == 3  # tiny-s < tiny < tiny-l
    for name in TINY_SCALE:
        arch, shape = PRESETS[name].architecture, model_shape(name)
        assert (shape.hidden_size, shape.num_hidden_layers, shape.intermediate_size) == (
            arch.hidden_size, arch.num_hidden_layers, arch.intermediate_size
        )  # fmt: skip
        assert shape.vocab_size == TINY_VOCAB
    assert 0.9e6 < MODEL_SHAPES["tiny-s"].parameters < 1.5e6 and 3e6 < MODEL_SHAPES["tiny-l"].parameters < 5e6
    with pytest.raises(ConfigError, match="qwen2.5-7b.*not built from an architecture"):
        tiny_shape("qwen2.5-7b")
    plan = plan_training(
        TrainingPlanInput("tiny-l", context_tokens=4096), gpus=1, gpu_memory_gib=24, strategy="ddp"
    )
    assert plan.fits
