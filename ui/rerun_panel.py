"""The rerun panel: choose devices, preset and parameters, see an estimate, start a background run,
follow its progress and cancel it. Every tab and refresh sees the same run (it lives in core.jobs)."""
import pandas as pd
import streamlit as st

from core import devices, jobs, results, settings
from core.experiments.base import PRESETS, Experiment
from core.params import ConfigError, Param
from core.runlock import BusyError
from ui.data import records

POLL_SECONDS = 1.0


def rerun_panel(exp: Experiment) -> None:
    st.subheader("Rerun on this machine")
    if settings.read_only():
        st.info("This is a read-only view: runs are disabled here.")
        return
    if jobs.current():
        _progress()
    else:
        _last_outcome()
        _form(exp)


def _form(exp: Experiment) -> None:
    choices = devices.available()
    picked = st.multiselect("Devices", choices, default=choices, key=f"{exp.name}-devices")
    preset = st.selectbox("Preset", PRESETS, index=PRESETS.index("quick"), key=f"{exp.name}-preset",
                          help="smoke: seconds, for tests; quick: about a minute per device; paper: the write-up's scale")
    overrides, errors = {}, []
    with st.expander("Parameters"):
        for p, value in exp.config(preset).items():
            try:
                overrides[p] = _input(exp, preset, exp.param(p), value)
            except ConfigError as e:
                errors.append(str(e))
    if not picked:
        errors.append(f"devices: choose at least one of {', '.join(choices)}")
    try:
        config = exp.config(preset, overrides) if not errors else None
    except ConfigError as e:
        errors.append(str(e))
    if errors:
        for message in errors:
            st.error(message)
        return
    st.caption(_estimate(exp, preset, config, picked))
    if st.button("Run", type="primary", key=f"{exp.name}-run"):
        try:
            info = jobs.start(exp.name, picked, preset, overrides)
        except (BusyError, ConfigError, devices.DeviceError, settings.ReadOnlyError) as e:
            st.error(str(e))
            return
        st.session_state["crossover-watched"] = info
        st.rerun()


def _input(exp: Experiment, preset: str, p: Param, value):
    """A widget per parameter, its value checked by the Param (the same checks as the CLI).
    Keys include the preset, so switching presets shows that preset's values."""
    key, help_ = f"{exp.name}-{preset}-{p.name}", f"{p.help} ({p.allowed()})"
    if p.choices and p.many:
        return p.check(tuple(st.multiselect(p.name, p.choices, default=list(value), key=key, help=help_)))
    if p.kind is bool:
        return st.checkbox(p.name, value, key=key, help=help_)
    shown = ",".join(map(str, value)) if p.many else str(value)
    return p.parse(st.text_input(p.name, shown, key=key, help=help_))


def _estimate(exp: Experiment, preset: str, config: dict, picked: list[str]) -> str:
    guess = sum(exp.estimate_seconds(config, d) for d in picked)
    text = f"Estimated time: about {_duration(guess)} (a rough guess from the work involved)"
    last = _last_complete(exp.name, preset)
    if last:
        text += f"; the last complete {preset} run here took {_duration(last)}"
    return text + "."


def _last_complete(experiment: str, preset: str) -> float | None:
    machine = devices.fingerprint()["machine_id"]
    runs = results.runs_frame(records())
    if runs.empty:
        return None
    done = runs[(runs["experiment"] == experiment) & (runs["preset"] == preset)
                & (runs["machine_id"] == machine) & (runs["status"] == "complete")]
    if done.empty:
        return None
    last = done.sort_values("started").iloc[-1]
    return (pd.Timestamp(last["ended"]) - pd.Timestamp(last["started"])).total_seconds()


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


@st.fragment(run_every=POLL_SECONDS)
def _progress() -> None:
    job = jobs.current()
    if job is None:
        st.rerun()  # the run ended: redraw the page with its results
    st.session_state["crossover-watched"] = job
    total = job["total"] or 0
    st.progress(job["done"] / total if total else 0.0,
                text=f"{job['experiment']} ({job['preset']}) on {', '.join(job['devices'])}: "
                     f"{job['done']}/{total or '?'} points, started {job['started']}")
    if job["stopping"]:
        st.warning(f"Stopping after the current point (cancel asked at {job['stopping']}): a point "
                   "already inside a long computation finishes first; the points done stay recorded.")
    elif st.button("Cancel run", key="crossover-cancel"):
        jobs.cancel()
        st.rerun(scope="fragment")
    with st.expander("Log"):
        st.code(jobs.log_tail(job["run_id"]) or "(starting)")


def _last_outcome() -> None:
    watched = st.session_state.get("crossover-watched")
    if not watched:
        return
    outcome = jobs.progress(watched["record"])
    if outcome["status"] == "no record":
        message = f"Last run {watched['run_id']} ended before it wrote a record."
    else:
        status = "interrupted" if outcome["status"] == "running" else outcome["status"]  # killed, not ended
        message = f"Last run {watched['run_id']}: {status}, {outcome['done']}/{outcome['total']} points recorded."
    if outcome["status"] == "complete":
        st.success(message)
    else:
        st.warning(message)
        st.code(jobs.log_tail(watched["run_id"]) or "(no log)")
