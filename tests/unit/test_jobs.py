import pytest

from core import jobs, results, runlock, settings
from core.params import ConfigError
from tests.helpers import wait_for

SLOW = {"sizes": (16,) * 40, "repeats": 5, "block_seconds": 0.02, "variants": ("numpy",)}


def test_background_smoke_run_end_to_end(results_dir, monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    info = jobs.start("matmul", ["cpu"], "smoke", {"variants": ("numpy",)})
    assert info["pid"] and info["experiment"] == "matmul"
    wait_for(lambda: jobs.current() is None)
    record = results.read_record(info["record"])
    assert record["status"] == "complete"
    assert len(record["rows"]) == record["planned_points"] == 3
    assert "complete" in jobs.log_tail(info["run_id"])
    assert record["config"]["variants"] == ["numpy"]  # the checked configuration, passed as JSON
    assert record["environment"]["MALLOC_MMAP_THRESHOLD_"] is None  # matmul asks for no malloc setting


def test_a_choice_of_variants_that_leaves_nothing_to_run_is_refused_before_anything_starts(results_dir):
    with pytest.raises(ConfigError, match="cpu cannot run h2d pinned"):
        jobs.start("matmul", ["cpu"], "smoke", {"variants": ("h2d pinned",)})
    assert jobs.current() is None and not list(results_dir.glob("*/*.json"))


def test_one_run_at_a_time_and_cancel_keeps_finished_points(results_dir):
    info = jobs.start("matmul", ["cpu"], "smoke", SLOW)
    try:
        with pytest.raises(runlock.BusyError, match=r"already going on this machine: matmul on cpu .*since"):
            jobs.start("matmul", ["cpu"], "smoke")
        progress = wait_for(lambda: (j := jobs.current()) and j["done"] >= 2 and j)
        assert progress["total"] == 40 and progress["run_id"] == info["run_id"]
    finally:
        assert jobs.cancel()
    wait_for(lambda: jobs.current() is None)
    record = results.read_record(info["record"])
    assert record["status"] == "cancelled"
    assert 2 <= len(record["rows"]) < 40
    assert all(r["status"] == "ok" and r["samples"] for r in record["rows"])
    assert not jobs.cancel()  # nothing left to cancel


def test_a_killed_run_leaves_no_stale_lock(results_dir):
    import os
    import signal
    info = jobs.start("matmul", ["cpu"], "smoke", SLOW)
    wait_for(lambda: (j := jobs.current()) and j["done"] >= 1)
    os.killpg(info["pid"], signal.SIGKILL)
    wait_for(lambda: jobs.current() is None)
    assert results.read_record(info["record"])["status"] == "running"  # what was written stays readable
    assert results.load_records(results_dir)[0]["status"] == "partial"


def test_read_only_refuses_to_start(results_dir, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "true")
    with pytest.raises(settings.ReadOnlyError):
        jobs.start("matmul", ["cpu"], "smoke")
    assert jobs.current() is None
