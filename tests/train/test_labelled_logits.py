"""``labelled_logits_only``: the LM head applied only where there is a label gives the same loss and grads."""

from __future__ import annotations

import copy

import pytest

from star_lib.train.models import TinyArchitecture, build_tiny_model
from star_lib.train.sft import SFTRunConfig, make_sft_trainer, normalise_rows
from star_lib.train.warmup import (
    CopyWarmupConfig,
    check_plain_head,
    content_token_ids,
    copy_batch,
    copy_warmup,
    labelled_lm_loss,
)

ARCH = TinyArchitecture(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64
)


def grads(model) -> dict:
    """Each parameter's gradient (names of parameters without one are left out)."""
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def assert_grads_match(a: dict, b: dict, tol: float = 1e-4) -> None:
    import torch

    assert a.keys() == b.keys() and a
    for name in a:
        assert torch.allclose(a[name], b[name], atol=tol, rtol=tol), name
    assert any(g.abs().sum() > 0 for g in a.values())  # the comparison is not between zeros


# ───────────────────────────── copy warm-up ─────────────────────────────


def copy_example(tokenizer, seed: int = 0) -> dict:
    import torch

    cfg = CopyWarmupConfig(batch_size=4, min_tokens=3, max_tokens=12)
    pool = torch.tensor(content_token_ids(tokenizer))
    return copy_batch(tokenizer, pool, cfg, torch.Generator().manual_seed(seed))


def test_labelled_warmup_loss_and_grads_equal_the_full_ones(tiny_tokenizer):
    import torch

    torch.manual_seed(0)
    full_model = build_tiny_model(tiny_tokenizer, ARCH)
    labelled_model = copy.deepcopy(full_model)
    batch = copy_example(tiny_tokenizer)
    assert (batch["labels"] == -100).any() and (batch["attention_mask"] == 0).any()  # masks and padding

    full = full_model(**batch).loss
    labelled = labelled_lm_loss(labelled_model, batch)
    assert labelled.item() == pytest.approx(full.item(), abs=1e-5)
    full.backward()
    labelled.backward()
    assert_grads_match(grads(full_model), grads(labelled_model))


def test_labelled_warmup_without_labels_is_a_zero_loss_that_backpropagates(tiny_tokenizer):
    model = build_tiny_model(tiny_tokenizer, ARCH)
    batch = copy_example(tiny_tokenizer)
    batch["labels"][:] = -100
    loss = labelled_lm_loss(model, batch)
    assert loss.item() == 0.0
    loss.backward()
    assert all(g.abs().sum() == 0 for g in grads(model).values())


def test_labelled_warmup_trains_the_same_model(tiny_tokenizer):
    import torch

    torch.manual_seed(0)
    full_model = build_tiny_model(tiny_tokenizer, ARCH)
    labelled_model = copy.deepcopy(full_model)
    settings = {"steps": 6, "batch_size": 4, "max_tokens": 10, "warmup_steps": 2, "log_every": 3}
    full = copy_warmup(full_model, tiny_tokenizer, CopyWarmupConfig(**settings))
    labelled = copy_warmup(
        labelled_model, tiny_tokenizer, CopyWarmupConfig(**settings, labelled_logits_only=True)
    )
    assert [s for s, _ in labelled.losses] == [s for s, _ in full.losses] == [3, 6]
    for (_, a), (_, b) in zip(full.losses, labelled.losses, strict=True):
        assert a == pytest.approx(b, abs=1e-4)
    for p, q in zip(full_model.parameters(), labelled_model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-4)


def test_labelled_logits_refuse_a_scaled_head(tiny_tokenizer):
    model = build_tiny_model(tiny_tokenizer, ARCH)
    model.config.final_logit_softcapping = 30.0
    with pytest.raises(ValueError, match="copy_warmup.labelled_logits_only.*final_logit_softcapping"):
        check_plain_head(model, "copy_warmup.labelled_logits_only")


# ───────────────────────────── SFT ─────────────────────────────


def sft_pair(tiny_tokenizer, sft_rows, tmp_path):
    """Two trainers on copies of one model: TRL's forward and the labelled-only one."""
    import torch

    torch.manual_seed(0)
    model = build_tiny_model(tiny_tokenizer, ARCH)
    rows = normalise_rows(sft_rows)
    trainers = []
    for labelled in (False, True):
        cfg = SFTRunConfig(
            data="unused",
            output_dir=str(tmp_path / str(labelled)),
            per_device_train_batch_size=4,
            labelled_logits_only=labelled,
            progress=False,
        )
        trainers.append(make_sft_trainer(cfg, copy.deepcopy(model), tiny_tokenizer, rows))
    return trainers


def first_batch(trainer) -> dict:
    return trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))


def test_labelled_sft_loss_grads_and_metrics_equal_trl(tiny_tokenizer, sft_rows, tmp_path):
    full_trainer, labelled_trainer = sft_pair(tiny_tokenizer, sft_rows, tmp_path)
    assert not hasattr(full_trainer.model.forward, "labelled_logits_only")  # TRL's patch, left as it is
    assert labelled_trainer.model.forward.labelled_logits_only
    batch = first_batch(full_trainer)
    assert (batch["labels"] == -100).any() and (batch["labels"] != -100).any()
    losses = []
    for trainer in (full_trainer, labelled_trainer):
        trainer.model.train()
        loss = trainer.compute_loss(trainer.model, {k: v.clone() for k, v in batch.items()})
        loss.backward()
        losses.append(loss.item())
    assert losses[1] == pytest.approx(losses[0], abs=1e-5)
    assert_grads_match(grads(full_trainer.model), grads(labelled_trainer.model))
    for metric in ("entropy", "mean_token_accuracy"):
        full = full_trainer._metrics["train"][metric]
        labelled = labelled_trainer._metrics["train"][metric]
        assert len(full) == len(labelled) == 1 and labelled[0] == pytest.approx(full[0], abs=1e-5), metric
    assert full_trainer._total_train_tokens == labelled_trainer._total_train_tokens > 0


def test_labelled_sft_scores_only_the_labelled_positions(tiny_tokenizer, sft_rows, tmp_path, monkeypatch):
    from trl.kernels import ChunkedLogProbFunction

    full_trainer, labelled_trainer = sft_pair(tiny_tokenizer, sft_rows, tmp_path)
    batch = first_batch(full_trainer)
    rows = []
    original = ChunkedLogProbFunction.apply

    def counting(hidden, *args):
        rows.append(hidden.shape[0])
        return original(hidden, *args)

    monkeypatch.setattr(ChunkedLogProbFunction, "apply", counting)
    for trainer in (full_trainer, labelled_trainer):
        trainer.compute_loss(trainer.model, {k: v.clone() for k, v in batch.items()})
    labels = batch["labels"][:, 1:]
    assert rows == [labels.numel(), int((labels != -100).sum())]
    assert rows[1] < rows[0]


def test_labelled_sft_batch_without_labels_is_a_zero_loss(tiny_tokenizer, sft_rows, tmp_path):
    _, trainer = sft_pair(tiny_tokenizer, sft_rows, tmp_path)
    batch = first_batch(trainer)
    batch["labels"][:] = -100
    trainer.model.train()
    loss = trainer.compute_loss(trainer.model, batch)
    assert loss.item() == 0.0
    loss.backward()
    assert all(g.abs().sum() == 0 for g in grads(trainer.model).values())
    assert trainer._metrics["train"]["mean_token_accuracy"] == [0.0]


def test_labelled_sft_leaves_generation_to_the_model(tiny_tokenizer, sft_rows, tmp_path):
    import torch

    full_trainer, labelled_trainer = sft_pair(tiny_tokenizer, sft_rows, tmp_path)
    prompt = torch.tensor([[5, 6, 7]])
    outputs = [
        t.model.generate(prompt, max_new_tokens=4, do_sample=False) for t in (full_trainer, labelled_trainer)
    ]
    assert torch.equal(*outputs)


# ───────────────────────────── stage keys ─────────────────────────────


def test_labelled_option_left_out_of_stage_keys_while_default():
    """learning-signal.yaml (and so the study's stages) resolve to the same SFT stage config as before."""
    from star_lib.experiments.config import read_config
    from star_lib.experiments.stages import build_registry

    registry = build_registry()
    resolved = registry.check(read_config("configs/learning-signal.yaml"))
    options = registry.get("sft").config_dict(resolved["sft"])["options"]
    assert "labelled_logits_only" not in options
    assert options["copy_warmup"] and "labelled_logits_only" not in options["copy_warmup"]
    assert "labelled_logits_only" in registry.get("sft").run_config.open_fields()  # a section may set it
