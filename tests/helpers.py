"""Shared helpers for the tests: rendering app scripts, hand-made rows frames, smoke runs. Streamlit is imported
only to render: the GPU checks import these helpers on a machine that runs the core alone."""
from __future__ import annotations

import copy
import fcntl
import functools
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from core import experiments, settings
from core.measure import runner, standin
from core.store import results
from core.store.files import write_atomic
from core.store.results import RecordWriter

if TYPE_CHECKING:
    from streamlit.testing.v1 import AppTest


def render(path: str) -> AppTest:
    """Run one script of the app (a page, or the router) once, as AppTest sees it."""
    from streamlit.testing.v1 import AppTest
    return AppTest.from_file(str(settings.APP_ROOT / path), default_timeout=60).run()


def page_text(at: AppTest) -> str:
    """All the markdown a run drew, joined."""
    return " ".join(m.value for m in at.markdown)


def hand_rows(entries: list[dict], params: tuple[str, ...]) -> pd.DataFrame:
    """A rows frame made by hand: each entry needs device, variant, its `params` and its figures; the
    run's fields default to one complete run of one configuration on machine 'm1'."""
    defaults = {"run_id": "r1", "machine_id": "m1", "machine": "m1", "config_id": "c1", "status": "complete",
                "started": "2026-01-01T00:00:00+00:00", "point_status": "ok", "preset": "quick"}
    return pd.DataFrame([defaults | {"device_name": e["device"]} | e
                         | {"point": json.dumps({k: e[k] for k in params}, sort_keys=True)} for e in entries])


def smoke_record(name: str, device_names=("cpu",), preset: str = "smoke", **overrides) -> dict:
    """Run an experiment into the test's results folder; returns the record. A configuration run before in this
    session (by any worker of `pytest -n`) is not run again: its record is written into this test's folder under a
    new run id."""
    key = json.dumps(["smoke", name, list(device_names), preset, overrides], sort_keys=True, default=list)
    ran = []

    def run() -> dict:
        exp = experiments.get(name)
        config = exp.config(preset, overrides)
        writer = RecordWriter(name, preset, config, list(device_names))
        runner.run(exp, config, list(device_names), writer)
        ran.append(writer.record)
        return writer.record
    record = copy.deepcopy(once(key, run))
    if ran:
        return record
    record |= {"run_id": results.new_run_id(name)}
    write_atomic(settings.results_dir() / record["machine_id"] / f"{record['run_id']}.json", record)
    return record


def timing_only_rows(name: str, overrides: dict, folder: Path) -> pd.DataFrame:
    """A complete smoke run of `name` on the CPU into `folder`, timing only (no census, profile or stand-in census:
    the tests that call it are about timing), as a rows frame."""
    exp = experiments.get(name)
    config = exp.config("smoke", overrides)
    writer = RecordWriter(name, "smoke", config, ["cpu"], results_dir=folder)
    limit, runner.INSPECT_LIMIT_S = runner.INSPECT_LIMIT_S, 0.0
    planned, standin.points = standin.points, lambda experiment, config: []
    try:
        assert runner.run(exp, config, ["cpu"], writer) == "complete"
    finally:
        runner.INSPECT_LIMIT_S, standin.points = limit, planned
    return results.rows_frame(results.load_records(folder), name)


_ONCE: dict[str, object] = {}


def once(key: str, build):
    """`build()` once per test session, shared by the workers of `pytest -n` through a file (its result must be
    JSON): a smoke run or a calibration the tests only read."""
    if key not in _ONCE:
        session = os.environ.get("PYTEST_XDIST_TESTRUNUID")
        _ONCE[key] = build() if session is None else _once_across_workers(key, build, session)
    return _ONCE[key]


def _once_across_workers(key: str, build, session: str):
    folder = Path(tempfile.gettempdir()) / f"crossover-tests-{session}"
    folder.mkdir(exist_ok=True)
    path = folder / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for the one building it
        if path.exists():
            return json.loads(path.read_text())
        value = build()
        write_atomic(path, value)
        return value


@functools.cache
def shipped_records() -> list[dict]:
    """The records shipped in results/, read once a worker (two seconds a read on a 2-core machine): the same list for
    every caller, to read only; a test that changes records changes a copy of them."""
    return results.load_records(settings.APP_ROOT / "results")


def smoke_rows(name: str, device_names=("cpu",), preset: str = "smoke", **overrides) -> pd.DataFrame:
    smoke_record(name, device_names, preset, **overrides)
    return results.rows_frame(results.load_records(), name)


def wait_for(condition, timeout=60.0):
    """Poll `condition` until it returns something true (returned), or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def shipped_runs(*names: str) -> tuple[str, tuple[str, ...]]:
    """A machine of the shipped results/ holding a record of each experiment named, and the run id of its
    latest record of each: tests that need real records follow the shipped ones as they are retaken."""
    shipped = settings.APP_ROOT / "results"
    for machine in sorted(p for p in shipped.iterdir() if p.is_dir()):
        found = [sorted(machine.glob(f"{name}-*.json")) for name in names]
        if all(found):
            return machine.name, tuple(paths[-1].stem for paths in found)
    raise LookupError(f"no shipped machine holds a record of each of {names}")


def shipped_profile_here(machine_id: str | None = None) -> dict:
    """A shipped calibrated profile of a CPU alone (the first by machine id in results/) saved with this machine's
    fingerprint, as this machine's or under `machine_id` (a twin of this CPU): the pages then read it as calibrated,
    without the 10 to 25 s a calibration takes on a loaded 2-core machine. Its figures are another machine's, so a test
    using it checks what a page says, not what this machine measures."""
    from core import devices
    from core.model import profiles
    shipped = profiles.all(settings.APP_ROOT / "results")
    profile = copy.deepcopy(shipped[min(machine for machine, found in shipped.items() if not found["gpus"])])
    here = devices.fingerprint()
    machine_id = machine_id or here["machine_id"]
    profiles.save(profile | {"machine_id": machine_id, "fingerprint": dict(here, machine_id=machine_id)})
    return profile
