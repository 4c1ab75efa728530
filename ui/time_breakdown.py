"""The "Where the time goes" section of an experiment page: for the configuration the reader picks, one
bar per device and variant split into the profiler's parts, the census counts beside each bar, and the
raw operator tables and traces to download."""
import json
from pathlib import Path

import pandas as pd
import streamlit as st

from core import settings
from core.present import analysis, charts
from core.measure import census
from core.store.results import CENSUS_COLUMNS
from ui import data as data_cache


def where_time_goes(name: str, rows: pd.DataFrame) -> None:
    st.subheader("Where the time goes")
    data = analysis.latest(rows)
    inspected = data[data["time_host_s"].notna()] if "time_host_s" in data else data.iloc[0:0]
    if inspected.empty:
        notes = data["breakdown_note"].dropna().unique() if "breakdown_note" in data else []
        st.info("No breakdown yet: runs taken with this version record a census and a profile of every "
                "point." + (f" The latest runs say: {'; '.join(notes[:3])}." if len(notes) else ""))
        return
    configs = sorted(inspected["point"].unique(), key=_config_key)
    widest = inspected["point"].value_counts()  # by default, the configuration with the most bars
    chosen = st.selectbox("Configuration", configs, index=configs.index(widest.index[0]), format_func=_config_text,
                          key=f"{name}-breakdown-config")
    picked = inspected[inspected["point"] == chosen].sort_values(["device", "variant"])
    unit = picked["unit"].iloc[0]
    data_cache.draw(("where the time goes", name, chosen, *sorted(rows["run_id"].unique())),
                    lambda: [charts.where_time_goes(picked, picked.apply(_counts, axis=1), unit)])
    st.caption(f"Each bar is one {unit} of the latest complete run: the profiler's device compute (on the CPU, "
               "the operators' own time), copies, sync waits and data loading, and the rest of the timed median "
               "as host overhead. Under each label, the census of the same work: ATen operations, those that "
               "would launch a kernel on a GPU (on a GPU, the kernels its profiler counted, where it counted them), host "
               "synchronisations and bytes copied between host and device.")
    unreconciled = picked[picked["breakdown_adds_up"] == False]  # noqa: E712 (None means not taken)
    if len(unreconciled):
        st.warning("The profiler's parts exceed the timed median by more than the stated tolerance for: "
                   + ", ".join(charts.series_label(unreconciled)) + ". Its overhead is too large for these "
                   "tiny operations; the split is shown with no host overhead.")
    _downloads(picked)


def _counts(row: pd.Series) -> str:
    found = {key: row[column] for key, column in CENSUS_COLUMNS.items()
             if isinstance(row.get(column), (int, float)) and pd.notna(row[column])}
    if "operations" not in found:
        return row.get("census_note") or "no census"
    return census.describe(found, row["unit"], per_call=int(row["per_call"] or 1))


def _config_key(point: str) -> list:
    return sorted(json.loads(point).items())


def _config_text(point: str) -> str:
    params = json.loads(point)
    return ", ".join(f"{k} = {v}" for k, v in params.items()) or "the one configuration"


def _downloads(picked: pd.DataFrame) -> None:
    with st.expander("Raw operator tables and traces"):
        st.caption("The operator table (CSV) is torch.profiler's per-operator summary of the profiled calls; "
                   "the trace (gzipped Chrome trace JSON) opens in https://ui.perfetto.dev. A trace over 8 MB is "
                   "not kept. The results shipped with the app keep neither: they stay on the machine that measured them.")
        for i, row in enumerate(picked.itertuples()):
            label = charts.series_label(picked.loc[[row.Index]]).iloc[0]
            for kind, path, mime in (("operator table", row.breakdown_table, "text/csv"),
                                     ("trace", row.breakdown_trace, "application/gzip")):
                file = _inside_results(row.machine_id, path)
                if file:  # read when clicked, not at every rerun: traces run to megabytes
                    st.download_button(f"{kind}: {label}", file.read_bytes, file_name=file.name, mime=mime,
                                       on_click="ignore", key=f"download-{kind}-{row.run_id}-{i}")


def _inside_results(machine_id: str, path) -> Path | None:
    """The file a record names beside it, only if it is a regular file inside the results folder."""
    if not isinstance(path, str):
        return None
    root = settings.results_dir()
    file = (root / machine_id / path).resolve()
    return file if file.is_relative_to(root) and file.is_file() else None
