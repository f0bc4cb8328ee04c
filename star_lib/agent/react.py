"""The ReAct turn protocol (the paper's): system and user prompts and a strict parser of assistant turns.

Each assistant turn is exactly one ``<think>…</think>`` followed by exactly one
``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` or one ``<answer>…</answer>``, with nothing but
whitespace around them (``../shared/spec/TRAVELPLANNER.md`` §3). The tool list reaches a local model through
the chat template's ``tools=`` argument (the Qwen2.5 template renders it into the system turn); our rules stay
in the system message. :func:`parse_turn` never raises: mistakes come back as :class:`FormatError` data.

>>> parse_turn('<think>go</think><tool_call>{"name": "SearchCity", "arguments": {"state": "TX"}}</tool_call>')
ToolCall(name='SearchCity', arguments={'state': 'TX'})
>>> parse_turn("<think>done</think><answer>[]</answer>")
FinalAnswer(text='[]', think='done')
>>> parse_turn("no tags").reason
'expected exactly one <think>…</think> block, found 0 <think> and 0 </think>'
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from star_lib.io import loads_strict
from star_lib.types import DayPlan, QueryRecord, ToolCall, Tools

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
TAGS: tuple[str, ...] = (THINK_OPEN, THINK_CLOSE, CALL_OPEN, CALL_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)

CONTEXT_LIMIT_PROMPT = (
    "The conversation has reached the token limit. Do not call any more tools: reply now with "
    "<think>…</think><answer>…</answer> holding your final travel plan as a JSON list."
)
"""Sent once when an episode overflows its context budget (STAR: ask for the plan once, then stop)."""

_TURN = re.compile(
    r"\s*<think>(?P<think>.*?)</think>\s*"
    r"(?:<tool_call>(?P<call>.*?)</tool_call>|<answer>(?P<answer>.*?)</answer>)\s*",
    re.DOTALL,
)


@dataclass(frozen=True)
class FinalAnswer:
    """A turn that ends the episode with ``<answer>``; ``text`` is the stripped inside of the tags."""

    text: str
    think: str = ""


@dataclass(frozen=True)
class FormatError:
    """A turn that breaks the protocol; ``reason`` says what to change (it is shown to the model)."""

    reason: str


Turn = ToolCall | FinalAnswer | FormatError


# ───────────────────────────── parsing ─────────────────────────────


def parse_turn(text: Any) -> Turn:
    """Parse one assistant turn strictly; never raises.

    Args:
        text: The raw assistant text (special tokens already removed).

    Returns:
        A :class:`~star_lib.types.ToolCall`, a :class:`FinalAnswer`, or a :class:`FormatError` whose
        reason names the rule that was broken.

    """
    if not isinstance(text, str):
        return FormatError(f"a turn must be text, got {type(text).__name__}")
    counts = {tag: text.count(tag) for tag in TAGS}
    problem = _tag_count_problem(counts)
    if problem:
        return FormatError(problem)
    match = _TURN.fullmatch(text)
    if match is None:
        return FormatError(
            "a turn must be <think>…</think> followed directly by <tool_call>…</tool_call> or "
            "<answer>…</answer>, with nothing else outside the tags"
        )
    think = match.group("think").strip()
    if match.group("answer") is not None:
        answer = match.group("answer").strip()
        if not answer:
            return FormatError("the <answer> is empty; put the JSON plan inside <answer>…</answer>")
        return FinalAnswer(text=answer, think=think)
    return _parse_call(match.group("call"))


def _tag_count_problem(counts: dict[str, int]) -> str | None:
    """Return the first tag-count rule a turn breaks, or None."""
    if counts[THINK_OPEN] != 1 or counts[THINK_CLOSE] != 1:
        return (
            f"expected exactly one {THINK_OPEN}…{THINK_CLOSE} block, found {counts[THINK_OPEN]} {THINK_OPEN} "
            f"and {counts[THINK_CLOSE]} {THINK_CLOSE}"
        )
    calls, answers = counts[CALL_OPEN], counts[ANSWER_OPEN]
    if calls and answers:
        return "a turn holds either one <tool_call> or one <answer>, not both"
    if calls > 1 or counts[CALL_CLOSE] > 1:
        return f"only one tool call per turn is allowed, found {max(calls, counts[CALL_CLOSE])}"
    if answers > 1 or counts[ANSWER_CLOSE] > 1:
        return f"only one <answer> per turn is allowed, found {max(answers, counts[ANSWER_CLOSE])}"
    if calls != counts[CALL_CLOSE]:
        return "the <tool_call> tag is not closed properly; write <tool_call>{…}</tool_call>"
    if answers != counts[ANSWER_CLOSE]:
        return "the <answer> tag is not closed properly; write <answer>…</answer>"
    if not calls and not answers:
        return "after </think> write one <tool_call>{…}</tool_call> or one <answer>…</answer>"
    return None


def _parse_call(body: str) -> ToolCall | FormatError:
    """Parse the JSON inside ``<tool_call>``: an object with a string ``name`` and an object ``arguments``."""
    try:
        payload = loads_strict(body)  # a key given twice is an error here, not a silent last-wins
    except (ValueError, RecursionError) as exc:
        return FormatError(
            f'the tool call is not valid JSON ({_short(exc)}); write {{"name": …, "arguments": {{…}}}}'
        )
    if not isinstance(payload, dict):
        return FormatError(f"the tool call must be a JSON object, got {type(payload).__name__}")
    name, arguments = payload.get("name"), payload.get("arguments")
    if not isinstance(name, str) or not name.strip():
        return FormatError('the tool call needs a non-empty string "name"')
    if not isinstance(arguments, dict):
        return FormatError('the tool call needs an object "arguments", e.g. {"city": "Denver"}')
    extra = sorted(set(payload) - {"name", "arguments"})
    if extra:
        return FormatError(f'the tool call may only hold "name" and "arguments", found extra key(s) {extra}')
    return ToolCall(name=name.strip(), arguments=arguments)


def _short(exc: BaseException) -> str:
    """Describe a parse exception in one bounded line."""
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__


# ───────────────────────────── formatting ─────────────────────────────


def format_tool_call(think: str, name: str, arguments: dict[str, Any]) -> str:
    """Render a tool-call turn exactly as the protocol wants it.

    >>> format_tool_call("Look.", "SearchCity", {"state": "Ohio"})
    '<think>Look.</think><tool_call>{"name": "SearchCity", "arguments": {"state": "Ohio"}}</tool_call>'
    """
    call = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{THINK_OPEN}{think}{THINK_CLOSE}{CALL_OPEN}{call}{CALL_CLOSE}"


def plan_json(plan: Sequence[DayPlan]) -> str:
    """Compact JSON of a plan in the official submission format (§4)."""
    return json.dumps([day.to_dict() for day in plan], ensure_ascii=False)


def format_answer(think: str, plan: Sequence[DayPlan] | str) -> str:
    """Render a final-answer turn; ``plan`` is a plan or already-serialised text."""
    body = plan if isinstance(plan, str) else plan_json(plan)
    return f"{THINK_OPEN}{think}{THINK_CLOSE}{ANSWER_OPEN}{body}{ANSWER_CLOSE}"


# ───────────────────────────── prompts ─────────────────────────────

_EXAMPLE_PLAN = [
    DayPlan(
        days=1,
        current_city="from Dallas to Peoria",
        transportation=(
            "Flight Number: F4044830, from Dallas to Peoria, Departure Time: 13:10, Arrival Time: 15:01"
        ),
        attraction="Peoria Riverfront Park, Peoria;",
        dinner="Tandoor Ka Zaika, Peoria",
        accommodation="Bushwick Music Mansion, Peoria",
    ),
    DayPlan(
        days=2,
        current_city="Peoria",
        breakfast="Cafe Hashtag LoL, Peoria",
        attraction="Glen Oak Park, Peoria;The Peoria PlayHouse, Peoria;",
        lunch="Dial A Cake, Peoria",
        dinner="The Curzon Room, Peoria",
        accommodation="Bushwick Music Mansion, Peoria",
    ),
    DayPlan(
        days=3,
        current_city="from Peoria to Dallas",
        transportation=(
            "Flight Number: F4045904, from Peoria to Dallas, Departure Time: 07:09, Arrival Time: 09:20"
        ),
    ),
]

_RULES = """You are a careful travel planner. Build a day-by-day travel plan that satisfies every \
requirement of the user (dates, group size, budget, house rules, cuisines, room type, transportation) \
using only facts returned by the tools.

Format of every reply (exactly one of the two patterns, nothing outside the tags):
1. <think>your reasoning</think><tool_call>{"name": "<tool name>", "arguments": {…}}</tool_call>
2. <think>your reasoning</think><answer>the final plan as JSON</answer>
Rules:
- Exactly one <think> and exactly one <tool_call> or <answer> per reply; one tool call per turn.
- Tool results come back inside <tool_response>…</tool_response>. If a call fails, fix it or try again.
- Trust only the tool results: never invent flights, hotels, restaurants or attractions.
- A destination that is a state needs SearchCity first; visit the requested number of cities there.

The final plan is a JSON list with one object per day and the keys "days", "current_city", "transportation", \
"breakfast", "attraction", "lunch", "dinner", "accommodation":
- "current_city": "City" or, on a travel day, "from CityA to CityB".
- "transportation": "Flight Number: F123, from A to B, Departure Time: HH:MM, Arrival Time: HH:MM", \
"Self-driving, from A to B, duration: …, distance: …, cost: …", "Taxi, from A to B, duration: …, \
distance: …, cost: …", or "-".
- meals and "accommodation": "Name, City" or "-"; "attraction": "Name, City;Name, City;" or "-".
- Return to the origin city on the last day; no accommodation on the last day; no restaurant or \
attraction twice.
Example answer for a 3-day trip:
<answer>{example}</answer>"""


def system_prompt(
    tools: Tools | Sequence[dict[str, Any]] | None = None, *, include_tools: bool = False
) -> str:
    """Build the system message: our rules, the plan format of §4 and a short example.

    Args:
        tools: The tools (or their schemas); only used when ``include_tools`` is set.
        include_tools: Also list the tool schemas in the text, for endpoints that take no ``tools=``
            argument. Leave False for local models: pass ``tools=schemas`` to the chat template instead.

    Returns:
        The system message text.

    """
    text = _RULES.replace("{example}", plan_json(_EXAMPLE_PLAN))
    if include_tools:
        schemas = tool_schemas(tools) if tools is not None else []
        listing = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in schemas)
        text += f"\n\nAvailable tools:\n<tools>\n{listing}\n</tools>"
    return text


def tool_schemas(tools: Tools | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the OpenAI-style schemas of ``tools`` (a ``Tools`` object or a list of schemas)."""
    if isinstance(tools, Tools):
        return list(tools.schemas())
    return list(tools)


def user_prompt(query: QueryRecord) -> str:
    """Build the user message: the query text, or a plain rendering of the record when it has none."""
    if query.query.strip():
        return query.query.strip()
    people = "1 person" if query.people_number == 1 else f"{query.people_number} people"
    text = (
        f"Please plan a {query.days}-day trip for {people} from {query.org} to {query.dest}, "
        f"from {query.date[0]} to {query.date[-1]}, with a budget of ${query.budget}."
    )
    wants = {k: v for k, v in query.local_constraint.to_dict().items() if v is not None}
    if wants:
        text += " Requirements: " + "; ".join(f"{k}: {v}" for k, v in wants.items()) + "."
    return text


def tool_response(text: str) -> dict[str, str]:
    """Build a tool-result message; the chat template wraps it in ``<tool_response>`` tags."""
    return {"role": "tool", "content": text}


def format_error_message(error: FormatError) -> dict[str, str]:
    """Build the observation a model gets after a malformed turn."""
    return tool_response(f"Format error: {error.reason}. Reply again following the format rules.")
