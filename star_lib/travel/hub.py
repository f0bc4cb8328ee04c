"""Fetch the real TravelPlanner database from a hub, when one is reachable.

Nothing here runs at import time. ``download_database`` wraps ``huggingface_hub.snapshot_download`` and
returns the folder that :meth:`star_lib.travel.world.World.from_csv_dir` accepts (flat or the official
nested layout), so ``World.from_csv_dir(download_database())`` is all a user needs.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DATABASE_REPO = "xxwu/Agent-STAR-TravelDatabase"
"""HF dataset with the official database (flights in full, ≈3.8 M rows), as used by the STAR paper."""

ANCHOR_FILE = "clean_accommodations_2022.csv"


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
