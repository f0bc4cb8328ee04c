from __future__ import annotations

import json
from pathlib import Path

import pytest

from star_lib.train.models import TinyArchitecture, build_tiny_model
from star_lib.train.sft import (
    SFTRunConfig,
    build_sft_config,
    check_assistant_masking,
    load_sft_dataset,
    make_sft_trainer,
    normalise_rows,
    read_sft_rows,
    run_sft,
)
from star_lib.train.tokenizer import TokenizerConfig, trl_qwen2_5_chat_template

MICRO = TinyArchitecture(
    hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, intermediate_size=32
)


def segments(input_ids: list[int], labels: list[int]) -> list[tuple[bool, list[int]]]:
    """Consecutive runs of trained (label != -100) and untrained tokens."""
    runs: list[tuple[bool, list[int]]] = []
    for token, label in zip(input_ids, labels, strict=True):
        trained = label != -100
        if runs and runs[-1][0] == trained:
            runs[-1][1].append(token)
        else:
            runs.append((trained, [token]))
    return runs


def assert_mask_is_assistant_text(tokenizer, rows, tmp_path: Path) -> None:
    """Decode what SFTTrainer trains on and what it masks; compare with the assistant contents."""
    model = build_tiny_model(tokenizer, MICRO)
    trainer = make_sft_trainer(
        SFTRunConfig(data="unused", output_dir=str(tmp_path), progress=False), model, tokenizer, rows
    )
    for i, row in enumerate(rows):
        example = trainer.train_dataset[i]
        runs = segments(example["input_ids"], example["labels"])
        trained = [tokenizer.decode(ids) for is_trained, ids in runs if is_trained]
        expected = ["\n" + m["content"] + "<|im_end|>\n" for m in row["messages"] if m["role"] == "assistant"]
        assert trained == expected
        rendered = tokenizer.apply_chat_template(
            row["messages"], tools=json.loads(row["tools"]), tokenize=False
        )
        assert "".join(tokenizer.decode(ids) for _, ids in runs) == rendered
        untrained = "".join(tokenizer.decode(ids) for is_trained, ids in runs if not is_trained)
        for message in row["messages"]:
            if message["role"] != "assistant":
                assert message["content"] in untrained  # prompts and tool results are never trained on
        assert "<tool_response>" not in "".join(trained)


def test_sft_loss_mask_covers_exactly_assistant_tokens_tiny_tokenizer(tiny_tokenizer, sft_rows, tmp_path):
    assert_mask_is_assistant_text(tiny_tokenizer, normalise_rows(sft_rows), tmp_path)


@pytest.mark.parametrize("template", ["trl_qwen2_5", "stock_file_aligned"])
def test_sft_loss_mask_covers_exactly_assistant_tokens_qwen_tokenizer(
    qwen_tokenizer_dir, sft_rows, tmp_path, template
):
    from transformers import AutoTokenizer

    from star_lib.train.tokenizer import align_chat_template

    tok = AutoTokenizer.from_pretrained(qwen_tokenizer_dir)
    if template == "trl_qwen2_5":
        tok.chat_template = trl_qwen2_5_chat_template()
    else:
        tok.chat_template = (qwen_tokenizer_dir / "qwen2.5_instruct_chat_template.jinja").read_text(
            encoding="utf-8"
        )
        assert align_chat_template(tok)
    assert_mask_is_assistant_text(tok, normalise_rows(sft_rows[:2]), tmp_path)


def test_sft_stock_qwen_template_without_alignment_is_refused(qwen_tokenizer_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen_tokenizer_dir)
    tok.chat_template = (qwen_tokenizer_dir / "qwen2.5_instruct_chat_template.jinja").read_text(
        encoding="utf-8"
    )
    with pytest.raises(ValueError, match="trl_qwen2_5_chat_template"):
        check_assistant_masking(tok)


def test_sft_three_steps_lower_the_loss(sft_file: Path, tmp_path: Path):
    import polars as pl
    import torch

    from star_lib.train.models import load_model_and_tokenizer

    cfg = SFTRunConfig(
        data=str(sft_file.parent),
        output_dir=str(tmp_path / "run"),
        max_steps=3,
        per_device_train_batch_size=6,  # the whole set each step: the losses are comparable
        learning_rate=3e-3,
        warmup_ratio=0.0,
        logging_steps=1,
        save_steps=3,
        tokenizer=TokenizerConfig(vocab_size=600),
        progress=False,
    )
    result = run_sft(cfg)
    assert result.steps == 3
    assert result.last_loss < result.first_loss - 0.05
    frame = pl.read_parquet(result.metrics_path)
    sft = frame.filter(pl.col("stage") == "sft").drop_nulls("train/loss")
    assert sft["step"].to_list() == [1, 2, 3] and sft["train/loss"][0] == pytest.approx(result.first_loss)
    assert result.train_tokens > 0 and result.tokens_per_s > 0
    assert (tmp_path / "run" / "config.yaml").is_file()
    assert (tmp_path / "run" / "checkpoints" / "checkpoint-3").is_dir()
    base, _ = load_model_and_tokenizer("tiny", path=tmp_path / "run" / "base")
    trained, tok = load_model_and_tokenizer("tiny", path=result.model_dir)
    changed = [not torch.equal(p, q) for p, q in zip(base.parameters(), trained.parameters(), strict=True)]
    assert all(changed)
    assert tok.chat_template == trl_qwen2_5_chat_template()


def test_sft_copy_warmup_runs_before_sft(sft_file: Path, tmp_path: Path):
    import polars as pl

    from star_lib.train.warmup import CopyWarmupConfig

    cfg = SFTRunConfig(
        data=str(sft_file),
        output_dir=str(tmp_path / "run"),
        max_steps=1,
        logging_steps=1,
        tokenizer=TokenizerConfig(vocab_size=400),
        copy_warmup=CopyWarmupConfig(steps=4, batch_size=2, log_every=2, max_tokens=8),
        progress=False,
    )
    result = run_sft(cfg)
    assert result.warmup is not None and result.warmup.steps == 4
    stages = pl.read_parquet(result.metrics_path)["stage"].to_list()
    assert stages[:2] == ["warmup", "warmup"] and "sft" in stages


def test_sft_build_config_takes_preset_then_overrides(native_bf16):
    cfg = SFTRunConfig(data="d", output_dir="runs/x", preset="qwen2.5-1.5b")
    args = build_sft_config(cfg)
    assert args.learning_rate == 5e-6 and args.lr_scheduler_type == "cosine" and args.num_train_epochs == 4
    assert args.warmup_steps == 0.1 and args.assistant_only_loss and args.pad_to_multiple_of == 64
    assert args.output_dir == str(Path("runs/x") / "checkpoints")
    cfg = SFTRunConfig(
        data="d",
        output_dir="o",
        preset="qwen2.5-7b",
        learning_rate=1e-5,
        num_train_epochs=2,
        trl_overrides={"weight_decay": 0.05},
    )
    args = build_sft_config(cfg)
    assert args.learning_rate == 1e-5 and args.num_train_epochs == 2 and args.weight_decay == 0.05


@pytest.mark.parametrize(
    "kwargs",
    [
        {"preset": "gpt-5"},
        {"warmup_ratio": 1.0},
        {"max_steps": 0},
        {"learning_rate": -1.0},
        {"pad_to_multiple_of": 0},
        {"trl_overrides": {"not_a_field": 1}},
        {"trl_overrides": {"assistant_only_loss": False}},
    ],
)
def test_sft_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        SFTRunConfig(data="d", output_dir="o", **kwargs)


def test_sft_read_rows_keeps_tools_as_json_and_reads_folders(sft_file: Path, sft_rows):
    rows = read_sft_rows(sft_file.parent)
    assert len(rows) == len(sft_rows)
    assert json.loads(rows[0]["tools"]) == sft_rows[0]["tools"]
    assert load_sft_dataset(sft_file).column_names == ["messages", "tools"]


def test_sft_read_rows_accepts_tools_as_the_json_string_star_teacher_writes(tmp_path: Path, sft_rows):
    path = tmp_path / "teacher.jsonl"
    rows = [{**row, "tools": json.dumps(row["tools"])} for row in sft_rows]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [json.loads(r["tools"]) for r in read_sft_rows(path)] == [r["tools"] for r in sft_rows]


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ({"messages": []}, "non-empty 'messages'"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
        ({"messages": [{"role": "user", "content": "x"}]}, "no assistant"),
        ({"messages": [{"role": "assistant", "content": None}]}, "string 'content'"),
        ({"messages": [{"role": "assistant", "content": "", "tool_calls": [{}]}]}, "raw text"),
        ({"messages": [{"role": "assistant", "content": "x"}], "tools": {"a": 1}}, "list of function"),
        ({"messages": [{"role": "assistant", "content": "x"}], "tools": "[{oops"}, "not JSON"),
    ],
)
def test_sft_read_rows_errors_name_file_and_line(tmp_path: Path, row, match):
    path = tmp_path / "bad.jsonl"
    good = {"messages": [{"role": "assistant", "content": "ok"}]}
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=match) as info:
        read_sft_rows(path)
    assert f"{path}:2" in str(info.value)


def test_sft_missing_data_says_what_to_do(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="star teacher"):
        read_sft_rows(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="jsonl"):
        read_sft_rows(tmp_path)


def test_sft_resume_reuses_the_base_tokenizer(sft_file: Path, tmp_path: Path):
    from star_lib.train.sft import prepare_model, read_sft_rows

    cfg = SFTRunConfig(
        data=str(sft_file), output_dir=str(tmp_path / "run"), tokenizer=TokenizerConfig(vocab_size=400)
    )
    rows = read_sft_rows(sft_file)
    _, first = prepare_model(cfg, rows)
    marker = tmp_path / "run" / "base" / "tokenizer.json"
    stamp = marker.stat().st_mtime_ns
    _, second = prepare_model(cfg, rows)
    assert marker.stat().st_mtime_ns == stamp and second.get_vocab() == first.get_vocab()


def test_sft_resumed_run_equals_an_uninterrupted_one(sft_file: Path, tmp_path: Path):
    """A run killed after logging step 4 with checkpoint 2 as its last complete one resumes from step 2."""
    import shutil

    import polars as pl
    import torch

    from star_lib.train.models import load_model_and_tokenizer
    from star_lib.train.warmup import CopyWarmupConfig

    def config(out: Path, resume: Path | None = None) -> SFTRunConfig:
        return SFTRunConfig(
            data=str(sft_file),
            output_dir=str(out),
            max_steps=4,
            per_device_train_batch_size=2,
            logging_steps=1,
            save_steps=1,
            save_total_limit=None,
            tokenizer=TokenizerConfig(vocab_size=400),
            copy_warmup=CopyWarmupConfig(steps=6, batch_size=2, log_every=2, max_tokens=8),
            resume_from_checkpoint=None if resume is None else str(resume),
            progress=False,
        )

    whole = run_sft(config(tmp_path / "whole"))
    killed = tmp_path / "killed"
    shutil.copytree(tmp_path / "whole", killed)
    shutil.rmtree(killed / "model")
    shutil.rmtree(killed / "checkpoints" / "checkpoint-4")
    (killed / "checkpoints" / "checkpoint-3" / "trainer_state.json").unlink()  # killed while saving step 3
    resumed = run_sft(config(killed, resume=killed))

    assert resumed.steps == 4 and resumed.warmup is None  # the warm-up is not repeated

    def rows(path: Path) -> list[dict]:
        """Every row without clock readings (the end-of-training loss included)."""
        frame = pl.read_parquet(path)
        clock = ("time", "train/step_time", "summary/runtime")
        return frame.select(
            c
            for c in frame.columns
            if c not in clock and not c.startswith("time/") and not c.endswith("per_second")
        ).to_dicts()

    assert rows(resumed.metrics_path) == rows(whole.metrics_path)
    stages = pl.read_parquet(resumed.metrics_path)["stage"].to_list()
    assert stages.count("warmup") == 3  # the warm-up's rows are kept (and not written twice)
    a, _ = load_model_and_tokenizer("tiny", path=whole.model_dir)
    b, _ = load_model_and_tokenizer("tiny", path=resumed.model_dir)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_sft_resume_without_a_complete_checkpoint_says_what_to_do(sft_file: Path, tmp_path: Path):
    (tmp_path / "run" / "checkpoints" / "checkpoint-1").mkdir(parents=True)  # killed during its first save
    run = tmp_path / "run"
    cfg = SFTRunConfig(data=str(sft_file), output_dir=str(run), resume_from_checkpoint=str(run))
    with pytest.raises(FileNotFoundError, match="no checkpoint under"):
        run_sft(cfg)
