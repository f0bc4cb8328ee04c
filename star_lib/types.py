"""The data types every stage passes along — the contract between stages.

World rows (``Flight``, ``Accommodation``, …) are what the database returns; ``QueryRecord`` is a task;
``DayPlan`` is one day of a submitted plan; ``ToolCall``/``Observation`` are one environment step;
``CheckResult``/``EvaluationReport`` are the evaluator's verdicts; ``EpisodeResult`` is one finished
multi-turn episode. Everything here is plain data: no I/O, no model code.

Field names follow the official TravelPlanner data (see ``../shared/spec/TRAVELPLANNER.md`` §1–§5).
"""

from __future__ import annotations

import ast
import datetime as _dt
import json
import math
import re
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal, Protocol, runtime_checkable

Level = Literal["easy", "medium", "hard"]
LEVELS: tuple[str, ...] = ("easy", "medium", "hard")
EvalMode = Literal["official", "strict"]

HOUSE_RULES: tuple[str, ...] = ("parties", "smoking", "children under 10", "pets", "visitors")
ROOM_TYPES: tuple[str, ...] = ("shared room", "not shared room", "private room", "entire room")
TRANSPORT_CONSTRAINTS: tuple[str, ...] = ("no flight", "no self-driving")
CUISINES: tuple[str, ...] = ("Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French")

COMMONSENSE_KEYS: tuple[str, ...] = (
    "is_reasonable_visiting_city",
    "is_valid_restaurants",
    "is_valid_attractions",
    "is_valid_accommodation",
    "is_valid_transportation",
    "is_valid_information_in_current_city",
    "is_valid_information_in_sandbox",
    "is_not_absent",
)
HARD_KEYS: tuple[str, ...] = (
    "valid_cost",
    "valid_room_rule",
    "valid_cuisine",
    "valid_room_type",
    "valid_transportation",
)
_CONSTRAINT_VALUES: dict[str, tuple[str, ...]] = {
    "house rule": HOUSE_RULES,
    "cuisine": CUISINES,
    "room type": ROOM_TYPES,
    "transportation": TRANSPORT_CONSTRAINTS,
}
PLAN_KEYS: tuple[str, ...] = (
    "days",
    "current_city",
    "transportation",
    "breakfast",
    "attraction",
    "lunch",
    "dinner",
    "accommodation",
)


MAX_LITERAL_CHARS = 200_000
"""Longest literal string :func:`parse_literal` parses (a 7-day reference plan is a few kB)."""
MAX_LITERAL_DEPTH = 32
"""Deepest bracket nesting :func:`parse_literal` parses (a plan nests 3 deep); deeper is refused unparsed."""


class RecordError(ValueError):
    """A query-record field holds a value outside the spec; the message names the field and the value."""

    def __init__(self, field: str, value: Any, why: str) -> None:
        """Build the one-sentence message ``query record field 'f' = value: why``."""
        self.field = field
        self.value = value
        try:
            shown = repr(value)
        except RecursionError:
            shown = f"<{type(value).__name__} nested too deep to show>"
        if len(shown) > 80:
            shown = f"{shown[:60]}… ({len(shown)} characters)"
        super().__init__(f"query record field {field!r} = {shown}: {why}")


def _nesting_depth(text: str) -> int:
    """Return the deepest bracket nesting of ``text`` (brackets inside quotes count too: an upper bound)."""
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth = max(0, depth - 1)
    return deepest


def parse_literal(value: Any, field: str = "value") -> Any:
    """Parse a value that public copies store as a Python-literal or JSON string; never ``eval``.

    The string is refused before parsing when it is longer than :data:`MAX_LITERAL_CHARS` or nests
    brackets deeper than :data:`MAX_LITERAL_DEPTH`, so hostile input can neither exhaust memory nor
    recurse without end.

    >>> parse_literal("['2022-03-16', '2022-03-17']")
    ['2022-03-16', '2022-03-17']
    >>> parse_literal({"a": 1})
    {'a': 1}

    Raises:
        RecordError: naming ``field`` when the string is too long, too deep, or not a literal.

    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if len(text) > MAX_LITERAL_CHARS:
        raise RecordError(field, value, f"a literal longer than {MAX_LITERAL_CHARS:,} characters is refused")
    if _nesting_depth(text) > MAX_LITERAL_DEPTH:
        raise RecordError(field, value, f"nests brackets deeper than {MAX_LITERAL_DEPTH} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise RecordError(field, value, f"not a JSON or Python literal ({type(exc).__name__})") from None


def _integer(field: str, value: Any, *, money: bool = False) -> int:
    """Return ``value`` as an int: an int, an integral finite float, or a string of digits (not a bool).

    With ``money``, a string may carry a leading ``$`` and thousands separators (``"$1,700"``).
    """
    if isinstance(value, bool):
        raise RecordError(field, value, "must be a whole number, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        raise RecordError(field, value, "must be a whole finite number")
    if isinstance(value, str):
        text = value.strip()
        if money:
            text = text.removeprefix("$")
            if _THOUSANDS.fullmatch(text):
                text = text.replace(",", "")
        if _WHOLE.fullmatch(text):
            return int(float(text)) if "." in text else int(text)
        raise RecordError(field, value, "must be a whole number")
    raise RecordError(field, value, f"must be a whole number, not {type(value).__name__}")


def _text(field: str, value: Any, *, required: bool = True) -> str:
    """Return ``value`` if it is a string (non-blank when ``required``)."""
    if not isinstance(value, str):
        raise RecordError(field, value, f"must be a string, not {type(value).__name__}")
    if required and not value.strip():
        raise RecordError(field, value, "must not be empty")
    return value


_WHOLE = re.compile(r"[+-]?\d{1,15}(\.0+)?")
_THOUSANDS = re.compile(r"\d{1,3}(,\d{3})+(\.0+)?")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
VISITING_CITIES: dict[int, int] = {3: 1, 5: 2, 7: 3}
"""Trip length → number of visiting cities (spec §1)."""
PEOPLE_RANGE: tuple[int, int] = (1, 8)
"""Group sizes a query may ask for, inclusive (spec §1)."""


def _dates(value: Any, days: int) -> tuple[str, ...]:
    """Return the trip's dates: ``days`` consecutive ISO dates (a list or its literal string)."""
    dates = parse_literal(value, "date")
    if not isinstance(dates, (list, tuple)):
        raise RecordError("date", value, f"must be a list of {days} ISO dates, not {type(dates).__name__}")
    if len(dates) != days:
        raise RecordError("date", value, f"lists {len(dates)} dates; the trip has days={days}")
    parsed = []
    for item in dates:
        try:
            if not isinstance(item, str) or not _ISO_DATE.fullmatch(item):
                raise ValueError
            parsed.append(_dt.date.fromisoformat(item))
        except ValueError:
            raise RecordError("date", value, f"{item!r} is not an ISO date YYYY-MM-DD") from None
    if any((b - a).days != 1 for a, b in zip(parsed, parsed[1:], strict=False)):
        raise RecordError("date", value, "the dates must be consecutive days")
    return tuple(dates)


def _reference_plan(value: Any) -> tuple[DayPlan, ...] | None:
    """Return the record's reference plan (list of day dicts or its literal string), or None."""
    if value is None or (isinstance(value, (str, list, tuple)) and not value):
        return None
    plan = parse_literal(value, "reference_plan")
    if not isinstance(plan, (list, tuple)) or not all(isinstance(d, dict) for d in plan):
        raise RecordError("reference_plan", value, "must be a list of day objects")
    out = []
    for day in plan:
        fields = {k: day[k] for k in PLAN_KEYS if k in day and day[k] is not None}
        if "current_city" not in fields:
            raise RecordError("reference_plan", value, "a day lacks 'current_city'")
        for key, item in fields.items():
            if key == "days":
                fields[key] = _integer("reference_plan.days", item)
            else:
                _text(f"reference_plan.{key}", item, required=False)
        fields.setdefault("days", len(out) + 1)
        out.append(DayPlan(**fields))
    return tuple(out)


# ───────────────────────────── database rows ─────────────────────────────


@dataclass(frozen=True, slots=True)
class Flight:
    """One row of ``clean_Flights_2022.csv``."""

    number: str
    """Flight Number, e.g. ``F3573659``."""
    price: int
    """Price per person in dollars."""
    dep_time: str
    """DepTime ``HH:MM``."""
    arr_time: str
    """ArrTime ``HH:MM``."""
    elapsed: str
    """ActualElapsedTime, official string form (``"1 hours 24 minutes"``)."""
    date: str
    """FlightDate ``YYYY-MM-DD``."""
    origin: str
    """OriginCityName."""
    dest: str
    """DestCityName."""
    distance: float
    """Distance in miles, as in the official table."""


@dataclass(frozen=True, slots=True)
class Accommodation:
    """One row of ``clean_accommodations_2022.csv``."""

    name: str
    price: float
    """Nightly price of the listing (whole listing)."""
    room_type: str
    """``Entire home/apt`` | ``Private room`` | ``Shared room``."""
    house_rules: str
    """E.g. ``"No parties & No children under 10"``; empty string when none."""
    minimum_nights: float
    maximum_occupancy: int
    review_rate: float
    city: str


@dataclass(frozen=True, slots=True)
class Restaurant:
    """One row of ``clean_restaurant_2022.csv``."""

    name: str
    city: str
    cuisines: str
    """Comma-separated list as in the official table."""
    average_cost: float
    rating: float


@dataclass(frozen=True, slots=True)
class Attraction:
    """One row of ``attractions.csv``."""

    name: str
    latitude: float
    longitude: float
    address: str
    phone: str
    website: str
    city: str


@dataclass(frozen=True, slots=True)
class Distance:
    """One row of ``distance.csv`` with the derived costs of §2 of the spec."""

    origin: str
    dest: str
    duration: str
    """Official string form (``"14 hours 4 mins"``); contains ``day`` when the route is too long."""
    distance: str
    """Official string form (``"1,433 km"``)."""
    km: float

    @property
    def valid(self) -> bool:
        """A route whose duration contains ``day`` has no valid information (official rule)."""
        return "day" not in self.duration

    def cost(self, mode: str) -> int | None:
        """Return one vehicle's cost: self-driving ``int(km*0.05)``, taxi ``int(km)``; None if invalid."""
        if not self.valid:
            return None
        return int(self.km * 0.05) if mode == "driving" else int(self.km)


# ───────────────────────────── tasks ─────────────────────────────


@dataclass(frozen=True)
class LocalConstraint:
    """The four local constraints of a query; ``None`` means not requested."""

    house_rule: str | None = None
    """One of :data:`HOUSE_RULES` (the rule the group needs allowed), or None."""
    cuisine: tuple[str, ...] | None = None
    """Cuisines the group wants to try, or None."""
    room_type: str | None = None
    """One of :data:`ROOM_TYPES`, or None."""
    transportation: str | None = None
    """One of :data:`TRANSPORT_CONSTRAINTS`, or None."""

    def to_dict(self) -> dict[str, Any]:
        """Official key names (``'house rule'``, ``'cuisine'``, ``'room type'``, ``'transportation'``)."""
        return {
            "house rule": self.house_rule,
            "cuisine": list(self.cuisine) if self.cuisine is not None else None,
            "room type": self.room_type,
            "transportation": self.transportation,
        }

    @classmethod
    def from_dict(cls, data: Any) -> LocalConstraint:
        """Build from the official dict (or its literal string); None or empty means no constraint.

        Keys must be among ``house rule``, ``cuisine``, ``room type``, ``transportation`` and values among
        :data:`HOUSE_RULES`, :data:`CUISINES` (one or a list), :data:`ROOM_TYPES`,
        :data:`TRANSPORT_CONSTRAINTS` or None (spec §1).

        Raises:
            RecordError: naming the key and value outside the spec.

        """
        blank = data is None or (isinstance(data, str) and not data.strip())
        parsed = None if blank else parse_literal(data, "local_constraint")
        if parsed is None or (isinstance(parsed, (str, dict)) and not parsed):
            return cls()
        if not isinstance(parsed, dict):
            raise RecordError("local_constraint", data, f"must be a dict, not {type(parsed).__name__}")
        unknown = [k for k in parsed if k not in _CONSTRAINT_VALUES]
        if unknown:
            raise RecordError(
                "local_constraint", data, f"unknown key(s) {unknown}; use {list(_CONSTRAINT_VALUES)}"
            )
        for key in ("house rule", "room type", "transportation"):
            value = parsed.get(key)
            if value is not None and value not in _CONSTRAINT_VALUES[key]:
                raise RecordError(
                    f"local_constraint[{key!r}]", value, f"use one of {list(_CONSTRAINT_VALUES[key])} or None"
                )
        cuisine = parsed.get("cuisine")
        if isinstance(cuisine, str):
            cuisine = [cuisine]
        if cuisine is not None:
            if not isinstance(cuisine, (list, tuple)) or any(c not in CUISINES for c in cuisine):
                raise RecordError(
                    "local_constraint['cuisine']",
                    parsed.get("cuisine"),
                    f"use a list of {list(CUISINES)} or None",
                )
        return cls(
            house_rule=parsed.get("house rule"),
            cuisine=tuple(cuisine) if cuisine else None,
            room_type=parsed.get("room type"),
            transportation=parsed.get("transportation"),
        )

    @property
    def requested(self) -> list[str]:
        """Names of the requested constraints, in official order."""
        pairs = [
            ("house rule", self.house_rule),
            ("cuisine", self.cuisine),
            ("room type", self.room_type),
            ("transportation", self.transportation),
        ]
        return [name for name, value in pairs if value is not None]


@dataclass(frozen=True)
class DayPlan:
    """One day of a plan, with the official keys (§4 of the spec)."""

    days: int
    current_city: str
    transportation: str = "-"
    breakfast: str = "-"
    attraction: str = "-"
    lunch: str = "-"
    dinner: str = "-"
    accommodation: str = "-"

    def to_dict(self) -> dict[str, Any]:
        """Return the official submission dict."""
        return asdict(self)


@dataclass(frozen=True)
class QueryRecord:
    """One task: the official query fields plus our extensions (``idx``, ``reference_plan``)."""

    org: str
    dest: str
    days: int
    visiting_city_number: int
    date: tuple[str, ...]
    people_number: int
    local_constraint: LocalConstraint
    budget: int
    query: str = ""
    level: str = "easy"
    idx: int | None = None
    reference_plan: tuple[DayPlan, ...] | None = None
    """A plan that passes the strict evaluator, when the synthesiser built one."""

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form with official field names (lists and dicts, not literal strings)."""
        out: dict[str, Any] = {
            "org": self.org,
            "dest": self.dest,
            "days": self.days,
            "visiting_city_number": self.visiting_city_number,
            "date": list(self.date),
            "people_number": self.people_number,
            "local_constraint": self.local_constraint.to_dict(),
            "budget": self.budget,
            "query": self.query,
            "level": self.level,
        }
        if self.idx is not None:
            out["idx"] = self.idx
        if self.reference_plan is not None:
            out["reference_plan"] = [d.to_dict() for d in self.reference_plan]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueryRecord:
        """Build and validate a record from plain JSON or the official CSV/HF form (literal strings).

        Accepts the official field names and value forms: ``date`` and ``local_constraint`` as lists/dicts
        or their Python-literal strings, whole numbers as ints or digit strings (``budget`` also as
        ``"$1,700"``). Validates every field against spec §1: ``days`` ∈ {3, 5, 7}, ``visiting_city_number``
        = 1/2/3 for 3/5/7 days (derived when absent), ``date`` = ``days`` consecutive ISO dates,
        ``people_number`` ∈ 1..8, ``budget`` a positive whole number, ``level`` ∈ :data:`LEVELS`, and
        ``local_constraint`` keys/values of the spec. Other fields (``annotated_plan``,
        ``reference_information``) are ignored.

        Raises:
            RecordError: (a ``ValueError``) naming the field that is missing or malformed and its value.

        """
        if not isinstance(data, dict):
            raise RecordError("record", data, f"must be a JSON object, not {type(data).__name__}")
        missing = [
            k for k in ("org", "dest", "days", "date", "people_number", "budget") if data.get(k) is None
        ]
        if missing:
            raise RecordError(
                missing[0], None, f"required field(s) {missing} missing; record has {sorted(data)}"
            )
        days = _integer("days", data["days"])
        if days not in VISITING_CITIES:
            raise RecordError("days", data["days"], f"a trip lasts {sorted(VISITING_CITIES)} days")
        cities = data.get("visiting_city_number")
        visiting = VISITING_CITIES[days] if cities is None else _integer("visiting_city_number", cities)
        if visiting != VISITING_CITIES[days]:
            raise RecordError(
                "visiting_city_number", cities, f"a {days}-day trip visits {VISITING_CITIES[days]} city(ies)"
            )
        people = _integer("people_number", data["people_number"])
        if not PEOPLE_RANGE[0] <= people <= PEOPLE_RANGE[1]:
            raise RecordError("people_number", data["people_number"], "use 1 to 8 people")
        budget = _integer("budget", data["budget"], money=True)
        if budget <= 0:
            raise RecordError("budget", data["budget"], "must be a positive number of dollars")
        level = data.get("level")
        level = "easy" if level is None else _text("level", level)
        if level not in LEVELS:
            raise RecordError("level", level, f"use one of {list(LEVELS)}")
        idx = data.get("idx")
        return cls(
            org=_text("org", data["org"]).strip(),
            dest=_text("dest", data["dest"]).strip(),
            days=days,
            visiting_city_number=visiting,
            date=_dates(data["date"], days),
            people_number=people,
            local_constraint=LocalConstraint.from_dict(data.get("local_constraint")),
            budget=budget,
            query=_text("query", data.get("query") or "", required=False),
            level=level,
            idx=None if idx is None else _integer("idx", idx),
            reference_plan=_reference_plan(data.get("reference_plan")),
        )


# ───────────────────────────── environment steps ─────────────────────────────


@dataclass(frozen=True)
class ToolCall:
    """A parsed tool call: ``{"name": …, "arguments": {…}}``."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Observation:
    """What a tool returns. Errors are data, never exceptions."""

    text: str
    """The text the agent sees."""
    ok: bool = True
    """False for any error observation (bad arguments, no result, injected failure)."""
    error: str | None = None
    """``unknown_tool`` | ``bad_arguments`` | ``no_result`` | ``service_failure`` | None."""
    fault: str | None = None
    """Injected fault kind: ``failure`` | ``corruption`` | None."""


@runtime_checkable
class Tools(Protocol):
    """Anything an episode can call tools on (travel registry, fault wrapper, QA search)."""

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style function schemas ``{"type": "function", "function": {...}}``."""
        ...

    def call(self, name: str, arguments: Any) -> Observation:
        """Run one tool call; never raises on bad input."""
        ...


# ───────────────────────────── evaluation ─────────────────────────────


@dataclass(frozen=True)
class CheckResult:
    """One constraint verdict: passed True/False, or None when not applicable."""

    passed: bool | None
    reason: str | None = None


@dataclass(frozen=True)
class EvaluationReport:
    """All verdicts for one plan.

    ``hard`` is None when the hard checks were skipped (official rule: they run only when
    ``is_not_absent`` and ``is_valid_information_in_sandbox`` pass).
    """

    commonsense: dict[str, CheckResult]
    hard: dict[str, CheckResult] | None
    mode: str = "strict"
    delivered: bool = True
    """False when there was no (parseable) plan."""
    hard_applicable: int = 1
    """Number of applicable hard checks for this query (budget + each requested constraint)."""

    @property
    def commonsense_passed(self) -> int:
        """Number of commonsense checks passed (out of 8)."""
        return sum(1 for r in self.commonsense.values() if r.passed is True)

    @property
    def commonsense_all(self) -> bool:
        """All eight commonsense checks pass (None counts as passing, as officially)."""
        return self.delivered and all(r.passed is not False for r in self.commonsense.values())

    @property
    def hard_passed(self) -> int:
        """Number of applicable hard checks passed (0 when skipped)."""
        if self.hard is None:
            return 0
        return sum(1 for r in self.hard.values() if r.passed is True)

    @property
    def hard_all(self) -> bool:
        """All applicable hard checks pass; a skipped hard evaluation does not pass."""
        return self.hard is not None and all(r.passed is not False for r in self.hard.values())

    @property
    def final_pass(self) -> bool:
        """Everything passes."""
        return self.commonsense_all and self.hard_all

    @property
    def cs_micro(self) -> float:
        """Share of the eight commonsense checks passed."""
        return self.commonsense_passed / len(COMMONSENSE_KEYS)

    @property
    def hard_micro(self) -> float:
        """Share of applicable hard checks passed."""
        return self.hard_passed / max(1, self.hard_applicable)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready verdicts in the CLI's per-plan format."""
        return {
            "mode": self.mode,
            "delivered": self.delivered,
            "commonsense": {k: asdict(v) for k, v in self.commonsense.items()},
            "hard": None if self.hard is None else {k: asdict(v) for k, v in self.hard.items()},
            "final_pass": self.final_pass,
        }


# ───────────────────────────── episodes ─────────────────────────────


class Termination(str, Enum):
    """Why an episode ended. ``ANSWER`` is *terminated*; the limits are *truncated* (Gymnasium terms)."""

    ANSWER = "answer"
    TURN_LIMIT = "turn_limit"
    CONTEXT_LIMIT = "context_limit"
    MALFORMED = "malformed"

    @property
    def truncated(self) -> bool:
        """Hit a budget rather than finishing the task."""
        return self in (Termination.TURN_LIMIT, Termination.CONTEXT_LIMIT)


@dataclass
class EpisodeResult:
    """One finished multi-turn episode, ready for rewards, logging and training."""

    query: QueryRecord
    messages: list[dict[str, Any]]
    termination: Termination
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    """1 on model-generated tokens, 0 on environment tokens; same length as ``completion_ids``."""
    logprobs: list[float] | None = None
    """Per-token sampling logprobs (0.0 on environment tokens) when the backend gives them."""
    tool_calls: int = 0
    valid_tool_calls: int = 0
    format_errors: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    plan: tuple[DayPlan, ...] | None = None
    plan_error: str | None = None
    report: EvaluationReport | None = None
    turns: int = 0

    @property
    def malformed(self) -> bool:
        """Format gate input: any format error, no parseable plan, or an unfinished episode."""
        return self.format_errors > 0 or self.plan is None or self.termination is not Termination.ANSWER
