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
