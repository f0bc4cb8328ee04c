"""Chart and table builders the notebooks share: ``polars.DataFrame -> altair.Chart`` and ``-> HTML``.

A figure is shown as one display bundle (:func:`chart_bundle`) with two parts, and nothing in it loads from
a network:

- ``text/html`` — the interactive chart: tooltips on every mark, zoom and pan (drag, wheel) on the numeric
  axes of line charts. The output holds the chart's Vega-Lite spec, a PNG fallback (``<img>``) and a
  ``<script>`` that inlines Vega, Vega-Lite and vega-embed (:func:`vega_bundle`, the self-contained bundle
  vl-convert ships), so JupyterLab draws it offline; Altair's own HTML renderer and its ``JupyterChart``
  load vega-embed from a CDN and JupyterLab's built-in Vega renderer does not know Vega-Lite 6. JupyterLab
  runs the scripts of trusted outputs only: those of cells run in the open session, and those of a
  notebook signed as trusted (JupyterLab signs what it saves; ``star report`` signs what it executes). An
  untrusted output keeps the PNG (its scripts are stripped). ``star report``'s pages include the bundle once
  per page (:func:`hoist_vega_bundle`).
- ``image/png`` — the same chart rendered by vl-convert (:func:`to_png`), which papermill, nbconvert,
  ``reports/figures/*.png`` and the report index's thumbnails use.

Figures fit a screen (at most :data:`CHART_MAX_WIDTH_PX` wide: panel widths shrink with the number of
facets), category labels turn when they would collide and long ones are cut, and a series whose values are
all zero says so in its legend label (``ours · all 0 %``) and its zero bars are drawn as a tick.

Tables are plain HTML with inline styles, coloured by verdict. The ``show_*`` helpers display a figure, a
table or a verdict in a notebook and tag the output with ``{"star": {...}}`` metadata: ``star report`` reads
the verdict from there for ``reports/index.html``, and the notebook tests check every notebook shows its
figure and table.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import math
import os
import re
import struct
import uuid
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
"""vl-convert scale factor of the PNGs (2 = crisp on high-DPI screens; shown at half their pixel size)."""
CHART_MAX_WIDTH_PX = 900
"""Widest a figure may be (CSS pixels, legend included): panels shrink to fit."""
LEGEND_PX = 170
"""Room kept for a legend at the right of a chart."""
AXIS_PX = 70
"""Room kept for the value axis (labels and title) at the left of a chart."""
FACET_SPACING_PX = 20
"""Vega-Lite's default gap between facet panels."""
LABEL_LIMIT_PX = 140
"""Longest an axis label may be before Vega-Lite cuts it with an ellipsis (the tooltip has it whole)."""
LABEL_CHAR_PX = 6.5
"""Width of an average axis-label character (11 px sans-serif), to decide whether labels must turn."""
LABEL_ANGLE = -35
"""Angle of category labels that would collide horizontally."""
ZERO_SUFFIX = " · all 0"
"""Appended to the legend label of a series whose values are all zero (``%`` added for percentages)."""
BUNDLE_ATTRIBUTE = "data-star-vega-bundle"
"""Attribute of the ``<script>`` that holds the Vega bundle (so a page can keep just one)."""
CHART_CLASS = "star-chart"
"""CSS class of an interactive figure's container (``data-star-rendered`` once vega-embed drew it)."""
EMBED_OPTIONS: dict[str, Any] = {
    "renderer": "svg",
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},
}
"""vega-embed options: SVG marks (hoverable, crisp), a save-as-PNG/SVG menu, no link to the online editor."""


# ───────────────────────────── rendering ─────────────────────────────


def finalize(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """Return a copy of ``chart`` with the axis settings every figure shares (no colliding tick labels).

    Numeric tick labels closer than 6 px are thinned out (Vega's overlap removal; category labels are all
    kept and turn instead, :func:`category_axis`), and labels longer than :data:`LABEL_LIMIT_PX` are cut.
    Applied when a chart is rendered, so the builders' charts still compose.
    """
    return chart.configure_axis(labelLimit=LABEL_LIMIT_PX).configure_axisQuantitative(
        labelOverlap=True, labelSeparation=6
    )


def to_png(chart: alt.TopLevelMixin, scale: float = PNG_SCALE) -> bytes:
    """Render a chart to PNG bytes with vl-convert (offline, no browser, no CDN)."""
    import vl_convert as vlc

    return vlc.vegalite_to_png(finalize(chart).to_json(), scale=scale)


def png_size(png: bytes) -> tuple[int, int]:
    """Return the pixel ``(width, height)`` of PNG bytes (read from the IHDR header)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        raise ValueError("not a PNG image: the bytes do not start with the PNG signature")
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def save_png(chart: alt.TopLevelMixin, path: str | Path, scale: float = PNG_SCALE) -> Path:
    """Write ``chart`` as a PNG file (folders created, written atomically); returns the path."""
    from star_lib.io import write_bytes_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_bytes_atomic(path, to_png(chart, scale))


def _bundle_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "star-lab"


@functools.lru_cache(maxsize=1)
def vega_bundle() -> str:
    """Return Vega, Vega-Lite and vega-embed as one self-contained script (``vl_convert.javascript_bundle``).

    The bundle (~0.9 MB, no imports) sets ``window.vegaEmbed``; it takes a few seconds to build, so it is
    kept in ``$XDG_CACHE_HOME/star-lab/`` (default ``~/.cache``) keyed by the vl-convert version. It is
    wrapped in a function (its top-level names stay local) and runs only when ``vegaEmbed`` is not defined
    yet, so a page may hold it more than once.
    """
    import vl_convert as vlc

    from star_lib.io import write_text_atomic

    version = getattr(vlc, "__version__", "unknown")
    cache = _bundle_cache() / f"vega-bundle-{version}-{vlc.get_vega_version()}.js"
    try:
        if cache.is_file():
            return cache.read_text(encoding="utf-8")
    except OSError:
        pass
    code = vlc.javascript_bundle().replace("</script", "<\\/script")
    script = f"if (!window.vegaEmbed) {{ (function () {{\n{code}\n}})(); }}\n"
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(cache, script)
    except OSError:
        pass  # a read-only home: build it again next time
    return script


def bundle_script() -> str:
    """Return the ``<script>`` element holding :func:`vega_bundle`."""
    return f'<script {BUNDLE_ATTRIBUTE}="1">{vega_bundle()}</script>'


_RENDER_JS = """(function () {
  var me = document.currentScript, box = me;
  while (box && !(box.classList && box.classList.contains("%(cls)s"))) { box = box.previousElementSibling; }
  if (!box) { box = document.querySelector('[data-star-chart-id="%(id)s"]:not([data-star-rendered])'); }
  if (!box || box.hasAttribute("data-star-rendered")) { return; }
  var spec = %(spec)s, options = %(options)s, tries = 0;
  function draw() {
    if (!window.vegaEmbed) { if (tries++ < 400) { setTimeout(draw, 50); } return; }
    var view = box.querySelector(".star-chart-view");
    window.vegaEmbed(view, spec, options).then(function () {
      var img = box.querySelector(".star-chart-png");
      if (img) { img.style.display = "none"; }
      box.setAttribute("data-star-rendered", "true");
    }).catch(function (error) {
      view.textContent = "";
      box.setAttribute("data-star-error", String(error));
    });
  }
  draw();
})();"""


def _script_json(obj: Any) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\u0021--")


def chart_html(
    chart: alt.TopLevelMixin, name: str, png: bytes | None = None, *, include_bundle: bool = True
) -> str:
    """Render ``chart`` as an interactive, offline HTML fragment with its PNG as the fallback.

    Args:
        chart: The chart.
        name: The figure's name (``data-star-figure`` and the PNG's ``alt`` text).
        png: The chart's PNG (rendered when not given): shown until (and unless) the script draws the chart.
        include_bundle: Inline the Vega bundle (:func:`bundle_script`); a page that loads it once elsewhere
            passes False.

    """
    png = png if png is not None else to_png(chart)
    width, height = png_size(png)
    spec = finalize(chart).to_dict()
    chart_id = uuid.uuid4().hex
    image = base64.b64encode(png).decode("ascii")
    js = _RENDER_JS % {
        "cls": CHART_CLASS,
        "id": chart_id,
        "spec": _script_json(spec),
        "options": _script_json(EMBED_OPTIONS),
    }
    return (
        f'<div class="{CHART_CLASS}" data-star-figure="{html.escape(name)}" data-star-chart-id="{chart_id}">'
        f'<img class="star-chart-png" alt="{html.escape(name)}" src="data:image/png;base64,{image}" '
        f'style="width:{width / PNG_SCALE:.0f}px;max-width:100%;height:auto">'
        '<div class="star-chart-view"></div></div>'
        + (bundle_script() if include_bundle else "")
        + f'<script data-star-chart="1">{js}</script>'
    )


def chart_bundle(chart: alt.TopLevelMixin, name: str) -> tuple[dict[str, Any], dict[str, Any], bytes]:
    """Build a figure's display bundle: ``(data, metadata, png)`` (see the module docstring)."""
    png = to_png(chart)
    width, height = png_size(png)
    data = {
        "text/html": chart_html(chart, name, png),
        "image/png": base64.b64encode(png).decode("ascii"),
        "text/plain": f"<figure {name}: {width / PNG_SCALE:.0f}×{height / PNG_SCALE:.0f} px>",
    }
    metadata = {
        META_KEY: {"figure": name},
        "image/png": {"width": round(width / PNG_SCALE), "height": round(height / PNG_SCALE)},
    }
    return data, metadata, png


def hoist_vega_bundle(page: str) -> str:
    """Keep one Vega bundle in an HTML page: drop every chart's copy and put one at the end of ``<head>``.

    Found however the page was serialised (nbconvert writes the attribute as ``data-star-vega-bundle=""``);
    a page without a bundle comes back unchanged.
    """
    opening = re.compile(rf"<script\s+{BUNDLE_ATTRIBUTE}(?:=(?:\"[^\"]*\"|'[^']*'|[^\s>]*))?\s*>")
    if not opening.search(page):
        return page
    parts, start = [], 0
    while match := opening.search(page, start):
        parts.append(page[start : match.start()])
        start = page.index("</script>", match.end()) + len("</script>")
    parts.append(page[start:])
    body = "".join(parts)
    head = body.find("</head>")
    script = bundle_script()
    return body[:head] + script + body[head:] if head >= 0 else script + body


def _display(obj: Any, metadata: Mapping[str, Any]) -> None:
    from IPython.display import display

    display(obj, metadata={META_KEY: dict(metadata)})


def show_chart(chart: alt.TopLevelMixin, name: str, figures_dir: str | Path | None = None) -> None:
    """Display ``chart`` (interactive HTML + PNG); also save it as ``<figures_dir>/<name>.png`` when given."""
    from IPython.display import display

    from star_lib.io import write_bytes_atomic

    data, metadata, png = chart_bundle(chart, name)
    if figures_dir:
        path = Path(figures_dir) / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, png)
    display(data, metadata=metadata, raw=True)


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


def panel_width(width: float, panels: int, legend: bool = True) -> int:
    """Width of each of ``panels`` side-by-side panels: ``width``, or less so the figure fits the screen."""
    room = CHART_MAX_WIDTH_PX - AXIS_PX - (LEGEND_PX if legend else 0)
    fit = room / max(1, panels) - (FACET_SPACING_PX if panels > 1 else 0)
    return int(max(60, min(width, fit)))


def category_axis(values: Sequence[Any], band_px: float, **kwargs: Any) -> alt.Axis:
    """Build an axis for category labels: horizontal when the longest fits its band, else turned."""
    import altair as alt

    longest = max((len(str(v)) for v in values), default=0)
    angle = 0 if longest * LABEL_CHAR_PX <= band_px - 4 else LABEL_ANGLE
    return alt.Axis(labelAngle=angle, labelLimit=LABEL_LIMIT_PX, labelOverlap=False, **kwargs)


def _categories(rows: pl.DataFrame, column: str, order: Sequence[Any] | None = None) -> list[Any]:
    present = rows[column].drop_nulls().unique(maintain_order=True).to_list()
    if order:
        return [*(v for v in order if v in present), *(v for v in present if v not in order)]
    return present


def zero_series(rows: pl.DataFrame, color: str, value: str) -> list[Any]:
    """Return the ``color`` series of ``rows`` whose ``value`` is zero in every row (no visible bar)."""
    import polars as pl

    if rows.height == 0 or color not in rows.columns:
        return []
    peaks = rows.drop_nulls(value).group_by(color, maintain_order=True).agg(pl.col(value).abs().max())
    return [s for s, peak in peaks.iter_rows() if s is not None and peak == 0]


def _legend(rows: pl.DataFrame, color: str, value: str, percent: bool) -> Any:
    """Build a legend whose labels say ``· all 0 %`` for the all-zero series (Undefined when none is)."""
    import altair as alt

    zeros = zero_series(rows, color, value)
    if not zeros:
        return alt.Undefined
    suffix = json.dumps(ZERO_SUFFIX + (" %" if percent else ""))
    test = " || ".join(f"datum.value === {json.dumps(z, default=str)}" for z in zeros)
    return alt.Legend(labelExpr=f"({test}) ? datum.label + {suffix} : datum.label", labelLimit=260)


def _tooltip(columns: Sequence[str], rows: pl.DataFrame, value: str, percent: bool) -> list[Any]:
    import altair as alt

    out: list[Any] = []
    for c in columns:
        if c not in rows.columns or c in [getattr(t, "field", t) for t in out]:
            continue
        if c == value:
            out.append(alt.Tooltip(f"{c}:Q", format=".1%" if percent else ",.3f"))
        else:
            out.append(alt.Tooltip(c))
    return out


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

    Hover a bar for its numbers. A zero value is drawn as a tick on the axis, and a source whose values are
    all zero says so in the legend.

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
        width: Width of each panel (less when the panels would not fit :data:`CHART_MAX_WIDTH_PX`).

    """
    import altair as alt

    rows = data.filter(data[value].is_not_null()) if data.height else data
    if rows.height == 0:
        return message_chart(f"{title}: no values to plot yet".strip(": "))
    faceted = bool(facet and facet in rows.columns)
    panels = rows[facet].n_unique() if faceted else 1
    width = panel_width(width, panels)
    categories = _categories(rows, x, x_order)
    fmt = ".0%" if percent else ",.1f"
    x_enc = alt.X(
        f"{x}:N",
        sort=list(x_order) if x_order else "ascending",
        title=x_title or x,
        axis=category_axis(categories, width / max(1, len(categories))),
    )
    offset = alt.XOffset("source:N", sort=list(SOURCE_COLOURS))
    y_enc = alt.Y(f"{value}:Q", title=y_title, axis=alt.Axis(format=fmt))
    colour = alt.Color(
        "source:N", scale=_source_scale(), title="source", legend=_legend(rows, "source", value, percent)
    )
    tooltip = _tooltip(("source", x, value, "sd", facet or "", "note"), rows, value, percent)
    bars = alt.Chart().mark_bar().encode(x=x_enc, xOffset=offset, y=y_enc, color=colour, tooltip=tooltip)
    zero_ticks = (
        alt.Chart()
        .transform_filter(f"datum['{value}'] === 0")
        .mark_tick(thickness=3, size=max(4, width / max(1, 2 * len(categories)) - 2))
        .encode(x=x_enc, xOffset=offset, y=y_enc, color=colour, tooltip=tooltip)
    )
    band = width / max(1, 2 * len(categories))  # one bar per source per category
    layers = [bars, zero_ticks]
    if band >= 18:
        layers.append(_value_labels(x_enc, offset, y_enc, value, band, percent))
    if "sd" in rows.columns and rows["sd"].drop_nulls().len():
        layers.append(_error_bars(x_enc, offset, value))
    chart = alt.layer(*layers, data=rows).properties(width=width, height=220)
    if faceted:
        chart = chart.facet(column=alt.Column(f"{facet}:N", title=None))
    return chart.properties(title=title) if title else chart


def _value_labels(x_enc: Any, offset: Any, y_enc: Any, value: str, band: float, percent: bool) -> alt.Chart:
    """Build the numbers printed above grouped bars ``band`` pixels wide (one decimal when they fit)."""
    import altair as alt

    return (
        alt.Chart()
        .mark_text(dy=-6, fontSize=10 if band >= 34 else 9)
        .encode(
            x=x_enc,
            xOffset=offset,
            y=y_enc,
            text=alt.Text(f"{value}:Q", format=(".1%" if band >= 34 else ".0%") if percent else ",.1f"),
        )
    )


def _error_bars(x_enc: Any, offset: Any, value: str) -> alt.Chart:
    """Build ``value ± sd`` rules over grouped bars, for the rows with a positive ``sd``."""
    import altair as alt

    return (
        alt.Chart()
        .transform_filter("isValid(datum.sd) && datum.sd > 0")
        .transform_calculate(lo=f"datum['{value}'] - datum.sd", hi=f"datum['{value}'] + datum.sd")
        .mark_rule(color="#333")
        .encode(x=x_enc, xOffset=offset, y="lo:Q", y2="hi:Q")
    )


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

    Hover a point for its numbers; drag to pan, scroll to zoom (double-click resets). ``annotations``
    (columns ``x`` and ``text``) draws a dashed rule with a label at each ``x``: the paper's statements that
    have no number (e.g. "clear drop at 10 %").
    """
    import altair as alt

    rows = data.filter(data[value].is_not_null()) if data.height else data
    if rows.height == 0:
        return message_chart(f"{title}: no values to plot yet".strip(": "))
    faceted = bool(facet and facet in rows.columns)
    width = panel_width(width, rows[facet].n_unique() if faceted else 1)
    fmt = ".0%" if percent else ",.2f"
    colour = alt.Color(
        f"{color}:N",
        scale=_source_scale() if color == "source" else alt.Undefined,
        title=color,
        legend=_legend(rows, color, value, percent),
    )
    encode = {
        "x": alt.X(f"{x}:Q", title=x_title or x, scale=alt.Scale(type="log") if x_log else alt.Undefined),
        "y": alt.Y(f"{value}:Q", title=y_title, axis=alt.Axis(format=fmt)),
        "color": colour,
        "tooltip": _tooltip((color, x, value, "sd", facet or "", "note"), rows, value, percent),
    }
    base = alt.Chart().encode(**encode)
    chart = alt.layer(
        base.mark_line(), base.mark_point(filled=True, size=60).interactive(), data=rows
    ).properties(width=width, height=220)
    if annotations is not None and annotations.height:
        import polars as pl

        notes = annotations.with_row_index("row").with_columns((6 + 14 * pl.col("row")).alias("ypos"))
        rule = (
            alt.Chart(notes)
            .mark_rule(strokeDash=[4, 3], color=SOURCE_COLOURS["paper"])
            .encode(x=alt.X("x:Q"), tooltip=[alt.Tooltip("text:N", title="paper")])
        )
        label = (
            alt.Chart(notes)
            .mark_text(align="right", dx=-3, baseline="top", fontSize=10, color=SOURCE_COLOURS["paper"])
            .encode(x=alt.X("x:Q"), y=alt.Y("ypos:Q", scale=None), text="text:N")
        )
        chart = alt.layer(chart, rule, label)
    if faceted:
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
    """Draw grouped bars of ``y`` per ``x`` category, one bar per ``color`` (e.g. pass rate per check).

    Hover a bar for its numbers. A zero value is drawn as a tick, and a series whose values are all zero
    says so in the legend (``untrained model · all 0 %``).
    """
    import altair as alt

    if data.height == 0:
        return message_chart(f"{title}: no values to plot yet".strip(": "))
    fmt = ".0%" if percent else ",.1f"
    categories = _categories(data, x)
    width = panel_width(360, 1)
    cat = (
        alt.Y(f"{x}:N", title=None, axis=alt.Axis(labelLimit=LABEL_LIMIT_PX * 2))
        if horizontal
        else alt.X(f"{x}:N", title=None, axis=category_axis(categories, width / max(1, len(categories))))
    )
    val = (
        alt.X(f"{y}:Q", axis=alt.Axis(format=fmt))
        if horizontal
        else alt.Y(f"{y}:Q", axis=alt.Axis(format=fmt))
    )
    offset = {"yOffset": alt.YOffset(f"{color}:N")} if horizontal else {"xOffset": alt.XOffset(f"{color}:N")}
    encode = {
        **({"y": cat, "x": val} if horizontal else {"x": cat, "y": val}),
        "color": alt.Color(f"{color}:N", legend=_legend(data, color, y, percent)),
        "tooltip": _tooltip((x, color, y), data, y, percent),
        **offset,
    }
    base = alt.Chart().encode(**encode)
    zero_ticks = base.transform_filter(f"datum['{y}'] === 0").mark_tick(thickness=3)
    chart = alt.layer(base.mark_bar(), zero_ticks, data=data).properties(width=width)
    return chart.properties(title=title) if title else chart


def training_curves(
    curves: pl.DataFrame,
    *,
    color: str = "run",
    metrics: Sequence[str] | None = None,
    title: str = "training curves",
    width: int = 260,
) -> alt.Chart:
    """Per-step metrics (``step``, ``metric``, ``value``, ``color``), one panel per metric.

    Hover a point for its numbers; drag to pan the steps, scroll to zoom (double-click resets).
    """
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
    columns = min(3, max(1, rows["metric"].n_unique()))
    width = panel_width(width, columns)
    base = alt.Chart().encode(
        x=alt.X("step:Q", title="step"),
        y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        color=alt.Color(f"{color}:N", title=color, legend=_legend(rows, color, "value", False)),
        tooltip=_tooltip((color, "metric", "step", "value"), rows, "value", False),
    )
    points = base.mark_point(filled=True, size=14 if rows.height <= 2000 else 4)
    return (
        alt.layer(base.mark_line(), points.interactive(bind_y=False), data=rows)
        .properties(width=width, height=160)
        .facet(facet=alt.Facet("metric:N", title=None), columns=columns)
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
    columns = _categories(rows, x)
    width = min(80 * max(1, len(columns)), panel_width(CHART_MAX_WIDTH_PX, 1))
    base = alt.Chart(rows).encode(
        x=alt.X(f"{x}:O", title=x, axis=category_axis(columns, width / max(1, len(columns)))),
        y=alt.Y(f"{y}:O", title=y),
    )
    cells = base.mark_rect().encode(
        color=alt.Color(f"{value}:Q", title=value, scale=alt.Scale(scheme="blues")),
        tooltip=_tooltip((y, x, value, "sd", "note"), rows, value, percent),
    )
    text = base.mark_text(fontSize=13 if width / max(1, len(columns)) >= 60 else 10).encode(
        text=alt.Text(f"{value}:Q", format=fmt)
    )
    chart = alt.layer(cells, text).properties(width=width, height=50 * max(1, rows[y].n_unique()))
    return chart.properties(title=title) if title else chart
