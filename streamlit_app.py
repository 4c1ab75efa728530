"""Crossover: the router. One page per experiment in pages/, plus the overview and the machines."""
from pathlib import Path

import streamlit as st

from core import experiments
from ui import sidebar

PAGES = Path(__file__).parent / "pages"

st.set_page_config(page_title="Crossover", page_icon="⚡", layout="wide")
experiment_pages = [st.Page(PAGES / f"{e.name}.py", title=e.title, url_path=e.name)
                    for e in experiments.registry().values() if (PAGES / f"{e.name}.py").exists()]
navigation = st.navigation({
    "Crossover": [st.Page(PAGES / "overview.py", title="Overview", default=True)],
    "Experiments": experiment_pages,
    "Results": [st.Page(PAGES / "machines.py", title="Machines", url_path="machines")],
})
sidebar.render()
navigation.run()
