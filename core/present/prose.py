"""Measured figures in the prose of an experiment's about.md: `{measured:FIELD|key=value|...}` becomes
that figure of the experiment's rows frame (core.store.results.rows_frame), so the text states what was
measured rather than what someone remembers.

FIELD is one of FIELDS: a census count or size (`census_operations`, `census_kernels`, `census_syncs`,
`census_copies`, `census_h2d_bytes`, `census_d2h_bytes`, `census_flops`, `census_bytes_moved`), all of
them at once (`census`), the most frequent operations (`top`), a part of the profiler's breakdown
(`time_compute_s` ... `time_host_s`, `time_profiled_s`), the median (`median_s`), a part's share of the
breakdown (`share:compute`, `share:copies`, `share:sync`, `share:loading`, `share:host`), or one of a few
metrics with a unit (`gb_per_s`, `gflop_per_s`, `first_epoch_s`).
Each `key=value` picks rows: `variant=as written`; `device=cpu`, `cuda`, `mps`, `gpu` (any accelerator)
or a device name (`cuda:1`); any swept parameter of the points (`batch_size=512`). `per=steps_per_epoch`
(or `batches_per_epoch`) divides by that column as well, to state a figure per step (per batch).

Rows: the measured points of the latest complete runs (core.present.analysis.latest) that match, on this machine
when it measured any, else on the machine that measured last; of that machine, the configuration run
last. Census and time figures are per sample; a row whose sample holds `per_call` > 1 units is divided
by `per_call`, so each figure reads per unit ("per epoch"). Points that differ give a range ("38 to 45
operations per step, depending on rows"). Under the filled section a line says where the figures were
measured and how they were divided. A placeholder nothing matches reads "*not measured yet*", and that
line says how to measure it. A placeholder that cannot be filled in any run (unknown field, key,
variant, or values no planned point has) raises PlaceholderError when the text is loaded."""
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import pandas as pd

from core import devices, settings
from core.present import analysis

PLACEHOLDER = re.compile(r"\{measured:([^{}]*)\}")
NOT_MEASURED = "*not measured yet*"
PARTS = ("compute", "copies", "sync", "loading", "host")
DEVICE_KINDS = ("cpu", "cuda", "mps", "gpu")
DIVISORS = {"steps_per_epoch": "step", "batches_per_epoch": "batch"}  # per=COLUMN: the noun of one unit
RESERVED_KEYS = ("variant", "device", "per")


class PlaceholderError(ValueError):
    """A placeholder that can never be filled; the message names it and what is allowed."""


# -- how figures read ---------------------------------------------------------------------------------
def _count(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    return str(int(v)) if v == int(v) else f"{v:.3g}"


def _scaled(v: float, steps: tuple[tuple[float, str], ...]) -> str:
    for size, name in steps:
        if abs(v) >= size:
            return f"{v / size:.3g} {name}"
    return f"{v / steps[-1][0]:.3g} {steps[-1][1]}"


def _bytes(v: float) -> str:
    return _scaled(v, ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1, "B")))


def _flop(v: float) -> str:
    return _scaled(v, ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP"), (1, "FLOP")))


def _seconds(v: float) -> str:
    return _scaled(v, ((1, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")))


def _percent(v: float) -> str:
    return f"{100 * v:.0f}%" if v >= 0.1 else f"{100 * v:.2g}%"


def _span(values: np.ndarray, show: Callable[[float], str]) -> str:
    """One figure, or 'low to high' when the rows differ."""
    low, high = float(np.min(values)), float(np.max(values))
    return show(low) if np.isclose(low, high, rtol=1e-9, atol=0) else f"{show(low)} to {show(high)}"


def _noun(values: np.ndarray, singular: str, plural: str) -> str:
    one = len(values) and np.all(values == 1)
    return f"{_span(values, _count)} {singular if one else plural}"


@dataclass(frozen=True)
class Field:
    """A figure prose can state: the columns it reads, how it reads, and whether it is divided per unit."""
    columns: tuple[str, ...]
    show: Callable[..., str]
    per_unit: bool = True


def _census(ops, kernels, syncs, copies, h2d, d2h) -> str:
    moved = f" ({_span(h2d, _bytes)} to the device, {_span(d2h, _bytes)} to the host)" if np.any(copies > 0) else ""
    return (f"{_noun(ops, 'operation', 'operations')}, {_noun(kernels, 'kernel', 'kernels')}, "
            f"{_noun(syncs, 'host sync', 'host syncs')} and {_noun(copies, 'copy', 'copies')}{moved}")


CENSUS_PARTS = ("census_operations", "census_kernels", "census_syncs", "census_copies", "census_h2d_bytes",
                "census_d2h_bytes")
FIELDS = {
    "census_operations": Field(("census_operations",), lambda v: _noun(v, "operation", "operations")),
    "census_kernels": Field(("census_kernels",), lambda v: _noun(v, "kernel", "kernels")),
    "census_syncs": Field(("census_syncs",), lambda v: _noun(v, "host sync", "host syncs")),
    "census_copies": Field(("census_copies",), lambda v: _noun(v, "host-device copy", "host-device copies")),
    "census_h2d_bytes": Field(("census_h2d_bytes",), lambda v: f"{_span(v, _bytes)} copied to the device"),
    "census_d2h_bytes": Field(("census_d2h_bytes",), lambda v: f"{_span(v, _bytes)} copied to the host"),
    "census_flops": Field(("census_flops",), lambda v: _span(v, _flop)),
    "census_bytes_moved": Field(("census_bytes_moved",), lambda v: f"{_span(v, _bytes)} read and written"),
    "census": Field(CENSUS_PARTS, _census),
    "median_s": Field(("median_s",), lambda v: _span(v, _seconds)),
    **{f"time_{part}_s": Field((f"time_{part}_s",), lambda v: _span(v, _seconds)) for part in (*PARTS, "profiled")},
    **{f"share:{part}": Field(tuple(f"time_{p}_s" for p in PARTS),
                              lambda *parts, i=i: _span(parts[i] / np.sum(parts, axis=0), _percent), per_unit=False)
       for i, part in enumerate(PARTS)},
    "gb_per_s": Field(("gb_per_s",), lambda v: f"{_span(v, lambda x: f'{x:.3g}')} GB/s", per_unit=False),
    "gflop_per_s": Field(("gflop_per_s",), lambda v: f"{_span(v, lambda x: f'{x:.3g}')} GFLOP/s", per_unit=False),
    "first_epoch_s": Field(("first_epoch_s",), lambda v: _span(v, _seconds), per_unit=False),
}
TOP = "top"   # the most frequent operations of one point: census_top_by_count
TOP_SHOWN = 3


# -- placeholders ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Placeholder:
    source: str                      # as written, braces included
    field: str
    filters: tuple[tuple[str, object], ...] = ()
    per: str | None = None

    def wanted(self, key: str):
        return dict(self.filters).get(key)


def parse(source: str) -> Placeholder:
    """`{measured:FIELD|key=value|...}` as a Placeholder; PlaceholderError names what is wrong."""
    match = PLACEHOLDER.fullmatch(source)
    if not match:
        raise PlaceholderError(f"{source}: not a placeholder; write {{measured:FIELD|key=value|...}}")
    name, *pairs = [part.strip() for part in match.group(1).split("|")]
    if name not in FIELDS and name != TOP:
        raise PlaceholderError(f"{source}: unknown field '{name}'; known: {', '.join([*FIELDS, TOP])}")
    filters, per = {}, None
    for pair in pairs:
        key, sep, value = (s.strip() for s in pair.partition("="))
        if not sep or not key or not value:
            raise PlaceholderError(f"{source}: '{pair}' is not key=value")
        if key in filters or (key == "per" and per):
            raise PlaceholderError(f"{source}: '{key}' is given twice")
        if key == "per":
            if value not in DIVISORS:
                raise PlaceholderError(f"{source}: per={value} is not allowed; per= takes {', '.join(DIVISORS)}")
            per = value
        elif key == "device" and value not in DEVICE_KINDS and not re.fullmatch(r"(cuda|mps):\d+", value):
            raise PlaceholderError(f"{source}: device={value} is not a device; use {', '.join(DEVICE_KINDS)} "
                                   "or a name such as cuda:1")
        else:
            filters[key] = value if key in RESERVED_KEYS else _value(value)
    return Placeholder(source, name, tuple(filters.items()), per)


def _value(text: str):
    """A parameter value as written: a number, true/false, or text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return float(text)
    except ValueError:
        return text


def _same(cell, wanted) -> bool:
    if isinstance(wanted, bool) or isinstance(cell, (bool, np.bool_)):
        return isinstance(cell, (bool, np.bool_)) and bool(cell) == wanted
    if isinstance(wanted, float):
        return isinstance(cell, (int, float, np.number)) and float(cell) == wanted
    return str(cell) == wanted


def _device_matches(device: str, wanted: str) -> bool:
    if wanted == "gpu":
        return devices.is_accelerator(device)
    return devices.kind(device) == wanted if wanted in DEVICE_KINDS else device == wanted


@lru_cache(maxsize=32)
def planned_points(experiment, presets: tuple[str, ...]) -> tuple[dict, ...]:
    """Every point the experiment plans in any preset on a CPU, a CUDA GPU or an Apple GPU: its variant,
    device and swept parameters. What a placeholder can ever match."""
    return tuple({"variant": p.variant, "device": p.device, **p.params}
                 for preset in presets for device in ("cpu", "cuda:0", "mps")
                 for p in experiment.points(experiment.config(preset), device))


def check(placeholder: Placeholder, points: tuple[dict, ...]) -> None:
    """PlaceholderError unless some planned point matches every filter of the placeholder."""
    variants = sorted({p["variant"] for p in points})
    wanted = placeholder.wanted("variant")
    if wanted is not None and wanted not in variants:
        raise PlaceholderError(f"{placeholder.source}: no variant '{wanted}'; variants: {', '.join(variants)}")
    keys = sorted({k for p in points for k in p} - {"variant", "device"})
    unknown = [k for k, _ in placeholder.filters if k not in RESERVED_KEYS and k not in keys]
    if unknown:
        raise PlaceholderError(f"{placeholder.source}: '{unknown[0]}' is not a parameter of any point; "
                               f"parameters: {', '.join(keys)}")
    if not any(_point_matches(p, placeholder) for p in points):
        raise PlaceholderError(f"{placeholder.source}: no planned point (any preset, any device) has these values")


def _point_matches(point: dict, placeholder: Placeholder) -> bool:
    for key, wanted in placeholder.filters:
        if key == "device":  # a plan names one device of each kind: cuda:1 is planned when cuda:0 is
            if not _device_matches(point["device"], devices.kind(wanted) if ":" in wanted else wanted):
                return False
        elif key not in point or not _same(point[key], wanted):
            return False
    return True


# -- filling ----------------------------------------------------------------------------------------------
@dataclass
class Notes:
    """What the line under a filled section says: where figures come from, how they were divided, and
    whether any is missing."""
    sources: dict
    divisions: dict
    missing: set

    def text(self, experiment: str | None) -> str:
        lines = []
        if self.sources:
            divided = f"; {'; '.join(self.divisions)}" if self.divisions else ""
            lines.append(f"_Figures above: measured on {'; '.join(self.sources)}{divided}._")
        if self.missing:
            command = f"`python -m core run {experiment} --preset quick`" if experiment else "a run of this experiment"
            gpu = " (GPU figures on a machine with a GPU)" if "gpu" in self.missing else ""
            unbalanced = (" A breakdown whose parts did not add up to the median was left out."
                          if "adds up" in self.missing else "")
            lines.append(f"_Figures marked not measured yet appear after {command}{gpu}.{unbalanced}_")
        return "\n\n".join(lines)


def fill(text: str, rows: pd.DataFrame | None, experiment: str | None = None, points: tuple[dict, ...] = None,
         this_machine: str | None = None) -> str:
    """`text` with every placeholder checked (against `points`, when given) and filled from `rows`, with
    the line that says where its figures come from. Raises PlaceholderError on a bad placeholder."""
    try:
        placeholders = _checked(text, points)
    except PlaceholderError as e:
        raise PlaceholderError(f"about.md of {experiment}: {e}" if experiment else str(e)) from None
    if not placeholders:
        return text
    data = _candidates(rows, experiment)
    notes = Notes({}, {}, set())
    filled = PLACEHOLDER.sub(lambda m: _figure(parse(m.group(0)), data, this_machine, notes), text)
    return f"{filled}\n\n{notes.text(experiment)}"


def _checked(text: str, points: tuple[dict, ...] | None) -> list[Placeholder]:
    stray = PLACEHOLDER.sub("", text)
    if "{measured" in stray:
        where = stray.index("{measured")
        raise PlaceholderError(f"unclosed placeholder {stray[where:where + 60]!r}")
    placeholders = [parse(m.group(0)) for m in PLACEHOLDER.finditer(text)]
    for placeholder in placeholders if points else ():
        check(placeholder, points)
    return placeholders


def _candidates(rows: pd.DataFrame | None, experiment: str | None) -> pd.DataFrame:
    if rows is None or rows.empty:
        return pd.DataFrame()
    data = analysis.latest(rows)
    if experiment and "experiment" in data.columns:
        data = data[data["experiment"] == experiment]
    return data


def choose(data: pd.DataFrame, placeholder: Placeholder, this_machine: str | None) -> pd.DataFrame:
    """The rows a placeholder states: matching ones with its field measured, of this machine when it has
    any (else the machine measured last), of that machine's configuration run last."""
    columns = _columns(placeholder)
    if data.empty or not set(columns) <= set(data.columns):
        return data.iloc[0:0]
    mask = data[list(columns)].notna().all(axis=1)
    if _timed(placeholder) and "breakdown_adds_up" in data.columns:
        mask &= data["breakdown_adds_up"].eq(True)  # parts that miss the median say nothing of its shares
    for key, wanted in placeholder.filters:
        if key == "variant":
            mask &= data["variant"] == wanted
        elif key == "device":
            mask &= data["device"].map(lambda d: _device_matches(d, wanted)).astype(bool)
        elif key in data.columns:
            mask &= data[key].map(lambda v: _same(v, wanted)).astype(bool)
        else:
            return data.iloc[0:0]
    found = data[mask].sort_values("started", kind="stable")
    if found.empty:
        return found
    machine = this_machine if this_machine in set(found["machine_id"]) else found["machine_id"].iloc[-1]
    found = found[found["machine_id"] == machine]
    return found[found["config_id"] == found["config_id"].iloc[-1]]


def _timed(placeholder: Placeholder) -> bool:
    return any(c.startswith("time_") for c in _columns(placeholder))


def _columns(placeholder: Placeholder) -> tuple[str, ...]:
    own = ("census_top_by_count",) if placeholder.field == TOP else FIELDS[placeholder.field].columns
    return own + ((placeholder.per,) if placeholder.per else ())


def _figure(placeholder: Placeholder, data: pd.DataFrame, this_machine: str | None, notes: Notes) -> str:
    chosen = choose(data, placeholder, this_machine)
    if chosen.empty:
        wanted = placeholder.wanted("device")
        notes.missing.add("gpu" if wanted and wanted != "cpu" else "cpu")
        if _timed(placeholder) and not choose(data.drop(columns="breakdown_adds_up", errors="ignore"),
                                              placeholder, this_machine).empty:
            notes.missing.add("adds up")
        return NOT_MEASURED
    notes.sources.setdefault(_source(chosen, this_machine), None)
    field = FIELDS.get(placeholder.field)
    if field and not field.per_unit:
        return _stated(field, [chosen[c].to_numpy(dtype=float) for c in field.columns], chosen)
    divisor, per = _divisor(chosen, placeholder, notes)
    if placeholder.field == TOP:
        return _top(chosen, divisor, per)
    return _stated(field, [chosen[c].to_numpy(dtype=float) / divisor for c in field.columns], chosen, per)


def _stated(field: Field, values: list[np.ndarray], chosen: pd.DataFrame, per: str | None = None) -> str:
    """The field's text, per unit when `per` is given, naming what the rows differ in when their figures do."""
    differ = any(not np.isclose(v.min(), v.max(), rtol=1e-9, atol=0) for v in values)
    varying = _varying(chosen) if differ else []
    text = f"{field.show(*values)} per {per}" if per else field.show(*values)
    return f"{text}, depending on {' and '.join(varying)}" if varying else text


def _divisor(chosen: pd.DataFrame, placeholder: Placeholder, notes: Notes) -> tuple[np.ndarray, str]:
    """What each row's per-sample figures are divided by, and the unit they are then per."""
    per_call = chosen.get("per_call", pd.Series(1, index=chosen.index)).fillna(1).to_numpy(dtype=float)
    units = chosen["unit"].dropna() if "unit" in chosen else ()
    unit = units.iloc[0] if len(units) else "sample"
    for calls in sorted(set(per_call) - {1.0}):
        notes.divisions.setdefault(f"per-{unit} figures are one sample ({calls:,.0f} {unit}s) divided by "
                                   f"{calls:,.0f}", None)
    if not placeholder.per:
        return per_call, unit
    noun = DIVISORS[placeholder.per]
    notes.divisions.setdefault(f"per-{noun} figures are divided by the {placeholder.per.replace('_', ' ')}", None)
    return per_call * chosen[placeholder.per].to_numpy(dtype=float), noun


def _top(chosen: pd.DataFrame, divisor: np.ndarray, per: str) -> str:
    """The most frequent operations of the first chosen point (saying which, when several matched)."""
    row = chosen.iloc[0]
    ops = ", ".join(f"`{entry['op']}` ({_count(entry['count'] / divisor[0])})"
                    for entry in list(row["census_top_by_count"])[:TOP_SHOWN])
    varying = _varying(chosen)
    at = f" (at {', '.join(f'{k}={_params(row).get(k, row.get(k))}' for k in varying)})" if varying else ""
    return f"{ops} per {per}{at}"


def _varying(chosen: pd.DataFrame) -> list[str]:
    """The device and swept parameters that differ among the chosen rows."""
    params = [_params(row) | {"device": row["device"]} for _, row in chosen.iterrows()]
    keys = dict.fromkeys(k for p in params for k in p)
    return [k for k in keys if len({json.dumps(p.get(k), sort_keys=True, default=str) for p in params}) > 1]


def _params(row: pd.Series) -> dict:
    return json.loads(row["point"]) if isinstance(row.get("point"), str) else {}


def _source(chosen: pd.DataFrame, this_machine: str | None) -> str:
    """'cpu (Intel Xeon) of this machine, run `r1` (quick preset)'."""
    first = chosen.iloc[0]
    named = chosen.get("device_name", chosen["device"])
    names = dict.fromkeys(f"{d} ({n})" if isinstance(n, str) and n != d else d for d, n in zip(chosen["device"], named))
    machine = (settings.this_host() if first["machine_id"] == this_machine
               else first.get("machine") or first["machine_id"])
    runs = ", ".join(f"`{r}`" for r in dict.fromkeys(chosen["run_id"]))
    preset = f" ({first['preset']} preset)" if isinstance(first.get("preset"), str) else ""
    return f"{' and '.join(names)} of {machine}, run {runs}{preset}"
