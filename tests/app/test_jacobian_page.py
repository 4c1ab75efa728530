import pytest
from streamlit.testing.v1 import AppTest

from core import runner
from core.experiments import jacobian
from core.results import RecordWriter
from tests.helpers import render


def page() -> AppTest:
    return render("pages/jacobian.py")


@pytest.fixture
def small_record(results_dir):
    """A small CPU run whose vectorized full Jacobian at val=1000 is skipped (it needs about 640 GB)."""
    exp = jacobian.Jacobian()
    config = exp.config("smoke", {"vals": (2, 1000), "per_sample_vals": (50,), "repeats": 1, "cpu_threads": 1,
                                  "variants": (jacobian.AS_WRITTEN, jacobian.VECTORIZED, jacobian.TUNED)})
    runner.run(exp, config, ["cpu"], RecordWriter("jacobian", "smoke", config, ["cpu"]))


def test_page_shows_charts_verdicts_tables_and_the_explanation(small_record):
    at = page()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 3
    text = " ".join(m.value for m in at.markdown)
    assert "needs a GPU to tell" in text and "Why the written call is quadratic" in text
    assert len(at.dataframe) == 4  # correctness, speedups, skipped points, all measured points
    skipped = at.dataframe[2].value
    assert {(v, n) for v, n in zip(skipped["variant"], skipped["val"])} >= {(jacobian.VECTORIZED, 1000)}


def test_page_without_results_invites_a_run(results_dir):
    at = page()
    assert not at.exception
    assert not at.get("vega_lite_chart")
    assert any("No measured results yet" in i.value for i in at.info)
    assert any(b.label == "Run" for b in at.button)
