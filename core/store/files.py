"""The store's files, written whole and read safely; the one place the store writes to disk.

Writing: `write_atomic` (JSON), `replace_atomic` and `create_atomic` (bytes) and `writing` (a stream, such as a
gzipped profiler trace) each write a temporary file beside the target (TEMP_PREFIX + its name + a random part +
TEMP_SUFFIX), sync it, then rename it into place: a reader sees the old file or the new one, never part of one.
A write that fails for the place rather than the program (a full disk, a used-up quota, a read-only mount, no
permission: WRITE_FAILURES) raises StoreError, whose message names the file, the reason and what was kept (the
previous version of the file, or nothing); the temporary file is always removed. `remove_leftovers` removes the
temporary files a killed writer left, in a machine folder and every folder the store writes inside it
(calibration/, predictions/, a run's artefacts).

Reading: `read_regular_file` reads a regular file of bounded size without following a symbolic link or blocking
on a pipe, else ValueError saying what the path is."""
import contextlib
import errno
import json
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from collections.abc import Iterator
from typing import BinaryIO

# A temporary file beside its target; one a killed writer left is removed once this old (a live write takes far less).
TEMP_PREFIX, TEMP_SUFFIX = ".", ".tmp"
LEFTOVER_AGE_S = 60
# A temporary file's name: TEMP_PREFIX, its target's name, a dot, tempfile's random letters, TEMP_SUFFIX.
_LEFTOVER = re.compile(rf"{re.escape(TEMP_PREFIX)}.+\.[a-z0-9_]+{re.escape(TEMP_SUFFIX)}")

MAX_FILE_BYTES = 50_000_000  # read_regular_file's default cap (results.MAX_RECORD_BYTES is a record's)
_FILE_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"),
               (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))

# The write failures that are the place's, not the program's: each said in words (StoreError), never a traceback.
WRITE_FAILURES = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is used up",
                  errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied"}


class StoreError(OSError):
    """A file the store could not write, for one of WRITE_FAILURES: 'could not write PATH: no space left on the
    device (ENOSPC); kept: ...'. `then` (optional) says what its caller did about it."""

    def __init__(self, path: Path, code: int, kept: str, then: str = ""):
        super().__init__(code, WRITE_FAILURES[code], str(path))
        self.path, self.kept, self.then = Path(path), kept, then

    def __str__(self) -> str:
        said = f"could not write {self.path}: {self.strerror} ({errno.errorcode[self.errno]}); kept: {self.kept}"
        return f"{said}; {self.then}" if self.then else said

    def followed_by(self, then: str) -> "StoreError":
        """The same failure, saying what came of it (the run stopped, the record closed)."""
        return StoreError(self.path, self.errno, self.kept, then)


@contextlib.contextmanager
def said(path: Path) -> Iterator[None]:
    """Turn a failure of writing `path` that is one of WRITE_FAILURES into StoreError, saying what is at `path`."""
    try:
        yield
    except StoreError:
        raise
    except OSError as e:
        if e.errno not in WRITE_FAILURES:
            raise
        kept = ("its previous version, unchanged" if os.path.lexists(path)
                else "nothing (there was no earlier version)")
        raise StoreError(path, e.errno, kept) from e


def write_atomic(path: Path, data: dict) -> None:
    """Write JSON to a temporary file beside `path`, then rename it over `path` (its folder made if need be)."""
    make_folder(path.parent)
    replace_atomic(path, json_bytes(data))


def make_folder(folder: Path) -> None:
    """Make `folder` and those above it where missing; StoreError for one of WRITE_FAILURES."""
    with said(folder):
        Path(folder).mkdir(parents=True, exist_ok=True)


def json_bytes(data: dict) -> bytes:
    return json.dumps(data, indent=1, default=jsonable).encode()


def jsonable(value):
    """json.dumps's `default`: a tuple as a list, a numpy or torch scalar as its number."""
    if isinstance(value, tuple):
        return list(value)
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def replace_atomic(path: Path, content: bytes) -> None:
    """Write `content` beside `path` (in an existing folder), then rename it over `path`: a reader sees the
    old file or the new one, never part of one. StoreError for one of WRITE_FAILURES."""
    with said(path):
        tmp = _written_beside(path, content)
        try:
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def create_atomic(path: Path, content: bytes) -> None:
    """Like replace_atomic, but only where nothing (not even a symbolic link) is at `path`, else
    FileExistsError: the file appears whole, so a process killed meanwhile never leaves an empty one."""
    with said(path):
        tmp = _written_beside(path, content)
        try:
            os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def writing(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write `path` through, in a block: a temporary file beside `path` (in an existing folder),
    synced and renamed over it when the block ends, removed when it raises; StoreError for one of WRITE_FAILURES."""
    with said(path):
        fd, tmp = _temporary(path)
        try:
            with _Sink(fd) as sink:
                yield sink
                os.fsync(fd)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def temporary_beside(path: Path) -> Path:
    """An empty temporary file beside `path` (in an existing folder), named as remove_leftovers knows them, for a
    writer outside this module to fill (torch's profiler, say); its caller removes it."""
    with said(path):
        fd, tmp = _temporary(path)
        os.close(fd)
    return tmp


def _temporary(path: Path) -> tuple[int, Path]:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{TEMP_PREFIX}{path.name}.", suffix=TEMP_SUFFIX)
    return fd, Path(tmp)


def _written_beside(path: Path, content: bytes) -> Path:
    """A temporary file beside `path` holding `content`, on disk."""
    fd, tmp = _temporary(path)
    try:
        try:
            _put(fd, content)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a hosted, read-only view may run as another user
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _put(fd: int, content: bytes) -> None:
    """Write all of `content` to the file descriptor: every byte the store writes goes through here."""
    view = memoryview(content).cast("B")
    while view:
        view = view[os.write(fd, view):]


class _Sink:
    """A write-only binary file over a descriptor whose bytes go through _put (enough for gzip.GzipFile)."""
    mode = "wb"
    name = ""

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data) -> int:
        _put(self.fd, data)
        return memoryview(data).nbytes

    def flush(self) -> None:
        pass

    def __enter__(self) -> "_Sink":
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)


def remove_leftovers(folder: Path, older_than_s: float = LEFTOVER_AGE_S) -> list[Path]:
    """Remove the temporary files of this module's writes that a killed writer left in `folder` and in each folder
    directly inside it (never through a symbolic link), older than `older_than_s` (a live write takes far less);
    returns those removed."""
    cutoff = time.time() - older_than_s
    removed = []
    for entry in [None, *entries(folder)]:
        if entry is not None and not (entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")):
            continue
        where = Path(folder) if entry is None else Path(entry.path)
        for leftover in entries(where):
            if not _LEFTOVER.fullmatch(leftover.name):
                continue
            try:
                info = leftover.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
                    os.unlink(leftover.path)
                    removed.append(Path(leftover.path))
            except OSError:  # gone already, or not ours to remove
                continue
    return removed


def entries(folder: Path) -> list[os.DirEntry]:
    """The entries of `folder`, none where it cannot be listed."""
    try:
        with os.scandir(folder) as found:
            return list(found)
    except OSError:
        return []


def read_regular_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> tuple[bytes, tuple]:
    """The bytes of `path` if it is a regular file of at most `max_bytes`, read without following a symbolic
    link or blocking on a pipe, and the file's version (device, inode, size, modification time); else
    ValueError saying what it is."""
    try:
        _require_regular(os.lstat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(fd)
            _require_regular(info.st_mode)  # it may have been swapped since it was listed
            if info.st_size > max_bytes:
                raise ValueError(_too_large(max_bytes, f"{info.st_size:,} bytes"))
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise ValueError("gone: removed while the results were loading") from None
    except OSError as e:
        raise ValueError(f"unreadable ({e})") from None
    if len(data) > max_bytes:
        raise ValueError(_too_large(max_bytes, "still growing"))
    return data, (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _require_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((kind for is_kind, kind in _FILE_KINDS if is_kind(mode)), "not a file")
        raise ValueError(f"not a regular file but {kind}, which is never followed or read")


def _too_large(max_bytes: int, size: str) -> str:
    return f"over the {max_bytes / 1e6:g} MB cap on a file the store reads: {size}"
