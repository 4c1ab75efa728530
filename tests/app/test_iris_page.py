import pytest
from core import experiments, published
from core.store import results
from core.present.analysis import NEEDS_GPU
from tests.app.test_matmul_page import verdict_table
from tests.helpers import page_text, render, smoke_record


@pytest.mark.full
def test_page_shows_charts_verdicts_tables_and_the_explanation(results_dir, one_thread):
    smoke_record("iris")
    rows = results.rows_frame(results.load_records(), "iris")
    at = render("pages/iris.py")
    assert not at.exception
    assert len(at.get("vega_lite_chart")) >= len(experiments.get("iris").charts(rows, published.load("iris")))
    verdicts = " ".join(verdict_table(at).split())
    assert f"For a model this small the CPU trains faster than the GPU (loss read every epoch)] | :small[CPU 2.93 s, " \
           f"GPU 11.3 s (epochs 20000)] | :orange[:material/hourglass_empty:]&nbsp;:small[**{NEEDS_GPU}**]" in verdicts
    assert "A forward hook runs through model(x)" in verdicts
    assert "Why `.item()` is a sync that costs little" in page_text(at)  # "Why", folded
    assert f"took {published.figure_text('iris-total.cpu')} on an i9-12900KF" in " ".join(at.markdown[0].value.split())
    assert len(at.dataframe) >= 4  # three analysis tables and all measured points
