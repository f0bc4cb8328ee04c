"""Score plans against a World: the TravelPlanner evaluator in ``official`` and ``strict`` mode (spec §5–§6).

:class:`Evaluator` builds its name indexes once per World (lazily, per city) and memoises parsed days, name
splits, lookups and per-day verdicts, so the many near-identical plans of RL rollouts are cheap;
:func:`evaluate_plan` keeps one Evaluator per (world, mode), so calling it in a loop costs only the checks.
The checks themselves, and the table of every difference between the modes (:data:`STRICT_RULES`), live in
:mod:`star_lib.travel.checks`.

How each mode reads a raw payload (:meth:`Evaluator.evaluate_payload`, what ``star eval`` calls):

* ``official`` reads the plan exactly as the official ``eval.py`` and its checks do, and nothing is
  validated: unknown keys are ignored (but counted as filled by ``is_not_absent``), ``days`` is never
  read, days after the trip's length are never read, a missing key is skipped or raises exactly where the
  official code skips or raises, ``None``/``0``/``[]`` are empty but not ``'-'``, non-string values behave as
  Python makes them. An empty plan is undelivered. Where the official code raises, the plan is *not
  scorable* (:class:`PlanVerdict` ``scorable=False``, ``error`` naming the raising check); its report fails
  the raising check and every later one. Regular plans use the fast checks; others
  :mod:`star_lib.travel.official`.
* ``strict`` (the reward's evaluator) parses with :func:`~star_lib.travel.plan.parse_plan_keys`: the payload
  must decode to day objects with only the official keys, each once (a text naming a key twice is refused,
  where ``json.loads`` keeps the last value), surrounding whitespace stripped, string texts and ``days``
  numbered 1, 2, …; anything else is a format error and the plan is undelivered (an unknown or
  misspelt key could carry text past the checks). A day that *lacks* keys is delivered: the lacking texts
  read as ``'-'``, ``is_not_absent`` fails naming the day and keys, and the hard checks are skipped. Extra
  days fail ``is_not_absent`` (rule ``extra_days``). Where the official code raises, strict fails the check
  instead (rule ``crash_is_failure``).

>>> from star_lib.travel.evaluate import transport_kind
>>> transport_kind("Driving from A to B", "official") is None, transport_kind("Driving from A to B", "strict")
(True, 'self-driving')
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

from star_lib.travel.checks import (
    COMMONSENSE_CHECKS,
    HARD_CHECKS,
    MODE_RULES,
    STRICT_RULES,
    Day,
    OfficialError,
    PlanContext,
    WorldIndex,
    normalise,
    parse_day,
    split_name_city,
    transport_kind_for,
    trip_cost,
)
from star_lib.types import COMMONSENSE_KEYS, HARD_KEYS, CheckResult, DayPlan, EvaluationReport, QueryRecord

__all__ = [
    "MODES",
    "STRICT_RULES",
    "Evaluator",
    "PlanVerdict",
    "evaluate_plan",
    "get_evaluator",
    "plan_cost",
    "transport_kind",
    "undelivered_report",
    "unscorable_report",
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


def unscorable_report(
    query: QueryRecord, mode: str, error: OfficialError, done: dict[str, CheckResult] | None = None
) -> EvaluationReport:
    """Build the report of a plan the official evaluator raises on: no official verdict exists.

    The checks the official code finished before raising keep their verdicts (``done``); the raising check
    and every later one fail with the reason ``"Not scorable: …"``, so a metric counts the plan as failing.
    The plan was delivered (official ``eval.py`` counts delivery before it evaluates).
    """
    done = done or {}
    failed = CheckResult(False, f"Not scorable: {error}")
    commonsense = {key: done.get(key, failed) for key in COMMONSENSE_KEYS}
    hard = None
    if error.check in HARD_KEYS:
        hard = {key: done.get(key, failed) for key in HARD_KEYS}
    return EvaluationReport(
        commonsense=commonsense,
        hard=hard,
        mode=mode,
        delivered=True,
        hard_applicable=1 + len(query.local_constraint.requested),
    )


class PlanVerdict(NamedTuple):
    """One plan's report, with what kept it from a normal verdict.

    Attributes:
        report: the verdicts (an undelivered or not-scorable report when ``error`` is set).
        error: why the plan could not be parsed (undelivered) or why it is not scorable; None otherwise.
        scorable: False when the official evaluator raises on the plan (``official`` mode only).

    """

    report: EvaluationReport
    error: str | None = None
    scorable: bool = True


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
        rule; strict also asks ``is_reasonable_visiting_city``, rule ``hard_needs_route``); a ``None``/empty
        plan is undelivered. In ``official`` mode a plan the official evaluator raises on gets
        :func:`unscorable_report` (use :meth:`evaluate_verdict` to also get the error).
        """
        return self.evaluate_verdict(query, plan).report

    def evaluate_verdict(self, query: QueryRecord, plan: Sequence[DayPlan] | None) -> PlanVerdict:
        """Like :meth:`evaluate`, also saying whether (and why) the plan is not scorable."""
        if not plan:
            return PlanVerdict(undelivered_report(query, self.mode))
        done: dict[str, CheckResult] = {}
        try:
            ctx = self.context(query, plan)
            for key, check in COMMONSENSE_CHECKS.items():
                done[key] = check(ctx)
            commonsense = dict(done)
            hard = None
            if self._runs_hard(commonsense):
                hard = {key: check(ctx) for key, check in HARD_CHECKS.items()}
        except OfficialError as exc:
            return PlanVerdict(unscorable_report(query, self.mode, exc, done), str(exc), scorable=False)
        except Exception as exc:  # noqa: BLE001 - errors are data: a bad plan must never crash a rollout
            return PlanVerdict(undelivered_report(query, self.mode, f"internal evaluator error: {exc!r}"))
        return PlanVerdict(self._report(query, commonsense, hard))

    def _runs_hard(self, commonsense: dict[str, CheckResult]) -> bool:
        """Official: the hard checks run when ``is_not_absent`` and the sandbox pass (+ the route, strict)."""
        needed = ["is_not_absent", "is_valid_information_in_sandbox"]
        if "hard_needs_route" in self.rules:
            needed.append("is_reasonable_visiting_city")
        return all(commonsense[key].passed for key in needed)

    def evaluate_payload(self, query: QueryRecord, payload: Any) -> PlanVerdict:
        """Score a raw plan payload (a submission record, a day list, JSON text …) as the mode reads it.

        ``official``: the plan is what the official ``eval.py`` hands its checks (:func:`decode_plan`); an
        empty one is undelivered, a string that is neither JSON nor a literal is not scorable; regular plans
        take the fast checks, any other the faithful reading of :mod:`star_lib.travel.official`; where the
        official code raises, the verdict is not scorable.
        ``strict``: :func:`parse_plan_keys`; a payload it refuses is undelivered with the parse error, and a
        day lacking keys fails ``is_not_absent`` (hard checks skipped). Never raises on a bad payload.
        """
        from star_lib.travel.plan import PlanParseError, decode_plan, parse_plan_keys

        if payload is None or (isinstance(payload, dict) and "plan" in payload and not payload["plan"]):
            return PlanVerdict(undelivered_report(query, self.mode))
        try:
            if self.mode == "official":
                return self._official_payload(query, decode_plan(payload))
            plan, missing = parse_plan_keys(payload)
        except PlanParseError as exc:
            if self.mode == "official":  # eval.py eval()s a string record; the checks index a string plan
                check = "is_reasonable_visiting_city" if exc.key == "plan" else "eval.py"
                error = OfficialError(check, f"TypeError: the plan is a string ({exc})")
                return PlanVerdict(unscorable_report(query, self.mode, error), str(error), scorable=False)
            reason = f"Plan could not be parsed: {exc}"
            return PlanVerdict(undelivered_report(query, self.mode, reason), str(exc))
        except KeyError:
            error = OfficialError("eval.py", "KeyError: 'plan' (the record has no 'plan' field)")
            return PlanVerdict(unscorable_report(query, self.mode, error), str(error), scorable=False)
        verdict = self.evaluate_verdict(query, plan)
        if not missing or not verdict.report.delivered:
            return verdict
        commonsense = dict(verdict.report.commonsense)
        reason = str(missing[0])
        commonsense["is_not_absent"] = CheckResult(False, f"{reason[0].upper()}{reason[1:]}.")
        return PlanVerdict(self._report(query, commonsense, None), verdict.error, verdict.scorable)

    def _official_payload(self, query: QueryRecord, raw: Any) -> PlanVerdict:
        """Official verdicts of a decoded plan value."""
        from star_lib.travel.official import evaluate_irregular, is_regular

        try:
            if not raw:
                return PlanVerdict(undelivered_report(query, self.mode))
        except Exception:  # noqa: BLE001 - a value without a truth value: eval.py raises
            error = OfficialError("eval.py", "the plan has no truth value")
            return PlanVerdict(unscorable_report(query, self.mode, error), str(error), scorable=False)
        if is_regular(raw, query.days):
            days = tuple(_day_plan(unit) for unit in raw[: query.days])
            return self.evaluate_verdict(query, days)
        try:
            commonsense, hard = evaluate_irregular(query, raw, self.index)
        except OfficialError as exc:
            report = unscorable_report(query, self.mode, exc, getattr(exc, "done", None))
            return PlanVerdict(report, str(exc), scorable=False)
        return PlanVerdict(self._report(query, commonsense, hard))

    def _report(
        self, query: QueryRecord, commonsense: dict[str, CheckResult], hard: dict[str, CheckResult] | None
    ) -> EvaluationReport:
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


def _day_plan(unit: dict[str, Any]) -> DayPlan:
    """Turn a regular official day into a DayPlan; ``days`` keeps only whether the official count sees it."""
    number = unit["days"]
    counted = bool(number) and number != "-"
    return DayPlan(
        days=int(counted),
        current_city=unit["current_city"],
        transportation=unit["transportation"],
        breakfast=unit["breakfast"],
        attraction=unit["attraction"],
        lunch=unit["lunch"],
        dinner=unit["dinner"],
        accommodation=unit["accommodation"],
    )


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
