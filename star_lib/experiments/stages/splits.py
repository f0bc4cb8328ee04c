"""The official TravelPlanner splits an eval stage scores beside its synthetic held-out tasks (eval.splits).

A paper run is judged on the official validation set (180 queries) and, when reachable, the test set (1,000;
no gold plans are needed to score a plan), on the official database. Each split comes from a file of the
official rows (CSV, JSONL or parquet, :func:`star_lib.io.read_queries`) or from the hub
(:func:`star_lib.travel.hub.download_split`); the database from a folder of the official CSVs or the hub
(:func:`star_lib.travel.hub.download_database`). A source ending in ``?`` is optional: a split that cannot
be reached is skipped and reported, not fatal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from star_lib.experiments.config import ConfigError

HUB = "hub"
"""The source naming the hub (``osunlp/TravelPlanner`` for queries, Agent-STAR's database)."""


@dataclass(frozen=True)
class OfficialSplit:
    """One official split, loaded: its queries and the database they are planned over."""

    name: str
    """``validation``, ``test`` or ``train``."""
    queries: list[Any]
    """The split's :class:`~star_lib.types.QueryRecord` rows (capped by ``eval.max_queries``)."""
    world: Any
    """The official database as a :class:`~star_lib.travel.world.World`."""


def check_splits(splits: Mapping[str, str], split_db: str | None) -> None:
    """Refuse split names that are not official, empty sources, or splits without a database.

    Raises:
        ValueError: naming the option and what is allowed.

    """
    from star_lib.travel.hub import OFFICIAL_SPLITS

    if not isinstance(splits, Mapping):
        raise ValueError(f"splits must map official split names to sources, got {splits!r}")
    bad = [name for name in splits if name not in OFFICIAL_SPLITS]
    if bad:
        raise ValueError(f"splits: {bad} are not official splits; choose from {list(OFFICIAL_SPLITS)}")
    empty = [name for name, source in splits.items() if not str(source or "").rstrip("?").strip()]
    if empty:
        raise ValueError(f"splits: {empty} name no source; give a query file or {HUB!r} (hub? if optional)")
    if splits and not str(split_db or "").rstrip("?").strip():
        raise ValueError(f"splits need split_db: a folder of the official database CSVs, or {HUB!r}")


def load_splits(
    splits: Mapping[str, str], split_db: str | None, max_queries: int | None
) -> tuple[list[OfficialSplit], list[str]]:
    """Load every split that can be reached; return them and the names of optional splits skipped.

    Raises:
        ConfigError: A required split (or the database a required split needs) cannot be read, naming the
            option, the source and why.

    """
    required = [name for name, source in splits.items() if not source.endswith("?")]
    try:
        world = _database(str(split_db).rstrip("?"))
    except (OSError, ValueError) as exc:
        if required:
            raise ConfigError(f"eval.split_db: {split_db!r} cannot be read ({exc})") from None
        return [], list(splits)
    loaded, skipped = [], []
    for name, source in splits.items():
        try:
            queries = _queries(name, source.rstrip("?"))
        except (OSError, ValueError) as exc:
            if name in required:
                raise ConfigError(f"eval.splits.{name}: {source!r} cannot be read ({exc})") from None
            skipped.append(name)
            continue
        loaded.append(OfficialSplit(name, queries[:max_queries], world))
    return loaded, skipped


def _database(source: str) -> Any:
    from star_lib.travel.world import World

    if source == HUB:
        from star_lib.travel.hub import download_database

        return World.from_csv_dir(download_database())
    return World.from_csv_dir(source)


def _queries(name: str, source: str) -> list[Any]:
    if source == HUB:
        from star_lib.travel.hub import download_split

        return download_split(name)
    from star_lib.experiments.stages.synth import with_annotated_plans
    from star_lib.io import read_queries

    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"not a file (relative paths are read from {Path.cwd()})")
    queries = list(read_queries(path))
    if not queries:
        raise ValueError("it holds no query")
    return with_annotated_plans(path, queries)  # gold plans, where the split has them: an expert baseline
