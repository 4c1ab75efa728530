import json
import os

import pytest

from core import experiments, results
from core.results import RecordWriter


def _writer(folder, config=None):
    exp = experiments.get("matmul")
    return RecordWriter("matmul", "smoke", config or exp.config("smoke"), ["cpu"], results_dir=folder)


ROW = {"device": "cpu", "variant": "numpy", "params": {"size": 16}, "status": "ok", "samples": [1e-6, 2e-6, 3e-6],
       "median": 2e-6, "iqr": 1e-6, "noisy": True, "metrics": {"gflop_per_s": 4.1}}


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
    assert results.rows_frame(results.load_records(results_dir), "iris").empty


def test_published_figures_name_their_source():
    published = results.load_published()
    assert set(published["experiment"]) >= {"cnn", "tabnet", "mlp_surface", "iris", "jacobian", "matmul"}
    assert published["source"].str.endswith(".txt").all() and published["hardware"].notna().all()
    cnn = results.load_published("cnn")
    gpu16 = cnn[(cnn["figure"] == "cnn-10-epochs") & (cnn["batch_size"] == 16) & (cnn["device"] == "GPU")]
    assert gpu16["value"].tolist() == [1619.64]
