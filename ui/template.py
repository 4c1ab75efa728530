"""The one template every experiment page follows, top to bottom: the claim and the write-up it comes from,
the verdicts as a table, the run picker, the main chart and the rest of the charts, the predicted GPU
and where the time goes; then, folded, why, how it is measured, the notes and every table. The rerun
controls live in the sidebar. Everything comes from the experiment's package (analysis, charts,
about.md) and core/published.json: a page is one call of `experiment_page`."""
import re

import pandas as pd
import streamlit as st

from core import devices, experiments, published as published_figures, settings
from core.store import runs
from core.present import tables
from core.present.analysis import ESTIMATED, NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, TOO_CLOSE, Verdict
from ui import data, predicted, run_picker
from ui.rerun_panel import rerun_panel
from ui.router import require_router
from ui.time_breakdown import where_time_goes

MARKS = {REPRODUCED: ":green[:material/check_circle:]", NOT_REPRODUCED: ":red[:material/cancel:]",
         ESTIMATED: ":blue[:material/query_stats:]", TOO_CLOSE: ":violet[:material/balance:]", NEEDS_GPU: ":orange[:material/hourglass_empty:]",
         NO_DATA: ":gray[:material/help:]"}
WOULD = {REPRODUCED: "would be reproduced", NOT_REPRODUCED: "would not be reproduced",
         TOO_CLOSE: "too close to call"}  # a predicted leaning
# Sentences of a verdict's finding that the verdict column already says.
SAID_BY_THE_OUTCOME = re.compile(r"^(No GPU results|No measured results|Reproduced means|Published \(|Too close to call:|a rerun could)")


def experiment_page(name: str) -> None:
    require_router()
    exp = experiments.get(name)
    records, published = data.records(), data.published(name)
    rows = data.rows(name)
    default_rows = runs.select(rows, runs.default_runs(rows))
    about = data.shared(("about", name), lambda: exp.about(default_rows))
    st.title(exp.title)
    st.markdown(f"> **The write-up's claim.** {about['Claim']}")
    st.caption(f"Source: {published_figures.citation(exp.source, where=False)}")
    forecast = predicted.forecast(exp)
    _verdicts(data.shared(("verdicts", name, forecast.target.title if forecast.target else None),
                          lambda: exp.verdicts(default_rows, published, forecast.rows, forecast.accuracy)), rows)
    if rows.empty:
        st.info("No measured results yet" + (" in this view." if settings.read_only() else
                f": start a run from the sidebar, or with `python -m core run {name} --preset quick`."))
        shown, run_names = rows, {}
    else:
        shown, run_names = _results(exp, rows, published, records, forecast)
    _folded(exp, about, shown, run_names)
    with st.sidebar:
        rerun_panel(exp)


def _verdicts(found: list[Verdict], rows: pd.DataFrame) -> None:
    st.subheader("The claims, checked")
    st.markdown(verdict_table(found))
    on_gpu = bool(len(rows)) and rows["device"].map(devices.is_accelerator).any()
    host = settings.this_host()
    gpu_note = ("" if devices.available() != ["cpu"] else
                f" No GPU on {host}: runs here time the CPU only; the GPU results come from other machines' records."
                if on_gpu else f" No GPU on {host}: the claims about a GPU wait for records from a GPU machine.")
    st.caption("Verdicts rest on the latest complete run of each preset on each machine (of each device, where its "
               f"CPU and GPU ran apart), whichever runs the charts show.{gpu_note}")
    with st.expander("Each verdict in full"):
        for v in found:
            st.markdown(f"{_mark(v.outcome)} **{v.outcome}**{rests_on(v)}: {v.claim}  \n{v.evidence}")
            if v.prediction:
                st.caption(f":material/online_prediction: {v.prediction}")


def verdict_table(found: list[Verdict]) -> str:
    """The verdicts as a markdown table: the claim, the published figure, the verdict and its mark, what we found
    (its first sentence the verdict does not already say) and, where no GPU measured, the predicted answer."""
    predicted_column = any(v.prediction for v in found)
    head = ["Claim", "Published", "Verdict", "Figure decided on (95% CI)", "What we found"] + (
        ["Predicted on a GPU"] if predicted_column else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in found:
        cells = [_small(v.claim), _small(v.published or "—"),
                 f"{_mark(v.outcome)}&nbsp;{_small(f'**{v.outcome}**{rests_on(v)}')}", _small(v.interval or "—"),
                 _small(short_finding(v.finding or v.evidence))]
        if predicted_column:
            cells.append(f"{_mark(v.leaning)}&nbsp;{_small(WOULD[v.leaning])}" if v.leaning in WOULD else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rests_on(v: Verdict) -> str:
    """What a verdict rests on, said after it: measurements or an estimate (nothing for one without a basis)."""
    return f" (rests on {'measurements' if v.basis == 'measured' else 'an estimate'})" if v.basis else ""


def short_finding(text: str) -> str:
    """The first sentence of a finding that says more than its verdict does, or a dash."""
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", text.strip())
    kept = [s for s in sentences if s and not SAID_BY_THE_OUTCOME.match(s)]
    return kept[0] if kept else "—"


def _small(text: str) -> str:
    """A table cell's text, small: its brackets and bars escaped, on one line."""
    escaped = re.sub(r"([\[\]|])", r"\\\1", str(text)).replace("\n", " ")
    return f":small[{escaped}]"


def _mark(outcome: str) -> str:
    return MARKS.get(outcome, ":material/help:")


def _results(exp, rows: pd.DataFrame, published: pd.DataFrame, records: list[dict],
             forecast) -> tuple[pd.DataFrame, dict]:
    """The run picker, the charts of the runs picked, the predicted GPU and where the time goes; returns
    the rows picked and each run's short name."""
    st.subheader("Results", anchor="results")
    shown, run_names = run_picker.shown_rows(exp.name, rows)
    if len(shown):
        data.draw(("experiment", exp.name, *sorted(shown["run_id"].unique())), lambda: exp.charts(shown, published))
        predicted.section(exp, records, forecast)
        where_time_goes(exp.name, shown)
    return shown, run_names


def _folded(exp, about: dict, shown: pd.DataFrame, run_names: dict) -> None:
    """Why, how it is measured, the notes and the tables, each in an expander."""
    with st.expander("Why"):
        st.markdown(about["Why"])
    with st.expander("How it is measured"):
        st.markdown(about["Measured"])
    if about["Notes"]:
        with st.expander("Notes"):
            st.markdown(about["Notes"])
    if shown.empty:
        return
    with st.expander("Tables and every measured point"):
        for title, make in exp.table_makers().items():
            table = tables.for_people(make, shown, run_names)
            st.markdown(f"**{title}**")
            st.dataframe(table, hide_index=True) if len(table) else st.caption(tables.empty_text(make, shown))
        st.markdown("**Every measured point of the runs shown**")
        st.dataframe(tables.points_table(shown, run_names), hide_index=True)
        st.download_button("Download these points (CSV, with every sample)", shown.to_csv(index=False).encode(),
                           file_name=f"crossover-{exp.name}.csv", mime="text/csv")
