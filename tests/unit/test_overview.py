import pandas as pd
import pytest

from core import experiments
from core.predict import uncertainty
from core.report import overview
from core.store import results
from core.present.analysis import ESTIMATED, NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED

MARKS = {REPRODUCED: "[ok]", NOT_REPRODUCED: "[no]", ESTIMATED: "[est]", NEEDS_GPU: "[gpu]", NO_DATA: "[none]"}
FAKE_GPU = "Fake GPU"
# numpy's time for a 200x200 product, and each GPU variant's: resident 6x numpy's speed, copies as slow as numpy
# (both as the write-up published them).
MATMUL_TIMES = {("cpu", "numpy"): 6e-3, ("cuda:0", "torch resident"): 1e-3, ("cuda:0", "torch copy pageable"): 6e-3}


def fake_record(run_id: str, machine: str, times: dict, *, gpu: bool = True, status: str = "complete",
                preset: str = "quick", started: str = "2026-01-01T00:00:00+00:00", experiment: str = "matmul",
                params: dict = None) -> dict:
    """A record of `experiment` on machine `machine` (with a fake GPU or none): one row per (device, variant)
    of `times` (its median seconds), at `params` (size 200 by default)."""
    rows = [{"device": device, "variant": variant, "params": params or {"size": 200}, "status": "ok",
             "unit": "product", "per_call": 1, "median": seconds, "iqr": 0.0, "noisy": False, "n": 3,
             "samples": [seconds] * 3} for (device, variant), seconds in times.items()]
    fingerprint = {"cpu_model": f"CPU of {machine}", "cpu_logical_cores": 8, "machine_id": machine,
                   "gpus": [{"device": "cuda:0", "name": FAKE_GPU}] if gpu else []}
    return {"schema": results.SCHEMA_VERSION, "run_id": run_id, "experiment": experiment, "preset": preset,
            "status": status, "machine_id": machine, "fingerprint": fingerprint, "rows": rows, "started": started,
            "ended": started, "planned_points": len(rows)}


def gpu_and_cpu_machines() -> list[dict]:
    """A complete matmul run on a GPU machine and on a CPU-only one."""
    return [fake_record("matmul-gpu", "gpu-machine", MATMUL_TIMES),
            fake_record("matmul-cpu", "cpu-machine", {("cpu", "numpy"): 6e-3}, gpu=False)]


def label(machine: str, gpu: bool = True) -> str:
    return f"CPU of {machine} (8 threads) / {FAKE_GPU if gpu else 'no GPU'}"


def every_claim() -> list[tuple[str, str]]:
    return [(e.name, claim.text) for e in experiments.registry().values() for claim in e.claims]


def test_the_matrix_has_a_row_per_claim_and_a_column_per_machine_with_its_marks():
    matrix = overview.verdict_matrix(gpu_and_cpu_machines(), predict=False)
    table = overview.matrix_table(matrix, MARKS)
    assert list(zip(matrix.drop_duplicates(["experiment", "claim"])["experiment"], table["Claim"])) == every_claim()
    assert list(table.columns) == ["Write-up", "Claim", "Published", label("cpu-machine", False), label("gpu-machine")]
    matmul = table[table["Claim"].str.contains("numpy's speed")]
    assert matmul[label("gpu-machine")].str.match(r"\[ok\] \*\*reproduced\*\*: Measured \d\.\d\dx \(95% CI .*\) numpy's speed").all()
    assert (matmul[label("cpu-machine", False)] == "[gpu] needs a GPU").all()
    assert list(matmul["Published"]) == ["GPU 6x (size 200, variant torch resident)",
                                         "GPU 1x (size 200, variant torch copy pageable)"]
    others = table[~table.index.isin(matmul.index)]
    assert (others[label("gpu-machine")] == "[none] no data").all()  # no run of the other experiments
    assert overview.PREDICTED_COLUMN not in table  # no machine is calibrated here
    here_first = overview.matrix_table(matrix, MARKS, here="gpu-machine").columns
    assert list(here_first[3:]) == [label("gpu-machine"), label("cpu-machine", False)]


def test_the_write_up_is_named_on_its_first_claim_and_published_ranges_are_short():
    table = overview.matrix_table(overview.verdict_matrix([], predict=False), MARKS)
    cnn = table.iloc[:len(experiments.get("cnn").claims)]
    assert cnn["Write-up"].tolist() == ["1-D CNN, 2-D CNN and GRU training"] + [""] * (len(cnn) - 1)
    assert "CPU 162–2,002 s, GPU 106–1,620 s (batch_size 16–4096)" in cnn["Published"].tolist()
    assert list(table.columns) == ["Write-up", "Claim", "Published"]  # no machine has results


def test_only_the_latest_complete_run_of_each_preset_counts():
    slower = {**MATMUL_TIMES, ("cuda:0", "torch resident"): 6e-3}  # the GPU no faster than numpy: not reproduced
    records = [fake_record("old", "gpu-machine", slower, started="2026-01-01T00:00:00+00:00"),
               fake_record("new", "gpu-machine", MATMUL_TIMES, started="2026-01-02T00:00:00+00:00"),
               fake_record("cut", "gpu-machine", slower, status="cancelled", started="2026-01-03T00:00:00+00:00"),
               fake_record("elsewhere", "cancelled-machine", MATMUL_TIMES, status="cancelled")]
    assert [r["run_id"] for r in overview.shown_records(records)] == ["new"]
    matrix = overview.verdict_matrix(records, predict=False)
    assert set(matrix["machine"].dropna()) == {label("gpu-machine")}
    resident = matrix[matrix["claim"].str.startswith("A 200x200 product")]
    assert resident["outcome"].tolist() == [REPRODUCED]


def test_the_headline_holds_published_predicted_and_measured_speedups():
    resident_id = "matmul-200-speedup.gpu.size200.torch-resident"
    predicted = pd.DataFrame({"id": ["iris-total.cpu", "iris-total.gpu", resident_id],
                              "device": ["CPU", "GPU", "GPU"], "predicted": [4.0, 2.0, 9.0],
                              "target": ["Some CPU", "Some GPU driven by Some CPU", "K80 driven by a MacBook"],
                              "how": ["", "", "one product on each side"]})
    headline = overview.headline(gpu_and_cpu_machines(), predicted)
    assert set(headline["source"]) == {"published", "predicted", "measured"}
    resident = headline[headline["label"] == "matmul · size 200, torch resident"].set_index("source")
    assert resident.loc["published", "ratio"] == 6.0
    assert resident.loc["measured", "ratio"] == pytest.approx(6.0)
    assert resident.loc["measured", "series"] == f"measured on {FAKE_GPU}"
    assert "numpy on the CPU" in resident.loc["measured", "detail"]
    # a published speedup's prediction is the predicted speedup itself
    assert resident.loc["predicted", "ratio"] == 9.0
    assert resident.loc["predicted", "hardware"] == "K80 driven by a MacBook"
    assert "one product on each side" in resident.loc["predicted", "detail"]
    assert "predicted" not in set(headline[headline["label"] == "matmul · size 200, torch copy pageable"]["source"])
    iris = headline[headline["label"] == "iris · epochs 20000"].set_index("source")
    assert iris.loc["published", "ratio"] == pytest.approx(2.93 / 11.29)
    assert iris.loc["predicted", "ratio"] == 2.0 and iris.loc["predicted", "hardware"] == "Some GPU driven by Some CPU"
    assert pd.isna(iris.loc["predicted", "lo"])  # no error band saved here: no range
    # a write-up's figure of one device alone (a GPU's time, no CPU's) is no speedup
    assert not headline["label"].str.contains("log_every").any()
    # with the model's error on speedups saved (predicted 1.25x to 2.5x what was measured), each predicted speedup
    # carries the range it gives: the iris one likely 0.8x-1.6x, and says so
    uncertainty.save([uncertainty.Band(uncertainty.SPEEDUP, "any", 1.25, 2.5, 12)])
    ranged = overview.headline(gpu_and_cpu_machines(), predicted).set_index(["label", "source"])
    iris = ranged.loc[("iris · epochs 20000", "predicted")]
    assert (iris["lo"], iris["hi"]) == (pytest.approx(0.8), pytest.approx(1.6))
    assert "likely 0.8-1.6x" in iris["detail"]
    assert pd.isna(ranged.loc[("iris · epochs 20000", "published"), "lo"])  # a published figure has no model error


def test_the_measured_speedup_is_taken_at_the_write_ups_configuration():
    """cnn's batch-512 figure is the 1-D model's (its replica's model): a GRU point of batch 512 stays out."""
    cnn1d = {("cpu", "as written"): 2.0, ("cuda:0", "as written"): 1.0}
    gru = {("cpu", "as written"): 100.0, ("cuda:0", "as written"): 1.0}
    record = fake_record("cnn-gpu", "gpu-machine", cnn1d, experiment="cnn",
                         params={"model": "cnn1d", "batch_size": 512, "rows": 16384})
    record["rows"] += fake_record("x", "x", gru, params={"model": "gru", "batch_size": 512, "rows": 8192})["rows"]
    measured = overview.headline([record]).query("source == 'measured'").set_index("label")
    assert measured.loc["cnn · batch_size 512", "ratio"] == 2.0
    assert measured.loc["cnn · model gru", "ratio"] == 100.0
    assert "cnn · batch_size 16" not in measured.index  # not measured at batch 16


def test_without_a_gpu_the_headline_is_published_only_and_nothing_counts_as_measured_on_a_gpu():
    cpu_only = [fake_record("matmul-cpu", "cpu-machine", {("cpu", "numpy"): 6e-3}, gpu=False)]
    assert set(overview.headline(cpu_only)["source"]) == {"published"}
    assert not overview.gpu_measured(cpu_only)
    assert overview.gpu_measured(gpu_and_cpu_machines())


def test_the_machines_table_counts_complete_runs_per_preset_and_sets_the_rest_apart():
    records = [fake_record("q1", "m", MATMUL_TIMES), fake_record("q2", "m", MATMUL_TIMES),
               fake_record("p1", "m", MATMUL_TIMES, preset="paper"), fake_record("s1", "m", MATMUL_TIMES, preset="smoke"),
               fake_record("c1", "m", MATMUL_TIMES, status="cancelled"),
               fake_record("f1", "m", MATMUL_TIMES, status="partial", experiment="iris")]
    table = overview.machines_table(records).set_index("Machine")
    assert table.loc[label("m"), "Complete runs"] == "quick 2, paper 1"
    assert table.loc[label("m"), "Set apart"] == "smoke 1, cancelled 1, interrupted 1"
    assert table.loc[label("m"), "Experiments"] == 1  # iris has no complete run there
    assert overview.machines_table([]).empty


def test_a_markdown_table_escapes_the_cell_separator():
    text = overview.markdown_table(pd.DataFrame({"a": ["x | y"], "b": ["line\nbreak"]}))
    assert text.splitlines() == ["| a | b |", "| --- | --- |", "| x \\| y | line break |"]
