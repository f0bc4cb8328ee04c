"""The evaluation engine: checkpointed chunks resume past a progress-log line torn by a kill."""

from __future__ import annotations

import polars as pl


def test_evaluation_resumes_past_a_progress_log_line_torn_by_a_kill(tmp_path):
    import json

    from star_lib.experiments.stages.evaluation import run_chunks

    def compute(start, chunk):
        return pl.DataFrame({"i": [start + k for k in range(len(chunk))]})

    frames, log = run_chunks(list(range(6)), 2, tmp_path, compute)
    progress = tmp_path / "_checkpoints" / "progress.jsonl"
    progress.write_text(progress.read_text() + '{"start": 9, "rest')  # a kill mid-append
    (tmp_path / "_checkpoints" / "chunks" / "00000004.parquet").unlink()  # that chunk must be redone
    frames, log = run_chunks(list(range(6)), 2, tmp_path, compute)
    assert pl.concat(frames)["i"].to_list() == list(range(6))
    assert [e["start"] for e in log] == [0, 2, 4, 4]  # the torn line skipped, the redone chunk logged
    assert all(json.loads(line) for line in progress.read_text().splitlines()[-1:])
