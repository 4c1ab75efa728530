"""Shared chart pieces: measured series against a swept size, with the published figures beside them."""
import math

import altair as alt
import pandas as pd

from core import breakdown
from core.analysis import ok

LEGEND = alt.Legend(labelLimit=0)  # series names are long (variant, device, machine): never cut them
MEASURED_TOOLTIP = ["machine", "device_name", "variant", "median_s", "iqr_s", "noisy", "n", "per_sample", "preset", "run_id"]


def series_label(rows: pd.DataFrame) -> pd.Series:
    """'variant · device (machine)', so runs from several machines stay apart."""
    return rows["variant"] + " · " + rows["device"] + " (" + rows["machine_id"].str[:18] + ")"


def scale(log: bool) -> alt.Scale:
    return alt.Scale(type="log") if log else alt.Scale(zero=False)


def measured_lines(rows: pd.DataFrame, x: str, y: str, *, title: str, x_title: str, y_title: str,
                   log_x: bool = True, log_y: bool = True, tooltip: list[str] = ()) -> alt.Chart:
    """One line per variant, device and machine: y against x, raw figures in the tooltip."""
    data = ok(rows).assign(series=series_label)
    return alt.Chart(data, title=title).mark_line(point=True).encode(
        x=alt.X(f"{x}:Q", title=x_title, scale=scale(log_x)),
        y=alt.Y(f"{y}:Q", title=y_title, scale=scale(log_y)),
        color=alt.Color("series:N", title="measured", legend=LEGEND),
        tooltip=[x, y, *tooltip, *MEASURED_TOOLTIP],
    )


def published_points(published: pd.DataFrame, x: str, y: str = "value") -> alt.Chart:
    """The write-up's figures as large open diamonds, labelled 'published · device'."""
    data = published.assign(series="published · " + published["device"])
    return alt.Chart(data).mark_point(shape="diamond", size=140, filled=False, strokeWidth=2).encode(
        x=f"{x}:Q", y=f"{y}:Q", color=alt.Color("series:N", legend=LEGEND),
        tooltip=[x, y, "device", "hardware", "source", "note"],
    )


def grouped_bars(data: pd.DataFrame, x: str, y: str, group: str, *, title: str, y_title: str,
                 log_y: bool = False, tooltip: list[str] = ()) -> alt.Chart:
    """Bars of y per x, one bar per group (measured and published series side by side). Repeated
    runs of one bar are summarised by their median (with their count, as `runs`), never stacked."""
    tooltip = [t for t in tooltip if t not in (x, y, group)]
    if data.duplicated([x, group]).any():
        data = data.groupby([x, group], as_index=False, dropna=False).agg(
            **{y: (y, "median"), "runs": (y, "size")}, **{t: (t, "first") for t in tooltip if t != "runs"})
        tooltip = ["runs", *[t for t in tooltip if t != "runs"]]
    chart = alt.Chart(data, title=title).mark_bar().encode(
        x=alt.X(f"{x}:N", title=x),
        xOffset=f"{group}:N",
        y=alt.Y(f"{y}:Q", title=y_title, scale=scale(log_y), stack=None),
        color=alt.Color(f"{group}:N", title="series", legend=LEGEND),
        tooltip=[x, y, group, *tooltip],
    )
    positive = data[y][data[y] > 0]
    if log_y and len(positive):  # a log axis has no zero: start the bars a decade below the smallest
        chart = chart.encode(y2=alt.datum(10 ** math.floor(math.log10(positive.min()))))
    return chart


# The parts of a measured breakdown, in stacking order, with a fixed colour each.
PART_COLOURS = {"compute": "#4c78a8", "copies": "#f58518", "sync": "#e45756", "loading": "#72b7b2",
                "host": "#b9b9b9"}
TIME_PARTS = {part: (breakdown.LABELS[part], PART_COLOURS[part]) for part in breakdown.PARTS}


def where_time_goes(rows: pd.DataFrame, counts: pd.Series, unit: str) -> alt.Chart:
    """One bar per row (a device and variant of one configuration), split into the measured parts of
    one `unit`, on an axis that starts at zero; each bar's label carries its `counts` (same index)."""
    bars = rows.assign(bar=series_label(rows) + "\n" + counts.reindex(rows.index).fillna(""),
                       per_call=rows["per_call"].fillna(1))
    scale_name, factor = _time_unit((bars["median_s"] / bars["per_call"]).max())
    long = bars.melt(id_vars=["bar", "per_call", "median_s"], value_vars=[f"time_{p}_s" for p in TIME_PARTS],
                     var_name="part", value_name="seconds")
    long["part"] = long["part"].str.removeprefix("time_").str.removesuffix("_s").map(lambda p: TIME_PARTS[p][0])
    long["time"] = long["seconds"] / long["per_call"] * factor
    long["share"] = long["seconds"] / long["median_s"]
    long["order"] = long["part"].map({label: i for i, (label, _) in enumerate(TIME_PARTS.values())})
    labels, colours = zip(*TIME_PARTS.values())
    return alt.Chart(long[["bar", "part", "time", "share", "order"]]).mark_bar().encode(
        x=alt.X("time:Q", title=f"{scale_name} per {unit} (measured median, split by the profiler)",
                scale=alt.Scale(zero=True), stack="zero"),
        y=alt.Y("bar:N", title=None, sort=list(bars["bar"]),
                axis=alt.Axis(labelLimit=0, labelExpr="split(datum.label, '\\n')")),
        order="order:Q",
        color=alt.Color("part:N", title="part", scale=alt.Scale(domain=list(labels), range=list(colours)),
                        legend=alt.Legend(orient="bottom", columns=2, labelLimit=0)),
        tooltip=["bar", "part", alt.Tooltip("time:Q", title=scale_name, format=".3~g"),
                 alt.Tooltip("share:Q", format=".0%")],
    ).properties(height=alt.Step(46))


def _time_unit(seconds: float) -> tuple[str, float]:
    """The unit an axis of times up to `seconds` reads best in, and its factor from seconds."""
    if seconds < 1e-3:
        return "microseconds", 1e6
    return ("milliseconds", 1e3) if seconds < 1 else ("seconds", 1.0)
