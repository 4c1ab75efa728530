"""The sidebar: the devices of the machine the app runs on, the GPU predictions are drawn for, the mode, and
the run going on, if any (an experiment page's rerun panel follows it there instead)."""
import streamlit as st

from core import devices, experiments, settings
from ui import predicted, rerun_panel, router


def render() -> None:
    page = st.session_state.get(router.CURRENT_PAGE)
    with st.sidebar:
        st.markdown(f"**Devices on {settings.this_host()}**")
        fp = devices.fingerprint()
        st.caption(f"cpu: {fp['cpu_model']} ({fp['torch_threads']} torch threads)")
        for gpu in fp["gpus"]:
            st.caption(f"{gpu['device']}: {gpu['name']} ({gpu['memory_gib']} GiB)")
        if fp["mps"]:
            st.caption("mps: Apple GPU")
        if not fp["gpus"] and not fp["mps"]:
            st.caption("No GPU found: GPU variants cannot run here.")
        predicted.gpu_picker(page)
        st.markdown("**Mode**")
        if settings.read_only():
            st.caption(f"Read-only view ({settings.READ_ONLY_ENV} is set): results only, no runs.")
            return
        st.caption("Interactive: an experiment page's sidebar runs it again.")
        st.caption(f"Results: `{settings.results_dir()}`")
        if page not in experiments.registry():  # an experiment page's panel shows the run itself
            rerun_panel.run_status()
