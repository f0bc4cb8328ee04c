"""Fixtures of the agent tests: the real Qwen tokenizer, a tiny random Qwen2 model, fake tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from star_lib.types import DayPlan, LocalConstraint, Observation, QueryRecord


@pytest.fixture(scope="session")
def qwen_tokenizer(qwen_tokenizer_dir: Path) -> Any:
    """The real Qwen2.5 tokenizer with the stock Qwen2.5 instruct chat template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qwen_tokenizer_dir)
    tokenizer.chat_template = (qwen_tokenizer_dir / "qwen2.5_instruct_chat_template.jinja").read_text()
    return tokenizer


def tiny_qwen2(tokenizer: Any, **overrides: Any) -> Any:
    """A randomly initialised (seed 0) 2-layer Qwen2 model over ``tokenizer``'s vocabulary, in eval mode."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    values: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
        "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
        "pad_token_id": tokenizer.pad_token_id,
    }
    return Qwen2ForCausalLM(Qwen2Config(**{**values, **overrides})).eval()


@pytest.fixture(scope="session")
def tiny_model(qwen_tokenizer: Any) -> Any:
    """A randomly initialised 2-layer Qwen2 model over the real vocabulary (built from a config)."""
    return tiny_qwen2(qwen_tokenizer)


class FakeTools:
    """Two tools whose answers a test controls; records every call."""

    def __init__(self, answers: dict[str, str] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[tuple[str, Any]] = []

    def schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"{name} test tool",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string", "description": "a city"}},
                        "required": ["city"],
                    },
                },
            }
            for name in ("SearchRestaurant", "SearchAttraction")
        ]

    def call(self, name: str, arguments: Any) -> Observation:
        self.calls.append((name, arguments))
        if name not in ("SearchRestaurant", "SearchAttraction"):
            return Observation(text=f"Error: unknown tool {name!r}.", ok=False, error="unknown_tool")
        return Observation(text=self.answers.get(name, f"{name} results for {json.dumps(arguments)}"))


@pytest.fixture
def fake_tools() -> FakeTools:
    return FakeTools()


@pytest.fixture
def query() -> QueryRecord:
    """A 3-day query with a (not necessarily valid) reference plan."""
    return QueryRecord(
        org="Austin",
        dest="Denver",
        days=3,
        visiting_city_number=1,
        date=("2022-03-01", "2022-03-02", "2022-03-03"),
        people_number=1,
        local_constraint=LocalConstraint(),
        budget=2000,
        query="Plan a 3-day trip from Austin to Denver.",
        idx=7,
        reference_plan=(
            DayPlan(
                days=1,
                current_city="from Austin to Denver",
                transportation="Flight Number: F1, from Austin to Denver, Departure Time: 08:00, Arrival Time: 10:00",  # noqa: E501
                dinner="Eat, Denver",
                accommodation="Inn, Denver",
            ),
            DayPlan(
                days=2,
                current_city="Denver",
                breakfast="Cafe, Denver",
                attraction="Park, Denver;",
                lunch="Deli, Denver",
                dinner="Grill, Denver",
                accommodation="Inn, Denver",
            ),
            DayPlan(
                days=3,
                current_city="from Denver to Austin",
                transportation="Flight Number: F2, from Denver to Austin, Departure Time: 18:00, Arrival Time: 20:00",  # noqa: E501
            ),
        ),
    )


class ScriptedPolicy:
    """Replays fixed turns per episode; may attach token ids/logprobs; records each batch size."""

    def __init__(
        self, turns: list[str] | dict[int, list[str]], tokenizer: Any = None, with_ids: bool = False
    ):
        self.turns = turns
        self.tokenizer = tokenizer
        self.with_ids = with_ids
        self.batch_sizes: list[int] = []
        self.seen: dict[int, int] = {}

    def generate(self, conversations, *, max_new_tokens):
        from star_lib.agent.policies import Generation

        self.batch_sizes.append(len(conversations))
        out = []
        for conv in conversations:
            script = self.turns[conv.key] if isinstance(self.turns, dict) else self.turns
            n = self.seen.get(conv.key, 0)
            self.seen[conv.key] = n + 1
            text = script[min(n, len(script) - 1)]
            if self.with_ids:
                ids = self.tokenizer.encode(text, add_special_tokens=False)
                ids.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
                out.append(Generation(text=text, token_ids=ids, logprobs=[-0.5] * len(ids)))
            else:
                out.append(Generation(text=text))
        return out
