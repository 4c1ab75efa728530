from core import published
from core.analysis import NEEDS_GPU
from tests.helpers import page_text, render, smoke_record


def test_page_shows_charts_verdicts_tables_and_the_explanation(results_dir, one_thread):
    smoke_record("iris")
    at = render("pages/iris.py")
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 6
    text = " ".join(page_text(at).split())
    assert f"**{NEEDS_GPU}**: For a model this small the CPU trains faster" in text
    assert "A forward hook runs through model(x)" in text
    assert "Why `.item()` is a sync that costs little" in text
    assert f"took {published.figure_text('iris-total.cpu')} on an i9-12900KF" in text  # the claim, from about.md
    assert len(at.dataframe) >= 4  # three analysis tables and all measured points
