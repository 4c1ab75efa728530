"""The single-file report opens offline: in headless Chromium with every request outside file:// blocked, every
chart draws, nothing is fetched and nothing fails."""
import os
import shutil

import pytest

from core import settings
from core.report import single_file
from tests.browser.test_served_app import CHROMIUM, WAIT_MS, sync_api
from tests.helpers import shipped_runs

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Chromium is not installed (apt-get install chromium)"),
]


def test_the_report_opens_offline_and_draws_every_chart(results_dir, tmp_path):
    machine, runs = shipped_runs("matmul", "iris")
    (results_dir / machine).mkdir(parents=True)
    for run in runs:
        shutil.copy(settings.APP_ROOT / "results" / machine / f"{run}.json", results_dir / machine)
    written = single_file.write(tmp_path / "report.html")
    charts = written.path.read_text().count('<div class="chart" id="chart-')
    assert charts >= 3  # the headline, matmul's and iris's main charts at least
    outside, errors = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                   else (outside.append(route.request.url), route.abort()))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(written.path.as_uri())
        page.wait_for_function(f"document.querySelectorAll('.chart svg .mark-symbol, .chart svg .mark-line, "
                               f".chart svg .mark-rect').length > 0 && document.querySelectorAll('.chart svg').length "
                               f"== {charts}", timeout=WAIT_MS)
        drawn = page.eval_on_selector_all(".chart", "divs => divs.map(d => d.querySelectorAll('svg path').length)")
        assert "The claims, checked on each machine" in page.inner_text("body")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        print(f"report screenshot: {tmp_path / 'report.png'}")
        browser.close()
    assert all(count > 0 for count in drawn), drawn
    assert not outside and not errors, (outside, errors)
