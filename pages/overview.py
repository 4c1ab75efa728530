import streamlit as st

from core import devices, experiments, settings
from core.report import overview, single_file
from core.predict import writeups
from core.present.analysis import ESTIMATED, NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, TOO_CLOSE
from core.present.charts import ratio_dots
from ui import data
from ui.router import page_file, require_router, without_page
from ui.template import MARKS

require_router()
UNKNOWN_MARK = ":material/help:"


@st.cache_data(show_spinner=False, max_entries=4)
def _figures(key: tuple, here: str, _records: list[dict]):
    """The verdict matrix (its predictions from `here`'s results, a machine id, where it is calibrated) and the
    headline data; `key` names the records and the saved predictions."""
    return overview.verdict_matrix(_records, here=here), overview.headline(_records, writeups.latest())


def _key(records: list[dict]) -> tuple:
    """What the figures depend on: the results folder, each record's state, the calibrations and the saved
    predictions of the write-ups (their modification times)."""
    folder = settings.results_dir()
    saved = sorted((str(p), p.stat().st_mtime_ns) for pattern in ("*/predictions/*.json", "*/calibration/*.json")
                   for p in folder.glob(pattern)) if folder.is_dir() else []
    return str(folder), tuple((r["run_id"], r["status"], r.get("ended"), len(r["rows"])) for r in records), tuple(saved)


def experiment_links(matrix) -> None:
    """Each experiment's page, three to a row, with its verdicts counted under it."""
    registered = [e for e in experiments.registry().values() if page_file(e.name).exists()]
    for start in range(0, len(registered), 3):
        for column, experiment in zip(st.columns(3), registered[start:start + 3]):
            with column:
                st.page_link(st.Page(page_file(experiment.name), title=experiment.title, url_path=experiment.name),
                             label=overview.short_title(experiment), icon=":material/arrow_forward:",
                             help=experiment.title)
                st.caption(_tally(matrix[matrix["experiment"] == experiment.name]))


def _tally(verdicts) -> str:
    """'3 claims: 1 reproduced, 2 need a GPU' over every machine's verdicts of one experiment ('3 claims on 2
    machines: ...' where several machines have results)."""
    claims, machines = verdicts["claim"].nunique(), verdicts["machine_id"].nunique()
    counts = verdicts["outcome"].value_counts()
    said = {REPRODUCED: "reproduced", NOT_REPRODUCED: "not reproduced", TOO_CLOSE: "too close to call",
            ESTIMATED: "estimated",
            NEEDS_GPU: "need a GPU", NO_DATA: "no data yet"}
    parts = [f"{MARKS.get(outcome, UNKNOWN_MARK)} {counts[outcome]} {words}" for outcome, words in said.items()
             if outcome in counts]
    on = f" on {machines} machines" if machines > 1 else ""
    return f"{claims} claim{'s' if claims != 1 else ''}{on}: " + ", ".join(parts)


def headline_chart(headline) -> None:
    st.subheader("GPU/CPU speedup at the write-ups' configurations")
    if headline.empty:
        st.info("No write-up states a GPU/CPU speedup, or the times of both, for one configuration.")
        return
    chart = ratio_dots(headline, title="CPU time / GPU time, one row per write-up configuration",
                       x_title="CPU time / GPU time (above 1: the GPU is faster; log scale)",
                       tooltip=["experiment", "setting", "hardware", "detail"])
    st.altair_chart(chart, width="stretch")
    measured = (headline["source"] == "measured").any()
    predicted = (headline["source"] == "predicted").any()
    st.caption("Published: the write-up's own figure, on its hardware. "
               + ("Predicted: the cost model's figure for the same configuration on the write-up's hardware "
                  "(named in the tooltip), not a measurement; its bar, where one is drawn, the range the model's "
                  "error on speedups of configurations measured on both devices gives it. " if predicted else
                  "No prediction of the write-ups' figures is saved yet (`python -m core predict --writeups` takes "
                  "them). ")
               + ("Measured: a GPU's time against its machine's CPU at the points of the configuration Crossover "
                  "runs (smaller data than the write-up's), the median where several match."
                  if measured else "Measured: none, until a GPU machine's records are in the results folder."))


def verdict_matrix(matrix) -> None:
    st.subheader("The claims, checked on each machine")
    here = devices.fingerprint()["machine_id"]
    table = overview.matrix_table(matrix, MARKS, UNKNOWN_MARK, here)
    for label in matrix.loc[matrix["machine_id"] == here, "machine"].unique():
        table = table.rename(columns={label: f"{label} ({settings.this_host()})"})
    st.markdown(overview.markdown_table(table))
    predicted = ("The last column is the cost model's answer for the write-up's GPU (predicted from a census of the "
                 "workload, not measured). " if overview.PREDICTED_COLUMN in table else "")
    st.caption(f"{MARKS[REPRODUCED]} reproduced · {MARKS[NOT_REPRODUCED]} not reproduced · {MARKS[TOO_CLOSE]} too "
               f"close to call (the figure's 95% interval straddles the claim's threshold) · {MARKS[ESTIMATED]} "
               f"estimated (rests on an extrapolation or a fit) · {MARKS[NEEDS_GPU]} needs a GPU · {MARKS[NO_DATA]} "
               "no data there. Each machine's column rests on the latest complete run of each preset there. "
               f"{predicted}Each experiment's page has the verdicts in full.")


def machines_with_results(records: list[dict]) -> None:
    st.subheader("Machines with results")
    machines = overview.machines_table(records)
    if machines.empty:
        st.info("No results yet." + ("" if settings.read_only() else
                " Run `python -m core run matmul --preset quick`, or open an experiment and run it from the sidebar."))
        return
    here = machines["machine_id"] == devices.fingerprint()["machine_id"]
    machines.loc[here, "Machine"] = machines.loc[here, "Machine"] + f" ({settings.this_host()})"
    st.dataframe(machines.drop(columns="machine_id"), hide_index=True)
    st.caption("Complete runs are counted per preset; smoke runs and cancelled, failed or interrupted runs are set "
               "apart and counted there, never among the complete runs.")


st.title("Crossover")
records = data.records()
if not overview.gpu_measured(records):
    st.warning("No GPU has measured anything yet: every GPU figure here is published or predicted.",
               icon=":material/memory:")
st.markdown("**Will a GPU make a small PyTorch model faster, and why or why not?** Five public write-ups timed "
            "small workloads on a CPU and a GPU. Crossover reruns each one and checks its claims. Every figure is "
            "**measured** (a record in the results folder), **published** (the write-up's own) or **predicted** "
            "(the cost model's, never mixed up with a measurement).")

for module, error in experiments.broken().items():
    st.error(f"The experiment module `{module}` could not be loaded, so it is left out: {error}")
for name in without_page():
    st.error(f"The experiment '{name}' is registered but has no page, so it is not in the navigation: add "
             f"`pages/{page_file(name).name}` holding `experiment_page(\"{name}\")`, as every other page does.")

def take_it_with_you() -> None:
    st.subheader("Take it with you")
    st.download_button("Download the offline report (one HTML file)", single_file.build, file_name="crossover-report.html",
                       mime="text/html", on_click="ignore", icon=":material/download:")
    st.caption("One file that opens in any browser with no network: the verdicts, every experiment's charts with "
               "the runs behind them, and the machines. It is built when you click (it takes a few seconds); "
               "`python -m core report -o report.html` writes the same file.")


matrix, headline = _figures(_key(records), devices.fingerprint()["machine_id"], records)
experiment_links(matrix)
headline_chart(headline)
verdict_matrix(matrix)
machines_with_results(records)
take_it_with_you()
