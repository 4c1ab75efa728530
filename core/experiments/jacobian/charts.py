"""Charts for the Jacobian experiment."""
import altair as alt
import pandas as pd

from core.present import charts as grammar
from core.present.analysis import ok
from core.experiments.jacobian.analysis import gains_over_written
from core.experiments.jacobian.experiment import JACOBIAN, MOVE, MOVE_UNIT

VAL_TITLE = "val (samples in the batch)"


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.TopLevelMixin]:
    measured = ok(rows)
    out = [time_per_call(rows, published), speedup_over_written(rows), memory_estimates(rows)]
    moves = measured[measured["variant"] == MOVE]
    if len(moves):
        out.append(move_vs_published(moves, published))
    return out


def time_per_call(rows: pd.DataFrame, published: pd.DataFrame) -> alt.TopLevelMixin:
    """Measured seconds per call against val, the write-up's four points, and the skipped points at
    their estimated time (drawn as predicted: dotted and hollow)."""
    measured = ok(rows)
    timed = grammar.measured(measured[measured["variant"] != MOVE], "median_s")
    wall = published[published["figure"] == "jacobian-wall"]
    frames = [timed, grammar.published(wall, "median_s", single=False)]
    if "estimated_seconds" in rows.columns:
        skipped = rows[(rows["point_status"] == "skipped") & (rows["estimated_seconds"] > 0)]
        frames.append(grammar.predicted(skipped.assign(median_s=skipped["estimated_seconds"],
                                                       quality="skipped: " + skipped["error"].fillna(""))))
    return grammar.lines(pd.concat(frames, ignore_index=True), "val", "median_s",
                         title="Time per Jacobian (dotted, hollow: skipped points at their estimated time)",
                         x_title=VAL_TITLE, y_title=f"seconds per {JACOBIAN} (median)",
                         tooltip=[alt.Tooltip("estimated_bytes:Q", format=".3~s")])


def speedup_over_written(rows: pd.DataFrame) -> alt.TopLevelMixin:
    """The written call's time over the fastest per-sample method's, per val, coloured by that method;
    where the written call was not measured at a val, its time is extrapolated from its time model and
    the ratio is drawn as predicted (dotted, hollow)."""
    gains = grammar.per_run(rows, gains_over_written)
    extrapolated = gains["naive_basis"] != "measured"
    data = gains.assign(variant=gains["best_method"], source=extrapolated.map({True: "predicted", False: "measured"}),
                        device=gains["device"].map(grammar.device_label),
                        quality=gains["naive_basis"].where(extrapolated, ""))
    return grammar.lines(grammar.with_look(data), "val", "gain", ratio=True,
                         title="Speedup of the fastest per-sample method over the written call",
                         x_title=VAL_TITLE, y_title="written call / fastest method (median times)",
                         tooltip=["best_method", alt.Tooltip("naive_s:Q", format=".3~g"), "naive_basis",
                                  alt.Tooltip("best_s:Q", format=".3~g")])


def memory_estimates(rows: pd.DataFrame) -> alt.TopLevelMixin:
    """Every point's memory estimate against val (an estimate made before it ran: drawn as predicted), with
    the device's free memory when it was planned as a dashed grey rule."""
    planned = rows.dropna(subset=["estimated_bytes"]) if "estimated_bytes" in rows.columns else rows.iloc[0:0]
    planned = planned.assign(gb=planned["estimated_bytes"] / 1e9,
                             free_gb=(planned["free_bytes"] if "free_bytes" in planned else float("nan")) / 1e9)
    return grammar.lines(grammar.predicted(planned), "val", "gb",
                         title="Estimated memory of one call; dashed grey: free memory at planning",
                         x_title=VAL_TITLE, y_title="GB per call (estimated before the run)",
                         limit=("free_gb", "free GB at planning"), tooltip=["point_status"])


def move_vs_published(moves: pd.DataFrame, published: pd.DataFrame) -> alt.TopLevelMixin:
    """Milliseconds per move of the weights and the input to the device, per val, beside the write-up's
    single figure (a dashed rule)."""
    ours = moves.assign(ms=moves["median_s"] * 1e3)
    stated = published[published["figure"] == "jacobian-move"]
    return grammar.measured_lines(ours, "val", "ms", figures=stated.assign(ms=stated["value"] * 1e3),
                                  title="Moving the weights and the input to the device (dashed: the write-up's "
                                        "figure)", x_title=VAL_TITLE, y_title=f"milliseconds per {MOVE_UNIT} (median)")
