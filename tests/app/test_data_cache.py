"""ui.data's caches: the records are loaded once and shared by every page (never copied, so never changed by
one), and what is computed from them is computed again when a record or a calibrated profile changes."""
import pytest
from core.model import profiles
from core.store import results
from tests.helpers import render, smoke_record
from ui import data

@pytest.mark.full  # renders pages over every shipped record
def test_the_pages_share_one_list_of_records(shipped_results):
    shared = data.records()
    assert shared is data.records()  # one list, not a copy per call: test_app checks no page changes it
    assert shared == results.load_records()


@pytest.mark.full
def test_a_new_record_is_loaded_without_a_restart(results_dir):
    before = data.records()
    smoke_record("matmul")
    after = data.records()
    assert after is not before and [r["experiment"] for r in after] == ["matmul"]


def test_a_new_or_rewritten_profile_changes_the_key_of_what_is_predicted(results_dir):
    empty = data._profiles_signature()
    target = profiles.path("some-machine", results_dir)
    target.parent.mkdir(parents=True)
    target.write_text("{}")
    written = data._profiles_signature()
    target.write_text("{} ")
    assert empty == () and len(written) == 1 and data._profiles_signature() != written


@pytest.mark.full
def test_the_predictions_page_shows_the_cached_accuracy(shipped_results):
    accuracy = data.accuracy()
    assert len(accuracy) and accuracy.equals(data.accuracy())
    at = render("pages/predictions.py")
    assert not at.exception
    points = sorted(int(m.value) for m in at.metric if m.label == "points")
    assert points == sorted(accuracy.groupby(["machine_id", "device"]).size())  # each device of a machine apart
