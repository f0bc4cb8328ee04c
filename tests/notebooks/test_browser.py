"""Open every report page in headless Chromium: every image loads, no cell errored, every chart is drawn, a
chart mark shows its tooltip, and nothing loads from outside the page; screenshots are kept.

Debian's ``chromium`` + ``chromium-driver`` (``scripts/install_debian_packages.sh chrome``, run by
``make test`` as root), driven by Selenium with the closed-network flags of ``../shared/STACK.md`` and a
new empty profile (the ``browser`` fixture of ``conftest.py``). The test skips when Chromium is missing
outside CI and fails in CI. Screenshots go to ``test-artifacts/reports/`` (or ``$STAR_TEST_ARTIFACTS``), a
folder that ignores itself in git.
"""

from __future__ import annotations

from pathlib import Path

ERROR_MARKERS = ("Traceback (most recent call last)", "An Exception was encountered")
IMAGES_JS = (
    "return Array.from(document.images)"
    ".map(i => [i.getAttribute('src').slice(0, 80), i.complete, i.naturalWidth])"
)
CHARTS_JS = (
    "return Array.from(document.querySelectorAll('.star-chart'))"
    ".map(c => [c.dataset.starFigure, c.hasAttribute('data-star-rendered'), c.dataset.starError || null])"
)
RESOURCES_JS = "return performance.getEntriesByType('resource').map(e => e.name)"
LOCAL_SCHEMES = ("data:", "file:", "blob:", "about:")


def page_problems(driver, page: Path, screenshot: Path | None = None, wait_for=None) -> list[str]:
    """Open ``page``; list broken images, error cells, undrawn charts, outside resources; screenshot it."""
    driver.get(page.resolve().as_uri())
    problems = []
    images = driver.execute_script(IMAGES_JS)
    if not images:
        problems.append("no image on the page")
    problems += [f"image did not load: {src}" for src, done, width in images if not done or width == 0]
    text = driver.execute_script("return document.body.innerText")
    problems += [f"error cell: {marker!r}" for marker in ERROR_MARKERS if marker in text]
    if wait_for is not None and driver.execute_script(CHARTS_JS):
        drawn = lambda: all(done or error for _, done, error in driver.execute_script(CHARTS_JS))  # noqa: E731
        wait_for(drawn, 60, f"the charts of {page.name} to be drawn")
    problems += [
        f"chart not drawn: {name} ({error or 'no vega-embed'})"
        for name, done, error in driver.execute_script(CHARTS_JS)
        if not done
    ]
    problems += [
        f"loaded from outside the page: {url}"
        for url in driver.execute_script(RESOURCES_JS)
        if not url.startswith(LOCAL_SCHEMES)
    ]
    if screenshot is not None:
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, max(600, min(int(height) + 40, 16000)))
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(screenshot))
        driver.set_window_size(1400, 1000)
    return problems


def test_browser_every_report_page_loads_its_images_and_shows_no_error(report, browser, browser_kit):
    reports, index, _ = report
    shots = browser_kit.artifacts("reports")
    pages = [index, *(r.html for r in reports)]
    problems = {
        p.name: page_problems(browser, p, shots / f"{p.stem}.png", browser_kit.wait_for) for p in pages
    }
    assert problems == {p.name: [] for p in pages}
    assert all((shots / f"{p.stem}.png").stat().st_size > 10_000 for p in pages)


def test_browser_report_charts_are_interactive_offline(report, browser, browser_kit):
    reports, _, _ = report
    quickstart = next(r for r in reports if r.name == "00_quickstart")
    assert page_problems(browser, quickstart.html, wait_for=browser_kit.wait_for) == []
    charts = browser.execute_script(CHARTS_JS)
    assert [name for name, _, _ in charts] == ["00_quickstart"]
    tooltip = browser_kit.hover_tooltip(browser)
    assert "check" in tooltip and "policy" in tooltip and "pass rate" in tooltip and "%" in tooltip
    browser.save_screenshot(str(browser_kit.artifacts("reports") / "00_quickstart-tooltip.png"))
    noise = next(r for r in reports if r.name == "06_env_noise")
    assert page_problems(browser, noise.html, wait_for=browser_kit.wait_for) == []
    figure = browser.find_element("css selector", '.star-chart[data-star-figure="06_env_noise"]')
    tooltip = browser_kit.hover_tooltip(browser, figure)
    assert "tool_failure_rate" in tooltip and "value" in tooltip
    page = noise.html.read_text()
    assert page.count("data-star-vega-bundle") == 1 and page.count("<script data-star-chart=") == 2


def test_browser_check_catches_a_broken_image_an_error_cell_and_an_outside_resource(browser, tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><img src="missing.png"><pre>Traceback (most recent call last):\n'
        "  File x\nValueError: bad</pre>"
        '<div class="star-chart" data-star-figure="f"></div>'
        '<link rel="stylesheet" href="http://127.0.0.1:9/outside.css"></body></html>'
    )
    problems = page_problems(browser, page)
    assert problems == [
        "image did not load: missing.png",
        "error cell: 'Traceback (most recent call last)'",
        "chart not drawn: f (no vega-embed)",
        "loaded from outside the page: http://127.0.0.1:9/outside.css",
    ]
