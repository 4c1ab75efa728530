"""The runner takes a census and a profile of every measured point, writes the profile's files beside the
record, and never loses a measurement to either."""
import pytest
import gzip
import json

import pandas as pd

from core import experiments
from core.measure import census, runner, standin
from core.store import files, results
from core.store.results import RecordWriter


def _run(name: str, results_dir, **overrides) -> dict:
    exp = experiments.get(name)
    config = exp.config("smoke", overrides)
    writer = RecordWriter(name, "smoke", config, ["cpu"], results_dir=results_dir)
    assert runner.run(exp, config, ["cpu"], writer) == "complete"
    return writer


def _few_iris_points(results_dir, monkeypatch) -> RecordWriter:
    """Two iris points (an interval of the training run, and the hook check), without the stand-ins' censuses."""
    monkeypatch.setattr(standin, "points", lambda experiment, config: [])
    return _run("iris", results_dir, log_every=(1,))


@pytest.mark.full
def test_every_measured_point_has_a_census_and_a_breakdown_with_files_beside_the_record(results_dir):
    writer = _run("matmul", results_dir, sizes=(16, 64))
    measured = [r for r in writer.record["rows"] if r["status"] == "ok" and r["variant"] == "torch cpu"]
    assert measured
    for row in measured:
        assert row["census"]["operations"] >= 1 and row["census"]["kernels"] >= 1
        parts = row["breakdown"]
        assert {"compute_s", "copies_s", "sync_s", "loading_s", "host_s"} <= parts.keys()
        trace = writer.path.parent / parts["trace"]
        table = writer.path.parent / parts["table"]
        assert trace.parent == writer.path.with_suffix("")  # a folder named after the run, beside its record
        assert "traceEvents" in json.loads(gzip.decompress(trace.read_bytes()))
        assert len(pd.read_csv(table)) >= 1
    frame = results.rows_frame(results.load_records(results_dir))
    torch_rows, numpy_rows = frame[frame["variant"] == "torch cpu"], frame[frame["variant"] == "numpy"]
    assert torch_rows["census_operations"].notna().all() and torch_rows["time_host_s"].notna().all()
    assert numpy_rows["census_note"].str.contains("outside PyTorch").all()  # not drawn as all host time
    assert numpy_rows["time_host_s"].isna().all()


@pytest.mark.full
def test_a_product_is_one_mm_kernel_in_the_rows_frame(results_dir):
    _run("matmul", results_dir, sizes=(32,))
    frame = results.rows_frame(results.load_records(results_dir))
    torch_row = frame[frame["variant"] == "torch cpu"].iloc[0]
    assert torch_row["census_flops"] == 2 * 32**3
    assert torch_row["census_top_by_count"][0]["op"] == "aten.mm"


@pytest.mark.full
def test_a_long_sample_is_measured_but_neither_censused_nor_profiled(results_dir, monkeypatch):
    monkeypatch.setattr(runner, "INSPECT_LIMIT_S", 0.0)
    writer = _few_iris_points(results_dir, monkeypatch)
    row = next(r for r in writer.record["rows"] if r["status"] == "ok")
    assert row["median"] > 0
    assert row["census"] == row["breakdown"] and "skipped" in row["census"]
    frame = results.rows_frame(results.load_records(results_dir))
    assert frame["census_note"].str.contains("census and the profile are taken only").all()


@pytest.mark.full
def test_a_failing_census_is_recorded_and_the_measurement_stands(results_dir, monkeypatch):
    def broken(workload, device):
        raise RuntimeError("the census broke")
    monkeypatch.setattr(census, "take", broken)
    monkeypatch.setattr(runner, "INSPECT_LIMIT_S", float("inf"))  # a busy machine's slow sample is still censused
    writer = _few_iris_points(results_dir, monkeypatch)
    row = next(r for r in writer.record["rows"] if r["status"] == "ok")
    assert row["census"] == {"error": "RuntimeError: the census broke"}
    assert row["median"] > 0 and "host_s" in row["breakdown"]


def test_the_cli_prints_each_points_census_per_unit(results_dir, capsys):
    from core.commands.cli import main
    assert main(["run", "matmul", "--preset", "smoke", "--device", "cpu", "--set", "sizes=32",
                 "--set", "variants=torch cpu"]) == 0
    out = capsys.readouterr().out
    assert "1 operation, 1 kernel, 0 syncs, 0 bytes copied per product" in out


@pytest.mark.full
def test_a_run_on_gpus_alone_takes_no_stand_in_census_and_a_cpu_run_does(results_dir, monkeypatch):
    def measured(experiment, points, *args, **kwargs):  # no GPU here: the runner's own steps are under test
        return [{"device": point.device, "variant": point.variant, "params": point.params, "status": "ok",
                 "unit": "product", "per_call": 1, "samples": [1e-3], "median": 1e-3} for point, _ in points]
    monkeypatch.setattr(runner, "measure_together", measured)
    exp = experiments.get("matmul")
    config = exp.config("smoke", {"sizes": (16,)})
    taken = {}
    for device_names in (["cuda:0"], ["cpu"]):
        writer = RecordWriter("matmul", "smoke", config, device_names, results_dir=results_dir)
        assert runner.run(exp, config, device_names, writer) == "complete"
        taken[device_names[0]] = writer.record["standin"]
        assert writer.record["standins_planned"] == len(writer.record["standin"])
        assert writer.record["error"] is None and results.has_every_standin(writer.record)
    assert taken["cuda:0"] == []
    assert {e["variant"] for e in taken["cpu"]} == {p.variant for p in exp.points(config, "cuda:0")}


def test_a_cancel_among_the_stand_ins_leaves_the_run_complete_with_those_taken(results_dir, monkeypatch):
    from core.measure import standin
    taken = []
    real_entry = standin.entry

    def cancel_the_second(experiment, point, config):
        if taken:
            raise runner.Cancelled()
        taken.append(point)
        return real_entry(experiment, point, config)
    monkeypatch.setattr(standin, "entry", cancel_the_second)
    writer = _run("matmul", results_dir, sizes=(16,))
    record = writer.record
    assert record["status"] == "complete" and record["error"] is None and len(record["standin"]) == 1
    assert record["standins_planned"] > 1 and not results.has_every_standin(record)
    assert len(record["rows"]) == record["planned_points"]
    assert not results.has_every_standin(results.load_records(results_dir)[0])


@pytest.mark.full
def test_a_run_stopped_after_its_last_point_reads_as_complete_and_one_stopped_before_does_not(results_dir):
    writer = _run("matmul", results_dir, sizes=(16,))
    assert results.has_every_standin(results.load_records(results_dir)[0])
    record = dict(writer.record, standin=writer.record["standin"][:2])
    legacy = {k: v for k, v in record.items() if k != "standins_planned"}  # written before the field
    for status in ("cancelled", "partial"):
        files.write_atomic(writer.path, dict(record, status=status, error="cancelled by the user"))
        loaded = results.load_records(results_dir)[0]
        assert (loaded["status"], loaded["error"]) == ("complete", None) and not results.has_every_standin(loaded)
        files.write_atomic(writer.path, dict(legacy, status=status, error="cancelled by the user"))
        loaded = results.load_records(results_dir)[0]
        assert loaded["status"] == "complete" and loaded["error"].startswith(results.STANDINS_CUT)
        assert not results.has_every_standin(loaded)
    files.write_atomic(writer.path, dict(record, status="cancelled", rows=record["rows"][:-1]))
    assert results.load_records(results_dir)[0]["status"] == "cancelled"
