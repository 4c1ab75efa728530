import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from core import settings
from core.commands import jobs
from core.store import results, runlock
from core.params import ConfigError
from tests.helpers import wait_for

SLOW = {"sizes": tuple(range(8, 48)), "repeats": 5, "block_seconds": 0.02, "variants": ("numpy",)}


@pytest.mark.full
def test_background_smoke_run_end_to_end(results_dir, monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    old_logs = _old_logs(jobs.logs_dir(), jobs.LOGS_KEPT + 5)
    info = jobs.start("matmul", ["cpu"], "smoke", {"variants": ("numpy",)})
    assert info["pid"] and info["experiment"] == "matmul"
    wait_for(lambda: jobs.current() is None)
    kept = {p.name for p in (jobs.logs_dir()).glob("*.log")}
    assert kept == {f"{info['run_id']}.log"} | {p.name for p in old_logs[-(jobs.LOGS_KEPT - 1):]}
    assert not (runlock.paths(results_dir)[1]).exists()  # the run's description goes with it
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


@pytest.mark.full
def test_one_run_at_a_time_and_cancel_keeps_finished_points(results_dir):
    info = jobs.start("matmul", ["cpu"], "smoke", SLOW)
    try:
        assert jobs.current()["total"] == 40  # known from the start, before the run has written its record
        with pytest.raises(runlock.BusyError, match=r"already going on this machine: matmul on cpu .*since"):
            jobs.start("matmul", ["cpu"], "smoke")
        progress = wait_for(lambda: (j := jobs.current()) and j["done"] >= 2 and j)
        assert progress["total"] == 40 and progress["run_id"] == info["run_id"]
    finally:
        stopped = jobs.cancel()
    assert stopped["run_id"] == info["run_id"] and stopped["stopping"] and stopped["done"] >= 2
    stopping = jobs.current()
    assert stopping is None or stopping["stopping"]  # shown until the run's process has exited
    wait_for(lambda: jobs.current() is None)
    wait_for(lambda: not _alive_or_zombie(info["pid"]), timeout=30)  # reaped: no defunct process under the app
    record = results.read_record(info["record"])
    assert record["status"] == "cancelled"
    assert 2 <= len(record["rows"]) < 40
    assert all(r["status"] == "ok" and r["samples"] for r in record["rows"])
    assert jobs.cancel() is None  # nothing left to cancel


@pytest.mark.full
def test_a_killed_run_leaves_no_stale_lock(results_dir):
    info = jobs.start("matmul", ["cpu"], "smoke", SLOW)
    wait_for(lambda: (j := jobs.current()) and j["done"] >= 1)
    os.killpg(info["pid"], signal.SIGKILL)
    wait_for(lambda: jobs.current() is None)
    assert results.read_record(info["record"])["status"] == "running"  # what was written stays readable
    assert results.load_records(results_dir)[0]["status"] == "partial"
    assert runlock.holder() is None  # its description is left behind, but nothing holds the lock
    runlock.release(runlock.acquire({"run_id": "next"}))


def test_read_only_refuses_to_start(results_dir, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "true")
    with pytest.raises(settings.ReadOnlyError):
        jobs.start("matmul", ["cpu"], "smoke")
    assert jobs.current() is None


def _old_logs(folder: Path, count: int) -> list[Path]:
    """`count` logs of earlier runs, oldest first."""
    folder.mkdir(parents=True)
    logs = []
    for i in range(count):
        log = folder / f"old-{i:02d}.log"
        log.write_text("earlier run\n")
        os.utime(log, (time.time() - 3600 + i, time.time() - 3600 + i))
        logs.append(log)
    return logs


def _alive_or_zombie(pid: int) -> bool:
    """True while the process exists, a zombie included: only its parent's wait (the reap) removes it."""
    try:
        psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return False
    return True
