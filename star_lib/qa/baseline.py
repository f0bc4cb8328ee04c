"""A programmatic QA baseline: search the question once, answer with the best-matching span.

It plays the ReAct protocol exactly like a model (same turn texts, same episode loop), reading only
the conversation — the question in the user turn and the passages in the ``<tool_response>`` — so it
measures the pipeline (retriever, tool, parser, metrics) without any model::

    <think>I will search for: …</think><tool_call>{"name": "Search", "arguments": {"query": "…"}}</tool_call>
    <think>Best sentence (Doc 1): …</think><answer>Wilhelm Röntgen</answer>

Span choice: sentences of the retrieved passages are scored by the question terms they contain
(rarer terms count more, higher-ranked passages break ties); candidate spans of the best sentences are
capitalised phrases, dates and numbers that are not part of the question; the question word picks the
kind (*when* → a date or year, *how many* → a number, *who/where/which/what* → a name), and the span
nearest to the question terms wins. No passage → the answer ``unknown``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from star_lib.agent.policies import Conversation, Generation
from star_lib.agent.protocol import format_answer, format_tool_call
from star_lib.qa.prompt import parse_search_observation, question_from_prompt
from star_lib.qa.retriever import Analyzer
from star_lib.qa.tools import SEARCH_TOOL

NO_ANSWER = "unknown"

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_TOKEN = re.compile(r"\w+(?:[.'’-]\w+)*|[^\w\s]", re.UNICODE)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_DATE = re.compile(
    rf"\b(?:\d{{1,2}} )?(?:{_MONTHS})(?: \d{{1,2}})?,? \d{{3,4}}\b|\b1\d{{3}}\b|\b20\d{{2}}\b", re.I
)
_NUMBER = re.compile(r"\b\d[\d,.]*\b(?: (?:million|billion|thousand|hundred))?", re.I)
_MONTH_SET = frozenset(_MONTHS.split("|"))
_CONNECTORS = frozenset({"of", "the", "de", "von", "van", "da", "del", "la", "le", "and", "&"})


@dataclass(frozen=True)
class Candidate:
    """A candidate answer span."""

    text: str
    kind: str
    """``date`` | ``number`` | ``name``."""
    start: int
    """Token position in its sentence."""


def question_kind(question: str) -> str:
    """Guess the answer kind a question asks for: ``date``, ``number`` or ``name``.

    >>> question_kind("When was the Eiffel Tower built?"), question_kind("How many moons has Mars?")
    ('date', 'number')
    """
    q = question.lower()
    if re.search(r"\b(when|what year|which year|what date|in what year)\b", q):
        return "date"
    if re.search(r"\bhow (many|much|long|old|tall|high|far)\b", q):
        return "number"
    return "name"


def _candidates(sentence: str) -> list[Candidate]:
    """Dates, numbers and capitalised phrases of a sentence, with their token positions."""
    tokens = _TOKEN.findall(sentence)
    out: list[Candidate] = []
    for pattern, kind in ((_DATE, "date"), (_NUMBER, "number")):
        for match in pattern.finditer(sentence):
            start = len(_TOKEN.findall(sentence[: match.start()]))
            out.append(Candidate(match.group(0).strip(" ,."), kind, start))
    i = 0
    while i < len(tokens):
        if tokens[i][:1].isupper() and tokens[i][:1].isalpha():
            j = i + 1
            while j < len(tokens) and (
                tokens[j][:1].isupper()
                or (tokens[j].lower() in _CONNECTORS and j + 1 < len(tokens) and tokens[j + 1][:1].isupper())
            ):
                j += 1
            if tokens[i].lower() not in _MONTH_SET:
                out.append(Candidate(" ".join(tokens[i:j]), "name", i))
            i = j
        else:
            i += 1
    return out


class SpanAnswerer:
    """Picks the best-matching answer span from retrieved passages."""

    def __init__(self, analyzer: Analyzer | None = None) -> None:
        """Use ``analyzer`` (default: the BM25 analyzer) to match question and passage terms."""
        self.analyzer = analyzer or Analyzer()

    def answer(self, question: str, passages: Sequence[tuple[str, str]]) -> tuple[str, str]:
        """``(answer, evidence sentence)``; ``(NO_ANSWER, "")`` when nothing fits."""
        q_terms = set(self.analyzer.terms(question))
        if not passages:
            return NO_ANSWER, ""
        sentences = [
            (rank, s) for rank, (_, text) in enumerate(passages) for s in _SENTENCE.split(text) if s.strip()
        ]
        df: dict[str, int] = {}
        sentence_terms = [set(self.analyzer.terms(s)) for _, s in sentences]
        for terms in sentence_terms:
            for t in terms & q_terms:
                df[t] = df.get(t, 0) + 1
        n = len(sentences)

        def sentence_score(i: int) -> float:
            overlap = sentence_terms[i] & q_terms
            return sum(math.log(1 + n / df[t]) for t in overlap) - 0.05 * sentences[i][0]

        ranked = sorted(range(n), key=lambda i: (-sentence_score(i), i))
        kind = question_kind(question)
        for i in ranked[:5]:
            span = self._best_span(sentences[i][1], q_terms, kind)
            if span:
                return span, sentences[i][1]
        return passages[0][0] or NO_ANSWER, sentences[ranked[0]][1] if ranked else ""

    def _best_span(self, sentence: str, q_terms: set[str], kind: str) -> str | None:
        tokens = _TOKEN.findall(sentence)
        anchors = [p for p, tok in enumerate(tokens) if q_terms & set(self.analyzer.terms(tok))]
        best, best_score = None, -math.inf
        for cand in _candidates(sentence):
            terms = self.analyzer.terms(cand.text)
            if not terms and cand.kind == "name":
                continue
            overlap = sum(t in q_terms for t in terms) / max(1, len(terms))
            if overlap == 1:
                continue  # the question already says it
            distance = min((abs(cand.start - a) for a in anchors), default=len(tokens))
            score = (2.0 if cand.kind == kind else 0.0) - 0.1 * distance + 0.01 * len(terms) - 1.5 * overlap
            if cand.kind == "name" and cand.start == 0 and " " not in cand.text:
                score -= 1.0  # a capitalised first word is usually just the start of the sentence
            if score > best_score:
                best, best_score = cand.text, score
        return best


def _plain(text: str) -> str:
    """One line without angle brackets, so passage text can never break the turn's tags."""
    return " ".join(text.replace("<", " ").replace(">", " ").split())


class BaselineAgent:
    """The programmatic baseline as a conversation → next-turn function (one search, then an answer).

    It is a :class:`~star_lib.agent.policies.Policy` (no tokenizer): :meth:`act` reads a chat conversation
    (system, user, assistant, tool messages) and returns the raw text of the next assistant turn.
    """

    name = "baseline"
    tokenizer = None

    def __init__(self, answerer: SpanAnswerer | None = None, max_searches: int = 2) -> None:
        """Create the agent.

        Args:
            answerer: the span picker.
            max_searches: searches allowed before answering; the first is the question itself, a later one
                (only when nothing came back) its keywords.

        """
        self.answerer = answerer or SpanAnswerer()
        self.max_searches = max_searches

    def act(self, messages: Sequence[dict[str, Any]]) -> str:
        """Write the next assistant turn for ``messages``."""
        question = next((question_from_prompt(m["content"]) for m in messages if m["role"] == "user"), "")
        tool_texts = [str(m.get("content", "")) for m in messages if m["role"] == "tool"]
        passages = [p for text in tool_texts for p in parse_search_observation(text)]
        if len(tool_texts) < self.max_searches and not passages:
            query = (
                question if not tool_texts else " ".join(self.answerer.analyzer.terms(question)) or question
            )
            return format_tool_call(f"I will search for: {query}", SEARCH_TOOL, {"query": query})
        answer, evidence = self.answerer.answer(question, passages)
        think = f"Best-matching sentence: {evidence}" if evidence else "The search found nothing useful."
        return format_answer(_plain(think)[:400], _plain(answer) or NO_ANSWER)

    def generate(
        self, conversations: Sequence[Conversation], *, max_new_tokens: int = 512
    ) -> list[Generation]:
        """Write the next turn of each conversation (the :class:`~star_lib.agent.policies.Policy` API)."""
        return [Generation(text=self.act(c.messages)) for c in conversations]
