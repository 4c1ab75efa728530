import pytest
from streamlit.testing.v1 import AppTest

from core import published
from core.analysis import NEEDS_GPU
from tests.helpers import page_text, render, smoke_record

PAPER_FIGURE = published.figure_text("surface-speedup.gpu.samples40000")


def page() -> AppTest:
    return render("pages/mlp_surface.py")


@pytest.fixture
def cpu_run(results_dir, one_thread):
    smoke_record("mlp_surface", epochs=20, sweep_grids=(10,), variants=("as written", "tuned"))


def test_page_draws_surfaces_losses_times_and_the_crossover_from_a_run(cpu_run):
    at = page()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 7
    text = page_text(at)
    assert text.count(f"**{NEEDS_GPU}**") == 6 and PAPER_FIGURE in text
    assert len(at.get("dataframe")) == 2  # the final MSEs and every measured point
    assert sum("Nothing to show yet" in c.value for c in at.caption) == 2  # no GPU: no difference, no crossover
    assert any("cuda_graph_error" in c.value for c in at.caption)  # the notes, from about.md
    assert any(b.label == "Run" for b in at.button)
