"""Charts for the MLP regression-surface experiment: the target and the learned surfaces as heatmaps on
one colour scale, their differences, the loss curves, time per device and variant, and the sample-size
crossover."""
import math

import altair as alt
import numpy as np
import pandas as pd

from core import analysis, devices
from core.charts import measured_lines, published_points, series_label
from core.experiments.mlp_surface.analysis import epoch_speedups, has_surface
from core.experiments.mlp_surface.model import HIGH, LOW, SURFACE_GRID, surface_axis, target_surface

PANEL_SIZE = 170
COLUMNS = 3
TIME_TOOLTIP = ["epochs", "samples", "iqr_s", "seconds_per_epoch", "machine", "run_id"]


def charts(rows: pd.DataFrame, published: pd.DataFrame) -> list[alt.Chart]:
    ok = analysis.ok(rows)
    out = []
    run = surface_run(ok)
    if run is not None:
        out += [surface_heatmaps(run), difference_heatmaps(run), loss_curves(run)]
    out += [time_per_variant(ok), crossover_lines(ok), speedup_vs_published(rows, published)]
    return out


def surface_run(rows: pd.DataFrame) -> pd.DataFrame | None:
    """The surface points of the latest run that has any (diverged points included, to be named)."""
    if rows.empty or "surface" not in rows:
        return None
    surface_points = rows[rows["role"] == "surface"]
    learned = _learned(surface_points)
    if learned.empty:
        return None
    latest = learned.sort_values("started")["run_id"].iloc[-1]
    return surface_points[surface_points["run_id"] == latest]


def panel_cells(values, panel: str) -> pd.DataFrame:
    """A 40 x 40 surface (x varying fastest) as one row per grid point."""
    axis = np.round(surface_axis(), 4)
    return pd.DataFrame({"panel": panel, "x": np.tile(axis, SURFACE_GRID), "y": np.repeat(axis, SURFACE_GRID),
                         "z": np.round(np.asarray(values, dtype=float), 5)})


def _heatmap(cells: pd.DataFrame, scale: alt.Scale, legend: str) -> alt.Chart:
    """Rectangles centred on the grid points; the edges are computed in the browser to keep the spec small."""
    half = (HIGH - LOW) / (SURFACE_GRID - 1) / 2
    panel = cells["panel"].iloc[0]
    edge = alt.Scale(domain=[LOW - half, HIGH + half], nice=False)
    return alt.Chart(cells.drop(columns="panel"), title=panel, width=PANEL_SIZE, height=PANEL_SIZE).mark_rect(
    ).transform_calculate(x0=f"datum.x - {half}", x1=f"datum.x + {half}", y0=f"datum.y - {half}",
                          y1=f"datum.y + {half}").encode(
        x=alt.X("x0:Q", title="x", scale=edge), x2="x1:Q",
        y=alt.Y("y0:Q", title="y", scale=edge), y2="y1:Q",
        color=alt.Color("z:Q", title=legend, scale=scale),
        tooltip=[alt.Tooltip("x:Q", format=".2f"), alt.Tooltip("y:Q", format=".2f"), alt.Tooltip("z:Q", format=".4f")],
    )


def _panels(cells: list[pd.DataFrame], scale: alt.Scale, legend: str, title: str) -> alt.Chart:
    """One heatmap per panel, every panel on the same colour scale (concatenated, so each panel's data
    stays below Altair's row limit)."""
    charts_ = [_heatmap(c, scale, legend) for c in cells]
    return alt.concat(*charts_, columns=COLUMNS, title=title).resolve_scale(color="shared")


def _label(row: pd.Series) -> str:
    return f"{row['variant']} · {row['device']}"


def _learned(run: pd.DataFrame) -> pd.DataFrame:
    return run[run["surface"].map(has_surface)]


def _diverged_note(run: pd.DataFrame) -> str:
    diverged = run[run["diverged"].eq(True)]
    if diverged.empty:
        return ""
    return "; diverged, not plotted: " + ", ".join(f"{r['variant']} · {r['device']}" for _, r in diverged.iterrows())


def _run_title(run: pd.DataFrame) -> str:
    first = run.iloc[0]
    return (f"{first['samples']:,} samples, {first['epochs']:,} epochs, run {first['run_id']} on "
            f"{first['machine']}")


def surface_heatmaps(run: pd.DataFrame) -> alt.Chart:
    """The target and every surface learned in one run, on one colour scale."""
    target = target_surface()
    cells = [panel_cells(target, "target (peaks)")]
    cells += [panel_cells(r["surface"], _label(r)) for _, r in _learned(run).iterrows()]
    values = pd.concat(cells)["z"]
    scale = alt.Scale(scheme="viridis", domain=[float(values.min()), float(values.max())])
    return _panels(cells, scale, "z", "Target and learned surfaces on a 40 x 40 grid: " + _run_title(run)
                   + _diverged_note(run))


def difference_heatmaps(run: pd.DataFrame) -> alt.Chart:
    """learned - target per device and variant, and accelerator - CPU per variant, on one diverging
    colour scale centred on zero."""
    target = np.asarray(target_surface())
    learned = _learned(run)
    cells = [panel_cells(np.asarray(r["surface"]) - target, f"{_label(r)} - target") for _, r in learned.iterrows()]
    for variant, part in learned.groupby("variant"):
        cpu = part[part["device"] == "cpu"]
        for _, gpu in part[part["device"].map(devices.is_accelerator)].iterrows():
            if len(cpu):
                diff = np.asarray(gpu["surface"]) - np.asarray(cpu["surface"].iloc[0])
                cells.append(panel_cells(diff, f"{variant}: {gpu['device']} - cpu"))
    reach = max(float(pd.concat(cells)["z"].abs().max()), 1e-6)
    scale = alt.Scale(scheme="redblue", reverse=True, domain=[-reach, reach])
    return _panels(cells, scale, "difference", "Differences (learned - target, and GPU - CPU)")


def loss_curves(run: pd.DataFrame) -> alt.Chart:
    """The training loss of the surface run per device and variant (mean minibatch loss for the
    DataLoader variant)."""
    long = run[["variant", "device", "device_name", "machine", "machine_id", "run_id", "loss_epochs",
                "loss_curve"]].explode(["loss_epochs", "loss_curve"]).dropna(subset=["loss_curve"])
    long = long.assign(epoch=long["loss_epochs"].astype(int), mse=long["loss_curve"].astype(float),
                       series=series_label)
    return alt.Chart(long, title="Training loss (MSE) of the surface run: " + _run_title(run)).mark_line().encode(
        x=alt.X("epoch:Q", title="epoch"),
        y=alt.Y("mse:Q", title="MSE (log scale)", scale=alt.Scale(type="log")),
        color=alt.Color("series:N", title="measured"),
        tooltip=["series", "epoch", alt.Tooltip("mse:Q", format=".5f"), "machine", "run_id"],
    )


def time_per_variant(ok: pd.DataFrame) -> alt.Chart:
    """Seconds for the surface run's epochs, per variant, device and machine, as bars on a log scale
    (only the columns drawn, so the learned surfaces stay out of the chart's data)."""
    surface = ok[ok["role"] == "surface"] if len(ok) else ok
    data = surface.reindex(columns=["variant", "median_s", "device", "machine_id", *TIME_TOOLTIP])
    data = data.dropna(subset=["median_s"])
    data = data.assign(seconds=data["median_s"],
                       series=data["device"].astype(str) + " (" + data["machine_id"].astype(str).str[:18] + ")")
    return alt.Chart(data, title="Time for the surface run (median of repeats)").mark_bar().encode(
        x=alt.X("variant:N", title="variant"), xOffset="series:N",
        y=alt.Y("seconds:Q", title="seconds per training run, all its epochs (log scale)",
                scale=alt.Scale(type="log")),
        y2=alt.datum(_log_baseline(data["seconds"])),  # a log scale has no zero: the bars need a floor
        color=alt.Color("series:N", title="device (machine)"),
        tooltip=["variant", "series", "seconds", *TIME_TOOLTIP],
    )


def _log_baseline(values: pd.Series) -> float:
    return 10.0 ** math.floor(math.log10(values.min())) if len(values) and values.min() > 0 else 1.0


def crossover_lines(ok: pd.DataFrame) -> alt.Chart:
    sweep = ok[ok["role"] == "sweep"] if len(ok) else ok
    return measured_lines(sweep.assign(ms_per_epoch=sweep["seconds_per_epoch"] * 1e3) if len(sweep) else sweep,
                          "samples", "ms_per_epoch", title="Sample-size sweep: time per epoch",
                          x_title="training samples (log scale)", y_title="milliseconds per epoch (log scale)",
                          tooltip=["grid", "epochs", "steps_per_epoch", "torch_threads"])


def speedup_vs_published(rows: pd.DataFrame, published: pd.DataFrame) -> alt.Chart:
    """CPU time / GPU time per epoch against the sample count: the sweep as lines, the surface runs as
    squares, the write-up's figure as a diamond."""
    sp = epoch_speedups(rows)
    sp = sp.assign(series="measured · " + sp["variant"] + " · " + sp["device"] + " (" + sp["machine"].str[:30] + ")",
                   value=sp["speedup"])
    base = alt.Chart().encode(
        x=alt.X("samples:Q", title="training samples (log scale)", scale=alt.Scale(type="log")),
        y=alt.Y("value:Q", title="CPU time / GPU time per epoch (log scale)", scale=alt.Scale(type="log")),
        color=alt.Color("series:N", title="series"),
        tooltip=["series", "samples", "epochs", "role", "cpu_seconds_per_epoch", "seconds_per_epoch",
                 "speedup", "run_id"],
    )
    sweep = base.mark_line(point=True).properties(data=sp[sp["role"] == "sweep"])
    surface_runs = base.mark_square(size=120).properties(data=sp[sp["role"] == "surface"])
    stated = published_points(published, "samples")
    return alt.layer(sweep, surface_runs, stated,
                     title="GPU speed-up over the CPU (above 1: the GPU is faster; squares: the surface run)")
