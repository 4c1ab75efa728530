import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers import page_text, render, smoke_record

pytestmark = pytest.mark.usefixtures("one_thread")


def page() -> AppTest:
    return render("pages/tabnet.py")


def test_page_without_results_explains_and_offers_a_run():
    at = page()
    assert not at.exception
    assert not at.get("vega_lite_chart")
    assert "no data yet" in page_text(at) and "Ghost batch norm" in page_text(at)
    assert any(b.label == "Run" for b in at.button)


def test_page_with_a_cpu_run_shows_charts_tables_and_asks_for_a_gpu():
    assert smoke_record("tabnet", batch_sizes=(256,), rows=512)["status"] == "complete"
    at = page()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 5
    assert "needs a GPU to tell" in page_text(at)
    assert len(at.dataframe) >= 2
