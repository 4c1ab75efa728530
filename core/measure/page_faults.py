"""Page faults a stretch of this process's work took: memory the allocator handed back to the system (glibc trims the
top of its heap and maps large blocks afresh) and touched again, each page faulting on its first touch. On a VM a
fault costs microseconds: a oneDNN convolution whose reorder buffers are mapped afresh at every call took 12.6 ms
with 2,624 faults a call on the 2-core AMD EPYC VM, and 1.9 ms with none."""
import mmap
from typing import Callable

try:
    import resource
except ImportError:  # Windows has no getrusage: its faults go uncounted
    resource = None

PAGE_BYTES = mmap.PAGESIZE


def minor_faults() -> int | None:
    """The page faults this process has taken so far that needed no disk (minor), None where Python cannot read them."""
    return None if resource is None else resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def per_call(call: Callable[[], object], calls: int) -> float | None:
    """The minor page faults of `calls` calls of `call`, per call; None where they are not counted."""
    before = minor_faults()
    for _ in range(calls):
        call()
    after = minor_faults()
    return None if before is None else (after - before) / calls
