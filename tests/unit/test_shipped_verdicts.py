"""The shipped results say what they said before the layout changed and the older runs were dropped: the overview's
verdict matrix (each claim's outcome on each machine, and the predicted leaning where a GPU is needed) is
tests/data/verdict_matrix.json, taken from the full 116 MB results folder at be84dbf; since issue 45 the two cnn claims
the H200 measured a hair from their threshold (1.02x and 0.80x against 1) read "too close to call"; since issue 47 a
predicted leaning whose answer flips between the ends of the model's error range reads "too close to call" too
(thirteen of them: the model's error on such points spans each of those claims' thresholds); since the matrix
predicts on one machine (the one the table shows: here, else the first calibrated), the other two calibrated machines
carry no leaning. Since the doctor ran on the lent H200 (2026-11-29, at 84b93bc), that machine's row holds its smoke runs
of all six on its CPU and GPU: eleven claims there went from "no data yet" to an outcome, and the 1-D CNN's
small-data claim from "too close to call" to "not reproduced" (the GPU 1.05x faster, 95% CI 1.03-1.21x, over the
smoke and quick points together). Jacobian's written call is estimated at most 10x past the vals timed: the H200's smoke
run (val 2 and 6) has no estimate at val=100 or 1000 ("no data yet"), and the first AMD VM's predicted GPU (its
stand-in at val 10 and 30) no leaning at val=1000."""
import json

import pytest

from core import experiments, settings
from core.report import overview
from tests.helpers import shipped_records

pytestmark = pytest.mark.full  # parses every shipped record and predicts the write-ups' GPUs


def test_the_overview_verdict_matrix_of_the_shipped_results_is_unchanged(shipped_results):
    expected = json.loads((settings.APP_ROOT / "tests" / "data" / "verdict_matrix.json").read_text(encoding="utf-8"))
    matrix = overview.verdict_matrix(shipped_records())
    columns = list(expected[0])
    found = matrix[columns].fillna("").to_dict("records")
    assert found == expected


def test_the_write_ups_gpu_is_predicted_from_this_machine_where_it_is_calibrated(shipped_results):
    shown = overview.shown_records(shipped_records())
    mine = {mid: [r for r in shown if r["machine_id"] == mid and r["experiment"] == "matmul"]
            for mid in overview._labels(shown)}
    first, _ = overview._predicted_on_one(experiments.get("matmul"), mine, here=None)
    other = next(mid for mid in mine if mid != first and overview._predicted_on_one(
        experiments.get("matmul"), {mid: mine[mid]}, here=mid)[0] == mid)
    chosen, rows = overview._predicted_on_one(experiments.get("matmul"), mine, here=other)
    assert chosen == other and set(rows["machine_id"]) == {other}
