from __future__ import annotations

from pathlib import Path

import pytest

from star_lib.train.tokenizer import (
    EOS_TOKEN,
    PAD_TOKEN,
    PROTOCOL_TOKENS,
    SPECIAL_TOKENS,
    TokenizerConfig,
    align_chat_template,
    train_tokenizer,
    trl_qwen2_5_chat_template,
)

CORPUS = [
    "Flight F3573659 from Sarasota to Chicago on 2022-03-16 costs $302.",
    '<think>find flights</think><tool_call>{"name": "search_flights", "arguments": {}}</tool_call>',
    "Cozy loft in New York | $120/night | Entire home/apt",
] * 4


def test_tokenizer_special_and_protocol_tokens_are_single_tokens(tiny_tokenizer):
    for token in SPECIAL_TOKENS + PROTOCOL_TOKENS:
        ids = tiny_tokenizer(token, add_special_tokens=False)["input_ids"]
        assert tiny_tokenizer.convert_ids_to_tokens(ids) == [token]
    assert tiny_tokenizer.eos_token == EOS_TOKEN and tiny_tokenizer.pad_token == PAD_TOKEN
    assert tiny_tokenizer.bos_token is None
    assert tiny_tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == [0, 1, 2]


def test_tokenizer_protocol_tags_survive_skip_special_tokens(tiny_tokenizer):
    text = "<think>x</think><tool_call>{}</tool_call><|im_end|>"
    decoded = tiny_tokenizer.decode(tiny_tokenizer(text)["input_ids"], skip_special_tokens=True)
    assert decoded == "<think>x</think><tool_call>{}</tool_call>"


@pytest.mark.parametrize(
    "text", ["Zürich → 東京 on 2022-04-01 ✈ $1,234.50\n\ttabs", "", "   ", "unseen qqq xyzzy 987654"]
)
def test_tokenizer_roundtrips_any_text(tiny_tokenizer, text):
    assert tiny_tokenizer.decode(tiny_tokenizer(text)["input_ids"]) == text


def test_tokenizer_whole_words_are_one_token():
    tok = train_tokenizer(CORPUS, TokenizerConfig(vocab_size=400, whole_words=("New York", "F3573659")))
    pieces = tok.convert_ids_to_tokens(tok("in New York take F3573659")["input_ids"])
    assert "New York" in pieces and "F3573659" in pieces
    without = train_tokenizer(CORPUS, TokenizerConfig(vocab_size=400))
    assert "New York" not in without.convert_ids_to_tokens(without("in New York")["input_ids"])


def test_tokenizer_digits_single_splits_numbers():
    single = train_tokenizer(CORPUS, TokenizerConfig(vocab_size=400, digits="single"))
    grouped = train_tokenizer(CORPUS, TokenizerConfig(vocab_size=400, digits="group"))
    assert single.convert_ids_to_tokens(single("2022")["input_ids"]) == ["2", "0", "2", "2"]
    assert len(grouped("2022")["input_ids"]) < 4


def test_tokenizer_vocab_size_is_respected():
    tok = train_tokenizer(CORPUS * 10, TokenizerConfig(vocab_size=320, min_frequency=1))
    assert len(tok) <= 320 + len(PROTOCOL_TOKENS)


def test_tokenizer_chat_template_is_trl_qwen2_5_byte_for_byte(tiny_tokenizer):
    from trl.chat_template_utils import (
        get_training_chat_template,
        qwen2_5_chat_template,
        qwen2_5_training_chat_template,
    )

    assert tiny_tokenizer.chat_template == qwen2_5_chat_template == trl_qwen2_5_chat_template()
    assert get_training_chat_template(tiny_tokenizer) == qwen2_5_training_chat_template


def test_tokenizer_save_and_load_roundtrip(tiny_tokenizer, tmp_path: Path):
    from star_lib.train.tokenizer import load_tokenizer

    tiny_tokenizer.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)
    text = "<|im_start|>assistant\n<think>Sarasota</think><answer>[]</answer><|im_end|>"
    assert loaded(text)["input_ids"] == tiny_tokenizer(text)["input_ids"]
    assert loaded.chat_template == tiny_tokenizer.chat_template
    assert (loaded.eos_token, loaded.pad_token) == (EOS_TOKEN, PAD_TOKEN)


def test_tokenizer_is_deterministic():
    a = train_tokenizer(CORPUS, TokenizerConfig(vocab_size=400))
    b = train_tokenizer(CORPUS, TokenizerConfig(vocab_size=400))
    assert a.get_vocab() == b.get_vocab()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"vocab_size": 100},
        {"min_frequency": 0},
        {"digits": "pairs"},
        {"whole_words": ("<think>",)},
        {"whole_words": (" padded",)},
    ],
)
def test_tokenizer_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        TokenizerConfig(**kwargs)


def test_tokenizer_align_chat_template_fixes_stock_qwen_template(qwen_tokenizer_dir: Path):
    """The stock Qwen2.5 file lacks TRL's trailing newline; alignment makes it byte-identical."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen_tokenizer_dir)
    stock = (qwen_tokenizer_dir / "qwen2.5_instruct_chat_template.jinja").read_text(encoding="utf-8")
    tok.chat_template = stock
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>a</think>b"}]
    before = tok.apply_chat_template(messages, tokenize=False)
    assert stock != trl_qwen2_5_chat_template()
    assert align_chat_template(tok) is True
    assert tok.chat_template == trl_qwen2_5_chat_template()
    assert tok.apply_chat_template(messages, tokenize=False) == before


def test_tokenizer_align_chat_template_leaves_other_templates(qwen_tokenizer_dir: Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen_tokenizer_dir)  # ships a Qwen3 template
    original = tok.chat_template
    assert align_chat_template(tok) is False
    assert tok.chat_template == original


def test_tokenizer_tiny_model_folder_reloads_with_grouped_digits(tmp_path: Path):
    """A folder with the model's config.json next to the tokenizer must not come back as Qwen2Tokenizer."""
    from star_lib.train.models import TinyArchitecture, build_tiny, load_model_and_tokenizer
    from star_lib.train.tokenizer import load_tokenizer

    arch = TinyArchitecture(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    config = TokenizerConfig(vocab_size=400)
    built = build_tiny(CORPUS, tmp_path / "base", tokenizer_config=config, architecture=arch)
    trained = train_tokenizer(CORPUS, config)  # the same tokenizer (training is deterministic)
    _, loaded = load_model_and_tokenizer("tiny", path=built.path)
    text = "costs $2022 on 2022-03-16"
    assert loaded.tokenize(text) == trained.tokenize(text)
    assert len(loaded("2022")["input_ids"]) < 4  # digits="group" survives the reload
    assert load_tokenizer(built.path).tokenize(text) == trained.tokenize(text)
