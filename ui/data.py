"""Cached loading of the results store; the cache key includes every record's mtime, so a new or
updated record shows without restarting the app."""
import os
import warnings

import pandas as pd
import streamlit as st

from core import published as published_figures
from core import results, settings


def _signature() -> tuple:
    """The results folder and, for each place a record may be, its modification time and size, taken
    without following a link or opening anything (a named pipe would block)."""
    folder = settings.results_dir()
    return str(folder), tuple(_stamp(path) for path in results.record_paths(folder))


def _stamp(path) -> tuple:
    try:
        info = os.lstat(path)
    except OSError:  # gone since it was listed
        return str(path), None, None
    return str(path), info.st_mtime_ns, info.st_size


# Every rewrite of a record makes a new key; only the last few loads are worth keeping.
@st.cache_data(show_spinner=False, max_entries=4)
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
