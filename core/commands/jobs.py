"""Background runs for the app: `python -m core run` in its own process, one at a time per machine,
with progress read from its record and a cancel that keeps the finished points; the doctor and a calibration
run the same way."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from core import devices, experiments, settings, versions
from core.store import files, results, runlock
from core.store.results import now
from core.store.runlock import LOCK_FD_ENV

LOGS_KEPT = 20   # the logs of this many runs stay in <results>/<machine id>/.logs/; older ones are deleted at a start

_stopping: dict[str, str] = {}   # run id -> when its cancel was asked, until its process has exited


def start(experiment: str, device_names: list[str], preset: str, overrides: dict = None) -> dict:
    """Validate, take the machine's run lock and start the run; returns the running run's info.
    Raises ReadOnlyError, ConfigError, DeviceError or BusyError before anything starts."""
    settings.require_writable("starting a run")
    exp = experiments.get(experiment)
    config = exp.config(preset, overrides)
    for d in device_names:
        devices.check(d)
    planned = len(exp.plan(config, device_names))
    run_id = results.new_run_id(experiment)
    info = {"run_id": run_id, "experiment": experiment, "devices": device_names, "preset": preset,
            "started": now(), "pid": None, "planned": planned,
            "record": str(settings.results_dir() / devices.fingerprint()["machine_id"] / f"{run_id}.json")}
    command = [sys.executable, "-m", "core", "run", exp.name, "--preset", preset, "--run-id", run_id,
               "--config-json", json.dumps(config)]
    for d in device_names:
        command += ["--device", d]
    return _started(info, command, versions.run_environment(exp.malloc_mmap_threshold))


def start_doctor(budget_s: float) -> dict:
    """`python -m core doctor` within `budget_s` on every device here, as a background job with the run's
    progress (each step's record in turn) and cancel; its bundle is DOCTOR_BUNDLE in this machine's folder."""
    settings.require_writable("checking this machine")
    return _command_job(DOCTOR, devices.available(), f"{budget_s / 60:g} min",
                        ["doctor", "--budget", f"{budget_s:g}s", "-o", str(doctor_bundle())])


def start_calibration(quick: bool = False) -> dict:
    """`python -m core calibrate` (`--quick`: rougher figures, for tests) on the CPU and every CUDA GPU here, as a
    background job under the run lock, with its probes done so far as progress (from its log) and cancel (nothing is
    saved then); its profile is this machine's."""
    settings.require_writable("calibration")
    names = [name for name in devices.available() if devices.kind(name) in ("cpu", "cuda")]
    arguments = ["calibrate", "--quick"] if quick else ["calibrate"]
    return _command_job(CALIBRATION, names, "quick" if quick else "full", arguments)


def start_model_check(source: str, input_text: str, train: bool, out: Path) -> dict:
    """A model the app wrote (`source`, a file defining build(), from a description of the Your model page: nothing a
    reader typed) timed on this machine's CPU beside its prediction, `python -m core predict --model ... --check`, as a
    background job under the run lock; its report is written to `out` (JSON), the file beside it."""
    settings.require_writable("timing your model")
    model = out.with_suffix(".py")
    files.make_folder(model.parent)
    model.write_text(source)
    arguments = ["predict", "--model", f"{model}:build", "--input", input_text, "--on", "this", "--check",
                 "--out", str(out), *(["--train"] if train else [])]
    return _command_job(MODEL_CHECK, ["cpu"], "check", arguments)


DOCTOR = "doctor"  # the job's "experiment": the doctor's steps are several
CALIBRATION = "calibration"  # the same for a calibration, whose progress is its log's probe count (not a record)
MODEL_CHECK = "your model"  # the same for a model timed from the Your model page
OWN_PAGE = {DOCTOR: "machines", CALIBRATION: "machines", MODEL_CHECK: "your_model"}  # a job's page, not an experiment's


def _command_job(kind: str, names: list[str], preset: str, arguments: list[str]) -> dict:
    """`python -m core ARGUMENTS` as a background job of `kind` (its "experiment") on the devices `names`."""
    info = {"run_id": results.new_run_id(kind), "experiment": kind, "devices": names, "preset": preset,
            "started": now(), "pid": None, "planned": 0, "record": None}
    return _started(info, [sys.executable, "-m", "core", *arguments], versions.run_environment(None))


def doctor_bundle() -> Path:
    return settings.results_dir() / devices.fingerprint()["machine_id"] / ".doctor.tar.gz"


def _started(info: dict, command: list[str], env: dict) -> dict:
    """Take the machine's run lock, start `command` holding it, and publish its pid; returns `info`."""
    fd = runlock.acquire(info)
    try:
        process = _spawn(command, info["run_id"], fd, env)
    except BaseException:
        runlock.release(fd)
        raise
    try:
        info["pid"] = process.pid
        runlock.update(info)
    finally:
        os.close(fd)  # the child holds the lock from here on
    threading.Thread(target=_reap, args=(process, info["run_id"]), name=f"reap {info['run_id']}", daemon=True).start()
    return info


def _spawn(command: list[str], run_id: str, lock_fd: int, env: dict) -> subprocess.Popen:
    """The run's process, started with SIGTERM held back: a cancel sent before it has written its
    record waits until it has (core.measure.runner lets it through then)."""
    logs = logs_dir()
    logs.mkdir(parents=True, exist_ok=True)
    env = env | {LOCK_FD_ENV: str(lock_fd), "PYTHONUNBUFFERED": "1"}
    with open(logs / f"{run_id}.log", "w") as log:
        unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # the child inherits the mask
        try:
            process = subprocess.Popen(command, cwd=settings.APP_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, pass_fds=(lock_fd,), start_new_session=True,
                                       env=env)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    _prune_logs(logs)
    return process


def logs_dir() -> Path:
    """This machine's run logs: under its own folder, like everything it writes in a shared results folder."""
    return settings.results_dir() / devices.fingerprint()["machine_id"] / ".logs"


def _prune_logs(logs: Path) -> None:
    """Keep the newest LOGS_KEPT logs."""
    found = sorted(logs.glob("*.log"), key=lambda p: p.lstat().st_mtime, reverse=True)
    for old in found[LOGS_KEPT:]:
        old.unlink(missing_ok=True)


def _reap(process: subprocess.Popen, run_id: str) -> None:
    """Wait for the run's process, so that it never lingers as a zombie under the app."""
    process.wait()
    _stopping.pop(run_id, None)


def current() -> dict | None:
    """The run going on now with its progress (done, total, standins, status) and, once a cancel was
    asked here, `stopping` (when it was asked), or None. Before the run has written its record, `total`
    is the number of points planned when the app started it (0 for a run from the shell)."""
    info = runlock.holder()
    if info is None:
        return None
    info = dict(info)
    record = progress(info.get("record"))
    if info.get("experiment") == CALIBRATION:
        record |= _probes_done(info["run_id"])
    info.update(record, total=record["total"] or info.get("planned") or 0, stopping=_stopping.get(info["run_id"]))
    return info


def progress(record_path: str | None) -> dict:
    """A run's points done and planned, the stand-in censuses taken after them and planned (None until it
    plans them), its status and when it ended (None while it runs); "no record" while (or when) it has none."""
    try:
        record = results.read_record(Path(record_path))
    except (ValueError, TypeError):
        return {"done": 0, "total": 0, "standins": 0, "standins_planned": None, "status": "no record", "ended": None}
    return {"done": len(record["rows"]), "total": record["planned_points"], "standins": len(record.get("standin", ())),
            "standins_planned": record.get("standins_planned"), "status": record["status"], "ended": record.get("ended")}


PROBES = re.compile(r"\|\s*(\d+)/(\d+) \[")  # a calibration's progress bar in its log: "| 12/66 [00:40<..."


def _probes_done(run_id: str) -> dict:
    """A calibration's probes done and planned, from the last progress bar its log shows ({} before the first)."""
    found = PROBES.findall(log_tail(run_id, 5))
    if not found:
        return {}
    done, total = map(int, found[-1])
    return {"done": done, "total": total, "status": "running"}


def cancel() -> dict | None:
    """Ask the current run to stop after its current point (its finished points stay recorded); returns
    what was asked to stop (as `current` describes it), or None when nothing was running."""
    settings.require_writable("cancelling a run")
    info = current()
    if not info or not info.get("pid"):
        return None
    pid = info["pid"]
    try:
        if os.getpgid(pid) == pid:  # our own runs lead their session: stop any workers with them
            os.killpg(pid, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    info["stopping"] = _stopping[info["run_id"]] = now()
    return info


def log_tail(run_id: str, lines: int = 20) -> str:
    path = logs_dir() / f"{run_id}.log"
    try:
        return "\n".join(path.read_text().splitlines()[-lines:])
    except OSError:
        return ""
