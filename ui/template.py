"""The one template every experiment page follows: claim, what we measured, verdicts, charts, where the
time goes, the tables and every point with a CSV download, why, notes, and the rerun panel. Everything
comes from the experiment's package (analysis, charts, about.md): a page is one call of
`experiment_page`."""
import pandas as pd
import streamlit as st

from core import devices, experiments
from core.analysis import ESTIMATED, NEEDS_GPU, NOT_REPRODUCED, REPRODUCED, Verdict
from ui import data, predicted
from ui.router import require_router
from ui.rerun_panel import rerun_panel
from ui.time_breakdown import where_time_goes

MARKS = {REPRODUCED: ":green[:material/check_circle:]", NOT_REPRODUCED: ":red[:material/cancel:]",
         ESTIMATED: ":blue[:material/query_stats:]", NEEDS_GPU: ":orange[:material/hourglass_empty:]"}
TABLE_DROP = ["samples_s", "warmup_samples_s", "machine_id", "planned_points", "ended", "point", "config_id"]


def experiment_page(name: str) -> None:
    require_router()
    exp = experiments.get(name)
    rows, published, records = data.rows(name), data.published(name), data.records()
    about = exp.about(rows)
    st.title(exp.title)
    st.markdown(f"> **The write-up's claim.** {about['Claim']}")
    st.caption(f"Source: `shared/seeds/{exp.source}`")
    st.subheader("What we measured")
    st.markdown(about["Measured"])
    if devices.available() == ["cpu"]:
        st.warning("No GPU was found on this machine: only the CPU variants can run here. GPU results "
                   "appear when records from a GPU machine are in the results folder.")
    if rows.empty:
        st.info("No measured results yet: start a run below, or with `python -m core run "
                f"{name} --preset quick`.")
    forecast = predicted.forecast(exp, records)
    _verdicts(exp.verdicts(rows, published, forecast.rows, forecast.accuracy))
    if not rows.empty:
        st.subheader("Results")
        for chart in exp.charts(rows, published):
            st.altair_chart(chart, width="stretch")
        predicted.section(exp, records, forecast)
        where_time_goes(name, rows)
        for title, table in exp.tables(rows).items():
            st.markdown(f"**{title}**")
            st.dataframe(table, hide_index=True) if len(table) else st.caption("Nothing to show yet.")
        _table(name, rows)
    st.subheader("Why")
    st.markdown(about["Why"])
    if about["Notes"]:
        st.caption(about["Notes"])
    rerun_panel(exp)


def _verdicts(found: list[Verdict]) -> None:
    st.subheader("The claims, checked")
    for v in found:
        rests_on = f" (rests on {'measurements' if v.basis == 'measured' else 'an estimate'})" if v.basis else ""
        st.markdown(f"{MARKS.get(v.outcome, ':material/help:')} **{v.outcome}**{rests_on}: {v.claim}  \n{v.evidence}")
        if v.prediction:
            st.caption(f":material/online_prediction: {v.prediction}")


def _table(name: str, rows: pd.DataFrame) -> None:
    """Every point, one line each; list-valued metrics (curves, surfaces) stay in the records, the raw
    samples stay in the CSV."""
    listy = [c for c in rows.columns if c not in ("samples_s", "warmup_samples_s")
             and rows[c].map(lambda v: isinstance(v, list)).any()]
    rows = rows.drop(columns=listy)
    table = rows.drop(columns=[c for c in TABLE_DROP if c in rows.columns])
    with st.expander("All measured points"):
        st.dataframe(table, hide_index=True)
        st.download_button("Download CSV", rows.to_csv(index=False).encode(), file_name=f"crossover-{name}.csv",
                           mime="text/csv")
