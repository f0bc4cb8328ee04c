"""The explorer's termination filter, on a real grid run whose tool failures cost episodes their turns."""

from __future__ import annotations

import polars as pl
import pytest

from star_lib.viz.explorer import TERMINATION_FILTERS, TrajectoryExplorer


def test_explorer_filters_episodes_by_termination(noise_runs):
    explorer = TrajectoryExplorer.from_results(noise_runs)
    run = next(r for r in explorer.run.options if "fail=0.1" in r)
    frame = pl.read_parquet(noise_runs / run / "rollouts.parquet")
    endings = frame["termination"].to_list()
    evaluated = [s == "eval" for s in frame["stage"].to_list()]  # the explorer opens a run on its eval rows
    assert {"answer", "turn_limit"} <= {e for e, kept in zip(endings, evaluated, strict=True) if kept}
    explorer.select(run=run)
    for ending in TERMINATION_FILTERS[1:]:
        explorer.select(termination=ending)
        pairs = enumerate(zip(endings, evaluated, strict=True))
        wanted = [i for i, (e, kept) in pairs if kept and e == ending]
        assert [value for _, value in explorer.episode.options] == wanted, ending
        assert f"{len(wanted)} of {frame.height} episodes" in explorer.count.value
    explorer.select(termination="turn_limit")
    assert "termination</b> turn_limit" in explorer.html()
    assert "turn_limit" in explorer.header_view.value  # the shown episode is one the filter kept
    explorer.select(termination="any", failure="passed")
    passed = [p for p, kept in zip(frame["final_pass"].to_list(), evaluated, strict=True) if kept]
    assert len(explorer.episode.options) == sum(passed)
    with pytest.raises(ValueError, match="termination 'done' is not one of"):
        explorer.select(termination="done")
