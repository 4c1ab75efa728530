import streamlit as st

from core import devices, experiments, settings
from core.report import compare, machines
from core.store import runs
from core.store.results import runs_frame
from ui import data
from ui.router import require_router

require_router()

st.title("Side by side")
st.markdown("Two or more machines, or runs, compared: per experiment their results on one chart and the ratio of "
            "every point both measured, with what differs between them spelled out. A machine brings its latest "
            "complete run of each preset, as the experiment pages show by default.")

records = data.records()
found = machines.fingerprints(records)
frame = runs_frame(records)
by = st.segmented_control("Compare", ["machines", "runs"], default="machines", key="crossover-compare-by")
if by == "runs":
    labels = runs.labels(frame)
    picked = st.multiselect("Runs", list(labels), format_func=labels.get, placeholder="Pick two runs or more")
    sides = compare.run_sides(records, picked)
else:
    here = devices.fingerprint()["machine_id"]
    ids = sorted(found, key=lambda m: m != here)
    picked = st.multiselect("Machines", ids, default=ids[:2], format_func=lambda m: machines.label(m, found[m]),
                            placeholder="Pick two machines or more")
    sides = compare.machine_sides(records, picked)

if len(sides) < 2:
    if len(found) < 2 and by != "runs":
        bring = ("" if settings.read_only() else " Bring another machine's results in with `python -m core import "
                 "FILE`, or the upload on the Machines page; on that machine, `python -m core export -o FILE` "
                 "writes the file.")
        st.info(f"The results folder holds {len(found)} machine{'s' * (len(found) != 1)}: a comparison needs two."
                + bring + " Or compare two runs.")
    else:
        st.info(f"Pick two {by or 'machines'} or more.")
    st.stop()

st.subheader("What differs")
table, same = compare.differences(sides)
if len(table):
    st.dataframe(table, hide_index=True)
st.caption("The same on every side: " + (", ".join(same) or "nothing") + ".")
for warning in compare.warnings(sides):
    st.warning(warning, icon=":material/rule:")

baseline = sides[0].label
for exp in experiments.registry().values():
    rows = compare.rows(sides, exp.name)
    if rows["side"].nunique() < 2:
        continue
    st.subheader(exp.title)
    st.altair_chart(compare.chart(rows, f"{exp.title}: each side's median time per unit"), width="stretch")
    ratios = compare.ratios(rows, baseline)
    if ratios.empty:
        st.caption("No point was measured on both sides: nothing to pair.")
    else:
        st.dataframe(compare.ratio_table(ratios, baseline), hide_index=True)
        st.caption(f"Ratios against the first pick, {baseline}: a side's median time per unit over the baseline's, for "
                   "the points both measured (same variant, device kind and parameters).")
