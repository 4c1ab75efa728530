"""Predictions where readers see them: the sidebar's "Predict on" GPU picker, an experiment page's "What a
GPU would do (predicted)" section, and the pieces the Predictions page shares with it. A predicted figure
is the cost model's answer from a stand-in census (core.predict.predictions), never a measurement, and is
labelled so wherever it shows."""
import json
from dataclasses import dataclass

import altair as alt
import pandas as pd
import streamlit as st

from core import devices, experiments, settings
from core.present import analysis, charts
from core.model import hardware, profiles
from core.predict import predictions
from core.store import results
from ui import data, rerun_panel

PICKED = "predict-on"          # the reader's own pick, kept while they move between pages
WIDGET = "predict-on-widget"   # the sidebar's selectbox, set from PICKED or the page's default each run
PARTS = ("host", "loading", "compute", "copies", "sync")  # a predicted row's time_<part>_s (launches in host)
FIGURES = {column: st.column_config.NumberColumn(format="%.3g")  # comparison_table's numbers, 3 significant digits
           for column in ("measured CPU s/unit", "predicted GPU s/unit", "predicted speedup")}


# -- the sidebar's picker ---------------------------------------------------------------------------------
def gpu_choices() -> list[dict]:
    """The GPUs a prediction can be made for: this machine's calibrated ones first, then the catalogue's
    by title, then other machines' calibrated ones."""
    gpus = [row for row in hardware.listing() if row["kind"] == "gpu"]
    here = [row for row in gpus if row["name"].startswith(f"{hardware.THIS}:")]
    listed = sorted((row for row in gpus if row["origin"] == "catalogue"), key=lambda row: row["title"])
    return here + listed + [row for row in gpus if row not in here and row not in listed]


def default_gpu(page: str | None, choices: list[dict]) -> str:
    """The write-up's GPU on an experiment's page (where the catalogue knows its write-up), else the
    catalogue's first GPU."""
    names = [row["name"] for row in choices]
    if page in experiments.registry():
        try:
            gpu = hardware.writeup_target(experiments.get(page).source)[0].gpu
        except hardware.HardwareError:  # a write-up the catalogue does not name (a new experiment's)
            gpu = None
        if gpu is not None and gpu.name in names:
            return gpu.name
    return next((row["name"] for row in choices if row.get("origin") == "catalogue"), names[0])


def gpu_picker(page: str | None) -> None:
    """The sidebar's "Predict on" selectbox and a caption naming the target, its host included."""
    choices = gpu_choices()
    if not choices:
        st.caption("No GPU in the hardware catalogue to predict on.")
        return
    titles = {row["name"]: row["title"] for row in choices}
    picked = st.session_state.get(PICKED)
    st.session_state[WIDGET] = picked if picked in titles else default_gpu(page, choices)
    st.selectbox("Predict on", list(titles), format_func=titles.get, key=WIDGET, on_change=_keep_pick,
                 help="The GPU whose predicted series the pages draw beside the measured ones. Until you pick "
                      "one, an experiment's page predicts the write-up's GPU.")
    target, said = resolve(st.session_state[WIDGET])
    if target is None:
        st.caption(said)
    elif said:  # the nearest CPU stands in for this machine's
        host = settings.this_host()
        st.caption(f"Predicted series: {target.gpu.title} (a model, not a measurement), driven by each run's own CPU "
                   f"where its machine is calibrated, else by the CPU nearest {host}'s, {hardware.nearest_cpu()[1]}. "
                   f"{host.capitalize()} has no calibrated profile, so these are another CPU's figures: a prediction "
                   f"for its own CPU needs its calibration{_how_to_calibrate('below')}")
    else:
        st.caption(f"Predicted series: {target.gpu.title} (a model, not a measurement), driven by each run's own CPU "
                   f"where its machine is calibrated, else by {target.host.title}.")
    if profiles.load() is None:
        rerun_panel.calibrate_button("crossover-calibrate-sidebar")


def _keep_pick() -> None:
    st.session_state[PICKED] = st.session_state[WIDGET]


def resolve(name: str) -> tuple[hardware.Target | None, str]:
    """The target a GPU name stands for, driven by this machine's CPU, and stand_in_text ('' where this machine has a
    calibrated profile); None and the reason when it cannot be had."""
    try:
        return hardware.resolve(name, host=hardware.THIS), stand_in_text()
    except hardware.HardwareError as e:
        return None, f"No prediction: {e}"


def stand_in_text() -> str:
    """'' where this machine has a calibrated profile; else that the nearest CPU (hardware.nearest_cpu, named, and
    why) stands in for its CPU, so that the figures are another CPU's, and what a prediction for its own CPU needs."""
    if profiles.load() is not None:
        return ""
    host, (_, reason) = settings.this_host(), hardware.nearest_cpu()
    return (f"{host.capitalize()} has no calibrated profile: the CPU nearest its own stands in for it, {reason}, so "
            f"these are another CPU's figures. A prediction for {host}'s own CPU needs its calibration"
            f"{_how_to_calibrate('in the sidebar')}")


def _how_to_calibrate(button: str) -> str:
    """How long a calibration takes and how to start one (`button`: where the button is); nothing to run on a read-only
    server."""
    return "." if settings.read_only() else (f" ({profiles.CALIBRATION_TIME}): **{rerun_panel.CALIBRATE}** {button}, "
                                             f"or `python -m core calibrate`.")


def no_profile_text() -> str:
    """'no calibrated profile for this machine: run ...' (for a visitor of a read-only view, the server's, and
    nothing to run)."""
    text = f"no calibrated profile for {settings.this_host()}"
    return text if settings.read_only() else f"{text}: run `python -m core calibrate` ({profiles.CALIBRATION_TIME})"


def chosen_gpu(experiment: experiments.Presented | None = None) -> str | None:
    """The sidebar's GPU, or (a page rendered without the sidebar) the page's default; None when the catalogue
    has no GPU."""
    name = st.session_state.get(WIDGET) or st.session_state.get(PICKED)
    if name:
        return name
    choices = gpu_choices()
    return default_gpu(experiment.name if experiment else None, choices) if choices else None


# -- the comparison: one run's measured CPU points beside their predicted GPU points ----------------------
def standin_runs(records: list[dict], experiment: str) -> list[dict]:
    """The complete runs of `experiment` holding stand-in censuses, this machine's first, then those that took
    them all, latest first."""
    here = devices.fingerprint()["machine_id"]
    found = [r for r in records if r["experiment"] == experiment and r["status"] == "complete" and r.get("standin")]
    return sorted(found, key=lambda r: (r.get("machine_id") == here, results.has_every_standin(r),
                                        r.get("started") or ""), reverse=True)


def measured_cpu(record: dict) -> pd.DataFrame:
    """The run's measured CPU points, with `per_unit_s`."""
    rows = analysis.ok(results.rows_frame([record], record["experiment"]))
    return rows[rows["device"] == "cpu"]


def predicted_gpu(record: dict, target: hardware.Target) -> pd.DataFrame:
    """The run's stand-in points predicted on `target`, with `per_unit_s` (only those the model could
    predict)."""
    rows = predictions.standin_rows([record], record["experiment"], target)
    return rows[rows["point_status"] == "ok"]


def swept(record: dict) -> list[str]:
    """The parameters the run's points sweep, in the order they first appear."""
    params = [*(row.get("params", {}) for row in record["rows"]), *(e["params"] for e in record["standin"])]
    return list(dict.fromkeys(name for p in params for name in p))


def main_param(frame: pd.DataFrame, params: list[str]) -> str | None:
    """The numeric swept parameter with the most distinct values (the chart's x), None when none is."""
    numeric = [p for p in params if p in frame and pd.to_numeric(frame[p], errors="coerce").notna().any()]
    return max(numeric, key=lambda p: frame[p].nunique(), default=None)


def line_text(frame: pd.DataFrame, others: list[str]) -> pd.Series:
    """The swept parameters besides the chart's x that a row has, as one label per row ('' when it has none: a
    variant that does not take them)."""
    if not others:
        return pd.Series("", index=frame.index)
    return frame.apply(lambda row: " ".join(f"{p}={_value(row.get(p))}" for p in others if _value(row.get(p)) != "-"),
                       axis=1)


def _value(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    return f"{int(value)}" if isinstance(value, float) and value.is_integer() else f"{value}"


def measured_label(record: dict) -> str:
    here = record.get("machine_id") == devices.fingerprint()["machine_id"]
    if here:
        return f"measured on {settings.this_host()}'s CPU"
    return f"measured on {results.record_summary(record)['machine']}"


def predicted_label(target: hardware.Target) -> str:
    return f"predicted on {target.title}, not measured"


def compare(measured: pd.DataFrame, predicted: pd.DataFrame) -> pd.DataFrame:
    """Every predicted GPU point beside the measured CPU time of the same variant and point or, for a
    variant the CPU did not run, of the fastest CPU variant at that point with the same unit (`against`
    names the one used; none when no CPU variant times that unit): `cpu_s`, `gpu_s` and `speedup` = CPU /
    GPU (above 1: the GPU would be faster)."""
    cpu = measured[["variant", "point", "unit", "per_unit_s"]].rename(columns={"per_unit_s": "cpu_s"})
    fastest = cpu.sort_values("cpu_s").drop_duplicates(["point", "unit"]).rename(
        columns={"variant": "fastest", "cpu_s": "fastest_s"})
    paired = (predicted.merge(cpu.drop(columns="unit"), on=["variant", "point"], how="left")
              .merge(fastest, on=["point", "unit"], how="left"))
    same = paired["cpu_s"].notna()
    cpu_s = paired["cpu_s"].where(same, paired["fastest_s"])
    return paired.assign(against=paired["variant"].where(same, paired["fastest"]), cpu_s=cpu_s,
                         gpu_s=paired["per_unit_s"], speedup=cpu_s / paired["per_unit_s"])


def parts_text(row: pd.Series) -> str:
    """'host 62%, compute 30%, sync 8%': a predicted row's parts, largest first."""
    total = row.get("median_s")
    if not isinstance(total, (int, float)) or not total > 0:
        return ""
    shares = {part: row.get(f"time_{part}_s") / total for part in PARTS
              if isinstance(row.get(f"time_{part}_s"), (int, float)) and pd.notna(row.get(f"time_{part}_s"))}
    return ", ".join(f"{part} {share:.0%}" for part, share in sorted(shares.items(), key=lambda kv: -kv[1])
                     if share >= 0.005)


def point_text(point: str) -> str:
    return results.point_text(json.loads(point)) or "the one configuration"


def chart_frame(compared: pd.DataFrame, measured: str, x: str, others: list[str]) -> pd.DataFrame:
    """The long frame charts.measured_and_predicted draws from `compared` (compare's rows, each with its
    predicted `series` label): every predicted point, and under the same variant the measured CPU time it is
    set against (labelled `measured`), so that each variant's panel holds both."""
    cpu = compared[compared["cpu_s"].notna()].drop_duplicates(["variant", "point"])
    data = pd.concat([cpu.assign(per_unit_s=cpu["cpu_s"], series=measured, predicted=False,
                                 **dict.fromkeys(analysis.EDGES, 1.0)),
                      compared.assign(per_unit_s=compared["gpu_s"], predicted=True)], ignore_index=True)
    data[x] = pd.to_numeric(data[x], errors="coerce")
    edges = [edge for edge in analysis.EDGES if edge in data]  # a predicted series' likely range, where it has one
    return data.assign(line=line_text(data, others), point=data["point"].map(point_text))[
        ["variant", "point", "line", "series", "predicted", "against", x, "per_unit_s", "unit", *edges]].rename(
        columns={"against": "CPU variant"})


def unit_text(frame: pd.DataFrame) -> str:
    units = frame["unit"].dropna().unique()
    return f"seconds per {units[0]}" if len(units) == 1 else "seconds per unit"


# -- an experiment page ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Forecast:
    """What an experiment page predicts: the target (the sidebar's GPU driven by this machine's CPU, or the nearest CPU
    where it has no profile, as `stand_in` says; None, with `problem` saying why), the model's accuracy on this machine
    in words, and every stand-in row of the experiment predicted on that GPU, each run's driven by its own machine's
    CPU where it is calibrated (the verdicts')."""
    target: hardware.Target | None
    problem: str
    accuracy: str
    rows: pd.DataFrame
    stand_in: str = ""  # stand_in_text: what drives the GPU for this machine's runs, where it has no profile


def forecast(experiment: experiments.Presented) -> Forecast:
    name = chosen_gpu(experiment)
    if name is None:
        return Forecast(None, "No GPU in the hardware catalogue to predict on.", "", pd.DataFrame())
    target, said = resolve(name)
    if target is None:
        return Forecast(None, said, "", pd.DataFrame())
    rows = data.predicted_rows(experiment.name, name)
    return Forecast(target, "", accuracy_here() if len(rows) else "", rows, said)


def accuracy_here() -> str:
    """The model's check on this machine's CPU and, where a GPU measured anywhere, on those GPUs by bound: a
    small workload's GPU prediction rests on its host-bound figures."""
    frame = data.accuracy_here()
    here = predictions.accuracy_text(frame[frame["machine_id"] == devices.fingerprint()["machine_id"]], "cpu")
    gpus = frame[frame["device"].map(devices.kind) == "cuda"] if len(frame) else frame
    if gpus.empty:
        return here
    names = ", ".join(sorted(gpus["device_name"].dropna().unique()))
    return f"{here}; against the GPUs that measured ({names}), by what bounds a point: {predictions.bound_text(gpus)}"


def section(experiment: experiments.Presented, records: list[dict], found: Forecast) -> None:
    """"What a GPU would do (predicted)": the latest run's measured CPU series and the same points
    predicted on the sidebar's GPU, the model's accuracy on this machine, and a table of both."""
    st.subheader("What a GPU would do (predicted)")
    runs = standin_runs(records, experiment.name)
    if not runs:
        rerun = "" if settings.read_only() else (f": run it again (in the sidebar, or `python -m core run "
                                                 f"{experiment.name} --preset quick`)")
        st.info("No stand-in census in the results yet: a run of this version ends by taking the census of every "
                "point a GPU would run, on any machine, which is what the cost model predicts a GPU from. Runs "
                f"recorded before it hold none{rerun}.")
        return
    if found.target is None:
        st.info(found.problem)
        return
    record = runs[0]
    target = hardware.resolve(found.target.gpu.name, host=predictions.driver(record))
    if found.stand_in and predictions.driver(record) == hardware.THIS:
        st.info(found.stand_in)
    measured, predicted = measured_cpu(record), found.rows[found.rows["run_id"] == record["run_id"]]
    if predicted.empty:
        st.info(f"The model could not predict any point of run {record['run_id']} on {target.title}.")
        return
    params = swept(record)
    x = main_param(pd.concat([measured, predicted]), params)
    labels = (measured_label(record), predicted_label(target))
    compared = compare(measured, predicted).assign(series=labels[1])
    if x:
        frame = chart_frame(compared, labels[0], x, [p for p in params if p != x])
        data.draw(("predicted", experiment.name, target.title, record["run_id"]), lambda: [
            charts.measured_and_predicted(
                frame, x, title=f"{experiment.title}: measured CPU and predicted GPU per {x}", x_title=x,
                y_title=unit_text(frame), facet="variant" if frame["variant"].nunique() > 1 else None,
                tooltip=["variant", "CPU variant", "point"])])
    st.caption(f"One panel per variant a GPU would run. Dotted lines and hollow points are predicted on "
               f"{target.title} by the cost model from each point's stand-in census (the workload built on "
               f"the meta device), not measured; solid ones are {labels[0]} (run {record['run_id']}), the same "
               f"variant or, where the CPU runs none, the fastest CPU variant at that point. The model on "
               f"{settings.this_host()}: {found.accuracy}.")
    st.dataframe(comparison_table(compared), hide_index=True, column_config=FIGURES)


def comparison_table(compared: pd.DataFrame) -> pd.DataFrame:
    """variant, point, measured CPU s/unit, predicted GPU s/unit, predicted speedup, predicted parts."""
    return pd.DataFrame({
        "variant": compared["variant"], "point": compared["point"].map(point_text),
        "measured CPU s/unit": compared["cpu_s"],
        "CPU variant": compared["against"],
        "predicted GPU s/unit": compared["gpu_s"],
        "predicted speedup": compared["speedup"],
        "predicted parts": compared.apply(parts_text, axis=1) if len(compared) else [],
    })


# -- the Predictions page's "Will a GPU help?" ----------------------------------------------------------------
def driver_title(record: dict) -> str:
    return hardware.device_named(predictions.driver(record), what="host").title


def every_gpu(record: dict, measured: pd.DataFrame) -> pd.DataFrame:
    """The run's stand-in points predicted on every GPU of gpu_choices (driven by the run's driver), each beside its
    measured CPU time (compare), with `gpu` (its title) and `series` (its legend label)."""
    found = []
    for row in gpu_choices():
        target = hardware.resolve(row["name"], host=predictions.driver(record))
        found.append(compare(measured, predicted_gpu(record, target)).assign(
            gpu=row["title"], series=f"{row['title']} (predicted, not measured)"))
    return pd.concat(found, ignore_index=True)


def drawn_by_default(summary: pd.DataFrame, picked_title: str | None) -> list[str]:
    """The GPUs the comparison chart draws unless a reader picks others: the sidebar's, and those predicted the least
    and the most faster (median), each once."""
    ranked = summary.sort_values("median_speedup", kind="stable")["gpu"].tolist()
    return list(dict.fromkeys(g for g in (picked_title, *ranked[:1], *ranked[-1:]) if g in ranked))


def gpu_summary(compared: pd.DataFrame) -> pd.DataFrame:
    """Per GPU: its points, median and best predicted speedup, and the share of its points that are host-bound
    (predictions.bound of each row's host_share): where most are, the CPU driving the GPU sets their time, and the
    GPUs come out alike."""
    return compared.assign(host_bound=compared["host_share"].map(lambda share: predictions.bound(share) ==
                                                                 "host-bound")).groupby("gpu", sort=False).agg(
        points=("point", "size"), median_speedup=("speedup", "median"), best_speedup=("speedup", "max"),
        host_bound=("host_bound", "mean")).reset_index()


def crossover_table(compared: pd.DataFrame, x: str, others: list[str]) -> pd.DataFrame:
    """One line per variant and setting of the other swept parameters that compares two `x` or more, one column
    per GPU: the smallest `x` from which that GPU is predicted faster than the measured CPU at every larger `x`
    compared (analysis.crossovers), or "never"."""
    paired = compared[compared["speedup"].notna()]
    paired = paired.assign(**{x: pd.to_numeric(paired[x]), "other parameters": line_text(paired, others)})
    lines = ["variant", "other parameters"]
    paired = paired[paired.groupby(lines)[x].transform("nunique") > 1]  # one x compared: nothing to cross
    if paired.empty:
        return pd.DataFrame()
    found = analysis.crossovers(paired, x, ["gpu", *lines])
    found = found.assign(faster=found["crossover"].map(lambda v: "never" if v is None or pd.isna(v) else _value(v)),
                         **{f"{x} compared": found["smallest"].map(_value) + " to " + found["largest"].map(_value)})
    table = found.pivot(index=[*lines, f"{x} compared"], columns="gpu", values="faster")
    table = table[list(dict.fromkeys(paired["gpu"]))].reset_index()
    table.columns.name = None
    return table.drop(columns=[] if others else ["other parameters"])


# -- the Predictions page's accuracy scatter ----------------------------------------------------------------
def accuracy_chart(frame: pd.DataFrame) -> alt.LayerChart:
    """Predicted against measured seconds per sample, log-log, with y = x and the band within
    predictions.WITHIN either way."""
    low, high = frame[["measured_s", "predicted_s"]].min().min() / 2, frame[["measured_s", "predicted_s"]].max().max() * 2
    line = pd.DataFrame({"measured_s": [low, high]})
    line = line.assign(predicted_s=line["measured_s"], lower=line["measured_s"] / predictions.WITHIN,
                       upper=line["measured_s"] * predictions.WITHIN)
    axis = alt.Scale(type="log", domain=[low, high])
    band = alt.Chart(line).mark_area(opacity=0.15, color="#54a24b").encode(
        x=alt.X("measured_s:Q", scale=axis), y=alt.Y("lower:Q", scale=axis), y2="upper:Q")
    equal = alt.Chart(line).mark_line(color="#54a24b", strokeDash=[4, 3]).encode(x="measured_s:Q", y="predicted_s:Q")
    points = alt.Chart(frame).mark_point(filled=True, size=50).encode(
        x=alt.X("measured_s:Q", title="measured seconds per sample (log)", scale=axis),
        y=alt.Y("predicted_s:Q", title="predicted seconds per sample (log)", scale=axis),
        color=alt.Color("experiment:N", legend=charts.LEGEND), shape=alt.Shape("device_name:N", legend=charts.LEGEND),
        tooltip=["experiment", "machine", "device_name", "variant", "point", "unit",
                 alt.Tooltip("measured_s:Q", format=".3~g"), alt.Tooltip("predicted_s:Q", format=".3~g"),
                 alt.Tooltip("ratio:Q", format=".2f"), "within"])
    return alt.layer(band, equal, points).properties(
        title=f"Predicted against measured (green: equal, and the band within {predictions.WITHIN:g}x)", height=420)
