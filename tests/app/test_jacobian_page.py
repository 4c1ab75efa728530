import pytest

from core.experiments.jacobian import experiment as jacobian
from tests.app.test_matmul_page import verdict_table
from tests.helpers import page_text, render, smoke_record


@pytest.fixture
def small_record(results_dir):
    """A small CPU run whose vectorized full Jacobian at val=1000 is skipped (it needs about 640 GB)."""
    smoke_record("jacobian", vals=(2, 1000), per_sample_vals=(50,), repeats=1, cpu_threads=("1",),
                 variants=(jacobian.AS_WRITTEN, jacobian.VECTORIZED, jacobian.TUNED))


@pytest.mark.full
def test_page_shows_charts_verdicts_tables_and_the_explanation(small_record):
    at = render("pages/jacobian.py")
    assert not at.exception
    assert at.get("vega_lite_chart")
    verdicts = verdict_table(at)
    # the written call ran at val=2 only: nothing to extrapolate to val=100 or 1000 from; the move needs a GPU
    assert verdicts.count("**no data yet**") == 2 and verdicts.count("**needs a GPU to tell**") == 1
    assert "Why the written call is quadratic" in page_text(at)
    # correctness, gains over the written call, skipped points, all measured points, and the GPU predicted for them
    # (this machine uncalibrated: the nearest CPU drives it, and the page says so)
    assert len(at.dataframe) == 5 and any("the CPU nearest its own stands in for it" in i.value for i in at.info)
    skipped = next(table.value for table in at.dataframe if "Why skipped" in table.value)
    assert {(v, n) for v, n in zip(skipped["Variant"], skipped["val"])} >= {(jacobian.VECTORIZED, "1,000")}
    assert skipped["Why skipped"].str.startswith("needs about").all()
