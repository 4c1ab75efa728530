"""Keep every page behind the router."""
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def require_router() -> None:
    """On the first request a fresh server sees, Streamlit runs a deep-linked file of pages/ on its
    own (its old multipage mode, chosen because a pages/ folder exists) and keeps doing so for later
    visitors. Leave that mode and rerun through streamlit_app.py, which then opens the same page."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False  # what st.navigation itself sets
        st.rerun()
