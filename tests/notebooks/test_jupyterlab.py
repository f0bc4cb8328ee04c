"""Issue 16's acceptance in a real JupyterLab, driven by headless Chromium.

The test copies the quickstart and the noise notebook into a temporary project (``pyproject.toml``,
``configs/``, ``notebooks/``, and a ``runs/`` folder with the tiny noise grid made by the real runner),
starts JupyterLab on localhost with ``notebooks/`` as its root (a random free port, a token, no browser,
every Jupyter folder in the temporary tree, the ``star-lab`` kernel registered as ``star lab`` registers
it), and in Chromium:

- runs every cell of ``00_quickstart`` (Run → Run All Cells) and sees the runs at the project root, not in
  ``notebooks/runs``; hovers a bar of its chart and reads the tooltip; clicks the runs explorer's
  ``next ▶`` and reads the raw text of a malformed turn (one assistant turn of the first evaluation episode
  is rewritten to text the protocol's parser refuses);
- runs every cell of ``06_env_noise`` (the cheapest finding notebook), sees its four runs found under the
  project root, and hovers a point of its trend chart.

Screenshots go to ``test-artifacts/jupyterlab/`` (or ``$STAR_TEST_ARTIFACTS``). Every wait polls the page
for the state it needs with a deadline several times what it takes on 2 cores. Like ``test_browser.py`` the
test skips when Chromium is missing outside CI and fails in CI.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat
import polars as pl
import pytest

from star_lib.cli.report import KERNEL_NAME, register_kernel
from star_lib.experiments.grids import finding_grid
from star_lib.experiments.runner import run_grid_local
from star_lib.viz.explorer import TrajectoryExplorer, rollout_files
from star_lib.viz.params import PROJECT_ROOT_ENV

pytestmark = pytest.mark.slow

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
QUICKSTART, FINDING = "00_quickstart", "06_env_noise"
RAW_TURN = "I am not sure which tool to use, so here is my guess: Flight to Dallas on day one (STAR-RAW-7Q)."
"""The malformed turn's text: the explorer must show it as the model wrote it."""
SERVER_START_S = 120
RUN_ALL_S = 420
"""Deadline of one notebook's Run All (the quickstart takes ~40 s on 2 busy cores)."""
UI_S = 60
"""Deadline of a page reaction (JupyterLab loading, a widget update, a chart drawn, a tooltip)."""
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
"""No news and no update check (nothing may reach the network), and every cell kept in the page (JupyterLab 4
leaves cells scrolled out of view out of the DOM, so their outputs could not be read); defaults otherwise."""

PROMPTS_JS = """
const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
if (!panel) { return null; }
return Array.from(panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')).map(p => p.textContent.trim());
"""
ERRORS_JS = """
const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
return Array.from(panel.querySelectorAll('[data-mime-type="application/vnd.jupyter.error"]'))
  .map(e => e.innerText.slice(0, 400));
"""
OUTPUT_TEXT_JS = """
const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
return Array.from(panel.querySelectorAll('.jp-OutputArea-output')).map(o => o.innerText).join('\\n');
"""
KERNEL_IDLE_JS = """
const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
const status = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');
return status ? status.getAttribute('data-status') : null;
"""
MENU_XPATH = "//li[contains(@class, 'lm-MenuBar-item')][.//div[text()='{}']]"
"""A menu of JupyterLab's menu bar, by its label."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _malform_first_eval_turn(runs: Path) -> str:
    """Rewrite turn 2 of the first evaluation episode of the first run to :data:`RAW_TURN`; return the run."""
    label, path = next(iter(rollout_files(runs).items()))
    frame = pl.read_parquet(path)
    index = frame["stage"].to_list().index("eval")
    messages = json.loads(frame["messages"][index])
    assistant = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    messages[assistant[1]]["content"] = RAW_TURN
    column = frame["messages"].to_list()
    column[index] = json.dumps(messages, ensure_ascii=False)
    frame.with_columns(pl.Series("messages", column, dtype=pl.String)).write_parquet(path)
    return label


@pytest.fixture(scope="module")
def lab_project(tmp_path_factory, tiny_base) -> Path:
    """A project folder: markers, the two notebooks on the star-lab kernel, the tiny noise grid in runs/."""
    root = tmp_path_factory.mktemp("lab-project")
    (root / "pyproject.toml").write_text('[project]\nname = "lab-copy"\n')
    (root / "configs").mkdir()
    (root / "notebooks").mkdir()
    for name in (QUICKSTART, FINDING):
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "STAR lab", "language": "python"}
        nbformat.write(nb, root / "notebooks" / f"{name}.ipynb")
    results = run_grid_local(finding_grid("noise", "tiny", base=tiny_base), root / "runs")
    assert {r.status for r in results} == {"done"}, [r.error for r in results]
    run = _malform_first_eval_turn(root / "runs")
    explorer = TrajectoryExplorer(root / "runs")  # what the quickstart's last cell opens
    assert explorer.run.value == run and explorer.stage.value == "eval"
    explorer.step(+1)
    assert RAW_TURN in explorer.turn_view.value and "star-parse-error" in explorer.turn_view.value
    return root


@pytest.fixture(scope="module")
def lab(lab_project, tmp_path_factory) -> Iterator[str]:
    """JupyterLab on localhost serving ``notebooks/``; yields its base URL (the token is in the query)."""
    home = tmp_path_factory.mktemp("lab-home")
    register_kernel(prefix=str(home / "prefix"))
    for name, value in LAB_SETTINGS.items():
        (home / "settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (home / "settings" / name).write_text(json.dumps(value))
    env = {k: v for k, v in os.environ.items() if k != PROJECT_ROOT_ENV}
    env.update(
        JUPYTER_PATH=str(home / "prefix" / "share" / "jupyter"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        IPYTHONDIR=str(home / "ipython"),
        PYTHONUNBUFFERED="1",
    )
    port, token = _free_port(), secrets.token_hex(16)
    notebooks = lab_project / "notebooks"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={notebooks}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=None",
        "--LabApp.extension_manager=readonly",  # the default one asks PyPI
        *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),  # CI containers
    ]
    log = (home / "jupyterlab.log").open("w")
    server = subprocess.Popen(command, cwd=notebooks, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"JupyterLab did not start: {(home / 'jupyterlab.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"{base}|{token}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


KERNEL_DIALOG_JS = """
const dialog = document.querySelector('.jp-Dialog');
if (!dialog) { return false; }
const select = dialog.querySelector('select');
if (select) {
  const star = Array.from(select.options).find(o => o.textContent.includes('STAR lab'));
  if (star) { select.value = star.value; select.dispatchEvent(new Event('change', {bubbles: true})); }
}
const accept = dialog.querySelector('.jp-Dialog-button.jp-mod-accept');
if (accept) { accept.click(); }
return true;
"""
"""Answer JupyterLab's "Select Kernel" dialog with the project kernel (it can open over a fresh notebook)."""


def _accept_kernel_dialog(driver, settle_s: float = 3.0) -> None:
    """Give a kernel dialog ``settle_s`` to appear and answer it; a page without one is left as it is."""
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:
        if driver.execute_script(KERNEL_DIALOG_JS):
            time.sleep(0.5)
            return
        time.sleep(0.25)


def _open_and_run_all(driver, kit, lab: str, name: str) -> None:
    base, token = lab.split("|")
    driver.get(f"{base}/lab/tree/{name}.ipynb?token={token}&reset")
    kit.wait_for(lambda: driver.execute_script(PROMPTS_JS), UI_S, f"{name} to open in JupyterLab")
    kit.wait_for(lambda: driver.execute_script(KERNEL_IDLE_JS) == "idle", UI_S, f"{name}'s kernel to start")
    _accept_kernel_dialog(driver)
    driver.find_element("xpath", MENU_XPATH.format("Run")).click()
    entry = kit.wait_for(
        lambda: driver.find_elements("css selector", '.lm-Menu-item[data-command="runmenu:run-all"]'),
        UI_S,
        "the Run → Run All Cells menu entry",
    )
    entry[0].click()

    def finished() -> bool:  # every cell ran, or one failed (Run All stops there)
        prompts = driver.execute_script(PROMPTS_JS) or []
        done = prompts and all(p.startswith("[") and p[1:-2].strip().isdigit() for p in prompts)
        failed = driver.execute_script(ERRORS_JS)
        return bool((done or failed) and driver.execute_script(KERNEL_IDLE_JS) == "idle")

    def state() -> str:
        driver.save_screenshot(str(kit.artifacts("jupyterlab") / f"{name}-timeout.png"))
        prompts = " ".join(driver.execute_script(PROMPTS_JS) or [])
        return f"prompts {prompts}, kernel {driver.execute_script(KERNEL_IDLE_JS)}"

    kit.wait_for(finished, RUN_ALL_S, f"every cell of {name} to run", interval_s=1.0, state=state)
    assert driver.execute_script(ERRORS_JS) == [], name


def _scroll_to(driver, element) -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)


def test_jupyterlab_runs_the_quickstart_with_live_charts_and_explorer(lab, lab_project, browser, browser_kit):
    kit, shots = browser_kit, browser_kit.artifacts("jupyterlab")
    started = time.monotonic()
    _open_and_run_all(browser, kit, lab, QUICKSTART)
    text = browser.execute_script(OUTPUT_TEXT_JS)
    runs = lab_project.resolve() / "runs"
    assert f"4 runs with rollouts under {runs}" in text  # the project root's runs, not notebooks/runs
    browser.save_screenshot(str(shots / f"{QUICKSTART}-ran.png"))

    figure = kit.wait_for(
        lambda: browser.find_elements("css selector", '.star-chart[data-star-figure="00_quickstart"]'),
        UI_S,
        "the quickstart's figure",
    )[0]
    kit.wait_for(
        lambda: figure.get_attribute("data-star-rendered"), UI_S, "the chart to be drawn by vega-embed"
    )
    tooltip = kit.hover_tooltip(browser, figure, UI_S)
    assert "check" in tooltip and "policy" in tooltip and "pass rate" in tooltip
    browser.save_screenshot(str(shots / f"{QUICKSTART}-tooltip.png"))

    explorers = kit.wait_for(
        lambda: [b for b in browser.find_elements("css selector", "button") if b.text.strip() == "next ▶"],
        UI_S,
        "the explorers' next buttons",
    )
    assert len(explorers) == 2  # in-memory episodes, then the runs folder's rollouts
    _scroll_to(browser, explorers[-1])
    explorers[-1].click()
    raw = kit.wait_for(
        lambda: [e for e in browser.find_elements("css selector", ".star-raw") if RAW_TURN in e.text],
        UI_S,
        "the malformed turn's raw text in the explorer",
    )[0]
    _scroll_to(browser, raw)
    turn = raw.find_element("xpath", "ancestor::div[contains(@class, 'star-turn')]")
    assert "turn 2 of" in turn.text and "format_error" in turn.text and "parser error" in turn.text
    browser.save_screenshot(str(shots / f"{QUICKSTART}-malformed-turn.png"))
    print(f"quickstart in JupyterLab: {time.monotonic() - started:.0f} s")


def test_jupyterlab_runs_a_finding_notebook_on_the_root_runs(lab, lab_project, browser, browser_kit):
    kit, shots = browser_kit, browser_kit.artifacts("jupyterlab")
    started = time.monotonic()
    _open_and_run_all(browser, kit, lab, FINDING)
    text = browser.execute_script(OUTPUT_TEXT_JS)
    assert f"noise-tiny: all 4 runs finished under {lab_project.resolve() / 'runs'}." in text
    figure = kit.wait_for(
        lambda: browser.find_elements("css selector", '.star-chart[data-star-figure="06_env_noise"]'),
        UI_S,
        "the noise notebook's trend figure",
    )[0]
    kit.wait_for(lambda: figure.get_attribute("data-star-rendered"), UI_S, "the trend chart to be drawn")
    tooltip = kit.hover_tooltip(browser, figure, UI_S)
    assert "tool_failure_rate" in tooltip and "value" in tooltip and "%" in tooltip
    browser.save_screenshot(str(shots / f"{FINDING}-tooltip.png"))
    print(f"{FINDING} in JupyterLab: {time.monotonic() - started:.0f} s")
