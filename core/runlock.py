"""One run at a time per results folder: an flock held by the running process for its whole life
(so a killed run never leaves a stale lock), and a small JSON file saying what holds it."""
import fcntl
import json
import os
from pathlib import Path

from core import settings

LOCK_NAME = ".run.lock"
INFO_NAME = ".running.json"


class BusyError(RuntimeError):
    def __init__(self, info: dict):
        what = f"{info.get('experiment', '?')} on {', '.join(info.get('devices', [])) or '?'}"
        super().__init__(f"a run is already going on this machine: {what} (run {info.get('run_id', '?')}, "
                         f"since {info.get('started', '?')}); wait for it or cancel it")
        self.info = info


def _paths(results_dir: Path = None) -> tuple[Path, Path]:
    folder = results_dir or settings.results_dir()
    return folder / LOCK_NAME, folder / INFO_NAME


def acquire(info: dict, results_dir: Path = None) -> int:
    """Take the lock and publish `info`; returns the locked file descriptor (inheritable, so a child
    process can keep holding it). Raises BusyError with the holder's info."""
    lock_path, info_path = _paths(results_dir)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BusyError(holder(results_dir) or {}) from None
    info_path.write_text(json.dumps(info))
    return fd


def update(info: dict, results_dir: Path = None) -> None:
    _paths(results_dir)[1].write_text(json.dumps(info))


def holder(results_dir: Path = None) -> dict | None:
    """What holds the lock now, or None when nothing runs (also when the folder is not writable)."""
    lock_path, info_path = _paths(results_dir)
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except BlockingIOError:
        try:
            return json.loads(info_path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}
    finally:
        os.close(fd)
