import json
import os
import time

import pytest
from jsonschema import Draft202012Validator

from core import experiments, published, settings
from core.commands import cli
from core.store import record_schema, results
from core.params import ConfigError
from core.store.results import RecordWriter


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


def _record_file(folder, record, machine_id=None):
    """Write a hand-made record where the loader looks for it; returns its path."""
    path = folder / (machine_id or record["machine_id"]) / f"{record['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def _finished(folder, **row_changes) -> dict:
    w = _writer(folder)
    w.start(1)
    w.add(ROW | row_changes)
    w.finish("complete")
    return w.record


def _first_row(change):
    return lambda record: {"rows": [record["rows"][0] | change]}


# A change to a valid record, and what the warning must say about the field it breaks.
SCHEMA_FAILURES = {
    "rows-not-a-list": (lambda r: {"rows": "x"}, "field rows: 'x' is not of type 'array'"),
    "row-not-an-object": (lambda r: {"rows": [1, "a"]}, "field rows/0: 1 is not of type 'object'"),
    "params-not-an-object": (_first_row({"params": "size"}), "field rows/0/params: 'size' is not of type 'object'"),
    "param-not-one-value": (_first_row({"params": {"size": [16]}}), "field rows/0/params/size: [16] is not of type"),
    "empty-fingerprint": (lambda r: {"fingerprint": {}}, "field fingerprint: 'cpu_model' is a required property"),
    "gpu-without-name": (lambda r: {"fingerprint": r["fingerprint"] | {"gpus": [{"device": "cuda:0"}]}},
                         "field fingerprint/gpus/0: 'name' is a required property"),
    "unknown-status": (lambda r: {"status": "done"}, "field status: 'done' is not one of"),
    "samples-not-numbers": (_first_row({"samples": [1e-3, "1e-3", True]}),
                            "field rows/0/samples: not a list of numbers: it holds bool, str values"),
    "median-a-string": (_first_row({"median": "fast"}), "field rows/0/median: 'fast' is not of type"),
    "census-not-an-object": (_first_row({"census": "x"}), "field rows/0/census: 'x' is not of type 'object', 'null'"),
    "row-without-device": (lambda r: {"rows": [{k: v for k, v in r["rows"][0].items() if k != "device"}]},
                           "field rows/0: 'device' is a required property"),
    "no-machine-id": (lambda r: {"machine_id": None}, "field machine_id: None is not of type 'string'"),
}


@pytest.mark.parametrize("schema", results.READABLE_SCHEMAS)
@pytest.mark.parametrize("case", SCHEMA_FAILURES, ids=str)
def test_a_record_failing_its_schema_is_skipped_naming_the_file_and_the_field(results_dir, case, schema):
    good = _finished(results_dir)
    change, expected = SCHEMA_FAILURES[case]
    bad = _record_file(results_dir, good | {"schema": schema, "run_id": case} | change(good), good["machine_id"])
    with pytest.warns(UserWarning) as caught:
        loaded = results.load_records(results_dir)
    assert [r["run_id"] for r in loaded] == [good["run_id"]]
    assert len(caught) == 1 and str(caught[0].message).startswith(f"skipping {bad}: {expected}")


def test_the_record_schemas_are_valid_json_schemas():
    for schema in record_schema.SCHEMAS.values():
        Draft202012Validator.check_schema(schema)


def test_a_census_a_breakdown_and_fields_of_a_newer_writer_load(results_dir):
    record = _finished(results_dir, census={"operations": 3, "kernels": 0}, breakdown={"skipped": "too long"},
                       from_the_future=[1, 2])
    _record_file(results_dir, record | {"run_id": "newer", "written_by": "a later Crossover"})
    assert {r["run_id"] for r in results.load_records(results_dir)} == {record["run_id"], "newer"}
    row = results.rows_frame(results.load_records(results_dir)).iloc[0]
    assert row["census_operations"] == 3 and row["breakdown_note"] == "too long"


def test_each_version_of_a_file_is_checked_against_the_schema_once(results_dir, monkeypatch):
    checked = []
    real = record_schema.problem
    monkeypatch.setattr(record_schema, "problem", lambda record, version: checked.append(record["run_id"])
                        or real(record, version))
    w = _writer(results_dir)
    w.start(2)
    results.load_records(results_dir)
    results.load_records(results_dir)
    assert checked == [w.record["run_id"]]
    w.add(ROW)
    assert len(results.load_records(results_dir)[0]["rows"]) == 1 and len(checked) == 2


def test_a_record_that_vanishes_while_loading_is_skipped_with_a_warning(results_dir, monkeypatch):
    record = _finished(results_dir)
    gone = results_dir / record["machine_id"] / "gone.json"
    monkeypatch.setattr(results, "record_paths", lambda folder: [gone, *sorted(folder.glob("*/*.json"))])
    with pytest.warns(UserWarning, match="gone.json: gone: removed while the results were loading"):
        assert [r["run_id"] for r in results.load_records(results_dir)] == [record["run_id"]]


@pytest.mark.parametrize("run_id", ["../../x", "a/b", "/tmp/x", "", ".hidden", "a..b", "x.json", "-x", "a b", "a\n",
                                    "é", "x" * 101, "a\x00b"])
def test_a_run_id_that_does_not_match_the_pattern_is_refused(results_dir, run_id):
    with pytest.raises(ConfigError, match="allowed: 1 to 100 letters, digits") as refused:
        RecordWriter("matmul", "smoke", experiments.get("matmul").config("smoke"), ["cpu"], run_id=run_id)
    assert refused.value.field == "run-id"
    assert not results_dir.exists()


def test_the_run_ids_crossover_makes_match_the_pattern():
    for name in experiments.registry():
        assert results.RUN_ID_PATTERN.fullmatch(results.new_run_id(name))
    assert results.check_run_id("a" * 100) == "a" * 100


def test_the_cli_refuses_a_run_id_that_is_a_path_and_writes_nothing(results_dir, tmp_path, capsys):
    before = sorted(tmp_path.rglob("*"))
    assert cli.main(["run", "matmul", "--preset", "smoke", "--device", "cpu", "--run-id", "../../x"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: run-id: '../../x' is not a run id; allowed:") and "Traceback" not in error
    assert sorted(tmp_path.rglob("*")) == before


def test_an_existing_record_is_never_overwritten(results_dir):
    first = _finished(results_dir)
    again = RecordWriter("matmul", "smoke", first["config"], ["cpu"], run_id=first["run_id"], results_dir=results_dir)
    with pytest.raises(ConfigError, match="run-id: a record of run .* already exists .* never overwritten"):
        again.start(1)
    on_disk = results.read_record(again.path)
    assert on_disk["rows"] == [ROW] and on_disk["status"] == "complete"


def test_a_record_is_never_written_through_a_symbolic_link(results_dir, tmp_path):
    w = _writer(results_dir)
    w.path.parent.mkdir(parents=True)
    w.path.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ConfigError, match="already exists"):
        w.start(1)
    assert not (tmp_path / "elsewhere.json").exists()


def test_a_run_larger_than_a_record_holds_is_refused_before_anything_is_written(results_dir):
    w = _writer(results_dir)
    with pytest.raises(ConfigError, match=f"points: 10,001 planned; allowed: at most {record_schema.MAX_ROWS:,}"):
        w.start(record_schema.MAX_ROWS + 1)
    assert not w.path.exists()


def test_a_read_only_instance_refuses_every_write_of_a_record(results_dir, monkeypatch):
    w = _writer(results_dir)
    w.start(2)
    w.add(ROW)
    before = w.path.read_bytes()
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    fresh = _writer(results_dir)
    for write in (lambda: fresh.start(1), lambda: w.add(ROW), lambda: w.finish("complete")):
        with pytest.raises(settings.ReadOnlyError, match="writing results refused"):
            write()
    assert not fresh.path.exists() and w.path.read_bytes() == before


def test_start_removes_the_temporary_files_a_killed_writer_left(results_dir):
    w = _writer(results_dir)
    folder = w.path.parent
    folder.mkdir(parents=True)
    stale, fresh = folder / ".old-run.json.k1ll3d.tmp", folder / ".live-run.json.wr1t1n.tmp"
    for path in (stale, fresh):
        path.write_text(json.dumps(w.record | {"run_id": path.name.split(".")[1]}))
    an_hour_ago = time.time() - 3600
    os.utime(stale, (an_hour_ago, an_hour_ago))
    assert [r["run_id"] for r in results.load_records(results_dir)] == []  # never loaded
    w.start(1)
    assert not stale.exists() and fresh.exists()
    assert [r["run_id"] for r in results.load_records(results_dir)] == [w.record["run_id"]]
