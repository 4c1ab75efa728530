"""Tables for people: human column names with units, figures to three significant figures, a dash where
there is no value, and a sentence saying what an empty table waits for. An experiment's TABLES wrap its
analysis functions in a `Table` (naming that table's own columns); `readable` formats any frame, and
`points_table` is the page's table of every measured point."""
import json
import math
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from core import devices
from core.store.results import BASE_COLUMNS

MISSING = "—"
NEEDS_GPU = "Waiting for a run on a GPU: none of the runs shown measured one."
NO_MATCH = "No matching points in the runs shown."
HIDDEN = ("machine_id", "config_id", "device_name")  # device_name joins the device; the others are for joins only

# Columns that mean the same in every table. Anything else reads as its words, a unit suffix in brackets.
NAMES = {
    "run_id": "Run", "machine": "Machine", "device": "Device", "variant": "Variant", "model": "Model",
    "batch_size": "Batch size", "rows": "Rows", "samples": "Samples", "epochs": "Epochs", "val": "val",
    "size": "Size", "speedup": "GPU speedup (CPU time / GPU time)", "sizes_compared": "Sizes compared",
    "smallest": "Smallest measured", "largest": "Largest measured", "final_mse": "Final MSE",
    "diverged": "Diverged", "seconds_per_epoch": "Time per epoch (s)", "median_s": "Median time per sample (s)",
    "iqr_s": "IQR (s)", "n": "Samples taken", "noisy": "Noisy", "point_status": "Status", "error": "Note",
}
WORDS = {"cpu": "CPU", "gpu": "GPU", "mse": "MSE", "gb": "GB", "gflop": "GFLOP", "us": "µs", "ms": "ms",
         "iqr": "IQR", "vs": "vs"}
UNITS = {"s": "s", "ms": "ms", "us": "µs", "ns": "ns", "gb": "GB", "bytes": "bytes", "pct": "%"}


def column_name(column: str, names: dict | None = None) -> str:
    """The heading of a column: from `names`, then NAMES, else its words with the unit suffix in brackets
    ('first_epoch_s' -> 'First epoch (s)', 'gb_per_s' -> 'GB/s'). A heading already written for people
    is kept."""
    found = (names or {}).get(column) or NAMES.get(column)
    if found or not re.fullmatch(r"[a-z0-9_]+", column):
        return found or column
    words = column.split("_")
    unit = UNITS[words.pop()] if len(words) > 1 and words[-1] in UNITS and words[-2] != "per" else None
    text = " ".join(WORDS.get(w, w) for w in words)
    text = text[:-len(" per s")] + "/s" if text.endswith(" per s") else text  # a rate: 'GB/s'
    text = text[:1].upper() + text[1:] if text[:1].isascii() else text  # not 'µs' -> 'Μs'
    return f"{text} ({unit})" if unit else text


def value_text(value, missing: str = MISSING, percent: bool = False) -> str:
    """A cell: three significant figures (whole numbers in full, with thousands separators), yes/no for a
    flag, `missing` for no value."""
    if value is None or (not isinstance(value, (str, list, tuple, dict, np.ndarray)) and pd.isna(value)):
        return missing
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    if isinstance(value, (float, np.floating)):
        return _number_text(float(value) * 100, "%") if percent else _number_text(float(value))
    return str(value)


def _number_text(x: float, suffix: str = "") -> str:
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return f"0{suffix}"
    rounded = round(x, 2 - math.floor(math.log10(abs(x))))
    if abs(rounded) >= 100 and float(rounded).is_integer():
        return f"{int(rounded):,}{suffix}"
    return f"{rounded:.3g}{suffix}"


def seconds_text(seconds) -> str:
    """A time with its unit, three significant figures: '132 ms', '4.1 µs', '2.5 min'."""
    if seconds is None or pd.isna(seconds):
        return MISSING
    for scale, unit in ((1e-6, "ns"), (1e-3, "µs"), (1.0, "ms")):
        if abs(seconds) < scale:
            return f"{_number_text(seconds * 1e3 / scale)} {unit}"
    return f"{_number_text(seconds)} s" if seconds < 120 else f"{_number_text(seconds / 60)} min"


def readable(frame: pd.DataFrame, names: dict | None = None, missing: dict | None = None,
             percent: tuple[str, ...] = (), run_names: dict | None = None) -> pd.DataFrame:
    """`frame` for people: the device joined with its name, the run named by `run_names` (dropped when
    there are none), the machine dropped when there is one, join keys hidden, headings from `names` and
    NAMES, every cell text. `missing` gives a column's text for no value (a crossover that never happens
    reads 'never'); `percent` columns are shares shown in %."""
    table = frame.copy()
    if {"device", "device_name"} <= set(table.columns):
        table["device"] = [d if pd.isna(n) or n == d else f"{d} ({n})"
                           for d, n in zip(table["device"], table["device_name"])]
    if "run_id" in table.columns:
        if run_names:
            table["run_id"] = table["run_id"].map(lambda r: run_names.get(r, r))
        else:
            table = table.drop(columns="run_id")
    if "machine" in table.columns and table["machine"].nunique() == 1:
        table = table.drop(columns="machine")  # one machine: the caption of the runs shown names it
    table = table.drop(columns=[c for c in HIDDEN if c in table.columns])
    for column in table.columns:
        text = (missing or {}).get(column, MISSING)
        table[column] = [value_text(v, text, column in percent) for v in table[column]]
    return table.rename(columns={c: column_name(c, names) for c in table.columns}).reset_index(drop=True)


@dataclass(frozen=True)
class Table:
    """A table of an experiment's TABLES: `make(rows)` (an analysis function, which keeps its columns for
    the claims and charts that use them) shown with readable(...) and this table's own headings; `needs_gpu`
    when it pairs GPU points, so that, empty, it says it waits for a GPU run."""
    make: Callable[[pd.DataFrame], pd.DataFrame]
    names: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)
    percent: tuple[str, ...] = ()
    needs_gpu: bool = False

    def __call__(self, rows: pd.DataFrame, run_names: dict | None = None) -> pd.DataFrame:
        return readable(self.make(rows), self.names, self.missing, self.percent, run_names)


def for_people(make, rows: pd.DataFrame, run_names: dict | None = None) -> pd.DataFrame:
    """A table of TABLES from `rows`: a Table with its headings, any other function's frame made readable."""
    if isinstance(make, Table):
        return make(rows, run_names)
    return readable(make(rows), run_names=run_names)


def empty_text(make, rows: pd.DataFrame) -> str:
    """What an empty table waits for: a GPU run when it needs one and the rows have no GPU point, else
    points that match it."""
    on_gpu = len(rows) and rows["device"].map(devices.is_accelerator).any()
    return NEEDS_GPU if isinstance(make, Table) and make.needs_gpu and not on_gpu else NO_MATCH


def points_table(rows: pd.DataFrame, run_names: dict | None = None) -> pd.DataFrame:
    """Every measured point, one line each: run (when several are shown), machine (when several), device,
    variant, the swept parameters, its time per sample with what a sample is, the spread, and the
    experiment's own scalar metrics. Samples, curves, surfaces, the census and the breakdown stay in the
    records and the CSV."""
    params = _param_columns(rows)
    metrics = [c for c in rows.columns if c not in BASE_COLUMNS and c not in params
               and not rows[c].map(lambda v: isinstance(v, (list, tuple, dict, np.ndarray))).any()]
    table = pd.DataFrame({
        "run_id": rows["run_id"], "machine": rows["machine"], "device": rows["device"],
        "device_name": rows["device_name"], "variant": rows["variant"], **{p: rows[p] for p in params},
        "Time per sample": rows["median_s"].map(seconds_text), "A sample is": rows["per_sample"],
        "IQR": rows["iqr_s"].map(seconds_text), "n": rows["n"], "noisy": rows["noisy"],
        "point_status": rows["point_status"], "error": rows["error"], **{m: rows[m] for m in metrics}})
    return readable(table, run_names=run_names if rows["run_id"].nunique() > 1 else None)


def _param_columns(rows: pd.DataFrame) -> list[str]:
    """The swept parameters, in the order the points name them."""
    found = {}
    for point in rows["point"].dropna().unique():
        found |= dict.fromkeys(json.loads(point))
    return [p for p in found if p in rows.columns]
