import pytest
import torch
from streamlit.testing.v1 import AppTest

from core import experiments, runner
from core.results import RecordWriter
from tests.helpers import render



def page() -> AppTest:
    return render("pages/mlp_surface.py")


@pytest.fixture
def smoke_record(results_dir):
    exp = experiments.get("mlp_surface")
    config = exp.config("smoke", {"epochs": 20, "sweep_grids": (10,), "variants": ("as written", "tuned")})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared CPU: keep the tiny trainings quick
    try:
        runner.run(exp, config, ["cpu"], RecordWriter("mlp_surface", "smoke", config, ["cpu"]))
    finally:
        torch.set_num_threads(threads)


def test_page_without_records_says_so_and_checks_no_claim():
    at = page()
    assert not at.exception
    assert any("No measured results yet" in i.value for i in at.info)
    assert not at.get("vega_lite_chart")
    assert "no data yet" in " ".join(m.value for m in at.markdown)


def test_page_draws_surfaces_losses_times_and_the_crossover_from_a_run(smoke_record):
    at = page()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 6
    text = " ".join(m.value for m in at.markdown)
    assert "needs a GPU to tell" in text and "200x" in text
    assert len(at.get("dataframe")) == 2  # the final MSEs and every measured point
    assert sum("Nothing to show yet" in c.value for c in at.caption) == 2  # no GPU: no difference, no crossover
    assert any(b.label == "Run" for b in at.button)
