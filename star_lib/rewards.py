"""The four STAR rewards (spec §8) as pure functions of an evaluation report and the episode's format status.

Let ``cs_micro`` = passed commonsense checks / 8, ``hard_micro`` = passed applicable hard checks / applicable,
``cs_macro`` / ``hard_macro`` = 1 when all (commonsense / applicable hard) checks pass, ``success`` =
``final_pass`` (strict-mode report). Then

* SUCCESS = success
* MACRO = (cs_macro + hard_macro) / 2
* SUM = (cs_micro + hard_micro + cs_macro + hard_macro + success) / 5
* CURRICULUM = SUM, then MACRO, then SUCCESS, switching at fractions of training (default 1/3, 2/3)
* MILESTONE (experimental, not in the paper) = (SUM + the episode's milestone credit) / 2, see
  :func:`milestone_sum_reward`

:data:`REWARD_NAMES` lists them all and :func:`reward_value` is the one lookup by name (the episode
environment, the RL trainer's reward function and the eval stage all go through it).

**Format gate**: a malformed episode (any malformed turn, a missing or invalid ``<answer>`` JSON, an
unfinished episode) or a missing report earns 0 whatever the plan. Wrapped with :func:`trl_reward`, the
functions follow TRL's reward contract ``(completions, **columns) -> list[float]``.

**Completeness gate** (strict reports only): a plan whose strict report fails ``is_not_absent`` (Complete
Information: wrong number of days, wrong visiting-city count, a required field missing or naming nothing in
the database — a placeholder such as ``"TBD, City"``, strict rule ``named_fields`` — or more than half of
the fields empty) earns 0 under every reward — SUCCESS, MACRO, SUM, CURRICULUM and the milestone
reward. Without it, five commonsense checks pass vacuously on an empty plan, so an all-``"-"`` plan, a
1-day plan for a 3-day trip or a ``current_city`` of injected text scored 0.125 under SUM. Reports of
``official`` mode are scored as the formulas say (no gate), so official numbers stay faithful; see
:func:`incomplete_plan`.

:func:`milestone_credits` is an **experimental** step-level reward that none of the anchor papers uses: credit
for each tool call that retrieved information the final plan needed.

Example:
    >>> from star_lib.types import CheckResult, EvaluationReport, COMMONSENSE_KEYS, HARD_KEYS
    >>> ok = CheckResult(True)
    >>> report = EvaluationReport({k: ok for k in COMMONSENSE_KEYS},
    ...                           {k: ok if k == "valid_cost" else CheckResult(None) for k in HARD_KEYS})
    >>> success_reward(report, malformed=False), sum_reward(report, malformed=True)
    (1.0, 0.0)

"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from star_lib.types import DayPlan, EvaluationReport, Observation, QueryRecord, ToolCall

__all__ = [
    "CURRICULUM_STAGES",
    "DEFAULT_BOUNDARIES",
    "REWARDS",
    "REWARD_NAMES",
    "covers_trip",
    "curriculum_reward",
    "curriculum_stage",
    "incomplete_plan",
    "macro_reward",
    "milestone_credits",
    "milestone_reward",
    "milestone_sum_reward",
    "reward_components",
    "reward_value",
    "success_reward",
    "sum_reward",
    "trl_reward",
    "validate_boundaries",
]

DEFAULT_BOUNDARIES: tuple[float, float] = (1 / 3, 2 / 3)
"""Training fractions where CURRICULUM switches SUM → MACRO → SUCCESS (STAR paper default)."""

CURRICULUM_STAGES: tuple[str, ...] = ("sum", "macro", "success")

REWARD_NAMES: tuple[str, ...] = ("sum", "macro", "success", "curriculum", "milestone")
"""Every reward a run can train on: spec §8's four, then the experimental milestone reward (the one tuple of
reward names; the experiment config, the RL config and the episode config take theirs from it)."""


def incomplete_plan(report: EvaluationReport | None) -> bool:
    """Tell whether the completeness gate zeroes a report: strict mode and ``is_not_absent`` failed.

    ``is_not_absent`` fails for a plan that does not cover the trip's days (too few or, in strict mode,
    too many), visits the wrong number of cities, lacks a required field, or leaves over half of its
    fields empty. Official-mode reports are never gated (their numbers must match the official evaluator).

    >>> from star_lib.types import CheckResult, EvaluationReport, COMMONSENSE_KEYS
    >>> absent = {k: CheckResult(k != "is_not_absent") for k in COMMONSENSE_KEYS}
    >>> strict, official = EvaluationReport(absent, None), EvaluationReport(absent, None, "official")
    >>> incomplete_plan(strict), incomplete_plan(official)
    (True, False)
    """
    if report is None or report.mode != "strict":
        return False
    verdict = report.commonsense.get("is_not_absent")
    return verdict is not None and verdict.passed is False


def _gated(report: EvaluationReport | None, malformed: bool) -> bool:
    """Return True when the format gate or the completeness gate zeroes the reward."""
    return malformed or report is None or not report.delivered or incomplete_plan(report)


def reward_components(report: EvaluationReport | None, malformed: bool = False) -> dict[str, float]:
    """Return the five reward ingredients (before the gates), for logging under ``reward/``.

    ``reward/format_ok`` is 0 when the format gate zeroes the reward; ``reward/complete_plan`` is 0 when
    the completeness gate does (:func:`incomplete_plan`).

    >>> reward_components(None)["reward/success"]
    0.0
    """
    if report is None or not report.delivered:
        parts = dict.fromkeys(("cs_micro", "hard_micro", "cs_macro", "hard_macro", "success"), 0.0)
    else:
        parts = {
            "cs_micro": float(report.cs_micro),
            "hard_micro": float(report.hard_micro),
            "cs_macro": float(report.commonsense_all),
            "hard_macro": float(report.hard_all),
            "success": float(report.final_pass),
        }
    out = {f"reward/{k}": v for k, v in parts.items()}
    out["reward/format_ok"] = 0.0 if malformed or report is None or not report.delivered else 1.0
    out["reward/complete_plan"] = 0.0 if report is None or incomplete_plan(report) else 1.0
    return out


def success_reward(report: EvaluationReport | None, malformed: bool) -> float:
    """SUCCESS: 1 when every check passes, else 0 (0 when malformed or incomplete).

    "Incomplete" is the completeness gate: a strict report whose ``is_not_absent`` fails (see
    :func:`incomplete_plan`).

    >>> success_reward(None, malformed=False)
    0.0
    """
    if _gated(report, malformed):
        return 0.0
    return float(report.final_pass)


def macro_reward(report: EvaluationReport | None, malformed: bool) -> float:
    """MACRO: (all commonsense pass + all applicable hard pass) / 2 (0 when malformed or incomplete).

    "Incomplete" is the completeness gate: a strict report whose ``is_not_absent`` fails (see
    :func:`incomplete_plan`).

    >>> macro_reward(None, malformed=True)
    0.0
    """
    if _gated(report, malformed):
        return 0.0
    return (float(report.commonsense_all) + float(report.hard_all)) / 2


def sum_reward(report: EvaluationReport | None, malformed: bool) -> float:
    """SUM: mean of cs_micro, hard_micro, cs_macro, hard_macro and success (0 when malformed or incomplete).

    "Incomplete" is the completeness gate: a strict report whose ``is_not_absent`` fails (see
    :func:`incomplete_plan`).

    >>> sum_reward(None, malformed=False)
    0.0
    """
    if _gated(report, malformed):
        return 0.0
    parts = reward_components(report)
    keys = ("cs_micro", "hard_micro", "cs_macro", "hard_macro", "success")
    return sum(parts[f"reward/{k}"] for k in keys) / len(keys)


def validate_boundaries(boundaries: Sequence[float]) -> tuple[float, float]:
    """Check curriculum boundaries: two fractions with 0 <= first <= second <= 1.

    Raises:
        ValueError: saying what to change.

    """
    if len(boundaries) != 2:
        raise ValueError(f"boundaries must be two fractions (sum→macro, macro→success), got {boundaries!r}")
    first, second = float(boundaries[0]), float(boundaries[1])
    if not 0.0 <= first <= second <= 1.0:
        raise ValueError(f"boundaries must satisfy 0 <= first <= second <= 1, got {boundaries!r}")
    return first, second


def curriculum_stage(progress: float, boundaries: Sequence[float] = DEFAULT_BOUNDARIES) -> str:
    """Return the CURRICULUM stage at a training fraction: ``sum`` | ``macro`` | ``success``.

    >>> [curriculum_stage(p) for p in (0.0, 0.5, 0.9)]
    ['sum', 'macro', 'success']

    Raises:
        ValueError: for progress outside [0, 1] or invalid boundaries.

    """
    first, second = validate_boundaries(boundaries)
    if not 0.0 <= progress <= 1.0:
        raise ValueError(f"progress is the fraction of training done, in [0, 1]; got {progress!r}")
    if progress < first:
        return "sum"
    if progress < second:
        return "macro"
    return "success"


def curriculum_reward(
    report: EvaluationReport | None,
    malformed: bool,
    progress: float,
    boundaries: Sequence[float] = DEFAULT_BOUNDARIES,
) -> float:
    """CURRICULUM: SUM, then MACRO, then SUCCESS as training progresses (all three keep both gates).

    Args:
        report: the strict-mode evaluation of the final plan (None when there is none).
        malformed: the episode's format-gate flag.
        progress: fraction of training done, in [0, 1].
        boundaries: the two switching fractions.

    >>> curriculum_reward(None, malformed=False, progress=0.1)
    0.0

    """
    stage = curriculum_stage(progress, boundaries)
    return REWARDS[stage](report, malformed)


REWARDS: dict[str, Callable[[EvaluationReport | None, bool], float]] = {
    "success": success_reward,
    "macro": macro_reward,
    "sum": sum_reward,
}
"""Stage-free rewards by name (CURRICULUM needs the training progress too)."""


def milestone_sum_reward(report: EvaluationReport | None, malformed: bool, credit: float) -> float:
    """MILESTONE (experimental RL reward): the mean of SUM and the episode's milestone credit.

    ``credit`` is :func:`milestone_reward` of the episode (the share of the retrievals its final plan needed
    that its tool calls made, in [0, 1]). The module's advice holds: the step-level credit shapes a §8
    reward rather than replacing it, so an episode that retrieves everything but delivers a wrong plan still
    earns less than a correct one. Both gates apply (a malformed or incomplete episode earns 0). GRPO sees
    the episode total, since it gives one advantage per episode.

    >>> milestone_sum_reward(None, malformed=False, credit=1.0)
    0.0
    """
    if _gated(report, malformed):
        return 0.0
    return (sum_reward(report, malformed) + float(credit)) / 2


def reward_value(
    name: str,
    report: EvaluationReport | None,
    malformed: bool,
    *,
    progress: float = 1.0,
    boundaries: Sequence[float] = DEFAULT_BOUNDARIES,
    credit: float | None = None,
) -> float:
    """Return reward ``name`` (one of :data:`REWARD_NAMES`) of one finished episode: the one lookup by name.

    Args:
        name: the reward.
        report: the strict-mode evaluation of the final plan (None when there is none).
        malformed: the episode's format-gate flag.
        progress: fraction of training done (``curriculum``; 1.0 after training).
        boundaries: the curriculum's switching fractions.
        credit: the episode's :func:`milestone_reward` (needed by ``milestone``).

    >>> reward_value("sum", None, False), reward_value("curriculum", None, False, progress=0.5)
    (0.0, 0.0)

    Raises:
        ValueError: for an unknown name, or ``milestone`` without the episode's credit.

    """
    if name in REWARDS:
        return REWARDS[name](report, malformed)
    if name == "curriculum":
        return curriculum_reward(report, malformed, progress, boundaries)
    if name == "milestone":
        if credit is None:
            raise ValueError("the milestone reward needs the episode's milestone credit (milestone_reward)")
        return milestone_sum_reward(report, malformed, credit)
    raise ValueError(f"unknown reward {name!r}; choose one of {REWARD_NAMES}")


def trl_reward(name: str, boundaries: Sequence[float] = DEFAULT_BOUNDARIES) -> Callable[..., list[float]]:
    """Wrap a reward in TRL's contract ``(completions, **columns) -> list[float]``.

    The wrapped function reads the columns ``report`` (EvaluationReport | None per completion), ``malformed``
    (bool per completion), for ``curriculum`` ``progress`` (a float or one per completion) and, for
    ``milestone``, ``milestone`` (each episode's :func:`milestone_reward`).

    >>> fn = trl_reward("success")
    >>> fn(["…", "…"], report=[None, None], malformed=[False, True])
    [0.0, 0.0]

    Raises:
        ValueError: for an unknown reward name; the wrapped function, for ``milestone`` without its column.

    """
    if name not in REWARD_NAMES:
        raise ValueError(f"unknown reward {name!r}; choose from {list(REWARD_NAMES)}")
    validate_boundaries(boundaries)

    def reward(completions: Sequence[Any], **columns: Any) -> list[float]:
        n = len(completions)
        reports = columns.get("report") or [None] * n
        malformed = columns.get("malformed") or [False] * n
        progress = columns.get("progress", 0.0)
        steps = progress if isinstance(progress, (list, tuple)) else [progress] * n
        credits = columns.get("milestone")
        if name == "milestone" and credits is None:
            raise ValueError("reward milestone: the rollout gave no 'milestone' column (episode credits)")
        credits = credits if credits is not None else [None] * n
        return [
            reward_value(name, r, bool(m), progress=float(p), boundaries=boundaries, credit=c)
            for r, m, p, c in zip(reports, malformed, steps, credits, strict=False)
        ]

    reward.__name__ = f"{name}_reward"
    return reward


# ───────────────────────────── EXPERIMENTAL: step-level milestone reward ─────────────────────────────


def _norm(value: Any) -> str:
    return " ".join(str(value).split()).casefold()


def _split_city(text: str) -> tuple[str, str] | None:
    cut = text.rfind(",")
    if cut < 0 or cut == len(text) - 1:
        return None
    city = text[cut + 1 :].strip()
    paren = city.find("(")
    return text[:cut].strip(), (city[:paren] if paren > 0 else city).strip()


def plan_milestones(plan: Sequence[DayPlan], query: QueryRecord | None = None) -> dict[tuple, set[str]]:
    """Map each retrieval the plan needed (milestone key) to the plan items its observation should mention.

    Keys: ``("SearchFlight", origin, dest[, date])``, ``("GoogleDistanceMatrix", origin, dest)``,
    ``("SearchRestaurant"|"SearchAttraction"|"SearchAccommodation", city)`` and, for multi-city trips,
    ``("SearchCity", state)``. All values are case-folded and whitespace-normalised.
    """
    from star_lib.travel.checks import before_paren, from_to

    needed: dict[tuple, set[str]] = {}
    for i, day in enumerate(plan):
        text = day.transportation.strip()
        if text not in ("", "-"):
            leg = from_to(text) or from_to(day.current_city)
            if leg is not None:
                origin, dest = _norm(before_paren(leg[0])), _norm(before_paren(leg[1]))
                if "flight number" in text.lower():
                    number = text.lower().split("flight number:", 1)[1].split(",", 1)[0].strip()
                    date = (_norm(query.date[i]),) if query is not None and i < len(query.date) else ()
                    needed.setdefault(("SearchFlight", origin, dest, *date), set()).add(number)
                else:
                    needed.setdefault(("GoogleDistanceMatrix", origin, dest), set())
        items = [("SearchRestaurant", getattr(day, slot)) for slot in ("breakfast", "lunch", "dinner")]
        items += [("SearchAttraction", a) for a in day.attraction.split(";") if a.strip()]
        items.append(("SearchAccommodation", day.accommodation))
        for tool, item in items:
            parts = _split_city(item.strip()) if item.strip() not in ("", "-") else None
            if parts is not None:
                needed.setdefault((tool, _norm(parts[1])), set()).add(_norm(parts[0]))
    if query is not None and query.days > 3:
        needed.setdefault(("SearchCity", _norm(query.dest)), set())
    return needed


def _call_key(call: ToolCall) -> tuple | None:
    """Return the milestone key a tool call addresses, or None."""
    args = call.arguments if isinstance(call.arguments, dict) else {}
    get = lambda name: _norm(args.get(name, ""))  # noqa: E731
    if call.name == "SearchFlight":
        return ("SearchFlight", get("departure"), get("destination"), get("date"))
    if call.name == "GoogleDistanceMatrix":
        return ("GoogleDistanceMatrix", get("departure"), get("destination"))
    if call.name in ("SearchRestaurant", "SearchAttraction", "SearchAccommodation"):
        return (call.name, get("city"))
    if call.name == "SearchCity":
        return ("SearchCity", get("state"))
    return None


def covers_trip(plan: Sequence[DayPlan], query: QueryRecord) -> bool:
    """Tell whether a plan has exactly one real day per trip day (placeholder and empty cities don't count).

    >>> from star_lib.types import DayPlan, LocalConstraint
    >>> q = QueryRecord("A", "B", 3, 1, ("2022-03-01", "2022-03-02", "2022-03-03"), 1, LocalConstraint(), 900)
    >>> covers_trip([DayPlan(1, "from A to B")], q), covers_trip([DayPlan(i, "B") for i in (1, 2, 3)], q)
    (False, True)
    """
    from star_lib.travel.checks import PLACEHOLDER_CITY

    real = [d for d in plan if d.current_city.strip() not in ("", "-", PLACEHOLDER_CITY)]
    return len(plan) <= query.days and len(real) == query.days


def milestone_credits(
    plan: Sequence[DayPlan] | None,
    steps: Sequence[tuple[ToolCall, Observation]],
    query: QueryRecord | None = None,
    report: EvaluationReport | None = None,
) -> list[float]:
    """EXPERIMENTAL step-level reward: credit for each tool call that retrieved what the final plan needed.

    Each needed retrieval (see :func:`plan_milestones`) is worth ``1 / number of milestones``; the *first*
    successful call (``observation.ok``) that addresses it earns that credit, provided its observation text
    mentions at least one of the plan items that needed it (a flight number, a restaurant name…; routes and
    city lists need no mention). Repeated, failed or irrelevant calls earn 0, so the credits sum to the
    share of needed information the agent actually retrieved, in [0, 1]. Not part of the STAR paper; use it
    as a shaping term next to a §8 reward, not instead of it.

    The completeness gate applies here too: every step earns 0 when ``report`` is a strict report whose
    ``is_not_absent`` fails (:func:`incomplete_plan`), or when ``query`` is given and the plan does not
    cover the trip's days (:func:`covers_trip`) — a 1-day plan for a 3-day trip earns nothing.

    Args:
        plan: the final plan (None or empty → every step earns 0).
        steps: the episode's (tool call, observation) pairs in order.
        query: the task; adds flight dates and the SearchCity milestone of multi-city trips.
        report: the plan's strict evaluation, when known (applies the completeness gate).

    Returns:
        One credit per step.

    >>> from star_lib.types import DayPlan, ToolCall, Observation
    >>> plan = [DayPlan(1, "Rockford", breakfast="Subway, Rockford")]
    >>> step = (ToolCall("SearchRestaurant", {"city": "Rockford"}), Observation("Subway | …"))
    >>> milestone_credits(plan, [step])
    [1.0]

    """
    credits = [0.0] * len(steps)
    if not plan or incomplete_plan(report) or (query is not None and not covers_trip(plan, query)):
        return credits
    needed = plan_milestones(plan, query)
    if not needed:
        return credits
    share = 1.0 / len(needed)
    done: set[tuple] = set()
    for position, (call, observation) in enumerate(steps):
        key = _call_key(call)
        if key is not None and key[0] == "SearchFlight" and query is None:
            key = key[:3]  # without the query the plan's flight dates are unknown
        if key is None or key not in needed or key in done or not observation.ok:
            continue
        mentions = needed[key]
        text = _norm(observation.text)
        if mentions and not any(item in text for item in mentions):
            continue
        done.add(key)
        credits[position] = share
    return credits


def milestone_reward(
    plan: Sequence[DayPlan] | None,
    steps: Sequence[tuple[ToolCall, Observation]],
    query: QueryRecord | None = None,
    malformed: bool = False,
    report: EvaluationReport | None = None,
) -> float:
    """EXPERIMENTAL: the episode total of :func:`milestone_credits`, behind the format and completeness gates.

    >>> milestone_reward(None, [])
    0.0
    """
    if malformed:
        return 0.0
    return float(sum(milestone_credits(plan, steps, query, report)))
