"""A results folder several machines share (CROSSOVER_RESULTS_DIR on a network mount): each machine writes
only under its own machine id, another machine's run never makes this one busy, and the app reads them all."""
import pytest
import fcntl
import json

from core import devices, settings
from core.commands import jobs
from core.model import profiles
from core.store import files, results, runlock
from core.commands.cli import main
from tests.app.test_machines_page import made_profile

SHIPPED = settings.APP_ROOT / "results"
OTHER = "other-laptop-0a1b2c3d"


def other_machine(folder):
    """Another machine's folder: one of the shipped records, moved to its id, and its run lock description."""
    record = results.read_record(next(SHIPPED.glob("*/matmul-*.json")))
    record = record | {"run_id": "matmul-on-the-laptop", "machine_id": OTHER,
                       "fingerprint": record["fingerprint"] | {"machine_id": OTHER, "cpu_model": "Laptop CPU"}}
    files.write_atomic(folder / OTHER / f"{record['run_id']}.json", record)
    runlock.paths(folder, OTHER)[1].write_text(json.dumps({"run_id": "laptop-run", "pid": 1}))
    return {p: p.read_bytes() for p in (folder / OTHER).rglob("*") if p.is_file()}


@pytest.mark.full
def test_a_run_and_a_calibration_write_only_under_this_machines_id(results_dir):
    theirs = other_machine(results_dir)
    here = devices.fingerprint()["machine_id"]
    assert runlock.holder() is None  # the other machine's described run does not make this one busy
    assert main(["run", "matmul", "--device", "cpu", "--preset", "smoke", "--set", "sizes=8,16"]) == 0
    profiles.save(made_profile(here))
    written = [p for p in results_dir.rglob("*") if p.is_file() and p not in theirs]
    assert written and all(p.relative_to(results_dir).parts[0] == here for p in written)
    assert {p: p.read_bytes() for p in (results_dir / OTHER).rglob("*") if p.is_file()} == theirs
    assert {r["machine_id"] for r in results.load_records()} == {here, OTHER}
    assert set(profiles.all()) == {here}


def test_the_logs_of_the_apps_runs_are_this_machines(results_dir):
    assert jobs.logs_dir() == results_dir / devices.fingerprint()["machine_id"] / ".logs"


def test_another_machines_run_reads_as_running_only_while_its_lock_is_held(results_dir):
    """Its process cannot be checked from here: its lock decides (held here by this test, as flock across
    hosts would show it)."""
    other_machine(results_dir)
    record = results.read_record(results_dir / OTHER / "matmul-on-the-laptop.json")
    record |= {"status": "running", "rows": record["rows"][:-1]}  # still measuring its last point
    files.write_atomic(results_dir / OTHER / "matmul-on-the-laptop.json", record)
    assert results.load_records()[0]["status"] == "partial"  # nothing holds its lock: interrupted
    runlock.paths(results_dir, OTHER)[1].write_text(json.dumps({"run_id": "matmul-on-the-laptop", "pid": 999999999}))
    with open(runlock.paths(results_dir, OTHER)[0], "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert results.load_records()[0]["status"] == "running"
