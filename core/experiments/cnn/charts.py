"""Charts for the CNN experiment: published vs measured 10-epoch times per batch, GPU/CPU speedups,
the data-size sweep, the time per step, and the 1-D vs 2-D vs GRU comparison."""
import numpy as np
import altair as alt
import pandas as pd

from core.present import charts as grammar
from core.present.analysis import ok, on_accelerator
from core.experiments.cnn.analysis import published_speedups
from core.experiments.cnn.model import MODELS

MODEL_LABELS = {"cnn1d": "1-D CNN (write-up)", "mnist": "2-D MNIST network", "gru": "GRU"}
PER_BATCH = ["run_id", "device", "variant", "model", "batch_size"]  # one run's points of one batch size
SPEEDUP_TITLE = "CPU time / GPU time per epoch (medians)"


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.TopLevelMixin]:
    return [ten_epochs_by_batch(rows, published), speedup_by_batch(rows, published), data_size_sweep(rows),
            step_time_by_batch(rows), model_speedups(rows, published)]


def per_batch(rows: pd.DataFrame) -> pd.DataFrame:
    """Per run, device, variant, model and batch size: the measured point with the most rows, with its time
    per step scaled to the write-up's training-set size and 10 epochs (`projected_s_10_epochs`)."""
    data = ok(rows).sort_values("rows", kind="stable").drop_duplicates(PER_BATCH, keep="last")
    published_rows = data["model"].map(lambda m: MODELS[m].published_rows).astype(float)
    steps = np.ceil(published_rows / data["batch_size"])  # the author's DataLoader ran a short last batch
    return data.assign(projected_s_10_epochs=10 * steps * data["step_s"], step_ms=data["step_s"] * 1e3,
                       model_label=data["model"].map(MODEL_LABELS))


def speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """CPU time / GPU time per epoch of every GPU point beside its run's CPU point, the most rows per batch."""
    measured = ok(rows)
    gpu = measured[on_accelerator(measured)] if len(measured) else measured
    pairs = grammar.paired_ratio(measured[measured["device"] == "cpu"], gpu, ["variant", "point"])
    if pairs.empty:
        return pairs.assign(model_label=[])
    pairs = pairs.sort_values("rows", kind="stable").drop_duplicates(PER_BATCH, keep="last")
    return pairs.assign(model_label=pairs["model"].map(MODEL_LABELS))


def ten_epochs_by_batch(rows: pd.DataFrame, published: pd.DataFrame) -> alt.TopLevelMixin:
    """The write-up's table beside ours: seconds for 10 epochs at 1,000,000 rows per batch size, ours
    scaled from the measured time per step (the point with the most rows per batch)."""
    ours = per_batch(rows)
    ours = ours[ours["model"] == "cnn1d"]
    theirs = published[published["figure"] == "cnn-10-epochs"]
    theirs = theirs.assign(batch_size=theirs["batch_size"].astype(int), projected_s_10_epochs=theirs["value"])
    return grammar.measured_lines(
        ours, "batch_size", "projected_s_10_epochs", figures=theirs,
        title="1-D CNN: seconds for 10 epochs of 1,000,000 rows (ours: measured time per step x steps)",
        x_title="batch size", y_title="seconds for 10 epochs (median step x steps)",
        tooltip=[alt.Tooltip("rows:Q", title="rows measured"), alt.Tooltip("step_ms:Q", format=".3~g")])


def speedup_by_batch(rows: pd.DataFrame, published: pd.DataFrame) -> alt.TopLevelMixin:
    """GPU/CPU speedup of the 1-D CNN per batch size and variant (the most rows measured per batch)."""
    ours = speedups(rows)
    ours = ours[ours["model"] == "cnn1d"]
    theirs = published_speedups(published)
    theirs = grammar.published_ratios(theirs[theirs["model"] == "cnn1d"])
    return grammar.lines(pd.concat([ours, theirs], ignore_index=True), "batch_size", "ratio", ratio=True,
                         title="1-D CNN: GPU speedup over the CPU per batch size (above 1: the GPU is faster)",
                         x_title="batch size", y_title=SPEEDUP_TITLE, tooltip=[alt.Tooltip("rows:Q")])


def data_size_sweep(rows: pd.DataFrame) -> alt.TopLevelMixin:
    """Seconds per epoch against the training-set size, per variant, device and batch size: where the
    CPU and GPU lines cross is the crossover."""
    data = ok(rows)
    data = data[data["model"] == "cnn1d"]
    data = data[data.groupby(["run_id", "batch_size"])["rows"].transform("nunique") > 1]
    data = data.assign(batch="batch " + data["batch_size"].astype(str))
    return grammar.measured_lines(data, "rows", "median_s", title="1-D CNN: seconds per epoch against the data size",
                                  x_title="training rows", y_title="seconds per epoch (median)", line="batch",
                                  tooltip=["batch_size", "steps_per_epoch"])


def step_time_by_batch(rows: pd.DataFrame) -> alt.TopLevelMixin:
    """Milliseconds per training step against the batch size, per model: flat where a fixed per-step
    cost dominates, rising where the work does."""
    return grammar.measured_lines(per_batch(rows), "batch_size", "step_ms",
                                  title="Milliseconds per training step against the batch size",
                                  x_title="batch size", y_title="milliseconds per step (median epoch / steps)",
                                  line="model_label", tooltip=["model", "rows", "steps_per_epoch"])


def model_speedups(rows: pd.DataFrame, published: pd.DataFrame) -> alt.LayerChart:
    """GPU/CPU speedup of each network (one dot per batch size): ours beside the write-ups' figures."""
    ours = speedups(rows)
    ours = ours.assign(series="measured", label=ours["model_label"])
    theirs = grammar.published_ratios(published_speedups(published))
    theirs = theirs.assign(series="published", label=theirs["model"].map(MODEL_LABELS))
    return grammar.ratio_dots(pd.concat([ours, theirs], ignore_index=True),
                              title="GPU speedup over the CPU: 1-D CNN vs 2-D MNIST network vs GRU (one dot a batch "
                                    "size)", x_title=SPEEDUP_TITLE, tooltip=[alt.Tooltip("batch_size:Q")])
