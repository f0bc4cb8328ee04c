"""Whole-word vocabularies: the strings a tiny model's tokenizer keeps as single tokens.

A tiny model copies one token far more reliably than a spelling (STACK.md, second probe), so the tiny recipe
makes every entity its trajectories copy a token of its own: the names of the tiny worlds' shared pools
(states, cities, hotels, restaurants, attractions), the tool names, every date of 2022, the flight prefix
``F`` and the three-digit groups ``000``–``999``. A flight number then reads ``F`` + digit groups wherever it
appears (``F7905936`` → ``F 790 593 6``): without ``F`` as a token BPE glues the prefix to the character
before it, and seven single digits are far harder to copy than three nearly unique groups.
"""

from __future__ import annotations

import datetime as dt

from star_lib.travel import names
from star_lib.travel.tools import TOOL_NAMES

VOCABULARIES: tuple[str, ...] = ("tiny-entities",)
"""Named whole-word vocabularies (:func:`whole_words`)."""


def whole_words(name: str = "tiny-entities") -> tuple[str, ...]:
    """Return the strings of a named whole-word vocabulary, in a fixed order without repeats.

    Raises:
        ValueError: An unknown name, listing the known ones.

    """
    if name not in VOCABULARIES:
        raise ValueError(f"whole-word vocabulary {name!r} is unknown; choose one of {list(VOCABULARIES)}")
    start = dt.date(2022, 1, 1)
    dates = tuple(str(start + dt.timedelta(days=i)) for i in range(365))
    triples = tuple(f"{i:03d}" for i in range(1000))
    pools = names.TINY_STATES + names.TINY_CITIES + names.TINY_HOTELS + names.TINY_RESTAURANTS
    return tuple(dict.fromkeys(pools + names.TINY_ATTRACTIONS + TOOL_NAMES + dates + ("F",) + triples))
