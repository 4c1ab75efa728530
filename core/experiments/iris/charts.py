"""Charts for the Iris experiment: total time against the write-up's, time against the logging
interval, the loss curves, the per-epoch cost, and the model(x) vs model.forward(x) check."""
import altair as alt
import pandas as pd

from core import devices
from core.charts import grouped_bars, scale
from core.experiments.iris.analysis import hook_checks, interval_label, interval_order, training_rows
from core.experiments.iris.experiment import AS_WRITTEN, NEVER, PAPER_EPOCHS, TUNED

HEIGHT = 320
TOOLTIP = ["machine", "device_name", "variant", "interval", "epochs", "median_s", "iqr_s", "noisy",
           "host_syncs", "losses_received", "us_per_epoch", "torch_threads", "run_id"]


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.Chart]:
    trained = training_rows(rows)
    out = []
    if len(trained):
        trained = trained.assign(side=trained["device"].map(_side), machine_short=_short(trained["machine_id"]))
        out += [total_time(trained, published), interval_time(trained, published), loss_curves(trained),
                per_epoch_cost(trained, published)]
    calls = hook_checks(rows)
    if len(calls):
        out.append(call_cost(calls))
    return out


def _legend(title: str) -> alt.Legend:
    return alt.Legend(title=title, labelLimit=0)


def _split_labels(bars: alt.Chart, x: str) -> alt.Chart:
    """Grouped bars made taller, with each x label's ' · ' parts on lines of their own."""
    lines = alt.Axis(labelAngle=0, labelLimit=0, labelExpr="split(datum.label, ' · ')")
    return bars.encode(x=alt.X(f"{x}:N", title=x, axis=lines)).properties(height=HEIGHT)


def _short(machine_ids: pd.Series) -> pd.Series:
    """The hash part of a machine id: enough to tell machines apart in a legend."""
    return machine_ids.str.rsplit("-", n=1).str[-1]


def _side(device: str) -> str:
    return "GPU" if devices.is_accelerator(device) else "CPU"


def _reads(variant: str, k) -> str:
    if variant == TUNED:
        return "every epoch, read once"
    return "never read" if k == NEVER else ("read every epoch" if k == 1 else f"read every {int(k)}")


def total_time(trained: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    """Seconds for 20,000 epochs reading the loss every epoch (the write-up's first runs), and the
    write-up's every-200 run, beside ours."""
    ours = trained[trained["log_every"].isin([1, 200])]
    ours = ours.assign(series="measured · " + ours["variant"] + ", " + ours.apply(
        lambda r: _reads(r["variant"], r["log_every"]), axis=1) + " · " + ours["machine_short"],
        seconds=ours["seconds_per_20k_epochs"], device=ours["side"])
    theirs = published[published["figure"].isin(["iris-total", "iris-total-print200"])]
    theirs = theirs.assign(seconds=theirs["value"], machine=theirs["hardware"],
                           series="published · as written, " + theirs["log_every"].fillna(1).map(
                               lambda k: _reads(AS_WRITTEN, k)))
    columns = ["device", "series", "seconds", "machine"]
    data = pd.concat([ours[columns + ["epochs", "median_s"]], theirs[columns]], ignore_index=True)
    bars = grouped_bars(data, "device", "seconds", "series", y_title=f"seconds for {PAPER_EPOCHS:,} epochs",
                        title=f"Total time for {PAPER_EPOCHS:,} epochs (ours: measured per-epoch cost x "
                              f"{PAPER_EPOCHS:,} when the run was shorter)",
                        tooltip=["machine", "epochs"])
    return _split_labels(bars, "device")


def interval_time(trained: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    """Time for 20,000 epochs against how often the loss is read, one line per device and variant."""
    theirs = published[published["figure"].str.startswith("iris-")]
    theirs = theirs.assign(interval=theirs["log_every"].fillna(1).map(interval_label),
                           series="published · " + theirs["device"], seconds_per_20k_epochs=theirs["value"])
    order = interval_order(list(trained["log_every"]) + list(theirs["log_every"].fillna(1)))
    x = alt.X("interval:O", sort=order, title="loss read every k epochs")
    y = alt.Y("seconds_per_20k_epochs:Q", title=f"seconds for {PAPER_EPOCHS:,} epochs", scale=scale(True))
    ours = trained.assign(
        series=trained["variant"] + " · " + trained["device"] + " (" + trained["machine_short"] + ")")
    lines = alt.Chart(ours).mark_line(point=True).encode(
        x=x, y=y, color=alt.Color("series:N", legend=_legend("series")), detail="run_id:N",
        tooltip=["seconds_per_20k_epochs", *TOOLTIP])
    diamonds = alt.Chart(theirs).mark_point(shape="diamond", size=140, filled=False, strokeWidth=2).encode(
        x=x, y=y, color="series:N", tooltip=["interval", "value", "records", "device", "hardware", "source", "note"])
    title = "Time against the logging interval (tuned reads every epoch's loss once, at the end)"
    return (lines + diamonds).properties(height=HEIGHT, title=title)


def loss_curves(trained: pd.DataFrame) -> alt.Chart:
    """The training loss the host received: as written at its most frequent interval, and tuned."""
    reading = trained[trained["log_every"] != NEVER]
    most = reading.groupby(["run_id", "device", "variant"])["log_every"].transform("min")
    picked = reading[reading["log_every"] == most]
    points = picked.assign(point=picked.apply(lambda r: list(zip(r["loss_curve_epochs"], r["loss_curve"])), axis=1))
    points = points.explode("point").dropna(subset=["point"])
    points = points.assign(epoch=points["point"].str[0], loss=points["point"].str[1],
                           series=points["device"] + " (" + points["machine_short"] + ")")
    data = points[["epoch", "loss", "series", "variant", "interval", "device_name", "run_id"]]
    title = "Training loss (cross-entropy) as the host received it"
    return alt.Chart(data, title=title, height=HEIGHT).mark_line().encode(
        x=alt.X("epoch:Q", title="epoch"),
        y=alt.Y("loss:Q", title="loss", scale=scale(True)),
        color=alt.Color("series:N", legend=_legend("device")),
        strokeDash=alt.StrokeDash("variant:N", title="variant"),
        detail="run_id:N",
        tooltip=["epoch", "loss", "variant", "interval", "device_name", "run_id"],
    )


def per_epoch_cost(trained: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    """Microseconds per epoch: the fixed price of one step (never read), reading every epoch, and tuned."""
    ours = trained[trained["log_every"].isin([1, NEVER])]
    ours = ours.assign(hardware=ours["device_name"].str.replace(r"\((R|TM)\)", "", regex=True) + " · "
                       + ours["machine_short"],
                       how=ours.apply(lambda r: f"{r['variant']}, {_reads(r['variant'], r['log_every'])}", axis=1))
    theirs = published[published["figure"] == "iris-total"]
    theirs = theirs.assign(hardware=theirs["hardware"].str.split(" \\(|,").str[0] + " · published",
                           how="as written, read every epoch", us_per_epoch=theirs["value"] / PAPER_EPOCHS * 1e6,
                           machine=theirs["hardware"])
    columns = ["hardware", "how", "us_per_epoch", "machine"]
    data = pd.concat([ours[columns + ["host_syncs", "torch_threads"]], theirs[columns]], ignore_index=True)
    bars = grouped_bars(data, "hardware", "us_per_epoch", "how", y_title="microseconds per epoch (median)",
                        title="Per-epoch cost: the fixed price of one full-batch step",
                        tooltip=["machine", "host_syncs", "torch_threads"])
    return _split_labels(bars, "hardware")


def call_cost(calls: pd.DataFrame) -> alt.Chart:
    """One forward call through model(x) and model.forward(x), with and without a hook, and how often
    the hook ran."""
    data = calls.assign(setup=calls["hook"].map({True: "hook registered", False: "no hook"}) + " · "
                        + calls["device"] + " · " + _short(calls["machine_id"]))
    bars = grouped_bars(data, "call", "us_per_call", "setup", y_title="microseconds per forward call (median)",
                        title="model(x) vs model.forward(x): only model(x) runs the hook (hook_calls in the tooltip)",
                        tooltip=["hook_calls", "check_calls", "machine", "device"])
    return _split_labels(bars, "call")
