import pandas as pd
import streamlit as st

from core import experiments, results
from ui import data
from ui.router import page_file, require_router, without_page

require_router()

st.title("Crossover")
st.markdown("""
**Will a GPU make my small PyTorch model faster, and why or why not?** Five public write-ups timed small
workloads on a CPU and a GPU and drew conclusions, some right, some artefacts of how they measured.
Crossover reproduces each of them on your hardware, shows the published figures beside its own, lets you
rerun any experiment on the local devices, and explains the gap with measurements: transfers, kernel
launches, synchronisation and batch size.

Every number here is **measured** (a record in the results folder, with the machine's fingerprint,
software and code versions, configuration and raw samples), **published** (a write-up's own figure,
labelled with its source), or **estimated** (extrapolated or fitted from measurements, and a verdict
that rests on one says so).
""")

for module, error in experiments.broken().items():
    st.error(f"The experiment module `{module}` could not be loaded, so it is left out: {error}")
for name in without_page():
    st.error(f"The experiment '{name}' is registered but has no page, so it is not in the navigation: add "
             f"`pages/{page_file(name).name}` holding `experiment_page(\"{name}\")`, as every other page does.")

records = data.records()
runs = results.runs_frame(records)
st.subheader("The experiments")
table = pd.DataFrame([{"experiment": e.title, "the write-up's claim": e.claim, "source": e.source,
                       "runs": int((runs["experiment"] == e.name).sum()) if len(runs) else 0,
                       "machines": runs[runs["experiment"] == e.name]["machine"].nunique() if len(runs) else 0}
                      for e in experiments.registry().values()])
st.dataframe(table, hide_index=True)

st.subheader("Machines with results")
if runs.empty:
    st.info("No results yet. Run `python -m core run matmul --preset quick`, or use a page's rerun panel.")
else:
    per_machine = runs.groupby("machine").agg(runs=("run_id", "count"), experiments=("experiment", "nunique"),
                                               last_run=("started", "max")).reset_index()
    st.dataframe(per_machine, hide_index=True)
