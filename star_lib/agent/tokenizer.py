"""Loading a model folder's tokenizer exactly as it was saved (every policy backend loads through here).

The tokenizer *trainer* of the tiny preset lives in :mod:`star_lib.train.tokenizer`; loading is a runtime need
of every backend (``transformers``, ``fast``, ``vllm``), so it sits in the agent layer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def load_tokenizer(source: str | Path) -> PreTrainedTokenizerBase:
    """Load a tokenizer folder or hub id; a trained tiny tokenizer loads exactly as it was saved.

    ``AutoTokenizer`` maps a folder whose ``config.json`` says ``qwen2`` to ``Qwen2Tokenizer``, which rebuilds
    Qwen's pre-tokenizer and so silently splits numbers into single digits again (``digits="group"`` lost). A
    folder whose ``tokenizer_config.json`` names the generic ``tokenizers`` backend is therefore loaded with
    ``PreTrainedTokenizerFast`` (its ``tokenizer.json`` verbatim); anything else goes to ``AutoTokenizer``.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config = Path(source) / "tokenizer_config.json"
    if config.is_file():
        saved_class = json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class")
        if saved_class in ("TokenizersBackend", "PreTrainedTokenizerFast"):
            return PreTrainedTokenizerFast.from_pretrained(str(source))
    return AutoTokenizer.from_pretrained(str(source))
