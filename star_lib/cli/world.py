"""``star world synth | info`` and ``star tool``: build, inspect and query TravelPlanner worlds.

A ``WORLD`` argument is a database folder (flat or official nested layout) or a synthetic spec
``synthetic:<tiny|small|full>:<seed>``.
"""

from __future__ import annotations

import argparse
from typing import Any

_WORLD_HELP = "database folder, or synthetic:<tiny|small|full>:<seed>"


def register(sub: Any) -> None:
    """Add the ``world`` (with ``synth`` and ``info``) and ``tool`` subcommands."""
    world = sub.add_parser("world", help="build or inspect a TravelPlanner database (World)")
    world_sub = world.add_subparsers(dest="world_command", required=True)

    synth = world_sub.add_parser(
        "synth",
        help="generate a seeded synthetic world and write it as official CSVs",
        description="Generate a synthetic world in the official schema and write it flat into --out.",
    )
    synth.add_argument("--scale", choices=("tiny", "small", "full"), default="tiny", help="world size")
    synth.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    synth.add_argument("--out", required=True, help="output folder")
    synth.set_defaults(func=run_synth)

    info = world_sub.add_parser("info", help="row counts, date range, states and cities of a world")
    info.add_argument("world", metavar="WORLD", help=_WORLD_HELP)
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    info.set_defaults(func=run_info)

    tool = sub.add_parser(
        "tool",
        help="call one tool on a world and print the observation",
        description=(
            "Example: star tool DIR SearchFlight "
            '\'{"departure": "St. Petersburg", "destination": "Rockford", "date": "2022-03-16"}\'. '
            "Exit code 0 when the observation is a result, 1 when it is an error or 'no result'."
        ),
    )
    tool.add_argument("world", metavar="WORLD", help=_WORLD_HELP)
    tool.add_argument("name", metavar="NAME", help="tool name, e.g. SearchFlight")
    tool.add_argument("arguments", metavar="JSON", nargs="?", default="{}", help="arguments as a JSON object")
    tool.set_defaults(func=run_tool)


def run_synth(args: argparse.Namespace) -> int:
    """Generate the world, write it, print its summary; return the exit code."""
    from star_lib.io import atomic_dir, check_output_dir
    from star_lib.travel.world import World

    out = check_output_dir(args.out)
    world = World.synthetic(seed=args.seed, scale=args.scale)
    with atomic_dir(out) as tmp:  # the CSVs appear together (swapped in), never a half-written database
        world.to_csv_dir(tmp)
    _print_summary(world.summary(), title=f"wrote synthetic:{args.scale}:{args.seed} to {out}")
    return 0


def run_info(args: argparse.Namespace) -> int:
    """Print a world's summary and its states with their cities."""
    import json

    from star_lib.travel.world import World

    world = World.load(args.world)
    summary = world.summary()
    if args.json:
        summary["states_cities"] = {s: list(world.cities_in(s)) for s in world.states}
        print(json.dumps(summary, indent=2))
        return 0
    _print_summary(summary, title=f"world {summary['source']}")
    from rich.console import Console
    from rich.table import Table

    table = Table(title="states and cities")
    table.add_column("state")
    table.add_column("cities")
    for state in world.states:
        cities = world.cities_in(state)
        shown = ", ".join(cities[:12]) + (f", … (+{len(cities) - 12})" if len(cities) > 12 else "")
        table.add_row(state, shown)
    Console().print(table)
    return 0


def run_tool(args: argparse.Namespace) -> int:
    """Call one tool and print the observation text; 0 for a result, 1 for an error or no result."""
    from star_lib.travel.tools import ToolRegistry
    from star_lib.travel.world import World

    observation = ToolRegistry(World.load(args.world)).call(args.name, args.arguments)
    print(observation.text)
    return 0 if observation.ok else 1


def _print_summary(summary: dict[str, Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("what")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        if key == "source":
            continue
        table.add_row(
            key,
            " … ".join(value)
            if isinstance(value, list)
            else f"{value:,}"
            if isinstance(value, int)
            else str(value),
        )
    Console().print(table)
