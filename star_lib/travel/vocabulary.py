"""Whole-word vocabularies: the strings a tiny model's tokenizer keeps as single tokens.

A tiny model copies one token far more reliably than a spelling (STACK.md, second probe), so the tiny recipe
makes every entity its trajectories copy a token of its own. Two vocabularies:

- ``tiny-entities``: the names of the tiny synthetic worlds' shared pools (states, cities, hotels,
  restaurants, attractions);
- ``real-entities:<database folder>``: every state, city, hotel, restaurant and attraction name of a real
  TravelPlanner database, read from the folder given (``World.from_csv_dir``; nothing of it is stored in
  the code). On the official database that is about 16,000 names; names shorter than
  :data:`MIN_NAME_CHARS` characters or made of digits only are left to BPE.

Both add the tool names, every date of 2022, the flight prefix ``F`` and the three-digit groups
``000``–``999``. A flight number then reads ``F`` + digit groups wherever it appears (``F7905936`` →
``F 790 593 6``): without ``F`` as a token BPE glues the prefix to the character before it, and seven
single digits are far harder to copy than three nearly unique groups.

Why every venue of the real database (measured on compact expert trajectories of 90 real-database tasks,
30 per level, 3/5/7 days, a 1,024-merge BPE on top): cities only give a 2.8 k vocabulary and 1,936 tokens
per trajectory (1,088 / 2,018 / 2,911 at 3 / 5 / 7 days); cities and hotels 6.4 k and 1,497; with
attractions 11.5 k and 1,131; with restaurants too 18.4 k and 771 (446 / 813 / 1,128). Each step roughly
halves a search result's length, and the compute per trajectory (tokens x (body + vocabulary x width))
stays about the same for a 192-wide model, so the shortest trajectories — the only ones that fit a
1,024-token context — win.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from star_lib.travel import names
from star_lib.travel.tools import TOOL_NAMES

VOCABULARIES: tuple[str, ...] = ("tiny-entities", "real-entities")
"""Named whole-word vocabularies (:func:`whole_words`); ``real-entities`` takes ``:<database folder>``."""
MIN_NAME_CHARS = 3
"""Shorter database names are not whole words (BPE spells them; a two-letter token would match inside
many other words)."""


def whole_words(name: str = "tiny-entities") -> tuple[str, ...]:
    """Return the strings of a named whole-word vocabulary, in a fixed order without repeats.

    Args:
        name: ``tiny-entities``, or ``real-entities:<folder>`` with the folder of a real TravelPlanner
            database (official CSV layout, flat or nested; a relative folder is read from the working
            directory, the project root under ``star run``).

    Raises:
        ValueError: An unknown name, listing the known ones; ``real-entities`` without a folder.
        FileNotFoundError: The database folder does not exist.

    """
    kind, _, folder = name.partition(":")
    if kind not in VOCABULARIES:
        raise ValueError(f"whole-word vocabulary {name!r} is unknown; choose one of {list(VOCABULARIES)}")
    if kind == "tiny-entities":
        if folder:
            raise ValueError(f"whole-word vocabulary {name!r}: tiny-entities takes no ':<folder>'")
        pools = names.TINY_STATES + names.TINY_CITIES + names.TINY_HOTELS + names.TINY_RESTAURANTS
        entities = pools + names.TINY_ATTRACTIONS
    else:
        if not folder.strip():
            raise ValueError(
                f"whole-word vocabulary {name!r} names no database: write real-entities:<folder>, e.g. "
                "real-entities:../shared/data/travelplanner/database"
            )
        entities = database_names(folder.strip())
    start = dt.date(2022, 1, 1)
    dates = tuple(str(start + dt.timedelta(days=i)) for i in range(365))
    triples = tuple(f"{i:03d}" for i in range(1000))
    return tuple(dict.fromkeys(entities + TOOL_NAMES + dates + ("F",) + triples))


def database_names(folder: str | Path) -> tuple[str, ...]:
    """Return the state, city, hotel, restaurant and attraction names of a database folder, in that order.

    Names are stripped; empty ones, ones shorter than :data:`MIN_NAME_CHARS`, digit-only ones and ones
    spanning lines are dropped, repeats kept once.

    Raises:
        FileNotFoundError: ``folder`` is not a folder.
        ValueError: The folder is not a readable TravelPlanner database (the loader's message).

    """
    from star_lib.travel.world import World

    if not Path(folder).is_dir():
        raise FileNotFoundError(
            f"real-entities database folder {str(folder)!r} not found (relative folders are read from "
            f"{Path.cwd()})"
        )
    world = World.from_csv_dir(folder)
    found: list[str] = [*world.states, *world.cities]
    for city in world.cities:
        found += [a.name for a in world.accommodations(city)]
    for city in world.cities:
        found += [r.name for r in world.restaurants(city)]
    for city in world.cities:
        found += [a.name for a in world.attractions(city)]
    kept = (str(n).strip() for n in found)
    return tuple(
        dict.fromkeys(
            n
            for n in kept
            if len(n) >= MIN_NAME_CHARS and not n.isdigit() and "\n" not in n and "\r" not in n
        )
    )
