"""Where one sample's time goes, measured: `torch.profiler` over a short window of a workload's calls
(after `timing.run` has set it up, warmed it up and timed it), split into parts that partition one
sample's timed median. Only the laps that make samples count (`timing.observe` tells which): each lap
runs inside a profiler range `crossover.lap.<n>`, n counting the ranges in the order they open.

The parts, per sample (the counted laps' totals divided by the samples they made):
- compute: the device's own work. On a GPU, the time the device runs kernels, memsets or copies within
  the device (the union of their intervals: concurrent streams count once). On the CPU, the time spent
  in operators (the union of the profiler's `cpu_op` events, which is the sum of their self times) outside
  DataLoader fetches and copies.
- copies: host<->device transfers. On a GPU, the device's Memcpy activity while no kernel runs; on the
  CPU, pinning host memory (`aten::pin_memory`, inclusive): a CPU point has no other device, so ~0.
- sync: on a GPU, the time the host spends in a synchronising runtime call (`cuda*Synchronize`,
  `cuda*Memcpy*`) while the device is idle and no DataLoader fetch is under way: the wait beyond the
  device work counted above. On the CPU 0: nothing runs asynchronously.
- loading: the DataLoader's `enumerate(DataLoader)#...__next__` ranges, inclusive of the operators in
  them; on a GPU only while the device is idle.
- host: the rest of the timed median: Python, dispatch, kernel launches, what the profiler cannot see.

The rule that never counts the same wall time twice: device-busy time comes first (kernels, then copies
where no kernel runs), then the host-side parts only while the device is idle (loading, then sync); on
the CPU, the operators inside a DataLoader fetch or a copy count once, in loading or copies. The four
measured parts are thus disjoint in time; host is the timed median less their sum.

Reconciliation: the profiler's own overhead inflates what it measures. The parts add up when their sum
stays within TOLERANCE of the timed median; a sum over the median within it is scaled down to the
median (host 0). `profiled_s`, the profiled laps' own wall time per sample, shows the profiler's
overhead; it cannot be shorter than the unprofiled median but for noise, so one shorter by more than
TOLERANCE does not add up either (host would be that noise). When the parts do not add up, nothing is
scaled, host is 0 and `adds_up` is False: the profile could not be reconciled with the timing.
"""
import bisect
import contextlib
import gc
import gzip
import math
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from core import devices
from core.measure import timing
from core.store import files

PARTS = ("compute", "copies", "sync", "loading", "host")
LABELS = {"compute": "compute", "copies": "host-device copies", "sync": "synchronisation waits",
          "loading": "data loading", "host": "host overhead (Python, dispatch, launches)"}
TOLERANCE = 0.10  # the measured parts may exceed the timed median by this fraction and still add up
WINDOW_S = 0.3  # the profiled calls' target duration
MAX_CALLS = 20
MAX_OPERATIONS = 10_000  # the profiled calls' operations, at most (one call at least): each costs ~50 us to read back
MAX_TRACE_BYTES = 8_000_000  # a bigger trace is not kept (the operator table always is)
SUPPORTED = ("cpu", "cuda")
LAP_RANGE = "crossover.lap."
LOADER_RANGE = "enumerate(DataLoader)#"
PIN_OPS = frozenset({"aten::pin_memory", "aten::_pin_memory"})
DEVICE_WORK = frozenset({"kernel", "gpu_memset"})
RUNTIME = frozenset({"cuda_runtime", "cuda_driver"})
CUDA_RUNTIME_CALL = re.compile(r"cuda[A-Z]")  # cudaLaunchKernel, cudaMemcpyAsync, cudaStreamSynchronize...
CUDA_DRIVER_CALL = re.compile(r"cu[A-Z]")  # cuLaunchKernel, cuLaunchKernelEx...
SYNC_CALL = re.compile(r"synchronize|memcpy", re.IGNORECASE)  # the runtime calls that can block the host
# The profiler's own utility events, left out as torch.profiler's event list leaves them out.
IGNORED = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                     "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                     "aten::is_leaf", "aten::output_nr", "aten::_version"})
TABLE_COLUMNS = ("name", "device type", "calls", "self CPU (s)", "CPU total (s)", "self device (s)",
                 "device total (s)")


@dataclass(frozen=True)
class Event:
    """One profile event; times in seconds from the trace's start. `activity` is Kineto's activity type
    ("cpu_op", "user_annotation", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime"...); `launcher`
    links a device event (or a runtime call) to the host operator it was launched from, whose
    `correlation` it equals."""
    name: str
    activity: str
    device_type: str = "CPU"
    device_index: int = 0
    start: float = 0.0
    end: float = 0.0
    thread: int = 0
    correlation: int = 0
    launcher: int = 0

    @property
    def on_device(self) -> bool:
        return self.device_type != "CPU"

    @property
    def span(self) -> tuple[float, float]:
        return self.start, self.end


class LapRanges:
    """A `timing.Listener` that runs every lap inside a profiler range (`crossover.lap.<n>`) and notes
    which ranges closed as laps of a sample."""

    def __init__(self):
        self.samples = 0
        self.counted: set[str] = set()  # the range names of the laps that made samples
        self._lap_names: dict[str, str] = {}  # range name -> the lap it closed as, until its sample
        self._open: tuple[str, record_function] | None = None
        self._opened = 0

    def start(self) -> None:
        self._begin()

    def lap(self, name: str) -> None:
        closed = self.close()
        if closed:
            self._lap_names[closed] = name
        self._begin()

    def sample(self, names: tuple[str, ...]) -> None:
        self.counted.update(r for r, lap in self._lap_names.items() if lap in names)
        self._lap_names.clear()
        self.samples += 1

    def close(self) -> str | None:
        """Close the open range (the one after the last lap, say); returns its name."""
        if self._open is None:
            return None
        name, scope = self._open
        scope.__exit__(None, None, None)
        self._open = None
        return name

    def _begin(self) -> None:
        self.close()
        name = f"{LAP_RANGE}{self._opened}"
        scope = record_function(name)
        scope.__enter__()
        self._open, self._opened = (name, scope), self._opened + 1


def window_calls(workload: timing.Workload, median_s: float, operations: float | None = None) -> int:
    """How many calls to profile: about WINDOW_S of them, 1 to MAX_CALLS, and no more than MAX_OPERATIONS
    operations where a call's count is known (its census); a hooked call closes its own samples, so one."""
    if workload.hooks:
        return 1
    by_ops = MAX_CALLS if not operations else math.floor(MAX_OPERATIONS / operations)
    return max(1, min(MAX_CALLS, round(WINDOW_S / median_s), by_ops))


def take(workload: timing.Workload, device: str, median_s: float, folder: Path, stem: str,
         operations: float | None = None) -> dict:
    """Profile a few more calls of a workload `timing.run` has set up and timed (its median `median_s`; a call's
    `operations`, from its census, where known), split one sample into PARTS, and save the trace
    (`folder/<stem>.trace.json.gz`, Chrome trace JSON) and the operator table (`folder/<stem>.ops.csv`). Returns
    the parts per sample, in seconds."""
    _check(device, median_s, stem)
    accelerator = devices.is_accelerator(device)
    marks = LapRanges()
    prof = profile(activities=_activities(accelerator))
    with _native_stderr_muted():
        prof.start()
    try:
        timing.observe(workload, device, marks, calls=window_calls(workload, median_s, operations))
    finally:
        marks.close()
        with _native_stderr_muted():
            prof.stop()
    if not marks.samples:
        raise RuntimeError("breakdown: the profiled call closed no sample on its stopwatch")
    events = profile_events(prof)
    windows = _union(e.span for e in events if e.activity == "user_annotation" and e.name in marks.counted)
    index = torch.device(device).index
    counted = [e for e in events if e.name not in marks.counted and _inside(e, windows) and _on(index, e)]
    measured = split(counted, windows, accelerator)
    kernels = measured.pop("kernels")
    per_sample = {part: seconds / marks.samples for part, seconds in measured.items()}
    profiled_s = _length(windows) / marks.samples
    saved = _save(prof, counted, Path(folder), stem)
    if saved["trace"] is None:  # a trace Kineto failed to write stays open (deleted, its space held) until the
        del prof                # profile, in a reference cycle, is collected
        gc.collect()
    return reconcile(per_sample, median_s, profiled_s) | {
        "profiled_s": profiled_s, "samples": marks.samples,
        "kernels": None if kernels is None else _whole(kernels / marks.samples), **saved}


@contextlib.contextmanager
def _native_stderr_muted():
    """Kineto writes a 'profiler_start' / 'profiler_stop' line to the process's stderr at every start and
    stop, whatever its log level: silence file descriptor 2 for those two calls only."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def profile_events(prof: profile) -> list[Event]:
    """The profile's events, straight from Kineto's results: building torch's own FunctionEvent list
    takes seconds for the tens of thousands of events of an epoch's tiny operators."""
    results = prof.profiler.kineto_results
    origin = results.trace_start_ns()
    return [Event(e.name(), activity(e), e.device_type().name, e.device_index(),
                  (e.start_ns() - origin) * 1e-9, (e.end_ns() - origin) * 1e-9, e.start_thread_id(),
                  e.correlation_id(), e.linked_correlation_id())
            for e in results.events()
            if e.name() not in IGNORED and not e.is_async() and not _hidden(e)]


def activity(event) -> str:
    """Kineto's activity type of a profile event. torch 2.13 reports it; older releases (a GPU image's torch
    2.11, say) do not, and there the type follows from what the event does say: its device, whether it is a
    user annotation or a Python function, and, for the rest, its name (Memcpy/Memset on the device, CUDA's
    runtime and driver calls on the host)."""
    if hasattr(event, "activity_type"):
        return event.activity_type()
    name, on_device = event.name(), event.device_type().name != "CPU"
    if getattr(event, "is_user_annotation", lambda: False)():
        return "gpu_user_annotation" if on_device else "user_annotation"
    if on_device:
        return "gpu_memcpy" if name.startswith("Memcpy") else "gpu_memset" if name.startswith("Memset") else "kernel"
    if getattr(event, "is_python_function", lambda: False)():
        return "python_function"
    return "cuda_runtime" if CUDA_RUNTIME_CALL.match(name) else "cuda_driver" if CUDA_DRIVER_CALL.match(name) \
        else "cpu_op"


def split(events: list[Event], windows: list[tuple[float, float]], accelerator: bool) -> dict:
    """The measured parts' seconds over `events` (those of the counted laps) within `windows` (the
    counted laps' intervals), by the module's rule, and the device kernels counted (None on the CPU)."""
    host = [e for e in events if not e.on_device]
    loader = _within(_union(e.span for e in host if e.name.startswith(LOADER_RANGE)), windows)
    if accelerator:
        return _device_parts(events, host, loader, windows)
    pins = _within(_union(e.span for e in host if e.name in PIN_OPS), windows)
    operators = _within(_union(e.span for e in host if e.activity == "cpu_op"), windows)
    apart = _union(loader + pins)  # the operators in here are loading or copies, not compute
    return {"compute": _length(operators) - _overlap(operators, apart),
            "copies": _length(pins) - _overlap(pins, loader), "sync": 0.0, "loading": _length(loader),
            "kernels": None}


def _device_parts(events: list[Event], host: list[Event], loader: list, windows: list) -> dict:
    device = [e for e in events if e.on_device]
    work = _within(_union(e.span for e in device if e.activity in DEVICE_WORK or _local_copy(e)), windows)
    transfers = _within(_union(e.span for e in device if e.activity == "gpu_memcpy" and not _local_copy(e)),
                        windows)
    busy = _union(work + transfers)
    syncs = _within(_union(e.span for e in host if e.activity in RUNTIME and SYNC_CALL.search(e.name)), windows)
    return {"compute": _length(work), "copies": _length(busy) - _length(work),
            "sync": _length(syncs) - _overlap(syncs, _union(busy + loader)),
            "loading": _length(loader) - _overlap(loader, busy),
            "kernels": sum(1 for e in device if e.activity == "kernel")}


def reconcile(measured: dict, median_s: float, profiled_s: float) -> dict:
    """The parts per sample with host, the rest of the median; scaled down to the median when they
    overshoot it within TOLERANCE. Not adding up (parts as measured, host 0): parts beyond it, or a
    profiled window shorter than the median by more than it (host would be the noise between the two)."""
    total = sum(measured.values())
    adds_up = total <= median_s * (1 + TOLERANCE) and profiled_s >= median_s * (1 - TOLERANCE)
    scale = median_s / total if adds_up and total > median_s else 1.0
    parts = {f"{part}_s": seconds * scale for part, seconds in measured.items()}
    host = median_s - total * scale if adds_up else 0.0
    return parts | {"host_s": max(host, 0.0), "median_s": median_s, "tolerance": TOLERANCE, "adds_up": adds_up}


def operator_table(events: list[Event]) -> pd.DataFrame:
    """Totals over the profiled samples by name, as the profiler's key_averages reports them: a host
    event's self time leaves out the events nested in it on its thread; a host operator's device time
    is that of the device work it launched, itself (self) or with what its nested operators launched."""
    host = [e for e in events if not e.on_device]
    parents = _parents(host)
    cpu_total = [e.end - e.start for e in host]
    self_cpu, self_device, device_total = list(cpu_total), [0.0] * len(host), [0.0] * len(host)
    for i, parent in enumerate(parents):
        if parent is not None:
            self_cpu[parent] -= cpu_total[i]
    launchers = {e.correlation: i for i, e in enumerate(host) if e.correlation and not e.launcher}
    device = [e for e in events if e.on_device]
    for e in device:
        i = launchers.get(e.launcher)
        if i is not None:
            self_device[i] += e.end - e.start
        while i is not None:
            device_total[i] += e.end - e.start
            i = parents[i]
    device_time = [e.end - e.start for e in device]
    rows = pd.DataFrame({
        "name": [e.name for e in host + device], "device type": [e.device_type for e in host + device],
        "self CPU (s)": self_cpu + [0.0] * len(device), "CPU total (s)": cpu_total + [0.0] * len(device),
        "self device (s)": self_device + device_time, "device total (s)": device_total + device_time})
    table = rows.groupby(["name", "device type"], as_index=False).agg(
        calls=("name", "size"), **{column: (column, "sum") for column in TABLE_COLUMNS[3:]})
    return table[list(TABLE_COLUMNS)].sort_values(["self device (s)", "self CPU (s)"], ascending=False)


def _parents(host: list[Event]) -> list[int | None]:
    """Each host event's parent (an index into `host`): the innermost event on its thread enclosing it."""
    parents: list[int | None] = [None] * len(host)
    stacks: dict[int, list[int]] = {}
    for i in sorted(range(len(host)), key=lambda i: (host[i].start, -host[i].end)):
        stack = stacks.setdefault(host[i].thread, [])
        while stack and host[stack[-1]].end <= host[i].start:
            stack.pop()
        parents[i] = stack[-1] if stack else None
        stack.append(i)
    return parents


def _save(prof: profile, counted: list[Event], folder: Path, stem: str) -> dict:
    """Write the trace and the operator table, each through a temporary file renamed into place
    (core.store.files: a full disk never leaves a cut-off one); their names relative to `folder`'s parent. One that
    cannot be written is left out, with why (`trace_note`, `table_note`): the measurement stands without it. The
    trace is gzipped by blocks: export_chrome_trace's own .gz path compresses line by line, seconds per trace."""
    trace, table = (folder / f"{stem}{ext}" for ext in (".trace.json.gz", ".ops.csv"))
    saved = {"trace": f"{folder.name}/{trace.name}", "table": f"{folder.name}/{table.name}"}
    try:  # the small table first: the trace's raw export may take the last of the space
        files.make_folder(folder)
        files.replace_atomic(table, operator_table(counted).to_csv(index=False).encode())
    except files.StoreError as e:
        saved |= {"table": None, "table_note": f"the operator table was not kept: {e}"}
    try:
        size = _write_trace(prof, trace)
    except (files.StoreError, _CutOff) as e:
        saved |= {"trace": None, "trace_note": f"the trace was not kept: {e}"}
    else:
        if size > MAX_TRACE_BYTES:  # a whole fit of small batches runs to tens of MB: keep the folder small
            trace.unlink()
            saved |= {"trace": None, "trace_note": f"the trace ({size / 1e6:.0f} MB gzipped) was over the "
                                                   f"{MAX_TRACE_BYTES / 1e6:.0f} MB kept per point"}
    return saved


class _CutOff(Exception):
    """torch's profiler left its trace cut off (it does not say when a write fails)."""


def _write_trace(prof: profile, trace: Path) -> int:
    """Export the profile's Chrome trace to a temporary file, gzip it into `trace`; its size in bytes."""
    raw = files.temporary_beside(trace.with_suffix(""))  # hidden, and swept as a leftover if this process is killed
    kinetos = raw.with_name(f"{raw.name}.tmp")  # Kineto writes there, then renames it over `raw` (not when it failed)
    try:
        with _native_stderr_muted():  # a failed write is a "Failed to write to log file!" line: said in the row instead
            prof.export_chrome_trace(str(raw))
        if not _ends_whole(raw):
            raise _CutOff("torch's profiler could not write it whole (is the disk full?)")
        with (files.writing(trace) as out, open(raw, "rb") as source,
              gzip.GzipFile(filename="", mode="wb", compresslevel=3, fileobj=out) as target):
            shutil.copyfileobj(source, target, 1 << 20)
    finally:
        raw.unlink(missing_ok=True)
        kinetos.unlink(missing_ok=True)
    return trace.stat().st_size


def _ends_whole(raw: Path) -> bool:
    """Whether a Chrome trace file ends as a JSON object does: a write cut short by a full disk does not."""
    with open(raw, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 64))
        return f.read().rstrip().endswith(b"}")


def _check(device: str, median_s: float, stem: str) -> None:
    try:
        kind = devices.kind(device)
    except (RuntimeError, TypeError):
        kind = None
    if kind not in SUPPORTED:
        raise ValueError(f"device: '{device}' cannot be profiled; allowed: 'cpu' and 'cuda:N' "
                         f"(torch.profiler reports no device activity for other kinds)")
    if isinstance(median_s, bool) or not isinstance(median_s, (int, float)) or not (
            math.isfinite(median_s) and median_s > 0):
        raise ValueError(f"median_s: {median_s!r} is not a positive number of seconds")
    if not isinstance(stem, str) or not stem or Path(stem).name != stem or stem.startswith("."):
        raise ValueError(f"stem: {stem!r} must be a plain file name (no folder, not hidden)")


def _activities(accelerator: bool) -> list[ProfilerActivity]:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if accelerator else [])


def _hidden(event) -> bool:
    return getattr(event, "is_hidden_event", lambda: False)()


def _on(index: int | None, event: Event) -> bool:
    """Host events always; device events only on the point's device `index` (any, for a bare 'cuda')."""
    return not event.on_device or index is None or event.device_index == index


def _local_copy(event: Event) -> bool:
    return event.activity == "gpu_memcpy" and "DtoD" in event.name


def _whole(count: float) -> int | float:
    return int(count) if count == int(count) else count


# Interval arithmetic over sorted, disjoint (start, end) lists.

def _union(spans) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _within(a: list, b: list) -> list[tuple[float, float]]:
    """The intersection of two unions."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _overlap(a: list, b: list) -> float:
    return _length(_within(a, b))


def _length(intervals: list) -> float:
    return sum(end - start for start, end in intervals)


def _inside(event: Event, union: list) -> bool:
    """Whether the event's midpoint lies in one of `union`'s intervals."""
    middle = (event.start + event.end) / 2
    i = bisect.bisect_right(union, (middle, math.inf)) - 1
    return i >= 0 and union[i][0] <= middle <= union[i][1]
