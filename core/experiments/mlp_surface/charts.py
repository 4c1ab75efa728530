"""Charts for the MLP regression-surface experiment: the target and the learned surfaces as heatmaps on
one colour scale, their differences, the loss curves, time per device and variant, and the sample-size
crossover."""
import altair as alt
import numpy as np
import pandas as pd

from core import devices
from core.present import analysis
from core.present import charts as grammar
from core.experiments.mlp_surface.analysis import has_surface
from core.experiments.mlp_surface.model import HIGH, LOW, SURFACE_GRID, surface_axis, target_surface

PANEL_SIZE = 170
COLUMNS = 3


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


def loss_curves(run: pd.DataFrame) -> alt.TopLevelMixin:
    """The training loss of the surface run per device and variant (mean minibatch loss for the
    DataLoader variant)."""
    long = run[["variant", "device", "device_name", "machine", "machine_id", "run_id", "preset", "started", "status",
                "loss_epochs", "loss_curve"]].explode(["loss_epochs", "loss_curve"]).dropna(subset=["loss_curve"])
    long = long.assign(epoch=long["loss_epochs"].astype(int), mse=long["loss_curve"].astype(float),
                       point_status="ok").drop(columns=["loss_epochs", "loss_curve"])
    data = grammar.measured(long, "mse", spread=None)
    return grammar.lines(data.assign(device_text=data["device"]), "epoch", "mse", points=False, line="device_text",
                         log_x=False, title="Training loss (MSE) of the surface run: " + _run_title(run),
                         x_title="epoch", y_title="training loss (MSE, the epoch's mean)",
                         tooltip=["device_name"])


def time_per_variant(ok: pd.DataFrame) -> alt.LayerChart:
    """Seconds for the surface run's epochs per variant: a dot per device and run on a log axis, with its IQR
    (only the columns drawn, so the learned surfaces stay out of the chart's data)."""
    surface = ok[ok["role"] == "surface"] if len(ok) else ok
    data = grammar.measured(surface.drop(columns=["surface", "loss_curve", "loss_epochs"], errors="ignore"),
                            "median_s")
    data = data.assign(label=data["variant"], series=data["device"])
    return grammar.category_dots(data, "label", "median_s", title="Time for the surface run",
                                 x_title="seconds per training run, all its epochs (median of repeats)",
                                 tooltip=["epochs", "samples", alt.Tooltip("seconds_per_epoch:Q", format=".3~g")])


def crossover_lines(ok: pd.DataFrame) -> alt.TopLevelMixin:
    sweep = ok[ok["role"] == "sweep"] if len(ok) else ok
    sweep = sweep.assign(ms_per_epoch=sweep["seconds_per_epoch"] * 1e3) if len(sweep) else sweep.assign(ms_per_epoch=[])
    return grammar.measured_lines(sweep, "samples", "ms_per_epoch", title="Sample-size sweep: time per epoch",
                                  x_title="training samples", y_title="milliseconds per epoch (median run / epochs)",
                                  tooltip=["grid", "epochs", "steps_per_epoch", "torch_threads"])


def speedup_vs_published(rows: pd.DataFrame, published: pd.DataFrame) -> alt.TopLevelMixin:
    """CPU time / GPU time per epoch against the sample count: the sweep as lines, the surface runs named at
    their point, the write-up's figure as a hollow point and a dashed rule."""
    measured = analysis.ok(rows).drop(columns=["surface", "loss_curve", "loss_epochs"], errors="ignore")
    gpu = measured[analysis.on_accelerator(measured)] if len(measured) else measured
    ours = grammar.paired_ratio(measured[measured["device"] == "cpu"], gpu, ["variant", "point"])
    ours = ours.assign(role_text=ours["role"].map({"sweep": "", "surface": "surface run"}))
    theirs = grammar.published(published, "ratio")
    return grammar.lines(pd.concat([ours, theirs], ignore_index=True), "samples", "ratio", ratio=True,
                         line="role_text", x_title="training samples",
                         y_title="CPU time / GPU time per epoch (medians)",
                         title="GPU speed-up over the CPU (above 1: the GPU is faster)", tooltip=["epochs", "role"])
