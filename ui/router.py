"""The navigation, built from the experiment registry, and keeping every page behind the router."""
from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from core import experiments, settings

PAGES = settings.APP_ROOT / "pages"
CURRENT_PAGE = "crossover-current-page"  # session state: the url path of the page this run shows


def page_file(name: str) -> Path:
    return PAGES / f"{name}.py"


def without_page() -> list[str]:
    """Registered experiments that have no pages/<name>.py (the overview shows them as errors)."""
    return [name for name in experiments.registry() if not page_file(name).exists()]


def navigation():
    experiment_pages = [st.Page(page_file(e.name), title=e.title, url_path=e.name)
                        for e in experiments.registry().values() if page_file(e.name).exists()]
    page = st.navigation({
        "Crossover": [st.Page(PAGES / "overview.py", title="Overview", default=True),
                      st.Page(PAGES / "your_model.py", title="Your model", url_path="your_model")],
        "Experiments": experiment_pages,
        "Results": [st.Page(PAGES / "machines.py", title="Machines", url_path="machines"),
                    st.Page(PAGES / "compare.py", title="Side by side", url_path="compare"),
                    st.Page(PAGES / "predictions.py", title="Predictions", url_path="predictions")],
    })
    st.session_state[CURRENT_PAGE] = page.url_path  # the sidebar's default GPU follows the page
    return page


def require_router() -> None:
    """On the first request a fresh server sees, Streamlit runs a deep-linked file of pages/ on its
    own (its old multipage mode, chosen because a pages/ folder exists) and keeps doing so for later
    visitors. Leave that mode and rerun through streamlit_app.py, which then opens the same page."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False  # what st.navigation itself sets
        st.rerun()
