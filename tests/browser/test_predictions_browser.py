"""The Predictions page as a person reaches it: from the navigation, in headless Chromium."""
from tests.app.test_predictions import HEADINGS
from tests.browser import test_served_app as served

pytestmark = served.pytestmark
serve, page = served.serve, served.page  # the served app and the browser, as the other browser tests have them
WAIT_MS = served.WAIT_MS


def test_the_predictions_page_opens_from_the_navigation_with_its_three_sections(serve, page):
    page.goto(serve())
    page.get_by_role("heading", name="Crossover").wait_for(timeout=WAIT_MS)
    page.get_by_role("link", name="Predictions").click()
    for heading in HEADINGS:
        page.get_by_role("heading", name=heading).wait_for(timeout=WAIT_MS)
    page.get_by_text("Predict on", exact=True).wait_for(timeout=WAIT_MS)  # the sidebar's GPU picker
    page.get_by_text("python -m core calibrate").first.wait_for(timeout=WAIT_MS)  # no profile in this results folder
    assert page.locator("[data-testid='stException']").count() == 0
