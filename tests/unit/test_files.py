"""The store's files (core.store.files): a write the disk refuses (full, a used-up quota, read-only, no permission)
is an error in words naming the file and what was kept, never a cut-off file or a temporary one left behind; a run
and a calibration that meet one stop with one line and exit status 2; leftovers of killed writers are swept in every
folder the store writes into. A full disk is simulated by making the store's low-level write (files._put) fail."""
import errno
import gzip
import json
import os
import time

import pytest
import torch

from core.calibration import calibrate
from core.commands.cli import main
from core.measure import breakdown, timing
from core.model import profiles
from core.store import files, results
from tests.unit.test_hardware import made_profile

REAL_PUT = files._put


def _refused(code: int = errno.ENOSPC):
    def put(fd, content):
        raise OSError(code, os.strerror(code))
    return put


def _temporaries(folder) -> list:
    return [p for p in folder.rglob("*") if p.name.endswith(files.TEMP_SUFFIX)]


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "no space left on the device (ENOSPC)"),
                                         (errno.EDQUOT, "the disk quota is used up (EDQUOT)"),
                                         (errno.EROFS, "the file system is read-only (EROFS)"),
                                         (errno.EACCES, "permission denied (EACCES)")])
def test_a_refused_write_names_the_file_and_keeps_the_previous_version_whole(tmp_path, monkeypatch, code, words):
    target = tmp_path / "kept.json"
    files.write_atomic(target, {"version": 1})
    monkeypatch.setattr(files, "_put", _refused(code))
    with pytest.raises(files.StoreError) as caught:
        files.write_atomic(target, {"version": 2})
    assert str(caught.value) == f"could not write {target}: {words}; kept: its previous version, unchanged"
    assert caught.value.errno == code and caught.value.path == target and isinstance(caught.value, OSError)
    assert json.loads(target.read_bytes()) == {"version": 1}
    assert os.listdir(tmp_path) == ["kept.json"]  # no temporary file left


def test_a_failing_sync_is_said_the_same_way(tmp_path, monkeypatch):
    target = tmp_path / "kept.json"
    files.write_atomic(target, {"version": 1})
    monkeypatch.setattr(files.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    with pytest.raises(files.StoreError, match=f"could not write {target}: no space left"):
        files.replace_atomic(target, b"{}")
    monkeypatch.undo()
    assert json.loads(target.read_bytes()) == {"version": 1} and os.listdir(tmp_path) == ["kept.json"]


def test_a_new_file_that_cannot_be_written_leaves_nothing_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_put", _refused())
    for write in (lambda path: files.create_atomic(path, b"x"), lambda path: files.write_atomic(path, {"a": 1})):
        target = tmp_path / "new.json"
        with pytest.raises(files.StoreError, match="kept: nothing"):
            write(target)
        assert os.listdir(tmp_path) == []


def test_a_failure_that_is_the_program_s_stays_what_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_put", _refused(errno.EIO))
    with pytest.raises(OSError) as caught:
        files.write_atomic(tmp_path / "x.json", {})
    assert not isinstance(caught.value, files.StoreError) and caught.value.errno == errno.EIO
    assert os.listdir(tmp_path) == []


def test_a_stream_is_renamed_into_place_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "t.gz"
    with files.writing(target) as out, gzip.GzipFile(filename="", mode="wb", fileobj=out) as packed:
        packed.write(b"first" * 1000)
    assert gzip.decompress(target.read_bytes()) == b"first" * 1000
    calls = []

    def full_after_a_block(fd, content):
        calls.append(len(content))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "full")
        REAL_PUT(fd, content)
    monkeypatch.setattr(files, "_put", full_after_a_block)
    with pytest.raises(files.StoreError, match="kept: its previous version"):
        with files.writing(target) as out, gzip.GzipFile(filename="", mode="wb", fileobj=out) as packed:
            packed.write(os.urandom(100_000))
    assert gzip.decompress(target.read_bytes()) == b"first" * 1000 and os.listdir(tmp_path) == ["t.gz"]


def test_leftovers_are_swept_in_the_machine_folder_and_every_folder_the_store_writes_inside_it(tmp_path):
    machine = tmp_path / "machine"
    elsewhere = tmp_path / "elsewhere"
    for folder in (machine / "calibration", machine / "predictions", machine / "run-1", elsewhere):
        folder.mkdir(parents=True)
    stale = [machine / ".run-1.json.k1ll3d.tmp", machine / "calibration" / ".profile.json.abcd1234.tmp",
             machine / "predictions" / ".writeups.json.abcd1234.tmp", machine / "run-1" / ".001.ops.csv.x1y2z3ab.tmp"]
    kept = [machine / ".live.json.wr1t1n.tmp", machine / "run-1.json", machine / "calibration" / "profile.json",
            elsewhere / ".linked.json.abcd1234.tmp", machine / ".running.json"]
    (machine / "linked").symlink_to(elsewhere)
    an_hour_ago = time.time() - 3600
    for path in stale + kept:
        path.write_text("{}")
        if path.name != ".live.json.wr1t1n.tmp":
            os.utime(path, (an_hour_ago, an_hour_ago))
    assert sorted(files.remove_leftovers(machine)) == sorted(stale)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in stale)


@pytest.mark.full
def test_a_run_that_meets_a_full_disk_stops_with_one_line_and_its_record_stays_whole(capsys, results_dir,
                                                                                       monkeypatch):
    writes = []

    def full_after_the_first(fd, content):  # the run lock's description and the record's creation go through
        writes.append(len(content))
        if len(writes) > 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        REAL_PUT(fd, content)
    monkeypatch.setattr(files, "_put", full_after_the_first)
    assert main(["run", "matmul", "--preset", "smoke", "--device", "cpu", "--set", "variants=torch cpu"]) == 2
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.strip()]
    assert line.startswith("error: could not write ") and "no space left on the device (ENOSPC)" in line
    assert "kept: its previous version, unchanged" in line and "its record could not be closed" in line
    assert "Traceback" not in err
    [path] = results_dir.glob("*/*.json")
    assert str(path) in line
    on_disk = json.loads(path.read_bytes())
    assert on_disk["status"] == "running" and on_disk["rows"] == []
    [loaded] = results.load_records(results_dir)
    assert loaded["status"] == "partial"  # nothing holds the lock now: it reads as interrupted
    assert not _temporaries(results_dir) and not list(results_dir.rglob("*.gz"))


@pytest.mark.full
def test_a_run_whose_points_cannot_be_written_closes_its_record_as_failed_saying_the_disk_is_full(
        capsys, results_dir, monkeypatch):
    def only_the_record_s_start_and_close(fd, content):
        text = content.tobytes() if isinstance(content, memoryview) else bytes(content)
        record = json.loads(text) if text.startswith(b"{") else {}
        lock = "pid" in record and "record" in record  # the run lock's description (core.store.runlock)
        if lock or record.get("status") == "failed" or (record.get("status") == "running" and not record.get("rows")):
            return REAL_PUT(fd, content)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(files, "_put", only_the_record_s_start_and_close)
    assert main(["run", "matmul", "--preset", "smoke", "--device", "cpu", "--set", "variants=torch cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: could not write ") and "Traceback" not in err
    assert "the run stopped after measuring 1 of 3 points; its record is closed as failed" in err
    [record] = results.load_records(results_dir)
    assert record["status"] == "failed" and "no space left on the device (ENOSPC)" in record["error"]
    [row] = record["rows"]
    parts = row["breakdown"]
    assert parts["trace"] is None and "the trace was not kept: could not write" in parts["trace_note"]
    assert parts["table"] is None and "no space left on the device" in parts["table_note"]
    assert not _temporaries(results_dir) and not list(results_dir.rglob("*.gz"))


def test_a_trace_torch_left_cut_off_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(breakdown, "_ends_whole", lambda raw: False)
    a = torch.randn(64, 64)
    workload = timing.Workload(lambda: a @ a, unit="call", repeats=3, threads=1)
    parts = breakdown.take(workload, "cpu", timing.run(workload, "cpu").median, tmp_path / "run", "p0")
    assert parts["trace"] is None and "could not write it whole" in parts["trace_note"] and parts["table"] == "run/p0.ops.csv"
    assert sorted(os.listdir(tmp_path / "run")) == ["p0.ops.csv"]


def test_a_calibration_that_cannot_be_saved_is_one_error_line_and_leaves_no_temporary_file(
        capsys, results_dir, monkeypatch):
    profile = made_profile(profiles.path().parent.parent.name)
    profiles.save(profile)
    before = profiles.path().read_bytes()
    monkeypatch.setattr(calibrate, "take", lambda names, quick: profile | {"seconds": 2.0})
    monkeypatch.setattr(calibrate, "report", lambda measured: "the figures")
    monkeypatch.setattr(files, "_put", _refused())
    assert main(["calibrate", "--quick", "--device", "cpu"]) == 2
    out, err = capsys.readouterr()
    assert out == "the figures\n" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: could not write {profiles.path()}: no space left on the device (ENOSPC); "
                          "kept: its previous version, unchanged; the measurements above are not saved")
    assert profiles.path().read_bytes() == before
    assert os.listdir(profiles.path().parent) == [profiles.FILE_NAME]


def test_saving_a_profile_sweeps_what_a_killed_save_left(results_dir):
    profile = made_profile(profiles.path().parent.parent.name)
    profiles.path().parent.mkdir(parents=True)
    leftover = profiles.path().parent / ".profile.json.k1ll3d.tmp"
    leftover.write_text("{")
    an_hour_ago = time.time() - 3600
    os.utime(leftover, (an_hour_ago, an_hour_ago))
    profiles.save(profile)
    assert os.listdir(profiles.path().parent) == [profiles.FILE_NAME]
