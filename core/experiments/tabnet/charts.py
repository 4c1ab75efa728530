"""Charts for the TabNet experiment."""
import altair as alt
import pandas as pd

from core.analysis import ok
from core.charts import measured_lines, published_points, series_label
from core.experiments.tabnet.analysis import cpu_over_gpu, published_cpu_over_gpu, time_split
from core.experiments.tabnet.experiment import PARTS, WRITEUP_ROWS


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.Chart]:
    return [seconds_vs_published(rows, published), speedup_vs_batch(rows, published), where_time_goes(rows),
            final_losses_chart(rows)]


def seconds_vs_published(rows: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    """Training seconds for 10 epochs, ours scaled from the measured rows to the write-up's 1,000,000."""
    measured = measured_lines(ok(rows), "batch_size", "projected_10_epochs_s",
                              title=f"Seconds for 10 epochs at {WRITEUP_ROWS:,} rows (ours: per-batch time x "
                                    f"batches at that size; training only)",
                              x_title="batch size", y_title="seconds for 10 epochs",
                              tooltip=["rows", "batches_per_epoch", "train_10_epochs_s", "virtual_batch_size"])
    theirs = published_points(published.rename(columns={"value": "projected_10_epochs_s"}), "batch_size",
                              "projected_10_epochs_s")
    return alt.layer(measured, theirs)


def speedup_vs_batch(rows: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    """CPU time / GPU time per epoch against the batch size, per variant, with the write-up's ratios."""
    ours = cpu_over_gpu(rows)
    ours = ours.assign(series=ours["variant"] + " · " + ours["device"] + " (" + ours["machine"].str[:30] + ")")
    theirs = published_cpu_over_gpu(published).assign(series="published · GPU vs CPU")
    data = pd.concat([ours, theirs], ignore_index=True)
    return alt.Chart(data, title="GPU speedup over the CPU (above 1: the GPU is faster)").mark_line(
        point=True).encode(
        x=alt.X("batch_size:Q", title="batch size", scale=alt.Scale(type="log")),
        y=alt.Y("speedup:Q", title="CPU time / GPU time per epoch"),
        color=alt.Color("series:N", title="series"),
        strokeDash=alt.condition(alt.datum.series == "published · GPU vs CPU", alt.value([4, 3]), alt.value([1, 0])),
        tooltip=["series", "batch_size", alt.Tooltip("speedup:Q", format=".2f"), "cpu_s", "gpu_s", "device_name"],
    )


def where_time_goes(rows: pd.DataFrame) -> alt.Chart:
    """Seconds of each part of one fit, stacked per batch size, one panel per variant, device and machine."""
    split = time_split(rows)
    split = split.assign(fit=series_label(split) if len(split) else pd.Series(dtype=str))
    return alt.Chart(split, title="Where one fit's time goes (at the measured rows)").mark_bar().encode(
        x=alt.X("batch_size:O", title="batch size"),
        y=alt.Y("seconds:Q", title="seconds per fit", stack="zero"),
        color=alt.Color("part:N", title="part", sort=list(PARTS)),
        column=alt.Column("fit:N", title=None),
        tooltip=["fit", "batch_size", "part", alt.Tooltip("seconds:Q", format=".3f"), "rows", "epochs_run"],
    ).properties(width=180)


def final_losses_chart(rows: pd.DataFrame) -> alt.Chart:
    return measured_lines(ok(rows), "batch_size", "final_train_loss", title="Training loss after the last epoch",
                          x_title="batch size", y_title="training loss (MSE + sparsity term)", log_y=False,
                          tooltip=["final_eval_mse", "epochs_run", "rows"])
