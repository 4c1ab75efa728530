"""Runs an experiment's points one by one into a record; a failing point is recorded as such
(out of memory, device error, skipped) and the run goes on with the next."""
import signal
import traceback
from typing import Callable

import torch

from core import devices
from core.experiments.base import Experiment, Point, SkipPoint
from core.results import RecordWriter


class Cancelled(Exception):
    pass


def _raise_cancelled(signum, frame):
    raise Cancelled()


def measure_point(experiment: Experiment, point: Point, config: dict) -> dict:
    row = {"device": point.device, "variant": point.variant, "params": point.params, "status": "ok"}
    try:
        result = experiment.measure(point, config)
        row.update(result.get("timing", {}), metrics=result.get("metrics", {}))
    except SkipPoint as skip:
        row.update(status="skipped", error=str(skip), metrics=skip.metrics)
    except (RuntimeError, MemoryError) as e:
        row.update(status="oom" if devices.is_out_of_memory(e) else "error", error=f"{type(e).__name__}: {e}")
        if devices.kind(point.device) == "cuda":
            torch.cuda.empty_cache()
    return row


def run(experiment: Experiment, config: dict, device_names: list[str], writer: RecordWriter,
        progress: Callable[[int, int, Point, dict], None] = None) -> str:
    """Measure every point on every device, writing the record after each; returns the final status.
    SIGTERM cancels: the finished points stay in the record."""
    previous = signal.signal(signal.SIGTERM, _raise_cancelled)
    points = [p for d in device_names for p in experiment.points(config, d)]
    writer.start(len(points))
    try:
        for i, point in enumerate(points, 1):
            row = measure_point(experiment, point, config)
            writer.add(row)
            if progress:
                progress(i, len(points), point, row)
        ok = any(r["status"] == "ok" for r in writer.record["rows"])
        status = "complete" if ok or not points else "failed"
        writer.finish(status, None if ok else "no point could be measured")
    except (Cancelled, KeyboardInterrupt):
        status = "cancelled"
        writer.finish(status, "cancelled by the user")
    except Exception as e:
        status = "failed"
        writer.finish(status, "".join(traceback.format_exception_only(e)).strip())
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    return status
