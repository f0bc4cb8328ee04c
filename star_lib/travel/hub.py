"""Fetch the real TravelPlanner database and the official query splits from a hub, when one is reachable.

Nothing here runs at import time. ``download_database`` wraps ``huggingface_hub.snapshot_download`` and
returns the folder that :meth:`star_lib.travel.world.World.from_csv_dir` accepts (flat or the official
nested layout), so ``World.from_csv_dir(download_database())`` is all a user needs. ``download_split``
loads the official validation (180) or test (1,000) queries with ``datasets``; without a hub, the same
files saved locally (CSV, JSONL or parquet) are read by :func:`star_lib.io.read_queries`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from star_lib.types import QueryRecord

DEFAULT_DATABASE_REPO = "xxwu/Agent-STAR-TravelDatabase"
"""HF dataset with the official database (flights in full, ≈3.8 M rows), as used by the STAR paper."""

ANCHOR_FILE = "clean_accommodations_2022.csv"

DEFAULT_QUERY_REPO = "osunlp/TravelPlanner"
"""HF dataset with the official queries; its configs are the splits below."""

OFFICIAL_SPLITS: dict[str, int] = {"train": 45, "validation": 180, "test": 1000}
"""Official split → number of queries (the test split has no ``annotated_plan``)."""


def find_database_root(folder: str | Path) -> Path:
    """Return the folder under ``folder`` that holds the database, flat or nested.

    Raises:
        FileNotFoundError: when no ``clean_accommodations_2022.csv`` lies anywhere under ``folder``.

    """
    folder = Path(folder)
    hits = sorted(folder.rglob(ANCHOR_FILE), key=lambda p: len(p.parts))
    if not hits:
        raise FileNotFoundError(
            f"no {ANCHOR_FILE} under {folder}: point --db at a TravelPlanner database folder "
            "(flat, or with accommodations/, flights/, … subfolders)"
        )
    anchor = hits[0].parent
    return anchor.parent if anchor.name == "accommodations" else anchor


def download_database(
    repo_id: str = DEFAULT_DATABASE_REPO, local_dir: str | Path | None = None, revision: str | None = None
) -> Path:
    """Download (or reuse the cached copy of) the database dataset and return its root folder.

    The hub token, if any, comes from the ``HF_TOKEN`` environment variable (read by huggingface_hub).

    Raises:
        ConnectionError: when the hub cannot be reached and there is no cached copy.

    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        path = snapshot_download(repo_id, repo_type="dataset", revision=revision, local_dir=local_dir)
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as exc:
        offline = " (HF_HUB_OFFLINE=1)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
        raise ConnectionError(
            f"could not fetch dataset {repo_id!r} from the hub{offline}: {exc}. "
            "Without a hub, download the official CSVs elsewhere and pass their folder to World.from_csv_dir."
        ) from exc
    return find_database_root(path)


def download_split(
    split: str,
    repo_id: str = DEFAULT_QUERY_REPO,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    out: str | Path | None = None,
) -> list[QueryRecord]:
    """Load an official query split (config ``split`` of ``repo_id``) and return its validated records.

    Args:
        split: ``validation`` (180 queries), ``test`` (1,000) or ``train`` (45).
        repo_id: the HF dataset holding the queries.
        revision: a dataset revision (branch, tag or commit), or None for the default.
        cache_dir: where ``datasets`` caches the download (its default when None).
        out: also write the rows as the hub gives them to this JSONL file (atomically), for
            :func:`star_lib.io.read_queries` later without a hub.

    Raises:
        ValueError: for a split that is not official, or a row that is not a valid query record.
        ConnectionError: when the hub cannot be reached and ``datasets`` has no cached copy.

    """
    if split not in OFFICIAL_SPLITS:
        raise ValueError(f"split={split!r}: choose one of {list(OFFICIAL_SPLITS)}")
    from datasets import load_dataset

    try:
        data = load_dataset(repo_id, split, split=split, revision=revision, cache_dir=cache_dir)
    except OSError as exc:  # ConnectionError, a missing dataset, HTTP errors: all OSError subclasses
        offline = " (HF_HUB_OFFLINE=1)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
        raise ConnectionError(
            f"could not load split {split!r} of dataset {repo_id!r} from the hub{offline}: {exc}. "
            f"Without a hub, save the official {split} file (CSV, JSONL or parquet) elsewhere and read it "
            "with star_lib.io.read_queries."
        ) from exc
    rows: list[dict[str, Any]] = [dict(row) for row in data]
    records = []
    for number, row in enumerate(rows, start=1):
        try:
            records.append(QueryRecord.from_dict(row))
        except ValueError as exc:
            raise ValueError(f"{repo_id} {split} row {number}: {exc}") from None
    if out is not None:
        from star_lib.io import write_jsonl_atomic

        write_jsonl_atomic(out, rows)
    return records
