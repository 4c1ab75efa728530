import gc
import io
import json
import os
import platform
import runpy
import signal
import subprocess
import sys

import pytest

from core import devices, experiments, settings
from core.commands import cli, info, progress
from core.store import results, runlock
from core.commands.cli import main
from tests.helpers import wait_for


def test_info_prints_a_summary_and_the_raw_fingerprint_with_json(capsys):
    assert main(["info"]) == 0
    lines = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines())
    fp = devices.fingerprint()
    assert lines["machine"].strip() == fp["machine_id"]
    assert f"{fp['cpu_logical_cores']} logical (hardware threads)" in lines["CPU"]
    assert f"torch {fp['torch']}" in lines["versions"] and f"Python {fp['python']}" in lines["versions"]
    assert lines["code"].strip().startswith(("commit ", "package "))
    first_gpu = fp["gpus"][0]["name"] if fp["gpus"] else "mps: Apple GPU" if fp["mps"] else "none: only the CPU"
    assert first_gpu in lines["GPUs"]
    assert main(["info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == fp


def test_info_names_each_gpu_and_a_dirty_checkout():
    fp = devices.fingerprint() | {"gpus": [{"device": "cuda:0", "name": "NVIDIA T4", "memory_gib": 15.0,
                                            "compute_capability": "7.5", "cuda_driver": "550.54"}]}
    text = info.info_text(fp, {"commit": "0123456789abcdef", "dirty": True})
    assert "GPUs:     cuda:0: NVIDIA T4 (15.0 GiB, compute capability 7.5, driver 550.54)" in text
    assert "code:     commit 0123456789ab with uncommitted changes" in text


def test_list_shows_every_preset_value_of_every_parameter(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(f"{name}: " in out for name in experiments.registry())
    assert main(["list", "matmul"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("matmul: Matrix multiply") and "cnn:" not in out
    assert ("    sizes: square matrix sizes (a comma-separated list of at most 64 different values, each int from 1 "
            "to 16384)\n      smoke: 16,64,200; quick: 16,32,64,128,200,256,512,1024,2048,4096; paper: ") in out
    assert "    seed: seed of the operands (int from 0 to 2147483647)\n      every preset: 0\n" in out
    assert "    variants: which variants to run" in out and "      every preset: all\n" in out
    assert "    'numpy' on cpu: numpy.matmul on the CPU" in out


def test_list_of_an_unknown_experiment_names_the_known_ones(capsys):
    assert main(["list", "nope"]) == 2
    known = ", ".join(experiments.registry())
    assert capsys.readouterr().err.strip() == f"error: experiment: 'nope' is unknown; known: {known}"


def test_bad_input_exits_non_zero_naming_the_field(capsys, results_dir):
    cases = {("run", "nope"): "experiment: 'nope' is unknown",
             ("run", "matmul", "--preset", "huge"): "preset: 'huge' is not one of",
             ("run", "matmul", "--set", "sizes=0"): "sizes: 0 is out of range; allowed:",
             ("run", "matmul", "--set", "repeats"): "--set: 'repeats' is not NAME=VALUE",
             ("run", "matmul", "--set", "bogus=1"): "bogus: unknown parameter",
             ("run", "matmul", "--device", "cuda:9"): "device: 'cuda:9' is not present",
             ("run", "matmul", "--set", "repeats=2", "--set", "repeats=3"): "repeats: given twice with --set",
             ("run", "matmul", "--set", "sizes=16,16"): "sizes: 16 is given twice; allowed:",
             ("run", "matmul", "--set", "block_seconds=nan"): "block_seconds: 'nan' is not a finite number; allowed:",
             ("run", "matmul", "--config-json", '{"repeats": 2}', "--set", "repeats=3"):
                 "repeats: given both in --config-json and with --set",
             ("run", "matmul", "--config-json", '{"repeats": 2, "repeats": 3}'): "--config-json: 'repeats' is given twice",
             ("run", "matmul", "--config-json", '{"block_seconds": NaN}'): "block_seconds: nan is not a finite number"}
    for argv, message in cases.items():
        assert main(list(argv)) == 2, argv
        assert message in capsys.readouterr().err
    assert not list(results_dir.glob("*/*.json"))


def test_run_writes_a_complete_record_measuring_a_repeated_device_once(capsys, results_dir):
    assert main(["run", "matmul", "--device", "cpu", "--device", "cpu", "--preset", "smoke", "--set", "sizes=8,16",
                 "--set", "variants=numpy"]) == 0
    out, err = capsys.readouterr()
    assert "[2/2] cpu numpy size=16: median" in out and " per product (" in out
    assert "elapsed" not in err  # not a terminal: the lines only, no progress bar
    [record] = results.load_records(results_dir)
    assert record["status"] == "complete" and [r["params"]["size"] for r in record["rows"]] == [8, 16]
    assert record["devices"] == ["cpu"]
    assert record["config"]["variants"] == ["numpy"]


def test_read_only_refuses_to_run(capsys, results_dir, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    assert main(["run", "matmul", "--preset", "smoke"]) == 2
    assert "read-only" in capsys.readouterr().err
    assert not list(results_dir.glob("*/*.json"))


def test_variants_that_leave_no_point_on_the_devices_are_an_error(capsys, results_dir):
    assert main(["run", "matmul", "--device", "cpu", "--preset", "smoke", "--set", "variants=torch resident"]) == 2
    err = capsys.readouterr().err
    assert "variants: no point to measure: cpu cannot run torch resident (it runs numpy, torch cpu)" in err
    assert not list(results_dir.glob("*/*.json"))


def test_the_checked_configuration_travels_as_json(capsys, results_dir):
    config = json.dumps({"sizes": [8, 16], "variants": ["numpy"]})
    assert main(["run", "matmul", "--device", "cpu", "--preset", "smoke", "--config-json", config]) == 0
    [record] = results.load_records(results_dir)
    assert record["config"]["sizes"] == [8, 16] and record["config"]["variants"] == ["numpy"]
    assert main(["run", "matmul", "--config-json", "{not json"]) == 2
    assert "--config-json: not JSON" in capsys.readouterr().err


class Restarted(Exception):
    """What the patched os.execve raises: the command it would have restarted with, and that command's environment."""


def _core_main(monkeypatch, experiment: str) -> None:
    """`python -m core run <experiment> --bogus-option` in this process, os.execve raising Restarted."""
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr(sys, "argv", [sys.argv[0], "run", experiment, "--bogus-option"])

    def execve(path, args, env):
        raise Restarted(args, env)
    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr(gc, "freeze", lambda: None)  # what __main__ does as it ends: not to this test's process
    runpy.run_module("core", run_name="__main__")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the malloc setting is glibc's")
def test_a_run_from_the_shell_restarts_with_the_malloc_setting_its_experiment_asks_for(monkeypatch):
    """glibc reads its malloc settings once, at start: `python -m core run jacobian` restarts itself with jacobian's
    before any work (what the run then records of its environment: test_results, test_jobs)."""
    with pytest.raises(Restarted) as restart:
        _core_main(monkeypatch, "jacobian")
    args, env = restart.value.args
    assert args[1:] == ["-m", "core", "run", "jacobian", "--bogus-option"]
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(experiments.get("jacobian").malloc_mmap_threshold) == "65536"


def test_a_run_of_an_experiment_that_asks_for_no_malloc_setting_is_not_restarted(monkeypatch):
    with pytest.raises(SystemExit):  # no restart: main() refuses the unknown option
        _core_main(monkeypatch, "matmul")


def test_argparse_errors_clip_what_they_echo(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["run", "matmul", "--bogus" + "x" * 100_000])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "unrecognized arguments" in err and len(err) < 1000


def test_a_point_line_says_what_its_time_is_per():
    row = {"status": "ok", "median": 0.264, "per_call": 2000, "unit": "epoch", "iqr": 0.0079, "n": 5,
           "noisy": False}
    assert progress.point_outcome(row) == "median 132 µs per epoch (one sample: 2,000 epochs in 264 ms; IQR 3%, n=5)"
    row |= {"median": 1.32, "per_call": 1, "iqr": None, "n": 1, "noisy": None}
    assert progress.point_outcome(row) == "median 1.32 s per epoch (one sample, n=1)"
    assert progress.point_outcome({"status": "oom", "error": "CUDA out of memory"}) == "oom: CUDA out of memory"


def test_on_a_terminal_a_progress_bar_counts_points_with_elapsed_and_time_left(capsys, results_dir, monkeypatch):
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    assert main(["run", "matmul", "--device", "cpu", "--preset", "smoke", "--set", "sizes=8,16",
                 "--set", "variants=numpy"]) == 0
    out, err = capsys.readouterr()
    assert "matmul (smoke): 2/2 |" in err and "elapsed, about" in err and "left" in err
    assert "[1/2] cpu numpy size=8: median" in out  # the lines go on, above the bar


def test_the_bar_keeps_redrawing_during_a_long_point(monkeypatch):
    """tqdm draws only when told: the bar's own thread redraws it, so its elapsed time moves on."""
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    monkeypatch.setattr(progress, "TICK_S", 0.01)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress.progress_bar("long", 2):  # no point finishes inside
        wait_for(lambda: sys.stderr.getvalue().count("long: 0/2") >= 5)


def test_cancel_stops_the_run_going_on(capsys, results_dir):
    assert main(["cancel"]) == 1
    assert capsys.readouterr().out.strip() == "no run is going on"
    process = subprocess.Popen(["sleep", "30"], start_new_session=True)  # stands in for a run's process
    info = {"run_id": "r1", "experiment": "matmul", "devices": ["cpu"], "preset": "quick", "pid": process.pid,
            "started": results.now(), "record": str(results_dir / "m" / "r1.json")}
    fd = runlock.acquire(info)
    try:
        assert main(["run", "matmul", "--device", "cpu", "--preset", "smoke"]) == 2
        assert "`python -m core cancel`" in capsys.readouterr().err
        assert main(["cancel"]) == 0
        assert capsys.readouterr().out.strip() == (
            f"cancelled run r1 (matmul, quick preset, on cpu): it stops after its current point; the 0 of ? "
            f"points it finished stay in {info['record']}")
        assert process.wait(timeout=30) == -signal.SIGTERM
    finally:
        runlock.release(fd)
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.full
def test_the_cli_and_the_test_helpers_run_without_the_report_s_and_the_app_s_libraries(results_dir):
    # What a bare GPU machine holds: torch and the core's libraries, not vl_convert (the HTML report's, 33 MB) nor
    # streamlit. A None in sys.modules makes importing it fail, as if it were not installed.
    code = ("import sys; sys.modules['vl_convert'] = sys.modules['streamlit'] = None\n"
            "import tests.helpers\n"
            "from core.commands.cli import main\n"
            "sys.exit(main(['info']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=settings.APP_ROOT)
    assert done.returncode == 0, done.stderr
    assert "torch" in done.stdout


def test_a_run_line_names_the_largest_part_or_says_why_it_has_no_split():
    row = {"census": {}, "unit": "epoch", "per_call": 1, "median": 0.01,
           "breakdown": {"adds_up": True, "host_s": 0.008, "compute_s": 0.002, "loading_s": 0.0, "copies_s": 0.0,
                         "sync_s": 0.0}}
    assert progress.inspection_text(row) == "; mostly host overhead (Python, dispatch, launches) (80%)"
    row["breakdown"]["adds_up"] = False
    assert progress.inspection_text(row) == "; no split of its time: the profiler's overhead outgrew these tiny operations"
    assert progress.inspection_text(row | {"breakdown": {}}) == ""  # not profiled: nothing said


@pytest.mark.parametrize("argv, field", [(["list", ""], "experiment"), (["import", ""], "bundle"),
                                         (["export", "-o", ""], "--output"), (["report", "-o", " "], "--output")])
def test_an_empty_name_is_refused_naming_the_field(capsys, results_dir, argv, field):
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(f"error: {field}: ")


def test_ctrl_c_outside_a_run_ends_the_command_with_a_word_not_a_traceback(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(info, "run", interrupted)
    assert cli.main(["info"]) == 130
    assert capsys.readouterr().err == "\ninterrupted\n"
