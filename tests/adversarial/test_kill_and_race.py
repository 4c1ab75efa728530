"""A run killed with SIGKILL at random moments, starts racing each other, a cancel at once, and a
lock descriptor taken from the environment: nothing recorded is lost, one run at a time, and every
refusal says why."""
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import warnings

import pytest

from core import settings
from core.commands import jobs
from core.store import results, runlock
from core.commands.cli import main
from tests.helpers import render, wait_for

KILLS = 4
POINTS = tuple(range(8, 72))   # 64 tiny products: the record is rewritten every few milliseconds
PRINTED_POINT = re.compile(r"^\[(\d+)/\d+\] cpu numpy size=(\d+): ")
SMOKE = ["run", "matmul", "--device", "cpu", "--preset", "smoke", "--set", "variants=numpy"]


def _cli_run(folder) -> subprocess.Popen:
    command = [sys.executable, "-m", "core", *SMOKE, "--set", "sizes=" + ",".join(map(str, POINTS)),
               "--set", "repeats=1", "--set", "block_seconds=0.001"]
    return subprocess.Popen(command, cwd=settings.APP_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=os.environ | {settings.RESULTS_ENV: str(folder)})


def _kill_after_start(process: subprocess.Popen, delay: float, printed: list[str]) -> None:
    """SIGKILL `process` `delay` seconds after it says it started; `printed` gets what it printed."""
    printed.append(process.stdout.readline())  # "matmul (smoke) on cpu -> <record>": the lock is held
    reader = threading.Thread(target=lambda: printed.extend(process.stdout))
    reader.start()
    time.sleep(delay)
    process.kill()
    process.wait()
    reader.join()


@pytest.mark.full
def test_a_run_killed_at_random_moments_keeps_every_printed_point_and_frees_the_lock(tmp_path):
    seed = random.randrange(10**6)
    delays = [random.Random(seed + i).uniform(0.0, 0.5) for i in range(KILLS)]
    folders = [tmp_path / f"results-{i}" for i in range(KILLS)]
    outputs = [[] for _ in range(KILLS)]
    killers = [threading.Thread(target=_kill_after_start, args=(_cli_run(folder), delay, printed))
               for folder, delay, printed in zip(folders, delays, outputs)]  # a folder each: side by side
    for killer in killers:
        killer.start()
    for killer in killers:
        killer.join()
    for folder, printed, delay in zip(folders, outputs, delays):
        where = f"killed {delay:.3f} s after its start (seed {seed}); it printed {printed!r}"
        assert printed[0].startswith("matmul (smoke) on cpu -> "), where
        points = [(int(m[1]), int(m[2])) for m in map(PRINTED_POINT.match, printed) if m]
        files = [p for p in folder.glob("*/*.json") if not p.name.startswith(".")]  # not the lock's description
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            records = results.load_records(folder)
        assert not caught and len(records) == len(files) <= 1, where
        if points:
            rows = records[0]["rows"]
            assert [(i, r["params"]["size"]) for i, r in enumerate(rows, 1)][:len(points)] == points, where
        assert runlock.holder(folder) is None, where
        runlock.release(runlock.acquire({"run_id": "after the kill"}, folder))


@pytest.mark.full
def test_racing_starts_give_one_run_every_loser_names_it_and_a_cancel_at_once_leaves_a_record(results_dir):
    barrier, started, refused = threading.Barrier(5), [], []

    def start() -> None:
        barrier.wait()
        try:
            started.append(jobs.start("matmul", ["cpu"], "smoke", {"variants": ("numpy",)}))
        except runlock.BusyError as e:
            refused.append(str(e))

    threads = [threading.Thread(target=start) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(started) == 1 and len(refused) == 4
    run = started[0]
    for message in refused:
        assert f"matmul on cpu (run {run['run_id']}, since {run['started']})" in message
    assert jobs.cancel()  # at once: the run's process is still starting, its handler not yet installed
    assert jobs.current()["stopping"]  # said until the process has stopped
    page, router = render("pages/matmul.py"), render("streamlit_app.py")
    assert any(w.value.startswith("Stopping after the current point") for w in page.warning)
    assert any(w.value.startswith("Stopping after the current point") for w in router.sidebar.warning)
    wait_for(lambda: jobs.current() is None)
    record = results.read_record(run["record"])
    assert record["status"] == "cancelled" and len(record["rows"]) < record["planned_points"]
    assert not (runlock.paths(results_dir)[1]).exists()
    page.run()  # the panel then says how the run ended
    assert any(w.value.startswith("The smoke run of ") and ": cancelled, " in w.value for w in page.warning)


@pytest.fixture
def held(results_dir):
    """The lock held by a (pretend) run, as a process of the app would."""
    info = {"run_id": "holder-run", "experiment": "iris", "devices": ["cpu"], "preset": "smoke",
            "started": "2026-01-01T00:00:00+00:00", "pid": os.getpid()}
    fd = runlock.acquire(info)
    yield fd
    runlock.release(fd)


@pytest.mark.parametrize("value", ["abc", "0", "99999"])
def test_a_lock_descriptor_from_the_environment_never_skips_a_held_lock(held, results_dir, monkeypatch,
                                                                        capsys, value):
    monkeypatch.setenv(runlock.LOCK_FD_ENV, value)
    assert main(SMOKE) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {runlock.LOCK_FD_ENV}: ") and "Traceback" not in err
    assert not results.record_paths(results_dir)


def test_a_second_descriptor_on_the_lock_file_is_told_which_run_holds_it(held, results_dir, monkeypatch, capsys):
    second = os.open(runlock.paths(results_dir)[0], os.O_RDONLY)
    monkeypatch.setenv(runlock.LOCK_FD_ENV, str(second))
    try:
        assert main(SMOKE) == 2
    finally:
        os.close(second)
    assert "iris on cpu (run holder-run, since 2026-01-01T00:00:00+00:00)" in capsys.readouterr().err
    assert not results.record_paths(results_dir)


def test_the_descriptor_the_app_hands_down_is_used_and_given_back(results_dir, monkeypatch):
    handed_down = runlock.acquire({"run_id": "app-run", "experiment": "matmul", "devices": ["cpu"],
                                   "started": "2026-01-01T00:00:00+00:00", "pid": os.getpid()})
    monkeypatch.setenv(runlock.LOCK_FD_ENV, str(handed_down))
    assert main(SMOKE) == 0  # the run closes the descriptor at its end
    assert results.load_records()[0]["status"] == "complete"
    assert runlock.holder() is None  # the run gave the lock and its description back at its end
    runlock.release(runlock.acquire({"run_id": "next"}))


def test_a_sigterm_before_the_record_exists_waits_for_it(results_dir):
    """A cancel that reaches a run's process before it has written its record is held back until it has:
    the run then ends cancelled, with a record."""
    from core import experiments
    from core.measure import runner
    from core.store.results import RecordWriter
    exp = experiments.get("matmul")
    config = exp.config("smoke", {"variants": ("numpy",)})
    writer = RecordWriter("matmul", "smoke", config, ["cpu"])
    held_back = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # to this thread: it waits, held back
        assert runner.run(exp, config, ["cpu"], writer) == "cancelled"
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held_back)
    assert results.read_record(writer.path)["status"] == "cancelled"
