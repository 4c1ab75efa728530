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


# Measured series solid with filled points; predicted ones dashed with hollow points, the first grey.
MEASURED_COLOURS = ["#4c78a8", "#72b7b2", "#54a24b"]
PREDICTED_COLOURS = ["#7f7f7f", "#e45756", "#b279a2", "#f58518", "#9d755d", "#eeca3b", "#ff9da6", "#bab0ac",
                     "#d67195", "#439894"]


def measured_and_predicted(data: pd.DataFrame, x: str, *, title: str, x_title: str, y_title: str,
                           facet: str = None, tooltip: list[str] = ()) -> alt.TopLevelMixin:
    """Seconds per unit (`per_unit_s`) against `x`: one line per `series` (its legend label) and `line`
    (the other swept parameters, told apart by the points' shape). A series with `predicted` true is
    drawn dashed with hollow points so that it can never pass for a measurement. Axes are logarithmic
    where the values span a decade or more. With `facet`, one panel per value of that column."""
    data = data[data[x].notna() & (data["per_unit_s"] > 0)]
    measured = list(dict.fromkeys(data.loc[~data["predicted"], "series"]))
    predicted = list(dict.fromkeys(data.loc[data["predicted"], "series"]))
    colours = alt.Scale(domain=measured + predicted,
                        range=_cycle(MEASURED_COLOURS, len(measured)) + _cycle(PREDICTED_COLOURS, len(predicted)))
    encoding = dict(
        x=alt.X(f"{x}:Q", title=x_title, scale=_spanning(data[x]), axis=_ticks_at(data[x])),
        y=alt.Y("per_unit_s:Q", title=y_title, scale=_spanning(data["per_unit_s"])),
        color=alt.Color("series:N", title=None, scale=colours, legend=alt.Legend(orient="bottom", columns=1,
                                                                                labelLimit=0)),
        detail="line:N",
        tooltip=["series", x, alt.Tooltip("per_unit_s:Q", title="seconds per unit", format=".3~g"), *tooltip])
    shape = alt.Shape("line:N", title="configuration", legend=alt.Legend(orient="bottom", columns=1, labelLimit=0)
                      if data["line"].nunique() > 1 else None)
    solid, dashed = alt.datum.predicted == False, alt.datum.predicted == True  # noqa: E712 (Vega expressions)
    base = alt.Chart().encode(**encoding)
    layers = alt.layer(
        base.mark_line().transform_filter(solid),
        base.mark_point(filled=True, size=60).encode(shape=shape).transform_filter(solid),
        base.mark_line(strokeDash=[6, 4]).transform_filter(dashed),
        base.mark_point(filled=False, size=70, strokeWidth=2).encode(shape=shape).transform_filter(dashed),
        data=data)
    if facet:  # two panels a row, sized to sit side by side in the page's column
        return layers.properties(width=330, height=240).facet(
            facet=alt.Facet(f"{facet}:N", title=None), columns=2).properties(title=title)
    # fit the width only: fitting the height too (Streamlit's default) lets a long legend squash the plot
    return layers.properties(title=title, height=300, autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))


def _spanning(values: pd.Series) -> alt.Scale:
    """Logarithmic where positive values span a decade or more (symlog when zero is among them)."""
    values = values.dropna()
    positive = values[values > 0]
    if len(positive) < 2 or positive.max() / positive.min() < 10 or (values < 0).any():
        return alt.Scale(zero=False)
    return alt.Scale(type="symlog") if (values == 0).any() else alt.Scale(type="log")


def _ticks_at(values: pd.Series, most: int = 12) -> alt.Axis:
    """Ticks at the swept values themselves when they are few (a log or symlog axis would label few of them)."""
    swept = sorted(values.dropna().unique())
    return alt.Axis(values=[float(v) for v in swept]) if len(swept) <= most else alt.Axis()


def _cycle(colours: list[str], count: int) -> list[str]:
    return [colours[i % len(colours)] for i in range(count)]
