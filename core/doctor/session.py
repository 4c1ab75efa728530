"""One doctor on this machine: the plan's steps run in order under the run lock, each step's record (and the
calibration's profile) kept and the bundle written as it finishes, a budget's end (or Ctrl-C) cutting the step going on
with its finished points kept; then the checks, this machine's verdicts and the cost model's accuracy here. What was
done is remembered in the machine folder's `.doctor.json`, so a doctor run again does only what is missing."""
import json
import os
import signal
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterator

from core import devices, experiments, settings
from core.calibration import calibrate
from core.doctor import checks, plan as planning
from core.measure import runner
from core.model import profiles
from core.params import ConfigError
from core.predict import predictions
from core.report import bundles
from core.store import files, results, runlock

STATE_NAME = ".doctor.json"


class OutOfBudget(Exception):
    """The budget ran out during a step."""


def state_path() -> Path:
    return settings.results_dir() / devices.fingerprint()["machine_id"] / STATE_NAME


def done_steps() -> dict[str, dict]:
    """The steps an earlier doctor finished on this machine, by key; a calibration only if it finished since the
    machine last booted (a profile is of the boot it was taken in: core.doctor.plan)."""
    try:
        steps = json.loads(state_path().read_text())["steps"]
        booted = datetime.fromisoformat(devices.booted())
        return {key: step for key, step in steps.items()
                if not key.startswith("calibrate") or datetime.fromisoformat(step["finished"]) >= booted}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _remember(key: str, what: dict) -> None:
    steps = done_steps() | {key: what | {"finished": results.now()}}
    files.write_atomic(state_path(), {"steps": steps})


def forget() -> None:
    state_path().unlink(missing_ok=True)


def run(the_plan: planning.Plan, output: Path, say: Callable[[str], None] = print, inherited: str = None) -> dict:
    """Run the plan's steps under the run lock (`inherited`: the descriptor the app's job handed down), then the
    checks; returns {"steps": {key: outcome}, "checks": [...], "bundle": path or None, "cut": why or None}. The
    bundle is written after every step; the lock's description names the record of the step going on."""
    deadline = time.monotonic() + the_plan.budget_s - the_plan.fixed_s
    outcome = {"steps": {}, "checks": [], "bundle": None, "cut": None}
    info = {"run_id": results.new_run_id("doctor"), "experiment": "doctor", "devices": the_plan.devices,
            "preset": f"{the_plan.budget_s / 60:g} min", "started": results.now(), "pid": os.getpid(), "record": None}
    if inherited:  # the app's job published its description (its run id names the log the app shows)
        info = runlock.holder() or info
        lock = runlock.adopt(inherited, info)
    else:
        lock = runlock.acquire(info)
    try:
        queue = the_plan.steps + the_plan.left_out  # time the plan's steps leave takes what it left out
        while queue:
            step = queue.pop(0)
            planned = step in the_plan.steps
            if time.monotonic() + (min(step.seconds, 5.0) if planned else step.seconds) > deadline:
                if planned:
                    outcome["steps"][step.key] = "left for another run: the budget ran out"
                continue
            say(f"-- {step.title} (about {planning.duration(step.seconds)})")
            try:
                with _until(deadline):
                    outcome["steps"][step.key] = _step(step, the_plan.devices, say, info)
                say(f"   {outcome['steps'][step.key]}")
            except OutOfBudget:
                outcome["steps"][step.key] = "cut by the budget: its finished points are kept"
                say(f"   {outcome['steps'][step.key]}")
            except KeyboardInterrupt:
                outcome["cut"] = "interrupted"
                outcome["steps"][step.key] = "interrupted: its finished points are kept"
                break
            finally:
                outcome["bundle"] = _bundle(output, say)
            if step.kind == "calibrate" and step.key in done_steps():
                the_plan, queue = _replanned(the_plan, queue, deadline, say)
        if outcome["cut"] is None:
            say("-- checks")
            outcome["checks"] = checks.all_checks(the_plan.devices, this_machines_records(), profiles.load())
            for check in outcome["checks"]:
                say(check.text())
            outcome["bundle"] = _bundle(output, say)  # also when every step was done by an earlier doctor
    finally:
        runlock.release(lock)
    return outcome


def _replanned(the_plan: planning.Plan, queue: list[planning.Step], deadline: float,
               say) -> tuple[planning.Plan, list[planning.Step]]:
    """Once this machine is calibrated, the steps still to run planned again within the time left, each estimated
    from another machine's run now at this machine's pace (planning.pace); the plan as it was where that changes no
    step or its estimate, or the time left holds no plan."""
    try:  # calibrated now: neither calibration is planned again
        again = planning.make(deadline - time.monotonic() + the_plan.fixed_s, the_plan.devices,
                              set(done_steps()) | set(planning.CALIBRATION_KEYS.values()), profile=profiles.load())
    except ConfigError:
        return the_plan, queue
    before = [(s.key, round(s.seconds)) for s in queue if s in the_plan.steps]
    if [(s.key, round(s.seconds)) for s in again.steps] == before:
        return the_plan, queue
    say(f"   planned again at this machine's pace, now that it is calibrated: {again.text()}")
    return again, again.steps + again.left_out


def _step(step: planning.Step, device_names: list[str], say, info: dict) -> str:
    if step.kind == "calibrate":
        names = calibrate.devices_to_calibrate([d for d in device_names if devices.kind(d) in ("cpu", "cuda")] or None)
        profile = calibrate.take(names, quick=step.quick, progress=False)
        path = profiles.save(profile)
        _remember(step.key, {"profile": str(path)})
        return f"calibrated in {profile['seconds']:.0f} s: {path}"
    exp = experiments.get(step.experiment)
    config = exp.config(step.preset)
    writer = results.RecordWriter(exp.name, step.preset, config, device_names)
    runlock.update(info | {"record": str(writer.path), "planned": len(exp.plan(config, device_names))})
    say(f"   {writer.path}")
    status = runner.run(exp, config, device_names, writer, progress=_point_line(say))
    if status == "cancelled":
        raise OutOfBudget() if _OUT_OF_BUDGET else KeyboardInterrupt()
    if status == "complete":
        _remember(step.key, {"run_id": writer.record["run_id"]})
    return f"{status}: {writer.record['run_id']}"


def _point_line(say) -> Callable:
    def line(i: int, total: int, point, row: dict) -> None:
        found = f"median {row['median']:.3g} s, n={row.get('n')}" if row["status"] == "ok" else row["status"]
        say(f"   [{i}/{total}] {point.device} {point.variant} {results.point_text(point.params)}: {found}")
    return line


_OUT_OF_BUDGET = False


@contextmanager
def _until(deadline: float) -> Iterator[None]:
    """SIGALRM at the deadline: a run in progress is cancelled (its record keeps its finished points), any other
    step stopped; OutOfBudget either way."""
    global _OUT_OF_BUDGET
    _OUT_OF_BUDGET = False

    def expired(signum, frame):
        global _OUT_OF_BUDGET
        _OUT_OF_BUDGET = True
        raise runner.Cancelled()
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.01))
    try:
        yield
    except runner.Cancelled:
        raise OutOfBudget() from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def this_machines_records() -> list[dict]:
    here = devices.fingerprint()["machine_id"]
    return [r for r in results.load_records() if r["machine_id"] == here]


def _bundle(output: Path, say) -> str | None:
    """This machine's records and profile in one bundle (the export format); None, said, when there is nothing yet
    or the disk refuses."""
    try:
        bundles.export(output, [devices.fingerprint()["machine_id"]])
        return str(output)
    except (files.StoreError, OSError, bundles.BundleError) as e:
        say(f"   the bundle could not be written: {e}")
    except ValueError:  # nothing of this machine's to bundle yet (ConfigError)
        pass
    return None


def accuracy_here(records: list[dict]) -> list[str]:
    """The cost model against this machine's measured points, a line per device with its worst point."""
    here = devices.fingerprint()["machine_id"]
    frame = predictions.accuracy(records)
    frame = frame[frame["machine_id"] == here]
    if frame.empty:
        return ["no measured point with a census and a calibrated profile here yet to check the cost model against"]
    lines = []
    for device, part in frame.groupby("device"):
        worst = part.loc[predictions.off_by(part["ratio"]).idxmax()]
        lines.append(f"{device}: {predictions.accuracy_text(part, devices.kind(device))}; worst: {worst['experiment']} "
                     f"{worst['variant']} {worst['point']} (x{worst['ratio']:.2f})")
    return lines
