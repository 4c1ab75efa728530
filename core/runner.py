"""Runs an experiment's points one by one into a record: builds each point's workload, times it
(core.timing) and writes the row; a failing point is recorded as such (out of memory, device error,
skipped) and the run goes on with the next."""
import signal
import traceback
from typing import Callable

import torch

from core import devices, timing
from core.experiments.base import Experiment, Point, RunState, SkipPoint
from core.results import RecordWriter


class Cancelled(Exception):
    pass


def _raise_cancelled(signum, frame):
    raise Cancelled()


def measure_point(experiment: Experiment, point: Point, config: dict, state: RunState = None) -> dict:
    row = {"device": point.device, "variant": point.variant, "params": point.params, "status": "ok"}
    try:
        workload = experiment.workload(point, config, state or RunState())
        row.update(unit=workload.unit, per_call=workload.per_call,
                   torch_threads=workload.threads or torch.get_num_threads())
        measurement = timing.run(workload, point.device)
        row.update(measurement.to_dict(),
                   metrics=workload.metrics | (workload.finish(measurement) if workload.finish else {}))
    except SkipPoint as skip:
        row.update(status="skipped", error=str(skip), metrics=skip.metrics)
    except (RuntimeError, MemoryError) as e:
        row.update(status="oom" if devices.is_out_of_memory(e) else "error", error=f"{type(e).__name__}: {e}")
        devices.release_cached_memory(point.device)
    return row


def run(experiment: Experiment, config: dict, device_names: list[str], writer: RecordWriter,
        progress: Callable[[int, int, Point, dict], None] = None) -> str:
    """Measure every point on every device, writing the record after each; returns the final status.
    SIGTERM cancels: the finished points stay in the record."""
    points = experiment.plan(config, device_names)
    state = RunState()
    previous = signal.signal(signal.SIGTERM, _raise_cancelled)
    writer.start(len(points))
    try:
        for i, point in enumerate(points, 1):
            row = measure_point(experiment, point, config, state)
            writer.add(row)
            state.rows.append(row)
            if progress:
                progress(i, len(points), point, row)
        ok = any(r["status"] == "ok" for r in writer.record["rows"])
        status = "complete" if ok else "failed"
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
