"""Shared chart pieces: measured series against a swept size, with the published figures beside them."""
import math

import altair as alt
import pandas as pd

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
