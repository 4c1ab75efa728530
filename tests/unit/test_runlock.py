import fcntl
import json
import os
import subprocess
import sys
import threading

import pytest

from core import settings
from core.store import runlock
from core.params import ConfigError


def _info(run_id: str, pid: int = None) -> dict:
    return {"run_id": run_id, "experiment": "matmul", "devices": ["cpu"], "preset": "smoke",
            "started": "2026-01-01T00:00:00+00:00", "pid": os.getpid() if pid is None else pid}


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_run_is_described_while_it_holds_the_lock_and_the_description_goes_with_it(results_dir):
    fd = runlock.acquire(_info("r1"))
    assert runlock.holder() == _info("r1")
    runlock.release(fd)
    assert runlock.holder() is None
    assert not [p.name for p in runlock.paths(results_dir)[1].parent.iterdir() if p.name.startswith(runlock.INFO_NAME)]  # no temporary left


def test_racing_starts_give_one_holder_and_every_loser_is_told_which(results_dir):
    barrier, held, refused = threading.Barrier(8), {}, {}

    def start(run_id: str) -> None:
        barrier.wait()
        try:
            held[run_id] = runlock.acquire(_info(run_id))
        except runlock.BusyError as e:
            refused[run_id] = str(e)

    threads = [threading.Thread(target=start, args=(f"r{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(held) == 1 and len(refused) == 7
    winner = next(iter(held))
    for message in refused.values():
        assert f"matmul on cpu (run {winner}, since 2026-01-01T00:00:00+00:00)" in message
    runlock.release(held[winner])


LOOKER = """
import sys
from pathlib import Path
from core import settings
from core.store import runlock
stop = Path(sys.argv[1])
print("looking", flush=True)
while not stop.exists():
    runlock.holder()
"""


@pytest.mark.full
@pytest.mark.parametrize("left_behind", [None, "a killed run's description naming a live process"])
def test_looking_never_makes_a_start_fail(results_dir, tmp_path, left_behind):
    """Pages look at the lock all the time (here two processes, looking as fast as they can); with
    nothing running, every start must succeed. A killed run's description naming a live process (its
    id reused) makes every look test the lock itself."""
    runlock.paths(results_dir)[0].parent.mkdir(parents=True)
    stop, refusals = tmp_path / "stop", []
    lookers = [subprocess.Popen([sys.executable, "-c", LOOKER, str(stop)], cwd=settings.APP_ROOT,
                                stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        assert all(looker.stdout.readline() == "looking\n" for looker in lookers)
        for i in range(60):
            if left_behind:
                (runlock.paths(results_dir)[1]).write_text(json.dumps(_info("killed")))
            try:
                runlock.release(runlock.acquire(_info(f"r{i}")))
            except runlock.BusyError as e:
                refusals.append(str(e))
    finally:
        stop.touch()
        for looker in lookers:
            looker.wait()
    assert refusals == []


def test_a_start_tried_while_a_look_tests_the_lock_succeeds(results_dir, monkeypatch):
    """The worst moment, made to happen: a start tried while a look holds its test of the lock (a
    killed run's description naming a live process makes the look test it)."""
    runlock.paths(results_dir)[0].parent.mkdir(parents=True)
    (runlock.paths(results_dir)[0]).touch()
    (runlock.paths(results_dir)[1]).write_text(json.dumps(_info("killed")))
    tried, real_flock = {}, fcntl.flock

    def start(run_id: str) -> None:
        try:
            tried["fd"] = runlock.acquire(_info(run_id))
        except runlock.BusyError as e:
            tried["refused"] = str(e)

    def flock_then_start(fd: int, operation: int) -> None:
        real_flock(fd, operation)
        if threading.current_thread() is threading.main_thread() and "thread" not in tried:
            tried["thread"] = threading.Thread(target=start, args=("new",))
            tried["thread"].start()
            tried["thread"].join(0.05)  # the look keeps its test lock meanwhile

    monkeypatch.setattr(fcntl, "flock", flock_then_start)
    assert runlock.holder() is None
    tried["thread"].join()
    assert "refused" not in tried and runlock.holder()["run_id"] == "new"
    runlock.release(tried["fd"])


@pytest.mark.parametrize("pid", ["dead", 2**80, -5, "12"])
def test_a_killed_or_forged_description_is_not_a_running_run(results_dir, pid):
    """A new run has just taken the lock and not yet said what it runs; a killed run's description is
    still there (or a forged one)."""
    runlock.paths(results_dir)[0].parent.mkdir(parents=True)
    fd = os.open(runlock.paths(results_dir)[0], os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    forged = _info("killed", pid=_dead_pid() if pid == "dead" else pid)
    (runlock.paths(results_dir)[1]).write_text(json.dumps(forged))
    assert runlock.holder() is None
    os.close(fd)
    fd = runlock.acquire(_info("next"))
    assert runlock.holder()["run_id"] == "next"
    runlock.release(fd)


def test_a_loser_waits_for_the_winner_to_say_what_it_runs(results_dir):
    """Between taking the lock and publishing its description, the winner is unnamed: the loser waits."""
    runlock.paths(results_dir)[0].parent.mkdir(parents=True)
    fd = os.open(runlock.paths(results_dir)[0], os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    late = threading.Timer(0.3, runlock.update, args=(_info("slow-to-say"),))
    late.start()
    with pytest.raises(runlock.BusyError, match=r"matmul on cpu \(run slow-to-say, since"):
        runlock.acquire(_info("loser"))
    late.join()
    runlock.release(fd)


def test_a_winner_that_never_says_what_it_runs_is_still_refused_cleanly(results_dir, monkeypatch):
    monkeypatch.setattr(runlock, "PUBLISH_WAIT_S", 0.3)
    runlock.paths(results_dir)[0].parent.mkdir(parents=True)
    fd = os.open(runlock.paths(results_dir)[0], os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    with pytest.raises(runlock.BusyError, match=r"already going on this machine \(it has not said which yet\)"):
        runlock.acquire(_info("loser"))
    os.close(fd)


@pytest.mark.parametrize("text", ["abc", "-1", "3.0", "99999999999999999999999", " "])
def test_a_lock_descriptor_that_is_not_a_number_or_not_open_is_refused_cleanly(results_dir, text):
    runlock.release(runlock.acquire(_info("r1")))  # the lock file exists
    with pytest.raises(ConfigError, match=f"^{runlock.LOCK_FD_ENV}: .*unset it"):
        runlock.adopt(text, _info("r2"))


def test_a_descriptor_open_on_another_file_never_skips_the_lock(results_dir):
    fd = runlock.acquire(_info("holder"))
    with open(os.devnull) as other:
        with pytest.raises(ConfigError, match=f"descriptor {other.fileno()} is not open on .*{runlock.LOCK_NAME}"):
            runlock.adopt(str(other.fileno()), _info("sneaky"))
    assert runlock.holder()["run_id"] == "holder"
    runlock.release(fd)


def test_a_descriptor_on_the_lock_file_that_does_not_hold_the_lock_is_told_who_does(results_dir):
    fd = runlock.acquire(_info("holder"))
    second = os.open(runlock.paths(results_dir)[0], os.O_RDONLY)
    try:
        with pytest.raises(runlock.BusyError, match=r"matmul on cpu \(run holder, since"):
            runlock.adopt(str(second), _info("sneaky"))
    finally:
        os.close(second)
    runlock.release(fd)


def test_the_descriptor_handed_down_is_adopted_and_keeps_its_description(results_dir):
    parent = _info("handed-down") | {"record": "the parent's"}
    fd = runlock.acquire(parent)
    assert runlock.adopt(str(fd), _info("handed-down")) == fd
    assert runlock.holder() == parent  # the parent's description of the same run stays
    runlock.release(fd)
    assert runlock.holder() is None


@pytest.mark.parametrize("planted", ["fifo", "huge", "list", "link to /dev/zero", "good"])
def test_planted_files_are_no_run_and_never_block_a_look(results_dir, planted):
    """A FIFO named like the description or the lock file, a huge or foreign description."""
    runlock.paths(results_dir)[0].parent.mkdir(parents=True)
    info_path = runlock.paths(results_dir)[1]
    if planted == "good":
        info_path.write_text(json.dumps(_info("with a FIFO for its lock")))
    elif planted == "fifo":
        os.mkfifo(info_path)
    elif planted == "huge":
        info_path.write_text(json.dumps(_info("big") | {"padding": "x" * runlock.INFO_MAX_BYTES}))
    elif planted == "list":
        info_path.write_text("[]")
    else:
        info_path.symlink_to("/dev/zero")
    os.mkfifo(runlock.paths(results_dir)[0])
    looked = []
    look = threading.Thread(target=lambda: looked.append(runlock.holder()), daemon=True)
    look.start()
    look.join(10)
    assert looked == [None]
