"""The rerun panel, drawn in the sidebar of an experiment page: choose devices, preset and parameters,
see an estimate, start a background run, follow its progress and cancel it. Every tab and refresh sees
the same run (it lives in core.commands.jobs); the sidebar of the other pages follows it with `run_status`.
`calibrate_button` starts this machine's calibration the same way."""
import math
from datetime import datetime

import pandas as pd
import streamlit as st

from core import devices, settings
from core.commands import jobs
from core.model import profiles
from core.store import results
from core.measure.experiment import Experiment
from core.params import PRESETS
from core.params import ConfigError, Param
from core.store.runlock import BusyError
from ui.data import records

POLL_SECONDS = 1.0
WATCHED = "crossover-watched"  # session state: the run this session started, for its outcome afterwards
KEPT = "crossover-kept:"       # session state: our copy of each form widget's value (see _kept)


def rerun_panel(exp: Experiment) -> None:
    if settings.read_only():
        st.info("This is a read-only view: runs are disabled here.")
        return
    st.subheader("Run it again")
    if jobs.current():
        _follow(exp.name)
    else:
        _last_outcome(exp.name)
        _form(exp)


def run_status() -> None:
    """The run going on, if any, followed live (for the sidebar of pages without the panel)."""
    if not settings.read_only() and jobs.current():
        _follow(None)


# -- the form ------------------------------------------------------------------------------------------------
def _kept(key: str, default) -> dict:
    """The arguments of a form widget that keeps the user's choice. Streamlit forgets a widget's value after a
    script run that does not draw it (the form is hidden while a run goes on), so each change is copied to a
    key of our own (_keep) and handed back to the widget on every run (on every run, not only when dropped:
    a run cut short by the next one may have set it already, and the browser shows a value set this way
    only in the run that sets it)."""
    st.session_state[key] = st.session_state.get(KEPT + key, default)
    return {"key": key, "on_change": _keep, "args": (key,)}


def _keep(key: str) -> None:
    st.session_state[KEPT + key] = st.session_state[key]


def _form(exp: Experiment) -> None:
    choices = devices.available()
    picked = st.multiselect("Devices", choices, **_kept(f"{exp.name}-devices", choices))
    preset = st.selectbox("Preset", PRESETS, **_kept(f"{exp.name}-preset", "quick"),
                          help="smoke: seconds, for tests; quick: about a minute per device; paper: the write-up's "
                               "scale")
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
        st.session_state[WATCHED] = info
        st.rerun()


def _input(exp: Experiment, preset: str, p: Param, value):
    """A widget per parameter, its value checked by the Param (the same checks as the CLI).
    Keys include the preset, so switching presets shows that preset's values."""
    key, help_ = f"{exp.name}-{preset}-{p.name}", f"{p.help} ({p.allowed()})"
    if p.choices and p.many:
        chosen = tuple(st.multiselect(p.name, p.choices, **_kept(key, list(value)), help=help_))
        if not chosen:  # the Param's own message speaks of typing a comma-separated list
            raise ConfigError(p.name, f"choose at least one of {', '.join(map(str, p.choices))}")
        return p.check(chosen)
    if p.kind is bool:
        return st.checkbox(p.name, **_kept(key, value), help=help_)
    shown = ",".join(map(str, value)) if p.many else str(value)
    return p.parse(st.text_input(p.name, **_kept(key, shown), help=help_))


def _estimate(exp: Experiment, preset: str, config: dict, picked: list[str]) -> str:
    """The last complete run of the preset here, where there is one (what a run really takes); and the guess from
    the timed work alone, which leaves out each point's census, profile and GPU stand-in census (most of a smoke
    run)."""
    guess = rough_duration(sum(exp.run_estimate(config, d) for d in picked))
    last = _last_complete(exp.name, preset)
    timed = f"the timed work alone: {guess}, before each point's census, profile and stand-in census"
    if last is not None:
        return f"The last complete {preset} run here took {duration(last)} ({timed})."
    return f"Estimated: {timed} (a rough guess; no complete {preset} run here yet)."


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


# -- words for times ---------------------------------------------------------------------------------------
def rough_duration(seconds: float) -> str:
    """An estimate to one significant figure: 'under a second', 'about 9 s', 'about 3 min', 'about 2 h'."""
    for unit, size in (("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size * (1.5 if unit != "s" else 1):
            return f"about {_one_figure(seconds / size)} {unit}"
    return "under a second"


def _one_figure(value: float) -> str:
    return f"{round(value, -int(math.floor(math.log10(value)))):g}"


def duration(seconds: float) -> str:
    """An elapsed time: '0.4 s', '42 s', '2 min 10 s', '1 h 5 min'."""
    if seconds < 1:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def when(stamp: str, now: datetime = None) -> str:
    """An ISO time stamp as the server's local clock time and how long ago: '07:41 (server time, CET),
    2 min 10 s ago'."""
    return f"{clock(stamp, now)}, {duration(_age(stamp, now))} ago"


def clock(stamp: str, now: datetime = None) -> str:
    """An ISO time stamp as the server's local clock time: '07:41 (server time, CET)', with the date when it
    is not today."""
    moment = datetime.fromisoformat(stamp).astimezone()
    today = (now or datetime.now()).astimezone().date()
    shown = moment.strftime("%H:%M" if moment.date() == today else "%Y-%m-%d %H:%M")
    return f"{shown} (server time, {moment.tzname()})"


def _age(stamp: str, now: datetime = None) -> float:
    """Seconds since an ISO time stamp (never below 0: a clock may step back)."""
    return max(((now or datetime.now()).astimezone() - datetime.fromisoformat(stamp).astimezone()).total_seconds(), 0.0)


# -- a run going on, and the last one's outcome ----------------------------------------------------------------
def progress_text(job: dict) -> str:
    """What the panel and the sidebar say of a run going on: one text, so both say the same."""
    total, done = job["total"], job["done"]
    if job["experiment"] == jobs.CALIBRATION:
        where = f"{done}/{total} probes" if total else "starting"
        took = f", {profiles.CALIBRATION_TIME} in all" if job["preset"] == "full" else ""
        return (f"calibrating {', '.join(job['devices'])} ({job['preset']}{took}): {where}; "
                f"started {when(job['started'])}")
    if job["experiment"] == jobs.MODEL_CHECK:
        return f"timing your model on this machine's CPU (a few seconds after Python's imports); started {when(job['started'])}"
    if total and done >= total and job["status"] == "running":
        planned = f" of {job['standins_planned']}" if job.get("standins_planned") else ""
        where = f"all {total} points measured, now the GPU stand-in censuses ({job.get('standins', 0)}{planned} taken)"
    elif done == 0 and job["status"] in ("running", "no record"):  # the process starts, then builds and warms up
        where = f"0/{total or '?'} points, measuring the first (its set-up and warm-up come first)"
    else:
        where = f"{done}/{total or '?'} points"
    return (f"{job['experiment']} ({job['preset']}) on {', '.join(job['devices'])}: {where}; "
            f"started {when(job['started'])}")


@st.fragment(run_every=POLL_SECONDS)
def _follow(page: str | None) -> None:
    """The run's progress, redrawn every POLL_SECONDS; the page reruns when the run ends. `page`: the
    experiment whose panel this is (None in the sidebar of another page, which links to the run's page)."""
    job = jobs.current()
    if job is None:
        st.rerun()  # the run ended: redraw the page with its results
    if page is None:
        st.markdown("**Running now**")
    st.session_state[WATCHED] = job
    st.progress(min(job["done"] / job["total"], 1.0) if job["total"] else 0.0, text=progress_text(job))
    if job["stopping"]:
        st.warning(f"Stopping after the current point (cancel asked {when(job['stopping'])}): a point already "
                   "inside a long computation finishes first; the points done stay recorded.")
    elif st.button("Cancel run", key="crossover-cancel"):
        jobs.cancel()
        st.rerun(scope="fragment")
    if page is None:
        target = jobs.OWN_PAGE.get(job["experiment"], job["experiment"])
        st.page_link(f"pages/{target}.py", label="Open its page", icon=":material/arrow_forward:")
    if page is not None or job["experiment"] in jobs.OWN_PAGE:  # an experiment's run shows its log on its page
        with st.expander("Log"):
            st.code(jobs.log_tail(job["run_id"]) or "(starting)")


# -- a calibration of this machine ------------------------------------------------------------------------
CALIBRATE = "Calibrate this machine"


def calibrate_button(key: str, label: str = CALIBRATE) -> None:
    """A button that starts `python -m core calibrate` as a background job (jobs.start_calibration), followed as a run
    is; absent on a read-only server, and while a run goes on. Says how the last calibration this session started
    ended when it left no profile."""
    if settings.read_only():
        return
    job = jobs.current()
    if job is not None:
        if job["experiment"] == jobs.CALIBRATION:
            st.caption("Calibrating now (its progress is in the sidebar): the pages use its profile once it ends.")
        return
    watched = st.session_state.get(WATCHED)
    if watched and watched["experiment"] == jobs.CALIBRATION and _no_profile_since(watched["started"]):
        st.warning(f"The calibration of {clock(watched['started'])} ended without saving a profile.")
        _log(watched)
    if st.button(label, key=key, icon=":material/speed:",
                 help=f"Runs `python -m core calibrate` in the background ({profiles.CALIBRATION_TIME}): it measures "
                      f"this machine's constants, which the cost model prices its CPU by. Runs wait until it ends."):
        try:
            info = jobs.start_calibration()
        except (BusyError, settings.ReadOnlyError) as e:
            st.error(str(e))
            return
        st.session_state[WATCHED] = info
        st.rerun()


def _no_profile_since(started: str) -> bool:
    profile = profiles.load()
    return profile is None or datetime.fromisoformat(profile["taken"]) < datetime.fromisoformat(started)


def _last_outcome(experiment: str) -> None:
    """How the run this session started ended (on its experiment's page), with a link to the results."""
    watched = st.session_state.get(WATCHED)
    if not watched or watched["experiment"] != experiment:
        return
    outcome = jobs.progress(watched["record"])
    run = f"The {watched['preset']} run of {clock(watched['started'])}"
    if outcome["status"] == "no record":
        st.warning(f"{run} ended before it wrote a record.")
        _log(watched)
        return
    status = "interrupted" if outcome["status"] == "running" else outcome["status"]  # killed, not ended
    ended = f" ended {duration(_age(outcome['ended']))} ago" if outcome["ended"] else ""
    message = f"{run}{ended}: {status}, {outcome['done']}/{outcome['total']} points recorded."
    if outcome["status"] == "complete":
        st.success(f"{message} [See the results](#results)")
    else:
        st.warning(message)
        _log(watched)


def _log(watched: dict) -> None:
    with st.expander("Its log"):
        st.code(jobs.log_tail(watched["run_id"]) or "(no log)")
