"""Timing that respects asynchronous devices: synchronise before every clock read, exclude the
warm-up, repeat, and keep the raw samples with their median and spread."""
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.utils.benchmark as benchmark

from core import devices

NOISY_SPREAD = 0.10  # IQR / median above this flags a measurement as noisy


@dataclass(frozen=True)
class Measurement:
    """Raw samples (seconds per call) and their summary."""
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def iqr(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q3 - q1

    @property
    def noisy(self) -> bool:
        return self.median > 0 and self.iqr / self.median > NOISY_SPREAD

    def to_dict(self) -> dict:
        return {"samples": list(self.samples), "median": self.median, "iqr": self.iqr, "noisy": self.noisy}


def clock(device: str, sync: Callable[[str], None] = None) -> Callable[[], float]:
    """A clock that first waits for the device to finish its queued work."""
    sync = sync or devices.synchronize

    def read() -> float:
        sync(device)
        return time.perf_counter()
    return read


def measure(fn: Callable[[], object], device: str, *, repeats: int = 5, warmup: int = 1,
            sync: Callable[[str], None] = None) -> Measurement:
    """Time calls of a millisecond or more: one call per sample, after `warmup` untimed calls."""
    read = clock(device, sync)
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = read()
        fn()
        samples.append(read() - start)
    return Measurement(tuple(samples))


def micro(fn: Callable[[], object], device: str, *, repeats: int = 5, threads: int = None,
          block_seconds: float = 0.05, sync: Callable[[str], None] = None) -> Measurement:
    """Time microsecond-scale calls with torch.utils.benchmark: each sample is the mean of a block of
    calls. `threads` defaults to the intra-op threads torch really uses (Timer's own default is 1)."""
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, timer=clock(device, sync),
                            num_threads=threads or torch.get_num_threads())
    first = timer.timeit(1).mean  # Timer.timeit warms up itself; this call sizes the blocks
    number = max(1, int(block_seconds / max(first, 1e-9)))
    return Measurement(tuple(timer.timeit(number).mean for _ in range(repeats)))
