"""Atomic writes: a killed writer never leaves a file that fails to load."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

from star_lib.io import (
    atomic_path,
    clean_stale_temps,
    read_yaml,
    write_parquet_atomic,
    write_yaml_atomic,
)

WRITER = textwrap.dedent(
    """
    import sys
    import polars as pl
    from star_lib.io import write_parquet_atomic
    path = sys.argv[1]
    version = 0
    while True:
        version += 1
        frame = pl.DataFrame({"version": [version] * 300_000, "x": range(300_000),
                              "text": [f"row {i} of version {version}" for i in range(300_000)]})
        write_parquet_atomic(path, frame)
        print(version, flush=True)
    """
)


def test_io_killed_writer_never_leaves_a_broken_parquet(tmp_path):
    target = tmp_path / "metrics.parquet"
    loaded_versions = set()
    for delay in (0.05, 0.2, 0.45, 0.8):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # one full version is on disk
            time.sleep(delay)  # now it is somewhere inside another write
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        frame = pl.read_parquet(target)  # must load
        assert frame.height == 300_000
        assert frame["version"].n_unique() == 1
        assert frame["x"].to_list()[-1] == 299_999
        loaded_versions.add(frame["version"][0])
    leftovers = list(tmp_path.glob(".*.tmp"))
    removed = clean_stale_temps(tmp_path)
    assert removed == len(leftovers)
    assert not list(tmp_path.glob(".*.tmp"))
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.parquet"]


def test_io_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "a.parquet"
    write_parquet_atomic(target, pl.DataFrame({"a": [1]}))
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half a parq")
            raise RuntimeError("killed")
    assert pl.read_parquet(target)["a"].to_list() == [1]
    assert [p.name for p in tmp_path.iterdir()] == ["a.parquet"]


def test_io_yaml_round_trip_keeps_key_order(tmp_path):
    path = write_yaml_atomic(tmp_path / "c.yaml", {"b": 1, "a": [1, 2]})
    assert list(read_yaml(path)) == ["b", "a"]


def test_io_read_yaml_error_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: [1,\n")
    with pytest.raises(ValueError, match="bad.yaml: not valid YAML"):
        read_yaml(Path(path))


# ── read_queries: one reader for every query file kind (issue 14 item 1) ──

OFFICIAL_FIELDS = (
    "org", "dest", "days", "visiting_city_number", "date", "people_number", "local_constraint", "budget",
    "query", "level",
)  # fmt: skip


@pytest.fixture(scope="module")
def train_rows(tp_dir) -> list[dict]:
    """The 45 real train rows as the official file writes them (literal strings for date/constraints)."""
    import json

    return [json.loads(line) for line in (tp_dir / "train.jsonl").read_text().splitlines() if line.strip()]


def _test_shaped(rows: list[dict]) -> list[dict]:
    """The official test split's shape: no annotated_plan; budget written as a string."""
    return [{**{k: r[k] for k in (*OFFICIAL_FIELDS, "reference_information")}, "budget": str(r["budget"])}
            for r in rows]  # fmt: skip


def test_io_read_queries_reads_the_official_formats(tmp_path, train_rows):
    from star_lib.io import read_queries
    from star_lib.types import QueryRecord

    want = [QueryRecord.from_dict(r) for r in train_rows]
    validation = pl.DataFrame(train_rows)
    validation.with_row_index("").write_csv(tmp_path / "validation.csv")  # pandas-style index column
    validation.write_parquet(tmp_path / "validation.parquet")
    test = pl.DataFrame(_test_shaped(train_rows))
    assert test["budget"].dtype == pl.String and "annotated_plan" not in test.columns
    test.write_csv(tmp_path / "test.csv")
    test.write_parquet(tmp_path / "test.parquet")
    test.write_ndjson(tmp_path / "test.jsonl")
    for name in ("validation.csv", "validation.parquet", "test.csv", "test.parquet", "test.jsonl"):
        got = read_queries(tmp_path / name)
        assert got == want, name
    assert read_queries(tmp_path / "test.csv", limit=3) == want[:3]
    assert read_queries(tmp_path / "test.csv", limit=0) == []
    levels = {r.level for r in want}
    assert len(want) == 45 and levels == {"easy", "medium", "hard"}


def test_io_read_queries_reads_synth_splits_in_jsonl_and_parquet(tmp_path, train_rows):
    from star_lib.io import read_queries, write_jsonl_atomic
    from star_lib.types import QueryRecord

    records = [QueryRecord.from_dict({**r, "idx": i}) for i, r in enumerate(train_rows)]
    rows = [r.to_dict() for r in records]
    write_jsonl_atomic(tmp_path / "train.jsonl", rows)
    pl.DataFrame(rows, infer_schema_length=None).write_parquet(tmp_path / "train.parquet")  # lists, structs
    assert read_queries(tmp_path / "train.jsonl") == records
    assert read_queries(tmp_path / "train.parquet") == records


def test_io_read_queries_errors_name_the_file_and_row(tmp_path, train_rows):
    from star_lib.io import read_queries

    rows = _test_shaped(train_rows[:3])
    rows[1]["people_number"] = "0"
    pl.DataFrame(rows).write_csv(tmp_path / "bad.csv")
    with pytest.raises(ValueError, match=r"bad\.csv: row 2: query record field 'people_number' = '0'"):
        read_queries(tmp_path / "bad.csv")
    good = _test_shaped(train_rows[:1])[0]
    lines = ["", __import__("json").dumps(good), "5", '[1, "a"]']
    (tmp_path / "odd.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"odd\.jsonl:3: a query record must be a JSON object, got int"):
        read_queries(tmp_path / "odd.jsonl")
    (tmp_path / "dup.jsonl").write_text('{"org": "A", "org": "B"}\n')
    with pytest.raises(ValueError, match=r"dup\.jsonl:1: not a JSON line \(duplicate key 'org'"):
        read_queries(tmp_path / "dup.jsonl")
    (tmp_path / "latin.csv").write_bytes("org,dest\nM\xfcnchen,B\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.csv: not a readable CSV table"):
        read_queries(tmp_path / "latin.csv")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match=r"junk\.parquet: not a readable parquet table"):
        read_queries(tmp_path / "junk.parquet")
    (tmp_path / "q.txt").write_text("x")
    with pytest.raises(ValueError, match=r"q\.txt: queries are read from \.jsonl, \.csv, \.parquet"):
        read_queries(tmp_path / "q.txt")
    with pytest.raises(FileNotFoundError, match="queries file not found"):
        read_queries(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="limit=-1"):
        read_queries(tmp_path / "bad.csv", limit=-1)
