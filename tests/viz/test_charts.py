from __future__ import annotations

import base64
import json
import re

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


# ── interactive figures, sizes, labels, zero series (issue 16 item 2) ──


def _rendered_svg(chart) -> str:
    import vl_convert as vlc

    return vlc.vegalite_to_svg(charts.finalize(chart).to_json())


def _layers(spec: dict) -> list[dict]:
    """Every unit spec of a (layered, faceted) Vega-Lite spec."""
    inner = spec.get("spec", spec)
    if "layer" in inner:
        return [unit for layer in inner["layer"] for unit in _layers(layer)]
    return [inner]


def test_charts_bundle_holds_an_interactive_html_chart_and_its_png():
    chart = charts.bars(
        pl.DataFrame({"check": ["a", "b"], "rate": [0.5, 1.0], "policy": ["x", "x"]}),
        x="check",
        y="rate",
        color="policy",
    )
    data, metadata, png = charts.chart_bundle(chart, "00_test")
    assert set(data) == {"text/html", "image/png", "text/plain"}
    assert png.startswith(PNG_MAGIC) and data["image/png"] == base64.b64encode(png).decode()
    width, height = charts.png_size(png)
    assert metadata == {
        "star": {"figure": "00_test"},
        "image/png": {"width": round(width / charts.PNG_SCALE), "height": round(height / charts.PNG_SCALE)},
    }
    page = data["text/html"]
    assert f'src="data:image/png;base64,{data["image/png"]}"' in page  # the fallback when scripts cannot run
    assert page.count(f"<script {charts.BUNDLE_ATTRIBUTE}=") == 1 and "window.vegaEmbed" in page
    assert not re.search(r"<script[^>]+src=", page) and "esm.sh" not in page and "cdn.jsdelivr" not in page
    spec = json.loads(re.search(r"var spec = (\{.*?\}), options", page).group(1))
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v6")
    assert spec["datasets"] and spec["config"]["axis"]["labelLimit"] == charts.LABEL_LIMIT_PX


def test_charts_html_cannot_be_closed_by_the_data():
    chart = charts.message_chart("</script><script>alert(1)</script><!--")
    page = charts.chart_html(chart, "x", include_bundle=False)
    assert page.count("</script>") == 1 and "<!--" not in page  # only the renderer's own closing tag
    spec = json.loads(re.search(r"var spec = (\{.*?\}), options", page).group(1))
    assert spec["datasets"][next(iter(spec["datasets"]))][0]["text"].startswith("</script><script>")


def test_charts_every_builder_has_tooltips_and_line_charts_zoom(noise_runs):
    noise = findings.env_noise(load_results(noise_runs).frame, "tiny")
    trend = charts.trend(
        noise.chart_data, x="tool_failure_rate", annotations=noise.tables["paper_statements"]
    )
    curves = charts.training_curves(
        pl.DataFrame(
            {
                "step": [1, 2, 1, 2],
                "metric": ["loss"] * 4,
                "value": [1.0, 0.5, 0.9, 0.4],
                "run": ["a", "a", "b", "b"],
            }
        )
    )
    grid = charts.heatmap(
        pl.DataFrame({"a": ["x", "x", "y"], "b": ["p", "q", "p"], "value": [0.1, 0.2, 0.3]}), x="a", y="b"
    )
    for chart in (trend, curves, grid):
        units = _layers(chart.to_dict())
        assert any("tooltip" in u.get("encoding", {}) for u in units), units
    for chart in (trend, curves):
        params = chart.to_dict()["params"]  # Altair lifts a view's selection to the top level
        assert [p["bind"] for p in params] == ["scales"]  # drag to pan, wheel to zoom


def _wide_frame(panels: int, categories: int) -> pl.DataFrame:
    rows = [
        {"source": s, "x": f"category number {c} with a long name", "value": 0.1 * (c % 9), "model": f"m{p}"}
        for p in range(panels)
        for c in range(categories)
        for s in ("paper", "ours")
    ]
    return pl.DataFrame(rows)


@pytest.mark.parametrize("builder", ["paper_vs_ours", "trend", "training_curves", "heatmap", "bars"])
def test_charts_fit_a_screen(builder):
    wide = _wide_frame(panels=6, categories=10)
    chart = {
        "paper_vs_ours": lambda: charts.paper_vs_ours(wide, facet="model", title="six models"),
        "trend": lambda: charts.trend(
            wide.with_columns(pl.col("x").str.extract(r"(\d+)").cast(pl.Int64)), x="x", facet="model"
        ),
        "training_curves": lambda: charts.training_curves(
            wide.with_columns(
                step=pl.int_range(pl.len()).over("model"), metric="m/" + pl.col("model"), run=pl.col("source")
            )
        ),
        "heatmap": lambda: charts.heatmap(wide.filter(pl.col("source") == "ours"), x="x", y="model"),
        "bars": lambda: charts.bars(wide, x="x", y="value", color="model", horizontal=False),
    }[builder]()
    width, _ = charts.png_size(charts.to_png(chart, scale=1))
    assert width <= charts.CHART_MAX_WIDTH_PX, (builder, width)


def test_charts_category_labels_turn_only_when_they_would_collide():
    short = charts.paper_vs_ours(
        pl.DataFrame({"source": ["ours", "paper"], "x": ["a", "b"], "value": [0.1, 0.2]}), facet=None
    )
    long = charts.paper_vs_ours(_wide_frame(panels=4, categories=6), facet="model")
    short_axis = _layers(short.to_dict())[0]["encoding"]["x"]["axis"]
    long_axis = _layers(long.to_dict())[0]["encoding"]["x"]["axis"]
    assert short_axis["labelAngle"] == 0
    assert long_axis["labelAngle"] == charts.LABEL_ANGLE and long_axis["labelOverlap"] is False
    assert long_axis["labelLimit"] == charts.LABEL_LIMIT_PX  # cut with an ellipsis, the tooltip has it whole
    config = charts.finalize(long).to_dict()["config"]
    assert config["axisQuantitative"] == {"labelOverlap": True, "labelSeparation": 6}


def test_charts_an_all_zero_series_says_so_in_the_legend_and_draws_ticks():
    rates = pl.DataFrame(
        {
            "policy": ["expert", "expert", "untrained model"],
            "check": ["final_pass", "cs/is_not_absent", "final_pass"],
            "pass rate": [1.0, 0.5, 0.0],
        }
    )
    chart = charts.bars(rates, x="check", y="pass rate", color="policy")
    assert charts.zero_series(rates, "policy", "pass rate") == ["untrained model"]
    svg = _rendered_svg(chart)
    assert "untrained model · all 0 %" in svg and "expert · all 0" not in svg  # the legend, as drawn
    units = _layers(chart.to_dict())
    assert [u["mark"]["type"] for u in units] == ["bar", "tick"]
    assert units[1]["transform"] == [{"filter": "datum['pass rate'] === 0"}]
    noise = pl.DataFrame(
        {"source": ["ours", "ours", "paper"], "x": [0.0, 0.1, 0.0], "value": [0.0, 0.0, 0.5]}
    )
    assert "ours · all 0 %" in _rendered_svg(charts.trend(noise, x="x"))
    assert "ours · all 0 %" in _rendered_svg(charts.paper_vs_ours(noise.cast({"x": pl.String}), facet=None))


def test_charts_hoist_keeps_one_bundle_per_page():
    figures = [charts.chart_html(charts.message_chart(f"figure {i}"), f"f{i}") for i in range(3)]
    page = "<html><head><title>t</title></head><body>" + "".join(figures) + "</body></html>"
    assert page.count(charts.BUNDLE_ATTRIBUTE) == 3
    hoisted = charts.hoist_vega_bundle(page)
    assert hoisted.count(charts.BUNDLE_ATTRIBUTE) == 1
    assert hoisted.index(charts.BUNDLE_ATTRIBUTE) < hoisted.index("</head>") < hoisted.index("figure 0")
    assert hoisted.count('<script data-star-chart="1">') == 3
    reserialised = page.replace(
        f'{charts.BUNDLE_ATTRIBUTE}="1"', f'{charts.BUNDLE_ATTRIBUTE}=""'
    )  # nbconvert's
    assert charts.hoist_vega_bundle(reserialised).count(charts.BUNDLE_ATTRIBUTE) == 1
    assert (
        charts.hoist_vega_bundle("<html><body>no charts</body></html>")
        == "<html><body>no charts</body></html>"
    )


def test_charts_png_size_rejects_other_bytes():
    with pytest.raises(ValueError, match="not a PNG"):
        charts.png_size(b"GIF89a")
