"""Charts for the CNN experiment: published vs measured 10-epoch times per batch, GPU/CPU speedups,
the data-size sweep, the time per step, and the 1-D vs 2-D vs GRU comparison."""
import altair as alt
import pandas as pd

from core.charts import LEGEND, grouped_bars, measured_lines, series_label
from core.experiments.cnn.analysis import gpu_speedups, largest_rows, measured, per_batch, published_speedups

MODEL_LABELS = {"cnn1d": "1-D CNN (write-up)", "mnist": "2-D MNIST network", "gru": "GRU"}
SPEEDUP_TITLE = "CPU time / GPU time (log)"


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.TopLevelMixin]:
    return [ten_epochs_by_batch(rows, published), speedup_by_batch(rows, published), data_size_sweep(rows),
            step_time_by_batch(rows), model_speedups(rows, published)]


def ten_epochs_by_batch(rows: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    """The write-up's table beside ours: seconds for 10 epochs at 1,000,000 rows per batch size, ours
    scaled from the measured time per step (the point with the most rows per batch)."""
    ours = per_batch(rows)
    ours = ours[ours["model"] == "cnn1d"]
    ours = ours.assign(series=series_label(ours), seconds=ours["projected_s_10_epochs"],
                       measured_rows=ours["rows"], step_ms=ours["step_s"] * 1e3,
                       measured_seconds_10_epochs=ours["seconds_10_epochs"])
    theirs = published[published["figure"] == "cnn-10-epochs"]
    theirs = theirs.assign(series="published · " + theirs["device"], seconds=theirs["value"],
                           batch_size=theirs["batch_size"].astype(int))
    columns = ["batch_size", "seconds", "series", "measured_rows", "step_ms", "measured_seconds_10_epochs",
               "machine", "hardware"]
    data = pd.concat([ours.reindex(columns=columns), theirs.reindex(columns=columns)], ignore_index=True)
    return grouped_bars(data, "batch_size", "seconds", "series", log_y=True,
                        title="1-D CNN: seconds for 10 epochs of 1,000,000 rows (ours: time per step x steps)",
                        y_title="seconds for 10 epochs (log)",
                        tooltip=["measured_rows", "step_ms", "measured_seconds_10_epochs", "machine", "hardware"])


def speedup_by_batch(rows: pd.DataFrame, published: pd.DataFrame) -> alt.LayerChart:
    """GPU/CPU speedup of the 1-D CNN per batch size and variant (the most rows measured per batch)."""
    ours = largest_rows(gpu_speedups(rows))
    ours = ours[ours["model"] == "cnn1d"]
    theirs = published_speedups(published)
    theirs = theirs[theirs["model"] == "cnn1d"]
    return _speedup_dots(_with_published(ours, theirs), "batch_size", x_title="batch size",
                         title="1-D CNN: GPU speedup over the CPU per batch size (dashed: equal speed)")


def data_size_sweep(rows: pd.DataFrame) -> alt.Chart:
    """Seconds per epoch against the training-set size, per variant, device and batch size: where the
    CPU and GPU lines cross is the crossover."""
    data = measured(rows)
    data = data[data["model"] == "cnn1d"]
    data = data[data.groupby(["machine_id", "batch_size"])["rows"].transform("nunique") > 1]
    data = data.assign(variant=data["variant"] + " · batch " + data["batch_size"].astype(str))
    return measured_lines(data, "rows", "median_s", title="1-D CNN: seconds per epoch against the data size",
                          x_title="training rows", y_title="seconds per epoch (median)",
                          tooltip=["batch_size", "steps_per_epoch", "step_s"])


def step_time_by_batch(rows: pd.DataFrame) -> alt.Chart:
    """Milliseconds per training step against the batch size, per model: flat where a fixed per-step
    cost dominates, rising where the work does."""
    data = per_batch(rows)
    data = data.assign(variant=data["model"].map(MODEL_LABELS) + " · " + data["variant"], step_ms=data["step_s"] * 1e3)
    return measured_lines(data, "batch_size", "step_ms", title="Milliseconds per training step against the batch size",
                          x_title="batch size", y_title="milliseconds per step (median epoch / steps)",
                          tooltip=["model", "rows", "steps_per_epoch"])


def model_speedups(rows: pd.DataFrame, published: pd.DataFrame) -> alt.LayerChart:
    """GPU/CPU speedup of each network (one dot per batch size): ours beside the write-ups' figures."""
    data = _with_published(largest_rows(gpu_speedups(rows)), published_speedups(published))
    return _speedup_dots(data.assign(model=data["model"].map(MODEL_LABELS)), "model", x_title="network",
                         title="GPU speedup over the CPU: 1-D CNN vs 2-D MNIST network vs GRU (dashed: equal speed)")


def _with_published(ours: pd.DataFrame, theirs: pd.DataFrame) -> pd.DataFrame:
    columns = ["model", "batch_size", "speedup", "series", "rows", "machine", "hardware"]
    ours = ours.assign(series=series_label(ours))
    theirs = theirs.assign(series="published")
    return pd.concat([ours.reindex(columns=columns), theirs.reindex(columns=columns)], ignore_index=True)


def _speedup_dots(data: pd.DataFrame, x: str, *, x_title: str, title: str) -> alt.LayerChart:
    """Speedups as dots on a log scale, one column per series, with a dashed line at equal speed."""
    dots = alt.Chart(data).mark_point(filled=True, size=90).encode(
        x=alt.X(f"{x}:N", title=x_title),
        xOffset="series:N",
        y=alt.Y("speedup:Q", title=SPEEDUP_TITLE, scale=alt.Scale(type="log")),
        color=alt.Color("series:N", title="series", legend=LEGEND),
        tooltip=[x, "speedup", "series", "batch_size", "rows", "machine", "hardware"],
    )
    even = alt.Chart(pd.DataFrame({"speedup": [1.0]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="speedup:Q")
    return alt.layer(dots, even, title=title)
