"""Batch reports: execute the finding notebooks with papermill and publish them as self-contained HTML.

``star report`` (:func:`build_reports`) runs each ``notebooks/NN_*.ipynb`` with papermill, injecting the
notebooks' parameters (``results_dir``, ``scale``, ``launch``, ``figures_dir``), and writes into ``reports/``:

- ``<name>.ipynb`` — the executed notebook (also when a cell failed: the error is in it), signed as trusted
  (:func:`trust_notebook`, what ``jupyter trust`` does) so JupyterLab runs its charts' scripts; not kept
  with ``--no-notebooks`` (:attr:`ReportConfig.keep_notebooks`);
- ``<name>.html`` — an offline HTML page (nbconvert's lab template without MathJax, RequireJS, Mermaid or
  widget scripts — nothing loads from a CDN): figures are interactive charts (tooltips, zoom) drawn by the
  Vega bundle the page inlines once in its ``<head>`` (:func:`star_lib.viz.charts.hoist_vega_bundle`), with
  their PNG embedded as a data URI as the fallback; widgets show their HTML snapshot;
- ``figures/*.png`` — every figure, saved by the notebooks themselves (``star_lib.viz.charts.show_chart``);
- ``index.html`` — one row per notebook linking both files, with its one-line summary (the verdict the
  notebook displayed) and its figures as thumbnails.

Relative ``results_dir`` values resolve against the project root (:func:`star_lib.viz.params.project_root`),
exactly as the notebooks resolve them in JupyterLab, and are injected as absolute paths. Kernels start with
ipykernel's own log at ``ERROR`` (:data:`KERNEL_ARGUMENTS`), so its "running over TCP without encryption"
notice does not interleave with the report's output.

A failed notebook does not stop the others; :class:`NotebookReport` names the notebook, the failing cell
and the error, and ``star report`` prints them and exits with status 1.
"""

from __future__ import annotations

import html
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from star_lib.io import write_text_atomic
from star_lib.viz.charts import hoist_vega_bundle
from star_lib.viz.params import LAUNCH_MODES, SCALES, resolve_path

NOTEBOOK_PATTERN = re.compile(r"^(\d\d)_[A-Za-z0-9_]+\.ipynb$")
"""Report notebooks: ``NN_name.ipynb``."""
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""
"""nbconvert's lab template with every script that would load from a CDN removed."""
OFFLINE_PRIORITY: tuple[str, ...] = (
    "text/html",
    "text/markdown",
    "image/svg+xml",
    "text/latex",
    "image/png",
    "image/jpeg",
    "text/plain",
)
"""Output mimetypes the HTML shows, best first (no widget views, no JavaScript)."""
KERNEL_ARGUMENTS: tuple[str, ...] = ("--IPKernelApp.log_level=ERROR",)
"""Extra kernel arguments: ipykernel's startup notices (the local TCP transport warning) stay quiet."""
THUMBNAIL_WIDTH_PX = 320
"""Width of a figure thumbnail in ``index.html`` (the full PNG is one click away)."""


@dataclass(frozen=True)
class ReportConfig:
    """What ``star report`` executes, with which parameters, and where it writes."""

    notebooks_dir: str = "notebooks"
    """Folder of the ``NN_name.ipynb`` notebooks."""
    out_dir: str = "reports"
    """Output folder (executed notebooks, HTML, ``figures/``, ``index.html``)."""
    results_dir: str = "runs"
    """Runs folder the notebooks read (their ``results_dir`` parameter); relative = under the project root."""
    scale: str = "tiny"
    """Grid scale (``tiny`` | ``paper``)."""
    launch: str = "none"
    """The notebooks' ``launch`` parameter (``none``: report on the runs that exist)."""
    only: tuple[str, ...] = ()
    """Only these notebooks, by number (``01``) or name (``01_reward_design``); empty = all."""
    kernel_name: str = "python3"
    """Jupyter kernel; ``python3`` is the interpreter running ``star report``."""
    cell_timeout_s: int = 3600
    """Longest a single cell may run."""
    progress: bool = True
    """Show a progress bar."""
    keep_notebooks: bool = True
    """Keep each executed ``.ipynb`` beside its HTML; ``False`` publishes HTML, figures and the index only
    (pages meant for git: an executed notebook is about twice its page's size)."""

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"scale {self.scale!r} is not allowed; choose one of {list(SCALES)}")
        if self.launch not in LAUNCH_MODES:
            raise ValueError(f"launch {self.launch!r} is not allowed; choose one of {list(LAUNCH_MODES)}")
        if self.cell_timeout_s < 1:
            raise ValueError(f"cell_timeout_s must be >= 1, got {self.cell_timeout_s}")
        object.__setattr__(self, "only", tuple(str(o).strip() for o in self.only if str(o).strip()))


@dataclass
class NotebookReport:
    """The outcome of one notebook."""

    name: str
    """Notebook name without suffix (``01_reward_design``)."""
    title: str
    """The notebook's title (its first heading)."""
    executed: Path | None = None
    """The executed ``.ipynb``."""
    html: Path | None = None
    """The HTML page."""
    ok: bool = False
    """True when every cell ran."""
    error: str | None = None
    """``Type: message`` of the failure."""
    cell: int | None = None
    """Index of the failing cell in the source notebook (0-based; papermill's added cells not counted)."""
    execution_count: int | None = None
    """The failing cell's prompt number (``In [n]`` in the executed notebook and its HTML)."""
    seconds: float = 0.0
    """Execution time (papermill)."""
    summary: str | None = None
    """The one-line verdict/summary the notebook displayed."""
    figures: list[str] = field(default_factory=list)
    """Figure names (``reports/figures/<name>.png``)."""


def select_notebooks(folder: str | Path, only: Sequence[str] = ()) -> list[Path]:
    """List the report notebooks of ``folder`` in order, narrowed to ``only`` (numbers or names).

    Raises:
        FileNotFoundError: no notebooks, or an ``only`` entry that matches none.

    """
    folder = Path(folder)
    found = sorted(p for p in folder.glob("*.ipynb") if NOTEBOOK_PATTERN.match(p.name))
    if not found:
        raise FileNotFoundError(f"no NN_name.ipynb notebooks in {folder}")
    if not only:
        return found
    picked = []
    for key in only:
        match = [p for p in found if p.stem == key or p.stem.split("_", 1)[0] == key.zfill(2)]
        if not match:
            raise FileNotFoundError(f"--only {key!r} matches no notebook; have {[p.stem for p in found]}")
        picked += [p for p in match if p not in picked]
    return sorted(picked)


def _title(nb: Any, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("# ").strip()
    return fallback


def _outputs(nb: Any, key: str) -> list[Any]:
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            meta = (out.get("metadata") or {}).get("star") or {}
            if key in meta:
                found.append(meta[key])
    return found


_ADDED_BY_PAPERMILL = ("injected-parameters", "papermill-error-cell-tag")


def _failure(nb: Any) -> tuple[int | None, int | None, str | None]:
    """Find the first cell with an error output: its source index, prompt number, ``ename: evalue``."""
    index = 0
    for cell in nb.cells:
        if any(tag in _ADDED_BY_PAPERMILL for tag in cell.get("metadata", {}).get("tags", [])):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return index, cell.get("execution_count"), f"{out.get('ename')}: {out.get('evalue')}"
        index += 1
    return None, None, None


def describe_failure(report: NotebookReport) -> str:
    """Where and why a notebook failed, e.g. ``cell 4 (In [3]): RuntimeError: boom``."""
    where = "" if report.cell is None else f"cell {report.cell}"
    if report.execution_count is not None:
        where += f" (In [{report.execution_count}])"
    return f"{where}: {report.error}" if where else (report.error or "")


def notebook_to_html(notebook: str | Path, out: str | Path) -> Path:
    """Export an executed notebook as a self-contained, offline HTML page (see the module docstring)."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    config = Config({"NbConvertBase": {"display_data_priority": list(OFFLINE_PRIORITY)}})
    exporter = HTMLExporter(
        config=config,
        template_name="lab",
        extra_loaders=[jinja2.DictLoader({"star_offline.html.j2": OFFLINE_TEMPLATE})],
        template_file="star_offline.html.j2",
        embed_images=True,
    )
    body, _ = exporter.from_notebook_node(nbformat.read(str(notebook), as_version=4))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, hoist_vega_bundle(body))
    return out


def trust_notebook(notebook: str | Path) -> bool:
    """Sign an executed notebook as trusted in this user's Jupyter signature store (``jupyter trust``).

    JupyterLab runs the scripts of a trusted notebook's outputs (the interactive charts) and strips them from
    an untrusted one (which then shows the PNGs). Returns False, changing nothing, when the store cannot be
    written (a read-only home).
    """
    import sqlite3

    import nbformat
    from nbformat.sign import NotebookNotary

    try:
        nb = nbformat.read(str(notebook), as_version=4)
        NotebookNotary().sign(nb)
    except (OSError, sqlite3.Error):
        return False
    return True


def run_notebook(source: Path, cfg: ReportConfig) -> NotebookReport:
    """Execute one notebook with papermill into ``cfg.out_dir`` and export its HTML (never raises)."""
    import nbformat
    import papermill as pm

    out_dir = Path(cfg.out_dir)
    name = source.stem
    report = NotebookReport(name=name, title=name, executed=out_dir / f"{name}.ipynb")
    parameters = {
        "results_dir": resolve_path(cfg.results_dir),
        "scale": cfg.scale,
        "launch": cfg.launch,
        "figures_dir": str((out_dir / "figures").resolve()),
    }
    started = time.perf_counter()
    try:
        pm.execute_notebook(
            str(source),
            str(report.executed),
            parameters=parameters,
            kernel_name=cfg.kernel_name,
            progress_bar=False,
            cwd=os.getcwd(),
            execution_timeout=cfg.cell_timeout_s,
            extra_arguments=list(KERNEL_ARGUMENTS),
        )
        report.ok = True
    except pm.PapermillExecutionError as exc:
        report.error = f"{exc.ename}: {exc.evalue}"
    except Exception as exc:  # kernel died, notebook unreadable …: reported, the other notebooks still run
        report.error = f"{type(exc).__name__}: {exc}"
    report.seconds = time.perf_counter() - started
    if report.executed.is_file():
        nb = nbformat.read(str(report.executed), as_version=4)
        report.title = _title(nb, name)
        cell, count, error = _failure(nb)
        if cell is not None:
            report.ok, report.cell, report.execution_count = False, cell, count
            report.error = report.error or error
        summaries = _outputs(nb, "summary")
        report.summary = summaries[-1] if summaries else None
        report.figures = _outputs(nb, "figure")
        report.html = notebook_to_html(report.executed, out_dir / f"{name}.html")
        if cfg.keep_notebooks:
            trust_notebook(report.executed)
        else:
            report.executed.unlink()
            report.executed = None
    return report


def write_index(reports: Sequence[NotebookReport], cfg: ReportConfig) -> Path:
    """Write ``index.html``: one row per notebook with links, status, summary and figure thumbnails."""
    out = Path(cfg.out_dir) / "index.html"
    rows = []
    for r in reports:
        links = " · ".join(
            f'<a href="{html.escape(p.name)}">{label}</a>'
            for p, label in ((r.html, "HTML"), (r.executed, "notebook"))
            if p is not None and p.is_file()
        )
        status = (
            '<span style="color:#1a7f37">ok</span>'
            if r.ok
            else f'<span style="color:#cf222e">failed in {html.escape(describe_failure(r))}</span>'
        )
        thumbs = "".join(
            f'<a href="figures/{html.escape(f)}.png">'
            f'<img src="figures/{html.escape(f)}.png" alt="{html.escape(f)}" title="{html.escape(f)}" '
            f'style="width:{THUMBNAIL_WIDTH_PX}px;height:auto;margin:4px;border:1px solid #ddd"></a>'
            for f in r.figures
            if (Path(cfg.out_dir) / "figures" / f"{f}.png").is_file()
        )
        rows.append(
            f"<tr><td><b>{html.escape(r.title)}</b><br><small>{html.escape(r.name)} · {links}</small></td>"
            f"<td>{status}<br><small>{r.seconds:.1f} s</small></td>"
            f"<td>{html.escape(r.summary or '–')}</td><td>{thumbs}</td></tr>"
        )
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>STAR lab reports</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1800px}}
td,th{{border-bottom:1px solid #ddd;padding:6px;
vertical-align:top;text-align:left}}table{{border-collapse:collapse}}</style></head>
<body><h1>STAR lab reports</h1>
<p>Scale <b>{html.escape(cfg.scale)}</b>, runs from <code>{html.escape(resolve_path(cfg.results_dir))}</code>,
generated {stamp}.
{sum(r.ok for r in reports)} of {len(reports)} notebooks ran without error.</p>
<table><tr><th>notebook</th><th>status</th><th>summary</th><th>figures</th></tr>
{"".join(rows)}
</table></body></html>
"""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


def build_reports(
    cfg: ReportConfig, on_done: Callable[[NotebookReport], None] | None = None
) -> tuple[list[NotebookReport], Path]:
    """Execute the selected notebooks one after another, export them, and write the index.

    Returns:
        Each notebook's report, and the path of ``index.html``.

    """
    sources = select_notebooks(cfg.notebooks_dir, cfg.only)
    (Path(cfg.out_dir) / "figures").mkdir(parents=True, exist_ok=True)
    reports = []
    progress = _progress(cfg.progress)
    with progress:
        task = progress.add_task("notebooks", total=len(sources))
        for source in sources:
            progress.update(task, description=f"running {source.stem}")
            report = run_notebook(source, cfg)
            reports.append(report)
            if on_done is not None:
                on_done(report)
            progress.advance(task)
        progress.update(task, description="notebooks done")
    return reports, write_index(reports, cfg)


def _progress(enabled: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not enabled,
    )


def failure_table(reports: Sequence[NotebookReport]) -> Any:
    """Build a rich table of the failed notebooks: name, cell, error."""
    from rich.table import Table

    table = Table(title="failed notebooks")
    for column in ("notebook", "cell", "In", "error", "executed notebook"):
        table.add_column(column, overflow="fold")
    for r in reports:
        if not r.ok:
            cell = "" if r.cell is None else str(r.cell)
            count = "" if r.execution_count is None else str(r.execution_count)
            table.add_row(r.name, cell, count, r.error or "", str(r.executed or ""))
    return table
