"""The data types every stage passes along — the contract between stages.

World rows (``Flight``, ``Accommodation``, …) are what the database returns; ``QueryRecord`` is a task;
``DayPlan`` is one day of a submitted plan; ``ToolCall``/``Observation`` are one environment step;
``CheckResult``/``EvaluationReport`` are the evaluator's verdicts; ``EpisodeResult`` is one finished
multi-turn episode. Everything here is plain data: no I/O, no model code.

Field names follow the official TravelPlanner data (see ``../shared/spec/TRAVELPLANNER.md`` §1–§5).
"""

from __future__ import annotations

import ast
import json
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


def parse_literal(value: Any) -> Any:
    """Parse a value that public copies store as a Python-literal or JSON string; never ``eval``.

    >>> parse_literal("['2022-03-16', '2022-03-17']")
    ['2022-03-16', '2022-03-17']
    >>> parse_literal({"a": 1})
    {'a': 1}
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return json.loads(text)
    except ValueError:
        return ast.literal_eval(text)


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
        """Build from the official dict (or its literal string)."""
        data = parse_literal(data) or {}
        if not isinstance(data, dict):
            raise ValueError(f"local_constraint must be a dict, got {type(data).__name__}")
        cuisine = data.get("cuisine")
        if isinstance(cuisine, str):
            cuisine = [cuisine]
        return cls(
            house_rule=data.get("house rule"),
            cuisine=tuple(cuisine) if cuisine else None,
            room_type=data.get("room type"),
            transportation=data.get("transportation"),
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
        """Build from plain JSON or the HF/CSV form whose values are literal strings.

        Raises:
            ValueError: naming the field that is missing or malformed.

        """
        missing = [k for k in ("org", "dest", "days", "date", "people_number", "budget") if k not in data]
        if missing:
            raise ValueError(f"query record lacks field(s) {missing}; has {sorted(data)}")
        try:
            dates = parse_literal(data["date"])
            ref = data.get("reference_plan")
            days = int(data["days"])
            return cls(
                org=str(data["org"]),
                dest=str(data["dest"]),
                days=days,
                visiting_city_number=int(data.get("visiting_city_number") or {3: 1, 5: 2, 7: 3}.get(days, 1)),
                date=tuple(str(d) for d in dates),
                people_number=int(data["people_number"]),
                local_constraint=LocalConstraint.from_dict(data.get("local_constraint")),
                budget=int(float(data["budget"])),
                query=str(data.get("query") or ""),
                level=str(data.get("level") or "easy"),
                idx=int(data["idx"]) if data.get("idx") is not None else None,
                reference_plan=(
                    tuple(DayPlan(**{k: d[k] for k in PLAN_KEYS if k in d}) for d in parse_literal(ref))
                    if ref
                    else None
                ),
            )
        except (TypeError, ValueError, SyntaxError, KeyError) as exc:
            raise ValueError(f"malformed query record: {exc}") from exc


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
