from __future__ import annotations

import pytest

from star_lib.train.models import TinyArchitecture, build_tiny_model
from star_lib.train.warmup import CopyWarmupConfig, content_token_ids, copy_batch, copy_warmup


def test_warmup_content_tokens_exclude_added_tokens(tiny_tokenizer):
    pool = content_token_ids(tiny_tokenizer)
    added = set(tiny_tokenizer.get_added_vocab().values())
    assert pool and not added & set(pool)


def test_warmup_copy_batch_trains_only_on_the_copy(tiny_tokenizer):
    import torch

    cfg = CopyWarmupConfig(batch_size=3, min_tokens=2, max_tokens=6)
    pool = torch.tensor(content_token_ids(tiny_tokenizer))
    batch = copy_batch(tiny_tokenizer, pool, cfg, torch.Generator().manual_seed(0))
    for ids, mask, labels in zip(batch["input_ids"], batch["attention_mask"], batch["labels"], strict=True):
        ids, labels = ids[mask.bool()].tolist(), labels[mask.bool()].tolist()
        text = tiny_tokenizer.decode(ids)
        user, assistant = text.split("<|im_start|>assistant\n")
        source = user.removeprefix("<|im_start|>user\n").removesuffix("<|im_end|>\n")
        assert assistant == source + "<|im_end|>"
        trained = [t for t, lab in zip(ids, labels, strict=True) if lab != -100]
        assert tiny_tokenizer.decode(trained) == assistant


def test_warmup_batches_are_seeded(tiny_tokenizer):
    import torch

    cfg = CopyWarmupConfig(batch_size=2)
    pool = torch.tensor(content_token_ids(tiny_tokenizer))
    a, b, c = (copy_batch(tiny_tokenizer, pool, cfg, torch.Generator().manual_seed(s)) for s in (1, 1, 2))
    assert torch.equal(a["input_ids"], b["input_ids"]) and not torch.equal(a["input_ids"], c["input_ids"])


def test_warmup_lowers_copy_loss(tiny_tokenizer):
    arch = TinyArchitecture(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=128,
    )
    model = build_tiny_model(tiny_tokenizer, arch)
    cfg = CopyWarmupConfig(
        steps=40, batch_size=8, max_tokens=12, learning_rate=3e-3, warmup_steps=5, log_every=10
    )
    result = copy_warmup(model, tiny_tokenizer, cfg)
    assert result.steps == 40 and result.stopped == "steps"
    assert result.losses[-1][1] < result.losses[0][1]


def test_warmup_stops_on_time_budget(tiny_tokenizer):
    model = build_tiny_model(
        tiny_tokenizer,
        TinyArchitecture(
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            intermediate_size=32,
        ),
    )
    result = copy_warmup(
        model, tiny_tokenizer, CopyWarmupConfig(steps=10_000, batch_size=2, time_budget_s=0.2)
    )
    assert result.stopped == "time" and result.steps < 10_000 and result.losses


@pytest.mark.parametrize("kwargs", [{"steps": 0}, {"min_tokens": 5, "max_tokens": 4}, {"learning_rate": 0}])
def test_warmup_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        CopyWarmupConfig(**kwargs)
