"""Machines, or runs, side by side: per experiment their results on one chart and the ratio of each point
measured on both, with what differs between them spelled out (hardware, software, code) and a warning where
the runs compared were not configured alike.

A side is a machine (its latest complete run of each preset of each experiment, as the pages show by
default) or one run. Points match when they share the experiment, variant, device kind and swept
parameters; a ratio is the side's time per unit over the first side's (the baseline)."""
import json
from dataclasses import dataclass

import altair as alt
import pandas as pd

from core import devices, versions
from core.store import results, runs
from core.present.charts import category_dots, measured
from core.present.tables import seconds_text, value_text


@dataclass(frozen=True)
class Side:
    label: str
    records: tuple[dict, ...]


def machine_sides(records: list[dict], machine_ids: list[str]) -> list[Side]:
    """One side per machine: its default runs (the latest complete run of each preset) of every experiment."""
    frame = results.runs_frame(records)
    shown = set() if frame.empty else {
        run_id for _, part in frame.groupby("experiment") for run_id in runs.default_runs(part)}
    labels = {r["machine_id"]: devices.label(r["fingerprint"]) for r in records}
    names = _told_apart({m: runs.machine_text(labels[m]) if m in labels else m for m in machine_ids})
    return [Side(names[m], tuple(r for r in records if r["machine_id"] == m and r["run_id"] in shown))
            for m in machine_ids]


def run_sides(records: list[dict], run_ids: list[str]) -> list[Side]:
    """One side per run, named by its short label (preset, start, machine)."""
    by_id = {r["run_id"]: r for r in records}
    picked = [i for i in run_ids if i in by_id]
    names = runs.labels(results.runs_frame([by_id[i] for i in picked]), short=True)
    names = _told_apart({i: f"{names[i]} ({by_id[i]['experiment']})" for i in picked})
    return [Side(names[i], (by_id[i],)) for i in picked]


def _told_apart(names: dict[str, str]) -> dict[str, str]:
    """key -> name, the key added to every name that two keys share."""
    shared = {name for name in names.values() if list(names.values()).count(name) > 1}
    return {key: f"{name} ({key})" if name in shared else name for key, name in names.items()}


def rows(sides: list[Side], experiment: str) -> pd.DataFrame:
    """The measured points of `experiment` on every side, with `side`, `device_kind` and `per_unit_s` (the
    median time per unit: per sample, per epoch, as the experiment counts)."""
    frames = [results.rows_frame(list(side.records), experiment).assign(side=side.label) for side in sides]
    frames = [f for f in frames if len(f)]
    if not frames:
        return results.rows_frame([]).assign(side=[], device_kind=[], per_unit_s=[])
    frame = pd.concat(frames, ignore_index=True)
    frame = frame[(frame["point_status"] == "ok") & (frame["median_s"] > 0)]
    return frame.assign(device_kind=frame["device"].map(devices.kind),
                        per_unit_s=results.per_unit(frame["median_s"], frame["per_call"]))


def point_label(frame: pd.DataFrame) -> pd.Series:
    """'numpy · CPU · size=64': what a row measured, whatever machine measured it."""
    params = frame["point"].map(lambda p: results.point_text(json.loads(p)) if isinstance(p, str) else "")
    kind = frame["device_kind"].map(lambda k: "GPU" if k == "cuda" else k.upper())
    return (frame["variant"] + " · " + kind + " · " + params).str.rstrip(" ·")


def chart(frame: pd.DataFrame, title: str) -> alt.TopLevelMixin:
    """Every side's time per unit of each point, one row of dots per point, coloured by side, shaped by device."""
    data = measured(frame.assign(label=point_label(frame), series=frame["side"]), "per_unit_s")
    return category_dots(data.drop(columns="run").assign(variant=None), "label", "per_unit_s", title=title,
                         x_title=f"median time per {_unit(frame)} (log scale; further right is slower)",
                         tooltip=["side"])


def _unit(frame: pd.DataFrame) -> str:
    units = frame["unit"].dropna().unique()
    return units[0] if len(units) == 1 else "unit"


def ratios(frame: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Each point measured by the baseline side and another: both times per unit, their spread and samples,
    and the other's time over the baseline's (above 1: slower than the baseline). A side measuring a point in
    several runs counts its latest."""
    keys = ["variant", "device_kind", "point"]
    latest = frame.sort_values("started").drop_duplicates(["side", *keys], keep="last")
    base = latest[latest["side"] == baseline]
    others = latest[latest["side"] != baseline]
    pairs = others.merge(base, on=keys, suffixes=("", "_base"))
    if pairs.empty:
        return pd.DataFrame(columns=["point", "side", "baseline", "this side", "ratio"])
    return pd.DataFrame({
        "point": point_label(pairs).to_numpy(), "side": pairs["side"].to_numpy(),
        "baseline": [_time_text(m, q, n) for m, q, n in zip(
            pairs["per_unit_s_base"], results.per_unit(pairs["iqr_s_base"], pairs["per_call_base"]), pairs["n_base"])],
        "this side": [_time_text(m, q, n) for m, q, n in zip(
            pairs["per_unit_s"], results.per_unit(pairs["iqr_s"], pairs["per_call"]), pairs["n"])],
        "ratio": (pairs["per_unit_s"] / pairs["per_unit_s_base"]).to_numpy()})


def _time_text(median: float, iqr: float, n) -> str:
    spread = f"IQR {seconds_text(iqr)}, " if pd.notna(iqr) else ""
    return f"{seconds_text(median)} ({spread}n={value_text(n)})"


def ratio_table(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """The ratios for people: headings that say which way a ratio reads."""
    return table.assign(ratio=table["ratio"].map(lambda r: value_text(float(r)) + "×")).rename(columns={
        "point": "point (variant · device · parameters)", "baseline": f"baseline: {baseline}",
        "this side": "this side (median per unit)", "ratio": "this side / baseline (above 1: slower)"})


# -- what differs between the sides -------------------------------------------------------------------------------
FIELDS = {
    "CPU": devices.cpu_text,
    "physical / logical cores": lambda fp: f"{fp.get('cpu_physical_cores', '?')} / {fp['cpu_logical_cores']}",
    "torch threads": lambda fp: fp.get("torch_threads"),
    "memory (GiB)": lambda fp: fp.get("memory_gib"),
    "OS": lambda fp: fp.get("os"),
    "GPUs": lambda fp: ", ".join(f"{g['name']} ({g.get('memory_gib', '?')} GiB, cc {g.get('compute_capability', '?')})"
                                 for g in fp.get("gpus", [])) or "none",
    "GPU driver": lambda fp: ", ".join(sorted({str(g.get("cuda_driver")) for g in fp.get("gpus", [])})) or "none",
    "python": lambda fp: fp.get("python"),
    "torch": lambda fp: fp.get("torch"),
    "CUDA": lambda fp: fp.get("cuda") or "none",
    "cuDNN": lambda fp: fp.get("cudnn") or "none",
}


def _values(side: Side) -> dict[str, str]:
    """Each field's value on a side; where its runs differ (a torch upgraded between runs), every value."""
    found = {name: [get(r["fingerprint"]) for r in side.records] for name, get in FIELDS.items()}
    found["torch threads used"] = [int(t) for r in side.records for t in
                                   {row.get("torch_threads") for row in r["rows"]} if t is not None]
    found["code version"] = [versions.code_text(r.get("code_version") or {}) for r in side.records]
    return {name: " / ".join(map(str, dict.fromkeys(values))) or "—" for name, values in found.items()}


def differences(sides: list[Side]) -> tuple[pd.DataFrame, list[str]]:
    """The fields whose values differ between the sides (one row per field, one column per side), and the
    names of those that are the same on every side."""
    values = {side.label: _values(side) for side in sides}
    names = list(next(iter(values.values())))
    differing = [n for n in names if len({v[n] for v in values.values()}) > 1]
    table = pd.DataFrame({"what": differing} | {label: [v[n] for n in differing] for label, v in values.items()})
    return table, [n for n in names if n not in differing]


def warnings(sides: list[Side]) -> list[str]:
    """Per experiment, where the sides' runs differ in preset or configuration: which, and how."""
    said = []
    experiments = dict.fromkeys(r["experiment"] for side in sides for r in side.records)
    for experiment in experiments:
        ran = [(side.label, r) for side in sides for r in side.records if r["experiment"] == experiment]
        if len({label for label, _ in ran}) < 2:
            continue
        presets = {r["preset"] for _, r in ran}
        if len(presets) > 1:
            said.append(f"{experiment}: the runs compared used different presets ("
                        + "; ".join(f"{label}: {r['preset']}" for label, r in ran) + "): matching points are compared, "
                        "but repeats, warm-up and the points measured may differ.")
        by_preset = {}
        for _, r in ran:
            by_preset.setdefault(r["preset"], []).append(r)
        for preset, same in by_preset.items():
            keys = _differing_keys([r["config"] for r in same])
            if keys:
                said.append(f"{experiment} ({preset}): the runs compared were configured differently "
                            f"({', '.join(keys)} differ): a ratio compares points measured in different ways.")
    return said


def _differing_keys(configs: list[dict]) -> list[str]:
    keys = dict.fromkeys(k for c in configs for k in c if k != "variants")
    return [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]
