"""A programmatic expert that acts out a record's ``reference_plan`` as a natural ReAct trajectory.

The expert makes the calls a careful planner makes — ``SearchCity`` for a state destination, the
transport of every leg (``SearchFlight`` or ``GoogleDistanceMatrix``), then ``SearchAccommodation``,
``SearchRestaurant`` and ``SearchAttraction`` for each city it uses — with a short ``<think>`` before
each, and finally answers with the reference plan as JSON. It reads the conversation like a model
would: when a result is an error or lacks what it needs (an injected failure, a truncated or garbled
answer), it says so and repeats the call (up to ``max_retries`` times). So SFT data exists on a fresh
machine with no LLM.

The policy is stateless: the next turn is a function of the record and the messages so far.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from star_lib.agent.policies import Conversation, Generation
from star_lib.agent.react import format_answer, format_tool_call, parse_turn
from star_lib.types import DayPlan, QueryRecord, ToolCall

_STATE_SUFFIX = re.compile(r"\s*\([^()]*\)\s*$")
_FROM_TO = re.compile(r"^from (?P<a>.+?) to (?P<b>.+)$")
_FLIGHT = re.compile(r"Flight Number:\s*(?P<num>[^,]+)")
_TIMES = re.compile(r"Departure Time:\s*(?P<dep>[\d:]+),\s*Arrival Time:\s*(?P<arr>[\d:]+)")
_ROAD = re.compile(r"duration:\s*(?P<dur>[^,]+),\s*distance:\s*(?P<dist>.+?),\s*cost:\s*(?P<cost>[^,\s]+)")


@dataclass(frozen=True)
class Step:
    """One planned tool call with what its result must contain and how to talk about it."""

    call: ToolCall
    expect: tuple[str, ...]
    """Strings the observation must contain to be usable."""
    intent: str
    """Why the call is made (said before it)."""
    finding: str
    """What was learned (said after a usable result)."""


# ───────────────────────────── reading the plan ─────────────────────────────


def city_name(text: str) -> str:
    """Drop the ``(State)`` suffix of official annotations: ``Erie(Pennsylvania)`` → ``Erie``."""
    return _STATE_SUFFIX.sub("", text).strip()


def split_item(text: str) -> tuple[str, str] | None:
    """Split ``"Name, City"`` at its last comma; None for ``-`` or text without a comma."""
    text = text.strip()
    if not text or text == "-" or ", " not in text:
        return None
    name, city = text.rsplit(", ", 1)
    return name.strip(), city_name(city)


def transport_mode(text: str) -> str | None:
    """Classify a transportation entry as the strict evaluator does: flight, taxi, or driving."""
    lowered = text.lower()
    if not text.strip() or text.strip() == "-":
        return None
    if "flight" in lowered:
        return "flight"
    if "taxi" in lowered:
        return "taxi"
    return "driving"


def _legs(plan: Sequence[DayPlan]) -> list[tuple[int, str, str, str]]:
    """(day, from, to, transportation) for every travel day of the plan."""
    legs = []
    for day in plan:
        match = _FROM_TO.match(day.current_city.strip())
        if match:
            legs.append((day.days, city_name(match["a"]), city_name(match["b"]), day.transportation))
    return legs


def _items_by_city(plan: Sequence[DayPlan]) -> dict[str, dict[str, list[str]]]:
    """City → {"hotel"|"food"|"sight" → names in plan order, without repeats}."""
    found: dict[str, dict[str, list[str]]] = {}

    def add(kind: str, text: str) -> None:
        item = split_item(text)
        if item is None:
            return
        names = found.setdefault(item[1], {"hotel": [], "food": [], "sight": []})[kind]
        if item[0] not in names:
            names.append(item[0])

    for day in plan:
        add("hotel", day.accommodation)
        for meal in (day.breakfast, day.lunch, day.dinner):
            add("food", meal)
        for sight in day.attraction.split(";"):
            add("sight", sight)
    return found


# ───────────────────────────── the script ─────────────────────────────


def plan_steps(query: QueryRecord, plan: Sequence[DayPlan]) -> list[Step]:
    """List the tool calls a careful planner makes for ``query`` when it ends up with ``plan``."""
    items = _items_by_city(plan)
    steps: list[Step] = []
    visited = [leg[2] for leg in _legs(plan) if leg[2] != query.org]
    if query.days > 3 or query.visiting_city_number > 1:
        shown = ", ".join(dict.fromkeys(visited))
        steps.append(
            Step(
                ToolCall("SearchCity", {"state": query.dest}),
                tuple(dict.fromkeys(visited)),
                f"The destination {query.dest} is a state, so I first need the cities I can visit there.",
                f"{query.dest} has several cities; I will visit {shown}.",
            )
        )
    searched: set[str] = set()
    if query.org in items:
        steps.extend(_city_steps(query.org, items[query.org]))
        searched.add(query.org)
    for day, a, b, transport in _legs(plan):
        step = _transport_step(query, day, a, b, transport)
        if step is not None:
            steps.append(step)
        if b in items and b not in searched:
            steps.extend(_city_steps(b, items[b]))
            searched.add(b)
    for city, kinds in items.items():
        if city not in searched:
            steps.extend(_city_steps(city, kinds))
            searched.add(city)
    return steps


def _transport_step(query: QueryRecord, day: int, a: str, b: str, transport: str) -> Step | None:
    mode = transport_mode(transport)
    if mode is None:
        return None
    date = query.date[day - 1] if 0 < day <= len(query.date) else query.date[-1]
    if mode == "flight":
        number = _FLIGHT.search(transport)
        times = _TIMES.search(transport)
        num = number["num"].strip() if number else ""
        when = f", leaving at {times['dep']} and landing at {times['arr']}" if times else ""
        return Step(
            ToolCall("SearchFlight", {"departure": a, "destination": b, "date": date}),
            (num,) if num else (f"from {a} to {b}",),
            f"Next I need a flight from {a} to {b} on {date}.",
            f"Flight {num} from {a} to {b}{when} fits the schedule and the budget.",
        )
    road = _ROAD.search(transport)
    detail = (
        f" takes {road['dur'].strip()} and costs {road['cost'].strip()}" if road else " is a workable option"
    )
    label = "taxi" if mode == "taxi" else "self-driving"
    return Step(
        ToolCall("GoogleDistanceMatrix", {"departure": a, "destination": b, "mode": mode}),
        (f"from {a} to {b}", "cost:"),
        f"I will check the road route from {a} to {b} ({label}) instead of flying.",
        f"Going by {label} from {a} to {b}{detail}.",
    )


def _city_steps(city: str, kinds: dict[str, list[str]]) -> list[Step]:
    steps = []
    if kinds["hotel"]:
        hotels = " and ".join(f"'{h}'" for h in kinds["hotel"])
        steps.append(
            Step(
                ToolCall("SearchAccommodation", {"city": city}),
                tuple(kinds["hotel"]),
                f"Now I need a place to stay in {city} that matches the group's needs.",
                f"{hotels} in {city} meets the house rules, room type, occupancy and minimum-nights needs.",
            )
        )
    if kinds["food"]:
        steps.append(
            Step(
                ToolCall("SearchRestaurant", {"city": city}),
                tuple(kinds["food"]),
                f"Let me find restaurants in {city} for the meals there.",
                f"For meals in {city} I will use {_listing(kinds['food'])}, each only once.",
            )
        )
    if kinds["sight"]:
        steps.append(
            Step(
                ToolCall("SearchAttraction", {"city": city}),
                tuple(kinds["sight"]),
                f"I should also find attractions to visit in {city}.",
                f"In {city} I can visit {_listing(kinds['sight'])}.",
            )
        )
    return steps


def _listing(names: Sequence[str], limit: int = 4) -> str:
    shown = [f"'{n}'" for n in names[:limit]]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(shown) + more


# ───────────────────────────── the policy ─────────────────────────────

_RETRY = (
    "The last {tool} call {why}, so I will make the same call again.",
    "That {tool} result {why}; I'll retry the call.",
    "The {tool} call {why}. Let me try it once more.",
)
_DONE = (
    "I now have everything: {legs}, a place to stay, meals and attractions in {cities}. "
    "The plan stays within the ${budget} budget{extra}. Here is the final plan.",
    "All the information is gathered: {legs}, accommodation, restaurants and attractions for {cities}. "
    "It fits the ${budget} budget{extra}, so I can give the final itinerary.",
)


class ExpertPolicy:
    """Acts out ``Conversation.query.reference_plan``; implements :class:`~star_lib.agent.policies.Policy`.

    Args:
        max_retries: Repeats of a call whose result is unusable before moving on.
        seed: Varies the wording of the ``<think>`` text (deterministically).

    """

    tokenizer = None

    def __init__(self, *, max_retries: int = 5, seed: int = 0) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.max_retries = max_retries
        self.seed = seed

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int = 0) -> list[Generation]:
        """Write the next turn of each conversation (``max_new_tokens`` is ignored)."""
        return [self._turn(c) for c in conversations]

    def _turn(self, conversation: Conversation) -> Generation:
        query = conversation.query
        if query is None or not query.reference_plan:
            return Generation(
                text="", finish_reason="error", error="the expert needs a query with a reference_plan"
            )
        return Generation(text=self.next_turn(query, conversation.messages))

    def next_turn(self, query: QueryRecord, messages: Sequence[dict[str, Any]]) -> str:
        """Write the expert's next assistant turn for ``query`` after ``messages``."""
        plan = query.reference_plan or ()
        steps = plan_steps(query, plan)
        position, retries, last = self._progress(steps, messages)
        rng = random.Random(zlib.crc32(f"{self.seed}|{query.idx}|{query.org}|{len(messages)}".encode()))
        asked_final = len(messages) > 2 and messages[-1]["role"] == "user"
        if position >= len(steps) or asked_final:
            return format_answer(self._closing(query, plan, steps, last, rng), plan)
        step = steps[position]
        if retries:
            why = "returned a service error" if _is_error(last) else "came back incomplete or garbled"
            think = rng.choice(_RETRY).format(tool=step.call.name, why=why)
        else:
            done = steps[position - 1].finding + " " if position else ""
            think = done + step.intent
        return format_tool_call(think, step.call.name, step.call.arguments)

    def _progress(self, steps: list[Step], messages: Sequence[dict[str, Any]]) -> tuple[int, int, str]:
        """Replay the history: (index of the next step, retries of it so far, last observation text)."""
        position, retries, last = 0, 0, ""
        for i, message in enumerate(messages):
            if message["role"] != "assistant" or position >= len(steps):
                continue
            turn = parse_turn(message["content"])
            if not isinstance(turn, ToolCall):
                continue
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            last = nxt["content"] if nxt and nxt["role"] == "tool" else ""
            usable = bool(last) and not _is_error(last) and all(e in last for e in steps[position].expect)
            if usable or retries >= self.max_retries:
                position, retries = position + 1, 0
            else:
                retries += 1
        return position, retries, last

    def _closing(
        self, query: QueryRecord, plan: Sequence[DayPlan], steps: list[Step], last: str, rng: Any
    ) -> str:
        legs = _legs(plan)
        modes = {transport_mode(t) for *_, t in legs} - {None}
        how = "flights" if modes == {"flight"} else "road transport" if "flight" not in modes else "transport"
        leg_text = f"{how} there and back" if len(legs) <= 2 else f"{how} for all {len(legs)} legs"
        cities = ", ".join(dict.fromkeys(leg[2] for leg in legs if leg[2] != query.org)) or query.dest
        wants = [f"{k}: {v if isinstance(v, str) else ', '.join(v)}" for k, v in _constraints(query)]
        extra = f" and respects {'; '.join(wants)}" if wants else ""
        text = rng.choice(_DONE).format(legs=leg_text, cities=cities, budget=query.budget, extra=extra)
        if steps and last and not _is_error(last):
            text = steps[-1].finding + " " + text
        return text


def _constraints(query: QueryRecord) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in query.local_constraint.to_dict().items() if v is not None]


def _is_error(observation: str) -> bool:
    """Whether an observation reads as a failed call."""
    return observation.lstrip().startswith("Error") or not observation.strip()
