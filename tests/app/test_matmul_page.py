"""The experiment page's layout, top to bottom, and which runs it shows, on the matmul page: a results
folder holding a smoke run, a cancelled run and a complete run made from the record shipped in results/."""
import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from core import devices, settings
from core.store import results, runs
from core.experiments.matmul import charts as matmul_charts
from core.store.files import write_atomic
from ui import data
from tests.helpers import page_text, render
from tests.unit.test_tables import too_precise

NAME = "matmul"


def shipped_record() -> dict:
    found = sorted((settings.APP_ROOT / "results").glob(f"*/{NAME}-*.json"))
    assert found, "results/ ships a matmul record; these tests derive their runs from it"
    return json.loads(found[-1].read_text())


def three_runs(results_dir) -> dict[str, dict]:
    """A complete quick run (the shipped record), an older smoke run (complete, its first 8 points) and a
    later cancelled quick run (its first 6 points) of one machine, each timing differently; by kind."""
    complete = shipped_record()
    made = {"complete": complete,
            "smoke": complete | {"run_id": f"{NAME}-smoke-run", "preset": "smoke", "started": "2026-01-01T05:00:00+00:00",
                                 "rows": [row | {"median": row["median"] * 1.5} for row in complete["rows"][:8]]},
            "cancelled": complete | {"run_id": f"{NAME}-cancelled-run", "status": "cancelled",
                                     "started": "2099-01-01T07:00:00+00:00",
                                     "rows": [row | {"median": row["median"] * 3} for row in complete["rows"][:6]]}}
    for record in made.values():
        write_atomic(results_dir / record["machine_id"] / f"{record['run_id']}.json", record)
    return made


@pytest.fixture
def charted(monkeypatch):
    """The run ids of the rows each drawing of the charts was given."""
    drawn, draw = [], matmul_charts.charts

    def spy(rows, figures):
        drawn.append(set(rows["run_id"]))
        return draw(rows, figures)
    monkeypatch.setattr(matmul_charts, "charts", spy)
    return drawn


def page() -> AppTest:
    return render(f"pages/{NAME}.py")


def verdict_table(at: AppTest) -> str:
    """The markdown of the verdicts' table."""
    return next(m.value for m in at.markdown if m.value.startswith("| Claim |"))


def runs_caption(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith(("Showing", "No complete run", "No run")))


@pytest.mark.full
def test_the_page_reads_claim_verdicts_picker_results_then_folded_parts(results_dir):
    three_runs(results_dir)
    at = page()
    assert not at.exception
    assert at.title[0].value == "Matrix multiply and transfers"
    assert at.markdown[0].value.startswith("> **The write-up's claim.**")
    source = at.caption[0].value
    assert source.startswith("Source: *GPU很快*") and "2018" in source and ".txt" not in source
    assert "shared/seeds" not in page_text(at) + " ".join(c.value for c in at.caption)
    headings = [(h.value, h.proto.anchor) for h in at.main.subheader]
    assert headings[:2] == [("The claims, checked", ""), ("Results", "results")]
    assert [e.label for e in at.main.expander if e.label in ("Why", "How it is measured", "Tables and every measured point")
            ] == ["Why", "How it is measured", "Tables and every measured point"]
    verdicts = verdict_table(at)
    assert verdicts.count("**needs a GPU to tell**") == 2 and "GPU 6x" in verdicts  # the published figure, short
    assert [b.label for b in at.sidebar.button] == ["Run"] and not [b for b in at.main.button if b.label == "Run"]


@pytest.mark.full
def test_by_default_the_complete_runs_are_shown_one_each_and_the_picker_switches(results_dir, charted):
    made = three_runs(results_dir)
    at = page()
    assert not at.exception
    complete, smoke, cancelled = (made[k]["run_id"] for k in ("complete", "smoke", "cancelled"))
    assert charted[-1] == {complete, smoke}
    caption = runs_caption(at)
    assert caption.startswith("Showing the latest complete run of each preset on each machine, one series per run.")
    assert f"smoke of {runs.started_text(made['smoke']['started'])} (8 points)" in caption
    assert "quick of" in caption and "cancelled" not in caption

    picker = at.multiselect(key=f"crossover-runs-widget-{NAME}")
    assert set(picker.value) == {complete, smoke}
    machine = runs.machine_text(devices.label(made["cancelled"]["fingerprint"]))
    assert picker.format_func(cancelled) == (f"quick · {runs.started_text(made['cancelled']['started'])} · {machine} · "
                                             "cancelled · 6 points")
    at = picker.set_value([cancelled]).run()
    assert not at.exception and charted[-1] == {cancelled}
    assert runs_caption(at).startswith("Showing the run picked.") and "(cancelled, 6 points)" in runs_caption(at)
    assert at.session_state[f"crossover-runs-{NAME}"] == [cancelled]  # kept for the session, across pages

    at = at.run()  # another rerun keeps the choice
    assert charted[-1] == {cancelled}
    data._shared.clear()  # drawn for these runs before: shared by every session, so not built again unless cleared
    at = at.button(key=f"crossover-runs-reset-{NAME}").click().run()
    assert charted[-1] == {complete, smoke} and "latest complete run" in runs_caption(at)


@pytest.mark.full
def test_only_a_cancelled_run_shows_nothing_until_it_is_picked(results_dir, charted):
    made = three_runs(results_dir)
    for kind in ("complete", "smoke"):
        (results_dir / made[kind]["machine_id"] / f"{made[kind]['run_id']}.json").unlink()
    at = page()
    assert not at.exception and not charted and not at.get("vega_lite_chart")
    assert runs_caption(at).startswith("No complete run yet: pick a run above")
    at = at.multiselect(key=f"crossover-runs-widget-{NAME}").set_value([made["cancelled"]["run_id"]]).run()
    assert charted[-1] == {made["cancelled"]["run_id"]} and at.get("vega_lite_chart")


@pytest.mark.full
def test_tables_have_headings_for_people_and_say_what_they_wait_for(results_dir):
    three_runs(results_dir)
    at = page()
    assert any(c.value == "Waiting for a run on a GPU: none of the runs shown measured one." for c in at.caption)
    [points] = [d.value for d in at.dataframe if "Time per sample" in d.value.columns]
    assert {"Run", "Device", "Variant", "Size", "Time per sample", "A sample is", "IQR"} <= set(points.columns)
    assert not [c for c in points.columns if re.fullmatch(r"[a-z]+(_[a-z]+)+", c)]  # no raw column names
    cells = points.to_numpy().ravel().tolist()
    assert "None" not in cells and all(isinstance(c, str) for c in cells)
    assert not [c for c in cells if too_precise(c)]  # three significant figures, not 4-8 decimals
    shown = runs.runs_of(results.rows_frame(results.load_records(), NAME))
    assert set(points["Run"]) == {runs.short_label(r) for _, r in shown[shown["status"] == "complete"].iterrows()}
