"""Cached loading of the results store, and of what the pages compute from all of it (the cost model's
accuracy, an experiment's predicted GPU rows); each cache key includes every record's mtime and size (and
the calibrated profiles', for predictions), so a new or updated record or profile shows without restarting
the app."""
import copy
import os
import warnings
from typing import Callable

import pandas as pd
import streamlit as st

from core import devices, experiments, settings
from core.predict import predictions
from core.model import profiles
from core.store import results
from core import published as published_figures


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


def _profiles_signature() -> tuple:
    folder = settings.results_dir()
    return tuple(_stamp(path) for path in sorted(folder.glob(f"*/{profiles.SUBFOLDER}/{profiles.FILE_NAME}")))


# Shared, not copied: st.cache_data would unpickle every record on every rerun (over a second for the shipped
# results, twice per experiment page). The pages only read records. Every rewrite of a record makes a new key;
# only the last load or two are worth keeping.
@st.cache_resource(show_spinner=False, max_entries=2)
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


# `calibrated` (the profiles' signature) is only part of the key: a new calibration predicts again
@st.cache_data(show_spinner=False, max_entries=4)
def _accuracy(signature: tuple, calibrated: tuple) -> pd.DataFrame:
    return predictions.accuracy(_load(signature)[0])


def accuracy() -> pd.DataFrame:
    """predictions.accuracy of every record: the cost model against each calibrated machine's measurements."""
    records()  # its warnings, if any
    return _accuracy(_signature(), _profiles_signature())


@st.cache_data(show_spinner=False, max_entries=4)
def _accuracy_here(signature: tuple, calibrated: tuple, machine_id: str) -> pd.DataFrame:
    return predictions.accuracy(_load(signature)[0], target_for=predictions.here_and_gpus)


def accuracy_here() -> pd.DataFrame:
    """accuracy()'s rows on this machine's CPU and on every GPU, alone: what an experiment page says, without
    predicting every other machine's CPU points (most of the shipped ones) before its first paint."""
    records()
    return _accuracy_here(_signature(), _profiles_signature(), devices.fingerprint()["machine_id"])


@st.cache_data(show_spinner=False, max_entries=4)
def _catalogue_accuracy(signature: tuple, calibrated: tuple) -> pd.DataFrame:
    return predictions.catalogue_accuracy(_load(signature)[0])


def catalogue_accuracy() -> pd.DataFrame:
    """predictions.catalogue_accuracy of every record: the catalogue's entry for each GPU that measured, against it."""
    records()
    return _catalogue_accuracy(_signature(), _profiles_signature())


@st.cache_data(show_spinner=False, max_entries=16)
def _predicted_rows(signature: tuple, calibrated: tuple, experiment: str, target: str) -> pd.DataFrame:
    records = _load(signature)[0]
    found = predictions.driven_rows(records, experiment, target)
    return predictions.with_twin_metrics(found[found["point_status"] == "ok"], results.rows_frame(records, experiment),
                                         experiments.get(experiment))


def predicted_rows(experiment: str, target: str) -> pd.DataFrame:
    """Every stand-in row of `experiment` predicted on the GPU named `target`, each run's driven by its own CPU
    where its machine is calibrated (predictions.driven_rows, the points predicted without error, with their twins'
    metrics)."""
    records()
    return _predicted_rows(_signature(), _profiles_signature(), experiment, target)


def rows(experiment: str) -> pd.DataFrame:
    """The experiment's rows frame, built once for this state of the records and shared: callers must not change it."""
    return shared(("rows", experiment), lambda: results.rows_frame(records(), experiment))


def published(experiment: str) -> pd.DataFrame:
    return published_figures.load(experiment)


# What a page draws from the records, built once per state of the results folder for every reader: one shared,
# bounded cache (st.cache_resource), never a copy per session. `key` names what else the result depends on.
@st.cache_resource(show_spinner=False, max_entries=64)
def _shared(signature: tuple, calibrated: tuple, key: tuple, _build: Callable):
    return _build()


def shared(key: tuple, build: Callable):
    """`build()` for this state of the records and profiles, shared by every session; the caller must not change it."""
    return _shared(_signature(), _profiles_signature(), key, build)


def draw(key: tuple, build: Callable[[], list]) -> None:
    """Draw the Altair charts `build` makes, from Vega-Lite specs built once (shared) for this state of the records:
    turning a chart into its spec takes most of a page's time."""
    for spec in shared(("charts", *key), lambda: [chart.to_dict() for chart in build()]):
        st.vega_lite_chart(copy.deepcopy(spec), width="stretch")  # Streamlit moves a spec's datasets out of it
