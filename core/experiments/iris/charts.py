"""Charts for the Iris experiment: total time against the write-up's, time against the logging
interval, the loss curves, the per-epoch cost, and the model(x) vs model.forward(x) check."""
import altair as alt
import pandas as pd

from core.present import charts as grammar
from core.present.analysis import ok
from core.experiments.iris.analysis import interval_label, interval_order, training_rows
from core.experiments.iris.experiment import AS_WRITTEN, HOOK_CHECK, NEVER, PAPER_EPOCHS, TUNED

TOOLTIP = ["interval", "epochs", "host_syncs", "losses_received", "torch_threads"]
TOTAL_TITLE = f"seconds per {PAPER_EPOCHS:,} epochs (median x {PAPER_EPOCHS:,})"


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.TopLevelMixin]:
    trained = training_rows(rows)
    out = []
    if len(trained):
        out += [total_time(trained, published), interval_time(trained, published), loss_curves(trained),
                per_epoch_cost(trained, published)]
    calls = ok(rows)
    calls = calls[calls["variant"] == HOOK_CHECK] if len(calls) else calls
    if len(calls):
        out.append(call_cost(calls))
    return out


def _reads(variant: str, k) -> str:
    if variant == TUNED:
        return "every epoch, read once"
    return "never read" if k == NEVER else ("read every epoch" if k == 1 else f"read every {int(k)}")


def _ours(trained: pd.DataFrame, value: str) -> pd.DataFrame:
    """Measured bars: labelled by device and how the loss is read, one bar per run."""
    data = grammar.measured(trained, value)
    how = [f"{v}, {_reads(v, k)}" for v, k in zip(data["variant"], data["log_every"])]
    return data.assign(bar=data["device"] + " · " + pd.Series(how, index=data.index), series="measured")


def _theirs(figures: pd.DataFrame, value: str) -> pd.DataFrame:
    data = grammar.published(figures, value, single=False)
    how = data["log_every"].fillna(1).map(lambda k: f"{AS_WRITTEN}, {_reads(AS_WRITTEN, k)}")
    return data.assign(bar=data["device"] + " · " + how, series="published · " + data["hardware"])


def _bars(data: pd.DataFrame, value: str, *, title: str, y_title: str, tooltip) -> alt.LayerChart:
    """Bars from zero, a row per device and way of reading, the write-up's named "published"."""
    named = data["source"].where(data["source"] == "published", "")
    return grammar.zero_bars(data.sort_values("bar", kind="stable").assign(named=named), "bar", value, title=title,
                             x_title=None, y_title=y_title, text="named", tooltip=tooltip)


def total_time(trained: pd.DataFrame, published: pd.DataFrame) -> alt.LayerChart:
    """Seconds for 20,000 epochs reading the loss every epoch (the write-up's first runs), and the
    write-up's every-200 run, beside ours."""
    ours = _ours(trained[trained["log_every"].isin([1, 200])], "seconds_per_20k_epochs")
    theirs = _theirs(published[published["figure"].isin(["iris-total", "iris-total-print200"])],
                     "seconds_per_20k_epochs")
    data = pd.concat([ours, theirs], ignore_index=True)
    return _bars(data, "seconds_per_20k_epochs", title=f"Total time for {PAPER_EPOCHS:,} epochs (ours: measured "
                                                       f"per-epoch cost x {PAPER_EPOCHS:,} when the run was shorter)",
                 y_title=TOTAL_TITLE, tooltip=["epochs", "hardware"])


def interval_time(trained: pd.DataFrame, published: pd.DataFrame) -> alt.TopLevelMixin:
    """Time for 20,000 epochs against how often the loss is read, one line per device, variant and run."""
    theirs = published[published["figure"].str.startswith("iris-")]
    theirs = grammar.published(theirs.assign(interval=theirs["log_every"].fillna(1).map(interval_label)),
                               "seconds_per_20k_epochs", single=False)
    ours = grammar.measured(trained, "seconds_per_20k_epochs")
    order = interval_order(list(trained["log_every"]) + list(theirs["log_every"].fillna(1)))
    return grammar.lines(pd.concat([ours, theirs], ignore_index=True), "interval", "seconds_per_20k_epochs",
                         x_sort=order, x_title="loss read every k epochs",
                         y_title=TOTAL_TITLE,
                         title="Time against the logging interval (tuned reads every epoch's loss once, at the end)",
                         tooltip=TOOLTIP)


def loss_curves(trained: pd.DataFrame) -> alt.TopLevelMixin:
    """The training loss the host received: as written at its most frequent interval, and tuned."""
    reading = trained[trained["log_every"] != NEVER]
    most = reading.groupby(["run_id", "device", "variant"])["log_every"].transform("min")
    picked = reading[reading["log_every"] == most]
    points = picked.assign(point=picked.apply(lambda r: list(zip(r["loss_curve_epochs"], r["loss_curve"])), axis=1))
    points = points.explode("point").dropna(subset=["point"])
    points = points.assign(epoch=points["point"].str[0], loss=points["point"].str[1]).drop(
        columns=["point", "loss_curve", "loss_curve_epochs", "samples_s", "warmup_samples_s"], errors="ignore")
    data = grammar.measured(points, "loss", spread=None)
    return grammar.lines(data.assign(device_text=data["device"]), "epoch", "loss", points=False, line="device_text",
                         log_x=False, title="Training loss (cross-entropy) as the host received it",
                         x_title="epoch", y_title="training loss (cross-entropy, full batch)",
                         tooltip=["interval", "device_name"])


def per_epoch_cost(trained: pd.DataFrame, published: pd.DataFrame) -> alt.LayerChart:
    """Microseconds per epoch: the fixed price of one step (never read), reading every epoch, and tuned."""
    ours = _ours(trained[trained["log_every"].isin([1, NEVER])], "us_per_epoch")
    figures = published[published["figure"] == "iris-total"]
    theirs = _theirs(figures.assign(value=figures["value"] / PAPER_EPOCHS * 1e6), "us_per_epoch")
    data = pd.concat([ours, theirs], ignore_index=True)
    return _bars(data, "us_per_epoch", title="Per-epoch cost: the fixed price of one full-batch step",
                 y_title="microseconds per epoch (median)", tooltip=["host_syncs", "torch_threads"])


def call_cost(calls: pd.DataFrame) -> alt.LayerChart:
    """One forward call through model(x) and model.forward(x), with and without a hook, and how often
    the hook ran."""
    data = grammar.measured(calls, "us_per_call")
    setup = data["hook"].map({True: "hook registered", False: "no hook"})
    data = data.assign(bar=data["call"] + " · " + setup + " · " + data["device"], series="measured")
    return _bars(data, "us_per_call", title="model(x) vs model.forward(x): only model(x) runs the hook (hook_calls "
                                            "in the tooltip)",
                 y_title="microseconds per forward call (median)", tooltip=["hook_calls", "check_calls"])
