"""The side-by-side page on two fake machines: it names their differences and draws each experiment both ran."""
import pytest
from core import experiments, settings
from core.store import files
from tests.helpers import page_text, render
from tests.unit.test_compare import shipped, twin


def two_machines(folder) -> None:
    for record in (shipped("matmul"), twin(shipped("matmul")), shipped("iris"), twin(shipped("iris"), preset="paper")):
        files.write_atomic(folder / record["machine_id"] / f"{record['run_id']}.json", record)


@pytest.mark.full
def test_two_machines_are_compared_with_their_differences_named(results_dir):
    two_machines(results_dir)
    at = render("pages/compare.py")
    assert not at.exception
    differences = at.dataframe[0].value.set_index("what")
    assert {"CPU", "GPUs", "torch", "code version"} <= set(differences.index)
    assert "AMD Ryzen 7 7840U (vendor_id AuthenticAMD, cpu family 25, model 116, stepping 1)" in differences.loc[
        "CPU"].tolist()
    assert "2.5.1" in differences.loc["torch"].tolist()
    assert [s.value for s in at.subheader][1:] == [experiments.get("iris").title, experiments.get("matmul").title]
    assert len(at.get("vega_lite_chart")) == 2
    assert any(w.value.startswith("iris: the runs compared used different presets") for w in at.warning)
    ratio_tables = [d.value for d in at.dataframe[1:]]
    assert all(t.iloc[:, -1].str.endswith("×").all() for t in ratio_tables)


@pytest.mark.full
def test_with_one_machine_the_page_says_how_to_bring_another_in(results_dir, monkeypatch):
    for name in ("matmul", "iris"):
        record = shipped(name)
        files.write_atomic(results_dir / record["machine_id"] / f"{record['run_id']}.json", record)
    at = render("pages/compare.py")
    assert not at.exception and "python -m core import" in at.info[0].value
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    at = render("pages/compare.py")
    assert not at.exception and "import" not in at.info[0].value and "a comparison needs two" in at.info[0].value
    assert "Side by side" in at.title[0].value and page_text(at)
