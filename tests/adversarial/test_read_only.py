"""Under CROSSOVER_READ_ONLY every public function that writes or stops anything refuses with
ReadOnlyError, and nothing is written or stopped: each is listed here."""
import os
import subprocess

import pytest

from core import experiments, settings
from core.commands import jobs
from core.store import runlock
from core.measure import runner
from core.commands.cli import main
from core.store.results import RecordWriter

INFO = {"run_id": "r1", "experiment": "matmul", "devices": ["cpu"], "preset": "smoke",
        "started": "2026-01-01T00:00:00+00:00", "pid": None}


def _writer() -> RecordWriter:
    exp = experiments.get("matmul")
    return RecordWriter("matmul", "smoke", exp.config("smoke"), ["cpu"])


def _run():
    exp = experiments.get("matmul")
    config = exp.config("smoke", {"variants": ("numpy",)})
    runner.run(exp, config, ["cpu"], RecordWriter("matmul", "smoke", config, ["cpu"]))


WRITERS = {
    "runner.run": _run,
    "RecordWriter.start": lambda: _writer().start(3),
    "RecordWriter.add": lambda: _writer().add({"device": "cpu", "variant": "numpy", "params": {"size": 16},
                                               "status": "ok"}),
    "RecordWriter.finish": lambda: _writer().finish("complete"),
    "runlock.acquire": lambda: runlock.acquire(INFO),
    "runlock.adopt": lambda: runlock.adopt("3", INFO),
    "runlock.update": lambda: runlock.update(INFO),
    "jobs.start": lambda: jobs.start("matmul", ["cpu"], "smoke", {"variants": ("numpy",)}),
    "jobs.cancel": jobs.cancel,
}


@pytest.fixture
def read_only(results_dir, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    return results_dir


@pytest.mark.parametrize("name", WRITERS)
def test_every_public_writer_refuses_and_writes_nothing(read_only, name):
    with pytest.raises(settings.ReadOnlyError, match="read-only"):
        WRITERS[name]()
    assert not read_only.exists() or not any(read_only.rglob("*"))


def test_the_cli_run_refuses(read_only, capsys):
    assert main(["run", "matmul", "--device", "cpu", "--preset", "smoke"]) == 2
    assert "read-only" in capsys.readouterr().err and not read_only.exists()


def test_a_cancel_refused_stops_nothing(results_dir, monkeypatch, capsys):
    """A run going on (a process holding the lock), then a read-only view (and its CLI) asked to cancel it."""
    process = subprocess.Popen(["sleep", "30"], start_new_session=True)
    fd = runlock.acquire(INFO | {"pid": process.pid})
    try:
        monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
        with pytest.raises(settings.ReadOnlyError, match="cancelling a run"):
            jobs.cancel()
        assert main(["cancel"]) == 2
        assert capsys.readouterr().err.strip().endswith("read-only (CROSSOVER_READ_ONLY is set): cancelling a run "
                                                        "refused")
        assert process.poll() is None
        assert runlock.holder()["pid"] == process.pid
    finally:
        monkeypatch.delenv(settings.READ_ONLY_ENV)
        runlock.release(fd)
        os.killpg(process.pid, 9)
        process.wait()
