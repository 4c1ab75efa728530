"""Background runs for the app: `python -m core run` in its own process, one at a time per machine,
with progress read from its record and a cancel that keeps the finished points."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from core import devices, experiments, results, runlock, settings, versions
from core.results import now

LOCK_FD_ENV = "CROSSOVER_LOCK_FD"


def start(experiment: str, device_names: list[str], preset: str, overrides: dict = None) -> dict:
    """Validate, take the machine's run lock and start the run; returns the running run's info.
    Raises ReadOnlyError, ConfigError, DeviceError or BusyError before anything starts."""
    if settings.read_only():
        raise settings.ReadOnlyError()
    exp = experiments.get(experiment)
    config = exp.config(preset, overrides)
    for d in device_names:
        devices.check(d)
    exp.plan(config, device_names)
    run_id = results.new_run_id(experiment)
    info = {"run_id": run_id, "experiment": experiment, "devices": device_names, "preset": preset,
            "started": now(), "pid": None,
            "record": str(settings.results_dir() / devices.fingerprint()["machine_id"] / f"{run_id}.json")}
    fd = runlock.acquire(info)
    try:
        info["pid"] = _spawn(exp, device_names, preset, config, run_id, fd).pid
        runlock.update(info)
    finally:
        os.close(fd)  # the child holds the lock from here on
    return info


def _spawn(exp, device_names, preset, config, run_id, lock_fd) -> subprocess.Popen:
    command = [sys.executable, "-m", "core", "run", exp.name, "--preset", preset, "--run-id", run_id,
               "--config-json", json.dumps(config)]
    for d in device_names:
        command += ["--device", d]
    logs = settings.results_dir() / ".logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{run_id}.log", "w") as log:
        return subprocess.Popen(command, cwd=settings.APP_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, pass_fds=(lock_fd,), start_new_session=True,
                                env=versions.run_environment(exp.malloc_mmap_threshold) | {LOCK_FD_ENV: str(lock_fd), "PYTHONUNBUFFERED": "1"})


def current() -> dict | None:
    """The run going on now with its progress (done, total, status), or None."""
    info = runlock.holder()
    if info is None:
        return None
    info = dict(info)
    record = progress(info.get("record"))
    info.update(done=record["done"], total=record["total"], status=record["status"])
    return info


def progress(record_path: str | None) -> dict:
    try:
        record = results.read_record(Path(record_path))
    except (ValueError, TypeError):
        return {"done": 0, "total": 0, "status": "starting"}
    return {"done": len(record["rows"]), "total": record["planned_points"], "status": record["status"]}


def cancel() -> bool:
    """Stop the current run (its finished points stay recorded). False when nothing was running."""
    info = runlock.holder()
    if not info or not info.get("pid"):
        return False
    pid = info["pid"]
    try:
        if os.getpgid(pid) == pid:  # our own runs lead their session: stop any workers with them
            os.killpg(pid, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    return True


def log_tail(run_id: str, lines: int = 20) -> str:
    path = settings.results_dir() / ".logs" / f"{run_id}.log"
    try:
        return "\n".join(path.read_text().splitlines()[-lines:])
    except OSError:
        return ""
