"""Confidence intervals for the figures a claim is decided on, from the raw samples of every point behind them.

The method: SciPy's percentile bootstrap (scipy.stats.bootstrap, method="percentile", 2,000 resamples, a fixed
seed so that the same records always give the same interval). Each point's samples are resampled on their own
(the two sides of a ratio are independent runs), its median recomputed, and every time column of that point
scaled by the resampled median over the measured one; the claim's statistic is then recomputed from those
columns. A point measured with a single sample has no spread to resample: it enters at its value, and the
interval says how many such points it holds."""
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

LEVEL = 0.95
RESAMPLES = 2000
SEED = 20261128

Columns = dict[str, np.ndarray]   # a time column -> its values, one row per point (and one column per resample)
Statistic = Callable[[Columns], np.ndarray]


@dataclass(frozen=True)
class Interval:
    """A figure with its 95% confidence interval; `points` behind it, `unresampled` of them single samples."""
    value: float
    low: float
    high: float
    points: int = 1
    unresampled: int = 0

    def straddles(self, threshold: float) -> bool:
        """Whether the threshold lies inside the interval, so that a rerun could put the figure on either side."""
        return self.low < threshold < self.high

    def text(self, form: str = "{:.2f}x") -> str:
        """'1.02x (95% CI 0.91–1.15)', naming any point with one sample."""
        single = (f"; {self.unresampled} of {self.points} point(s) one sample, not resampled"
                  if self.unresampled else "")
        return f"{form.format(self.value)} (95% CI {form.format(self.low).rstrip('x ')}–{form.format(self.high)}{single})"

    def inverse(self) -> "Interval":
        """The interval of 1 / the figure."""
        return Interval(1 / self.value, 1 / self.high, 1 / self.low, self.points, self.unresampled)


def interval(frame: pd.DataFrame, statistic: Statistic, sides: dict[str, tuple[str, ...]]) -> Interval:
    """The bootstrap interval of `statistic` over `frame`'s rows. `sides` maps a samples column (raw seconds per
    call) to the time columns measured by those samples, which move with their median: {"samples_s": ("median_s",
    "step_s"), "cpu_samples_s": ("cpu_median_s",)}. `statistic` takes those columns as arrays (rows first) and
    reduces along axis 0; it is called on one column per resample."""
    frame = frame.assign(**{side: None for side in sides if side not in frame})
    observed = _columns(frame, sides, {s: np.ones((len(frame), 1)) for s in sides})
    value = float(np.asarray(statistic(observed)).reshape(-1)[0])
    spread = [(side, i) for side in sides for i, samples in enumerate(frame[side]) if _resamplable(samples)]
    unresampled = sum(1 for row in range(len(frame))  # a point with a side of one sample (a pair has two sides)
                      if any(not _resamplable(frame[side].iloc[row]) for side in sides))
    if not spread or not math.isfinite(value):
        return Interval(value, value, value, len(frame), unresampled)
    data = [np.asarray(frame[side].iloc[i], dtype=float) for side, i in spread]
    medians = [float(np.median(d)) for d in data]

    def resampled(*draws, axis=-1):
        factors = {s: np.ones((len(frame), draws[0].shape[0] if draws[0].ndim > 1 else 1)) for s in sides}
        for (side, i), draw, median in zip(spread, draws, medians):
            factors[side][i] = np.median(draw, axis=axis) / median if median else 1.0
        return np.asarray(statistic(_columns(frame, sides, factors)), dtype=float)

    from scipy import stats  # imported here: 1.6 s of every page's, command's and test worker's start otherwise
    found = stats.bootstrap(data, resampled, n_resamples=RESAMPLES, vectorized=True, method="percentile",
                            confidence_level=LEVEL, rng=np.random.default_rng(SEED))
    low, high = found.confidence_interval
    low, high = (value, value) if not (math.isfinite(low) and math.isfinite(high)) else (min(low, value), max(high, value))
    return Interval(value, float(low), float(high), len(frame), unresampled)


def median_interval(samples) -> Interval:
    """One point's median with its interval, from its raw samples."""
    frame = pd.DataFrame({"median_s": [float(np.median(samples))], "samples_s": [list(samples)]})
    return interval(frame, lambda c: np.median(c["median_s"], axis=0), {"samples_s": ("median_s",)})


def ratio(frame: pd.DataFrame, top: str, bottom: str, reduce: Callable = np.median) -> Interval:
    """The interval of `reduce` over the rows of `top` / `bottom`, two time columns of each row (the CPU's
    beside the GPU's, paired by core.present.analysis), each moving with its side's samples."""
    sides = _sides_of(frame, (top, bottom))
    return interval(frame, lambda c: reduce(c[top] / c[bottom], axis=0), sides)


def _sides_of(frame: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Each time column's samples column: `cpu_x` -> `cpu_samples_s`, `baseline_x` -> `baseline_samples_s`,
    anything else -> `samples_s` (a frame without that column has no spread to resample on that side)."""
    sides: dict[str, tuple[str, ...]] = {}
    for column in columns:
        prefix = next((p for p in ("cpu_best_", "cpu_", "baseline_") if column.startswith(p)), "")
        side = f"{prefix}samples_s"
        sides[side] = (*sides.get(side, ()), column)
    return sides


def _resamplable(samples) -> bool:
    return isinstance(samples, (list, tuple, np.ndarray)) and len(samples) > 1


def _columns(frame: pd.DataFrame, sides: dict[str, tuple[str, ...]], factors: dict[str, np.ndarray]) -> Columns:
    out = {}
    for side, names in sides.items():
        for name in names:
            out[name] = frame[name].to_numpy(dtype=float)[:, None] * factors[side]
    return out
