"""The 8 commonsense and 5 hard TravelPlanner checks, in ``official`` and ``strict`` mode (spec §5–§6).

Every check is a small named function ``check(ctx) -> CheckResult`` over a :class:`PlanContext` (the plan,
parsed once). ``official`` mode reproduces the verdicts of the official evaluator
(OSU-NLP-Group/TravelPlanner ``evaluation/commonsense_constraint.py`` and ``hard_constraint.py``), quirks
included. ``strict`` mode is ``official`` plus every rule of :data:`STRICT_RULES`; each place where the modes
differ tests ``RULE in ctx.rules`` and nowhere else, so that table is the complete list of differences.
Hard checks run only when ``is_not_absent`` and ``is_valid_information_in_sandbox`` pass (strict: and
``is_reasonable_visiting_city``, rule ``hard_needs_route``); an unrequested
constraint gives ``CheckResult(None)``; items that match no row cost 0.

One module per job, read in this order:

- :mod:`~star_lib.travel.checks.rules` — the strict rules, the shared verdicts, :class:`OfficialError`;
- :mod:`~star_lib.travel.checks.text` — official text semantics (``from A to B``, ``Name, City``);
- :mod:`~star_lib.travel.checks.index` — name and route lookups over one World (:class:`WorldIndex`);
- :mod:`~star_lib.travel.checks.context` — the plan parsed once (:class:`Day`, :class:`PlanContext`);
- :mod:`~star_lib.travel.checks.commonsense` — the commonsense checks (:data:`COMMONSENSE_CHECKS`);
- :mod:`~star_lib.travel.checks.hard` — the hard-constraint checks and the trip cost (:data:`HARD_CHECKS`).
"""

from star_lib.travel.checks.commonsense import COMMONSENSE_CHECKS
from star_lib.travel.checks.context import Check, Day, PlanContext, parse_day, transport_kind_for
from star_lib.travel.checks.hard import HARD_CHECKS, cuisine_verdict, trip_cost, wrong_room_type
from star_lib.travel.checks.index import WorldIndex, official_listing
from star_lib.travel.checks.rules import (
    MODE_RULES,
    NOT_APPLICABLE,
    PASS,
    PLACEHOLDER_CITY,
    STRICT_RULES,
    VERDICTS_VERSION,
    OfficialError,
)
from star_lib.travel.checks.text import (
    before_paren,
    from_to,
    is_valid_city_sequence,
    normalise,
    official_kind,
    split_name_city,
)

__all__ = [
    "COMMONSENSE_CHECKS",
    "HARD_CHECKS",
    "MODE_RULES",
    "NOT_APPLICABLE",
    "PASS",
    "PLACEHOLDER_CITY",
    "STRICT_RULES",
    "VERDICTS_VERSION",
    "Check",
    "Day",
    "OfficialError",
    "PlanContext",
    "WorldIndex",
    "before_paren",
    "cuisine_verdict",
    "from_to",
    "is_valid_city_sequence",
    "normalise",
    "official_kind",
    "official_listing",
    "parse_day",
    "split_name_city",
    "transport_kind_for",
    "trip_cost",
    "wrong_room_type",
]
