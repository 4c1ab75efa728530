"""A predicted row takes from its CPU twin (the same run, variant and point, measured on the CPU) only what a
prediction can give: its time metrics scaled by predicted / measured, and what describes the point."""
import pandas as pd
import pytest

from core.measure.experiment import Experiment
from core.predict import predictions


class Declared(Experiment):
    metric_units = {"step_s": "s", "gflop_per_s": "GFLOP/s"}
    unpredicted_metrics = ("first_epoch_s",)


EXP = Declared()

TWIN = {"run_id": "r1", "variant": "tuned", "point": "batch_size=64", "device": "cpu", "point_status": "ok",
        "median_s": 2.0, "step_s": 0.5, "steps_per_epoch": 8, "role": "sweep", "cuda_graph": False,
        "final_loss": 0.31, "first_epoch_s": 9.0}


def _predicted(**changes) -> pd.DataFrame:
    row = {"run_id": "r1", "variant": "tuned", "point": "batch_size=64", "device": "H100 (predicted)",
           "point_status": "ok", "median_s": 0.5} | changes
    return pd.DataFrame([row])


def test_a_time_metric_is_scaled_and_what_describes_the_point_is_kept():
    row = predictions.with_twin_metrics(_predicted(), pd.DataFrame([TWIN]), EXP).iloc[0]
    assert row["step_s"] == pytest.approx(0.5 * 0.5 / 2.0)
    assert row["steps_per_epoch"] == 8 and row["role"] == "sweep"


def test_losses_start_up_and_flags_of_how_the_cpu_ran_are_left_out():
    row = predictions.with_twin_metrics(_predicted(), pd.DataFrame([TWIN]), EXP).iloc[0]
    assert not {"final_loss", "first_epoch_s", "cuda_graph"} & set(row.index)


def test_a_row_with_no_twin_keeps_its_own_columns_only():
    other = predictions.with_twin_metrics(_predicted(point="batch_size=512"), pd.DataFrame([TWIN]), EXP)
    assert list(other.columns) == list(_predicted().columns)
    failed = pd.DataFrame([TWIN | {"point_status": "failed"}])
    assert "step_s" not in predictions.with_twin_metrics(_predicted(), failed, EXP).columns


def test_the_latest_twin_of_a_point_measured_twice_in_a_run_is_taken():
    twins = pd.DataFrame([TWIN, TWIN | {"median_s": 1.0}])
    assert predictions.with_twin_metrics(_predicted(), twins, EXP).iloc[0]["step_s"] == pytest.approx(0.5 * 0.5 / 1.0)


def test_units_are_declared_not_read_from_names_a_rate_scales_inversely():
    twin = pd.DataFrame([TWIN | {"gflop_per_s": 100.0, "gb_per_s": 5.5}])
    row = predictions.with_twin_metrics(_predicted(), twin, EXP).iloc[0]
    assert row["gflop_per_s"] == pytest.approx(100.0 * 2.0 / 0.5)  # a quarter of the time: four times the rate
    assert "gb_per_s" not in row.index  # its unit is not declared: a measured figure, left out
