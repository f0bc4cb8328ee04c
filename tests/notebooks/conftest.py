"""Session fixtures: a small results folder made by the real experiments runner, and one report over it.

Every finding grid at ``tiny`` scale (plus the interactions grid of ``07_interactions``) runs through
``run_grid_local`` with the stages that take seconds — world, synth, teacher (the expert acts out the SFT
pool) and eval (the expert policy on the held-out split) — on a smaller base than ``base_config("tiny")``
and with an 11-turn budget, so tool failures cost episodes (the noise grid shows a real drop). Building it
takes ~10 s; executing all eight notebooks once takes ~1 min on 2 cores, and every notebook test reads that
one execution.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from star_lib.cli.report_pages import NotebookReport, ReportConfig, build_reports
from star_lib.experiments.grids import FINDINGS, base_config, finding_grid
from star_lib.experiments.runner import run_grid_local
from star_lib.viz.runs import interactions_grid

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
ARTIFACTS = Path(os.environ.get("STAR_TEST_ARTIFACTS") or REPO / "test-artifacts")
"""Where the browser tests save their screenshots (a folder that ignores itself in git)."""
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
"""Chromium's flags: headless, closed network (``../shared/STACK.md``)."""
STAGES = ["world", "synth", "teacher", "eval"]
"""Stages of the test runs (sft/rl take minutes each on CPU; the notebooks need only their metrics)."""


def small_base():
    """The tiny base config, shrunk: a 100-record SFT/test pool, 12 eval queries, at most 11 turns."""
    return base_config("tiny").replace(
        stages=STAGES,
        synth={"n_base": 100, "n_test": 12, "days_choices": [3, 5]},
        eval={"max_queries": 12, "max_turns": 11, "chunk_size": 12},
    )


def build_results(root: Path) -> dict[str, list[str]]:
    """Run every finding grid and the interactions grid into ``root``; returns grid name → run statuses."""
    base = small_base()
    grids = [finding_grid(f, "tiny", base=base) for f in FINDINGS]
    grids.append(interactions_grid("tiny", base=base))
    return {grid.name: [r.status for r in run_grid_local(grid, root)] for grid in grids}


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory) -> Path:
    """A runs folder with every tiny grid finished."""
    root = tmp_path_factory.mktemp("nb-runs")
    statuses = build_results(root)
    failed = {g: s for g, s in statuses.items() if set(s) != {"done"}}
    assert not failed, failed
    return root


@pytest.fixture(scope="session")
def report(results_dir, tmp_path_factory) -> tuple[list[NotebookReport], Path, ReportConfig]:
    """``star report --scale tiny`` over the results folder, once per session: (reports, index, config)."""
    out = tmp_path_factory.mktemp("reports")
    cfg = ReportConfig(
        notebooks_dir=str(NOTEBOOKS),
        out_dir=str(out),
        results_dir=str(results_dir),
        scale="tiny",
        progress=False,
    )
    reports, index = build_reports(cfg)
    return reports, index, cfg


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that share the ~1-minute report execution as ``slow`` (``-m "not slow"`` skips them)."""
    for item in items:
        if "report" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


# ── the headless browser (Debian's chromium + chromium-driver, driven by Selenium) ──


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium with a new empty profile; skips outside CI when it is missing, fails in CI."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        message = f"headless Chromium missing ({missing}): run scripts/install_debian_packages.sh chrome"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never download a browser or a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="star-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def artifacts(sub: str) -> Path:
    """Return the screenshot folder ``<artifacts>/<sub>`` (created; the artifacts folder ignores itself)."""
    folder = ARTIFACTS / sub
    folder.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / ".gitignore").write_text("*\n")
    return folder


def wait_for(
    condition: Callable[[], object],
    timeout_s: float,
    what: str,
    interval_s: float = 0.25,
    state: Callable[[], object] | None = None,
) -> object:
    """Poll ``condition`` until it gives something truthy and return that; fail at the deadline.

    The failure names ``what`` and, when given, what ``state()`` says about the page then.
    """
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; the page shows: {state()}" if state is not None else ""
            pytest.fail(f"waited {timeout_s:.0f} s for {what}{seen}")
        time.sleep(interval_s)


BIGGEST_MARK_JS = """
const scope = arguments[0] || document;
const marks = Array.from(scope.querySelectorAll(
  '.star-chart[data-star-rendered] .mark-rect.role-mark path,'
  + ' .star-chart[data-star-rendered] .mark-symbol.role-mark path'));
const area = m => { const r = m.getBoundingClientRect(); return r.width * r.height; };
marks.sort((a, b) => area(b) - area(a));
for (const mark of marks) {
  mark.scrollIntoView({block: 'center', inline: 'center'});
  const r = mark.getBoundingClientRect();
  if (document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === mark) { return mark; }
}
return null;
"""
"""The largest bar or point of the charts drawn inside ``arguments[0]`` that no other mark covers (scrolled
into view)."""
TOOLTIP_JS = """
const tip = document.getElementById('vg-tooltip-element');
return tip && tip.classList.contains('visible') ? tip.innerText : null;
"""


def hover_tooltip(driver, scope=None, timeout_s: float = 30) -> str:
    """Hover the largest mark of a drawn chart (inside ``scope``, a web element); return its tooltip text."""
    from selenium.webdriver.common.action_chains import ActionChains

    mark = wait_for(lambda: driver.execute_script(BIGGEST_MARK_JS, scope), timeout_s, "a drawn chart mark")
    ActionChains(driver).move_to_element(mark).move_by_offset(1, 1).perform()
    return str(wait_for(lambda: driver.execute_script(TOOLTIP_JS), timeout_s, "the chart's tooltip"))


@pytest.fixture
def browser_kit() -> SimpleNamespace:
    """The browser tests' helpers: ``artifacts(sub)``, ``wait_for(...)``, ``hover_tooltip(driver, scope)``."""
    return SimpleNamespace(artifacts=artifacts, wait_for=wait_for, hover_tooltip=hover_tooltip)


@pytest.fixture(scope="session")
def tiny_base():
    """The shrunk tiny base config of the notebook tests' runs (:func:`small_base`)."""
    return small_base()
