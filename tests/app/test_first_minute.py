"""An answer from the first minute: without this machine's calibrated profile, the pages predict with the nearest CPU
driving the GPU and say so, and offer the calibration as a background job (never on a read-only server); once its
profile is there, the pages use it."""
import shutil
import sys

import pytest

from core import devices, experiments, settings
from core.commands import jobs
from core.model import hardware, profiles
from core.store import runlock
from tests.helpers import render, shipped_profile_here, shipped_runs, wait_for
from ui import rerun_panel

SHIPPED = settings.APP_ROOT / "results"
BUTTON = rerun_panel.CALIBRATE


@pytest.fixture
def twin(results_dir) -> str:
    """A calibrated machine with this machine's CPU (a shipped profile's figures, this machine's fingerprint), and a
    shipped matmul run with stand-in censuses from a machine whose profile is not here: its GPU is driven by this
    machine's CPU, which the twin stands in for. Returns the twin's CPU title."""
    shipped_profile_here("twin-1")
    machine, (run,) = shipped_runs("matmul")
    (results_dir / machine).mkdir()
    shutil.copy(SHIPPED / machine / f"{run}.json", results_dir / machine)
    return f"{devices.fingerprint()['cpu_model']} (twin-1)"


def sidebar_text(at) -> str:
    return " ".join(c.value for c in at.sidebar.caption)


def predicted_series(at) -> str:
    [caption] = [c.value for c in at.sidebar.caption if c.value.startswith("Predicted series:")]
    return caption


def picker():
    """The sidebar's predicted-series area alone (AppTest's clicks do not reach a widget of the router's sidebar)."""
    import streamlit as st
    from ui import predicted
    with st.sidebar:
        predicted.gpu_picker(None)


def labels(at) -> list[str]:
    return [b.label for b in at.button]


def chart_specs(at) -> list[str]:
    return [chart.proto.spec for chart in at.get("vega_lite_chart")]


def test_without_a_profile_a_page_predicts_with_the_nearest_cpu_says_so_and_offers_to_calibrate(twin):
    at = render("streamlit_app.py")
    at.switch_page("pages/matmul.py").run()
    assert not at.exception
    caption = predicted_series(at)
    assert f"else by the CPU nearest this machine's, {twin}, a calibrated machine with the same CPU model, the same " \
           "design, and" in caption
    assert caption.endswith("This machine has no calibrated profile, so these are another CPU's figures: a prediction "
                            f"for its own CPU needs its calibration ({profiles.CALIBRATION_TIME}): **{BUTTON}** below, "
                            "or `python -m core calibrate`.")
    assert BUTTON in [b.label for b in at.sidebar.button]
    gpu = hardware.writeup_target(experiments.get("matmul").source)[0].gpu
    assert any(f"predicted on {gpu.title} driven by {twin}, not measured" in spec for spec in chart_specs(at))
    assert any(i.value.startswith("This machine has no calibrated profile: the CPU nearest its own stands in for it, "
                                  f"{twin}") and f"**{BUTTON}** in the sidebar" in i.value for i in at.info)


def test_with_no_calibrated_machine_the_catalogue_s_typical_cpu_stands_in(results_dir):
    at = render("streamlit_app.py")
    assert not at.exception
    assert "else by the CPU nearest this machine's, a typical desktop CPU (assumed), the catalogue's typical CPU: no " \
           "calibrated machine and no catalogue entry has this machine's CPU model " \
           f"({devices.fingerprint()['cpu_model']}). This machine has no calibrated profile" in predicted_series(at)
    assert "No prediction" not in predicted_series(at)


def test_a_read_only_server_offers_no_calibration_and_refuses_to_start_one(twin, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    spawned = []
    monkeypatch.setattr(jobs, "_spawn", lambda command, *args: spawned.append(command))
    at = render("streamlit_app.py")
    assert not at.exception
    caption = predicted_series(at)
    assert f"else by the CPU nearest this server's, {twin}" in caption
    assert caption.endswith("This server has no calibrated profile, so these are another CPU's figures: a prediction "
                            "for its own CPU needs its calibration.")
    assert "python -m core calibrate" not in caption and BUTTON not in labels(at)
    at.switch_page("pages/machines.py").run()
    assert not at.exception and not [label for label in labels(at) if label.startswith(BUTTON)]
    with pytest.raises(settings.ReadOnlyError, match="calibration refused"):
        jobs.start_calibration()
    assert not spawned


class Started:
    """What the calibration job's process would be, without calibrating: its pid is ours (alive), and the lock it
    was handed is let go as the job's start closes it."""
    pid = None

    def wait(self) -> int:
        return 0


def test_the_button_starts_python_m_core_calibrate_as_a_job(results_dir, monkeypatch):
    spawned = []
    monkeypatch.setattr(jobs, "_spawn", lambda command, *args: spawned.append(command) or Started())
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_function(picker, default_timeout=60).run()
    next(b for b in at.sidebar.button if b.label == BUTTON).click().run()
    assert not at.exception
    assert spawned == [[sys.executable, "-m", "core", "calibrate"]]
    watched = at.session_state[rerun_panel.WATCHED]
    assert watched["experiment"] == jobs.CALIBRATION and watched["devices"][0] == "cpu"
    # the job ended at once (nothing ran): the button says so and is offered again
    assert any(w.value.startswith("The calibration of ") and w.value.endswith("ended without saving a profile.")
               for w in at.sidebar.warning)
    assert BUTTON in [b.label for b in at.sidebar.button]


def test_the_machines_page_offers_the_calibration_too(results_dir, monkeypatch):
    started = []
    monkeypatch.setattr(jobs, "start_calibration", lambda: started.append(True) or {"experiment": jobs.CALIBRATION,
                                                                                     "started": "2026-01-01T00:00:00+00:00",
                                                                                     "run_id": "calibration-1"})
    at = render("pages/machines.py")
    assert not at.exception
    assert any(m.value == f"not calibrated: run `python -m core calibrate` ({profiles.CALIBRATION_TIME}), or the "
                          "button below" for m in at.main.markdown)
    next(b for b in at.main.button if b.label == BUTTON).click().run()
    assert not at.exception and started == [True]


def test_a_calibration_going_on_shows_its_probes_and_log_and_once_it_ends_the_pages_use_its_profile(results_dir):
    info = {"run_id": "calibration-20260101T000000-abcdef", "experiment": jobs.CALIBRATION, "devices": ["cpu"],
            "preset": "full", "started": "2026-01-01T00:00:00+00:00", "pid": None, "planned": 0, "record": None}
    jobs.logs_dir().mkdir(parents=True)
    (jobs.logs_dir() / f"{info['run_id']}.log").write_text(
        "calibrating:   0%|          | 0/66 [00:00<?, ?probe/s]\rcalibrating:  18%|#8        | 12/66 [00:40<03:00, "
        " 3.30s/probe, pass 1/2: cpu matmul]")
    lock = runlock.acquire(info)  # as the job's process holds it
    try:
        job = jobs.current()
        assert (job["done"], job["total"], job["status"]) == (12, 66, "running")
        assert rerun_panel.progress_text(job).startswith(
            f"calibrating cpu (full, {profiles.CALIBRATION_TIME} in all): 12/66 probes; started ")
        at = render("streamlit_app.py")
        assert not at.exception
        assert any(p.proto.text.startswith("calibrating cpu (full") for p in at.sidebar.get("progress"))
        assert any("12/66 [00:40<03:00" in c.value for c in at.sidebar.code)  # the log's tail
        assert BUTTON not in labels(at)  # one run at a time
        assert any(c.value.startswith("Calibrating now") for c in at.sidebar.caption)
    finally:
        runlock.release(lock)
    shipped_profile_here()  # what the calibration saved
    at.run()
    assert not at.exception
    assert "else by this machine's CPU." in sidebar_text(at) and "nearest" not in sidebar_text(at)
    assert BUTTON not in labels(at)


@pytest.mark.full
def test_a_calibration_job_shows_its_probes_and_once_cancelled_saves_nothing_and_lets_go_of_the_run_lock(results_dir):
    # one real job (what saving a finished calibration's profile takes is the calibrate command's own tests')
    started = jobs.start_calibration()
    job = wait_for(lambda: (found := jobs.current()) and found["total"] and found)  # its progress bar, from its log
    assert job["run_id"] == started["run_id"] and 0 <= job["done"] <= job["total"]
    jobs.cancel()
    wait_for(lambda: jobs.current() is None)
    assert profiles.load() is None and runlock.holder() is None
    assert "interrupted" in jobs.log_tail(started["run_id"])
