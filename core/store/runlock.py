"""One run at a time per machine: an flock held by the running process for its whole life (so a killed
run never leaves a stale lock), and a small JSON file saying what holds it. Both live in the machine's own
folder of the results folder, so machines sharing one results folder (a network mount) never block each
other, and each writes only under its own machine id.

The description (`.running.json`) is written atomically by the lock's holder right after it takes the
lock, and removed before the lock is let go; a run is visible (`holder`) only while both hold. Looking
never takes the exclusive lock, so it can never make a start fail.

Another machine's run, seen through a shared folder: its description names a process of that machine, which
cannot be checked from here, so only the lock says whether it runs. Where the mount honours flock across
hosts (NFSv4, for one), that is exact; where it does not, the other machine's run reads as interrupted until
its record says how it ended."""
import fcntl
import json
import os
import stat
import time
from pathlib import Path

from core import devices, settings
from core.store import files
from core.params import ConfigError, clip

LOCK_NAME = ".run.lock"
INFO_NAME = ".running.json"
LOCK_FD_ENV = "CROSSOVER_LOCK_FD"  # set only by core.commands.jobs for the run it starts: the lock, already taken
RETRY_S = 0.2                # a failed try is retried this long: a look (microseconds) may be in the way
PUBLISH_WAIT_S = 2.0         # a loser waits this long for the winner to say what it runs
INFO_MAX_BYTES = 64 * 1024   # a description is a few hundred bytes: anything larger is not one
_PAUSE_S = 0.01


class BusyError(RuntimeError):
    def __init__(self, info: dict | None):
        if info:
            what = (f": {info.get('experiment')} on {', '.join(info.get('devices') or ())} "
                    f"(run {info.get('run_id')}, since {info.get('started')})")
        else:
            what = " (it has not said which yet)"
        super().__init__(f"a run is already going on this machine{what}; wait for it, or cancel it (the Cancel "
                         "button, or `python -m core cancel`)")
        self.info = info


def paths(results_dir: Path = None, machine_id: str = None) -> tuple[Path, Path]:
    """The lock and its description: in the folder of `machine_id` (default: this machine) of the results folder."""
    folder = (results_dir or settings.results_dir()) / (machine_id or devices.fingerprint()["machine_id"])
    return folder / LOCK_NAME, folder / INFO_NAME


def acquire(info: dict, results_dir: Path = None) -> int:
    """Take the lock and publish `info`; returns the locked file descriptor (inheritable, so a child
    process can keep holding it; give it back with `release`). Raises BusyError naming the holder."""
    settings.require_writable("taking the run lock")
    lock_path, info_path = paths(results_dir)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _lock_or_wait(fd, info_path)
        _publish(info_path, info)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lock_or_wait(fd: int, info_path: Path) -> None:
    """Lock `fd`, or raise BusyError once the holder is known (or PUBLISH_WAIT_S passed)."""
    started = time.monotonic()
    while not _try_lock(fd):
        waited = time.monotonic() - started
        found = _published(info_path) if waited > RETRY_S else None
        if found or waited > PUBLISH_WAIT_S:
            raise BusyError(found)
        time.sleep(_PAUSE_S)


def adopt(text: str, info: dict, results_dir: Path = None) -> int:
    """The lock descriptor a parent handed down in CROSSOVER_LOCK_FD (`text`): accepted only when it is
    open on this folder's lock file and holds the lock (so a value copied from elsewhere never skips
    it); publishes `info` unless the parent already did. Raises ConfigError or BusyError."""
    settings.require_writable("taking the run lock")
    lock_path, info_path = paths(results_dir)
    if not text.strip().isdigit():
        raise ConfigError(LOCK_FD_ENV, f"{clip(text)!r} is not a file descriptor number; it is set only by "
                                       f"the app for the run it starts: unset it")
    fd = int(text)
    try:
        same = os.path.samestat(os.fstat(fd), os.stat(lock_path))
    except (OSError, OverflowError):
        same = False
    if not same:
        raise ConfigError(LOCK_FD_ENV, f"descriptor {fd} is not open on {lock_path}; it is set only by the "
                                       f"app for the run it starts: unset it")
    _lock_or_wait(fd, info_path)
    if (_read(info_path) or {}).get("run_id") != info.get("run_id"):
        _publish(info_path, info)
    return fd


def update(info: dict, results_dir: Path = None) -> None:
    """Publish new details of the run that holds the lock (call it only while holding it)."""
    settings.require_writable("updating the running run's details")
    _publish(paths(results_dir)[1], info)


def release(fd: int, results_dir: Path = None) -> None:
    """End of a run: its description goes first, then the lock (so nothing finished is ever shown)."""
    paths(results_dir)[1].unlink(missing_ok=True)
    os.close(fd)


def holder(results_dir: Path = None, machine_id: str = None) -> dict | None:
    """What holds the lock of `machine_id` (default: this machine) now, or None when nothing runs there (also
    when the folder cannot be read). Reads the published description; only when one is there does it check,
    with a shared lock that is let go at once, that the lock is really held (a killed run leaves its
    description behind)."""
    here = devices.fingerprint()["machine_id"]
    lock_path, info_path = paths(results_dir, machine_id or here)
    info = _published(info_path, local=machine_id in (None, here))
    if info is None:
        return None
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NONBLOCK)  # never waits, whatever the file is
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None  # nobody holds it: the description is a killed run's
    except BlockingIOError:
        return info
    finally:
        os.close(fd)  # closing lets go of the shared lock, if taken


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _published(info_path: Path, local: bool = True) -> dict | None:
    """The description, if there is one and the process it names is alive (or not started yet); the process
    of another machine (`local` false) cannot be checked from here."""
    info = _read(info_path)
    if info is None or not isinstance(info.get("run_id"), str):
        return None
    pid = info.get("pid")
    if pid is None or not local:
        return info  # the app is starting its run's process
    return info if isinstance(pid, int) and pid > 0 and _alive(pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _read(info_path: Path) -> dict | None:
    """The description as a dict, or None: missing, not a regular file (a FIFO would block a reader for
    ever), over INFO_MAX_BYTES, or not a JSON object."""
    try:
        fd = os.open(info_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(INFO_MAX_BYTES + 1)
    try:
        info = json.loads(data) if len(data) <= INFO_MAX_BYTES else None
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def _publish(info_path: Path, info: dict) -> None:
    """Write the description atomically (core.store.files): a reader sees all or none."""
    files.replace_atomic(info_path, json.dumps(info).encode())
