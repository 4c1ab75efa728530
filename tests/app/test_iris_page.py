import pytest
import torch
from streamlit.testing.v1 import AppTest

from core import runner
from core.experiments import iris
from core.results import RecordWriter
from tests.helpers import render

EXP = iris.EXPERIMENT


def page() -> AppTest:
    return render("pages/iris.py")


@pytest.fixture
def smoke_record(results_dir):
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny operators crawl with two threads on a busy 2-core machine
    try:
        config = EXP.config("smoke")
        runner.run(EXP, config, ["cpu"], RecordWriter("iris", "smoke", config, ["cpu"]))
    finally:
        torch.set_num_threads(before)


def test_page_shows_charts_verdicts_tables_and_the_explanation(smoke_record):
    at = page()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 5
    text = " ".join(m.value for m in at.markdown)
    assert "needs a GPU to tell" in text and "A forward hook runs through model(x)" in text
    assert "Why `.item()` costs a synchronisation but little time" in text
    assert len(at.dataframe) >= 4  # three analysis tables and all measured points


def test_page_without_results_invites_a_run(results_dir):
    at = page()
    assert not at.exception
    assert not at.get("vega_lite_chart")
    assert any("No measured results yet" in i.value for i in at.info)
    assert any(b.label == "Run" for b in at.button)
