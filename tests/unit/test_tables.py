"""Tables for people (core.present.tables): headings, rounding, missing values, what an empty table waits for, and
every experiment's TABLES read that way."""
import math
import re

import pandas as pd
import pytest

from core import experiments, published
from core.store import results
from core.present import tables
from core.present.tables import MISSING, NEEDS_GPU, NO_MATCH, Table
from tests.helpers import hand_rows


@pytest.mark.parametrize("value, text", [
    (0.000012345, "1.23e-05"), (0.0123456, "0.0123"), (1.23456, "1.23"), (123.456, "123"), (1619.64, "1,620"),
    (2.0, "2"), (0.0, "0"), (1_048_576, "1,048,576"), (None, MISSING), (math.nan, MISSING), (pd.NA, MISSING),
    (True, "yes"), (False, "no"), ("as written", "as written")])
def test_a_cell_has_three_significant_figures_and_a_dash_for_no_value(value, text):
    assert tables.value_text(value) == text


def test_times_carry_their_unit():
    assert [tables.seconds_text(s) for s in (4.1e-9, 4.1e-6, 0.132, 12.34, 150.0, None)] == [
        "4.1 ns", "4.1 µs", "132 ms", "12.3 s", "2.5 min", MISSING]


def test_headings_are_words_with_units():
    assert tables.column_name("batch_size") == "Batch size"
    assert tables.column_name("first_epoch_s") == "First epoch (s)"
    assert tables.column_name("us_per_read") == "µs per read"  # a unit at the front is not capitalised
    assert tables.column_name("cpu_final_mse") == "CPU final MSE" and tables.column_name("gb_per_s") == "GB/s"
    assert tables.column_name("speedup", {"speedup": "Gain"}) == "Gain" and tables.column_name("As is") == "As is"


def test_readable_joins_the_device_names_the_run_and_hides_join_keys():
    frame = pd.DataFrame({"run_id": ["r1", "r2"], "machine_id": ["m", "m"], "machine": ["M", "M"],
                          "device": ["cpu", "cuda:0"], "device_name": ["Xeon", "T4"], "crossover": [None, 512.0],
                          "share": [0.0123, 0.5]})
    shown = tables.readable(frame, {"crossover": "GPU faster from"}, {"crossover": "never"}, ("share",),
                            run_names={"r1": "quick · 01 Jan 00:00 · M", "r2": "smoke · 02 Jan 00:00 · M"})
    assert list(shown.columns) == ["Run", "Device", "GPU faster from", "Share"]  # one machine: the caption names it
    assert shown.to_dict("list") == {"Run": ["quick · 01 Jan 00:00 · M", "smoke · 02 Jan 00:00 · M"],
                                     "Device": ["cpu (Xeon)", "cuda:0 (T4)"], "GPU faster from": ["never", "512"],
                                     "Share": ["1.23%", "50%"]}
    assert "Run" not in tables.readable(frame).columns  # no names given: the run column goes


def test_an_empty_table_says_what_it_waits_for():
    cpu = hand_rows([{"device": "cpu", "variant": "a", "size": 1}], ("size",))
    gpu = hand_rows([{"device": "cpu", "variant": "a", "size": 1}, {"device": "cuda:0", "variant": "a", "size": 1}],
                    ("size",))
    pairs = Table(lambda rows: rows.iloc[0:0], needs_gpu=True)
    assert tables.empty_text(pairs, cpu) == NEEDS_GPU and tables.empty_text(pairs, gpu) == NO_MATCH
    assert tables.empty_text(Table(lambda rows: rows.iloc[0:0]), cpu) == NO_MATCH
    assert tables.empty_text(lambda rows: rows.iloc[0:0], cpu) == NO_MATCH  # a plain function: nothing declared


def test_the_points_table_names_each_point_its_time_and_its_metrics():
    rows = hand_rows([{"device": "cpu", "variant": "numpy", "size": 16, "median_s": 0.00012345, "iqr_s": 1e-5,
                       "n": 5, "noisy": False, "per_sample": "one product", "error": None, "gflop_per_s": 66.123,
                       "curve": [1, 2]}], ("size",))
    shown = tables.points_table(rows)
    assert list(shown.columns) == ["Device", "Variant", "Size", "Time per sample", "A sample is", "IQR",
                                   "Samples taken", "Noisy", "Status", "Note", "GFLOP/s"]
    assert shown.iloc[0].tolist() == ["cpu", "numpy", "16", "123 µs", "one product", "10 µs", "5", "no", "ok",
                                      MISSING, "66.1"]


@pytest.mark.full
@pytest.mark.parametrize("name", sorted(experiments.registry()))
def test_every_experiments_tables_have_headings_for_people(name, shipped_results):
    rows = results.rows_frame(results.load_records(), name)
    for title, table in experiments.get(name).tables(rows).items():
        raw = [c for c in table.columns if re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", str(c))]
        assert not raw, (title, raw)
        cells = table.to_numpy().ravel().tolist()
        assert all(isinstance(c, str) for c in cells) and "None" not in cells and "nan" not in cells, title
        assert not [c for c in cells if too_precise(c)], title


def too_precise(cell: str) -> bool:
    """A decimal figure with more than three significant digits (whole numbers are shown in full)."""
    if not re.fullmatch(r"-?[\d,]*\.\d+%?", cell):
        return False
    return len(re.sub(r"^0*", "", re.sub(r"[^\d]", "", cell))) > 3


# -- the write-ups cited ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(experiments.registry()))
def test_every_page_cites_its_write_up_from_published_json_and_its_about_md_agrees(name):
    exp = experiments.get(name)
    source = published.source(exp.source)
    assert source["title"] != published.NOT_STATED
    cited = " ".join(exp.about()["Source"].split())
    for field in ("title", "author", "year", "url"):
        if source[field] != published.NOT_STATED:
            assert source[field] in cited, (name, field)
    assert "shared/seeds" not in " ".join(exp.about().values()) and exp.source not in cited


def test_a_write_up_not_described_reads_not_stated():
    assert published.citation("no-such-write-up.txt") == "not stated."
    assert set(published.source("no-such-write-up.txt").values()) == {published.NOT_STATED}
    assert published.citation("002_3344ff0316a6b6cf.txt", where=False) == (
        '*GPU很快* ("GPUs are fast"), author not stated, 2018. Address not stated.')
