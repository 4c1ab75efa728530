"""Cached loading of the results store; the cache key includes every record's mtime, so a new or
updated record shows without restarting the app."""
import warnings

import pandas as pd
import streamlit as st

from core import published as published_figures
from core import results, settings


def _signature() -> tuple:
    folder = settings.results_dir()
    return str(folder), tuple(sorted((str(p), p.stat().st_mtime_ns) for p in folder.glob("*/*.json")))


@st.cache_data(show_spinner=False)
def _load(signature: tuple) -> tuple[list[dict], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = results.load_records()
    return records, [str(w.message) for w in caught]


def records() -> list[dict]:
    loaded, skipped = _load(_signature())
    for message in skipped:
        st.warning(message, icon="⚠️")
    return loaded


def rows(experiment: str) -> pd.DataFrame:
    return results.rows_frame(records(), experiment)


def published(experiment: str) -> pd.DataFrame:
    return published_figures.load(experiment)
