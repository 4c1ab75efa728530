"""The sidebar: the devices this machine has, the GPU predictions are drawn for, the mode, and the run going
on, if any."""
import streamlit as st

from core import devices, jobs, settings
from ui import predicted, router


def render() -> None:
    with st.sidebar:
        st.markdown("**Devices on this machine**")
        fp = devices.fingerprint()
        st.caption(f"cpu: {fp['cpu_model']} ({fp['torch_threads']} torch threads)")
        for gpu in fp["gpus"]:
            st.caption(f"{gpu['device']}: {gpu['name']} ({gpu['memory_gib']} GiB)")
        if fp["mps"]:
            st.caption("mps: Apple GPU")
        if not fp["gpus"] and not fp["mps"]:
            st.caption("No GPU found: GPU variants cannot run here.")
        predicted.gpu_picker(st.session_state.get(router.CURRENT_PAGE))
        st.markdown("**Mode**")
        if settings.read_only():
            st.caption(f"Read-only view ({settings.READ_ONLY_ENV} is set): results only, no runs.")
        else:
            st.caption("Interactive: each experiment page can rerun on this machine.")
            job = jobs.current()
            if job:
                stopping = "; stopping after the current point" if job["stopping"] else ""
                st.caption(f"Running now: {job['experiment']} on {', '.join(job['devices'])} "
                           f"({job['done']}/{job['total'] or '?'} points{stopping})")
        st.caption(f"Results: `{settings.results_dir()}`")
