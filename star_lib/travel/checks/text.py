"""Plan text read with the official evaluator's semantics (both modes, and the irregular-plan reader).

* ``"from A to B"`` is read with the official pattern (``from`` / ``to`` surrounded by whitespace, the
  destination ends at the next comma); a parenthesised suffix such as ``"Dallas(Texas)"`` is cut off.
* ``"Name, City"`` is split on the **last** comma; text without a comma (or with nothing after the last
  comma) cannot be split and matches no row.

Every pattern applied to plan text runs in linear time: ``"from A to B"`` is read by a scanner with the
official pattern's exact semantics (:func:`from_to`), not by a backtracking regex.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MEALS: tuple[str, ...] = ("breakfast", "lunch", "dinner")
"""The meal fields of a day, in plan order."""
_EMPTY = ("", "-")
_FLIGHT_NUMBER = re.compile(r"flight number:\s*([^,]*)", re.IGNORECASE)

Split = tuple[str, str]
"""``(name, city)`` of a ``"Name, City"`` entry."""


def filled(text: str) -> bool:
    """Tell whether a field holds something (officially: not empty and not ``'-'``)."""
    return text not in _EMPTY


def normalise(text: str) -> str:
    """Collapse runs of whitespace and strip (strict name comparison)."""
    return " ".join(text.split())


def before_paren(text: str) -> str:
    """Cut a parenthesised suffix: ``'Dallas(Texas)'`` → ``'Dallas'`` (official semantics, newline-aware).

    >>> before_paren("Dallas(Texas)"), before_paren("Dallas (TX"), before_paren("Dallas")
    ('Dallas', 'Dallas (TX', 'Dallas')
    """
    cut = text.find("(")
    if cut < 0 or "\n" in text[:cut] or text.find(")", cut + 1) < 0:
        return text
    return text[:cut]


def from_to(text: str) -> tuple[str, str] | None:
    r"""``'from A to B, …'`` → ``('A', 'B')`` (raw, parentheses kept); None when the pattern does not match.

    Exactly the groups of the official ``re.search(r"from\s+(.+?)\s+to\s+([^,]+)", text)``, found in
    linear time (the regex backtracks cubically on long runs of spaces). The match starts at the first
    ``from`` that can start one; ``A`` is the shortest newline-free text (preferring the latest start inside
    the whitespace after ``from``) that is followed by whitespace, ``to`` and whitespace; ``B`` runs to the
    next comma.

    >>> from_to("Flight Number: F1, from St. Petersburg to Rockford, Departure Time: 15:40")
    ('St. Petersburg', 'Rockford')

    Raises:
        TypeError: when ``text`` is not a string (as the official ``re.search`` does).

    """
    if not isinstance(text, str):
        raise TypeError(f"expected string, got {type(text).__name__}")
    start = text.find("from")
    if start < 0:
        return None
    scan = _ToScanner(text)
    size = len(text)
    while start >= 0:
        first = start + 4
        if first < size and text[first].isspace():
            last = _WS.match(text, first).end()  # \s+ greedy: group 1 starts at `last` first
            if last < size:
                to = scan.first_valid(last + 2)
                if to is not None and scan.next_newline(last) >= to[1]:
                    return text[last : to[1]], scan.group2(to)
            # backtracking \s+ by one leaves group 1 one whitespace character, ended by a `to` at `last`
            here = scan.valid(last) if last + 2 <= size else None
            if here is not None:
                for begin in range(last - 2, first, -1):
                    if text[begin] != "\n":
                        return text[begin], scan.group2(here)
        start = text.find("from", start + 1)
    return None


_WS = re.compile(r"\s*")
"""Whitespace run (linear: a single greedy class)."""


class _ToScanner:
    r"""Where ``\s+to\s+([^,]+)`` can match in one text; every scan moves forward only (linear overall)."""

    __slots__ = ("_found", "_newline", "_scanned", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._found: tuple[int, int, int] | None = None
        self._scanned = 0
        self._newline = -1

    def valid(self, at: int) -> tuple[int, int, int] | None:
        """Return ``(at, run, group)`` when a ``to`` at ``at`` can end the pattern, else None.

        ``run`` starts the whitespace before the ``to``; ``group`` is where group 2 starts.
        """
        text = self.text
        after = at + 2
        if not (text.startswith("to", at) and at > 0 and text[at - 1].isspace()):
            return None
        if after >= len(text) or not text[after].isspace():
            return None
        end = _WS.match(text, after).end()
        if end < len(text) and text[end] != ",":
            group = end
        elif end - after >= 2:
            group = end - 1
        else:
            return None
        run = at - 1
        while run > 0 and text[run - 1].isspace():
            run -= 1
        return at, run, group

    def first_valid(self, start: int) -> tuple[int, int, int] | None:
        """Return the first valid ``to`` at or after ``start`` (``start`` never decreases between calls)."""
        if self._found is not None and self._found[0] >= start:
            return self._found
        at = self.text.find("to", max(start, self._scanned))
        while at >= 0:
            found = self.valid(at)
            if found is not None:
                self._found, self._scanned = found, at
                return found
            at = self.text.find("to", at + 1)
        self._found, self._scanned = None, len(self.text)
        return None

    def next_newline(self, start: int) -> int:
        """Return the first newline at or after ``start`` (``len`` when none; ``start`` never decreases)."""
        if self._newline < start:
            found = self.text.find("\n", start)
            self._newline = len(self.text) if found < 0 else found
        return self._newline

    def group2(self, to: tuple[int, int, int]) -> str:
        """Return group 2 of the match ending at ``to``: up to the next comma."""
        comma = self.text.find(",", to[2])
        return self.text[to[2] : len(self.text) if comma < 0 else comma]


def split_name_city(text: str) -> Split | None:
    """Split ``'Name, City'`` on the last comma (official semantics); None when impossible.

    >>> split_name_city("Pizza, Pasta & More, New York(NY)")
    ('Pizza, Pasta & More', 'New York')
    >>> split_name_city("Coco Bambu") is None
    True
    """
    cut = text.rfind(",")
    if cut < 0 or cut == len(text) - 1:
        return None
    head = text[:cut]
    name = head[head.rfind("\n") + 1 :].strip()
    city = before_paren(text[cut + 1 :].strip()).strip()
    return name, city


def official_kind(text: str) -> str | None:
    """Classify transport officially: taxi, then self-driving, then flight (case-insensitive), else None."""
    lower = text.lower()
    if "taxi" in lower:
        return "taxi"
    if "self-driving" in lower:
        return "self-driving"
    if "flight" in lower:
        return "flight"
    return None


def is_valid_city_sequence(cities: Sequence[str]) -> bool:
    """Apply the official route rule: ≥3 entries; a city recurs only first/last; no single interior entry."""
    if len(cities) < 3:
        return False
    last = len(cities) - 1
    seen: set[str] = set()
    start = 0
    while start < len(cities):
        city = cities[start]
        if city in seen and start not in (0, last):
            return False
        end = start
        while end < len(cities) and cities[end] == city:
            end += 1
        if end - start == 1 and 0 < end - 1 < last:
            return False
        seen.add(city)
        start = end
    return True


def flight_number(text: str, rules: frozenset[str]) -> str | None:
    """Extract the flight number; official needs the exact prefix ``'Flight Number: '``."""
    if "transport_by_kind" in rules:
        match = _FLIGHT_NUMBER.search(text)
        return match.group(1).strip() if match else None
    parts = text.split("Flight Number: ")
    return parts[1].split(",")[0] if len(parts) > 1 else None
