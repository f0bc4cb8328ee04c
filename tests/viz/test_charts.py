from __future__ import annotations

import polars as pl
import pytest

from star_lib.experiments.results import load_results
from star_lib.viz import charts, findings

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_charts_html_table_formats_percentages_and_colours_verdicts():
    table = pl.DataFrame(
        {
            "check": ["a", "b", "c"],
            "passed": [True, False, None],
            "rate": [0.5, 0.125, None],
            "outcome": ["agrees", "opposite", "flat"],
        }
    )
    markup = charts.html_table(table, percent=["rate"], verdict_columns=["outcome"], caption="caption <1>")
    assert "50.0 %" in markup and "12.5 %" in markup
    assert markup.count(charts.VERDICT_COLOURS["pass"]) == 2  # True cell + "agrees"
    assert charts.VERDICT_COLOURS["opposite"] in markup and charts.VERDICT_COLOURS["flat"] in markup
    assert "caption &lt;1&gt;" in markup  # escaped


def test_charts_html_table_escapes_cells_and_limits_rows():
    table = pl.DataFrame({"text": ["<script>alert(1)</script>"] * 5})
    markup = charts.html_table(table, max_rows=2)
    assert "<script>" not in markup and "&lt;script&gt;" in markup
    assert markup.count("<tr>") == 3 and "3 more rows not shown" in markup


def test_charts_paper_vs_ours_renders_both_sources_as_png(noise_runs):
    frame = load_results(noise_runs).frame
    reward = findings.reward_design(frame, "tiny")  # paper rows only: no reward runs in this folder
    chart = charts.paper_vs_ours(reward.chart_data, x="x", facet="model", title="t")
    spec = chart.to_dict()
    sources = {row["source"] for row in spec["datasets"][next(iter(spec["datasets"]))]}
    assert sources == {"paper"}
    png = charts.to_png(chart)
    assert png.startswith(PNG_MAGIC) and len(png) > 5_000


def test_charts_trend_with_annotations_renders(noise_runs):
    noise = findings.env_noise(load_results(noise_runs).frame, "tiny")
    chart = charts.trend(
        noise.chart_data, x="tool_failure_rate", annotations=noise.tables["paper_statements"]
    )
    spec = chart.to_dict()
    assert len(spec["layer"]) == 3  # lines+points, rules, labels
    assert charts.to_png(chart).startswith(PNG_MAGIC)


@pytest.mark.parametrize("builder", ["paper_vs_ours", "trend", "heatmap", "bars", "training_curves"])
def test_charts_empty_data_gives_a_message_chart(builder):
    empty = pl.DataFrame(
        schema={
            "x": pl.String,
            "y": pl.String,
            "value": pl.Float64,
            "source": pl.String,
            "step": pl.Int64,
            "metric": pl.String,
            "run": pl.String,
        }
    )
    kwargs = {
        "paper_vs_ours": {},
        "trend": {"x": "x"},
        "heatmap": {"x": "x", "y": "y"},
        "bars": {"x": "x", "y": "value", "color": "source"},
        "training_curves": {},
    }[builder]
    chart = getattr(charts, builder)(empty, **kwargs)
    assert chart.to_dict()["mark"]["type"] == "text"
    assert charts.to_png(chart).startswith(PNG_MAGIC)


def test_charts_show_chart_saves_the_figure(tmp_path, capsys):
    chart = charts.message_chart("hello")
    charts.show_chart(chart, "00_test", tmp_path / "figures")
    assert (tmp_path / "figures" / "00_test.png").read_bytes().startswith(PNG_MAGIC)
