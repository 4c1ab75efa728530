"""The "Where the time goes" section: one bar per device and variant of the chosen configuration, split
into the profiler's parts, with the census beside it."""
import pytest
from core.present import charts
from tests.helpers import render, smoke_record


def _breakdown_chart(at):
    return next(c for c in at.get("vega_lite_chart") if charts.TIME_PARTS["host"][0] in c.proto.spec)


@pytest.mark.full
def test_the_page_splits_each_variant_of_the_chosen_configuration_and_counts_its_operations(results_dir, one_thread):
    smoke_record("iris")
    at = render("pages/iris.py")
    assert not at.exception
    assert "Where the time goes" in [h.value for h in at.subheader]
    picker = next(s for s in at.selectbox if s.label == "Configuration")
    assert len(picker.options) > 1
    chart = _breakdown_chart(at).proto
    assert all(label in chart.spec for label, _ in charts.TIME_PARTS.values())
    assert '"columns": 1' in chart.spec  # every part's legend entry in one column: none runs past the page's edge
    data = b"".join(d.data.data for d in chart.datasets)  # Arrow tables: their strings are stored as UTF-8
    assert b"operations" in data and b"copied per " in data  # the census beside the bars, per unit

    last = len(picker.options) - 1
    at = picker.select_index(last).run()
    assert not at.exception
    assert next(s for s in at.selectbox if s.label == "Configuration").index == last
    assert _breakdown_chart(at).proto.spec != chart.spec or chart.datasets != _breakdown_chart(at).proto.datasets


@pytest.mark.full
def test_numpy_rows_say_the_profiler_cannot_see_them_instead_of_a_bar(results_dir, one_thread):
    smoke_record("matmul", sizes=(16,))
    at = render("pages/matmul.py")
    assert not at.exception
    data = b"".join(d.data.data for d in _breakdown_chart(at).proto.datasets)
    assert b"torch cpu \xc2\xb7 cpu" in data and b"numpy \xc2\xb7 cpu" not in data  # series labels: "variant · device"
