"""A predicted time's range from the model's measured error, and a GPU's speedup verdict once both times carry theirs."""
import json

import pandas as pd
import pytest

from core import devices, settings
from core.predict import uncertainty
from core.predict.uncertainty import Band


def checked(device: str, ratios: list[float], bound: str = "host-bound") -> pd.DataFrame:
    return pd.DataFrame({"device": device, "ratio": ratios, "bound": bound})


def test_a_band_spans_the_tenth_to_the_ninetieth_percentile_of_predicted_over_measured_per_kind_and_regime():
    cpu = pd.concat([checked("cpu", [0.5 + 0.1 * i for i in range(11)]),  # 0.5 .. 1.5: 10% at 0.6, 90% at 1.4
                     checked("cpu", [1.0] * 4, "device-bound")])  # too few for a band of its own
    gpu = checked("cuda:0", [0.25, 0.5, 0.5, 0.5, 1.0, 2.0], "device-bound")
    found = {(b.kind, b.regime): b for b in uncertainty.bands(cpu, gpu)}
    assert set(found) == {("cpu", "any"), ("cpu", "host-bound"), ("cuda", "any"), ("cuda", "device-bound")}
    host = found["cpu", "host-bound"]
    assert (host.low, host.high, host.points) == (pytest.approx(0.6), pytest.approx(1.4), 11)
    assert found["cpu", "any"].points == 15
    # the device-bound CPU points have no band: the CPU's over every regime stands in, and no kind at all: none
    assert uncertainty.band_for(list(found.values()), "cpu", "device-bound") is found["cpu", "any"]
    assert uncertainty.band_for([], "cpu", "host-bound") is None


def test_a_predicted_time_likely_measures_between_it_over_the_high_and_over_the_low_ratio():
    # predicted 0.5 to 2 times what was measured: a predicted 1 ms likely measures 0.5 ms to 2 ms
    assert Band("cpu", "any", 0.5, 2.0, 10).range(1e-3) == (pytest.approx(0.5e-3), pytest.approx(2e-3))


def test_a_range_wholly_on_one_side_of_its_prediction_says_which_way_the_model_has_erred():
    # the model predicted 0.25 to 0.5 times what was measured (too fast): a predicted 1 ms likely measures 2-4 ms
    too_fast = Band("cuda", "host-bound", 0.25, 0.5, 10)
    said = uncertainty.range_text(too_fast.range(1e-3), 1e-3)
    assert said.startswith("likely 2 ms to 4 ms") and "2x to 4x the model's figure" in said and "too fast" in said
    too_slow = Band("cpu", "any", 2.0, 4.0, 10)
    assert "too slow" in uncertainty.range_text(too_slow.range(1e-3), 1e-3)
    # a range around its prediction, or a text without the prediction, says the range alone
    assert uncertainty.range_text(Band("cpu", "any", 0.5, 2.0, 10).range(1e-3), 1e-3) == "likely 500 µs to 2 ms"
    assert uncertainty.range_text(too_fast.range(1e-3)) == "likely 2 ms to 4 ms"


@pytest.mark.parametrize("cpu_s, gpu_s, verdict, low, high", [
    # CPU 10 ms likely 8-12.5 ms; GPU 1 ms likely 0.5-2 ms: 4x to 25x, whatever the error
    (10e-3, 1e-3, uncertainty.HELPS, 4.0, 25.0),
    # GPU 20 ms likely 10-40 ms: 0.2x to 1.25x, straddles 1
    (10e-3, 20e-3, uncertainty.TOO_CLOSE, 0.2, 1.25),
    # GPU 100 ms likely 50-200 ms: 0.04x to 0.25x
    (10e-3, 100e-3, uncertainty.DOES_NOT, 0.04, 0.25),
])
def test_a_speedup_is_an_answer_only_where_its_range_stays_on_one_side_of_one(cpu_s, gpu_s, verdict, low, high):
    cpu_band, gpu_band = Band("cpu", "any", 0.8, 1.25, 10), Band("cuda", "any", 0.5, 2.0, 10)
    found = uncertainty.speedup((cpu_s, cpu_band), (gpu_s, gpu_band))
    assert found["verdict"] == verdict and found["speedup"] == pytest.approx(cpu_s / gpu_s)
    assert (found["low"], found["high"]) == (pytest.approx(low), pytest.approx(high))
    assert uncertainty.speedup_text(found).startswith(f"{verdict}: ")


def measured_both(device: str, ratios: list[float], variant: str = "as written", threads: str = "default",
                  bound: str = "host-bound") -> pd.DataFrame:
    """Checked points of one run on a machine that measured sizes 0, 1, ... of one variant on `device`."""
    return pd.DataFrame({"machine_id": "box", "run_id": "run-1", "experiment": "cnn", "variant": variant,
                         "point": [f"size={i}" for i in range(len(ratios))], "device": device, "ratio": ratios,
                         "bound": bound, "threads_setting": threads})


def test_a_speedups_band_is_the_spread_of_predicted_over_measured_speedup_of_configurations_measured_on_both():
    # the CPU predicted at 0.8 of its time at each size, the GPU at 0.2-0.6 of its own: the speedups were predicted
    # 0.8 / gpu times what was measured, 1.33x to 4x; the errors do not compound (0.8 is each one's CPU side)
    gpu_ratios = [0.2, 0.3, 0.4, 0.5, 0.6]
    cpu = pd.concat([measured_both("cpu", [0.8] * 5),
                     measured_both("cpu", [9.0] * 5, threads="1"),           # another thread setting: not paired
                     measured_both("cpu", [9.0] * 5, variant="tuned")])      # no GPU point of its variant
    gpu = pd.concat([measured_both("cuda:0", gpu_ratios), measured_both("cuda:0", [9.0] * 3, variant="compiled")])
    paired = uncertainty.paired_speedups(cpu, gpu)
    assert sorted(paired["ratio"]) == pytest.approx(sorted(0.8 / r for r in gpu_ratios))
    found = {(b.kind, b.regime): b for b in uncertainty.bands(cpu, gpu)}
    speedups = found[uncertainty.SPEEDUP, "host-bound"]
    assert speedups.points == 5 and (speedups.low, speedups.high) == (
        pytest.approx(pd.Series([0.8 / r for r in gpu_ratios]).quantile(0.1)),
        pytest.approx(pd.Series([0.8 / r for r in gpu_ratios]).quantile(0.9)))
    # fewer pairs than a band needs: none
    assert not any(b.kind == uncertainty.SPEEDUP for b in uncertainty.bands(cpu, gpu.head(4)))


def test_a_speedup_with_a_band_of_its_own_takes_that_range_not_the_two_times_compounded():
    cpu_band, gpu_band = Band("cpu", "any", 0.8, 1.25, 10), Band("cuda", "any", 0.5, 2.0, 10)
    # predicted speedups have come out 1.25x to 2.5x what was measured: a predicted 2x likely measures 0.8x-1.6x
    own = Band(uncertainty.SPEEDUP, "host-bound", 1.25, 2.5, 12)
    found = uncertainty.speedup((10e-3, cpu_band), (5e-3, gpu_band), own)
    assert (found["low"], found["high"]) == (pytest.approx(0.8), pytest.approx(1.6))
    assert found["verdict"] == uncertainty.TOO_CLOSE and found["basis"] == uncertainty.SPEEDUP
    said = uncertainty.speedup_text(found)
    assert "error on speedups of configurations measured on both devices, which came out above what was measured" in said
    # without it, the two times' ranges compound: 10 ms over 5 ms ranges 0.8x to 5x
    compounded = uncertainty.speedup((10e-3, cpu_band), (5e-3, gpu_band))
    assert (compounded["low"], compounded["high"]) == (pytest.approx(0.8), pytest.approx(5.0))
    assert uncertainty.speedup_text(compounded).endswith("error on such points, on each device)")
    # a speedup's band ranges it even where a time has none
    assert uncertainty.speedup((10e-3, None), (5e-3, None), own)["verdict"] == uncertainty.TOO_CLOSE


def test_a_speedup_without_a_band_is_not_an_answer():
    found = uncertainty.speedup((10e-3, None), (1e-3, Band("cuda", "any", 0.5, 2.0, 10)))
    assert found["verdict"] == uncertainty.NO_RANGE and found["low"] is None
    assert uncertainty.speedup_text(found).startswith(f"{uncertainty.NO_RANGE}: 10x predicted")


def test_the_bands_are_saved_and_read_back_this_machines_first_else_the_newest_shipped(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.RESULTS_ENV, str(tmp_path))
    assert uncertainty.load() == []
    for machine, taken, low in (("old-box", "2026-01-01T00:00:00", 0.1), ("new-box", "2026-02-01T00:00:00", 0.2)):
        folder = tmp_path / machine / "predictions"
        folder.mkdir(parents=True)
        (folder / uncertainty.FILE_NAME).write_text(json.dumps({
            "schema": uncertainty.SCHEMA_VERSION, "taken": taken,
            "bands": [{"kind": "cpu", "regime": "any", "low": low, "high": 1.0, "points": 9}]}))
    assert [b.low for b in uncertainty.load()] == [0.2]  # the newest shipped
    (tmp_path / "new-box" / "predictions" / uncertainty.FILE_NAME).write_text("{not json")
    assert [b.low for b in uncertainty.load()] == [0.1]  # a broken file is passed over
    own = [Band("cuda", "host-bound", 0.3, 0.7, 28)]
    assert uncertainty.save(own) == tmp_path / devices.fingerprint()["machine_id"] / "predictions" / "error_bands.json"
    assert uncertainty.load() == own


def test_saving_the_bands_is_refused_when_read_only(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.RESULTS_ENV, str(tmp_path))
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    with pytest.raises(settings.ReadOnlyError):
        uncertainty.save([Band("cpu", "any", 0.5, 1.5, 10)])
