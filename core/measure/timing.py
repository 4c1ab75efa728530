"""Timing that respects asynchronous devices, done one way for every experiment: an experiment
describes a `Workload` (the call to time and what one call is), `run` times it (synchronise before
every clock read, warm-up excluded, repeats, raw samples) and returns a `Measurement`."""
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np
import torch
import torch.utils.benchmark as benchmark

from core import devices

NOISY_SPREAD = 0.10  # IQR / median above this flags a measurement as noisy
MIN_SAMPLES = 5      # a point timed to a precision takes at least this many samples
MAX_SAMPLES = 40     # and at most this many
EXTRA_TIME = 2.0     # samples beyond the first ones may take this many times as long as those did (without a budget)


@dataclass(frozen=True)
class Measurement:
    """Raw samples (seconds per call) and their summary. `warmup` holds the untimed-for-the-median
    warm-up calls' times; `cold` says the samples include the first call (no warm-up ran)."""
    samples: tuple[float, ...]
    warmup: tuple[float, ...] = ()
    cold: bool = False
    stopped: str = ""   # why sampling stopped, where it was timed to a precision

    @property
    def median_interval(self) -> tuple[float, float] | None:
        """The median's 95% confidence interval, distribution-free (scipy.stats.quantile_test's, from the order
        statistics); None while the samples are too few to bound it (under six)."""
        if len(self.samples) < 2:
            return None
        from scipy import stats  # imported here: 0.3 s of every command's start otherwise
        found = stats.quantile_test(np.asarray(self.samples), q=self.median, p=0.5).confidence_interval(0.95)
        return None if np.isnan(found.low) or np.isnan(found.high) else (float(found.low), float(found.high))

    @property
    def half_width(self) -> float | None:
        """Half the median's interval over the median (0.05: within 5%); None while it is unbounded."""
        found = self.median_interval
        return None if found is None or self.median <= 0 else (found[1] - found[0]) / 2 / self.median

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def iqr(self) -> float | None:
        found = quartiles(self.samples)
        return None if found is None else found[1] - found[0]

    @property
    def noisy(self) -> bool | None:
        """IQR / median over NOISY_SPREAD; None (unknown, never "quiet") with a single sample."""
        return None if self.iqr is None else is_noisy(self.iqr, self.median)

    def to_dict(self) -> dict:
        found = {"samples": list(self.samples), "median": self.median, "iqr": self.iqr, "noisy": self.noisy,
                 "n": self.n, "warmup_samples": list(self.warmup), "cold": self.cold}
        return found | ({"stopped": self.stopped, "half_width": self.half_width} if self.stopped else {})


def is_noisy(iqr: float, median: float) -> bool:
    """IQR / median over NOISY_SPREAD."""
    return median > 0 and iqr / median > NOISY_SPREAD


def quartiles(samples) -> tuple[float, float] | None:
    """The lower and upper quartiles of `samples` (None for fewer than two): the IQR's ends, which a skewed
    sample (one slow call among fast ones) puts anywhere but evenly about the median."""
    if len(samples) < 2:
        return None
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, q3


@dataclass
class Workload:
    """One point's work, as an experiment declares it; `run` times it, the experiment never reads a clock.

    `call` is timed; one call holds `per_call` units, each a `unit` (a singular noun: "epoch", "product").
    `setup` runs first, untimed. Calls shorter than a millisecond or so set `block_seconds`: each sample
    is then the mean of a block of calls that long (torch.utils.benchmark). `budget_s` caps the time
    spent in calls: fewer repeats when calls are long, and a single cold call when even the warm-up
    would overrun it. `prewarmed` says the experiment already warmed the call up (a probe), so samples
    taken with no warm-up of their own are not `cold`. With `hooks`, the call receives a `Stopwatch`,
    marks laps at its own hooks (a library's callbacks) and closes the samples. `finish` turns the measurement into metrics
    (untimed: losses, correctness); `metrics` are known before timing. On a GPU the call runs in FP32 with cuDNN's
    algorithm search off unless `tf32` or `cudnn_benchmark` say otherwise (a tuned variant that says so). `untraced` says why the call's
    work is invisible to PyTorch's dispatcher and profiler (numpy), so no census or profile is taken."""
    call: Callable
    unit: str
    per_call: int = 1
    repeats: int = 5
    warmup: int = 1
    setup: Callable[[], object] | None = None
    block_seconds: float | None = None
    budget_s: float | None = None
    prewarmed: bool = False
    hooks: bool = False
    threads: int | None = None
    precision: float | None = None
    tf32: bool = False
    cudnn_benchmark: bool = False
    finish: Callable[[Measurement], dict] | None = None
    metrics: dict = field(default_factory=dict)
    untraced: str | None = None




def clock(device: str, sync: Callable[[str], None] = None) -> Callable[[], float]:
    """A clock that first waits for the device to finish its queued work."""
    sync = sync or devices.synchronize

    def read() -> float:
        sync(device)
        return time.perf_counter()
    return read


class Listener(Protocol):
    """What watches a workload's calls beside the clock (the census, the profiler): told when the first
    lap opens, when each lap closes (after the device synchronised) and which laps made a sample."""

    def start(self) -> None: ...

    def lap(self, name: str) -> None: ...

    def sample(self, names: tuple[str, ...]) -> None: ...


class Stopwatch:
    """Laps read at a call's own hooks, on a device-synchronised clock: `start` opens a lap, `lap`
    closes it under a name, `close_sample` makes one sample of the laps since the last one. A
    `listener` is told of each of these, right after the clock read."""

    def __init__(self, device: str, sync: Callable[[str], None] = None, listener: Listener = None):
        self.read = clock(device, sync)
        self.listener = listener
        self.laps: list[tuple[str, float]] = []
        self.samples: list[float] = []
        self._mark = None
        self._sampled = 0

    def start(self) -> None:
        self._mark = self.read()
        if self.listener:
            self.listener.start()

    def lap(self, name: str) -> float:
        """Close the lap opened by the last `start` or `lap` and open the next; returns its seconds."""
        now = self.read()
        if self.listener:
            self.listener.lap(name)
        seconds = now - self._mark
        self.laps.append((name, seconds))
        self._mark = now
        return seconds

    def close_sample(self, *names: str) -> float:
        """One sample: the seconds of the laps named `names` since the previous sample."""
        seconds = sum(s for n, s in self.laps[self._sampled:] if n in names)
        self.samples.append(seconds)
        self._sampled = len(self.laps)
        if self.listener:
            self.listener.sample(names)
        return seconds

    def total(self, name: str) -> float:
        return sum(s for n, s in self.laps if n == name)


@contextmanager
def intra_op_threads(threads: int | None):
    """Run with `threads` torch intra-op threads (None or 0 leaves them alone), then restore."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def precision_flags(workload: Workload) -> dict:
    """What a GPU row records of its precision: TF32 in matmuls and in cuDNN, and cuDNN's benchmark mode."""
    return {"tf32_matmul": workload.tf32, "tf32_cudnn": workload.tf32, "cudnn_benchmark": workload.cudnn_benchmark}


@contextmanager
def precision(workload: Workload):
    """Run with TF32 (matmul and cuDNN) and cuDNN's benchmark mode as the workload says, then restore: cuDNN
    allows TF32 by default, which would compare a GPU's TF32 with a CPU's FP32."""
    flags = (torch.backends.cuda.matmul, "allow_tf32"), (torch.backends.cudnn, "allow_tf32"), (torch.backends.cudnn, "benchmark")
    before = [getattr(owner, name) for owner, name in flags]
    for (owner, name), value in zip(flags, (workload.tf32, workload.tf32, workload.cudnn_benchmark)):
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name), value in zip(flags, before):
            setattr(owner, name, value)


def run(workload: Workload, device: str, sync: Callable[[str], None] = None) -> Measurement:
    """Time a workload on a device, its way (blocks, hooks or one call per sample)."""
    if workload.hooks:
        with intra_op_threads(workload.threads), precision(workload):
            if workload.setup:
                workload.setup()
            return _hooked(workload, device, sync)
    sampler = Sampler.of(workload, device, sync)
    while sampler.wanted():
        sampler.take()
    return sampler.measurement()


def measure(fn: Callable[[], object], device: str, *, repeats: int = 5, warmup: int = 1,
            budget_s: float = None, prewarmed: bool = False, sync: Callable[[str], None] = None,
            precision: float = None) -> Measurement:
    """One call per sample, after `warmup` calls (timed and kept apart): a Sampler run alone."""
    return run(Workload(fn, "call", repeats=repeats, warmup=warmup, budget_s=budget_s, prewarmed=prewarmed,
                        precision=precision), device, sync)


def micro(fn: Callable[[], object], device: str, *, repeats: int = 5, block_seconds: float = 0.05,
          sync: Callable[[str], None] = None, precision: float = None) -> Measurement:
    """Microsecond-scale calls timed in blocks (torch.utils.benchmark): a Sampler run alone."""
    return run(Workload(fn, "call", repeats=repeats, block_seconds=block_seconds, precision=precision), device, sync)


class Sampler:
    """A plain or blocked workload's samples, taken one at a time (`take`, while `wanted`), so that the samples of
    several workloads can alternate (core.measure.runner interleaves the CPU's and the GPU's points of one
    configuration, and the CPU's thread settings: ABAB..., so that a drift of the machine's speed falls on every
    side alike). Each call runs at the workload's threads and precision.

    One call per sample after `warmup` calls (timed and kept apart), or with `block_seconds` each sample the mean of
    a block of calls that long (torch.utils.benchmark.Timer, sized by one call). Within `budget_s`, no sample is
    taken that would overrun it; a warm-up call that leaves no room for one is the measurement itself (`cold`).
    Samples with no warm-up before them are cold unless `prewarmed`. With `precision`, at least MIN_SAMPLES are taken
    and more until the median's 95% interval is within that share of it, the budget (or, without one, EXTRA_TIME
    times the first samples' time) would be overrun, or MAX_SAMPLES are taken: `stopped` says which."""

    def __init__(self, workload: Workload, device: str, sync: Callable[[str], None] = None):
        self.workload, self.read = workload, clock(device, sync)
        self.minimum = max(workload.repeats, MIN_SAMPLES if workload.precision else 0)
        self.samples: list[float] = []
        self.stopped, self.done, self.extra_left = "", False, None
        self.number = 1

    @classmethod
    def of(cls, workload: Workload, device: str, sync: Callable[[str], None] = None) -> "Sampler":
        """A sampler with the workload set up and warmed up."""
        sampler = cls(workload, device, sync)
        with sampler.running():
            if workload.setup:
                workload.setup()
            sampler._warm_up()
        return sampler

    @contextmanager
    def running(self):
        with intra_op_threads(self.workload.threads), precision(self.workload):
            yield

    def _warm_up(self) -> None:
        w = self.workload
        if w.block_seconds:
            self.timer = benchmark.Timer(stmt="fn()", globals={"fn": w.call}, timer=self.read,
                                         num_threads=torch.get_num_threads())  # Timer's own default is 1
            first = self.timer.timeit(1).mean  # Timer.timeit warms up itself; this call sizes the blocks
            self.number = max(1, int(w.block_seconds / max(first, 1e-9)))
            self.warm, self.cold, self.spent = (first,), False, 0.0
            return
        self.warm = tuple(self._call() for _ in range(w.warmup))
        self.cold, self.spent = not self.warm and not w.prewarmed, sum(self.warm)
        if w.budget_s and self.warm and sum(self.warm) + self.warm[-1] > w.budget_s:
            self.samples, self.warm, self.cold, self.done = [self.warm[-1]], self.warm[:-1], len(self.warm) == 1, True

    def _call(self) -> float:
        start = self.read()
        self.workload.call()
        return self.read() - start

    def _cost(self, sample: float) -> float:
        return sample * self.number

    def wanted(self) -> bool:
        if self.done:
            return False
        w, n = self.workload, len(self.samples)
        if n < self.minimum:
            over = n and w.budget_s and self.spent + self.samples[-1] > w.budget_s
            return self._stop("budget" if w.precision else "") if over else True
        if not w.precision:
            return self._stop("")
        width = Measurement(tuple(self.samples)).half_width
        if width is not None and width <= w.precision:
            return self._stop(f"within {w.precision:.0%}")
        if n >= MAX_SAMPLES:
            return self._stop(f"{MAX_SAMPLES} samples")
        if self.extra_left is None:
            self.extra_left = w.budget_s - self.spent if w.budget_s else EXTRA_TIME * sum(map(self._cost, self.samples))
        return self._stop("budget") if self._cost(self.samples[-1]) > self.extra_left else True

    def _stop(self, why: str) -> bool:
        self.stopped, self.done = why, True
        return False

    def take(self) -> None:
        with self.running():
            sample = self.timer.timeit(self.number).mean if self.workload.block_seconds else self._call()
        self.samples.append(sample)
        self.spent += self._cost(sample)
        if self.extra_left is not None:
            self.extra_left -= self._cost(sample)

    def measurement(self) -> Measurement:
        return Measurement(tuple(self.samples), self.warm, cold=self.cold, stopped=self.stopped)


def interleaved(samplers: list["Sampler"], failed: Callable[["Sampler", Exception], None]) -> None:
    """Samples of every sampler in turn (ABAB...) until none wants more; a sampler whose call raises a device
    error or runs out of memory is reported to `failed` and dropped, the others go on."""
    active = list(samplers)
    while active:
        for sampler in list(active):
            if not sampler.wanted():
                active.remove(sampler)
                continue
            try:
                sampler.take()
            except (RuntimeError, MemoryError) as e:
                active.remove(sampler)
                failed(sampler, e)


CALL = "call"  # the lap name of a plain workload's call in `observe`


def observe(workload: Workload, device: str, listener: Listener, calls: int = 1,
            sync: Callable[[str], None] = None) -> Stopwatch:
    """Run more calls of a workload that `run` has set up and timed, with `listener` told of every lap and
    sample, so that what watches them (the census, the profiler) sees exactly what a sample times: a
    plain workload's `calls` calls, one sample each, or one hooked call and the samples it closes."""
    watch = Stopwatch(device, sync, listener)
    with intra_op_threads(workload.threads):
        if workload.hooks:
            workload.call(watch)
            return watch
        for _ in range(calls):
            watch.start()
            workload.call()
            watch.lap(CALL)
            watch.close_sample(CALL)
    return watch


def _hooked(workload: Workload, device: str, sync) -> Measurement:
    watch = Stopwatch(device, sync)
    workload.call(watch)
    if not watch.samples:
        raise RuntimeError("the call closed no sample on its stopwatch")
    return Measurement(tuple(watch.samples))
