"""Chart and table builders the notebooks share: ``polars.DataFrame -> altair.Chart`` and ``-> HTML``.

Every chart is rendered to PNG by vl-convert (:func:`to_png`), so an executed notebook, its HTML export
and ``reports/figures/*.png`` hold real images and nothing loads from a CDN (Altair's default HTML
renderer would fetch vega from one). Tables are plain HTML with inline styles, coloured by verdict.

The ``show_*`` helpers display a figure, a table or a verdict in a notebook and tag the output with
``{"star": {...}}`` metadata: ``star report`` reads the verdict from there for ``reports/index.html``, and
the notebook tests check every notebook shows its figure and table.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import altair as alt
    import polars as pl

SOURCE_COLOURS: dict[str, str] = {"paper": "#4c78a8", "ours": "#f58518"}
"""Colour of each ``source`` (the paper's figures vs our runs), the same in every chart."""
VERDICT_COLOURS: dict[str, str] = {
    "pass": "#d4edda",
    "fail": "#f8d7da",
    "n/a": "#eeeeee",
    "agrees": "#d4edda",
    "opposite": "#f8d7da",
    "flat": "#fff3cd",
    "missing": "#eeeeee",
    "no evidence": "#e2e3e5",
    "done": "#d4edda",
    "failed": "#f8d7da",
    "pending": "#fff3cd",
    "running": "#fff3cd",
}
"""Cell background of a verdict word (pass/fail of a check; outcome of a paper-vs-ours comparison)."""
META_KEY = "star"
"""Output-metadata key of the figures, tables and verdicts the notebooks display."""
PNG_SCALE = 2.0
"""vl-convert scale factor of the PNGs (2 = crisp on high-DPI screens)."""


# ───────────────────────────── rendering ─────────────────────────────


def to_png(chart: alt.TopLevelMixin, scale: float = PNG_SCALE) -> bytes:
    """Render a chart to PNG bytes with vl-convert (offline, no browser, no CDN)."""
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_json(), scale=scale)


def save_png(chart: alt.TopLevelMixin, path: str | Path, scale: float = PNG_SCALE) -> Path:
    """Write ``chart`` as a PNG file (folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(to_png(chart, scale))
    return path


def _display(obj: Any, metadata: Mapping[str, Any]) -> None:
    from IPython.display import display

    display(obj, metadata={META_KEY: dict(metadata)})


def show_chart(chart: alt.TopLevelMixin, name: str, figures_dir: str | Path | None = None) -> None:
    """Display ``chart`` as PNG; also save it as ``<figures_dir>/<name>.png`` when a folder is given."""
    from IPython.display import Image

    png = to_png(chart)
    if figures_dir:
        path = Path(figures_dir) / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
    _display(Image(data=png, format="png"), {"figure": name})


def show_table(table: pl.DataFrame, name: str, **style: Any) -> None:
    """Display a polars table as styled HTML (see :func:`html_table` for ``style``)."""
    from IPython.display import HTML

    _display(HTML(html_table(table, **style)), {"table": name})


def show_verdict(text: str, label: str = "Verdict") -> None:
    """Display the notebook's one-sentence verdict (``star report`` copies it into ``reports/index.html``)."""
    from IPython.display import Markdown

    _display(Markdown(f"**{label}.** {text}"), {"verdict": text, "summary": text})


# ───────────────────────────── tables ─────────────────────────────


def _cell_text(value: Any, percent: bool, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "pass" if value else "fail"
    if isinstance(value, float):
        return f"{100 * value:.{digits}f} %" if percent else f"{value:,.{digits}f}"
    return str(value)


def _cell_colour(value: Any, column: str, verdict_columns: Sequence[str]) -> str | None:
    if isinstance(value, bool):
        return VERDICT_COLOURS["pass" if value else "fail"]
    if column in verdict_columns:
        if value is None:
            return VERDICT_COLOURS["n/a"]
        return VERDICT_COLOURS.get(str(value))
    return None


def html_table(
    table: pl.DataFrame,
    *,
    percent: Sequence[str] = (),
    verdict_columns: Sequence[str] = (),
    caption: str | None = None,
    digits: int = 1,
    max_rows: int = 200,
) -> str:
    """Render a polars table as a self-contained HTML ``<table>`` (inline styles only).

    Args:
        table: The rows to show.
        percent: Columns holding fractions, shown as percentages.
        verdict_columns: Columns whose words (``pass``/``fail``/``agrees``/``opposite``…) colour the cell;
            boolean cells are always coloured pass/fail.
        caption: A caption above the table.
        digits: Decimals of numbers (and of percentages).
        max_rows: Show at most this many rows (a note says how many were left out).

    Example:
        >>> import polars as pl
        >>> "85.0 %" in html_table(pl.DataFrame({"final_pass": [0.85]}), percent=["final_pass"])
        True

    """
    head = "".join(
        f'<th style="padding:4px 8px;border-bottom:2px solid #444;text-align:left">{html.escape(c)}</th>'
        for c in table.columns
    )
    rows = []
    for record in table.head(max_rows).iter_rows(named=True):
        cells = []
        for column, value in record.items():
            colour = _cell_colour(value, column, verdict_columns)
            style = "padding:3px 8px;border-bottom:1px solid #ddd"
            if colour:
                style += f";background:{colour}"
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                style += ";text-align:right"
            text = html.escape(_cell_text(value, column in percent, digits))
            cells.append(f'<td style="{style}">{text}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = (
        (
            f'<caption style="caption-side:top;text-align:left;font-weight:bold;padding:4px 0">'
            f"{html.escape(caption)}</caption>"
        )
        if caption
        else ""
    )
    more = (
        f'<p style="color:#666">… {table.height - max_rows} more rows not shown</p>'
        if table.height > max_rows
        else ""
    )
    return (
        f'<table class="star-table" style="border-collapse:collapse;font-size:13px;margin:6px 0">{cap}'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"
    )


# ───────────────────────────── charts ─────────────────────────────


def _source_scale() -> Any:
    import altair as alt

    return alt.Scale(domain=list(SOURCE_COLOURS), range=list(SOURCE_COLOURS.values()))


def message_chart(text: str, width: int = 420, height: int = 60) -> alt.Chart:
    """Build a chart holding only a line of text (what a figure shows when there is nothing to plot yet)."""
    import altair as alt
    import polars as pl

    return (
        alt.Chart(pl.DataFrame({"text": [text]}))
        .mark_text(align="left", baseline="middle", fontSize=13, color="#555", dx=-width / 2 + 10)
        .encode(text="text:N")
        .properties(width=width, height=height)
    )


def paper_vs_ours(
    data: pl.DataFrame,
    *,
    x: str = "x",
    value: str = "value",
    facet: str | None = "model",
    x_order: Sequence[str] | None = None,
    x_title: str | None = None,
    y_title: str = "final pass rate",
    title: str = "",
    percent: bool = True,
    width: int = 160,
) -> alt.Chart:
    """Draw the paper's figures and our runs side by side as grouped bars, ``source`` as colour.

    Args:
        data: Tidy rows with ``source`` (``paper``/``ours``), ``x``, ``value`` and optionally ``facet``,
            ``sd`` (our spread over seeds, drawn as error bars) and ``note``.
        x: Category column.
        value: Value column (fractions when ``percent``).
        facet: Column to facet by (one panel per value, e.g. the model size), or None.
        x_order: Order of the categories.
        x_title: Axis title (default: ``x``).
        y_title: Value axis title.
        title: Chart title.
        percent: Format the value axis as percentages.
        width: Width of each panel.

    """
    import altair as alt

    rows = data.filter(data[value].is_not_null()) if data.height else data
    if rows.height == 0:
        return message_chart(f"{title}: no values to plot yet".strip(": "))
    fmt = ".0%" if percent else ",.1f"
    x_enc = alt.X(f"{x}:N", sort=list(x_order) if x_order else "ascending", title=x_title or x)
    offset = alt.XOffset("source:N", sort=list(SOURCE_COLOURS))
    y_enc = alt.Y(f"{value}:Q", title=y_title, axis=alt.Axis(format=fmt))
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=x_enc,
            xOffset=offset,
            y=y_enc,
            color=alt.Color("source:N", scale=_source_scale(), title="source"),
            tooltip=[c for c in ("source", x, value, "note") if c in rows.columns],
        )
    )
    labels = (
        alt.Chart()
        .mark_text(dy=-6, fontSize=10)
        .encode(
            x=x_enc,
            xOffset=offset,
            y=y_enc,
            text=alt.Text(f"{value}:Q", format=".1%" if percent else ",.1f"),
        )
    )
    layers = [bars, labels]
    if "sd" in rows.columns and rows["sd"].drop_nulls().len():
        layers.append(
            alt.Chart()
            .transform_filter("isValid(datum.sd) && datum.sd > 0")
            .transform_calculate(lo=f"datum['{value}'] - datum.sd", hi=f"datum['{value}'] + datum.sd")
            .mark_rule(color="#333")
            .encode(x=x_enc, xOffset=offset, y="lo:Q", y2="hi:Q")
        )
    chart = alt.layer(*layers, data=rows).properties(width=width, height=220)
    if facet and facet in rows.columns:
        chart = chart.facet(column=alt.Column(f"{facet}:N", title=None))
    return chart.properties(title=title) if title else chart


def trend(
    data: pl.DataFrame,
    *,
    x: str,
    value: str = "value",
    color: str = "source",
    facet: str | None = None,
    x_title: str | None = None,
    y_title: str = "final pass rate",
    title: str = "",
    percent: bool = True,
    x_log: bool = False,
    width: int = 320,
    annotations: pl.DataFrame | None = None,
) -> alt.Chart:
    """Lines with points over an ordered numeric axis (data size, failure rate), one line per ``color``.

    ``annotations`` (columns ``x`` and ``text``) draws a dashed rule with a label at each ``x``: the paper's
    statements that have no number (e.g. "clear drop at 10 %").
    """
    import altair as alt

    rows = data.filter(data[value].is_not_null()) if data.height else data
    if rows.height == 0:
        return message_chart(f"{title}: no values to plot yet".strip(": "))
    fmt = ".0%" if percent else ",.2f"
    colour = alt.Color(
        f"{color}:N", scale=_source_scale() if color == "source" else alt.Undefined, title=color
    )
    encode = {
        "x": alt.X(f"{x}:Q", title=x_title or x, scale=alt.Scale(type="log") if x_log else alt.Undefined),
        "y": alt.Y(f"{value}:Q", title=y_title, axis=alt.Axis(format=fmt)),
        "color": colour,
        "tooltip": [c for c in (color, x, value, "note") if c in rows.columns],
    }
    base = alt.Chart().encode(**encode)
    chart = alt.layer(base.mark_line(), base.mark_point(filled=True, size=60), data=rows).properties(
        width=width, height=220
    )
    if annotations is not None and annotations.height:
        import polars as pl

        notes = annotations.with_row_index("row").with_columns((6 + 14 * pl.col("row")).alias("ypos"))
        rule = (
            alt.Chart(notes)
            .mark_rule(strokeDash=[4, 3], color=SOURCE_COLOURS["paper"])
            .encode(x=alt.X("x:Q"))
        )
        label = (
            alt.Chart(notes)
            .mark_text(align="right", dx=-3, baseline="top", fontSize=10, color=SOURCE_COLOURS["paper"])
            .encode(x=alt.X("x:Q"), y=alt.Y("ypos:Q", scale=None), text="text:N")
        )
        chart = alt.layer(chart, rule, label)
    if facet and facet in rows.columns:
        chart = chart.facet(column=alt.Column(f"{facet}:N", title=None))
    return chart.properties(title=title) if title else chart


def bars(
    data: pl.DataFrame,
    *,
    x: str,
    y: str,
    color: str,
    title: str = "",
    percent: bool = True,
    horizontal: bool = True,
) -> alt.Chart:
    """Draw grouped bars of ``y`` per ``x`` category, one bar per ``color`` (e.g. pass rate per check)."""
    import altair as alt

    if data.height == 0:
        return message_chart(f"{title}: no values to plot yet".strip(": "))
    fmt = ".0%" if percent else ",.1f"
    cat = alt.Y(f"{x}:N", title=None) if horizontal else alt.X(f"{x}:N", title=None)
    val = (
        alt.X(f"{y}:Q", axis=alt.Axis(format=fmt))
        if horizontal
        else alt.Y(f"{y}:Q", axis=alt.Axis(format=fmt))
    )
    offset = {"yOffset": alt.YOffset(f"{color}:N")} if horizontal else {"xOffset": alt.XOffset(f"{color}:N")}
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            **({"y": cat, "x": val} if horizontal else {"x": cat, "y": val}),
            color=alt.Color(f"{color}:N"),
            tooltip=[x, color, y],
            **offset,
        )
        .properties(width=360)
    )
    return chart.properties(title=title) if title else chart


def training_curves(
    curves: pl.DataFrame,
    *,
    color: str = "run",
    metrics: Sequence[str] | None = None,
    title: str = "training curves",
    width: int = 260,
) -> alt.Chart:
    """Per-step metrics (``step``, ``metric``, ``value``, ``color``), one panel per metric."""
    import altair as alt

    rows = (
        curves
        if metrics is None or not curves.height
        else curves.filter(curves["metric"].is_in(list(metrics)))
    )
    if rows.height == 0:
        return message_chart(
            "no per-step training metrics in these runs yet (they come from the sft/rl stages)"
        )
    return (
        alt.Chart(rows)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
            color=alt.Color(f"{color}:N", title=color),
            tooltip=[color, "step", "value"],
        )
        .properties(width=width, height=160)
        .facet(facet=alt.Facet("metric:N", title=None), columns=3)
        .resolve_scale(y="independent")
        .properties(title=title)
    )


def heatmap(
    data: pl.DataFrame,
    *,
    x: str,
    y: str,
    value: str = "value",
    title: str = "",
    percent: bool = True,
) -> alt.Chart:
    """Draw a two-axis grid of values with each value written in its cell (the factorial view)."""
    import altair as alt

    rows = data.filter(data[value].is_not_null()) if data.height else data
    if rows.height == 0:
        return message_chart(f"{title}: no values to plot yet".strip(": "))
    fmt = ".1%" if percent else ",.2f"
    base = alt.Chart(rows).encode(x=alt.X(f"{x}:O", title=x), y=alt.Y(f"{y}:O", title=y))
    cells = base.mark_rect().encode(
        color=alt.Color(f"{value}:Q", title=value, scale=alt.Scale(scheme="blues"))
    )
    text = base.mark_text(fontSize=13).encode(text=alt.Text(f"{value}:Q", format=fmt))
    chart = alt.layer(cells, text).properties(
        width=80 * max(1, rows[x].n_unique()), height=50 * max(1, rows[y].n_unique())
    )
    return chart.properties(title=title) if title else chart
