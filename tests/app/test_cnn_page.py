import pytest
import torch
from streamlit.testing.v1 import AppTest

from core import results, runner
from core.experiments.cnn import EXPERIMENT
from core.results import RecordWriter, write_atomic
from tests.unit.test_cnn import CPU_TIMES, GPU_TIMES, fake_record
from tests.helpers import page_text, render


pytestmark = pytest.mark.usefixtures("one_thread")


def page() -> AppTest:
    return render("pages/cnn.py")



def test_page_without_results_explains_and_offers_a_run():
    at = page()
    assert not at.exception
    assert not at.get("vega_lite_chart")
    assert "no data yet" in page_text(at) and "What the tuned variant changes" in page_text(at)
    assert any(b.label == "Run" for b in at.button)


def test_page_with_a_cpu_run_shows_charts_and_asks_for_a_gpu():
    config = EXPERIMENT.config("smoke", {"models": ("cnn1d",)})
    assert runner.run(EXPERIMENT, config, ["cpu"], RecordWriter("cnn", "smoke", config, ["cpu"])) == "complete"
    at = page()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 5
    assert "needs a GPU to tell" in page_text(at)


def test_page_with_a_gpu_machines_records_shows_verdicts_from_them(results_dir):
    record = fake_record(CPU_TIMES, GPU_TIMES)
    write_atomic(results_dir / record["machine_id"] / f"{record['run_id']}.json", record)
    at = page()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 5
    text = page_text(at)
    assert "reproduced" in text and "needs a GPU to tell" not in text
    assert len(at.dataframe) >= 3


def test_page_renders_the_shipped_results(shipped_results):
    if results.rows_frame(results.load_records(), "cnn").empty:
        pytest.skip("no cnn record shipped in results/ yet")
    at = page()
    assert not at.exception and at.get("vega_lite_chart")
