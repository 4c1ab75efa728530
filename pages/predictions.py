import warnings

import pandas as pd
import streamlit as st

from core import devices, experiments, settings, versions
from core.present import charts
from core.predict import predictions, writeups
from core.model import hardware, profiles
from ui import data, predicted
from ui.router import require_router

require_router()

st.title("Predictions")
st.markdown("Crossover's cost model predicts the time of one unit of a workload on a piece of hardware from the "
            "workload's census (every ATen operation, its FLOPs, bytes, copies and syncs) and the hardware's "
            "figures: host overhead per operation, launches, compute, copies and syncs, host and GPU overlapping "
            "between syncs. A GPU is predicted from a stand-in census (the workload built on PyTorch's meta "
            "device), so no GPU is needed. Everything on this page marked predicted is the model's answer, not a "
            "measurement.")
records = data.records()
here = devices.fingerprint()["machine_id"]
host = settings.this_host()  # "this server" for a visitor of a read-only view


# The table of every point checked: what was measured, by the run before, and predicted, first
POINT_COLUMNS = ["experiment", "machine", "variant", "point", "measured_s", "cold", "measured_before_s",
                 "runs_apart", "predicted_s", "ratio", "within", "host_share", "bound", "device", "device_name",
                 "unit", "per_call", "hardware"]


def _ratio(value) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:#.3g}"  # 3 figures, kept when trailing zeros: 1.00, 0.345, 0.00200


def _share(value) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:.0%}"


def _checked(part: pd.DataFrame) -> None:
    """One device's points checked: four figures, and the same by what bounds the prediction."""
    found = predictions.summary(part)
    points, median, within, worst = st.columns(4)
    points.metric("points", found["points"])
    median.metric("median predicted / measured", _ratio(found["median_ratio"]))
    within.metric(f"within {predictions.WITHIN:g}x", _share(found["share_within"]))
    worst.metric("worst ratio", _ratio(found["worst_ratio"]))
    _summary_table(predictions.by_bound(part), bound=st.column_config.TextColumn("Regime (what bounds it)"),
                   points=st.column_config.NumberColumn("Points"))


def _share_column(label: str) -> st.column_config.Column:
    return st.column_config.ProgressColumn(label, format="%.0f%%", min_value=0.0, max_value=100.0)


def _summary_table(frame: pd.DataFrame, **columns) -> None:
    """predictions.summary()'s or error_summary()'s figures, a row per group: the ratios, the |errors| in percent,
    and each share as a bar in percent; `columns` configures the group's own columns."""
    shares = {column: frame[column] * 100 for column in frame.columns
              if column.startswith(("share_within", "within_")) or column.endswith("_error") or column == "too_fast"}
    st.dataframe(frame.assign(**shares), hide_index=True, column_config={
        "median_ratio": st.column_config.NumberColumn("Median predicted / measured", format="%.3g"),
        "worst_ratio": st.column_config.NumberColumn("Worst ratio", format="%.3g"),
        "median_error": st.column_config.NumberColumn("Median |error|", format="%.0f%%"),
        "p90_error": st.column_config.NumberColumn("90th percentile |error|", format="%.0f%%"),
        "too_fast": _share_column("Predicted too fast"),
        **{f"within_{limit:g}x": _share_column(f"Within {limit:g}x") for limit in predictions.WITHIN_LIMITS},
        "share_within": _share_column(f"Within {predictions.WITHIN:g}x")} | columns)


# -- (a) accuracy where a machine measured ------------------------------------------------------------------
st.header("How close the model comes where we measured")
st.markdown(f"For every point measured with a census on a machine with a calibrated profile (each machine's "
            f"latest complete run per experiment and preset), the model's prediction for that machine's own "
            f"device beside the measured median: ratio = predicted / measured; the target is within "
            f"{predictions.WITHIN:g}x either way.")
accuracy = data.accuracy()
repeats = predictions.repeatability(records)
calibrated = profiles.all()
if here not in calibrated:
    st.info(f"Nothing of {host} can be checked yet: {predicted.no_profile_text()}.")
for machine_id in dict.fromkeys([*sorted(calibrated, key=lambda m: m != here), *accuracy["machine_id"]]):
    part = accuracy[accuracy["machine_id"] == machine_id]
    name = devices.label(calibrated[machine_id]["fingerprint"]) if machine_id in calibrated else part["machine"].iloc[0]
    st.markdown(f"**{machine_id}**{f' ({host})' if machine_id == here else ''}: {name}")
    if part.empty:
        st.caption("No measured point with a census the model can read yet (runs of this version record one): "
                   "run an experiment on it (`python -m core run NAME --preset quick`).")
        continue
    for device in sorted(part["device"].unique(), key=lambda d: (d != "cpu", d)):
        on_device = part[part["device"] == device]
        st.markdown(f"{device}: {on_device['device_name'].iloc[0]}")
        if quick := predictions.quick_profile_text(machine_id, device):
            st.caption(quick)
        _checked(on_device)
        if unmeasured := predictions.unmeasured_text(machine_id, device):
            st.caption(unmeasured)
        if blind := predictions.graph_blind_text(records, machine_id, device):
            st.caption(blind)
    repeated = predictions.repeatability_text(repeats[repeats["machine_id"] == machine_id])
    if repeated:
        st.caption(f"How far its own measurements repeat: {repeated}, of every point it measured twice, with a census or "
                   f"not. The model cannot be checked more finely than that.")
if not accuracy.empty:
    st.caption(f"What bounds a point is the host's share of its predicted time (dispatch, Python, data loading): "
               f"{predictions.bounds_text()}. A GPU prediction of a small workload rests on the host terms; the "
               "CPU's own compute is not carried to a GPU, so the host-bound points are the check that bears most "
               "on it.")
    st.altair_chart(predicted.accuracy_chart(accuracy), width="stretch")
    with st.expander("Every point checked"):
        st.dataframe(predictions.with_repeats(accuracy, repeats), hide_index=True, column_order=POINT_COLUMNS,
                     column_config={"measured_s": st.column_config.NumberColumn("measured (s per sample)",
                                                                                format="%.3g"),
                                    "predicted_s": st.column_config.NumberColumn("predicted (s per sample)",
                                                                                 format="%.3g"),
                                    "ratio": st.column_config.NumberColumn("predicted / measured", format="%.3g"),
                                    "within": st.column_config.CheckboxColumn(f"within {predictions.WITHIN:g}x"),
                                    "cold": st.column_config.CheckboxColumn(
                                        "one cold call", help="Measured by a single first call: the run's budget left "
                                        "no room for a warm-up. The model predicts a warm call."),
                                    "host_share": st.column_config.NumberColumn("host share", format="percent"),
                                    "measured_before_s": st.column_config.NumberColumn(
                                        "measured by the run before", format="%.3g"),
                                    "runs_apart": st.column_config.NumberColumn(
                                        "last two runs (newer / older)", format="%.2f",
                                        help="The same point measured by the run before, in the same configuration: "
                                             "how far the measurement itself moved")})

catalogue = data.catalogue_accuracy()
if not catalogue.empty:
    st.subheader("The catalogue, against a GPU that measured")
    st.markdown("A GPU you do not have is predicted from the catalogue's published and assumed figures. Where a "
                "machine in the results has a GPU the catalogue lists, that entry predicts the GPU's measured points, "
                "driven by the machine's own calibrated CPU: how far the catalogue's figures carry for that GPU.")
    _summary_table(predictions.catalogue_summary(catalogue),
                   machine_id=st.column_config.TextColumn("Machine that measured"),
                   hardware=st.column_config.TextColumn("Catalogue entry (predicted)", width="medium"),
                   points=st.column_config.NumberColumn("Measured points"), share_within_2x=_share_column("Within 2x"))
    with st.expander("Every point the catalogue predicted"):
        st.dataframe(catalogue, hide_index=True, column_order=["experiment", "machine", "device_name", "variant", "point",
                                                               "measured_s", "predicted_s", "ratio", "within"],
                     column_config={"measured_s": st.column_config.NumberColumn("measured (s per sample)", format="%.3g"),
                                    "predicted_s": st.column_config.NumberColumn("predicted (s per sample)",
                                                                                 format="%.3g"),
                                    "ratio": st.column_config.NumberColumn("predicted / measured", format="%.3g")})

# -- (b) the write-ups ------------------------------------------------------------------------------------
st.header("The write-ups' figures, predicted")
st.markdown(f"Every timing figure and GPU speedup the write-ups publish, predicted on the hardware the write-up "
            f"names (its GPU driven by its CPU; an assumption where it does not say) beside the published figure: "
            f"ratio = predicted / published, close when within {writeups.WITHIN:g}x. A speedup (unit x) is the CPU's "
            f"predicted time over the GPU's, for one configuration. Where the write-up's own method (its clock, its "
            f"loop) explains a gap, the method column says how, and where what it adds to the published time cannot "
            f"explain a prediction above it, it says that too.")
with warnings.catch_warnings(record=True) as caught:  # a broken or foreign file: named with why, as for a record
    warnings.simplefilter("always", writeups.UnreadableTable)
    validation = writeups.latest()  # this machine's, else the latest another machine saved: the same hardware predicted
for warning in caught:
    if issubclass(warning.category, writeups.UnreadableTable):
        st.warning(str(warning.message), icon="⚠️")
    else:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
not_here = ("." if settings.read_only() else ": `python -m core predict --writeups` takes the census of each "
            "figure's workload and saves the table here (a minute or two).")
if validation is not None and validation.attrs.get("machine_id") != here:
    st.caption(f"Not computed on {host} yet: the table below was computed on "
               f"{validation.attrs.get('machine_id')}" + not_here)
if validation is None:
    st.info(f"Not computed on {host} yet" + not_here)
else:
    for device, unit, kind in (("GPU", writeups.TIMING_UNIT, "GPU figures"),
                               ("CPU", writeups.TIMING_UNIT, "CPU figures"),
                               ("GPU", writeups.SPEEDUP_UNIT, "GPU speedups")):
        found = writeups.summary(validation, device, unit)
        if found["figures"]:
            figures, within, median, worst = st.columns(4)
            figures.metric(f"{kind} predicted", found["figures"])
            within.metric(f"within {writeups.WITHIN:g}x", _share(found["within_2x"]))
            median.metric("median predicted / published", _ratio(found["median_ratio"]))
            worst.metric("worst ratio", _ratio(found["worst"]["ratio"]))
            worst.caption(found["worst"]["id"])
    st.dataframe(validation[["id", "experiment", "quantity", "device", "published", "predicted", "unit", "ratio",
                             "within_2x", "target", "assumed", "assumption", "how", "method", "error"]],
                 hide_index=True, column_config={
                     "id": st.column_config.TextColumn("Figure"),
                     "quantity": st.column_config.TextColumn("What it times"),
                     "predicted": st.column_config.NumberColumn("Predicted (model)", format="%.3g"),
                     "published": st.column_config.NumberColumn("Published", format="%.3g"),
                     "ratio": st.column_config.NumberColumn("Predicted / published", format="%.3g"),
                     "assumed": st.column_config.CheckboxColumn("Hardware assumed"),
                     "how": st.column_config.TextColumn("How it was predicted"),
                     "within_2x": st.column_config.CheckboxColumn(f"within {writeups.WITHIN:g}x"),
                     "target": st.column_config.TextColumn("hardware"),
                     "assumption": st.column_config.TextColumn("assumption notes", width="large"),
                     "method": st.column_config.TextColumn("the write-up's method", width="large")})
    taken = validation.attrs.get("taken")
    code = validation.attrs.get("code_version")
    st.caption(f"Computed {taken or 'at an unknown date'} by `python -m core predict --writeups` on "
               f"{validation.attrs.get('machine_id')} (code {versions.code_text(code) if code else 'unknown'}); "
               "rerun it after the model or the catalogue changes.")

# -- (c) will a GPU help? -----------------------------------------------------------------------------------
st.header("Will a GPU help?")
st.markdown("Pick an experiment and one of its runs (a configuration measured with stand-in censuses): for each GPU "
            "of the catalogue, its predicted time per unit against this run's measured CPU time, driven by the run's "
            f"own CPU where its machine is calibrated (else {host}'s), and from where along the swept parameter the "
            "GPU would be faster.")
st.caption("Your own model: `python -m core predict --model path/to/file.py:build_fn --input 512x84 [--train] "
           "[--check]` predicts one forward (or training step) of it on this CPU and on every catalogue GPU, with the "
           "batch from which each GPU would win; `--check` also times it on this CPU beside its prediction. It runs "
           "your file, so it is a command, never a page" + (
               ": this read-only view runs nothing, so install Crossover on a machine of your own." if settings.read_only()
               else "."))
with_standin = {name: exp for name, exp in experiments.registry().items() if predicted.standin_runs(records, name)}
if not with_standin:
    st.info("No run with stand-in censuses in the results yet: a run of this version ends by taking the census of "
            "every point a GPU would run" + ("." if settings.read_only() else ": run an experiment again (Run it again, "
                                              "in its page's sidebar, or `python -m core run NAME --preset quick`)."))
    st.stop()
name = st.selectbox("Experiment", list(with_standin), format_func=lambda n: with_standin[n].title, key="help-experiment")
runs = {r["run_id"]: r for r in predicted.standin_runs(records, name)}
run_id = st.selectbox("Configuration (a run)", list(runs), key=f"help-run-{name}", format_func=lambda r: (
    f"{r} · {runs[r].get('preset')} · {len(runs[r]['standin'])} stand-in points"
    f"{f' · {host}' if runs[r].get('machine_id') == here else ''}"))
record = runs[run_id]
if predictions.driver(record) == hardware.THIS and (stand_in := predicted.stand_in_text()):
    st.info(stand_in)  # this machine's own run (or an uncalibrated machine's), driven by the nearest CPU
measured = predicted.measured_cpu(record)
compared = predicted.every_gpu(record, measured)
if compared.empty:
    st.info(f"The model could not predict any stand-in point of run {run_id}: its censuses hold errors or skips.")
    st.stop()
params = predicted.swept(record)
x = predicted.main_param(pd.concat([measured, compared]), params)
others = [p for p in params if p != x]
driver = predicted.driver_title(record)
st.markdown(f"**Predicted speedup over {predicted.measured_label(record)}** per GPU over this run's points: CPU time / "
            "predicted GPU time, above 1 the GPU would be faster; a variant the CPU does not run is set against the "
            "fastest CPU variant at the same point. A host-bound point's predicted time is mostly the host's "
            f"({predictions.bounds_text()}): the CPU that drives the GPU sets it, so every GPU comes out alike there.")
summary = predicted.gpu_summary(compared)
st.dataframe(summary.assign(host_bound=100 * summary["host_bound"]), hide_index=True, column_config={
    "gpu": f"GPU (predicted, driven by {driver})",
    "median_speedup": st.column_config.NumberColumn("median predicted speedup", format="%.2f"),
    "best_speedup": st.column_config.NumberColumn("best predicted speedup", format="%.2f"),
    "host_bound": _share_column("host-bound points")})
if x:
    st.markdown(f"**Where a GPU would start to win** along {x}: for each GPU (a column), the smallest {x} from which "
                f"it is predicted faster than the measured CPU at every larger {x} of the run, or never.")
    crossing = predicted.crossover_table(compared, x, others)
    if len(crossing):
        st.dataframe(crossing, hide_index=True)
    else:
        st.caption(f"No line of this run compares two {x} or more with both a measured CPU time and a prediction: "
                   "there is no crossover to find along it.")
    variant = st.selectbox("Variant to draw", list(dict.fromkeys(compared["variant"])), key=f"help-variant-{name}")
    titles = {row["name"]: row["title"] for row in predicted.gpu_choices()}
    drawn = st.multiselect(
        "GPUs to draw", summary["gpu"].tolist(), key=f"help-gpus-{name}",
        default=predicted.drawn_by_default(summary, titles.get(predicted.chosen_gpu())),
        max_selections=len(charts.PREDICTED_COLOURS),
        help=f"At most {len(charts.PREDICTED_COLOURS)}, each its own colour; by default the sidebar's GPU and those "
             "predicted the least and the most faster")
    if not drawn:
        st.info("Pick a GPU to draw beside the measured CPU.")
    else:
        long = predicted.chart_frame(compared[(compared["variant"] == variant) & compared["gpu"].isin(drawn)],
                                     predicted.measured_label(record), x, others)
        st.altair_chart(charts.measured_and_predicted(
            long, x, title=f"{with_standin[name].title}, {variant}: measured CPU and the GPUs picked, predicted",
            x_title=x, y_title=predicted.unit_text(long), tooltip=["variant", "CPU variant", "point"]), width="stretch")
        st.caption("Solid lines, filled points: measured. Dotted lines, hollow points: predicted by the cost model for "
                   f"each GPU driven by {driver}, not measured.")
with st.expander("Every point, every GPU"):
    st.dataframe(predicted.comparison_table(compared).assign(GPU=compared["gpu"]), hide_index=True,
                 column_config=predicted.FIGURES)
