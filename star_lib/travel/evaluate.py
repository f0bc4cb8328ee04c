"""Score plans against a World: the TravelPlanner evaluator in ``official`` and ``strict`` mode (spec §5–§6).

:class:`Evaluator` builds its name indexes once per World (lazily, per city) and memoises parsed days, name
splits, lookups and per-day verdicts, so the many near-identical plans of RL rollouts are cheap;
:func:`evaluate_plan` keeps one Evaluator per (world, mode), so calling it in a loop costs only the checks.
The checks themselves, and the table of every difference between the modes (:data:`STRICT_RULES`), live in
:mod:`star_lib.travel.checks`.

>>> from star_lib.travel.evaluate import transport_kind
>>> transport_kind("Driving from A to B", "official") is None, transport_kind("Driving from A to B", "strict")
(True, 'self-driving')
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from star_lib.travel.checks import (
    COMMONSENSE_CHECKS,
    HARD_CHECKS,
    MODE_RULES,
    STRICT_RULES,
    Day,
    PlanContext,
    WorldIndex,
    normalise,
    parse_day,
    split_name_city,
    transport_kind_for,
    trip_cost,
)
from star_lib.types import COMMONSENSE_KEYS, CheckResult, DayPlan, EvaluationReport, QueryRecord

__all__ = [
    "MODES",
    "STRICT_RULES",
    "Evaluator",
    "evaluate_plan",
    "get_evaluator",
    "plan_cost",
    "transport_kind",
    "undelivered_report",
]

MODES: tuple[str, ...] = ("official", "strict")

_NO_PLAN = CheckResult(False, "No plan was delivered.")


def _check_mode(mode: str) -> frozenset[str]:
    if mode not in MODE_RULES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return MODE_RULES[mode]


def transport_kind(text: str, mode: str = "strict") -> str | None:
    """Transport type of a transportation text: ``flight`` | ``taxi`` | ``self-driving`` | None.

    Official: contains ``taxi`` → taxi, else ``self-driving`` → self-driving, else ``flight`` → flight
    (case-insensitive), else None (quirk #51). Strict: any other filled text is self-driving. ``'-'`` and
    empty text are None in both modes.

    >>> transport_kind("Taxi, from A to B", "official"), transport_kind("-", "strict")
    ('taxi', None)
    """
    return transport_kind_for(text.strip(), _check_mode(mode))


def undelivered_report(
    query: QueryRecord, mode: str = "strict", reason: str | None = None
) -> EvaluationReport:
    """Build the report of a missing/unparseable plan: every commonsense check fails, hard checks skipped."""
    result = _NO_PLAN if reason is None else CheckResult(False, reason)
    return EvaluationReport(
        commonsense={key: result for key in COMMONSENSE_KEYS},
        hard=None,
        mode=mode,
        delivered=False,
        hard_applicable=1 + len(query.local_constraint.requested),
    )


class Evaluator:
    """The TravelPlanner evaluator bound to one World and one mode.

    Args:
        world: a :class:`star_lib.travel.world.World` (anything with its lookup methods).
        mode: ``"strict"`` (default; the reward) or ``"official"`` (reproduces the official verdicts).
        rules: override the strict rules applied (a subset of :data:`STRICT_RULES`), e.g. for ablations.

    Raises:
        ValueError: for an unknown mode or rule name.

    """

    def __init__(self, world: Any, mode: str = "strict", rules: frozenset[str] | None = None) -> None:
        self.mode = mode
        self.rules = _check_mode(mode) if rules is None else frozenset(rules)
        unknown = self.rules - set(STRICT_RULES)
        if unknown:
            raise ValueError(f"unknown strict rule(s) {sorted(unknown)}; choose from {sorted(STRICT_RULES)}")
        self.world = world
        self.index = WorldIndex(world, self.rules)
        self._splits: dict[str, Any] = {}
        self._days: dict[tuple[int, DayPlan], Day] = {}
        self._normalise_names = "exact_names" in self.rules

    # ── public API ──

    def evaluate(self, query: QueryRecord, plan: Sequence[DayPlan] | None) -> EvaluationReport:
        """All 13 verdicts for one plan; never raises on a bad plan.

        Hard checks run only when ``is_not_absent`` and ``is_valid_information_in_sandbox`` pass (official
        rule); a ``None``/empty plan is undelivered.
        """
        if not plan:
            return undelivered_report(query, self.mode)
        try:
            ctx = self.context(query, plan)
            commonsense = {key: check(ctx) for key, check in COMMONSENSE_CHECKS.items()}
            hard = None
            if commonsense["is_not_absent"].passed and commonsense["is_valid_information_in_sandbox"].passed:
                hard = {key: check(ctx) for key, check in HARD_CHECKS.items()}
        except Exception as exc:  # noqa: BLE001 - errors are data: a bad plan must never crash a rollout
            return undelivered_report(query, self.mode, f"internal evaluator error: {exc!r}")
        return EvaluationReport(
            commonsense=commonsense,
            hard=hard,
            mode=self.mode,
            delivered=True,
            hard_applicable=1 + len(query.local_constraint.requested),
        )

    def cost(self, query: QueryRecord, plan: Sequence[DayPlan]) -> float:
        """Total trip cost for the group as the ``valid_cost`` check computes it (unknown items cost 0)."""
        if not plan:
            return 0.0
        return trip_cost(self.context(query, plan))

    def context(self, query: QueryRecord, plan: Sequence[DayPlan]) -> PlanContext:
        """Parse a plan once for all checks (the first ``min(query.days, len(plan))`` days)."""
        plan = tuple(plan)
        days = [self._day(i, day) for i, day in enumerate(plan[: max(0, query.days)])]
        return PlanContext(query=query, plan=plan, days=days, index=self.index, rules=self.rules)

    def clear_caches(self) -> None:
        """Drop every memo (parsed days, splits, name lookups, routes); the indexes by city stay."""
        self._days.clear()
        self._splits.clear()
        self.index.clear_memo()

    # ── internals ──

    def _day(self, index: int, day: DayPlan) -> Day:
        """Return the parsed day, shared by every plan holding the same day at the same position."""
        key = (index, day)
        parsed = self._days.get(key)
        if parsed is None:
            if len(self._days) >= WorldIndex.MEMO_LIMIT:
                self._days.clear()
            parsed = self._days[key] = parse_day(index, day, self.rules, self._split)
        return parsed

    def _split(self, text: str) -> Any:
        """Memoised ``'Name, City'`` split; names and cities whitespace-normalised under ``exact_names``."""
        found = self._splits.get(text, self)
        if found is self:
            if len(self._splits) >= WorldIndex.MEMO_LIMIT:
                self._splits.clear()
            found = split_name_city(text)
            if found is not None and self._normalise_names:
                found = (normalise(found[0]), normalise(found[1]))
            self._splits[text] = found
        return found


# ───────────────────────────── one cached Evaluator per (world, mode) ─────────────────────────────

_EVALUATORS: dict[tuple[int, str], tuple[Any, Evaluator]] = {}


def get_evaluator(world: Any, mode: str = "strict") -> Evaluator:
    """Return the cached Evaluator of ``(world, mode)``; dropped when the world is garbage-collected."""
    key = (id(world), mode)
    entry = _EVALUATORS.get(key)
    if entry is not None:
        ref, evaluator = entry
        if (ref() if isinstance(ref, weakref.ref) else ref) is world:
            return evaluator
    evaluator = Evaluator(world, mode)
    try:
        holder: Any = weakref.ref(world, lambda _r, k=key, cache=_EVALUATORS: cache.pop(k, None))
    except TypeError:  # not weak-referenceable: keep it alive with the cache
        holder = world
    _EVALUATORS[key] = (holder, evaluator)
    return evaluator


def evaluate_plan(
    query: QueryRecord, plan: Sequence[DayPlan] | None, world: Any, mode: str = "strict"
) -> EvaluationReport:
    """Evaluate one plan with the cached Evaluator of ``(world, mode)``.

    >>> from star_lib.types import LocalConstraint
    >>> q = QueryRecord(org="A", dest="B", days=3, visiting_city_number=1, date=("d1", "d2", "d3"),
    ...                 people_number=1, local_constraint=LocalConstraint(), budget=100)
    >>> evaluate_plan(q, None, world=None, mode="official").delivered
    False
    """
    if not plan:
        return undelivered_report(query, _mode_name(mode))
    return get_evaluator(world, mode).evaluate(query, plan)


def plan_cost(query: QueryRecord, plan: Sequence[DayPlan], world: Any, mode: str = "strict") -> float:
    """Total trip cost for the group, as ``valid_cost`` computes it in ``mode``."""
    return get_evaluator(world, mode).cost(query, plan)


def _mode_name(mode: str) -> str:
    _check_mode(mode)
    return mode
