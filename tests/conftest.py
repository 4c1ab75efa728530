import time

import psutil
import pytest
import torch

from core import settings

FULL_TIER = "full"


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="run the full tier too (tests marked `full`: browser, subprocess races, real calibrations, "
                          "the shipped results, kill -9): what CI runs")


def pytest_collection_modifyitems(config, items):
    """Without --full (or a -m of the caller's own), the tests marked `full` are deselected, and the summary
    says how many, so the default tier stays a two-minute run and nothing is skipped silently."""
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(FULL_TIER)
    if config.getoption("--full") or config.getoption("markexpr"):
        return
    kept = [item for item in items if not item.get_closest_marker(FULL_TIER)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker(FULL_TIER)])
        config.stash[_LEFT_OUT] = len(items) - len(kept)
        items[:] = kept


_LEFT_OUT = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter, config):
    left_out = config.stash.get(_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(f"default tier: {left_out} tests of the full tier not run (python -m pytest --full "
                                    "runs every test)")


@pytest.fixture(autouse=True)
def results_dir(tmp_path, monkeypatch):
    """Every test writes to its own results folder, never to the shipped results/."""
    folder = tmp_path / "results"
    monkeypatch.setenv(settings.RESULTS_ENV, str(folder))
    monkeypatch.delenv(settings.READ_ONLY_ENV, raising=False)
    return folder


@pytest.fixture(scope="session")
def shipped_state_at_start() -> dict[str, tuple[int, int]]:
    return _shipped_state()


@pytest.fixture(autouse=True)
def shipped_results_untouched(shipped_state_at_start):
    """A test that points the app back at the shipped results (monkeypatch.undo() undoes `results_dir` too)
    must not write there: each shipped record, profile and saved prediction is as it was when the session began
    (read once, not around every test: a test that changes them fails, and so does every test after it)."""
    yield
    assert _shipped_state() == shipped_state_at_start, "the test changed the shipped results/"


SHIPPED_RESULTS = settings.APP_ROOT / "results"  # taken once: some tests move APP_ROOT to a checkout of their own


def _shipped_state() -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for pattern in ("*/*.json", "*/*/*.json")
            for p in SHIPPED_RESULTS.glob(pattern)}


RUN_EXIT_SECONDS = 60  # how long a run a test started may take to finish exiting after the test


@pytest.fixture(autouse=True)
def no_run_outlives_its_test():
    """A run a test started (`python -m core ...` in a process of its own) has exited before the next test:
    one still shutting down competes for a small machine's cores with what the next test measures (a quick
    calibration read a Conv1d's call at 8 ms instead of 7 us). One that does not exit is killed, and the test
    that left it fails."""
    before = {p.pid for p in _runs()}
    yield
    deadline = time.monotonic() + RUN_EXIT_SECONDS
    while (left := [p for p in _runs() if p.pid not in before]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for process in left:
        process.kill()
    assert not left, f"runs still going after the test, killed: {[p.pid for p in left]}"


def _runs() -> list[psutil.Process]:
    """This process's descendants running `python -m core` and not yet exited."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and process.cmdline()[1:3] == ["-m", "core"]:
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.fixture
def shipped_results(monkeypatch):
    """Point the app at the results shipped in the repository (read them, never run into them)."""
    monkeypatch.setenv(settings.RESULTS_ENV, str(settings.APP_ROOT / "results"))
    return settings.APP_ROOT / "results"


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models on a busy 2-core machine: two OpenMP threads can stall each other badly."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def quick_profile() -> dict:
    """One quick calibration of this machine's CPU for the whole session, shared by the workers of `pytest -n` (no
    results file written): tests read it, or save a copy of it."""
    from core.calibration import calibrate
    from tests.helpers import once
    return once("quick_profile", lambda: calibrate.take(["cpu"], quick=True, progress=False))
