"""glibc's heap as this process sees it. glibc serves an allocation from a block it holds when one is free and large
enough; otherwise, if the allocation is at least its mmap threshold, it maps one afresh and unmaps it when freed. The
threshold is MALLOC_MMAP_THRESHOLD_ when the environment sets it, else a dynamic one that starts at 128 KiB and
follows the mapped blocks freed up to GLIBC_MMAP_MAX, so that in a long loop only what exceeds that ceiling is mapped
on every call. `mapping_from` sets the threshold for a while (mallopt); `mmap_threshold` says which is in effect."""
import contextlib
import ctypes
import functools
import os

from core import versions

GLIBC_MMAP_MAX = 32 * 2**20  # glibc's dynamic threshold's ceiling: it maps an allocation this large in any process
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters
_set: list[int] = []  # the thresholds mapping_from has set, innermost last


def mmap_threshold(env: dict = os.environ) -> int | None:
    """The bytes from which glibc maps an allocation it cannot serve from a freed block, in a long loop: what
    mapping_from set, else MALLOC_MMAP_THRESHOLD_ when the environment sets it, else GLIBC_MMAP_MAX; None off glibc."""
    if not versions.GLIBC:
        return None
    value = env.get(versions.MALLOC_ENV, "")
    return _set[-1] if _set else int(value) if value.isdigit() else GLIBC_MMAP_MAX


@contextlib.contextmanager
def mapping_from(threshold: int):
    """glibc maps every allocation of at least `threshold` bytes it cannot serve from a freed block, for a while;
    then from GLIBC_MMAP_MAX, keeping freed blocks up to twice that: where its dynamic threshold settles (setting a
    threshold ends it). Nothing off glibc."""
    if not versions.GLIBC:
        yield
        return
    libc = _libc()
    libc.mallopt(M_MMAP_THRESHOLD, threshold)
    _set.append(threshold)
    try:
        yield
    finally:
        _set.pop()
        libc.mallopt(M_MMAP_THRESHOLD, _set[-1] if _set else GLIBC_MMAP_MAX)
        if not _set:
            libc.mallopt(M_TRIM_THRESHOLD, 2 * GLIBC_MMAP_MAX)


@functools.cache
def _libc():
    return ctypes.CDLL(None)
