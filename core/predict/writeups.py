"""The cost model validated against the write-ups: every published timing figure (unit "s" in
core/published.json) and GPU speedup (unit "x") predicted on the hardware its write-up names, beside the
published figure.

Each experiment with published timing figures declares in `<package>/writeup.py` (bound to it as its `writeup`) how each is replicated
(`Replica`: the write-up's own variant, a configuration small enough to census in seconds, and the exact
scale from one predicted sample to the published quantity, or a `Fit` through several censused sizes when
the write-up's size is too large to census), or why it cannot be (`Unreplicated`); a speedup by a `Speedup`
(one configuration's CPU and GPU sides, predicted on the write-up's CPU and GPU). A GPU figure is
predicted from the stand-in's census (core.measure.standin) on the write-up's GPU driven by its CPU; a CPU figure
from the CPU's census on the write-up's CPU (core.model.hardware). `validate` takes each census once, however
many figures share it; `save`/`load` keep the table under results/<machine id>/predictions/ (a subfolder:
the record loader globs */*.json)."""
import json
import math
import os
import statistics
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

import pandas as pd

from core import devices, published, settings, versions
from core.model import costmodel, hardware
from core.store import files, results
from core.measure import standin
from core.measure.experiment import Experiment, Point
from core.present.presented import Presented

SCHEMA_VERSION = 1
SUBFOLDER = "predictions"
FILE_NAME = "writeups.json"
TIMING_UNIT = "s"
SPEEDUP_UNIT = "x"  # a published speedup: the CPU's time over the GPU's
WITHIN = 2.0  # a prediction within this factor of the published figure counts as close
ADDS_NOT_ABOVE = "What this method adds to the published time cannot explain a prediction above it."
# A census counts operations, which torch's intra-op threads do not change: one thread keeps the CPU's censuses
# quick on a busy machine, where threads contend.
CENSUS_THREADS = 1
COLUMNS = ("id", "experiment", "quantity", "device", "target", "assumed", "assumption", "published", "predicted",
           "unit", "ratio", "within_2x", "how", "method", "error")


@dataclass(frozen=True)
class Fit:
    """A size too large to census: the predicted sample at each of `censused` values of the swept parameter
    `param`, fitted to the time model `terms` (value -> its terms) with `fit` ((terms per value, seconds per
    value) -> coefficients), evaluated at the published value. `formula` says the model in words."""
    param: str
    censused: tuple[int, ...]
    terms: Callable[[int], tuple[float, ...]]
    fit: Callable[[list[tuple[float, ...]], list[float]], object]
    formula: str


@dataclass(frozen=True)
class Replica:
    """How one published timing figure is replicated: the point (`variant`, swept `params`) of `preset`
    with `overrides`, censused on the device the figure was timed on; published quantity = `scale` x one
    predicted sample (after `fit`, when there is one). `how` says the scale in words; `method` says where the
    write-up's own method (its clock, its loop) explains a gap between the two, from its text. `method_adds`: that
    method adds time the prediction leaves out (a clock around start-up, printing), so it can explain only a
    prediction below the published figure; a row whose prediction is above says so (ADDS_NOT_ABOVE)."""
    figure: str
    variant: str
    params: dict
    scale: float
    how: str
    preset: str = "smoke"
    overrides: dict = field(default_factory=dict)
    method: str = ""
    method_adds: bool = False
    fit: Fit | None = None


MIN_ROWS, MIN_BATCHES = 1024, 4  # an epoch censused over at least this many rows and batches


@dataclass(frozen=True)
class EpochScale:
    """An epoch censused over a few of its batches (`rows`), scaled to a write-up's epochs of its rows:
    published = `scale` x one predicted epoch, because an epoch's batches repeat; `how` says so."""
    rows: int
    scale: float
    how: str


def epoch_rows(batch: int) -> int:
    """The rows an epoch at `batch` is censused over: at least MIN_ROWS and MIN_BATCHES batches."""
    return max(MIN_ROWS, MIN_BATCHES * batch)


def epochs_of_rows(epochs: int, published_rows: int, batch: int) -> EpochScale:
    rows = epoch_rows(batch)
    return EpochScale(rows, epochs * published_rows / rows,
                      f"{epochs} epochs x {published_rows:,} / {rows:,} rows x one predicted epoch of {rows:,} rows "
                      f"({rows // batch} batches of {batch}): an epoch's batches repeat, so {published_rows:,} rows "
                      f"take {published_rows / rows:g} times as long")


@dataclass(frozen=True)
class Speedup:
    """How a published speedup is replicated: one configuration (`params` of `preset` with `overrides`) timed by
    the write-up on both devices, its `cpu_variant` censused on the CPU and predicted on the write-up's CPU, its
    `gpu_variant` on the stand-in and predicted on the write-up's GPU driven by that CPU; predicted speedup = the
    CPU's sample over the GPU's (one unit each). `how` says which configuration stands for the write-up's."""
    figure: str
    cpu_variant: str
    gpu_variant: str
    params: dict
    how: str
    preset: str = "smoke"
    overrides: dict = field(default_factory=dict)
    method: str = ""

    def points(self) -> tuple[Point, Point]:
        """The CPU side's point, and the GPU side's on the stand-in."""
        return (Point("cpu", self.cpu_variant, dict(self.params)),
                Point(devices.STAND_IN, self.gpu_variant, dict(self.params)))


@dataclass(frozen=True)
class Unreplicated:
    """A published timing figure no prediction can stand beside, and why."""
    figure: str
    why: str


Declaration = Replica | Speedup | Unreplicated


# -- the declarations -------------------------------------------------------------------------------------
def figures() -> list[dict]:
    """Every published figure in seconds, and every published speedup."""
    found = published.load()
    wanted = (found["unit"] == TIMING_UNIT) | ((found["unit"] == SPEEDUP_UNIT)
                                               & found["quantity"].str.startswith("speedup"))
    return [published.entry(i) for i in found.loc[wanted, "id"]]


def declarations(experiments: Mapping[str, Presented]) -> dict[str, Declaration]:
    """Every declaration of these experiments (by name: the registry's), by figure id."""
    found: dict[str, Declaration] = {}
    for experiment in experiments.values():
        module = experiment.writeup
        for declared in (*getattr(module, "REPLICAS", ()), *getattr(module, "UNREPLICATED", ())):
            if declared.figure in found:
                raise ValueError(f"{experiment.name}/writeup.py: figure '{declared.figure}' is declared twice")
            found[declared.figure] = declared
    return found


def replicas(experiments: Mapping[str, Presented]) -> list[tuple[dict, Declaration | None]]:
    """Every published figure the model predicts (`figures`) with its declaration (None where its experiment
    declares none)."""
    declared = declarations(experiments)
    return [(entry, declared.get(entry["id"])) for entry in figures()]


# -- targets and censuses ---------------------------------------------------------------------------------
def figure_target(entry: dict) -> tuple[hardware.Target, bool, str]:
    """The hardware a figure was timed on (a GPU figure's or a speedup's GPU driven by the write-up's CPU, a CPU
    figure's CPU alone), whether the catalogue assumed it (the write-up does not name it) and the catalogue's note."""
    target, note = hardware.writeup_target(entry["source"])
    assumed = bool(hardware.catalogue().writeups[entry["source"]]["assumed"])
    if entry["device"] == "GPU":
        return target, assumed, note
    return hardware.Target(target.host), assumed, note


def census_points(replica: Replica, device: str) -> list[Point]:
    """The points whose censuses a replica needs: its own, or one per censused value of its fit."""
    if replica.fit is None:
        return [Point(device, replica.variant, dict(replica.params))]
    return [Point(device, replica.variant, replica.params | {replica.fit.param: value})
            for value in replica.fit.censused]


def census_device(entry: dict) -> str:
    """Where a figure's census is taken: a GPU figure's on the stand-in, a CPU figure's on the CPU."""
    return devices.STAND_IN if entry["device"] == "GPU" else "cpu"


def _census_of(taken: dict) -> dict:
    """What standin.take returned, or ValueError with the reason when the point was skipped or failed."""
    why = taken.get("skipped") or taken.get("error")
    if why:
        raise ValueError(why)
    return taken


def predicted_quantity(replica: Replica, samples: list[float], at: dict) -> float:
    """The published quantity from the predicted samples of `census_points` (one, or one per fitted value),
    `at` the published figure's params."""
    if replica.fit is None:
        return replica.scale * samples[0]
    fit = replica.fit
    coefficients = fit.fit([fit.terms(v) for v in fit.censused], samples)
    value = at[fit.param]
    return replica.scale * sum(float(c) * t for c, t in zip(coefficients, fit.terms(value)))


# -- validation -------------------------------------------------------------------------------------------
def _row(entry: dict, replica: Declaration | None, target_title: str = "", assumed: bool = False,
         note: str = "") -> dict:
    return {"id": entry["id"], "experiment": entry["experiment"], "quantity": entry["quantity"],
            "device": entry["device"], "target": target_title, "assumed": assumed, "assumption": note,
            "published": float(entry["value"]), "predicted": math.nan, "unit": entry["unit"],
            "ratio": math.nan, "within_2x": False,
            "how": replica.how if isinstance(replica, (Replica, Speedup)) else "",
            "method": replica.method if isinstance(replica, (Replica, Speedup)) else "", "error": None}


def _validated(entry: dict, replica: Declaration | None, censuses: standin.Censuses, experiment: Presented) -> dict:
    if replica is None:
        return _row(entry, None) | {"error": f"{entry['experiment']}/writeup.py declares no replica"}
    if isinstance(replica, Unreplicated):
        return _row(entry, replica) | {"error": f"not replicated: {replica.why}"}
    target, assumed, note = figure_target(entry)
    row = _row(entry, replica, target.title, assumed, note)
    try:
        config = experiment.config(replica.preset, replica.overrides)
        if isinstance(replica, Speedup):
            predicted = _speedup(replica, experiment, config, target, censuses)
        else:
            samples = [_sample(experiment, point, config, target, censuses)
                       for point in census_points(replica, census_device(entry))]
            predicted = predicted_quantity(replica, samples, entry["params"])
    except ValueError as e:  # a skipped or failed census, a census the model refuses (PredictionError)
        return row | {"error": str(e)}
    ratio = predicted / row["published"]
    if isinstance(replica, Replica) and replica.method_adds and ratio > 1:
        row["method"] = f"{row['method']} {ADDS_NOT_ABOVE}"
    return row | {"predicted": predicted, "ratio": ratio, "within_2x": 1 / WITHIN <= ratio <= WITHIN}


def _sample(experiment: Experiment, point: Point, config: dict, target: hardware.Target,
            censuses: standin.Censuses) -> float:
    return costmodel.predict(_census_of(censuses.get(experiment, point, config)), target).seconds


def _speedup(speedup: Speedup, experiment: Experiment, config: dict, target: hardware.Target,
             censuses: standin.Censuses) -> float:
    """The CPU side's predicted sample on the target's host over the GPU side's on the target."""
    cpu, gpu = speedup.points()
    return (_sample(experiment, cpu, config, hardware.Target(target.host), censuses)
            / _sample(experiment, gpu, config, target, censuses))


def validate(experiments: Mapping[str, Presented], progress: Callable = None, take: Callable[[Experiment, Point, dict], dict] = None,
             only: Iterable[str] = None) -> pd.DataFrame:
    """One row per published figure of these experiments (the registry's, by name) the model predicts (`figures`, COLUMNS; `only` these ids when given): its
    prediction on the write-up's hardware beside the published figure. `progress(point)` is told of each census
    taken; `take` replaces standin.take (tests). The frame's attrs hold the seconds it took and the censuses taken."""
    wanted = None if only is None else set(only)
    unknown = sorted((wanted or set()) - {entry["id"] for entry in figures()})
    if unknown:
        raise ValueError(f"only: {', '.join(unknown)} is no published timing figure or speedup")
    started = time.perf_counter()
    censuses = standin.Censuses(take, progress, CENSUS_THREADS)
    frame = pd.DataFrame([_validated(entry, replica, censuses, experiments[entry["experiment"]])
                          for entry, replica in replicas(experiments)
                          if wanted is None or entry["id"] in wanted], columns=list(COLUMNS))
    frame.attrs["seconds"] = time.perf_counter() - started
    frame.attrs["censuses"] = len(censuses.taken)
    return frame


def summary(frame: pd.DataFrame, device: str = "GPU", unit: str = TIMING_UNIT) -> dict:
    """How close the predictions of one device's figures in `unit` (timings, or speedups) came: how many were
    predicted, the share within 2x of the published figure, the median ratio and the worst figure (the ratio
    farthest from 1)."""
    rows = frame[(frame["device"] == device) & (frame["unit"] == unit) & frame["ratio"].notna()]
    if rows.empty:
        return {"device": device, "figures": 0, "within_2x": None, "median_ratio": None, "worst": None}
    worst = rows.loc[rows["ratio"].map(lambda r: abs(math.log(r)) if r > 0 else math.inf).idxmax()]
    return {"device": device, "figures": len(rows), "within_2x": float(rows["within_2x"].mean()),
            "median_ratio": float(statistics.median(rows["ratio"])),
            "worst": {"id": worst["id"], "ratio": float(worst["ratio"])}}


def summary_text(frame: pd.DataFrame, device: str = "GPU", unit: str = TIMING_UNIT) -> str:
    found = summary(frame, device, unit)
    speedups = unit == SPEEDUP_UNIT
    if not found["figures"]:
        return f"no {device} {'speedup' if speedups else 'figure'} predicted"
    return (f"{device}{' speedups' if speedups else ''}: {found['within_2x']:.0%} of {found['figures']} figures "
            f"within {WITHIN:g}x, median ratio {found['median_ratio']:.2f}, worst {found['worst']['id']} "
            f"(x{found['worst']['ratio']:.2f})")


def report_text(frame: pd.DataFrame) -> str:
    """The table (id, published, predicted, ratio, the hardware: named by the write-up or assumed) and the
    summaries, for a terminal."""
    width = max([len("id"), *frame["id"].map(len)])
    lines = [f"{'id':<{width}}  {'published':>10}  {'predicted':>10}  {'unit':<4}  {'ratio':>7}  {'hardware':<8}  target"]
    for _, row in frame.iterrows():
        unit = row["unit"]  # TIMING_UNIT (seconds) or SPEEDUP_UNIT (times faster)
        if pd.isna(row["predicted"]):
            lines.append(f"{row['id']:<{width}}  {row['published']:>10.4g}  {'-':>10}  {unit:<4}  {'-':>7}  {'':<8}  "
                         f"{row['error']}")
            continue
        lines.append(f"{row['id']:<{width}}  {row['published']:>10.4g}  {row['predicted']:>10.4g}  {unit:<4}  "
                     f"{row['ratio']:>7.2f}  {'assumed' if row['assumed'] else 'named':<8}  {row['target']}")
    lines += [summary_text(frame, "GPU"), summary_text(frame, "CPU"), summary_text(frame, "GPU", SPEEDUP_UNIT)]
    if frame.attrs.get("seconds") is not None:
        lines.append(f"{frame.attrs.get('censuses', 0)} censuses in {frame.attrs['seconds']:.0f} s")
    return "\n".join(lines)


# -- the stored table -------------------------------------------------------------------------------------
def path(machine_id: str = None) -> Path:
    """results/<machine id>/predictions/writeups.json (this machine's by default)."""
    return settings.results_dir() / (machine_id or devices.fingerprint()["machine_id"]) / SUBFOLDER / FILE_NAME


def _plain(value):
    """A cell as JSON holds it: a missing number as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if hasattr(value, "item") else value


def save(frame: pd.DataFrame) -> Path:
    """Write the table with the code version and the date, atomically; refused when read-only."""
    settings.require_writable("saving the write-up validation")
    target = path()
    files.write_atomic(target, {
        "schema": SCHEMA_VERSION, "machine_id": target.parent.parent.name, "code_version": versions.code_version(),
        "taken": results.now(), "seconds": frame.attrs.get("seconds"), "censuses": frame.attrs.get("censuses"),
        "figures": [{column: _plain(row[column]) for column in COLUMNS} for _, row in frame.iterrows()]})
    return target


def load(machine_id: str = None) -> pd.DataFrame:
    """The saved table (COLUMNS; a missing number as NaN), its code version, date and seconds in attrs;
    ValueError saying why when there is none or it is not one."""
    where = path(machine_id)
    try:
        data = json.loads(files.read_regular_file(where)[0])
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION or not isinstance(data.get("figures"), list):
        raise ValueError(f"{where}: not a write-up validation of schema {SCHEMA_VERSION}")
    missing = [c for c in COLUMNS if any(not isinstance(f, dict) or c not in f for f in data["figures"])]
    if missing:
        raise ValueError(f"{where}: a figure lacks the column '{missing[0]}'")
    frame = pd.DataFrame(data["figures"], columns=list(COLUMNS))
    for column in ("published", "predicted", "ratio"):
        frame[column] = pd.to_numeric(frame[column]).astype(float)
    frame.attrs.update({k: data.get(k) for k in ("machine_id", "code_version", "taken", "seconds", "censuses")})
    return frame


class UnreadableTable(UserWarning):
    """A saved write-up validation that latest() skipped: broken, foreign or not a regular file."""


def latest() -> pd.DataFrame | None:
    """This machine's saved table, or else the latest another machine saved (the figures are predicted on the
    write-ups' hardware either way); None when no machine has saved a readable one. A saved file that cannot be
    read (broken, foreign, not a regular file) is skipped with a warning naming it and why."""
    folder = settings.results_dir()
    here = devices.fingerprint()["machine_id"]
    loaded = []
    for machine_id in sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        if not os.path.lexists(path(machine_id)):  # none saved there
            continue
        try:
            loaded.append(load(machine_id))
        except ValueError as e:
            warnings.warn(f"The saved write-up validation cannot be read: {e}", UnreadableTable, stacklevel=2)
    if not loaded:
        return None
    return max(loaded, key=lambda f: (f.attrs.get("machine_id") == here, f.attrs.get("taken") or ""))
