import pandas as pd
import streamlit as st

from core import devices, results
from ui import data
from ui.router import require_router

require_router()

st.title("Machines")
st.markdown("Every machine with results in the results folder, as its fingerprint describes it, "
            "and the runs it holds. The one you are on is marked.")

here = devices.fingerprint()["machine_id"]
records = data.records()
fingerprints = {r["machine_id"]: r["fingerprint"] for r in sorted(records, key=lambda r: r.get("started") or "")}
fingerprints.setdefault(here, devices.fingerprint())
machines = pd.DataFrame([{
    "this machine": mid == here, "machine id": mid, "CPU": fp["cpu_model"],
    "physical / logical cores": f"{fp['cpu_physical_cores']} / {fp['cpu_logical_cores']}",
    "torch threads": fp["torch_threads"], "memory (GiB)": fp["memory_gib"], "OS": fp["os"],
    "GPUs": ", ".join(f"{g['name']} ({g['memory_gib']} GiB, cc {g['compute_capability']}, driver {g['cuda_driver']})"
                      for g in fp["gpus"]) or "none",
    "python": fp["python"], "torch": fp["torch"], "CUDA": fp["cuda"], "cuDNN": fp["cudnn"],
} for mid, fp in fingerprints.items()])
st.dataframe(machines, hide_index=True)

st.subheader("Runs")
runs = results.runs_frame(records)
if runs.empty:
    st.info("No runs recorded yet.")
else:
    st.dataframe(runs.sort_values("started", ascending=False), hide_index=True)
