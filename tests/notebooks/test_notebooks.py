"""Every notebook: its parameters are NotebookParams' fields, and executed at tiny scale it shows its figure,
its table and a verdict, with no error cell."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import nbformat
import papermill as pm
import polars as pl
import pytest

from star_lib.experiments.results import load_results
from star_lib.viz import charts, findings
from star_lib.viz.params import NotebookParams

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

NAMES = [
    "00_quickstart",
    "01_reward_design",
    "02_model_scale",
    "03_data_quantity",
    "04_data_difficulty",
    "05_algorithms",
    "06_env_noise",
    "07_interactions",
    "08_real_queries",
]


def test_notebooks_exist_with_the_names_of_the_issue():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_parameters_are_the_dataclass_fields(name):
    path = NOTEBOOKS / f"{name}.ipynb"
    params = pm.inspect_notebook(str(path))
    assert list(params) == [f.name for f in dataclasses.fields(NotebookParams)]
    defaults = {k: ast.literal_eval(v["default"]) for k, v in params.items()}
    assert defaults == NotebookParams.field_defaults()
    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assert "NotebookParams(" in code[1].source  # the first code cell after the parameters builds the config
    assert all(not c.get("outputs") for c in code), "commit notebooks without outputs"


def _outputs(nb):
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            yield index, out


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_execute_with_figure_table_and_verdict(report, name):
    reports, _, cfg = report
    result = next(r for r in reports if r.name == name)
    assert result.ok, f"{name} failed in cell {result.cell}: {result.error}"
    nb = nbformat.read(str(result.executed), as_version=4)
    outputs = list(_outputs(nb))
    assert not [o for _, o in outputs if o.output_type == "error"]
    meta = [(o.get("metadata") or {}).get("star", {}) for _, o in outputs]
    figures = [o for _, o in outputs if "figure" in (o.get("metadata") or {}).get("star", {})]
    assert figures and all("image/png" in o.data for o in figures)
    assert all('class="star-chart"' in o.data["text/html"] for o in figures)  # the interactive chart
    tables = [m["table"] for m in meta if m.get("table", "").startswith(name)]
    assert tables, f"{name} shows no table of its own"
    assert result.summary and any(m.get("summary") == result.summary for m in meta)
    for figure in result.figures:
        assert (Path(cfg.out_dir) / "figures" / f"{figure}.png").is_file()


def test_notebooks_verdicts_are_computed_from_the_runs(report, results_dir):
    reports, _, _ = report
    frame = load_results(results_dir).frame
    expected = {
        "01_reward_design": findings.reward_design(frame, "tiny").verdict,
        "03_data_quantity": findings.data_quantity(frame, "tiny").verdict,
        "06_env_noise": findings.env_noise(frame, "tiny").verdict,
        "07_interactions": findings.interactions(frame, "tiny").verdict,
    }
    got = {r.name: r.summary for r in reports if r.name in expected}
    assert got == expected
    noise = frame.filter((pl.col("finding") == "noise") & (pl.col("metric") == findings.FINAL))
    drop = dict(noise.select("tool_failure_rate", "value").iter_rows())
    assert (
        f"fail=0.1 < fail=0: {drop_outcome(frame)}, ours {100 * (drop[0.1] - drop[0.0]):+.1f} ± "
        in (got["06_env_noise"])
    )


def drop_outcome(frame: pl.DataFrame) -> str:
    """The outcome of the noise finding's 'drop at 10 %' comparison on the runs."""
    return next(
        c.outcome for c in findings.env_noise(frame, "tiny").comparisons if c.label.startswith("fail=0.1")
    )


FINDING_NOTEBOOKS = {
    "01_reward_design": findings.reward_design,
    "02_model_scale": findings.model_scale,
    "03_data_quantity": findings.data_quantity,
    "04_data_difficulty": findings.data_difficulty,
    "05_algorithms": findings.algorithms,
    "06_env_noise": findings.env_noise,
    "07_interactions": findings.interactions,
}


def _body(page: str) -> str:
    return page[page.index("<tbody>") : page.index("</tbody>")]


@pytest.mark.parametrize("name", list(FINDING_NOTEBOOKS))
def test_notebooks_show_the_termination_and_transport_mix_per_arm(report, results_dir, name):
    reports, _, _ = report
    result = next(r for r in reports if r.name == name)
    nb = nbformat.read(str(result.executed), as_version=4)
    shown = {
        (o.get("metadata") or {}).get("star", {}).get("table"): o.data["text/html"]
        for _, o in _outputs(nb)
        if "text/html" in o.get("data", {})
    }
    expected = FINDING_NOTEBOOKS[name](load_results(results_dir).frame, "tiny")
    health = expected.health
    assert health.height >= 1, f"{name}: the real tiny runs give one health row per arm"
    for column in (*findings.TERMINATION_COLUMNS, "format errors", *findings.TRANSPORT_COLUMNS, "tool calls"):
        assert f">{column}</th>" in shown[f"{name}/health"], (name, column)
        assert health[column].null_count() == 0, (name, column)  # read from the runs' eval metrics
    assert health.select(sum(pl.col(c) for c in findings.TERMINATION_COLUMNS)).to_series().to_list() == (
        pytest.approx([1.0] * health.height)
    )
    page = charts.html_table(health, percent=findings.HEALTH_PERCENT)
    assert _body(shown[f"{name}/health"]) == _body(page)  # the notebook shows the runs' numbers
    assert "cs/is_valid_transportation" in shown[f"{name}/checks"]


def test_notebooks_quickstart_opens_the_explorer(report):
    reports, _, _ = report
    result = next(r for r in reports if r.name == "00_quickstart")
    nb = nbformat.read(str(result.executed), as_version=4)
    snapshots = [o for _, o in _outputs(nb) if "star-explorer" in o.get("data", {}).get("text/html", "")]
    assert len(snapshots) == 2  # in-memory episodes, then the runs folder's rollouts
    assert any("application/vnd.jupyter.widget-view+json" in o.data for o in snapshots)
    assert "tool faults" in snapshots[0].data["text/html"]
