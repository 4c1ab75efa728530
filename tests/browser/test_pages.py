"""The matmul page as a person sees it, served by `streamlit run` in headless Chromium: the runs shown by default
and the run picker, over a results folder holding the small results kept for the tests (tests/data/results: each experiment's
latest quick run of one machine; the shipped results are rendered page by page in tests/app/test_app.py) plus the
shipped matmul run and a smoke and a cancelled run of it."""
import os
import shutil

import pytest

from core import settings
from core.store import runs
from tests.app.test_every_page import SMALL_RESULTS
from tests.app.test_matmul_page import three_runs
from tests.browser import test_served_app as served

pytestmark = served.pytestmark
page = served.page  # the headless Chromium page, as the other browser tests have it
WAIT_MS = served.WAIT_MS


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A results folder: the small results and, beside the shipped matmul run, a smoke run and a cancelled run of
    it (the folder and its runs by kind)."""
    folder = tmp_path_factory.mktemp("pages") / "results"
    shutil.copytree(SMALL_RESULTS, folder)
    return folder, three_runs(folder)


@pytest.fixture(scope="module")
def app(made):
    """`streamlit run` on a free loopback port over that results folder, shared by this module's tests (a
    warm server renders faster); yields its URL."""
    env = os.environ | {settings.RESULTS_ENV: str(made[0])}
    env.pop(settings.READ_ONLY_ENV, None)
    with served.streamlit_server(env) as url:
        yield url


def settle(page) -> None:
    """Wait for the page's script to finish (Streamlit's running indicator gone) and the charts to draw."""
    page.locator("h1").first.wait_for(timeout=WAIT_MS)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(timeout=WAIT_MS)
    page.wait_for_timeout(500)


def chart_text(page) -> str:
    """What the main chart says: its labels, legend, panel headers and each mark's description."""
    chart = page.locator(".vega-embed").first
    chart.wait_for(timeout=WAIT_MS)
    return chart.evaluate("el => el.textContent + ' ' + "
                          "[...el.querySelectorAll('[aria-label]')].map(e => e.getAttribute('aria-label')).join(' ')")


def names(record: dict) -> tuple[str, str]:
    """How a chart may name a run: its id, or its preset and start as core.store.runs writes them."""
    return record["run_id"], f"{record['preset']} · {runs.started_text(record['started'])}"


def drawn(text: str, record: dict) -> bool:
    return any(name in text for name in names(record))


def test_by_default_one_series_per_complete_run_and_the_picker_switches(app, page, made):
    made = made[1]
    page.goto(f"{app}/matmul")
    settle(page)
    caption = page.get_by_text("Showing the latest complete run of each preset on each machine, one series per run.")
    caption.wait_for(timeout=WAIT_MS)
    words = caption.inner_text()
    assert "smoke of" in words and "quick of" in words and "cancelled" not in words
    text = chart_text(page)
    assert drawn(text, made["complete"]) and drawn(text, made["smoke"]) and not drawn(text, made["cancelled"])

    picker = page.locator("[data-testid='stMultiSelect']").filter(has_text="Runs shown")
    # every machine's default runs off at once: a Backspace per run lost keys on a busy CI
    picker.get_by_role("button", name="Clear all").click()
    page.get_by_text("No run is shown: pick at least one.").wait_for(timeout=WAIT_MS)
    picker.locator("input").click()
    page.keyboard.type("cancelled")
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")
    # the caption reads "the run picked" already while one default run is left, so wait for the cancelled run
    switched = page.get_by_text("Showing the run picked.")
    served.sync_api.expect(switched).to_contain_text("(cancelled, 6 points)", timeout=WAIT_MS)
    settle(page)
    text = chart_text(page)
    assert drawn(text, made["cancelled"]) and not drawn(text, made["complete"]) and not drawn(text, made["smoke"])
