"""Charts for the TabNet experiment."""
import altair as alt
import pandas as pd

from core.present import charts as grammar
from core.present.analysis import ok, on_accelerator
from core.experiments.tabnet.analysis import published_cpu_over_gpu, time_split
from core.experiments.tabnet.experiment import PARTS, WRITEUP_ROWS

# one fixed colour per part of a fit (the variants' colours are kept for variants)
PART_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9e765f")


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.TopLevelMixin]:
    return [seconds_vs_published(rows, published), speedup_vs_batch(rows, published), where_time_goes(rows),
            final_losses_chart(rows)]


def seconds_vs_published(rows: pd.DataFrame, published: pd.DataFrame) -> alt.TopLevelMixin:
    """Training seconds for 10 epochs, ours scaled from the measured rows to the write-up's 1,000,000."""
    theirs = published.assign(projected_10_epochs_s=published["value"])
    return grammar.measured_lines(
        rows, "batch_size", "projected_10_epochs_s", figures=theirs,
        title=f"Seconds for 10 epochs at {WRITEUP_ROWS:,} rows (ours: per-batch time x batches at that size; "
              "training only)",
        x_title="batch size", y_title="seconds for 10 epochs (median epoch, scaled)",
        tooltip=["rows", "batches_per_epoch", "train_10_epochs_s", "virtual_batch_size"])


def speedup_vs_batch(rows: pd.DataFrame, published: pd.DataFrame) -> alt.TopLevelMixin:
    """CPU time / GPU time per epoch against the batch size, per variant and run, with the write-up's ratios."""
    measured = ok(rows)
    gpu = measured[on_accelerator(measured)] if len(measured) else measured
    ours = grammar.paired_ratio(measured[measured["device"] == "cpu"], gpu, ["variant", "point"])
    theirs = published_cpu_over_gpu(published).assign(hardware=", ".join(published["hardware"].unique()))
    data = pd.concat([ours, grammar.published_ratios(theirs)], ignore_index=True)
    return grammar.lines(data, "batch_size", "ratio", ratio=True,
                         title="GPU speedup over the CPU (above 1: the GPU is faster)", x_title="batch size",
                         y_title="CPU time / GPU time per epoch (medians)")


def where_time_goes(rows: pd.DataFrame) -> alt.TopLevelMixin:
    """Seconds of each part of one fit, stacked per batch size on an axis from zero, one panel per variant,
    device and run (the run named when there are several)."""
    split = time_split(rows)
    fit = split["variant"] + " · " + split["device"].map(grammar.device_label)
    if split["run_id"].nunique() > 1:
        measured = ok(rows)
        fit = fit + "\n" + split["run_id"].map(dict(zip(measured["run_id"], grammar.run_label(measured))))
    return alt.Chart(split.assign(fit=fit), width=150).mark_bar().encode(
        x=alt.X("batch_size:O", title="batch size", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("seconds:Q", title="seconds per fit (one fit: all its epochs)", stack="zero",
                scale=alt.Scale(zero=True)),
        color=alt.Color("part:N", title="part", scale=alt.Scale(domain=list(PARTS), range=list(PART_COLOURS)),
                        legend=alt.Legend(symbolType="square", orient="bottom")),
        order=alt.Order("order:Q"),
        tooltip=["fit", "batch_size", "part", alt.Tooltip("seconds:Q", format=".3f"), "rows", "epochs_run"],
    ).transform_calculate(order=f"indexof({list(PARTS)}, datum.part)").facet(
        facet=alt.Facet("fit:N", title=None, header=alt.Header(labelLimit=0, labelExpr="split(datum.label, '\\n')")),
        columns=3, title="Where one fit's time goes (at the measured rows)")


def final_losses_chart(rows: pd.DataFrame) -> alt.TopLevelMixin:
    return grammar.measured_lines(rows, "batch_size", "final_train_loss", title="Training loss after the last epoch",
                                  x_title="batch size", y_title="training loss after the last epoch (MSE + "
                                                                "sparsity term)", log_y=False, spread=None,
                                  tooltip=["final_eval_mse", "epochs_run", "rows"])
