"""``star report``: executed notebooks, offline HTML, figures, index, and the failure summary."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import polars as pl
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from star_lib.cli import main
from star_lib.cli.report_pages import ReportConfig, build_reports, select_notebooks

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_reports_write_every_file_and_an_index(report):
    reports, index, cfg = report
    out = Path(cfg.out_dir)
    assert [r.name for r in reports] == [p.stem for p in sorted(NOTEBOOKS.glob("*.ipynb"))]
    page = index.read_text()
    for r in reports:
        assert (out / f"{r.name}.ipynb").is_file() and (out / f"{r.name}.html").is_file()
        assert f'href="{r.name}.html"' in page and f'href="{r.name}.ipynb"' in page
        assert r.summary and r.summary.replace("'", "&#x27;")[:60] in page
        assert r.figures and all((out / "figures" / f"{f}.png").is_file() for f in r.figures)
        assert f'src="figures/{r.figures[0]}.png"' in page
    assert f"{len(reports)} of {len(reports)} notebooks ran without error" in page


def test_reports_html_is_self_contained(report):
    reports, _, _ = report
    for r in reports:
        page = r.html.read_text()
        assert not re.search(r"<script[^>]+src=", page), r.name  # no script loads from anywhere
        assert not re.search(r"<link[^>]+href=[\"']https?:", page), r.name
        assert "data:image/png;base64," in page
        assert "Traceback" not in page
        # interactive figures: one inlined Vega bundle in <head>, one chart script per figure
        assert page.count("<script data-star-vega-bundle=") == 1, r.name
        assert page.index("data-star-vega-bundle") < page.index("</head>"), r.name
        assert page.count("<script data-star-chart=") == len(r.figures), r.name


def test_reports_executed_notebooks_are_trusted(report):
    from nbformat.sign import NotebookNotary

    reports, _, _ = report
    notary = NotebookNotary()
    assert all(notary.check_signature(nbformat.read(str(r.executed), as_version=4)) for r in reports)


def test_reports_select_notebooks_by_number_or_name(tmp_path):
    assert [p.stem for p in select_notebooks(NOTEBOOKS, ["04", "01_reward_design"])] == [
        "01_reward_design",
        "04_data_difficulty",
    ]
    with pytest.raises(FileNotFoundError, match="matches no notebook"):
        select_notebooks(NOTEBOOKS, ["42"])
    with pytest.raises(FileNotFoundError, match="no NN_name.ipynb"):
        select_notebooks(tmp_path)


def _notebook(path: Path, code: str) -> None:
    nb = new_notebook(
        cells=[
            new_markdown_cell(f"# {path.stem}"),
            new_code_cell('results_dir = "runs"\nscale = "tiny"', metadata={"tags": ["parameters"]}),
            new_code_cell(code),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


def test_reports_failure_names_the_notebook_and_cell(tmp_path, capsys):
    notebooks = tmp_path / "nb"
    notebooks.mkdir()
    _notebook(
        notebooks / "01_fine.ipynb", "from star_lib.viz.charts import show_verdict\nshow_verdict('all good')"
    )
    _notebook(notebooks / "02_broken.ipynb", "x = 1\nraise RuntimeError('boom in the second notebook')")
    code = main(
        [
            "report",
            "--notebooks",
            str(notebooks),
            "--out",
            str(tmp_path / "out"),
            "--results-dir",
            str(_empty_runs(tmp_path)),
            "--no-progress",
        ]
    )
    assert code == 1
    printed = capsys.readouterr().out
    assert "02_broken" in printed and "RuntimeError: boom in the second notebook" in printed
    # cell 2 of the source notebook; In [3] because papermill's injected parameters ran as In [2]
    assert re.search(r"02_broken\s+failed in cell 2 \(In \[3\]\): RuntimeError", printed)
    index = (tmp_path / "out" / "index.html").read_text()
    assert "failed in cell 2 (In [3]): RuntimeError: boom" in index
    assert "all good" in index and "1 of 2 notebooks ran" in index
    assert (tmp_path / "out" / "02_broken.html").is_file()  # the failed notebook is still published


def test_reports_config_rejects_bad_values():
    with pytest.raises(ValueError, match="scale"):
        ReportConfig(scale="huge")
    with pytest.raises(ValueError, match="launch"):
        ReportConfig(launch="cloud")


def test_reports_only_runs_the_selected_notebooks(tmp_path):
    notebooks = tmp_path / "nb"
    notebooks.mkdir()
    _notebook(notebooks / "01_a.ipynb", "print(results_dir)")
    _notebook(notebooks / "02_b.ipynb", "raise SystemExit('must not run')")
    reports, index = build_reports(
        ReportConfig(
            notebooks_dir=str(notebooks),
            out_dir=str(tmp_path / "out"),
            results_dir="somewhere",
            only=("1",),
            progress=False,
        )
    )
    assert [r.name for r in reports] == ["01_a"] and reports[0].ok
    executed = nbformat.read(str(reports[0].executed), as_version=4)
    assert "somewhere" in executed.cells[-1].outputs[0].text  # the parameter was injected
    assert not (tmp_path / "out" / "02_b.ipynb").exists()


def _empty_runs(tmp_path):
    """A runs folder with no runs, beside (not around) the reports: star report refuses --out inside it."""
    runs = tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    return runs


def test_reports_without_notebooks_publish_pages_that_link_nothing_missing(tmp_path):
    notebooks = tmp_path / "nb"
    notebooks.mkdir()
    _notebook(notebooks / "01_a.ipynb", "print('page body')")
    out = tmp_path / "out"
    runs = _empty_runs(tmp_path)
    args = ["report", "--notebooks", str(notebooks), "--out", str(out), "--results-dir", str(runs)]
    assert main([*args, "--no-progress", "--no-notebooks"]) == 0
    assert (out / "01_a.html").is_file() and "page body" in (out / "01_a.html").read_text()
    assert not (out / "01_a.ipynb").exists()
    index = (out / "index.html").read_text()
    assert 'href="01_a.html"' in index and "01_a.ipynb" not in index


DEMO_METRICS = {
    "eval/final_pass": 0.0,
    "eval/termination/answer": 0.0,
    "eval/termination/turn_limit": 1.0,
    "eval/termination/context_limit": 0.0,
    "eval/turns": 4.0,
    "eval/parseable_plans": 0.0,
}
"""What ``make demo``'s noise grid logged before the turn-budget check: every episode cut at 4 turns."""


def test_reports_demo_situation_reads_no_evidence_on_the_report_page(results_dir, tmp_path):
    # the real noise grid's runs, their eval metrics rewritten to the demo situation (all arms 0 %, truncated)
    root = tmp_path / "runs"
    shutil.copytree(
        results_dir / "noise-tiny", root / "noise-tiny", ignore=shutil.ignore_patterns("*rollouts*")
    )
    for metrics in (root / "noise-tiny").glob("*/metrics.parquet"):
        frame = pl.read_parquet(metrics)
        value = pl.col("metric").replace_strict(
            DEMO_METRICS, default=pl.col("value"), return_dtype=pl.Float64
        )
        frame.with_columns(value.alias("value")).write_parquet(metrics)
    reports, index = build_reports(
        ReportConfig(
            notebooks_dir=str(NOTEBOOKS),
            out_dir=str(tmp_path / "out"),
            results_dir=str(root),
            scale="tiny",
            only=("06",),
            progress=False,
        )
    )
    [noise] = reports
    assert noise.ok, noise.error
    reason = "every episode hit the 4-turn limit; final pass 0 % in every arm"
    assert noise.summary.startswith("No evidence:") and reason in noise.summary
    assert "agrees" not in noise.summary.replace("no evidence", "")
    page = index.read_text()
    assert "No evidence: our runs show no signal" in page and reason in page
    html = noise.html.read_text()
    assert "no evidence" in html and ">turn limit</th>" in html and "100.0 %" in html
