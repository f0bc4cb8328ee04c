"""Fixtures for the training tests: a few conversations in the teacher's format, a tiny tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": "Flights between two cities on a date.",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string"},
                    "dest": {"type": "string"},
                    "date": {"type": "string"},
                },
                "required": ["origin", "dest", "date"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_accommodations",
            "description": "Places to stay in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
]
ROUTES = [("Sarasota", "Chicago", "F3573659"), ("Denver", "Austin", "F1002"), ("Boston", "Miami", "F2210")]


def conversation(origin: str, dest: str, flight: str, day: int) -> dict:
    """One episode in the teacher's format: raw-text assistant turns, tool results as role 'tool'."""
    date = f"2022-03-{day:02d}"
    call = {"name": "search_flights", "arguments": {"origin": origin, "dest": dest, "date": date}}
    plan = [
        {"days": 1, "current_city": f"from {origin} to {dest}", "transportation": f"Flight Number: {flight}"}
    ]
    return {
        "messages": [
            {"role": "system", "content": "You are a travel planner. Think, call tools, then answer."},
            {
                "role": "user",
                "content": f"Plan a 3-day trip from {origin} to {dest} starting {date}, budget $1,900.",
            },
            {
                "role": "assistant",
                "content": f"<think>Flights first.</think><tool_call>{json.dumps(call)}</tool_call>",
            },
            {"role": "tool", "content": f"{flight} | {origin} -> {dest} | 08:10-13:50 | $302"},
            {
                "role": "assistant",
                "content": "<think>A place in "
                + dest
                + '.</think><tool_call>{"name": "search_accommodations", '
                f'"arguments": {{"city": "{dest}"}}}}</tool_call>',
            },
            {"role": "tool", "content": f"Cozy loft in {dest} | $120/night | Entire home/apt"},
            {"role": "assistant", "content": f"<think>Done.</think><answer>{json.dumps(plan)}</answer>"},
        ],
        "tools": TOOLS,
    }


@pytest.fixture()
def native_bf16(monkeypatch):
    """Build a paper preset's config as on the GPU node it is meant for.

    The Qwen presets ask for bf16, which ``check_bf16`` refuses on a CPU without native bf16 (CI's may lack
    it). The tests that take this fixture read the config they build, not the hardware, so they run as if it
    had it.
    """
    from star_lib.train import models

    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: True)


@pytest.fixture(scope="session")
def sft_rows() -> list[dict]:
    """Six conversations (three routes, two dates each)."""
    return [conversation(o, d, f, day) for o, d, f in ROUTES for day in (16, 21)]


@pytest.fixture()
def sft_file(tmp_path: Path, sft_rows: list[dict]) -> Path:
    """The conversations as a JSONL file in a folder, as `star teacher` writes them."""
    folder = tmp_path / "sft"
    folder.mkdir()
    path = folder / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in sft_rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_tokenizer(sft_rows):
    """A tokenizer trained on the rendered conversations (small vocabulary)."""
    from star_lib.train.sft import normalise_rows, tokenizer_corpus
    from star_lib.train.tokenizer import TokenizerConfig, train_tokenizer

    rows = normalise_rows(sft_rows)
    return train_tokenizer(tokenizer_corpus(rows), TokenizerConfig(vocab_size=600))


@pytest.fixture(scope="module")
def world():
    """The small synthetic world the RL tests plan in (``rl_support.WORLD``)."""
    from star_lib.travel.world import World

    return World.load("synthetic:small:0")


@pytest.fixture(scope="module")
def rl_dir(tmp_path_factory, world) -> Path:
    """Four easy queries with reference plans and a micro model whose tokenizer knows the episodes' text."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from rl_support import build_rl_dir

    return build_rl_dir(tmp_path_factory.mktemp("rl"), world)
