"""Relative notebook paths mean the project root's folders, whatever the kernel's working directory.

``star lab`` starts JupyterLab in ``notebooks/``; papermill and ``star report`` run kernels elsewhere. A
notebook's ``results_dir="runs"`` must find ``<project>/runs`` in every case (issue 16 item 1), and
``star report`` keeps ipykernel's TCP notice out of its output and writes readable thumbnails (item 7).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from star_lib.cli.report_pages import THUMBNAIL_WIDTH_PX, ReportConfig, build_reports
from star_lib.experiments.grids import base_config, factorial
from star_lib.experiments.runner import run_grid_local
from star_lib.viz import runs
from star_lib.viz.params import PROJECT_ROOT_ENV, NotebookParams, project_root

FAST = {
    "stages": ["world", "synth", "teacher", "eval"],
    "rl_data_size": 10,
    "synth": {"n_base": 30, "n_test": 3, "days_choices": [3]},
    "eval": {"max_queries": 3},
}
PARAMETERS = (
    'results_dir = "runs"\nscale = "tiny"\nlaunch = "none"\ncluster = ""\nstages = ""\nfigures_dir = ""'
)
READ_RUNS = """\
from star_lib.viz import NotebookParams, runs
params = NotebookParams(results_dir=results_dir, scale=scale, launch=launch, cluster=cluster, stages=stages,
                        figures_dir=figures_dir)
print("RESULTS", params.results_dir, runs.open_results(params).runs)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project folder (pyproject.toml, configs/, notebooks/) with one finished run in ``runs/``."""
    root = tmp_path_factory.mktemp("project")
    (root / "pyproject.toml").write_text('[project]\nname = "lab"\n')
    (root / "configs").mkdir()
    (root / "notebooks").mkdir()
    grid = factorial(
        "noise-tiny", base_config("tiny").replace(**FAST), {"tool_failure_rate": [0.0]}, finding="noise"
    )
    assert [r.status for r in run_grid_local(grid, root / "runs")] == ["done"]
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Runs at the root"),
            new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
            new_code_cell(READ_RUNS),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "notebooks" / "01_runs.ipynb")
    return root


def test_project_root_is_the_folder_with_pyproject_and_configs(project, monkeypatch):
    monkeypatch.delenv(PROJECT_ROOT_ENV, raising=False)
    assert project_root(project / "notebooks") == project.resolve()
    monkeypatch.chdir(project / "notebooks")
    params = NotebookParams(figures_dir="reports/figures", cluster="slurm/a.yaml")
    assert params.results_path == project.resolve() / "runs"
    assert params.figures_path == project.resolve() / "reports" / "figures"
    assert params.cluster == str(project.resolve() / "slurm" / "a.yaml")
    assert runs.open_results(params).runs == 1  # the run at the root, not notebooks/runs
    absolute = NotebookParams(results_dir=str(project / "elsewhere"))
    assert absolute.results_path == project / "elsewhere"


def test_project_root_setting_wins_and_is_checked(project, tmp_path, monkeypatch):
    monkeypatch.chdir(project / "notebooks")
    monkeypatch.setenv(PROJECT_ROOT_ENV, str(tmp_path))
    assert NotebookParams().results_path == tmp_path.resolve() / "runs"
    monkeypatch.setenv(PROJECT_ROOT_ENV, str(tmp_path / "missing"))
    with pytest.raises(ValueError, match=f"{PROJECT_ROOT_ENV}=.*is not a folder"):
        NotebookParams()


def test_notebook_run_from_notebooks_folder_finds_the_runs_at_the_root(project, monkeypatch):
    """A kernel whose working directory is ``notebooks/`` (JupyterLab's) reads ``<project>/runs``."""
    import papermill as pm

    monkeypatch.delenv(PROJECT_ROOT_ENV, raising=False)
    out = project / "executed.ipynb"
    pm.execute_notebook(
        str(project / "notebooks" / "01_runs.ipynb"),
        str(out),
        kernel_name="python3",
        progress_bar=False,
        cwd=str(project / "notebooks"),
    )
    text = "".join(
        o.get("text", "") for c in nbformat.read(out, as_version=4).cells for o in c.get("outputs", [])
    )
    assert f"RESULTS {project.resolve() / 'runs'} 1" in text


def test_report_resolves_runs_at_the_root_and_hides_the_tcp_notice(project, monkeypatch, capfd):
    """``star report`` from ``notebooks/`` with the default ``runs``: the root's runs, no ipykernel notice."""
    monkeypatch.delenv(PROJECT_ROOT_ENV, raising=False)
    monkeypatch.chdir(project / "notebooks")
    cfg = ReportConfig(notebooks_dir=".", out_dir=str(project / "reports"), progress=False)
    reports, index = build_reports(cfg)
    assert [r.ok for r in reports] == [True], [r.error for r in reports]
    executed = nbformat.read(reports[0].executed, as_version=4)
    injected = next(c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert f"results_dir = {json.dumps(str(project.resolve() / 'runs'))}" in injected.source
    text = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    assert f"RESULTS {project.resolve() / 'runs'} 1" in text
    captured = capfd.readouterr()
    assert "without encryption" not in captured.out + captured.err
    assert str(project.resolve() / "runs") in index.read_text()


def test_report_index_thumbnails_are_readable(project, tmp_path):
    from star_lib.cli.report_pages import NotebookReport, write_index

    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "01_fig.png").write_bytes(b"\x89PNG")
    cfg = ReportConfig(out_dir=str(tmp_path), results_dir=str(project / "runs"), progress=False)
    page = write_index([NotebookReport(name="01_a", title="A", ok=True, figures=["01_fig"])], cfg).read_text()
    widths = [int(w) for w in re.findall(r'<img src="figures/01_fig.png"[^>]*width:(\d+)px', page)]
    assert widths == [THUMBNAIL_WIDTH_PX] and THUMBNAIL_WIDTH_PX >= 300
