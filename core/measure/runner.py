"""Runs an experiment's points into a record, a configuration at a time (its points on each device and CPU thread
setting timed in turn, interleaved): builds each point's workload, times it
(core.measure.timing), takes the census of one sample and the profiler's breakdown of a few (core.measure.census,
core.measure.breakdown), and writes the row; a failing point is recorded as such (out of memory, device error,
skipped) and the run goes on with the next. A write the disk refuses (core.store.files.StoreError: full, read-only)
stops the run: its record is closed as failed, saying why, where the disk still takes that."""
import json
import signal
import traceback
from pathlib import Path
from typing import Callable

import torch

from core import devices, settings
from core.measure import breakdown, census, standin, timing
from core.measure.experiment import DEFAULT_THREADS, Experiment, Point, RunState, SkipPoint
from core.store import files
from core.store.results import RecordWriter


class Cancelled(Exception):
    pass


def _raise_cancelled(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: a second must not cut the record's last write
    raise Cancelled()


AT_DEFAULT_ONLY = "taken at the default threads only"
# A sample longer than this is neither censused nor profiled: each would add more than this to the run.
INSPECT_LIMIT_S = 10.0


def measure_point(experiment: Experiment, point: Point, config: dict, state: RunState = None,
                  files: Path = None, stem: str = "point") -> dict:
    """Time one point into a row: measure_together with it alone."""
    return measure_together(experiment, [(point, stem)], config, state, files)[0]


def measure_together(experiment: Experiment, points: list[tuple[Point, str]], config: dict, state: RunState = None,
                     files: Path = None) -> list[dict]:
    """Time the points of one configuration (a variant at the same parameters, on each device and CPU thread
    setting) into rows, their samples taken in turn (core.measure.timing.interleaved: ABAB..., so that a drift of
    the machine's speed falls on each alike); a call that closes its own samples (hooks: a fit's epochs) is timed
    alone. Each point runs at its CPU threads and, on a GPU, in FP32 unless the workload allows TF32, recording both.
    With `files` (a folder), also take the census of one sample and the profiler's breakdown at the default threads,
    written there as each point's stem.*. A point that is skipped, runs out of memory or fails is recorded as such."""
    state = state or RunState()
    built = [_built(experiment, point, config, state) for point, _ in points]
    samplers = {}
    for i, (point, _) in enumerate(points):
        row, workload = built[i]
        if workload is not None and not workload.hooks:
            try:
                samplers[i] = timing.Sampler.of(workload, point.device)
            except (RuntimeError, MemoryError) as e:
                built[i] = (_failed(row, point.device, e), None)
    index = {id(sampler): i for i, sampler in samplers.items()}

    def failed(sampler: timing.Sampler, error: Exception) -> None:
        i = index[id(sampler)]
        built[i] = (_failed(built[i][0], points[i][0].device, error), None)
    timing.interleaved(list(samplers.values()), failed)
    for i, (point, stem) in enumerate(points):
        row, workload = built[i]
        if workload is not None:
            _finished(row, workload, point, samplers.get(i), files, stem)
    return [row for row, _ in built]


def _built(experiment: Experiment, point: Point, config: dict, state: RunState) -> tuple[dict, timing.Workload | None]:
    """A point's row so far and its workload (None where the experiment skipped it or building it failed)."""
    row = {"device": point.device, "variant": point.variant, "params": point.params, "status": "ok",
           "threads_setting": point.threads_setting}
    try:
        workload = experiment.workload(point, config, state)
    except SkipPoint as skip:
        return row | {"status": "skipped", "error": str(skip), "metrics": skip.metrics}, None
    except (RuntimeError, MemoryError) as e:
        return _failed(row, point.device, e), None
    if point.threads:
        workload.threads = point.threads
    workload.precision = config.get("precision") or None
    row.update(unit=workload.unit, per_call=workload.per_call, torch_threads=workload.threads or torch.get_num_threads(),
               **(timing.precision_flags(workload) if devices.is_accelerator(point.device) else {}))
    return row, workload


def _finished(row: dict, workload: timing.Workload, point: Point, sampler: timing.Sampler | None, files: Path | None,
              stem: str) -> None:
    """The row's measurement (the sampler's, or a hooked call's timed now), metrics, census and breakdown."""
    try:
        measurement = sampler.measurement() if sampler else timing.run(workload, point.device)
        with timing.precision(workload):
            row.update(measurement.to_dict(),
                       metrics=workload.metrics | (workload.finish(measurement) if workload.finish else {}))
            if files and point.threads_setting == DEFAULT_THREADS:
                row.update(inspect(workload, point.device, measurement, files, stem))
            elif files:  # threads change the time, not the operations: the default's census and profile stand
                row.update(census={"skipped": AT_DEFAULT_ONLY}, breakdown={"skipped": AT_DEFAULT_ONLY})
    except (RuntimeError, MemoryError) as e:
        _failed(row, point.device, e)


def _failed(row: dict, device: str, error: Exception) -> dict:
    row.update(status="oom" if devices.is_out_of_memory(error) else "error", error=f"{type(error).__name__}: {error}")
    devices.release_cached_memory(device)
    return row


def inspect(workload: timing.Workload, device: str, measurement: timing.Measurement, files: Path,
            stem: str) -> dict:
    """The census and the breakdown of a timed workload (more calls of it, after its metrics were read). A
    failure of either is recorded in its place: the measurement stands without them."""
    if workload.untraced or measurement.median > INSPECT_LIMIT_S:
        why = {"skipped": workload.untraced or f"one sample takes {measurement.median:.3g} s: the census and "
                                               f"the profile are taken only when it takes under {INSPECT_LIMIT_S:g} s"}
        return {"census": why, "breakdown": why}
    found = {}
    for name, take in (("census", lambda: census.take(workload, device)),
                       ("breakdown", lambda: breakdown.take(workload, device, measurement.median, files, stem,
                                                            found["census"].get("operations")))):
        try:
            found[name] = take()
        except (RuntimeError, MemoryError, ValueError, TypeError, NotImplementedError) as e:
            found[name] = {"error": f"{type(e).__name__}: {e}"}
            devices.release_cached_memory(device)
    kernels = found["breakdown"].get("kernels")
    if kernels is not None and "kernels" in found["census"]:
        found["census"].update(profiler_kernels=kernels, kernel_difference=kernels - found["census"]["kernels"])
    return found


def run(experiment: Experiment, config: dict, device_names: list[str], writer: RecordWriter,
        progress: Callable[[int, int, Point, dict], None] = None,
        standin_progress: Callable[[int, int, Point, dict], None] = None,
        starting: Callable[[int, int, Point], None] = None) -> str:
    """Measure every point on every device, writing the record after each, then, unless every device is a
    GPU, take the stand-in census of every point a GPU would run (core.measure.standin: what the cost model predicts
    a GPU from, on any machine); returns the final status. SIGTERM cancels: the finished points stay in the
    record (a cancel among the stand-ins leaves the run complete, with fewer than it planned). A write of the record
    that fails (files.StoreError: a full disk, a read-only mount) stops the run and closes its record as failed, saying
    so, where that last write can be made; the StoreError is raised again, saying what came of the record. `starting`
    hears of each point before it is measured, `progress` after (with its row), `standin_progress` of each census."""
    settings.require_writable("runs")
    points = experiment.plan(config, device_names)
    state = RunState()
    writer.start(len(points))  # before the handler: a refused start leaves no handler behind
    previous = signal.signal(signal.SIGTERM, _raise_cancelled)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # core.commands.jobs holds a cancel back until now
        done = 0
        for group in configurations(points):
            if starting:
                starting(done + 1, len(points), group[0][1])
            stems = [f"{i:03d}-{point.device.replace(':', '')}-{_slug(point.variant)}" for i, point in group]
            rows = measure_together(experiment, [(point, stem) for (_, point), stem in zip(group, stems)], config,
                                    state, files=writer.path.with_suffix(""))
            for (_, point), row in zip(group, rows):
                done += 1
                writer.add(row)
                state.rows.append(row)
                if progress:
                    progress(done, len(points), point, row)
        on_gpus_alone = all(map(devices.is_accelerator, device_names))  # their rows hold the real censuses
        _standins(experiment, [] if on_gpus_alone else standin.points(experiment, config), config, writer,
                  standin_progress)
        ok = any(r["status"] == "ok" for r in writer.record["rows"])
        status = "complete" if ok else "failed"
        writer.finish(status, None if ok else "no point could be measured")
    except (Cancelled, KeyboardInterrupt):
        status = "cancelled"
        try:
            writer.finish(status, "cancelled by the user")
        except files.StoreError as e:
            raise e.followed_by(f"the run was cancelled; {_UNCLOSED}") from e
    except files.StoreError as e:
        status = "failed"
        raise _stopped(writer, e) from e
    except Exception as e:
        status = "failed"
        try:
            writer.finish(status, "".join(traceback.format_exception_only(e)).strip())
        except files.StoreError as closing:
            e.add_note(f"its record could not be closed: {closing}")
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    return status


# What a record that a failed write left reading "running" becomes: runs.STATUS_WORDS's "interrupted".
_UNCLOSED = "its record could not be closed: once this run has ended it reads as interrupted"


def _stopped(writer: RecordWriter, failure: files.StoreError) -> files.StoreError:
    """After a write of the run failed: close its record as failed, saying why, unless the failed write was its
    closing one; `failure`, saying what came of the run and its record."""
    rows, planned = writer.record["rows"], writer.record["planned_points"]
    done = f"the run stopped after measuring {len(rows)} of {planned} points"
    if writer.record["status"] == "running":
        try:
            writer.finish("failed", f"stopped: {failure}")
            return failure.followed_by(f"{done}; its record is closed as failed")
        except files.StoreError:
            pass
    return failure.followed_by(f"{done}; {_UNCLOSED}")


def _standins(experiment: Experiment, planned: list[Point], config: dict, writer: RecordWriter,
              progress: Callable[[int, int, Point, dict], None] = None) -> None:
    """Take the planned stand-in censuses; a cancel among them keeps those taken, fewer than the record says were
    planned: every point is measured by then, and the stand-ins only feed predictions."""
    writer.plan_standins(len(planned))
    try:
        for i, point in enumerate(planned, 1):
            entry = standin.entry(experiment, point, config)
            writer.add_standin(entry)
            if progress:
                progress(i, len(planned), point, entry)
    except (Cancelled, KeyboardInterrupt):
        return  # the run is complete: the record's count of them against its plan says they were cut


def configurations(points: list[Point]) -> list[list[tuple[int, Point]]]:
    """The planned points (numbered from 1) grouped by variant and parameters, in the order each first comes: the
    points measured together, one per device and CPU thread setting."""
    groups: dict[tuple, list[tuple[int, Point]]] = {}
    for i, point in enumerate(points, 1):
        groups.setdefault((point.variant, json.dumps(point.params, sort_keys=True)), []).append((i, point))
    return list(groups.values())


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower())
