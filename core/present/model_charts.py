"""The Your model page's charts: the crossover (time per sample against batch size, CPU and GPUs), where a GPU's time
goes, and the what-ifs. Everything they draw is predicted (dotted, hollow, its likely range shaded or as a bar), except
a time measured on this machine's CPU, drawn as measured (solid, filled)."""
import altair as alt
import pandas as pd

from core.present import charts

PREDICTED_DASH = [4, 3]
PARTS_ORDER = ("host", "launches", "loading", "compute", "copies", "sync")
PART_COLOURS = charts.PART_COLOURS | {"launches": "#9d755d"}  # the measured breakdown's, and a GPU's launches


def crossover(swept: pd.DataFrame, marks: pd.DataFrame, measured: pd.DataFrame, *, title: str) -> alt.TopLevelMixin:
    """Predicted seconds per sample against batch size per hardware (`swept`: yourmodel.sweep's, the batches that fit),
    each shaded over its likely range; `marks` (batch, hardware, what) a dashed rule each where a GPU overtakes the CPU
    or its memory ends; `measured` (batch, hardware, per_sample_s) drawn as measured."""
    data = pd.concat([
        swept[swept["fits"]].assign(series=swept["hardware"] + " (predicted)", predicted=True, line="",
                                    fast_edge=swept["low_s"] / swept["per_sample_s"],
                                    slow_edge=swept["high_s"] / swept["per_sample_s"]),
        measured.assign(series=measured["hardware"] + " (measured)", predicted=False, line="")],
        ignore_index=True).rename(columns={"per_sample_s": "per_unit_s"})
    rules = alt.Chart(marks).mark_rule(strokeDash=[6, 4], strokeWidth=1.5, color="#555").encode(
        x="batch:Q", tooltip=["what:N", "hardware:N", "batch:Q"])
    labels = alt.Chart(marks).mark_text(angle=270, align="right", baseline="bottom", dx=-4, dy=-3, fontSize=11,
                                        color="#333").encode(x="batch:Q", y=alt.value(4), text="what:N")
    return charts.measured_and_predicted(data, "batch", title=title, x_title="batch size",
                                         y_title="seconds per sample", marks=(rules, labels) if len(marks) else ())


def gpu_parts(frame: pd.DataFrame, *, title: str) -> alt.Chart:
    """One bar per GPU (`frame`: hardware, part, seconds, share), its predicted time split into the cost model's parts,
    drawn as predicted: a dashed outline, half-filled."""
    parts = [part for part in PARTS_ORDER if part in set(frame["part"])]
    data = frame.assign(order=frame["part"].map({part: i for i, part in enumerate(PARTS_ORDER)}),
                        microseconds=frame["seconds"] * 1e6, source="predicted")
    return alt.Chart(data).mark_bar(strokeDash=PREDICTED_DASH, strokeWidth=1.5, fillOpacity=0.45).encode(
        x=alt.X("microseconds:Q", title="µs per call (predicted)", stack="zero"),
        y=alt.Y("hardware:N", title=None, axis=alt.Axis(labelLimit=0)),
        order="order:Q",
        color=alt.Color("part:N", scale=alt.Scale(domain=parts, range=[PART_COLOURS[p] for p in parts]),
                        legend=alt.Legend(orient="bottom", title="part (predicted)", symbolType="square")),
        stroke=alt.Stroke("part:N", scale=alt.Scale(domain=parts, range=[PART_COLOURS[p] for p in parts]),
                          legend=None),
        tooltip=["hardware", "part", "source", alt.Tooltip("microseconds:Q", format=".3~g"),
                 alt.Tooltip("share:Q", format=".0%")],
    ).properties(title=title, height=alt.Step(40))


def what_ifs(frame: pd.DataFrame, *, title: str) -> alt.LayerChart:
    """One bar per fix (`frame`: fix, per_sample_us, low_us, high_us), the eager call first, drawn as predicted
    (hollow, dashed) with its likely range as an error bar."""
    data = frame.assign(source="predicted")
    order = list(frame["fix"])
    base = alt.Chart(data).encode(y=alt.Y("fix:N", title=None, sort=order, axis=alt.Axis(labelLimit=0)))
    bars = base.mark_bar(strokeDash=PREDICTED_DASH, strokeWidth=2, fillOpacity=0.15, color="#7f7f7f",
                         stroke="#555").encode(
        x=alt.X("per_sample_us:Q", title="µs per sample (predicted)", scale=alt.Scale(zero=True)),
        tooltip=["fix", "source", alt.Tooltip("per_sample_us:Q", title="µs per sample", format=".3~g"),
                 alt.Tooltip("low_us:Q", title="likely from", format=".3~g"),
                 alt.Tooltip("high_us:Q", title="likely to", format=".3~g")])
    ranges = base.mark_rule(strokeWidth=1.5, color="#333").encode(x="low_us:Q", x2="high_us:Q").transform_filter(
        "isValid(datum.low_us) && isValid(datum.high_us)")
    return alt.layer(bars, ranges).properties(title=title, height=alt.Step(34))
