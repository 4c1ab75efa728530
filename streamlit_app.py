"""Crossover: the router. One page per experiment in the registry, plus the overview and the machines."""
import streamlit as st

from ui import router, sidebar

st.set_page_config(page_title="Crossover", page_icon="⚡", layout="wide")
navigation = router.navigation()
sidebar.render()
navigation.run()
