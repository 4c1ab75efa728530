"""The rerun panel (in an experiment page's sidebar) and the sidebar's view of a run going on."""
import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from core.commands import jobs
from tests.helpers import render, wait_for
from ui import rerun_panel

SLOW = {"sizes": tuple(range(8, 48)), "repeats": 5, "block_seconds": 0.02, "variants": ("numpy",)}


@pytest.mark.full
def test_the_choices_outlive_the_run_and_the_finished_run_links_to_the_results(results_dir):
    at = render("pages/matmul.py")
    at.selectbox(key="matmul-preset").set_value("smoke").run()
    at.text_input(key="matmul-smoke-repeats").set_value("2").run()
    at.multiselect(key="matmul-smoke-variants").set_value(["numpy"]).run()
    at.button(key="matmul-run").click().run()
    assert not at.exception and not [b for b in at.button if b.label == "Run"]  # the form is hidden meanwhile
    wait_for(lambda: jobs.current() is None and list(results_dir.glob("*/*.json")))
    at.run()
    assert not at.exception
    [done] = [s.value for s in at.success]
    assert "complete, 3/3 points recorded" in done and done.endswith("[See the results](#results)")
    assert at.selectbox(key="matmul-preset").value == "smoke"
    assert at.text_input(key="matmul-smoke-repeats").value == "2"
    assert at.multiselect(key="matmul-smoke-variants").value == ["numpy"]
    assert at.multiselect(key="matmul-devices").value == ["cpu"]


@pytest.mark.full
def test_the_sidebar_and_the_panel_show_one_progress(results_dir):
    jobs.start("matmul", ["cpu"], "smoke", SLOW | {"block_seconds": 0.2})  # still running after two slow renders
    try:
        wait_for(lambda: (j := jobs.current()) and j["done"] >= 1)
        elsewhere, panel = render("streamlit_app.py"), render("pages/matmul.py")
        shown = [_progress_texts(elsewhere.sidebar), _progress_texts(panel.sidebar)]
        assert not elsewhere.exception and not panel.exception
        assert all(len(texts) == 1 and texts[0].startswith("matmul (smoke) on cpu: ") and "/40 points; started "
                   in texts[0] and "(server time, " in texts[0] for texts in shown)
        assert any(m.value == "**Running now**" for m in elsewhere.sidebar.markdown)
        assert [b.label for b in panel.sidebar.button] == ["Cancel run"]
    finally:
        jobs.cancel()
        wait_for(lambda: jobs.current() is None)


def test_estimates_are_one_significant_figure_and_never_zero():
    assert rerun_panel.rough_duration(0.3) == "under a second"
    assert rerun_panel.rough_duration(9.4) == "about 9 s"
    assert rerun_panel.rough_duration(14) == "about 10 s"
    assert rerun_panel.rough_duration(130) == "about 2 min"
    assert rerun_panel.rough_duration(3 * 3600) == "about 3 h"


@pytest.mark.parametrize("seconds, text", [(0.4, "0.4 s"), (42, "42 s"), (130, "2 min 10 s"), (3900, "1 h 5 min")])
def test_elapsed_times_read_as_words(seconds, text):
    assert rerun_panel.duration(seconds) == text


@pytest.fixture
def paris():
    """The server's clock in Paris (CET in January)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Paris"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_times_are_the_servers_local_clock_and_how_long_ago(paris):
    stamp = "2026-01-10T06:41:00+00:00"  # records and the run lock keep UTC
    now = datetime(2026, 1, 10, 6, 43, 10, tzinfo=timezone.utc)
    assert rerun_panel.when(stamp, now) == "07:41 (server time, CET), 2 min 10 s ago"
    assert rerun_panel.clock(stamp, now + timedelta(days=1)) == "2026-01-10 07:41 (server time, CET)"


def _progress_texts(sidebar) -> list[str]:
    return [e.proto.text for e in sidebar if getattr(e, "type", None) == "progress"]


def test_a_run_among_its_stand_in_censuses_says_how_many_of_those_planned_are_taken(results_dir):
    from core import experiments
    from core.store import results
    exp = experiments.get("matmul")
    config = exp.config("smoke", {"sizes": (16,), "variants": ("numpy",)})
    writer = results.RecordWriter("matmul", "smoke", config, ["cpu"], results_dir=results_dir)
    job = {"experiment": "matmul", "preset": "smoke", "devices": ["cpu"], "started": writer.record["started"]}
    starting = job | jobs.progress(str(writer.path)) | {"total": 1}  # no record yet: the app's planned points
    assert ": 0/1 points, measuring the first (" in rerun_panel.progress_text(starting)
    writer.start(1)
    assert ": 0/1 points, measuring the first (its set-up and warm-up come first); started " in \
        rerun_panel.progress_text(job | jobs.progress(str(writer.path)))
    writer.add({"device": "cpu", "variant": "numpy", "params": {"size": 16}, "status": "ok"})
    assert "censuses (0 taken)" in rerun_panel.progress_text(job | jobs.progress(str(writer.path)))
    writer.plan_standins(3)
    assert "censuses (0 of 3 taken)" in rerun_panel.progress_text(job | jobs.progress(str(writer.path)))


def test_an_empty_choice_of_variants_asks_to_choose_one_of_them(results_dir):
    at = render("pages/matmul.py")
    at.selectbox(key="matmul-preset").set_value("smoke").run()
    at.multiselect(key="matmul-smoke-variants").set_value([]).run()
    assert not at.exception
    [message] = [e.value for e in at.error]
    assert message.startswith("variants: choose at least one of ") and "comma" not in message
    assert not [b for b in at.button if b.label == "Run"]


def test_the_estimate_says_the_last_complete_run_first_and_what_the_guess_leaves_out(results_dir, monkeypatch):
    monkeypatch.setattr(rerun_panel, "_last_complete", lambda experiment, preset: None)
    at = render("pages/matmul.py")
    at.selectbox(key="matmul-preset").set_value("smoke").run()
    [text] = [c.value for c in at.sidebar.caption if "timed work alone" in c.value]
    assert text.startswith("Estimated: the timed work alone: ") and "no complete smoke run here yet" in text
    monkeypatch.setattr(rerun_panel, "_last_complete", lambda experiment, preset: 70.0)
    at.run()
    [text] = [c.value for c in at.sidebar.caption if "timed work alone" in c.value]
    assert text.startswith("The last complete smoke run here took 1 min 10 s (the timed work alone: ")
