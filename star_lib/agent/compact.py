"""The compact turn protocol: short calls, one line per search result and a compact plan (tiny models).

A from-scratch model of a few million parameters learns to copy names and numbers, but not to write
1,000-token JSON trajectories (``../shared/STACK.md``, "Tiny models on CPU"). This protocol keeps the ReAct
shape — every assistant turn is ``<think>…</think>`` and then one ``<tool_call>…</tool_call>`` or one
``<answer>…</answer>`` — and shortens everything inside it:

- **user turn**: ``Pellmont>Elmstead|2022-03-02 2022-03-03 2022-03-04|1|2600`` (origin>destination, the
  dates, people, budget; non-null local constraints follow as ``key=value`` fields);
- **tool call**: the tool name and its arguments in schema order, joined by ``|``:
  ``SearchFlight|Pellmont|Elmstead|2022-03-02``, ``SearchAccommodation|Elmstead``,
  ``GoogleDistanceMatrix|Pellmont|Elmstead|driving``; it becomes the same :class:`~star_lib.types.ToolCall`
  as the JSON form, so the real tools validate it;
- **observation**: one short line per option, cheapest first (the order stands for the prices) — flights
  by number (``F6238401``), hotels ``Sunny Garden Loft min1`` (name, minimum nights), restaurants by name;
  attractions by name in the database's order, cities joined by ``|``, a road ``cost 17``; no result
  reads ``none``; errors keep their first clause;
- **what a constraint needs** (medium and hard tasks; :class:`CompactTools` renders for the episode's
  task, which :meth:`~star_lib.agent.protocol.Protocol.wrap_tools` hands it at every reset): a room-type
  constraint adds the listing's room type to every hotel line (``entire``, ``private`` or ``shared``); a
  house rule adds that rule's verdict (``pets-ok`` or ``no-pets``; ``children under 10`` reads
  ``children``); cuisines add ``+Cuisine`` to a restaurant line for each requested cuisine it serves
  (``Golden Olive +Mexican +Chinese``; the evaluator's test: the cuisine's name in the listing's cuisines).
  For a group, hotels are ordered by what the group pays a night (price × rooms, rooms =
  ``ceil(people / maximum occupancy)``, the evaluator's cost), so "cheapest first" still holds and the
  first line that fits is the one a careful planner takes. Nothing is added for the budget (no prices:
  the order stands for them, and the reference plans take the cheapest item that fits) nor for a
  transportation constraint (it decides which call is made, ``SearchFlight`` or ``GoogleDistanceMatrix``,
  not which line is read). A task without local constraints for one traveller (every easy task) reads
  exactly as without a task;
- **note**: the ``<think>`` after a search says what the plan will take from it (:func:`expert_note`):
  ``F6238401``; ``Quiet Garden Loft min3;Sunny Garden Loft min1`` (the hotel lines down to the chosen one,
  with their attributes, so a skipped line shows why it was skipped); ``Golden Olive +Mexican;Green
  Bistro`` (the lines of the restaurants used), so the plan copies from nearby;
- **plan**: one line per day, seven ``|``-separated fields in the official key order —
  ``city|transport|breakfast|attraction|lunch|dinner|accommodation`` — with ``A>B`` for a travel day,
  the transport a flight number, ``drive``, ``taxi`` or ``-``, items by name (``Name, City`` when the
  item is not in the day's stay city) and attractions joined by ``;``.

:func:`expand_plan` maps a compact plan deterministically to the official day plan (spec §4), so the
evaluator is unchanged: ``A>B`` → ``from A to B``; an item → ``Name, City`` with the day's stay city (the
destination of a travel day, or its origin when the day returns home); a flight number →
``Flight Number: F…, from A to B, Departure Time: …, Arrival Time: …`` with A and B from the day's
cities and the times looked up by number (neither evaluator checks times; a number that is not a flight
from A to B keeps no times and fails the sandbox check); ``drive``/``taxi`` → the road description of the
day's two cities. The mapper chooses nothing: every name, number and city comes from the model. Real
names may hold ``, `` and `` | ``: an item keeps its own ``, City`` only when that city is one of the day's
cities or a city the world knows (``Peaceful, beautiful home away`` gets the stay city), and a line that
does not split into seven fields at ``|`` is split at the ``|`` not written `` | ``.

>>> parse_turn("<think>best F1</think><tool_call>SearchAccommodation|Elmstead</tool_call>")
ToolCall(name='SearchAccommodation', arguments={'city': 'Elmstead'})
>>> compact_call(ToolCall("SearchFlight", {"departure": "A", "destination": "B", "date": "2022-03-02"}))
'SearchFlight|A|B|2022-03-02'
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from star_lib.agent.config import RolloutConfig
from star_lib.agent.expert import plan_steps, split_item, transport_mode
from star_lib.agent.policies import Conversation, Generation
from star_lib.agent.react import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    CALL_CLOSE,
    CALL_OPEN,
    TAGS,
    THINK_CLOSE,
    THINK_OPEN,
    FinalAnswer,
    FormatError,
)
from star_lib.types import PLAN_KEYS, DayPlan, Observation, QueryRecord, ToolCall, Tools

SYSTEM_PROMPT = "plan"
"""The whole system message (the chat template would otherwise insert a long default one)."""
CONTEXT_LIMIT_PROMPT = "answer now"
"""What the model is told when its context overflows."""
FIELD_SEP = "|"
ROUTE_SEP = ">"
ITEM_SEP = ";"
EMPTY = "-"
PLAN_FIELDS: tuple[str, ...] = PLAN_KEYS[1:]
"""The compact fields of a day, in the official key order (``days`` is the line number)."""
ROAD_MODES: dict[str, str] = {"drive": "self-driving", "taxi": "taxi"}
"""Compact transport words → the evaluator's transport kind."""

_TURN = re.compile(
    r"\s*<think>(?P<think>[^<]*)</think>\s*(?:<tool_call>(?P<call>.*?)</tool_call>|<answer>(?P<answer>.*?)</answer>)\s*",
    re.DOTALL,
)
_FLIGHT_NUMBER = re.compile(r"^F\d+$")
_FLIGHT_IN_TEXT = re.compile(r"Flight Number:\s*([^,\s]+)")
_ROAD_IN_TEXT = re.compile(r"duration:\s*[^,]+,\s*distance:\s*.+?,\s*cost:\s*\S+")
_TIGHT_SEP = re.compile(r"(?<! )\||\|(?! )")
"""A field separator that is not `` | `` (which real names hold: ``San Luis Valley Museum | Alamosa``)."""
_HOTEL_LINE = re.compile(r"^(?P<name>.*) min\S+(?: (?:entire|private|shared|no-[a-z]+|[a-z]+-ok))*$")
_RESTAURANT_LINE = re.compile(r"^(?P<name>.*?)(?: \+[A-Z][a-z]+)*$")


# ───────────────────────────── turns ─────────────────────────────


def user_prompt(query: QueryRecord) -> str:
    """Render the task compactly: ``org>dest|dates|people|budget`` plus ``key=value`` constraints.

    >>> from star_lib.types import LocalConstraint
    >>> q = QueryRecord(org="A", dest="B", days=3, visiting_city_number=1, date=("d1", "d2", "d3"),
    ...                 people_number=1, local_constraint=LocalConstraint(), budget=900)
    >>> user_prompt(q)
    'A>B|d1 d2 d3|1|900'
    """
    fields = [f"{query.org}{ROUTE_SEP}{query.dest}", " ".join(query.date), str(query.people_number)]
    fields.append(str(query.budget))
    for key, value in query.local_constraint.to_dict().items():
        if value is not None:
            shown = ITEM_SEP.join(value) if isinstance(value, (list, tuple)) else str(value)
            fields.append(f"{key}={shown}")
    return FIELD_SEP.join(fields)


def parse_turn(text: Any) -> ToolCall | FinalAnswer | FormatError:
    """Parse one compact assistant turn strictly; never raises.

    The ``<think>`` note may hold no tags; a call is ``Tool|arg|…`` (arguments in schema order); an
    answer must not be empty. Unknown tools and wrong argument counts are left to the tools, which
    answer with an error observation (an invalid call).
    """
    if not isinstance(text, str):
        return FormatError(f"a turn must be text, got {type(text).__name__}")
    counts = {tag: text.count(tag) for tag in TAGS}
    if counts[THINK_OPEN] != 1 or counts[THINK_CLOSE] != 1:
        return FormatError("write exactly one <think>…</think>")
    calls, answers = counts[CALL_OPEN] + counts[CALL_CLOSE], counts[ANSWER_OPEN] + counts[ANSWER_CLOSE]
    if (calls, answers) not in ((2, 0), (0, 2)):
        return FormatError("then exactly one <tool_call>…</tool_call> or one <answer>…</answer>")
    match = _TURN.fullmatch(text)
    if match is None:
        return FormatError("write <think>…</think> then <tool_call>…</tool_call> or <answer>…</answer>")
    if match.group("answer") is not None:
        answer = match.group("answer").strip()
        if not answer:
            return FormatError("the <answer> is empty")
        return FinalAnswer(text=answer, think=match.group("think").strip())
    return parse_call(match.group("call"))


def parse_call(body: str) -> ToolCall | FormatError:
    """Turn ``Tool|arg|…`` into a :class:`~star_lib.types.ToolCall` (arguments named in schema order)."""
    from star_lib.travel.tools import TOOL_SPECS

    parts = [part.strip() for part in body.split(FIELD_SEP)]
    name, values = parts[0], parts[1:]
    if not name:
        return FormatError("the tool call needs a tool name first: Tool|arg|…")
    spec = TOOL_SPECS.get(name)
    names = [arg for arg, _ in spec.arguments] if spec is not None else []
    names += [f"arg{i}" for i in range(len(names), len(values))]
    return ToolCall(name=name, arguments=dict(zip(names, values, strict=False)))


def compact_call(call: ToolCall) -> str:
    """Render a tool call compactly (arguments in schema order)."""
    from star_lib.travel.tools import TOOL_SPECS

    spec = TOOL_SPECS.get(call.name)
    order = [arg for arg, _ in spec.arguments] if spec is not None else list(call.arguments)
    return FIELD_SEP.join([call.name, *(str(call.arguments[arg]) for arg in order if arg in call.arguments)])


def format_call_turn(note: str, call: ToolCall) -> str:
    """Render a compact tool-call turn."""
    return f"{THINK_OPEN}{note}{THINK_CLOSE}{CALL_OPEN}{compact_call(call)}{CALL_CLOSE}"


def format_answer_turn(note: str, compact_plan: str) -> str:
    """Render a compact final-answer turn."""
    return f"{THINK_OPEN}{note}{THINK_CLOSE}{ANSWER_OPEN}{compact_plan}{ANSWER_CLOSE}"


# ───────────────────────────── observations ─────────────────────────────


def _rows(text: str, fields: int, header_lines: int = 2) -> list[list[str]]:
    """Split a registry table into rows of ``fields`` values (split from the right: names may hold '|')."""
    rows = []
    for line in text.split("\n")[header_lines:]:
        parts = line.rsplit(" | ", fields - 1)
        if len(parts) == fields:
            rows.append([p.strip() for p in parts])
    return rows


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("inf")


def _int_text(text: str) -> str:
    value = _number(text)
    return str(int(value)) if value != float("inf") and float(value).is_integer() else text


ROOM_WORDS: dict[str, str] = {"Entire home/apt": "entire", "Private room": "private", "Shared room": "shared"}
"""The database's room types → the word a hotel line carries when the query constrains the room type."""


def rule_word(rule: str) -> str:
    """Return the one word a house rule is shown by (``children under 10`` → ``children``)."""
    return rule.split()[0] if rule.strip() else rule


def _room_word(text: str) -> str:
    return ROOM_WORDS.get(text.strip(), text.strip().split(" ")[0].lower() or EMPTY)


def _rooms(people: int, occupancy: str) -> int:
    """Rooms a group needs (``ceil(people / maximum occupancy)``; 1 when the occupancy is unreadable)."""
    value = _number(occupancy)
    if value == float("inf") or value < 1:
        return 1
    return -(-people // int(value))


def _hotel_line(row: list[str], query: QueryRecord | None) -> str:
    """``Name minN``, then the room type and the requested house rule when the query constrains them."""
    line = f"{row[0]} min{_int_text(row[4])}"
    wants = query.local_constraint if query is not None else None
    if wants is not None and wants.room_type is not None:
        line += f" {_room_word(row[2])}"
    if wants is not None and wants.house_rule is not None:
        word = rule_word(wants.house_rule)
        line += f" no-{word}" if f"No {wants.house_rule}" in row[3] else f" {word}-ok"
    return line


def _restaurant_line(row: list[str], query: QueryRecord | None) -> str:
    """Write the name, then ``+Cuisine`` for each requested cuisine the restaurant serves."""
    wanted = query.local_constraint.cuisine if query is not None else None
    return row[0] + "".join(f" +{c}" for c in wanted or () if c in row[1])


def compact_observation(name: str, observation: Observation, query: QueryRecord | None = None) -> str:
    """Render a registry observation compactly (one line per option, cheapest first).

    ``query`` (the episode's task) adds what its constraints need (see the module docstring); without
    constraints and for one traveller the lines are the same as without a query.
    """
    text = observation.text
    if observation.error == "no_result":
        return "none"
    if not observation.ok or observation.error:
        first = re.split(r"[;.](?:\s|$)", text.strip(), maxsplit=1)[0]
        return f"error {first.removeprefix('Error: ').strip().lower()}"
    if name == "SearchFlight":
        rows = sorted(_rows(text, 6), key=lambda r: (_number(r[1]), r[2], r[0]))
        return "\n".join(r[0] for r in rows)
    if name == "SearchAccommodation":
        people = query.people_number if query is not None else 1
        rows = sorted(_rows(text, 7), key=lambda r: (_number(r[1]) * _rooms(people, r[5]), r[0]))
        return "\n".join(_hotel_line(r, query) for r in rows)
    if name == "SearchRestaurant":
        rows = sorted(_rows(text, 4), key=lambda r: (_number(r[2]), r[0]))
        return "\n".join(_restaurant_line(r, query) for r in rows)
    if name == "SearchAttraction":
        return "\n".join(r[0] for r in _rows(text, 2))
    if name == "SearchCity":
        listing = text.split(":", 1)[-1].strip().rstrip(".")
        return FIELD_SEP.join(c.strip() for c in listing.split(", ") if c.strip())
    if name == "GoogleDistanceMatrix":
        cost = re.search(r"cost:\s*(\S+)", text)
        return f"cost {cost.group(1)}" if cost else text
    return text


class CompactTools:
    """Wrap the travel tools so that every observation is compact; implements :class:`~star_lib.types.Tools`.

    Args:
        inner: The registry (its text format is parsed; its errors are kept as data).
        query: The episode's task: its constraints decide what the lines carry (:func:`compact_observation`).
            None renders as for a task without constraints (one traveller).

    """

    def __init__(self, inner: Tools, query: QueryRecord | None = None) -> None:
        self.inner = inner
        self.query = query

    def for_query(self, query: QueryRecord | None) -> CompactTools:
        """Return a wrapper of the same tools that renders for ``query`` (self when it already does)."""
        return self if query is self.query else CompactTools(self.inner, query)

    def schemas(self) -> list[dict[str, Any]]:
        """Return the inner tools' schemas (the compact protocol does not show them to the model)."""
        return self.inner.schemas()

    def call(self, name: str, arguments: Any) -> Observation:
        """Call the inner tool and shorten its answer (``ok``, ``error`` and ``fault`` are kept)."""
        obs = self.inner.call(name, arguments)
        text = compact_observation(name, obs, self.query)
        return Observation(text, ok=obs.ok, error=obs.error, fault=obs.fault)


# ───────────────────────────── plans ─────────────────────────────


def _stay_city(cities: Sequence[str], org: str) -> str:
    """Return a day's stay city: a travel day's destination, or its origin when it returns home."""
    if len(cities) == 2:
        return cities[0] if cities[1] == org else cities[1]
    return cities[0]


def _day_cities(current_city: str) -> list[str]:
    text = current_city.strip()
    if text.startswith("from ") and " to " in text:
        a, b = text[len("from ") :].split(" to ", 1)
        return [a.strip(), b.strip()]
    return [text]


def encode_plan(query: QueryRecord, plan: Sequence[DayPlan]) -> str:
    """Write an official plan in the compact format (the inverse of :func:`expand_plan`)."""
    lines = []
    for day in plan:
        cities = _day_cities(day.current_city)
        stay = _stay_city(cities, query.org)

        def item(text: str, stay: str = stay) -> str:
            split = split_item(text)
            if split is None:
                return EMPTY
            return split[0] if split[1] == stay else f"{split[0]}, {split[1]}"

        sights = [item(s) for s in day.attraction.split(";") if s.strip() and s.strip() != EMPTY]
        fields = [
            ROUTE_SEP.join(cities),
            _encode_transport(day.transportation),
            item(day.breakfast),
            ITEM_SEP.join(sights) or EMPTY,
            item(day.lunch),
            item(day.dinner),
            item(day.accommodation),
        ]
        lines.append(FIELD_SEP.join(fields))
    return "\n".join(lines)


def _encode_transport(text: str) -> str:
    mode = transport_mode(text)
    if mode is None:
        return EMPTY
    if mode == "flight":
        match = _FLIGHT_IN_TEXT.search(text)
        return match.group(1) if match else EMPTY
    return "taxi" if mode == "taxi" else "drive"


class CompactPlanError(ValueError):
    """A compact plan that cannot be expanded (the message names the day and field)."""


def expand_plan(text: str, query: QueryRecord, world: Any) -> tuple[DayPlan, ...]:
    """Expand a compact plan into official day plans (see the module docstring for the mapping).

    Raises:
        CompactPlanError: a line without seven fields, more days than the trip, an empty field, a
            current city that is not ``A`` or ``A>B``, or a transport that is not ``-``, a flight number,
            ``drive`` or ``taxi``.

    """
    lines = [line.strip() for line in text.strip().split("\n")]
    if len(lines) > query.days:
        raise CompactPlanError(f"the plan has {len(lines)} days but the trip has {query.days}")
    return tuple(_expand_day(number, line, query, world) for number, line in enumerate(lines, start=1))


def _fields(line: str) -> list[str]:
    """Split a plan line at ``|``; when that gives no seven fields, keep `` | `` (inside a name) whole."""
    fields = [f.strip() for f in line.split(FIELD_SEP)]
    if len(fields) != len(PLAN_FIELDS):
        tight = [f.strip() for f in _TIGHT_SEP.split(line)]
        if len(tight) == len(PLAN_FIELDS):
            return tight
    return fields


def _names_city(value: str, cities: Sequence[str], world: Any) -> bool:
    """Whether ``Name, City`` ends in a city: one of the day's cities, or one the world knows."""
    if ", " not in value:
        return False
    city = value.rsplit(", ", 1)[1].strip()
    if city in cities:
        return True
    knows = getattr(world, "knows_city", None)
    return bool(knows(city)) if callable(knows) else False


def _expand_day(number: int, line: str, query: QueryRecord, world: Any) -> DayPlan:
    fields = _fields(line)
    if len(fields) != len(PLAN_FIELDS):
        raise CompactPlanError(
            f"day {number} has {len(fields)} fields; write {len(PLAN_FIELDS)}: {FIELD_SEP.join(PLAN_FIELDS)}"
        )
    for key, value in zip(PLAN_FIELDS, fields, strict=True):
        if not value:
            raise CompactPlanError(f"day {number}: {key} is empty; write {EMPTY} for nothing")
    cities = [c.strip() for c in fields[0].split(ROUTE_SEP)]
    if len(cities) not in (1, 2) or not all(cities):
        raise CompactPlanError(f"day {number}: the city must be 'A' or 'A{ROUTE_SEP}B', got {fields[0]!r}")
    stay = _stay_city(cities, query.org)

    def item(value: str) -> str:
        if value == EMPTY:
            return EMPTY
        return value if _names_city(value, cities, world) else f"{value}, {stay}"

    sights = [s.strip() for s in fields[3].split(ITEM_SEP) if s.strip()]
    attraction = EMPTY if fields[3] == EMPTY else "".join(f"{item(s)};" for s in sights)
    return DayPlan(
        days=number,
        current_city=f"from {cities[0]} to {cities[1]}" if len(cities) == 2 else cities[0],
        transportation=_expand_transport(number, fields[1], cities, world),
        breakfast=item(fields[2]),
        attraction=attraction or EMPTY,
        lunch=item(fields[4]),
        dinner=item(fields[5]),
        accommodation=item(fields[6]),
    )


def _expand_transport(number: int, value: str, cities: Sequence[str], world: Any) -> str:
    if value == EMPTY:
        return EMPTY
    a, b = (cities[0], cities[1]) if len(cities) == 2 else (cities[0], cities[0])
    if _FLIGHT_NUMBER.match(value):
        flight = world.flight(value) if world is not None else None
        text = f"Flight Number: {value}, from {a} to {b}"
        if flight is not None and flight.origin == a and flight.dest == b:
            text += f", Departure Time: {flight.dep_time}, Arrival Time: {flight.arr_time}"
        return text
    if value in ROAD_MODES:
        label = "Taxi" if value == "taxi" else "Self-driving"
        text = f"{label}, from {a} to {b}"
        road = world.distance(a, b) if world is not None and len(cities) == 2 else None
        cost = road.cost("taxi" if value == "taxi" else "driving") if road is not None else None
        if road is not None and cost is not None:
            text += f", duration: {road.duration}, distance: {road.distance}, cost: {cost}"
        return text
    raise CompactPlanError(
        f"day {number}: transport must be {EMPTY}, a flight number (F…), drive or taxi; got {value!r}"
    )


# ───────────────────────────── settings ─────────────────────────────


def compact_rollout_config(**overrides: Any) -> RolloutConfig:
    """Build a :class:`RolloutConfig` for the compact protocol, limits sized for short trajectories.

    Defaults: 10 turns, a 1,024-token context, 112 new tokens per turn; ``overrides`` win.
    """
    values: dict[str, Any] = {
        "protocol": "compact",
        "tools_in_system_prompt": True,
        "system_prompt": SYSTEM_PROMPT,
        "context_limit_prompt": CONTEXT_LIMIT_PROMPT,
        "max_turns": 10,
        "max_context_tokens": 1024,
        "max_new_tokens": 112,
    }
    values.update(overrides)
    return RolloutConfig(**values)


# ───────────────────────────── the expert ─────────────────────────────


@dataclass(frozen=True)
class _Step:
    call: ToolCall
    expect: tuple[str, ...]


def compact_steps(query: QueryRecord, plan: Sequence[DayPlan]) -> list[_Step]:
    """List the expert's calls (:func:`star_lib.agent.expert.plan_steps`) and what each result must hold."""
    steps = []
    for step in plan_steps(query, plan):
        expect = ("cost",) if step.call.name == "GoogleDistanceMatrix" else step.expect
        steps.append(_Step(step.call, expect))
    return steps


def _hotel_name(line: str) -> str:
    """Return the name of a hotel line (``Name minN`` and any attribute words after it)."""
    match = _HOTEL_LINE.match(line)
    return (match.group("name") if match else line.rsplit(" ", 1)[0]).strip()


def _restaurant_lines(observation: str) -> dict[str, str]:
    """Restaurant name → its line (the name and any ``+Cuisine`` tags), first line of a name wins."""
    found: dict[str, str] = {}
    for line in observation.split("\n"):
        match = _RESTAURANT_LINE.match(line.strip())
        if match:
            found.setdefault(match.group("name").strip(), line.strip())
    return found


def expert_note(step: _Step, observation: str) -> str:
    r"""Write the expert's note on a usable result: what the plan will take from it, in plan order.

    Flights: the chosen number (the cheapest, listed first). Roads: ``drive`` or ``taxi``. Hotels: the
    result lines copied in order down to the chosen one (``Quiet Garden Loft min3;Bright Lakeside Cabin
    min1``), so skipping a hotel whose minimum stay is too long — or whose room type or house rule the task
    excludes, when the lines carry them — is a local decision. Restaurants: the lines of the ones used
    (with their ``+Cuisine`` tags when the task asks for cuisines), attractions and cities: the ones used,
    all ``;``-separated, in plan order.

    >>> expert_note(_Step(ToolCall("SearchAccommodation", {"city": "X"}), ("B",)), "A min3\nB min1\nC min1")
    'A min3;B min1'
    >>> expert_note(_Step(ToolCall("SearchRestaurant", {"city": "X"}), ("Q", "P")), "P\nQ +Mexican\nR")
    'Q +Mexican;P'
    """
    name, expect = step.call.name, step.expect
    if name == "SearchFlight":
        return expect[0] if expect and _FLIGHT_NUMBER.match(expect[0]) else ""
    if name == "GoogleDistanceMatrix":
        return "taxi" if step.call.arguments.get("mode") == "taxi" else "drive"
    if name == "SearchAccommodation" and expect:
        lines = []
        for line in observation.split("\n"):
            lines.append(line.strip())
            if _hotel_name(line) == expect[0]:
                return ITEM_SEP.join(lines)
        return expect[0]
    if name == "SearchRestaurant":
        lines = _restaurant_lines(observation)
        return ITEM_SEP.join(lines.get(item, item) for item in expect)
    return ITEM_SEP.join(expect)


class CompactExpert:
    """Act out ``reference_plan`` in the compact protocol (a :class:`~star_lib.agent.policies.Policy`).

    Same calls and retries as :class:`~star_lib.agent.expert.ExpertPolicy`: a call whose compact result lacks
    what the plan needs (an error, an injected fault) is repeated up to ``max_retries`` times.

    Args:
        max_retries: Repeats of a call whose result is unusable.
        seed: Unused wording seed (kept for symmetry with the ReAct expert).

    """

    tokenizer = None

    def __init__(self, *, max_retries: int = 5, seed: int = 0) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.max_retries = max_retries
        self.seed = seed

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int = 0) -> list[Generation]:
        """Write the next turn of each conversation (``max_new_tokens`` is ignored)."""
        out = []
        for conversation in conversations:
            query = conversation.query
            if query is None or not query.reference_plan:
                why = "the expert needs a query with a reference_plan"
                out.append(Generation(text="", finish_reason="error", error=why))
            else:
                out.append(Generation(text=self.next_turn(query, conversation.messages)))
        return out

    def next_turn(self, query: QueryRecord, messages: Sequence[dict[str, Any]]) -> str:
        """Write the expert's next compact assistant turn for ``query`` after ``messages``."""
        plan = query.reference_plan or ()
        steps = compact_steps(query, plan)
        position, retries = self._progress(steps, messages)
        asked_final = len(messages) > 2 and messages[-1]["role"] == "user"
        seen = messages[-1]["content"] if messages and messages[-1]["role"] == "tool" else ""
        note = expert_note(steps[position - 1], seen) if position and not retries else ""
        if retries:
            rng = random.Random(zlib.crc32(f"{self.seed}|{query.idx}|{len(messages)}".encode()))
            note = rng.choice(("retry", "again"))
        if position >= len(steps) or asked_final:
            return format_answer_turn(note, encode_plan(query, plan))
        return format_call_turn(note, steps[position].call)

    def _progress(self, steps: list[_Step], messages: Sequence[dict[str, Any]]) -> tuple[int, int]:
        """Replay the history: (index of the next step, retries of it so far)."""
        position, retries = 0, 0
        for i, message in enumerate(messages):
            if message["role"] != "assistant" or position >= len(steps):
                continue
            if not isinstance(parse_turn(message["content"]), ToolCall):
                continue
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            seen = nxt["content"] if nxt and nxt["role"] == "tool" else ""
            usable = not _is_error(seen) and all(e in seen for e in steps[position].expect)
            if usable or retries >= self.max_retries:
                position, retries = position + 1, 0
            else:
                retries += 1
        return position, retries


def _is_error(observation: str) -> bool:
    """Whether a compact observation reads as a failed call (or is empty)."""
    return not observation.strip() or observation.lstrip().lower().startswith("error")
