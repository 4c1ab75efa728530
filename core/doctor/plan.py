"""What the doctor will do within its budget, and how long each step should take: the calibration first (the cost
model and every prediction need it; the full one where it fits FULL_CALIBRATION_SHARE of the budget, and again where
this machine's profile is of another boot), then each experiment's points on every device here, most claims decided
per second first, at the smoke preset, upgraded to quick where the budget leaves room; the checks and the answer last.
A step's estimate is how long the same step took on this machine before, else on another machine's devices of the
same kinds at this machine's pace (where both are calibrated: `pace`), else the experiment's own guess for its points
plus what the census, profile and stand-ins add to each. Once the doctor has calibrated, it plans the rest again at
this machine's pace (core.doctor.session)."""
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime

from core import devices, experiments
from core.measure import standin
from core.model import costmodel, hardware
from core.params import ConfigError
from core.predict import predictions
from core.store import results

FULL_CALIBRATION_SHARE = 0.25  # the full calibration when its estimate is at most this share of the budget
# By quick: a calibration of one device never taken here (the targets calibrate holds to on a 2-core VM; a full one
# of an H200 and its 16-core host took 30 s, a quick one 9 s)
CALIBRATION_GUESS_S = {True: 10.0, False: 60.0}
# What the census and the profile add to a point, and what a stand-in's census takes, when never run here (the
# smoke presets on a 2-core VM: 2-4 s and about 1 s)
INSPECTION_S, STANDIN_S = 3.0, 1.0
CHECKS_S = {"cpu": 5.0, "gpu": 20.0}  # the checks, by whether a GPU is here
ANSWER_S = 10.0  # the verdicts, the accuracy table and the bundle
BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh])\s*$")
UNIT_S = {"s": 1, "m": 60, "h": 3600}
MIN_BUDGET_S, MAX_BUDGET_S = 60, 24 * 3600
CALIBRATION_KEYS = {True: "calibrate-quick", False: "calibrate"}  # a calibration step's key, by its effort
PACE_POINTS = 24  # an earlier run's points the cost model prices on both machines for its pace, spread over its rows


@dataclass
class Step:
    """One step: `key` names it in the doctor's state (a step done is not done again), `seconds` its estimate."""
    key: str
    title: str
    seconds: float
    kind: str                 # "calibrate" or "run"
    experiment: str | None = None
    preset: str | None = None
    quick: bool = True        # a calibration's effort
    claims: int = 0


@dataclass
class Plan:
    budget_s: float
    devices: list[str]
    steps: list[Step] = field(default_factory=list)      # to run, in order
    done: list[Step] = field(default_factory=list)       # done by an earlier doctor on this machine
    left_out: list[Step] = field(default_factory=list)   # beyond this budget
    fixed_s: float = 0.0                                  # the checks and the answer

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps) + self.fixed_s

    def text(self) -> str:
        lines = [f"plan for {', '.join(self.devices)} within {duration(self.budget_s)} "
                 f"(estimated {duration(self.seconds)}):"]
        lines += [f"  {i}. {s.title}: about {duration(s.seconds)}" for i, s in enumerate(self.steps, 1)]
        lines.append(f"  {len(self.steps) + 1}. the checks, this machine's verdicts and the cost model's accuracy, "
                     f"the bundle: about {duration(self.fixed_s)}")
        lines += [f"  done earlier: {s.title}" for s in self.done]
        if self.left_out:
            more = sum(s.seconds for s in self.left_out)
            lines.append(f"  left for another run (about {duration(more)} more): "
                         + "; ".join(s.title for s in self.left_out))
        return "\n".join(lines)


def parse_budget(text: str) -> float:
    """'3m', '90s', '1.5h' in seconds; ConfigError naming --budget and the allowed forms and range."""
    found = BUDGET.match(str(text)[:40])
    if not found:
        raise ConfigError("--budget", f"{str(text)[:40]!r} is not a duration; allowed: a number and s, m or h "
                                      f"(90s, 3m, 1.5h), from 1m to 24h")
    seconds = float(found[1]) * UNIT_S[found[2]]
    if not MIN_BUDGET_S <= seconds <= MAX_BUDGET_S:
        raise ConfigError("--budget", f"{text.strip()} is out of range; allowed: from 1m to 24h")
    return seconds


def make(budget_s: float, device_names: list[str], done_keys: set[str] = frozenset(),
         records: list[dict] = None, profile: dict | None = None) -> Plan:
    """The plan for `budget_s` on `device_names`, leaving out the steps in `done_keys`; ConfigError naming --budget
    when not even the calibration and the checks fit."""
    records = results.load_records() if records is None else records
    gpu = any(devices.kind(d) == "cuda" for d in device_names)
    plan = Plan(budget_s, device_names, fixed_s=CHECKS_S["gpu" if gpu else "cpu"] + ANSWER_S)
    quick = calibration_seconds(device_names, False, profile) > FULL_CALIBRATION_SHARE * budget_s
    calibration = Step(CALIBRATION_KEYS[quick],
                       f"calibrate {', '.join(d for d in device_names if devices.kind(d) in ('cpu', 'cuda'))}"
                       + (" (quick)" if quick else ""), calibration_seconds(device_names, quick, profile),
                       "calibrate", quick=quick)
    if _still_good(profile, device_names, quick):
        done_keys = set(done_keys) | {calibration.key}
    least = calibration.seconds * (calibration.key not in done_keys) + plan.fixed_s
    if least > budget_s:
        raise ConfigError("--budget", f"{duration(budget_s)} cannot hold even the calibration and the checks here "
                                      f"(about {duration(least)}); allowed: at least {duration(least * 1.2)}")
    runs = [run_step(name, "smoke", device_names, records) for name in experiments.registry()]
    candidates = [calibration] + sorted(runs, key=lambda s: -s.claims / max(s.seconds, 1.0))
    done_keys = set(done_keys) | {s.key for s in runs if _quick_key(s) in done_keys}  # quick covers smoke
    left = budget_s - plan.fixed_s
    for step in candidates:
        if step.key in done_keys:
            plan.done.append(step)
        elif step.seconds <= left:
            plan.steps.append(step)
            left -= step.seconds
        else:
            plan.left_out.append(step)
    _upgrade(plan, device_names, records, done_keys, left)
    return plan


def _upgrade(plan: Plan, device_names: list[str], records: list[dict], done_keys: set[str], left: float) -> None:
    """Where the budget leaves room, an experiment's smoke step becomes its quick one, most claims per second
    first; the quick steps go after every smoke step (an estimate too low then costs only the quick ones)."""
    upgraded = []
    for step in sorted(plan.steps, key=lambda s: -s.claims / max(s.seconds, 1.0)):
        if step.kind != "run":
            continue
        quick = run_step(step.experiment, "quick", device_names, records)
        if quick.key not in done_keys and quick.seconds - step.seconds <= left:
            upgraded.append((step, quick))
            left -= quick.seconds - step.seconds
    replaced = {smoke.key for smoke, _ in upgraded}
    plan.steps = [s for s in plan.steps if s.key not in replaced] + [quick for _, quick in upgraded]


def _quick_key(step: Step) -> str:
    return f"run-{step.experiment}-quick"


def run_step(name: str, preset: str, device_names: list[str], records: list[dict]) -> Step:
    exp = experiments.get(name)
    return Step(f"run-{name}-{preset}", f"{name} ({preset}) on {', '.join(device_names)}",
                run_seconds(exp, preset, device_names, records), "run", name, preset, claims=len(exp.claims))


def run_seconds(exp, preset: str, device_names: list[str], records: list[dict]) -> float:
    """How long the experiment's preset took on these devices here last time, else on another machine's devices of
    the same kinds (a CPU and one GPU: the lent H200's runs for a new GPU) times this machine's `pace`, per point it
    finished times the points planned now (a run cut short, or one of an earlier plan: a quick run now times each CPU
    point at two thread settings, where older runs timed it at one); else its guess for the points plus INSPECTION_S per point and
    STANDIN_S per stand-in census (which overestimated a lent H200's smoke runs 1.8x)."""
    here = devices.fingerprint()["machine_id"]
    took = [r for r in records if r["experiment"] == exp.name and r["preset"] == preset
            and r["status"] in ("complete", "cancelled") and r["rows"] and r.get("ended")
            and _kinds(r.get("devices") or []) == _kinds(device_names)]
    took = [r for r in took if r["machine_id"] == here and sorted(r["devices"]) == sorted(device_names)] or took
    if took:
        latest = max(took, key=lambda r: r["started"])
        seconds = (_time(latest["ended"]) - _time(latest["started"])).total_seconds()
        if latest.get("planned_points"):  # a record that says what it planned (all since schema 2)
            seconds *= len(exp.plan(exp.config(preset), device_names)) / len(latest["rows"])
        return max(seconds * pace(latest, device_names), 1.0)
    config = exp.config(preset)
    points = len(exp.plan(config, device_names))
    stand_ins = 0 if all(map(devices.is_accelerator, device_names)) else len(standin.points(exp, config))
    return sum(exp.run_estimate(config, d) for d in device_names) + INSPECTION_S * points + STANDIN_S * stand_ins


def pace(record: dict, device_names: list[str]) -> float:
    """How many times as long this machine should take as the machine that ran `record`: the median, over up to
    PACE_POINTS of its points with a census, of the cost model's sample on this machine's device of the point's kind
    over the sample on that machine's own; 1 for this machine's run, and where the two machines' profiles price none
    of its points (this machine not calibrated yet)."""
    here = devices.fingerprint()["machine_id"]
    if record["machine_id"] == here:
        return 1.0
    rows = [row for row in record["rows"] if isinstance(row.get("census"), dict) and row.get("device")]
    ratios, targets = [], {}  # each machine's device read once: a profile's read is checked
    for row in rows[::max(1, len(rows) // PACE_POINTS)][:PACE_POINTS]:
        ours = next((d for d in device_names if devices.kind(d) == devices.kind(row["device"])), None)
        for machine, device in ((here, ours), (record["machine_id"], row["device"])):
            if (machine, device) not in targets:
                targets[machine, device] = predictions.own_target(machine, device) if device else None
        mine, theirs = targets[here, ours], targets[record["machine_id"], row["device"]]
        if mine is None or theirs is None:
            continue
        try:
            ratios.append(costmodel.predict(row["census"], mine).seconds
                          / costmodel.predict(row["census"], theirs).seconds)
        except (costmodel.PredictionError, ZeroDivisionError):
            continue
    return statistics.median(ratios) if ratios else 1.0


def _kinds(device_names: list[str]) -> list[str]:
    return sorted(devices.kind(name) for name in device_names)


def _still_good(profile: dict | None, device_names: list[str], quick: bool) -> bool:
    """This machine's profile was taken since it last booted (a lent machine's next lease is another machine to a
    profile), covers every device to calibrate, measures every figure calibrate measures now, and is as thorough as
    the one planned (a full one is never replaced by a quick one)."""
    if not profile or not devices.this_boot(profile.get("booted")) or (profile.get("quick") and not quick):
        return False
    wanted = [d for d in device_names if devices.kind(d) in ("cpu", "cuda")]
    try:
        found = [hardware.from_profile(profile, d) for d in wanted]
    except hardware.HardwareError:
        return False
    return not any(hardware.unmeasured(device) for device in found)


def calibration_seconds(device_names: list[str], quick: bool, profile: dict | None) -> float:
    """The last calibration of the same effort here, else CALIBRATION_GUESS_S per device calibrated."""
    if profile and profile.get("quick") == quick and profile.get("seconds"):
        return float(profile["seconds"])
    calibrated = [d for d in device_names if devices.kind(d) in ("cpu", "cuda")]
    return CALIBRATION_GUESS_S[quick] * len(calibrated)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
