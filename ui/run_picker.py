"""The run picker above an experiment's charts: which runs the charts and tables show. By default the latest
complete run of each preset on each machine (core.store.runs.default_runs); a reader adds or removes runs by
their labels (preset, local start time, machine, status, points: typing filters them), and the choice
stays for the session, per experiment, until the default is restored. A caption names the runs shown."""
import pandas as pd
import streamlit as st

from core.store import runs

NONE_COMPLETE = ("No complete run yet: pick a run above to see its points (a cancelled, failed or interrupted "
                 "run is shown only when picked).")


def _keys(name: str) -> tuple[str, str]:
    """The session keys: the reader's own choice (kept across pages), and the widget's."""
    return f"crossover-runs-{name}", f"crossover-runs-widget-{name}"


def shown_rows(name: str, rows: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Draw the picker and the caption; the rows of the runs picked, and each run's short name (for tables)."""
    labels, default = runs.labels(rows), runs.default_runs(rows)
    chosen_key, widget_key = _keys(name)
    chosen = st.session_state.get(chosen_key)
    st.session_state[widget_key] = default if chosen is None else [r for r in chosen if r in labels]
    picker, reset = st.columns([6, 1], vertical_alignment="bottom")
    picked = picker.multiselect("Runs shown", list(labels), format_func=labels.get, key=widget_key,
                                on_change=_remember, args=(name,), placeholder="Pick the runs to show", wrap=True,
                                help="By default the latest complete run of each preset on each machine (of each "
                                     "device, where its CPU and GPU ran apart), one series per run. Type a machine, "
                                     "a preset or a date to filter.")
    if chosen is not None:
        reset.button("Default runs", on_click=_forget, args=(name,), key=f"crossover-runs-reset-{name}")
    st.caption(runs.shown_text(rows, picked) if picked or default else NONE_COMPLETE)
    return runs.select(rows, picked), runs.labels(runs.select(rows, picked), short=True)


def _remember(name: str) -> None:
    chosen_key, widget_key = _keys(name)
    st.session_state[chosen_key] = list(st.session_state[widget_key])


def _forget(name: str) -> None:
    st.session_state.pop(_keys(name)[0], None)
