"""Open every report page in headless Chromium: every image loads, no cell errored; screenshots are kept.

Debian's ``chromium`` + ``chromium-driver`` (``scripts/install_debian_packages.sh chrome``, run by
``make test`` as root), driven by Selenium with the closed-network flags of ``../shared/STACK.md`` and a
new empty profile. The test skips when Chromium is missing outside CI and fails in CI. Screenshots go to
``test-artifacts/reports/`` (or ``$STAR_TEST_ARTIFACTS``), a folder that ignores itself in git.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("STAR_TEST_ARTIFACTS") or REPO / "test-artifacts")
ERROR_MARKERS = ("Traceback (most recent call last)", "An Exception was encountered")
IMAGES_JS = (
    "return Array.from(document.images)"
    ".map(i => [i.getAttribute('src').slice(0, 80), i.complete, i.naturalWidth])"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
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


def page_problems(driver, page: Path, screenshot: Path | None = None) -> list[str]:
    """Open ``page``; list broken images and error cells (and save a full-page screenshot)."""
    driver.get(page.resolve().as_uri())
    problems = []
    images = driver.execute_script(IMAGES_JS)
    if not images:
        problems.append("no image on the page")
    problems += [f"image did not load: {src}" for src, done, width in images if not done or width == 0]
    text = driver.execute_script("return document.body.innerText")
    problems += [f"error cell: {marker!r}" for marker in ERROR_MARKERS if marker in text]
    if screenshot is not None:
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, max(600, min(int(height) + 40, 16000)))
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(screenshot))
        driver.set_window_size(1400, 1000)
    return problems


def _artifacts(sub: str) -> Path:
    folder = ARTIFACTS / sub
    folder.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / ".gitignore").write_text("*\n")
    return folder


def test_browser_every_report_page_loads_its_images_and_shows_no_error(report, browser):
    reports, index, _ = report
    shots = _artifacts("reports")
    pages = [index, *(r.html for r in reports)]
    problems = {p.name: page_problems(browser, p, shots / f"{p.stem}.png") for p in pages}
    assert problems == {p.name: [] for p in pages}
    assert all((shots / f"{p.stem}.png").stat().st_size > 10_000 for p in pages)


def test_browser_check_catches_a_broken_image_and_an_error_cell(browser, tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><img src="missing.png"><pre>Traceback (most recent call last):\n'
        "  File x\nValueError: bad</pre></body></html>"
    )
    problems = page_problems(browser, page)
    assert problems == ["image did not load: missing.png", "error cell: 'Traceback (most recent call last)'"]
