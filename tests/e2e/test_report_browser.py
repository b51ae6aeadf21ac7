"""The report page in a real browser (Debian's headless Chromium, driven over the DevTools
protocol), built by ``python -m scaling report`` from the tables a short demo left in Azurite (the demo run
that tests/e2e/test_demo.py checks: one per session, tests/e2e/shared_demo.py).

- the page loads from a file URL with no console error, exception or failed request;
- the chart area of a screenshot is not blank (kept as ``out/report-browser.png``);
- the decision markers drawn equal the acting decisions in the table, and the demo's;
- the table's filters hide rows.

``make test`` installs chromium first (``make chromium``); without it these tests skip, saying so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scaling.report.page import CHART_ID, DECISION_META, TABLE_ID
from scaling.report.runs import write_demo_report
from tests.e2e.chromium import Chromium, chromium_binary
from tests.e2e.shared_demo import ARTIFACTS

SCREENSHOT = ARTIFACTS / "report-browser.png"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium_binary() is None,
                       reason="chromium is not installed: `make chromium` installs it (apt-get install chromium)"),
]

#: Counts the points drawn in the plotly traces marked as decision markers (from the SVG).
MARKERS_DRAWN = f"""(() => {{
  let count = 0;
  document.querySelectorAll('#{CHART_ID} g.trace.scatter').forEach(group => {{
    const trace = group.__data__ && group.__data__[0] && group.__data__[0].trace;
    if (trace && trace.meta === '{DECISION_META}') {{ count += group.querySelectorAll('path.point').length; }}
  }});
  return count;
}})()"""
ACTING_ROWS = f"document.querySelectorAll('#{TABLE_ID} tbody tr[data-acts=\"true\"]').length"
VISIBLE_ROWS = f"Array.from(document.querySelectorAll('#{TABLE_ID} tbody tr')).filter(row => !row.hidden).length"
CHART_BOX = f"(() => {{ const r = document.getElementById('{CHART_ID}').getBoundingClientRect(); " \
            "return [r.left, r.top, r.width, r.height]; })()"


@pytest.fixture(scope="module")
def demo_pages(demo_run):
    """The session's one demo run (tests/e2e/shared_demo.py): its result, the page the report
    command built from its tables before its Azurite stopped, and the demo's own report page."""
    if demo_run.report_error is not None:
        raise demo_run.report_error
    assert demo_run.report_code == 0
    return demo_run.result, demo_run.report, write_demo_report(demo_run.result, demo_run.options)


@pytest.fixture(scope="module")
def browser():
    with Chromium(width=1400, height=1300) as chromium:
        yield chromium


def load(browser: Chromium, page: Path) -> None:
    browser.errors.clear()
    browser.open(page.resolve().as_uri())
    browser.wait_until(f"document.querySelectorAll('#{CHART_ID} .main-svg').length > 0")
    browser.drain_events(1.0)


def test_report_from_the_demos_tables_loads_without_console_errors(demo_pages, browser):
    result, report, _ = demo_pages
    load(browser, report)
    assert browser.errors.all() == []
    assert browser.evaluate(f"document.querySelectorAll('#{TABLE_ID} tbody tr').length") == len(result.decisions)


def test_chart_area_is_not_blank_in_a_screenshot(demo_pages, browser):
    from PIL import Image

    _, report, _ = demo_pages
    load(browser, report)
    browser.screenshot(SCREENSHOT)
    left, top, width, height = browser.evaluate(CHART_BOX)
    assert width > 600 and height > 600
    with Image.open(SCREENSHOT) as image:
        chart = image.convert("RGB").crop((int(left), int(top), int(left + width), int(min(top + height, image.height))))
        pixels = list(chart.getdata())
    inked = sum(1 for r, g, b in pixels if min(r, g, b) < 200) / len(pixels)
    colours = {(r // 32, g // 32, b // 32) for r, g, b in pixels}
    assert inked > 0.02, f"only {inked:.1%} of the chart area is drawn"
    assert len(colours) >= 8, "the chart area has almost no colours: lines and markers are missing"


def test_one_marker_per_acting_decision(demo_pages, browser):
    result, report, demo_page = demo_pages
    acting = sum(1 for record in result.decisions if record.acts)
    assert acting >= 2
    for page in (report, demo_page):
        load(browser, page)
        assert browser.evaluate(MARKERS_DRAWN) == browser.evaluate(ACTING_ROWS) == acting, page
        assert browser.errors.all() == []


def test_filters_hide_rows_by_direction_and_reason(demo_pages, browser):
    result, report, _ = demo_pages
    load(browser, report)
    ups = sum(1 for record in result.decisions if record.acts and record.direction == "up")
    choose = "(() => {{ const s = document.getElementById('{}'); s.value = '{}'; s.dispatchEvent(new Event('change')); }})()"
    browser.evaluate(choose.format("filter-direction", "up"))
    assert browser.evaluate(VISIBLE_ROWS) == ups
    reason = result.decisions[0].reason_code
    browser.evaluate(choose.format("filter-direction", ""))
    browser.evaluate(choose.format("filter-reason", reason))
    assert browser.evaluate(VISIBLE_ROWS) == sum(1 for record in result.decisions if record.reason_code == reason)
    assert browser.errors.all() == []
