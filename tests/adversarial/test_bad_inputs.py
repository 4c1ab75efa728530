"""Every bad input of bad_inputs.py is refused cleanly: exit status 2, no traceback, the field named,
a short message, a bounded allocation, no record and never the runner. In-process through
core.commands.cli.main (fast), and a few through a real `python -m core run`."""
import os
import subprocess
import sys
import tracemalloc

import pytest

from core import devices, experiments, settings
from core.measure import runner
from core.commands.cli import main
from tests.adversarial.bad_inputs import (CASES, MAX_MESSAGE_CHARS, MAX_REFUSAL_BYTES, MAX_REFUSAL_RSS_GROWTH,
                                          NON_FINITE, SUBPROCESS_BASELINE, SUBPROCESS_CASES)


def _label(case: dict) -> str:
    text = " ".join(case["argv"][1:])
    return text if len(text) <= 60 else text[:60] + "..."


@pytest.fixture(scope="module", autouse=True)
def imported_once():
    """Import every experiment and look for devices before measuring, so a case's allocations are its own."""
    experiments.registry()
    devices.available()


@pytest.fixture
def runner_refused(monkeypatch):
    def reached(*args, **kwargs):
        raise AssertionError("a bad input reached the runner")
    monkeypatch.setattr(runner, "run", reached)


def _files(folder) -> list:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def _refuse_in_process(argv: list[str]) -> tuple[int, bool, int]:
    """main(argv)'s exit status, whether argparse gave it, and the peak of Python allocations meanwhile."""
    tracemalloc.start()
    try:
        return main(argv), False, tracemalloc.get_traced_memory()[1]
    except SystemExit as e:  # argparse's own errors (a missing argument) exit 2 from parse_args
        return e.code, True, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _names_the_field(err: str, field: str, by_argparse: bool) -> bool:
    if by_argparse:
        last = err.strip().splitlines()[-1]
        return "error:" in last and field in last
    return err.startswith(f"error: {field}: ")


def test_the_list_covers_every_experiment_and_enough_cases():
    assert len(CASES) >= 60
    assert {c["argv"][1] for c in CASES if len(c["argv"]) > 1} >= set(experiments.registry())
    assert len(NON_FINITE) > 300  # 8 spellings for each number parameter (44 of them today), less those in CASES


@pytest.mark.parametrize("case", CASES + NON_FINITE, ids=_label)
def test_a_bad_input_is_refused_cleanly(case, capsys, results_dir, runner_refused):
    code, by_argparse, peak_bytes = _refuse_in_process(case["argv"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert _names_the_field(err, case["field"], by_argparse), err
    assert len(err) <= MAX_MESSAGE_CHARS, err[:200]
    assert peak_bytes <= MAX_REFUSAL_BYTES
    assert not _files(results_dir)


def _start(argv: list[str], err_path) -> subprocess.Popen:
    with open(err_path, "w") as err:
        return subprocess.Popen([sys.executable, "-m", "core", *argv], cwd=settings.APP_ROOT,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)


def _finish(process: subprocess.Popen) -> tuple[int, int]:
    """The exit status and the memory high-water mark (bytes) of this one child, from wait4's rusage."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss * 1024  # Linux reports kilobytes


@pytest.mark.full
@pytest.mark.skipif(not hasattr(os, "wait4"), reason="needs os.wait4 for one child's memory high-water mark")
def test_a_real_process_refuses_cleanly_within_the_memory_bound(results_dir, tmp_path):
    started = [(case, _start(case["argv"], tmp_path / f"err{i}"), tmp_path / f"err{i}")
               for i, case in enumerate(SUBPROCESS_CASES)]  # in parallel: each imports torch
    peaks = {}
    for case, process, err_path in started:
        code, peaks[id(case)] = _finish(process)
        err = err_path.read_text()
        assert code == 2, err
        assert "Traceback" not in err
        assert _names_the_field(err, case["field"], by_argparse=False), err
        assert len(err) <= MAX_MESSAGE_CHARS
    baseline = peaks[id(SUBPROCESS_BASELINE)]
    assert all(peak <= baseline + MAX_REFUSAL_RSS_GROWTH for peak in peaks.values()), (baseline, peaks)
    assert not _files(results_dir)
