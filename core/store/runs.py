"""Which runs a page shows. By default the latest complete run of each preset on each machine (a smoke run
is a preset like any other, so it is one run of its own, never part of another's line); an older run, or a
cancelled, failed or interrupted one, only when a reader picks it. Runs are named for people by preset,
start (this computer's local time), machine, status and points."""
import re
from datetime import datetime

import pandas as pd

from core.store import results
from core.params import PRESETS

RUN_COLUMNS = ["run_id", "experiment", "preset", "status", "machine_id", "machine", "started", "points"]
STATUS_WORDS = {"partial": "interrupted", "running": "still running"}  # a record left running was interrupted


def runs_of(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run of a rows frame (or a runs frame), newest first."""
    if frame.empty or "run_id" not in frame:
        return pd.DataFrame(columns=RUN_COLUMNS)
    runs = frame.drop_duplicates("run_id").reindex(columns=RUN_COLUMNS)
    return runs.sort_values("started", ascending=False, na_position="last", kind="stable").reset_index(drop=True)


def default_runs(frame: pd.DataFrame) -> list[str]:
    """The run ids shown unless a reader picks others: the latest complete run of each preset on each
    machine, for each device it measured (two runs where the CPU and the GPU ran apart), ordered by machine,
    then preset (smoke, quick, paper, any other)."""
    if frame.empty:
        return []
    chosen = set(results.latest_complete(frame, ["machine_id", "preset"])["run_id"])
    runs = runs_of(frame)
    latest = runs[runs["run_id"].isin(chosen)]
    ranked = latest.assign(rank=latest["preset"].map(lambda p: PRESETS.index(p) if p in PRESETS else len(PRESETS)))
    return ranked.sort_values(["machine", "rank"], kind="stable")["run_id"].tolist()


def select(rows: pd.DataFrame, run_ids) -> pd.DataFrame:
    """The rows of these runs only."""
    return rows[rows["run_id"].isin(list(run_ids))] if len(rows) else rows


def started_text(started) -> str:
    """A run's recorded start (ISO 8601, UTC) in this computer's local time: '22 Nov 07:22'."""
    try:
        moment = datetime.fromisoformat(str(started))
    except ValueError:
        return "start not recorded"
    return moment.astimezone().strftime("%d %b %H:%M")


def machine_text(machine) -> str:
    """A machine's label ('Intel(R) Xeon(R) Processor (2 threads) / NVIDIA T4') made short: 'Intel Xeon / NVIDIA T4'."""
    if not isinstance(machine, str):
        return "machine not recorded"
    cpu, _, gpus = machine.partition(" / ")
    cpu, _, details = cpu.split(" @ ")[0].partition(" (")
    for noise in ("(R)", "(TM)", " Processor", " CPU"):
        cpu = cpu.replace(noise, "")
    design = re.search(r"cpu family (\d+), model (\d+)|CPU part (\w+)", details)  # devices.label's, for a VM's CPU
    if design:
        cpu += f" family {design[1]} model {design[2]}" if design[1] else f" part {design[3]}"
    cpu = cpu.strip()
    return cpu if gpus in ("", "no GPU") else f"{cpu} / {gpus}"


def status_text(status) -> str:
    return STATUS_WORDS.get(status, str(status))


def short_label(run) -> str:
    """A run in a table cell or a chart: 'quick · 22 Nov 07:22 · Intel Xeon', its status added when it did not
    complete."""
    text = f"{_preset(run['preset'])} · {started_text(run['started'])} · {machine_text(run['machine'])}"
    return text if run["status"] == "complete" else f"{text} · {status_text(run['status'])}"


def label(run) -> str:
    """A run in the picker: 'quick · 22 Nov 07:22 · Intel Xeon · complete · 20 points'."""
    return " · ".join([_preset(run["preset"]), started_text(run["started"]), machine_text(run["machine"]),
                       status_text(run["status"]), _points(run["points"])])


def labels(frame: pd.DataFrame, short: bool = False) -> dict[str, str]:
    """run id -> its label (or short label), newest first."""
    name = short_label if short else label
    return {run["run_id"]: name(run) for _, run in runs_of(frame).iterrows()}


def shown_text(frame: pd.DataFrame, run_ids) -> str:
    """The runs shown, in words, machine by machine, for the caption under the run picker."""
    runs = runs_of(frame)
    chosen = runs[runs["run_id"].isin(list(run_ids))]
    if chosen.empty:
        return "No run is shown: pick at least one."
    which = ("the latest complete run of each preset on each machine" if set(chosen["run_id"]) == set(default_runs(frame))
             else f"the run{'s' if len(chosen) > 1 else ''} picked")
    series = ", one series per run" if len(chosen) > 1 else ""
    each = [f"On {machine}: " + ", ".join(_run_words(run) for _, run in part.iloc[::-1].iterrows()) + "."
            for machine, part in chosen.groupby("machine", sort=True)]
    return f"Showing {which}{series}. {' '.join(each)}"


def _run_words(run) -> str:
    """'quick of 22 Nov 07:22 (20 points)', the status named when the run did not complete."""
    status = "" if run["status"] == "complete" else f"{status_text(run['status'])}, "
    return f"{_preset(run['preset'])} of {started_text(run['started'])} ({status}{_points(run['points'])})"


def _points(count) -> str:
    return "no points" if pd.isna(count) else f"{int(count)} point{'' if count == 1 else 's'}"


def _preset(preset) -> str:
    return "custom" if preset is None or pd.isna(preset) else str(preset)
