"""Crossover: the router. One page per experiment in the registry, plus the overview and the machines; behind
the optional login where the server configures one."""
import streamlit as st

from ui import auth, router, sidebar

st.set_page_config(page_title="Crossover", page_icon="⚡", layout="wide")
auth.require_login()
navigation = router.navigation()
sidebar.render()
navigation.run()
