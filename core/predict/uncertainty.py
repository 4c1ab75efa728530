"""How far a prediction may be off: the range that the cost model's measured error gives a predicted time, and
whether a predicted GPU speedup is still an answer once both of its times carry theirs.

`predict --accuracy` checks the model against every measured point (each calibrated machine's latest runs of
the experiments) and saves, per device kind and regime (core.predict.predictions.BOUNDS), the spread of predicted / measured
there: its BAND quantiles. A CPU's band comes from the CPUs' own profiles against their own runs; a GPU's from the
catalogue's GPU entries against the GPUs that measured (predicting a GPU you do not have is what it qualifies).
A predicted time t then likely measures between t / high and t / low. A GPU's predicted speedup over a CPU has a
band of its own (kind SPEEDUP), where runs measured configurations on both: the spread of predicted / measured
speedup, whose two errors partly cancel (one host issues both devices' operations), so it is not their product. The
bands are fitted on the experiments' points only: a model of your own, and the zoo's, are checked against them,
never fitted."""
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from core import devices, settings, versions
from core.present.tables import seconds_text
from core.store import files, results
from core.store.record_schema import DEFAULT_THREADS

BAND = (0.1, 0.9)  # the quantiles of predicted / measured a range spans: four checked points in five fall inside
MIN_POINTS = 5  # fewer checked points in a regime than this: the device kind's band over every regime stands in
FILE_NAME, SCHEMA_VERSION = "error_bands.json", 1
HELPS, DOES_NOT, TOO_CLOSE = "a GPU helps", "a GPU does not help", "too close to call"
NO_RANGE = "no answer without the model's error"  # a speedup's verdict where no band ranges it
SPEEDUP = "speedup"  # the kind of a GPU speedup's band: predicted over measured speedup of one configuration
TIMES = "times"  # a speedup ranged by its two times' bands, where no speedup band exists
# A configuration measured on both devices: one run's point of one variant (the CPU's at torch's default threads)
PAIRED_ON = ["machine_id", "run_id", "experiment", "variant", "point"]


@dataclass(frozen=True)
class Band:
    """The spread of predicted / measured over `points` checked points of a device kind ('cpu', 'cuda') and regime
    ('any': every regime of that kind)."""
    kind: str
    regime: str
    low: float
    high: float
    points: int

    def range(self, seconds: float) -> tuple[float, float]:
        """Where a predicted time likely measures: (seconds / high, seconds / low)."""
        return seconds / self.high, seconds / self.low


def bands(cpu_checked: pd.DataFrame, gpu_checked: pd.DataFrame) -> list[Band]:
    """The bands of CPU points (predictions.accuracy()'s rows on a CPU), GPU points (catalogue_accuracy()'s) and
    the speedups of configurations measured on both (paired_speedups), per regime with at least MIN_POINTS points,
    and per kind over every regime."""
    found = []
    for kind, frame in (("cpu", cpu_checked), ("cuda", gpu_checked)):
        found += _banded(kind, frame[frame["device"].map(devices.kind) == kind] if len(frame) else frame)
    return found + _banded(SPEEDUP, paired_speedups(cpu_checked, gpu_checked))


def _banded(kind: str, frame: pd.DataFrame) -> list[Band]:
    groups = [("any", frame), *(frame.groupby("bound") if len(frame) else ())]
    return [Band(kind, regime, *part["ratio"].quantile(list(BAND)).tolist(), len(part))
            for regime, part in groups if len(part) >= MIN_POINTS]


def paired_speedups(cpu_checked: pd.DataFrame, gpu_checked: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration a run measured on its CPU (at torch's default threads) and on a GPU, in one variant
    (PAIRED_ON): its predicted speedup over its measured one (`ratio`: the CPU point's predicted / measured over the
    GPU point's), the GPU point's regime (`bound`) and the machine (`machine_id`)."""
    columns = set(PAIRED_ON) | {"device", "ratio", "bound", "threads_setting"}
    if not (len(cpu_checked) and len(gpu_checked) and columns <= set(cpu_checked) and columns <= set(gpu_checked)):
        return pd.DataFrame(columns=["ratio", "bound", "machine_id"])
    cpu = cpu_checked[(cpu_checked["device"] == "cpu")
                      & (cpu_checked["threads_setting"].fillna(DEFAULT_THREADS) == DEFAULT_THREADS)]
    gpu = gpu_checked[gpu_checked["device"].map(devices.kind) == "cuda"]
    paired = cpu[PAIRED_ON + ["ratio"]].merge(gpu[PAIRED_ON + ["ratio", "bound"]], on=PAIRED_ON,
                                              suffixes=("_cpu", "_gpu"))
    return pd.DataFrame({"ratio": paired["ratio_cpu"] / paired["ratio_gpu"], "bound": paired["bound"],
                         "machine_id": paired["machine_id"]})


def band_for(found: list[Band], kind: str, regime: str) -> Band | None:
    """The band of a kind and regime, else the kind's over every regime, else None."""
    by_key = {(b.kind, b.regime): b for b in found}
    return by_key.get((kind, regime)) or by_key.get((kind, "any"))


def erred(likely: tuple[float, float] | None, seconds: float) -> str | None:
    """"fast" where a predicted time's range lies wholly above it (the model has predicted such points too fast),
    "slow" where wholly below, None where the range holds it or there is none."""
    if not likely or likely[0] <= seconds <= likely[1]:
        return None
    return "fast" if seconds < likely[0] else "slow"


def range_text(likely: tuple[float, float] | None, seconds: float = None) -> str:
    """'likely 0.9 ms to 2.1 ms' for a predicted time's range (Band.range), or what says it has none. Given the
    predicted `seconds`, a range wholly on one side of it says so (`erred`): a reader would otherwise take the figure
    outside its own range for a slip."""
    if not likely:
        return "no measured error to range it"
    text = "likely {} to {}".format(*map(seconds_text, likely))
    side = erred(likely, seconds) if seconds is not None else None
    if side is None:
        return text
    return (f"{text}: {likely[0] / seconds:.2g}x to {likely[1] / seconds:.2g}x the model's figure, which has been too "
            f"{side} on such points")


def edges(band: Band | None) -> tuple[float, float]:
    """What a predicted time is multiplied by at the fast and the slow end of its likely range (1 and 1 without a
    band)."""
    return (1 / band.high, 1 / band.low) if band else (1.0, 1.0)


def speedup(cpu: tuple[float, Band | None], gpu: tuple[float, Band | None], band: Band | None = None) -> dict:
    """A GPU's predicted speedup over a CPU (each a predicted time and its band, or None) and its range: with
    `band` (kind SPEEDUP, of the GPU point's regime) the speedup's own, as a predicted time's (Band.range); else the
    CPU's slowest likely time over the GPU's fastest, and its fastest over the GPU's slowest, as if the two errors
    compounded. The verdict HELPS above 1, DOES_NOT below, TOO_CLOSE where the range straddles 1, NO_RANGE where no
    band gives one (only the point is known). `basis` says which range it is (SPEEDUP, TIMES, None)."""
    (cpu_s, cpu_band), (gpu_s, gpu_band) = cpu, gpu
    found = {"speedup": cpu_s / gpu_s, "low": None, "high": None, "verdict": NO_RANGE, "basis": None}
    if band is not None:
        (low, high), basis = band.range(cpu_s / gpu_s), SPEEDUP
    elif cpu_band is not None and gpu_band is not None:
        (cpu_low, cpu_high), (gpu_low, gpu_high) = cpu_band.range(cpu_s), gpu_band.range(gpu_s)
        (low, high), basis = (cpu_low / gpu_high, cpu_high / gpu_low), TIMES
    else:
        return found
    verdict = HELPS if low > 1 else DOES_NOT if high < 1 else TOO_CLOSE
    return found | {"low": low, "high": high, "verdict": verdict, "basis": basis}


def speedup_text(found: dict) -> str:
    """'a GPU helps: 3.1x faster (likely 1.6-5.0x)' or 'too close to call: 1.2x (likely 0.6-2.3x)', or NO_RANGE's
    sentence where no band ranges it (a large predicted speedup is not an answer without one either). A range wholly
    on one side of the predicted speedup says which way the model's predictions of such speedups came out."""
    if found["low"] is None:
        return (f"{NO_RANGE}: {_times(found['speedup'])}x predicted, and the model's error on such points is not "
                "measured here (python -m core predict --accuracy measures it)")
    side = {"slow": " above", "fast": " below"}.get(erred((found["low"], found["high"]), found["speedup"]))
    came = f", which came out{side} what was measured" if side else ""
    return (f"{found['verdict']}: {_times(found['speedup'])}x predicted "
            f"({speedup_range_text(found['low'], found['high'], found.get('basis'))}{came})")


def speedup_range_text(low: float, high: float, basis: str | None = SPEEDUP) -> str:
    """'likely 0.8-1.6x, the model's 10%-90% error on speedups of configurations measured on both devices': a
    predicted speedup's range and which error gave it (`basis`: SPEEDUP, or TIMES for the two times' bands)."""
    on = "speedups of configurations measured on both devices" if basis == SPEEDUP else "such points, on each device"
    return f"likely {_times(low)}-{_times(high)}x, the model's {BAND[0]:.0%}-{BAND[1]:.0%} error on {on}"


def _times(ratio: float) -> str:
    """A speedup in two significant figures, a whole number from 100 on (150, never 1.5e+02)."""
    return f"{ratio:.2g}" if ratio < 100 else f"{ratio:,.0f}"


# -- the stored bands -------------------------------------------------------------------------------------------
def path(machine_id: str = None) -> Path:
    """results/<machine id>/predictions/error_bands.json (this machine's by default)."""
    return (settings.results_dir() / (machine_id or devices.fingerprint()["machine_id"]) / "predictions" / FILE_NAME)


def save(found: list[Band]) -> Path:
    """Write the bands with the code version and the date, atomically; refused when read-only."""
    settings.require_writable("saving the model's error bands")
    target = path()
    files.write_atomic(target, {"schema": SCHEMA_VERSION, "code_version": versions.code_version(),
                                "taken": results.now(), "quantiles": list(BAND),
                                "bands": [vars(band) for band in found]})
    return target


def load() -> list[Band]:
    """This machine's saved bands, else the newest of those other machines' folders hold (the shipped ones); []
    when none can be read."""
    own = _read(path())
    if own:
        return own[1]
    shipped = [found for where in settings.results_dir().glob(f"*/predictions/{FILE_NAME}") if (found := _read(where))]
    return max(shipped, key=lambda found: found[0])[1] if shipped else []


def _read(where: Path) -> tuple[str, list[Band]] | None:
    """(taken, bands) of a saved file, None where it is missing or not one."""
    try:
        data = json.loads(files.read_regular_file(where)[0])
        found = [Band(**band) for band in data["bands"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    ok = data.get("schema") == SCHEMA_VERSION and all(
        isinstance(b.low, float) and isinstance(b.high, float) and math.isfinite(b.low) and 0 < b.low <= b.high
        for b in found)
    return (str(data.get("taken", "")), found) if ok else None
