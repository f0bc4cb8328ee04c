"""Fixtures of the testbed tests."""

from __future__ import annotations

import ast
import json

import pytest

from star_lib.travel.world import World
from star_lib.types import QueryRecord


@pytest.fixture(scope="module")
def first_gold(real_db_dir, tp_dir) -> tuple[World, QueryRecord, list[dict]]:
    """The real database, the first real train query and its gold days (module-scoped: copy to edit)."""
    world = World.from_csv_dir(real_db_dir)
    record = json.loads((tp_dir / "train.jsonl").read_text().splitlines()[0])
    days = [d for d in ast.literal_eval(record["annotated_plan"])[1] if d]
    return world, QueryRecord.from_dict(record), days
