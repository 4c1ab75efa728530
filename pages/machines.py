import warnings

import pandas as pd
import streamlit as st

from core import devices, settings
from core.report import bundles, machines
from core.model import profiles
from core.commands import jobs
from core.store import results, runlock
from ui import data, rerun_panel
from ui.router import require_router

require_router()

host = settings.this_host()  # "this server" for a visitor of a read-only view

st.title("Machines")
st.markdown("Every machine with results or a calibrated profile in the results folder, as its fingerprint "
            f"describes it, the constants its calibration measured, and the runs it holds. {host.capitalize()} "
            "(the one the app runs on) is marked.")



def grid_table(profile: dict, fields: tuple[str, str], what: str) -> None:
    """Two figures timed per shape (calibrate's grids), in an expander: one row a shape, its times in µs."""
    rows = profiles.grid_rows(profile, fields)
    if rows:
        with st.expander(f"The {len(rows)} {what}"):
            st.dataframe(pd.DataFrame(rows), hide_index=True, column_config={
                column: st.column_config.NumberColumn(format="%.2f") for column in profiles.GRID_TABLES[fields][1]})


here = devices.fingerprint()["machine_id"]
records = data.records()
with warnings.catch_warnings(record=True) as skipped:
    warnings.simplefilter("always")
    calibrated = profiles.all()
for warning in skipped:
    st.warning(str(warning.message), icon="⚠️")
fingerprints = machines.fingerprints(records, calibrated)
fingerprints.setdefault(here, devices.fingerprint())
machine_table = machines.table(fingerprints)
machine_table.insert(0, host, machine_table["machine id"] == here)
st.dataframe(machine_table, hide_index=True)

st.subheader("Calibrated profiles")
st.markdown("What each machine's calibration measured: the host's cost per eager operation and per "
            "DataLoader sample, the compute and memory rates each device achieved, and each GPU's launch, "
            "kernel, sync, copy and CUDA-graph costs. Each figure is the best of its samples.")
for mid, fp in fingerprints.items():
    st.markdown(f"**{mid}**{f' ({host})' if mid == here else ''}: {devices.label(fp)}")
    profile = calibrated.get(mid)
    if profile is None:
        hint = "" if settings.read_only() else ": run `python -m core calibrate`" + (
            f" ({profiles.CALIBRATION_TIME}), or the button below" if mid == here else " on it")
        st.markdown(f"not calibrated{hint}")
        if mid == here:
            rerun_panel.calibrate_button("crossover-calibrate-machines")
        continue
    taken = pd.Timestamp(profile["taken"]).tz_convert("UTC").strftime("%Y-%m-%d %H:%M UTC")
    st.caption(f"Calibrated profile taken {taken} in {profile['seconds']:.0f} s"
               f"{' (quick, rougher figures)' if profile['quick'] else ''} by code {profiles.code_text(profile)}")
    busy = profiles.busy_note(profile)
    if busy:
        st.warning(busy.capitalize() + ".", icon="⚠️")
    if mid == here:
        rerun_panel.calibrate_button("crossover-calibrate-machines", label=f"{rerun_panel.CALIBRATE} again")
    table = pd.DataFrame([row for row in profiles.rows(profile)
                          if row["field"] not in profiles.OP_FIGURES + profiles.GRID_FIGURES])
    table["value"] = table["value"] + " " + table.pop("unit")
    st.dataframe(table, hide_index=True, height="content",
                 column_config={"size": st.column_config.TextColumn("size, width or class", width=170),
                                "what it is": st.column_config.TextColumn(width="large")})
    timed = profiles.op_rows(profile)
    if timed:
        with st.expander(f"The {len(timed)} operations timed one by one: a fixed part per call beyond its dispatch, "
                         f"and a time per element written (`core/calibration/op_probes.py`)"):
            st.dataframe(pd.DataFrame(timed), hide_index=True)
    grid_table(profile, profiles.GEMM_FIGURES, "GEMM shapes timed (M x K by K x N): what the cost model prices a GEMM "
               "by, beyond its dispatch")
    grid_table(profile, profiles.ATTENTION_FIGURES, "flash-attention blocks timed (query rows x key columns, at a head "
               "size): what the cost model prices F.scaled_dot_product_attention on this CPU by")

if not settings.read_only():
    st.subheader("Check this machine")
    st.markdown("The doctor (`python -m core doctor`) spends a time budget where it tells most: it calibrates this "
                "machine, measures each experiment on every device here (CPU and each GPU, same host), checks that "
                "they agree, and gives every claim's verdict here and the cost model's accuracy here. What it "
                "finishes is kept; a second check does what the first left. Have a GPU? This is how it counts.")
    budget = st.select_slider("Budget", options=[3, 10, 30, 60], value=10, format_func=lambda m: f"{m} min")
    if jobs.current():
        st.info("A run is going on (see the sidebar): the check can start once it ends.")
    elif st.button("Check this machine", icon=":material/stethoscope:"):
        try:
            jobs.start_doctor(budget * 60.0)
        except (runlock.BusyError, settings.ReadOnlyError) as e:
            st.error(str(e))
        else:
            st.rerun()
    if jobs.doctor_bundle().exists():
        st.download_button("Download the last check's bundle", jobs.doctor_bundle().read_bytes(),
                           file_name=f"doctor-{here}.tar.gz", mime="application/gzip", on_click="ignore",
                           icon=":material/download:")

st.subheader("Runs")
runs = results.runs_frame(records)
if runs.empty:
    st.info("No runs recorded yet.")
else:
    st.dataframe(runs.sort_values("started", ascending=False), hide_index=True)




def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'s' * (number != 1)}"


st.subheader("Share these results")
st.markdown("A bundle carries records and their machines' calibrated profiles to another Crossover, which checks "
            "every record before it merges them (`python -m core import FILE` there"
            + ("" if settings.read_only() else ", or the upload below") + "). Profiler traces stay behind.")
machine_ids = sorted({r["machine_id"] for r in records} | set(calibrated))
if machine_ids:
    picked = st.selectbox("Machine", [None, *machine_ids], format_func=lambda m: "every machine" if m is None else
                          machines.label(m, fingerprints[m]))
    chosen = [picked] if picked else None
    runs_in, profiles_in = bundles.selection(records, calibrated, chosen)
    if runs_in or profiles_in:  # built when clicked: packing every record takes seconds
        st.download_button(f"Download the bundle ({_count(len(runs_in), 'run')}, {_count(len(profiles_in), 'profile')})",
                           lambda: bundles.export_bytes(chosen)[0], mime="application/gzip",
                           file_name=f"crossover-{picked or 'all'}.tar.gz", on_click="ignore",
                           icon=":material/download:")
    else:
        st.info("Nothing to bundle yet: no finished run" + (" of this machine." if picked else "."))


UPLOAD, IMPORTED = "crossover-bundle-upload", "crossover-bundle-imported"


def _import_upload() -> None:
    """Import the bundle once, when it is uploaded (not at every rerun while the file stays in the widget)."""
    upload = st.session_state.get(UPLOAD)
    if upload is None:
        return
    try:
        imported = bundles.import_bundle(upload.getvalue())
    except bundles.BundleError as e:
        st.session_state[IMPORTED] = (st.error, f"{upload.name} was not imported: {e}")
    else:
        say = st.warning if imported.refused else st.success
        st.session_state[IMPORTED] = (say, f"{upload.name}: " + imported.text().replace("\n", "  \n"))


if not settings.read_only():
    st.file_uploader("Bring in a bundle from another machine", type=["gz"], key=UPLOAD, on_change=_import_upload,
                     max_upload_size=bundles.MAX_BUNDLE_BYTES // 2**20,
                     help="A file written by `python -m core export` or downloaded above; at most "
                          f"{bundles.MAX_BUNDLE_BYTES // 2**20} MB.")
    if IMPORTED in st.session_state:
        say, text = st.session_state[IMPORTED]
        say(text)
