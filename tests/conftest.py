"""Shared fixtures: the real data beside the repo, and tiny synthetic worlds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_path(*parts: str) -> Path:
    """Path under ``../shared/data``; fail (not skip) in CI when missing, skip elsewhere."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"real test data missing in CI: {path}")
        pytest.skip(f"real test data not found: {path}")
    return path


@pytest.fixture(scope="session")
def tp_dir() -> Path:
    """``../shared/data/travelplanner``."""
    return shared_path("travelplanner")


@pytest.fixture(scope="session")
def real_db_dir(tp_dir: Path) -> Path:
    """The real (flat) TravelPlanner database folder."""
    return tp_dir / "database"


@pytest.fixture(scope="session")
def qwen_tokenizer_dir() -> Path:
    """The real Qwen2.5-compatible tokenizer files."""
    return shared_path("qwen2.5-tokenizer")


@pytest.fixture(scope="session")
def qa_dir() -> Path:
    """``../shared/data/qa``."""
    return shared_path("qa")
