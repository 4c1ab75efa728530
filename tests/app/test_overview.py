import pytest
from core import devices, experiments, settings
from core.report import overview
from core.store import files
from tests.helpers import render
from tests.unit.test_overview import fake_record, gpu_and_cpu_machines

NOTICE = "No GPU has measured anything yet"


def write(records: list[dict], folder) -> None:
    for record in records:
        files.write_atomic(folder / record["machine_id"] / f"{record['run_id']}.json", record)


def overview_page():
    return render("pages/overview.py")


def links(at) -> dict[str, str]:
    """page url path -> the link's label, for every page link the run drew."""
    return {link.proto.page: link.proto.label for link in at.get("page_link")}


def matrix_text(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("| Write-up | Claim | Published"))


@pytest.mark.full
def test_without_results_the_matrix_lists_every_claim_links_every_experiment_and_says_no_gpu_measured():
    at = overview_page()
    assert not at.exception
    assert any(NOTICE in w.value for w in at.warning)
    assert links(at) == {e.name: overview.short_title(e) for e in experiments.registry().values()}
    matrix = matrix_text(at)
    assert all(claim.text in matrix for e in experiments.registry().values() for claim in e.claims)
    assert any("No results yet" in i.value for i in at.info)
    assert at.get("vega_lite_chart")  # the published speedups need no results


@pytest.mark.full
def test_a_gpu_record_lifts_the_notice_and_fills_a_machine_column(results_dir):
    write(gpu_and_cpu_machines(), results_dir)
    at = overview_page()
    assert not at.exception
    assert not any(NOTICE in w.value for w in at.warning)
    header = matrix_text(at).splitlines()[0]
    assert "CPU of gpu-machine (8 threads) / Fake GPU" in header and "CPU of cpu-machine (8 threads) / no GPU" in header
    assert "**reproduced**: Measured 6.00x (95% CI 6.00–6.00x) numpy's speed" in matrix_text(at)
    assert "measured on Fake GPU" in str(at.get("vega_lite_chart")[0].proto)  # the series, in the chart's data
    machines = at.dataframe[0].value
    assert sorted(machines["Complete runs"]) == ["quick 1", "quick 1"]


@pytest.mark.full
def test_the_router_links_each_experiment_to_its_page(results_dir):
    at = render("streamlit_app.py")
    assert not at.exception
    found = {link.proto.page: link.proto.page_script_hash for link in at.get("page_link")}
    assert set(found) == set(experiments.registry()) and all(found.values())


@pytest.mark.full
def test_a_read_only_view_calls_the_machine_with_results_this_server(results_dir, monkeypatch):
    here = devices.fingerprint()["machine_id"]
    write([fake_record("matmul-here", here, {("cpu", "numpy"): 6e-3}, gpu=False)], results_dir)
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    at = overview_page()
    assert not at.exception
    assert f"CPU of {here} (8 threads) / no GPU (this server)" in matrix_text(at).splitlines()[0]
    assert f"CPU of {here} (8 threads) / no GPU (this server)" in set(at.dataframe[0].value["Machine"])


@pytest.mark.full
def test_the_offline_report_is_offered_and_built_only_when_asked(results_dir, monkeypatch):
    from core.report import single_file
    built = []
    monkeypatch.setattr(single_file, "build", lambda: built.append(1) or "<html></html>")
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")  # a visitor of the read-only view may take it too
    at = overview_page()
    assert not at.exception
    [button] = [b for b in at.download_button if b.label.startswith("Download the offline report")]
    assert not built  # the page's first paint never waits for the report
