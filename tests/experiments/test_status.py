"""`star status`: run records merged with Slurm accounting (a fake sacct injects the states)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from star_lib.experiments.status import _in_range, grid_status, render_status, status_frame
from star_lib.io import write_json_atomic


def make_run(grid: Path, name: str, record: dict | None, job: dict | None = None) -> Path:
    run = grid / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(f"name: {name}\n")
    if record is not None:
        write_json_atomic(run / "run.json", record)
    if job is not None:
        write_json_atomic(run / "job.json", job)
    return run


def test_status_merges_run_records_with_slurm_states(tmp_path):
    folder = tmp_path / "subm"
    grid = tmp_path / "g"
    folder.mkdir()
    (folder / "7_3_0_log.err").write_text(
        "Traceback …\nslurmstepd: error: *** STEP 7_3.0 CANCELLED AT 2026 ***\n"
    )
    job = lambda i: {"id": f"7_{i}", "folder": str(folder), "cluster": "slurm"}  # noqa: E731
    make_run(
        grid, "a", {"status": "done", "wall_s": 12.5, "gpu_hours": 0.5, "stages": [{"stage": "eval"}]}, job(0)
    )
    make_run(grid, "b", {"status": "pending"}, job(1))
    make_run(grid, "c", {"status": "running", "stages": [{"stage": "synth"}]}, job(2))
    make_run(grid, "d", {"status": "running"}, job(3))
    make_run(grid, "e", {"status": "failed", "error": "ValueError: no feasible record"}, job(4))
    make_run(grid, "f", {"status": "pending"}, job(5))
    states = {
        "7_0": "COMPLETED",
        "7_2": "RUNNING",
        "7_3": "CANCELLED by 0",
        "7_4": "FAILED",
        "7_5": "PENDING",
    }
    asked = []

    def sacct(ids):
        asked.append(sorted(ids))
        return {i: s for i, s in states.items() if i in ids}

    rows = {s.run: s for s in grid_status(grid, sacct=sacct)}
    assert asked == [[f"7_{i}" for i in range(6)]]
    assert (rows["a"].state, rows["a"].wall_s, rows["a"].stage) == ("done", 12.5, "eval")
    assert rows["b"].state == "pending"  # sacct does not know it yet
    assert (rows["c"].state, rows["c"].stage) == ("running", "synth")
    assert rows["d"].state == "failed"
    assert rows["d"].error == "Slurm CANCELLED by 0: slurmstepd: error: *** STEP 7_3.0 CANCELLED AT 2026 ***"
    assert rows["e"].error == "ValueError: no feasible record"
    assert rows["f"].state == "pending"
    frame = status_frame(rows.values())
    assert frame.height == 6 and frame.filter(frame["state"] == "failed").height == 2
    table = render_status(list(rows.values()), "t")
    assert "failed: 2" in table.caption and "done: 1" in table.caption


def test_status_job_that_completed_without_a_result_is_failed(tmp_path):
    grid = tmp_path / "g"
    make_run(grid, "a", {"status": "running"}, {"id": "9", "folder": str(tmp_path), "cluster": "slurm"})
    [row] = grid_status(grid, sacct=lambda ids: {"9": "OUT_OF_MEMORY"})
    assert row.state == "failed" and "OUT_OF_MEMORY" in row.error


def test_status_array_range_of_pending_tasks():
    assert _in_range(3, "0-3") and _in_range(7, "0-3,7%2") and not _in_range(4, "0-3,7")


def test_status_lists_runs_of_the_manifest_in_order(tmp_path):
    grid = tmp_path / "g"
    grid.mkdir()
    (grid / "grid.yaml").write_text(json.dumps({"name": "g", "runs": [{"name": "z"}, {"name": "a"}]}))
    assert [s.run for s in grid_status(grid, sacct=lambda ids: {})] == ["z", "a"]
    assert {s.state for s in grid_status(grid, sacct=lambda ids: {})} == {"pending"}


def _dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_status_killed_local_job_is_failed_not_running_forever(tmp_path):
    """Issue 12 item 4: a submitted local job killed mid-run (run.json says running, job.json exists)."""
    import socket

    grid = tmp_path / "g"
    pid = _dead_pid()
    job = {"id": str(pid), "folder": str(tmp_path), "cluster": "local"}
    make_run(grid, "a", {"status": "running", "pid": pid, "host": socket.gethostname()}, job)
    make_run(grid, "b", {"status": "pending"}, {**job, "id": str(_dead_pid())})
    alive = {"id": str(os.getpid()), "folder": str(tmp_path), "cluster": "local"}
    make_run(grid, "c", {"status": "running", "pid": os.getpid(), "host": socket.gethostname()}, alive)
    make_run(grid, "d", {"status": "pending"}, alive)
    rows = {s.run: s for s in grid_status(grid, sacct=lambda ids: {})}
    assert rows["a"].state == "failed" and f"process {pid} ended" in rows["a"].error
    assert rows["b"].state == "failed" and "ended before the run started" in rows["b"].error
    assert (rows["c"].state, rows["d"].state) == ("running", "pending")


def test_status_of_a_folder_that_is_no_grid_is_an_error(tmp_path, capsys):
    from star_lib.cli import main

    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes").mkdir()
    with pytest.raises(ValueError, match="no grid folder"):
        grid_status(tmp_path / "empty", sacct=lambda ids: {})
    assert main(["status", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is no grid folder" in err and str(tmp_path / "empty") in err
