"""The chart grammar as a reader's browser draws it: the app served read-only over the small results kept for the tests
(each experiment's latest quick run on one machine: tests/data/results), driven in headless Chromium.

How the charts are read: Streamlit renders each Vega-Lite chart with vega-embed into an inline <svg> (its SVG
renderer). Vega writes each mark item as an SVG element whose aria-label is the item's description (by
default "field: value; ..." of its encodings), legends as `g.role-legend` groups with one `g.role-scope` per
entry (a symbol path and its label text), and colours as the fill/stroke attributes. So the tests find a chart
by its title text, a point by its aria-label, and a colour by the attributes of what is drawn."""
import os

import pytest

from core import settings
from core.present import charts
from tests.app.test_every_page import SMALL_RESULTS
from tests.browser.test_served_app import CHROMIUM, WAIT_MS, streamlit_server, sync_api

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Chromium is not installed (apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def served_app():
    """`streamlit run` read-only over the small results (so nothing is written there); yields its URL."""
    env = os.environ | {settings.RESULTS_ENV: str(SMALL_RESULTS), settings.READ_ONLY_ENV: "1"}
    with streamlit_server(env) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium page for the module's few tests."""
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield chromium.new_page(viewport={"width": 1400, "height": 1000})
        chromium.close()


def _chart(page, title: str):
    """The rendered SVG of the chart whose title starts with `title`, once drawn."""
    chart = page.locator(".vega-embed svg").filter(has_text=title).first
    chart.wait_for(timeout=WAIT_MS)
    return chart


def _centre_x(locator) -> float:
    box = locator.bounding_box()
    assert box is not None, "not drawn"
    return box["x"] + box["width"] / 2


def test_the_matmul_ratio_chart_draws_numpy_on_the_rule_at_one(served_app, browser):
    browser.goto(f"{served_app}/matmul")
    chart = _chart(browser, "Speed relative to numpy")
    rule = chart.locator(f"[aria-label='{charts.RATIO_RULE_TEXT}']").first
    # numpy over itself, and the write-up's "copies cost as much as numpy": both at a ratio of 1
    numpy = chart.locator("path[aria-label*='label: numpy;'][aria-label*='source: measured']").first
    copies = chart.locator("path[aria-label*='label: torch copy pageable;'][aria-label*='source: published']").first
    for point in (numpy, copies):
        assert point.get_attribute("aria-label").split(";")[0].endswith(": 1")
        box = point.bounding_box()
        assert box and box["width"] > 4 and box["height"] > 4   # a visible mark, not a zero-length bar
        assert abs(_centre_x(point) - _centre_x(rule)) < 1.5
    assert "label" not in chart.locator("[aria-label^='X-axis']").first.get_attribute("aria-label").split("'")[1]


def _legend_colours(chart) -> dict[str, str]:
    """Each legend entry's label and the colour of its symbol (its fill, or its stroke when hollow)."""
    return chart.evaluate("""svg => Object.fromEntries(Array.from(svg.querySelectorAll('.role-legend .role-scope'))
        .map(entry => [entry.querySelector('text')?.textContent, entry.querySelector('.role-legend-symbol path')])
        .filter(([label, symbol]) => label && symbol)
        .map(([label, symbol]) => {
            const fill = symbol.getAttribute('fill');
            return [label, (fill && fill !== 'transparent' && fill !== 'none' ? fill : symbol.getAttribute('stroke'))
                           .toLowerCase()];
        }))""")


def _mark_colours(chart, variant: str) -> set[str]:
    """The outline colours of the points drawn for `variant`."""
    return set(chart.evaluate("""(svg, variant) => Array.from(svg.querySelectorAll('path[aria-label]'))
        .filter(p => p.getAttribute('aria-label').includes('variant: ' + variant + ';'))
        .map(p => (p.getAttribute('stroke') || '').toLowerCase())""", variant))


def test_a_variant_has_the_same_colour_on_two_pages(served_app, browser):
    expected = charts.variant_colour("as written").lower()
    for name, title in (("cnn", "1-D CNN: seconds for 10 epochs"), ("tabnet", "Seconds for 10 epochs")):
        browser.goto(f"{served_app}/{name}")
        chart = _chart(browser, title)
        assert _legend_colours(chart)["as written"] == expected, name
        assert _mark_colours(chart, "as written") == {expected}, name
