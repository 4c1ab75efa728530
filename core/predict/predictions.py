"""The cost model's predictions where users see them: an experiment's points predicted on any hardware
(`python -m core predict`), the predicted GPU rows beside the measured ones (the pages), and the model's
accuracy on every machine that measured and calibrated (the Predictions page, the benchmark).

A predicted row is never a measurement: its `provenance` is "predicted", its device the stand-in
(`devices.STAND_IN`), its `device_name` the hardware with "(predicted)", and it holds no samples."""
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from core import devices
from core.calibration.efforts import FULL
from core.model import costmodel, hardware, profiles
from core.predict import uncertainty
from core.present import analysis
from core.store import results
from core.measure import standin
from core.measure.experiment import DEFAULT_THREADS, Experiment, Point

PREDICTED, MEASURED = "predicted", "measured"
WITHIN = 1.5  # the accuracy target on a machine that measured: predicted within this factor of measured


@dataclass(frozen=True)
class Predicted:
    """One point predicted on one target: the point, its unit and per_call, and the prediction (None with
    `error` when the census or the model could not give one)."""
    point: Point
    unit: str | None
    per_call: int
    prediction: costmodel.Prediction | None
    error: str | None = None

    def to_dict(self, target: hardware.Target) -> dict:
        found = self.prediction
        return {"device": target.name, "hardware": target.title, "variant": self.point.variant,
                "params": self.point.params, "unit": self.unit, "per_call": self.per_call,
                "predicted_s": found.seconds if found else None,
                "parts": found.parts if found else None, "error": self.error}


def plan(experiment: Experiment, config: dict, target: hardware.Target) -> list[Point]:
    """The points a target runs: a GPU's through its stand-in, a CPU's on the CPU, each once: the model prices a CPU
    at the threads its figures were timed with (other_threads), so a point at each of cpu_threads' settings would be
    one prediction printed again under another name."""
    return standin.points(experiment, config) if target.gpu else experiment.points(config, "cpu")


def predict_points(experiment: Experiment, config: dict, target: hardware.Target,
                   progress: Callable[[Point], None] = None,
                   censuses: standin.Censuses = None) -> list[Predicted]:
    """Take each point's census (on the stand-in for a GPU, on the CPU for a CPU) and predict it. `censuses`
    (of standin.entry) keeps them across calls: a census counts the point's work, whatever hardware it is priced
    on, so every other GPU (or CPU) predicted in the same command reuses it."""
    censuses = censuses or standin.Censuses(standin.entry)
    found = []
    for point in plan(experiment, config, target):
        found.append(_predicted(point, censuses.get(experiment, point, config), target))
        if progress:
            progress(point)
    return found


def _predicted(point: Point, entry: dict, target: hardware.Target) -> Predicted:
    census = entry.get("census") or {}
    why = census.get("skipped") or census.get("error")
    if why:
        return Predicted(point, entry.get("unit"), entry.get("per_call", 1), None, why)
    try:
        return Predicted(point, entry.get("unit"), entry.get("per_call", 1), costmodel.predict(census, target))
    except costmodel.PredictionError as e:
        return Predicted(point, entry.get("unit"), entry.get("per_call", 1), None, str(e))


# -- the pages: predicted rows beside the measured ones ---------------------------------------------------
def standin_rows(records: list[dict], experiment: str, target: hardware.Target) -> pd.DataFrame:
    """The predicted rows of every record of `experiment` that holds stand-in censuses, in the rows
    frame's columns (results.rows_frame), predicted on `target` (a GPU)."""
    flat, bands = [], uncertainty.load()
    for record in records:
        if record["experiment"] != experiment:
            continue
        meta = results.record_summary(record)
        for entry in record.get("standin") or ():
            point = Point(devices.STAND_IN, entry["variant"], entry["params"])
            flat.append(_row(meta, _predicted(point, entry, target), target, bands))
    return pd.DataFrame(flat) if flat else pd.DataFrame(columns=[*results.BASE_COLUMNS, "provenance", "hardware"])


def driver(record: dict) -> str:
    """The CPU that drives the GPU predicted for a run, set against its measured CPU: the run's own machine's where
    it has a calibrated profile (one CPU on both sides), else this machine's (hardware.THIS)."""
    machine = record.get("machine_id")
    if machine and machine != devices.fingerprint()["machine_id"] and profiles.load(machine) is not None:
        return machine
    return hardware.THIS


def driven_rows(records: list[dict], experiment: str, gpu: str) -> pd.DataFrame:
    """standin_rows of each record on the GPU named `gpu`, driven by the record's driver: a predicted GPU point is
    set against the CPU its own run measured, so the CPU on both sides is one (driving every run's GPU with this
    machine's CPU, say, would set it against other machines' CPUs and flip a host-bound verdict)."""
    hosts: dict[str, list[dict]] = {}
    for record in records:
        if record["experiment"] == experiment:
            hosts.setdefault(driver(record), []).append(record)
    found = [standin_rows(mine, experiment, hardware.resolve(gpu, host=host)) for host, mine in hosts.items()]
    return pd.concat(found, ignore_index=True) if found else standin_rows([], experiment, None)


def _row(meta: dict, found: Predicted, target: hardware.Target, bands: list[uncertainty.Band]) -> dict:
    """A predicted row; `fast_edge` and `slow_edge` multiply its times to the ends of its likely range (the error
    band of its regime on a GPU, uncertainty.edges)."""
    prediction = found.prediction
    parts = dict(prediction.parts) if prediction else {}
    band = uncertainty.band_for(bands, "cuda", bound(host_share(prediction))) if prediction else None
    parts["host"] = parts.get("host", 0.0) + parts.pop("launches", 0.0)  # the measured breakdown's host holds launches
    base = {**meta, "device": devices.STAND_IN, "device_name": f"{target.gpu.title} (predicted)",
            "variant": found.point.variant, "point": results.point_key(found.point.params),
            "point_status": "ok" if prediction else "error", "error": found.error, "unit": found.unit,
            "per_call": found.per_call,
            "per_sample": results.call_text(found.unit, found.per_call) if found.unit else None,
            "median_s": prediction.seconds if prediction else None,
            "per_unit_s": results.per_unit(prediction.seconds, found.per_call) if prediction else None,
            "provenance": PREDICTED,
            "host_share": host_share(prediction) if prediction else None,
            **dict(zip(analysis.EDGES, uncertainty.edges(band))),
            "hardware": target.title,
            **{f"time_{part}_s": seconds for part, seconds in parts.items() if part != "launches"}}
    return {**found.point.params, **base}


TIME_UNITS = {"s": 1.0, "ms": 1.0, "µs": 1.0}  # a time scales with the predicted time; a rate (".../s") inversely


def with_twin_metrics(predicted: pd.DataFrame, rows: pd.DataFrame, experiment: Experiment) -> pd.DataFrame:
    """Predicted rows with the metrics of their CPU twin (the same run, variant and point, measured on the
    CPU) that a prediction can give: a time or rate metric (by its unit, the experiment's `metric_units`) scaled
    by predicted / measured median, and what describes the point rather than its outcome (whole numbers, text:
    steps per epoch, roles, syncs per epoch). Losses, flags of how the CPU ran, the experiment's
    `unpredicted_metrics` and other measured figures stay empty."""
    if predicted.empty or rows.empty:
        return predicted
    metrics = [c for c in rows.columns if c not in results.BASE_COLUMNS and c not in predicted.columns]
    cpu = rows[(rows["device"] == "cpu") & (rows["point_status"] == "ok")]
    twins = {(twin["run_id"], twin["variant"], twin["point"]): twin for twin in cpu.to_dict("records")}  # the last
    filled = []
    for row in predicted.to_dict("records"):
        twin = twins.get((row["run_id"], row["variant"], row["point"]))
        if twin is not None and row["median_s"] is not None:
            scale = row["median_s"] / twin["median_s"]
            row |= {name: value for name in metrics
                    if (value := _twin_metric(name, twin[name], scale, experiment)) is not None}
        filled.append(row)
    return pd.DataFrame(filled)


def _twin_metric(name: str, value, scale: float, experiment: Experiment):
    # a flag says how the CPU ran (a fused optimiser, a CUDA graph), not what the GPU would do
    if name in experiment.unpredicted_metrics or value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and pd.isna(value):
        return None
    if isinstance(value, str):
        return value
    unit = experiment.metric_units.get(name)
    if unit is not None and isinstance(value, (int, float)):
        return value * scale if unit in TIME_UNITS else value / scale
    return value if isinstance(value, int) or (isinstance(value, float) and value.is_integer()) else None


# -- accuracy where a machine measured ----------------------------------------------------------------------
ACCURACY_COLUMNS = ["experiment", "machine_id", "machine", "run_id", "device", "device_name", "variant", "point",
                    "threads_setting", "unit", "per_call", "measured_s", "cold", "predicted_s", "ratio", "within",
                    "host_share", "bound", "hardware"]
HOST_PARTS = ("host", "launches", "loading")  # what the host spends: the terms a GPU prediction takes from its CPU
# What bounds a predicted point (its regime), by the host's share of it: the host terms (dispatch, Python, loading)
# are what a GPU prediction of a small workload rests on; the rest is the device's work (a CPU target's own compute)
BOUNDS = ((0.5, "host-bound"), (0.0, "device-bound"))
WITHIN_LIMITS = (1.25, WITHIN)  # the shares within these factors either way that an accuracy summary gives


def accuracy(records: list[dict], latest_only: bool = True,
             target_for: Callable[[dict, str], hardware.Target | None] = None) -> pd.DataFrame:
    """For every measured point with a census, on a machine with a calibrated profile: the prediction for
    that machine's own device beside the measured median. `ratio` = predicted / measured; `within`: the
    ratio is within WITHIN either way; `host_share` the host's part of the predicted time and `bound` what
    that makes the point (BOUNDS); `cold`: the measurement is a single first call (the run's budget left no
    room for a warm-up), while the model predicts a warm one. Only each machine's latest complete run per
    experiment and preset (`latest_only`), so that a point counts once. `target_for(record, device)` picks the
    hardware predicted instead of the machine's own (None: not a point to check)."""
    target_for = target_for or (lambda record, device: own_target(record["machine_id"], device))
    targets: dict[tuple[str, str], hardware.Target | None] = {}
    threads: dict[str, int | None] = {}  # each machine's profile's, read once
    flat = []
    for record, counted in _latest(records) if latest_only else ((r, None) for r in records):
        meta = results.record_summary(record)
        for row in record["rows"]:
            census = row.get("census") or {}
            if row.get("status", "ok") != "ok" or "stretches" not in census or not row.get("median"):
                continue
            if record["machine_id"] not in threads:
                threads[record["machine_id"]] = calibrated_threads(record["machine_id"])
            if (counted is not None and row["device"] not in counted) or graph_blind(row) or other_threads(
                    row, threads[record["machine_id"]]):
                continue
            key = (record["machine_id"], row["device"])
            if key not in targets:
                targets[key] = target_for(record, row["device"])
            target = targets[key]
            if target is None:
                continue
            try:
                predicted = costmodel.predict(census, target)
            except costmodel.PredictionError:  # a census this version cannot read: not a point to check against
                continue
            ratio = predicted.seconds / row["median"]
            share = host_share(predicted)
            flat.append({"experiment": meta["experiment"], "machine_id": meta["machine_id"], "machine": meta["machine"],
                         "run_id": meta["run_id"],
                         "device": row["device"], "device_name": results.device_name(record, row["device"]),
                         "variant": row["variant"], "point": results.point_text(row.get("params", {})),
                         "threads_setting": threads_setting(row), "unit": row.get("unit"),
                         "per_call": row.get("per_call", 1), "measured_s": row["median"],
                         "cold": bool(row.get("cold")), "predicted_s": predicted.seconds, "ratio": ratio,
                         "within": within(ratio),
                         "host_share": share, "bound": bound(share), "hardware": target.title})
    return pd.DataFrame(flat, columns=ACCURACY_COLUMNS)


def threads_setting(row: dict) -> str:
    """A row's thread setting (a quick run times a CPU point at torch's default threads and at one): rows before the
    setting was recorded ran at the default."""
    return row.get("threads_setting") or DEFAULT_THREADS


def other_threads(row: dict, calibrated: int | None) -> bool:
    """A CPU point measured at other threads than its machine's profile was calibrated at (`calibrated`): the model
    prices a CPU at the threads its figures were timed with, so it is not a point to check the model against."""
    return row["device"] == "cpu" and None not in (row.get("torch_threads"), calibrated) and (
        row["torch_threads"] != calibrated)


def calibrated_threads(machine_id: str) -> int | None:
    """The torch threads a machine's profile was calibrated at, None without one (or one that does not say)."""
    return ((profiles.load(machine_id) or {}).get("fingerprint") or {}).get("torch_threads")


def graph_blind(row: dict) -> bool:
    """A CUDA graph's replays ran in the row's samples, but its census saw none: one taken on a GPU before the
    census counted a replay's operations there (ce96a56 and older), which leaves out the graph's work."""
    return (devices.kind(row["device"]) == "cuda" and (row.get("metrics") or {}).get("cuda_graph") is True
            and not (row.get("census") or {}).get("graph_replays"))


def graph_blind_text(records: list[dict], machine_id: str, device: str) -> str:
    """'' or a sentence saying how many of the device's latest points accuracy() leaves out as graph_blind."""
    blind = sum(graph_blind(row) for record, counted in _latest(records) if record["machine_id"] == machine_id
                for row in record["rows"] if row["device"] == device and device in counted)
    if not blind:
        return ""
    return (f"{blind} of its points are left out: each replayed a CUDA graph, and its census, taken before the census "
            f"counted a replay's operations on a GPU, saw none of the graph's work; a run of this version counts it.")


def catalogue_accuracy(records: list[dict]) -> pd.DataFrame:
    """accuracy() of every GPU point measured on a GPU the catalogue lists (by the name the record gives it), predicted
    with the catalogue's entry driven by that machine's own calibrated CPU: how far the published and assumed figures
    the catalogue predicts a GPU you do not have with carry, where one such GPU has measured."""
    return accuracy(records, target_for=_catalogue_target)


def _catalogue_target(record: dict, device: str) -> hardware.Target | None:
    if devices.kind(device) != "cuda":
        return None
    target = _resolved(results.device_name(record, device), record["machine_id"])
    return target if target and target.gpu is not None and target.gpu.origin == "catalogue" else None


def catalogue_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """summary() of catalogue_accuracy() per catalogue GPU (its `hardware`) and the machine that measured it, with
    the share within 2x beside."""
    found = [{"machine_id": machine, "hardware": name, **summary(part),
              "share_within_2x": float((off_by(part["ratio"]) <= 2).mean())}
             for (machine, name), part in frame.groupby(["machine_id", "hardware"])]
    return pd.DataFrame(found, columns=["machine_id", "hardware", "points", "median_ratio", "worst_ratio",
                                        "share_within", "share_within_2x"])


def within(ratio: float) -> bool:
    """Whether a ratio is within WITHIN either way."""
    return 1 / WITHIN <= ratio <= WITHIN


def off_by(ratios: pd.Series) -> pd.Series:
    """How far each ratio is from 1, either way, as a factor >= 1 (0.5 and 2 are both 2)."""
    return ratios.map(lambda r: max(r, 1 / r))


REPEAT_COLUMNS = ["machine_id", "experiment", "run_id", "device", "variant", "point", "threads_setting", "older_s",
                  "newer_s", "ratio", "within"]


def repeatability(records: list[dict]) -> pd.DataFrame:
    """For every point of one configuration that two or more complete runs on one machine measured at one thread
    setting: the latest two runs' medians and their ratio (newer / older), `run_id` the newer run's; `within`: within
    WITHIN either way. A machine's measurements repeat no closer than this, so the model cannot be checked there more
    finely either. One run's rows of a point at two thread settings are two configurations, not a repeat."""
    medians: dict[tuple, dict[str, float]] = {}  # key -> run id -> median, in the order the runs started
    for record in sorted(records, key=lambda r: r.get("started") or ""):
        if record["status"] != "complete":
            continue
        config = results.config_id(record.get("config", {}))
        for row in record["rows"]:
            if row.get("status", "ok") == "ok" and row.get("median"):
                key = (record["machine_id"], record["experiment"], config, row["device"], row["variant"],
                       results.point_text(row.get("params", {})), threads_setting(row))
                medians.setdefault(key, {})[record["run_id"]] = row["median"]
    flat = []
    for (machine, experiment, _, device, variant, point, setting), found in medians.items():
        if len(found) < 2:
            continue
        (_, older), (run_id, newer) = list(found.items())[-2:]
        flat.append({"machine_id": machine, "experiment": experiment, "run_id": run_id, "device": device,
                     "variant": variant, "point": point, "threads_setting": setting, "older_s": older,
                     "newer_s": newer, "ratio": newer / older, "within": within(newer / older)})
    return pd.DataFrame(flat, columns=REPEAT_COLUMNS)


def with_repeats(accuracy: pd.DataFrame, repeats: pd.DataFrame) -> pd.DataFrame:
    """The accuracy frame with `measured_before_s` and `runs_apart`: where the point's run measured it again after an
    earlier run of the same configuration, that run's median and the newer over the older (NaN where it was measured
    once), so that a miss can be read against how far the point itself repeats."""
    apart = repeats[["run_id", "device", "variant", "point", "threads_setting", "older_s", "ratio"]].rename(
        columns={"older_s": "measured_before_s", "ratio": "runs_apart"})
    return accuracy.merge(apart, on=["run_id", "device", "variant", "point", "threads_setting"], how="left")


def repeatability_text(frame: pd.DataFrame) -> str:
    """'two runs of the same configuration agree within 1.5x on 95% of 105 points, within 1.25x on 77% (worst 2.34x
    apart)', or '': at the limits an accuracy summary gives (WITHIN_LIMITS), so that each share of the model's can
    be read against what the measurements allow."""
    if frame.empty:
        return ""
    off = off_by(frame["ratio"])
    shares = [f"within {limit:g}x on {(off <= limit).mean():.0%}" for limit in sorted(WITHIN_LIMITS, reverse=True)]
    return (f"two runs of the same configuration agree {shares[0]} of {len(frame)} points, {', '.join(shares[1:])} "
            f"(worst {off.max():.2f}x apart)")


def _latest(records: list[dict]) -> list[tuple[dict, set[str]]]:
    """Each machine's latest complete run per experiment, preset and device (results.latest_complete), with the
    devices it is the latest for."""
    by_id = {record["run_id"]: record for record in records}
    latest = results.latest_complete(results.runs_frame(records), ["machine_id", "experiment", "preset"])
    chosen = [(by_id[run_id], set(part["device"])) for run_id, part in latest.groupby("run_id")]
    return sorted(chosen, key=lambda pair: (pair[0]["experiment"], pair[0].get("started") or ""))


def here_and_gpus(record: dict, device: str) -> hardware.Target | None:
    """accuracy's `target_for` of what an experiment page tells (the model on this machine's CPU and on every GPU
    that measured): a machine's own device where it is this machine's CPU or a GPU, else None."""
    here = record["machine_id"] == devices.fingerprint()["machine_id"]
    if (devices.kind(device) == "cpu" and not here) or devices.kind(device) not in ("cpu", "cuda"):
        return None
    return own_target(record["machine_id"], device)


def own_target(machine_id: str, device: str) -> hardware.Target | None:
    """A machine's own device as a target, or None when the machine has no calibrated profile for it."""
    return _resolved(machine_id if device == "cpu" else f"{machine_id}:{device}", machine_id)


def _resolved(name: str, host: str) -> hardware.Target | None:
    """hardware.resolve's target, or None where the name is not one it knows or the host has no calibrated CPU."""
    try:
        return hardware.resolve(name, host=host)
    except hardware.HardwareError:
        return None


def unmeasured_text(machine_id: str, device: str) -> str:
    """'' or a sentence naming the figures a machine's calibrated profile lacks (taken before calibrate measured
    them), which the cost model stands in for: its points check the model with less than this version measures."""
    target = own_target(machine_id, device)
    missing = [*hardware.unmeasured(target.host), *(hardware.unmeasured(target.gpu) if target.gpu else [])] if target else []
    if _no_collection_seen(profiles.load(machine_id) or {}):
        missing = [field for field in missing if field not in costmodel.COLLECTION_FIGURES]
    if not missing:
        return ""
    return (f"Its profile was calibrated before calibrate measured {len(missing)} of its figures ({', '.join(missing)}): "
            f"the cost model stands in for them, so its points check the model with less than this version measures; "
            f"calibrating it again would check the model as it is.")


def _no_collection_seen(profile: dict) -> bool:
    """Whether a profile lacks the DataLoader's full-collection figures because its passes saw none: a quick
    calibration's are too short to (quick_profile_text says so), and a full one that timed NumPy rows (a probe
    that came after the collections') ran the collections' probe too."""
    return bool(profile.get("quick")) or costmodel.NUMPY_FIELD in profile.get("cpu", {})


def quick_profile_text(machine_id: str, device: str) -> str:
    """'' or a sentence saying that a machine's profile is a quick calibration, and what that does to the check of
    one of its devices: the model prices a matrix product larger than any the calibration timed there at the largest
    one's rate, or on a GPU the catalogue lists at the catalogue's rate for it (hardware.catalogue_twin)."""
    profile = profiles.load(machine_id)
    if not profile or not profile.get("quick"):
        return ""
    figures = profiles.sections(profile).get(device, {})
    if "matmul_flops" not in figures:
        return ""
    quick, full = max(map(int, figures["matmul_flops"])), FULL.matmul_sizes[devices.kind(device)][-1]
    uncollected = not set(costmodel.COLLECTION_FIGURES) <= set(profile["cpu"])
    twin = hardware.catalogue_twin(profile, device)
    larger = (f"at the catalogue's {twin.title} rate for its size (at least that size's rate)" if twin else
              "at that size's rate")
    return (f"Its profile is a quick calibration (calibrate --quick: one pass, fewer sizes). On {device} it timed "
            f"matrix products up to {quick}x{quick}, and the model prices a larger one {larger}, so its "
            f"larger compute-bound points check the {'catalogue' if twin else 'quick profile'} more than the model; "
            f"a full calibration on that machine (python -m core calibrate) times them up to {full}x{full}." +
            (" It holds no figures for the DataLoader's full garbage collections (a quick calibration's passes are "
             "too short to see one), so the model spreads them over every loader sample instead of pricing those a "
             "sample's median sees."
             if uncollected else ""))


def host_share(prediction: costmodel.Prediction) -> float:
    """The host's part of a predicted time (HOST_PARTS), 1 for a prediction of no time."""
    host = sum(prediction.parts.get(part, 0.0) for part in HOST_PARTS)
    return host / prediction.seconds if prediction.seconds else 1.0


def bound(host_share: float) -> str:
    """'host-bound' or 'device-bound': what a predicted point's time is mostly made of (BOUNDS)."""
    return next(name for floor, name in BOUNDS if host_share >= floor)


def bounds_text() -> str:
    """'host-bound where the host's share of the predicted time is 50% or more, device-bound below' (BOUNDS)."""
    (floor, host), (_, device) = BOUNDS
    return f"{host} where the host's share of the predicted time is {floor:.0%} or more, {device} below"


def errors(ratios: pd.Series) -> pd.Series:
    """Each prediction's |error|: |predicted - measured| / measured, from predicted / measured."""
    return (ratios - 1).abs()


def error_summary(frame: pd.DataFrame) -> dict:
    """Of a frame of checked points (`ratio`: predicted / measured): the points, the median and 90th percentile
    |error|, the shares within each of WITHIN_LIMITS either way, the median ratio, the worst (farthest from 1) and
    the share predicted too fast."""
    if frame.empty:
        return {"points": 0}
    error, off = errors(frame["ratio"]), off_by(frame["ratio"])
    return {"points": len(frame), "median_error": float(error.median()), "p90_error": float(error.quantile(0.9)),
            **{f"within_{limit:g}x": float((off <= limit).mean()) for limit in WITHIN_LIMITS},
            "median_ratio": float(frame["ratio"].median()), "worst_ratio": float(frame["ratio"].iloc[off.argmax()]),
            "too_fast": float((frame["ratio"] < 1).mean())}


def by_bound(frame: pd.DataFrame) -> pd.DataFrame:
    """error_summary() of each regime present, host-bound first."""
    return pd.DataFrame([{"bound": name, **error_summary(frame[frame["bound"] == name])} for _, name in BOUNDS
                         if (frame["bound"] == name).any()])


def summary_text(found: dict) -> str:
    """'41 points: median |error| 12%, 90th percentile 40%, 61% within 1.25x, 83% within 1.5x, worst 0.41'."""
    within = ", ".join(f"{found[f'within_{limit:g}x']:.0%} within {limit:g}x" for limit in WITHIN_LIMITS)
    return (f"{found['points']} point{'s' * (found['points'] != 1)}: median |error| {found['median_error']:.0%}, "
            f"90th percentile {found['p90_error']:.0%}, {within}, worst {found['worst_ratio']:.2f}")


def bound_text(frame: pd.DataFrame) -> str:
    """'host-bound 41 points: median |error| 12%, ...; device-bound ...' (summary_text per regime)."""
    return "; ".join(f"{row['bound']} {summary_text(row)}" for row in by_bound(frame).to_dict("records"))


def summary(frame: pd.DataFrame) -> dict:
    """Points, the median ratio, the worst (farthest from 1 either way) and the share within WITHIN."""
    if frame.empty:
        return {"points": 0, "median_ratio": None, "worst_ratio": None, "share_within": None}
    found = error_summary(frame)
    return {"points": found["points"], "median_ratio": found["median_ratio"], "worst_ratio": found["worst_ratio"],
            "share_within": float(frame["within"].mean())}


def accuracy_text(frame: pd.DataFrame, device_kind: str = "cpu") -> str:
    """'on this machine's CPU the model predicted 41 points: median ratio 1.1, 93% within 1.5x'."""
    part = frame[frame["device"].map(devices.kind) == device_kind] if len(frame) else frame
    found = summary(part)
    if not found["points"]:
        return f"no {device_kind.upper()} point measured with a census and a calibrated profile yet to check it against"
    return (f"checked against {found['points']} measured {device_kind.upper()} points: median predicted/measured "
            f"{found['median_ratio']:.2f}, {found['share_within']:.0%} within {WITHIN:g}x, worst {found['worst_ratio']:.2f}")
