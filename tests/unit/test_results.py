import json
import os

import pytest

from core import experiments, published, results
from core.results import RecordWriter


def _writer(folder, config=None):
    exp = experiments.get("matmul")
    return RecordWriter("matmul", "smoke", config or exp.config("smoke"), ["cpu"], results_dir=folder)


ROW = {"device": "cpu", "variant": "numpy", "params": {"size": 16}, "status": "ok", "unit": "product", "per_call": 1,
       "torch_threads": 2, "samples": [1e-6, 2e-6, 3e-6], "median": 2e-6, "iqr": 1e-6, "noisy": True, "n": 3,
       "warmup_samples": [], "cold": False, "metrics": {"gflop_per_s": 4.1}}


def test_record_round_trip(results_dir):
    w = _writer(results_dir)
    w.start(planned_points=2)
    w.add(ROW)
    w.finish("complete")
    assert w.path.parent.name == w.record["machine_id"] and w.path.parent.parent == results_dir
    back = results.read_record(w.path)
    assert back["schema"] == results.SCHEMA_VERSION
    assert back["status"] == "complete" and back["planned_points"] == 2 and back["ended"]
    assert back["rows"] == [ROW]
    assert back["config"]["sizes"] == list(experiments.get("matmul").presets["smoke"]["sizes"])
    assert back["fingerprint"]["machine_id"] == back["machine_id"]
    assert back["variants"] and back["devices"] == ["cpu"]
    code = back["code_version"]
    assert len(code.get("commit", "")) == 40 and isinstance(code["dirty"], bool) or code.get("package")
    assert "MALLOC_MMAP_THRESHOLD_" in back["environment"]


def test_record_is_rewritten_after_every_point(results_dir):
    w = _writer(results_dir)
    w.start(planned_points=3)
    assert results.read_record(w.path)["rows"] == []
    w.add(ROW)
    on_disk = results.read_record(w.path)
    assert on_disk["status"] == "running" and len(on_disk["rows"]) == 1


def test_a_failed_write_leaves_the_previous_record_whole(results_dir, monkeypatch):
    w = _writer(results_dir)
    w.start(planned_points=2)
    w.add(ROW)
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        w.add(ROW)
    assert len(results.read_record(w.path)["rows"]) == 1
    assert [p.name for p in w.path.parent.iterdir()] == [w.path.name]  # no temporary file left


def test_loading_skips_corrupt_and_foreign_files_with_a_warning(results_dir):
    w = _writer(results_dir)
    w.start(1)
    w.add(ROW)
    w.finish("complete")
    (w.path.parent / "broken.json").write_text('{"schema": 1, "rows": [')
    (w.path.parent / "foreign.json").write_text(json.dumps({"hello": "world"}))
    with pytest.warns(UserWarning) as caught:
        loaded = results.load_records(results_dir)
    assert [r["run_id"] for r in loaded] == [w.record["run_id"]]
    messages = " ".join(str(c.message) for c in caught)
    assert "broken.json" in messages and "foreign.json" in messages


def test_rows_frame_flattens_points_with_their_run(results_dir):
    w = _writer(results_dir)
    w.start(1)
    w.add(ROW)
    w.finish("complete")
    df = results.rows_frame(results.load_records(results_dir), "matmul")
    assert len(df) == 1
    row = df.iloc[0]
    assert (row["size"], row["variant"], row["median_s"], row["gflop_per_s"]) == (16, "numpy", 2e-6, 4.1)
    assert row["run_id"] == w.record["run_id"] and row["status"] == "complete" and row["point_status"] == "ok"
    assert (row["unit"], row["per_sample"], row["n"], row["torch_threads"]) == ("product", "one product", 3, 2)
    assert not row["cold"] and row["warmup_samples_s"] == []
    assert row["config_id"] == results.config_id(w.record["config"]) and row["point"] == '{"size": 16}'
    assert results.rows_frame(results.load_records(results_dir), "iris").empty


def test_a_metric_or_parameter_named_like_a_column_is_refused(results_dir):
    w = _writer(results_dir)
    w.start(1)
    for clash in ({"metrics": {"device": "cuda:0"}}, {"params": {"variant": "x"}}, {"metrics": {"median_s": 1.0}},
                  {"metrics": {"size": 32}}):
        with pytest.raises(ValueError, match="would hide the row's own column"):
            w.add(ROW | clash)
    assert results.read_record(w.path)["rows"] == []


def test_a_loaded_metric_never_overwrites_a_column(results_dir):
    w = _writer(results_dir)
    w.record["rows"].append(ROW | {"metrics": {"device": "cuda:9", "variant": "forged", "size": 0, "gflop_per_s": 1.0}})
    w.finish("complete")
    row = results.rows_frame(results.load_records(results_dir)).iloc[0]
    assert (row["device"], row["variant"], row["size"], row["gflop_per_s"]) == ("cpu", "numpy", 16, 1.0)


def test_schema_1_records_still_load(results_dir):
    old = {"schema": 1, "run_id": "matmul-old", "experiment": "matmul", "preset": "quick", "status": "complete",
           "machine_id": "m-1", "fingerprint": {"cpu_model": "Old CPU", "cpu_logical_cores": 2, "gpus": []},
           "config": {"sizes": [16]}, "started": "2026-01-01T00:00:00+00:00",
           "rows": [{"device": "cpu", "variant": "numpy", "params": {"size": 16}, "status": "ok", "samples": [1e-3],
                     "median": 1e-3, "iqr": 0.0, "noisy": False, "metrics": {"torch_threads": 2}}]}
    (results_dir / "m-1").mkdir(parents=True)
    (results_dir / "m-1" / "matmul-old.json").write_text(json.dumps(old))
    row = results.rows_frame(results.load_records(results_dir)).iloc[0]
    assert (row["median_s"], row["torch_threads"], row["n"]) == (1e-3, 2, 1)
    assert row["noisy"] is None  # one sample: its spread is unknown, never "quiet"
    assert row["unit"] is None and row["code_version"] is None


def test_published_figures_name_their_source():
    figures = published.load()
    assert set(figures["experiment"]) >= {"cnn", "tabnet", "mlp_surface", "iris", "jacobian", "matmul"}
    assert figures["source"].str.endswith(".txt").all() and figures["hardware"].notna().all()
    cnn = published.load("cnn")
    gpu16 = cnn[(cnn["figure"] == "cnn-10-epochs") & (cnn["batch_size"] == 16) & (cnn["device"] == "GPU")]
    assert gpu16["value"].tolist() == [1619.64]
