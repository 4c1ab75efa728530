import pytest
from streamlit.testing.v1 import AppTest

from core import published
from core.store import results
from core.present.analysis import REPRODUCED
from core.experiments.cnn.experiment import AS_WRITTEN, EXPERIMENT, TUNED
from core.store.files import write_atomic
from tests.app.test_matmul_page import verdict_table
from tests.helpers import page_text, render, smoke_record

pytestmark = pytest.mark.usefixtures("one_thread")

# Median epoch seconds per (model, batch, rows) on an imaginary GPU machine's CPU and GPU, chosen so that
# every claim holds: the CPU wins on small data, the 1-D gain is modest, the GRU gains 100x, MNIST far more.
BIG = 262144
CPU_TIMES = {("cnn1d", 16, BIG): 4.0, ("cnn1d", 512, BIG): 1.0, ("cnn1d", 512, 1024): 0.1,
             ("cnn1d", 512, 4096): 0.3, ("mnist", 64, 2048): 10.0, ("gru", 64, 8192): 50.0}
GPU_TIMES = {("cnn1d", 16, BIG): 3.0, ("cnn1d", 512, BIG): 0.8, ("cnn1d", 512, 1024): 0.2,
             ("cnn1d", 512, 4096): 0.4, ("mnist", 64, 2048): 1.0, ("gru", 64, 8192): 0.5}


def gpu_machine_record() -> dict:
    """A record from an imaginary GPU machine, both variants (tuned twice as fast)."""
    rows = []
    for device, table in (("cpu", CPU_TIMES), ("cuda:0", GPU_TIMES)):
        for (model, batch, n), seconds in table.items():
            for variant, factor in ((AS_WRITTEN, 1.0), (TUNED, 0.5)):
                steps, median = n // batch, seconds * factor
                rows.append({"device": device, "variant": variant, "status": "ok", "unit": "epoch", "per_call": 1,
                             "median": median, "iqr": 0.0, "noisy": False, "n": 3, "samples": [median] * 3,
                             "params": {"model": model, "batch_size": batch, "rows": n},
                             "metrics": {"step_s": median / steps, "steps_per_epoch": steps,
                                         "seconds_10_epochs": 10 * median}})
    fingerprint = {"cpu_model": "Fake CPU", "cpu_logical_cores": 8, "machine_id": "fake-gpu-machine",
                   "gpus": [{"device": "cuda:0", "name": "Fake GPU"}]}
    return {"schema": results.SCHEMA_VERSION, "run_id": "cnn-fake-gpu", "experiment": "cnn", "preset": "quick",
            "status": "complete", "machine_id": "fake-gpu-machine", "fingerprint": fingerprint, "rows": rows,
            "started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:01:00+00:00", "planned_points": len(rows)}


def page() -> AppTest:
    return render("pages/cnn.py")


def test_page_without_results_explains_and_offers_a_run():
    at = page()
    assert not at.exception
    assert not at.get("vega_lite_chart")
    assert verdict_table(at).count("**no data yet**") == 4
    assert any(i.value.startswith("No measured results yet: start a run from the sidebar") for i in at.info)
    assert "What the tuned variant changes" in page_text(at)  # "Why", folded
    assert any(b.label == "Run" for b in at.sidebar.button)


@pytest.mark.full
def test_page_with_a_cpu_run_shows_charts_and_asks_for_a_gpu():
    assert smoke_record("cnn")["status"] == "complete"
    rows = results.rows_frame(results.load_records(), "cnn")
    at = page()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) >= len(EXPERIMENT.charts(rows, published.load("cnn")))
    assert "**needs a GPU to tell**" in verdict_table(at)
    assert any("No GPU on this machine" in c.value for c in at.caption)


@pytest.mark.full
def test_page_with_a_gpu_machines_records_shows_verdicts_from_them(results_dir):
    record = gpu_machine_record()
    write_atomic(results_dir / record["machine_id"] / f"{record['run_id']}.json", record)
    rows = results.rows_frame(results.load_records(), "cnn")
    assert [v.outcome for v in EXPERIMENT.verdicts(rows, published.load("cnn"))] == [REPRODUCED] * 4
    at = page()
    assert not at.exception
    # hand-made rows carry no breakdown: no "where the time goes" chart
    assert len(at.get("vega_lite_chart")) == len(EXPERIMENT.charts(rows, published.load("cnn")))
    verdicts = verdict_table(at)
    assert verdicts.count(f"**{REPRODUCED}**") == 4
    assert "not reproduced" not in verdicts and "needs a GPU to tell" not in verdicts
    assert "1.33x at batch 16" in verdicts  # what we found, short
    assert len(at.dataframe) == 4  # the three tables (a GPU measured: none empty) and every point


