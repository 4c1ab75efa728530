import pytest
from streamlit.testing.v1 import AppTest

from core import published
from core.present.analysis import NEEDS_GPU
from tests.app.test_matmul_page import verdict_table
from tests.helpers import render, smoke_record

PAPER_FIGURE = published.figure_text("surface-speedup.gpu.samples40000")


def page() -> AppTest:
    return render("pages/mlp_surface.py")


@pytest.fixture
def cpu_run(results_dir, one_thread):
    smoke_record("mlp_surface", variants=("as written", "tuned"), epochs=30, sweep_grids=(10,))  # test_mlp_surface's run


@pytest.mark.full
def test_page_draws_surfaces_losses_times_and_the_crossover_from_a_run(cpu_run):
    at = page()
    assert not at.exception
    assert at.get("vega_lite_chart")
    assert verdict_table(at).count(f"**{NEEDS_GPU}**") == 6 and PAPER_FIGURE in at.markdown[0].value
    # the final MSEs, every measured point, and the GPU predicted for them (the nearest CPU driving it)
    assert len(at.get("dataframe")) == 3 and any("the CPU nearest its own stands in for it" in i.value for i in at.info)
    waiting = [c.value for c in at.caption if c.value.startswith("Waiting for a run on a GPU")]
    assert len(waiting) == 2  # no GPU: no surface difference, no crossover
    notes = next(e for e in at.main.expander if e.label == "Notes")
    assert any("cuda_graph_error" in m.value for m in notes.markdown)  # the notes, from about.md
    assert any(b.label == "Run" for b in at.sidebar.button)
