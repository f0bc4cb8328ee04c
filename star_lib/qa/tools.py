"""The QA tool set: one ``Search`` tool over a local passage corpus (the Search-R1 protocol).

:class:`SearchTools` implements the :class:`star_lib.types.Tools` protocol, so the agent's episode
runner drives it exactly like the travel tool registry. A call is::

    <tool_call>{"name": "Search", "arguments": {"query": "first nobel prize in physics"}}</tool_call>

and the observation lists the top-k passages in Search-R1's format::

    Doc 1(Title: Wilhelm Röntgen) Wilhelm Röntgen Wilhelm Conrad Röntgen (27 March 1845 – …
    Doc 2(Title: …) …

Bad calls never raise: an unknown tool, missing/extra/non-string arguments, an empty or huge query
and a query that matches nothing all come back as ``Observation(ok=False, error=…)`` with a text
that tells the model what to change.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from star_lib.io import loads_strict
from star_lib.qa.retriever import Passage, Retriever
from star_lib.types import Observation

SEARCH_TOOL = "Search"
"""The tool's name, as the model writes it."""
TOOL_NAMES: tuple[str, ...] = (SEARCH_TOOL,)

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SEARCH_TOOL,
        "description": (
            "Search a Wikipedia passage collection. Returns the most relevant passages, "
            "each with its article title. Use short keyword queries."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Keywords or a question, e.g. 'first Nobel Prize physics'.",
                }
            },
            "required": ["query"],
        },
    },
}


def format_passages(passages: list[Passage], max_chars: int | None = None) -> str:
    """Search-R1's observation text: ``Doc i(Title: t) text`` lines, each cut to ``max_chars``.

    >>> format_passages([Passage("1", "Paris", "Paris is the capital of France.")])
    'Doc 1(Title: Paris) Paris is the capital of France.'
    """
    lines = []
    for rank, passage in enumerate(passages, start=1):
        text = " ".join(passage.text.split())
        if max_chars is not None and len(text) > max_chars:
            text = text[: max_chars - 1].rstrip() + "…"
        lines.append(f"Doc {rank}(Title: {passage.title}) {text}")
    return "\n".join(lines)


class SearchTools:
    """``Tools`` with a single ``Search{query}`` tool returning the top-k passages as the observation.

    Attributes:
        retriever: the passage retriever (BM25 or dense).
        top_k: passages per call (Search-R1 uses 3).
        max_query_chars: longer queries are refused with a clear observation.
        max_passage_chars: each passage's text is cut to this many characters (None: whole passage).
        counters: calls by outcome (``ok``, ``bad_arguments``, ``unknown_tool``, ``no_result``).

    """

    def __init__(
        self,
        retriever: Retriever,
        *,
        top_k: int = 3,
        max_query_chars: int = 500,
        max_passage_chars: int | None = None,
    ) -> None:
        """Wrap ``retriever``.

        Raises:
            ValueError: for a non-positive ``top_k`` or ``max_query_chars``.

        """
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        if max_query_chars < 1:
            raise ValueError(f"max_query_chars must be >= 1, got {max_query_chars}")
        self.retriever = retriever
        self.top_k = top_k
        self.max_query_chars = max_query_chars
        self.max_passage_chars = max_passage_chars
        self.counters: Counter[str] = Counter()

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style function schema of the ``Search`` tool."""
        return [SEARCH_SCHEMA]

    def call(self, name: str, arguments: Any) -> Observation:
        """Run one tool call; never raises on bad input."""
        obs = self._call(name, arguments)
        self.counters[obs.error or "ok"] += 1
        return obs

    def _call(self, name: Any, arguments: Any) -> Observation:
        if name != SEARCH_TOOL:
            return _error("unknown_tool", f"Unknown tool {name!r}. The only tool is Search{{query}}.")
        query = _query_argument(arguments)
        if isinstance(query, Observation):
            return query
        if len(query) > self.max_query_chars:
            return _error(
                "bad_arguments",
                f"Search query is {len(query)} characters long; keep it under {self.max_query_chars} "
                "(a few keywords work best).",
            )
        passages = self.retriever.search(query, self.top_k)
        if not passages:
            return _error("no_result", f"No passages match {query!r}. Try other keywords.")
        return Observation(format_passages(passages, self.max_passage_chars))

    def search(self, query: str) -> list[Passage]:
        """Passages for ``query`` (what a ``Search`` call would show), for programmatic agents."""
        return self.retriever.search(query, self.top_k)


def _query_argument(arguments: Any) -> str | Observation:
    """Return the stripped ``query`` string, or an error observation saying what is wrong."""
    if isinstance(arguments, str):
        try:
            arguments = loads_strict(arguments)  # deep JSON and duplicate keys are errors, never a raise
        except ValueError as exc:
            return _error(
                "bad_arguments", f'Search arguments must be a JSON object like {{"query": "…"}} ({exc}).'
            )
    if not isinstance(arguments, dict):
        return _error(
            "bad_arguments",
            f'Search arguments must be an object {{"query": "…"}}, got {type(arguments).__name__}.',
        )
    extra = sorted(set(arguments) - {"query"})
    if extra:
        return _error("bad_arguments", f"Search takes only 'query'; remove {extra}.")
    if "query" not in arguments:
        return _error("bad_arguments", "Search needs a 'query' argument.")
    query = arguments["query"]
    if not isinstance(query, str):
        return _error("bad_arguments", f"Search 'query' must be a string, got {type(query).__name__}.")
    if not query.strip():
        return _error("bad_arguments", "Search 'query' is empty; write a few keywords.")
    return query.strip()


def _error(kind: str, text: str) -> Observation:
    return Observation(text=text, ok=False, error=kind)
