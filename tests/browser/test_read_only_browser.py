"""The read-only view as a visitor sees it in headless Chromium, over the small results kept for the tests: a deep link
as the fresh server's first request opens read-only behind the router; the pages a visitor lands on and the one that
offers to run things (the overview, an experiment's, "Your model") show no error, speak of "this server" (the visitor is
not on the machine that measured), show none of the server's paths and no run controls, as drawn. A full-page
screenshot of each is saved in the test's temporary folder. Every page's strings, through the router, are read by
tests/app/test_read_only_view.py."""
import re
import shutil

from tests.app.test_every_page import SMALL_RESULTS
from tests.app.test_read_only_view import RERUN_HEADING
from tests.browser import test_served_app as served

pytestmark = served.pytestmark
serve, page = served.serve, served.page  # the served app and the browser, as test_served_app has them

PAGES = ["", "your_model"]  # "" is the overview; an experiment's page is the deep link's, matmul


def test_the_read_only_view_speaks_of_this_server_and_shows_no_path(serve, page, results_dir, tmp_path):
    shutil.copytree(SMALL_RESULTS, results_dir, dirs_exist_ok=True)
    url = serve(CROSSOVER_READ_ONLY="1")
    _a_deep_link_opens_read_only_behind_the_router(page, f"{url}/matmul")  # the fresh server's first request
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(timeout=served.WAIT_MS)
    problems = {"matmul": _problems(page, str(results_dir))}
    for name in PAGES:
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.goto(f"{url}/{name}")
        page.locator("h1").first.wait_for(timeout=served.WAIT_MS)
        page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(timeout=served.WAIT_MS)
        tall = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
        page.set_viewport_size({"width": 1400, "height": tall + 50})  # the page scrolls inside stMain
        page.screenshot(path=tmp_path / f"read-only-{name or 'overview'}.png", full_page=True)
        problems[name or "overview"] = _problems(page, str(results_dir))
    assert not any(problems.values()), {name: found for name, found in problems.items() if found}


def _a_deep_link_opens_read_only_behind_the_router(page, link: str) -> None:
    page.goto(link)
    page.get_by_text("This is a read-only view").wait_for(timeout=served.WAIT_MS)
    page.get_by_text("Devices on this server").wait_for(timeout=served.WAIT_MS)  # the router's sidebar
    assert page.get_by_role("link", name="Machines").count() == 1
    assert page.get_by_role("link", name="streamlit app").count() == 0  # not Streamlit's pages/ list
    page.locator(".vega-embed").first.wait_for(timeout=served.WAIT_MS)
    assert page.get_by_role("button", name="Run", exact=True).count() == 0


def _problems(page, results_path: str) -> list[str]:
    """What a visitor must not read on the page shown (its hidden text too: collapsed expanders)."""
    text = page.locator("body").text_content()
    found = []
    for match in re.finditer(r"this machine", text, re.IGNORECASE):
        found.append(f"'{text[max(match.start() - 60, 0):match.end() + 40]}'")
    if results_path in text:
        found.append(f"the results folder's path {results_path}")
    if "Devices on this server" not in text:
        found.append("no 'Devices on this server' in the sidebar")
    headings = page.get_by_role("heading", name=RERUN_HEADING)
    found += [f"a rerun heading: {headings.nth(i).inner_text()}" for i in range(headings.count())]
    if page.locator("[data-testid='stException'], [data-testid='stAlertContentError']").count():
        found.append("an error element")
    return found
