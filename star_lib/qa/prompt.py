"""Prompts for QA episodes: the travel agent's ReAct protocol with the ``Search`` tool and a short answer.

The turn format is exactly the travel agent's (:mod:`star_lib.agent.protocol`), so a travel-trained
checkpoint is evaluated as is; only the instructions change::

    <think>…</think><tool_call>{"name": "Search", "arguments": {"query": "…"}}</tool_call>
    <think>…</think><answer>short answer</answer>
"""

from __future__ import annotations

import json
import re
from typing import Any

from star_lib.agent.protocol import tool_schemas
from star_lib.types import Tools

QA_RULES = """You are a careful research assistant. Answer the user's question using the Search tool, \
which returns Wikipedia passages. Search as many times as you need, then give a short answer.

Format of every reply (exactly one of the two patterns, nothing outside the tags):
1. <think>your reasoning</think><tool_call>{"name": "Search", "arguments": {"query": "keywords"}}</tool_call>
2. <think>your reasoning</think><answer>short answer</answer>
Rules:
- Exactly one <think> and exactly one <tool_call> or <answer> per reply; one tool call per turn.
- Tool results come back inside <tool_response>…</tool_response>. If a search finds nothing useful, \
search again with other keywords.
- The answer is a few words: a name, a date, a number or a short phrase — no sentence, no explanation.
Example answer: <answer>Wilhelm Conrad Röntgen</answer>"""

QUESTION_PREFIX = "Question: "

CONTEXT_LIMIT_PROMPT = (
    "The conversation has reached the token limit. Do not search any more: reply now with "
    "<think>…</think><answer>…</answer> holding your short answer."
)
"""Sent once when a QA episode overflows its context budget."""


def qa_system_prompt(
    tools: Tools | list[dict[str, Any]] | None = None, *, include_tools: bool = False
) -> str:
    """Build the QA system message (local models get the tool list through the chat template's ``tools=``).

    Args:
        tools: the QA tools (or their schemas); only used when ``include_tools`` is set.
        include_tools: also list the schemas in the text, for endpoints that take no ``tools=``.

    """
    text = QA_RULES
    if include_tools and tools is not None:
        listing = "\n".join(json.dumps(s, ensure_ascii=False) for s in tool_schemas(tools))
        text += f"\n\nAvailable tools:\n<tools>\n{listing}\n</tools>"
    return text


def qa_user_prompt(question: str) -> str:
    """Build the user message of a QA episode.

    >>> qa_user_prompt("who wrote hamlet")
    'Question: who wrote hamlet?'
    """
    question = " ".join(question.split())
    if question and question[-1] not in "?.!":
        question += "?"
    return QUESTION_PREFIX + question


def question_from_prompt(text: str) -> str:
    """Extract the question from a :func:`qa_user_prompt` message (the whole text when it has no prefix)."""
    text = text.strip()
    return text[len(QUESTION_PREFIX) :].strip() if text.startswith(QUESTION_PREFIX) else text


_DOC_LINE = re.compile(r"^Doc \d+\(Title: (?P<title>.*?)\) (?P<text>.*)$")


def parse_search_observation(text: str) -> list[tuple[str, str]]:
    """``(title, text)`` of each passage in a ``Search`` observation (empty for an error text).

    >>> parse_search_observation("Doc 1(Title: Paris) Paris is the capital of France.")
    [('Paris', 'Paris is the capital of France.')]
    """
    out = []
    for line in text.splitlines():
        match = _DOC_LINE.match(line.strip())
        if match:
            out.append((match["title"], match["text"]))
    return out
