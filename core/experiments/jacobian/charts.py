"""Charts for the Jacobian experiment."""
import altair as alt
import pandas as pd

from core.analysis import ok
from core.charts import grouped_bars, measured_lines, published_points, scale, series_label
from core.experiments.jacobian.analysis import gains_over_written
from core.experiments.jacobian.experiment import JACOBIAN, MOVE, MOVE_UNIT


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.Chart]:
    measured = ok(rows)
    out = [time_per_call(rows, published), speedup_over_written(rows), memory_estimates(rows)]
    moves = measured[measured["variant"] == MOVE]
    if len(moves):
        out.append(move_vs_published(moves, published))
    return out


def time_per_call(rows: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    """Measured seconds per call against val, the write-up's four points, and the skipped points at
    their estimated time."""
    measured = ok(rows)
    timed = measured[measured["variant"] != MOVE]
    lines = measured_lines(timed.assign(seconds=timed["median_s"]), "val", "seconds",
                           title="Time per Jacobian (log-log; crosses: skipped points at their estimate)",
                           x_title="val (samples in the batch)", y_title=f"seconds per {JACOBIAN} (median)")
    wall = published[published["figure"] == "jacobian-wall"]
    layers = [lines, published_points(wall, "val")]
    skipped = rows[rows["point_status"] == "skipped"] if len(rows) else rows
    if len(skipped) and "estimated_seconds" in skipped.columns:
        skipped = skipped[skipped["estimated_seconds"] > 0]
        layers.append(alt.Chart(skipped.assign(series="skipped · " + series_label(skipped))).mark_point(
            shape="cross", size=90, opacity=0.6).encode(
            x="val:Q", y="estimated_seconds:Q", color=alt.Color("series:N"),
            tooltip=["val:Q", "variant:N", "device:N", "estimated_seconds:Q", "estimated_bytes:Q", "error:N"]))
    return alt.layer(*layers)


def speedup_over_written(rows: pd.DataFrame) -> alt.Chart:
    """The written call's time over the fastest per-sample method's, per val (circles: the written call
    measured at that val; triangles: extrapolated from its time model)."""
    data = gains_over_written(rows)
    data = data.assign(series=data["device"] + " (" + data["machine_id"].str[:18] + ")",
                       naive=data["naive_basis"].str.split(" ").str[0])
    return alt.Chart(data, title="Speedup of the fastest per-sample method over the written call").mark_line(
        point=True).encode(
        x=alt.X("val:Q", title="val", scale=scale(True)),
        y=alt.Y("gain:Q", title="written call's time / fastest method's time", scale=scale(True)),
        color=alt.Color("series:N", title="device"),
        shape=alt.Shape("naive:N", title="written call's time"),
        detail="series:N",
        tooltip=["machine:N", "device:N", "val:Q", "naive_s:Q", "naive_basis:N", "best_method:N", "best_s:Q",
                 "gain:Q"])


def memory_estimates(rows: pd.DataFrame) -> alt.Chart:
    """Every point's memory estimate against val, with the device's free memory when it was planned."""
    if "estimated_bytes" in rows.columns:
        planned = rows.dropna(subset=["estimated_bytes"])
        planned = planned.assign(gb=planned["estimated_bytes"] / 1e9, free_gb=planned["free_bytes"] / 1e9,
                                 run=planned["device"] + " " + planned["run_id"])
    else:
        planned = pd.DataFrame(columns=["val", "variant", "device", "point_status", "machine", "gb", "free_gb", "run"])
    base = alt.Chart(planned, title="Estimated memory of one call (log-log); dashed: free memory at planning")
    lines = base.mark_line(point=True).encode(
        x=alt.X("val:Q", title="val", scale=scale(True)),
        y=alt.Y("gb:Q", title="GB (estimate)", scale=scale(True)),
        color=alt.Color("variant:N", title="method"), detail="run:N",
        tooltip=["val:Q", "variant:N", "device:N", "point_status:N", "gb:Q", "free_gb:Q", "machine:N"])
    free = base.mark_rule(strokeDash=[4, 4]).encode(y="median(free_gb):Q", detail="run:N",
                                                     tooltip=["device:N", "median(free_gb):Q"])
    return alt.layer(lines, free)


def move_vs_published(moves: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    ours = moves.groupby(["device", "machine"])["median_s"].median().reset_index()
    ours = ours.assign(label=ours["device"], ms=ours["median_s"] * 1e3, series="measured · " + ours["machine"].str[:40])
    stated = published[published["figure"] == "jacobian-move"]
    theirs = stated.assign(label="GPU", ms=stated["value"] * 1e3, series="published · " + stated["hardware"])
    data = pd.concat([ours, theirs], ignore_index=True)[["label", "series", "ms"]]
    return grouped_bars(data, "label", "ms", "series", title="Moving the weights and the input to the device",
                        y_title=f"milliseconds per {MOVE_UNIT} (median over vals)", log_y=True)
