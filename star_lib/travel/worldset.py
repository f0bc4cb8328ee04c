"""Per-query worlds: every task runs in its own seeded synthetic world.

The tiny recipe trains on thousands of small worlds rather than one (a model trained on one world memorises
it instead of learning to copy from observations, STACK.md), and evaluates on worlds it never saw. A query's
``idx`` carries its world's seed — ``idx = world_seed * IDX_STRIDE + k`` — so any stage can rebuild the
world from the query alone (:meth:`WorldSet.for_query`), and nothing but the scale is written to disk.

The experiment runner's ``world`` stage writes :data:`SPEC_FILE` (``{"kind": "synthetic-per-query",
"scale": "tiny"}``) in place of the CSV tables; :func:`load_worlds` turns a folder or a spec string into a
:class:`~star_lib.travel.world.World` or a :class:`WorldSet`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

from star_lib.travel.world import World

IDX_STRIDE = 100
"""A per-query task's ``idx`` is ``world_seed * IDX_STRIDE + k`` with ``0 <= k < IDX_STRIDE``."""
SPEC_FILE = "worldset.json"
"""The file a per-query world folder holds instead of CSV tables."""
PER_QUERY = "synthetic-per-query"
"""The world kind (``synthetic-per-query:<scale>`` as a spec string)."""


def query_idx(world_seed: int, k: int) -> int:
    """Return the ``idx`` of the ``k``-th task synthesised in the world of ``world_seed``."""
    if not 0 <= k < IDX_STRIDE:
        raise ValueError(f"at most {IDX_STRIDE} tasks per world; got task number {k}")
    return world_seed * IDX_STRIDE + k


class WorldSet:
    """Seeded synthetic worlds built on demand and kept in a bounded (least recently used) cache.

    Args:
        scale: Synthetic world scale (``tiny`` | ``small`` | ``full``).
        capacity: Most worlds kept in memory.

    Example:
        >>> worlds = WorldSet("tiny", capacity=2)
        >>> worlds.world(7) is worlds.world(7)
        True

    """

    def __init__(self, scale: str = "tiny", capacity: int = 128) -> None:
        if scale not in ("tiny", "small", "full"):
            raise ValueError(f"world scale {scale!r} is not allowed; choose one of ['tiny', 'small', 'full']")
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.scale = scale
        self.capacity = capacity
        self._worlds: OrderedDict[int, World] = OrderedDict()

    def __repr__(self) -> str:
        return f"WorldSet(scale={self.scale!r}, cached={len(self._worlds)})"

    @property
    def spec(self) -> str:
        """The spec string :func:`load_worlds` reads back (``synthetic-per-query:<scale>``)."""
        return f"{PER_QUERY}:{self.scale}"

    def world(self, seed: int) -> World:
        """Return the world of ``seed`` (built once, then cached)."""
        world = self._worlds.get(seed)
        if world is None:
            world = self._worlds[seed] = World.synthetic(seed=seed, scale=self.scale)
            while len(self._worlds) > self.capacity:
                self._worlds.popitem(last=False)
        else:
            self._worlds.move_to_end(seed)
        return world

    def for_query(self, query: Any) -> World:
        """Return the world ``query`` was synthesised in (its ``idx`` holds the seed).

        Raises:
            ValueError: When the query has no ``idx``.

        """
        if query.idx is None:
            raise ValueError(
                "a per-query world needs the query's idx (world_seed * 100 + k): synthesise the tasks with "
                "star_lib.synth.per_world.synthesize_per_world"
            )
        return self.world(int(query.idx) // IDX_STRIDE)

    def write_spec(self, folder: str | Path) -> Path:
        """Write :data:`SPEC_FILE` into ``folder`` (what the ``world`` stage stores)."""
        from star_lib.io import write_json_atomic

        return write_json_atomic(Path(folder) / SPEC_FILE, {"kind": PER_QUERY, "scale": self.scale})


def load_worlds(spec: str | Path) -> World | WorldSet:
    """Return the world(s) a spec names.

    ``synthetic-per-query:<scale>`` or a folder holding :data:`SPEC_FILE` give a :class:`WorldSet`;
    anything else goes to :meth:`World.load` (``synthetic:<scale>:<seed>`` or a folder of CSV tables).

    Raises:
        ValueError: A malformed spec or spec file, naming it.

    """
    text = str(spec)
    if text.startswith(f"{PER_QUERY}:"):
        return WorldSet(text.split(":", 1)[1])
    spec_file = Path(text) / SPEC_FILE
    if spec_file.is_file():
        try:
            data = json.loads(spec_file.read_text(encoding="utf-8"))
            if data.get("kind") != PER_QUERY:
                raise ValueError(f"kind must be {PER_QUERY!r}")
            return WorldSet(str(data["scale"]))
        except (ValueError, KeyError, AttributeError) as exc:
            raise ValueError(f"{spec_file}: not a per-query world spec ({exc})") from None
    return World.load(text)
