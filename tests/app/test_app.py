import pytest
from streamlit.testing.v1 import AppTest

from core import experiments, settings
from core.commands import jobs
from core.store import results
from core.report import overview
from tests.app.test_overview import matrix_text
from tests.helpers import render, shipped_records, smoke_record, wait_for
from ui import data

PAGES = sorted((settings.APP_ROOT / "pages").glob("*.py"))


def app(path="pages/matmul.py") -> AppTest:
    return render(path)


def smoke_matmul_record():
    smoke_record("matmul")


def test_router_opens_on_the_overview_with_the_sidebar():
    at = app("streamlit_app.py")
    assert not at.exception
    assert at.title[0].value == "Crossover"
    sidebar = " ".join(c.value for c in at.sidebar.caption)
    assert "cpu:" in sidebar and "Interactive" in sidebar


@pytest.mark.full
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_page_renders_with_the_shipped_results(page, shipped_results):
    at = app(f"pages/{page.name}")
    assert not at.exception
    assert data.records() == shipped_records()  # the page read the shared records without changing them
    if page.stem in experiments.registry() and not results.rows_frame(shipped_records(), page.stem).empty:
        assert at.get("vega_lite_chart"), f"{page.stem} shows no chart despite shipped results"
    if page.stem == "overview":  # the shipped machines are calibrated: the write-ups' GPUs are predicted for them
        assert overview.PREDICTED_COLUMN in matrix_text(at).splitlines()[0]


@pytest.mark.parametrize("name", list(experiments.registry()))
def test_every_experiment_page_without_results_invites_a_run(name, results_dir):
    at = app(f"pages/{name}.py")
    assert not at.exception and not at.get("vega_lite_chart")
    assert any("No measured results yet" in i.value for i in at.info)
    assert any(b.label == "Run" for b in at.button)
    assert {m.value.split("**")[1] for m in at.markdown if m.value.startswith(":")} == {"no data yet"}


@pytest.mark.full
def test_matmul_page_shows_charts_verdicts_table_and_rerun_panel(results_dir):
    smoke_matmul_record()
    at = app()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) >= 3
    text = " ".join(m.value for m in at.markdown)
    assert "needs a GPU to tell" in text and "The write-up's claim" in text
    assert at.get("download_button") and at.get("dataframe")
    assert any(b.label == "Run" for b in at.button)
    assert any("No GPU on this machine" in c.value for c in at.caption)


@pytest.mark.full
def test_read_only_renders_no_run_controls(results_dir, monkeypatch):
    smoke_matmul_record()
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    at = app()
    assert not at.exception and at.get("vega_lite_chart")
    assert not [b for b in at.button if b.label == "Run"]
    assert [m.label for m in at.multiselect] == ["Runs shown"]  # the run picker only: reading, not running
    assert any("read-only" in i.value for i in at.info)


@pytest.mark.full
def test_a_corrupt_record_is_named_and_the_page_still_renders(results_dir):
    smoke_matmul_record()
    broken = next(results_dir.glob("*/")) / "broken.json"
    broken.write_text("{not json")
    at = app()
    assert not at.exception and at.get("vega_lite_chart")
    assert any("broken.json" in w.value for w in at.warning)


def test_a_bad_parameter_is_named_and_blocks_the_run(results_dir):
    at = app()
    at.text_input(key="matmul-quick-sizes").set_value("16,0").run()
    assert any(e.value.startswith("sizes: 0 is out of range") for e in at.error)
    assert not [b for b in at.button if b.label == "Run"]


@pytest.mark.full
def test_run_button_starts_a_background_run_and_its_results_appear(results_dir):
    at = app()
    assert not at.get("vega_lite_chart")
    at.selectbox(key="matmul-preset").set_value("smoke").run()
    at.multiselect(key="matmul-smoke-variants").set_value(["numpy"]).run()
    at.button(key="matmul-run").click().run()
    assert not at.exception
    wait_for(lambda: jobs.current() is None and list(results_dir.glob("*/*.json")))
    at.run()
    assert any("complete, 3/3 points" in s.value for s in at.success)
    assert at.get("vega_lite_chart")
