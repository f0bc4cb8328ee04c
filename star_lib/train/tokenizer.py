"""A small BPE tokenizer for the ``tiny`` preset, speaking Qwen2.5's chat protocol.

The tiny model is trained from scratch, so it gets a vocabulary trained on the synthetic corpus (world names,
tool names, protocol tags, digits, dates) instead of Qwen's 151k tokens. Everything else copies Qwen2.5:
the byte-level pre-tokenizer (any text encodes, nothing is unknown), the special tokens ``<|endoftext|>``,
``<|im_start|>``, ``<|im_end|>``, the protocol tags as single non-special tokens, and the chat template —
the exact string TRL ships as ``qwen2_5``, so that ``SFTTrainer(assistant_only_loss=True)`` recognises it and
swaps in its training variant with ``{% generation %}`` markers (see ``../shared/STACK.md``).

Heavy imports (``transformers``) happen inside the functions.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from star_lib.agent.tokenizer import load_tokenizer  # noqa: F401  (loading lives in the agent layer)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

SPECIAL_TOKENS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Qwen's special tokens, in Qwen's order (ids 0, 1, 2 in the tiny vocabulary)."""
PROTOCOL_TOKENS: tuple[str, ...] = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
)
"""Protocol tags, each one non-special token (as in Qwen2.5: they survive ``skip_special_tokens``)."""
EOS_TOKEN = "<|im_end|>"
"""End of an assistant turn: generation stops here (Qwen2.5-Instruct's ``eos_token``)."""
PAD_TOKEN = "<|endoftext|>"
"""Padding token (Qwen2.5's ``pad_token``)."""

# Qwen2.5's pre-tokenizer regex (tokenizer.json); ``{digits}`` is ``\p{N}`` (one digit a piece) or ``\p{N}+``.
_QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{{L}}\p{{N}}]?\p{{L}}+|{digits}"
    r"| ?[^\s\p{{L}}\p{{N}}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class TokenizerConfig:
    """How to train the tiny BPE tokenizer."""

    vocab_size: int = 4096
    """Target size of the learned BPE vocabulary (special, protocol and whole-word tokens come on top)."""
    min_frequency: int = 2
    """A pair must occur this often in the corpus to be merged."""
    digits: Literal["single", "group"] = "group"
    """``single`` splits numbers into digits as Qwen does; ``group`` lets BPE learn whole numbers (``2022``,
    prices), which shortens trajectories — the lever the tiny-model probe found decisive (STACK.md)."""
    whole_words: tuple[str, ...] = ()
    """Strings that must each be one token (city and venue names, flight numbers, tool names): copying one
    token is far easier for a tiny model than copying a spelling (STACK.md, second probe)."""
    model_max_length: int = 8192
    """The tokenizer's ``model_max_length``."""

    def __post_init__(self) -> None:
        if self.vocab_size < 300:
            raise ValueError(
                f"vocab_size={self.vocab_size} is below the 256 byte symbols plus merges; use >= 300"
            )
        if self.min_frequency < 1:
            raise ValueError(f"min_frequency must be >= 1, got {self.min_frequency}")
        if self.digits not in ("single", "group"):
            raise ValueError(f"digits must be 'single' or 'group', got {self.digits!r}")
        clash = set(self.whole_words) & set(SPECIAL_TOKENS + PROTOCOL_TOKENS)
        if clash:
            raise ValueError(f"whole_words must not repeat special or protocol tokens: {sorted(clash)}")
        if any(not w or w != w.strip() for w in self.whole_words):
            raise ValueError("whole_words entries must be non-empty and carry no leading/trailing whitespace")


def trl_qwen2_5_chat_template() -> str:
    """TRL's ``qwen2_5`` chat template, byte for byte, read from the installed ``trl`` without importing it.

    Raises:
        FileNotFoundError: when TRL is not installed or ships no such template.

    """
    spec = importlib.util.find_spec("trl")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / "chat_templates" / "qwen2_5.jinja"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(
        "trl/chat_templates/qwen2_5.jinja not found; install trl==1.16.0 (pyproject.toml)"
    )


def align_chat_template(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Make a Qwen2.5 template byte-identical to TRL's, so ``assistant_only_loss`` uses its training variant.

    TRL recognises templates by exact string equality. The stock Qwen2.5-Instruct template (as stored in
    ``tokenizer_config.json`` or a ``.jinja`` file) differs from TRL's copy only by the trailing newline,
    which Jinja drops when rendering, so replacing it changes no rendered byte.

    Returns:
        True when the tokenizer now carries TRL's exact ``qwen2_5`` template.

    """
    reference = trl_qwen2_5_chat_template()
    current = tokenizer.chat_template
    if isinstance(current, str) and current.rstrip() == reference.rstrip():
        tokenizer.chat_template = reference
        return True
    return False


def _split_pattern(digits: str) -> str:
    return _QWEN_SPLIT.format(digits=r"\p{N}" if digits == "single" else r"\p{N}+")


def _trie_pattern(tokens: Iterable[str]) -> str:
    """Return a regex matching any of ``tokens``, longest first, as a prefix trie.

    A flat alternation of thousands of names (a real database's venues) is tried name by name at every
    position of the corpus; the trie tests one character per step and matches the same longest token.
    """
    trie: dict[str, dict] = {}
    for token in set(tokens):
        node = trie
        for char in token:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


def _without(texts: Iterable[str], tokens: Iterable[str]) -> Iterator[str]:
    """Yield the corpus with added tokens cut out, so BPE spends no merges on spelling them."""
    tokens = [t for t in tokens if t]
    pattern = re.compile(_trie_pattern(tokens)) if tokens else None
    for text in texts:
        yield pattern.sub("\n", text) if pattern else text


def train_tokenizer(texts: Iterable[str], config: TokenizerConfig | None = None) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it with Qwen2.5's tokens and chat template.

    Args:
        texts: the training corpus (rendered conversations, tool schemas, world names…).
        config: vocabulary options; defaults to :class:`TokenizerConfig()`.

    Returns:
        A ``transformers`` fast tokenizer with ``eos_token="<|im_end|>"``, ``pad_token="<|endoftext|>"``,
        no BOS, and TRL's ``qwen2_5`` chat template. Save it with ``save_pretrained``.

    Example:
        >>> tok = train_tokenizer(["Paris to Rome on 2022-03-16", "<tool_call>search</tool_call>"] * 3)
        >>> tok.convert_ids_to_tokens(tok("<tool_call>")["input_ids"])
        ['<tool_call>']

    """
    from tokenizers import AddedToken as RawAddedToken
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    config = config or TokenizerConfig()
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_split_pattern(config.digits)), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        min_frequency=config.min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    added = PROTOCOL_TOKENS + tuple(config.whole_words)
    tok.train_from_iterator(_without(texts, SPECIAL_TOKENS + added), trainer=trainer)
    tok.add_tokens([RawAddedToken(t, special=False, normalized=False) for t in added])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=None,
        unk_token=None,
        model_max_length=config.model_max_length,
        clean_up_tokenization_spaces=False,
        chat_template=trl_qwen2_5_chat_template(),
    )
