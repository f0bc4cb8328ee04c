"""The TravelPlanner testbed: the database (`World`), six tools with fault injection, plans, the evaluator.

>>> from star_lib.travel import World, ToolRegistry, evaluate_plan
>>> world = World.synthetic(seed=0, scale="tiny")
>>> ToolRegistry(world).call("SearchCity", {"state": world.states[0]}).ok
True

The testbed knows nothing of training: rewards, agents and trainers build on these pieces.
"""

from star_lib.travel.evaluate import Evaluator, evaluate_plan, plan_cost, transport_kind
from star_lib.travel.faults import FaultConfig, FaultInjector
from star_lib.travel.metrics import compute_metrics, metrics_frame
from star_lib.travel.plan import PlanParseError, parse_plan, plan_to_json
from star_lib.travel.tools import TOOL_NAMES, ToolRegistry
from star_lib.travel.world import World, WorldLoadError

__all__ = [
    "TOOL_NAMES",
    "Evaluator",
    "FaultConfig",
    "FaultInjector",
    "PlanParseError",
    "ToolRegistry",
    "World",
    "WorldLoadError",
    "compute_metrics",
    "evaluate_plan",
    "metrics_frame",
    "parse_plan",
    "plan_cost",
    "plan_to_json",
    "transport_kind",
]
