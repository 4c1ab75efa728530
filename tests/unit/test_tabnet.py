import math

import pandas as pd
import pytest

from core import devices, published, settings
from core.store import results
from core.measure import runner, timing
from core.present.analysis import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, TOO_CLOSE
from core.measure.experiment import Point, RunState
from core.experiments.tabnet import analysis, charts as tabnet_charts, experiment as tabnet
from core.params import ConfigError
from tests.helpers import hand_rows, smoke_record

EXP = tabnet.EXPERIMENT
CUDA_DEVICES = [d for d in devices.available() if devices.kind(d) == "cuda"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def smoke_rows(tmp_path_factory):
    """One smoke run for the module (four fits): its own folder, as the per-test results folder is
    made afresh for every test."""
    folder = tmp_path_factory.mktemp("tabnet-results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(settings.RESULTS_ENV, str(folder))
        assert smoke_record("tabnet")["status"] == "complete"
    return results.rows_frame(results.load_records(folder), "tabnet")


def timed_fit(device: str, variant: str, batch_size: int, config: dict) -> tuple[tabnet.TimedFit, dict]:
    """One point's workload timed by the runner's timer: the fit (its epochs) and the row's metrics."""
    workload = EXP.workload(Point(device, variant, {"batch_size": batch_size}), config, RunState())
    measurement = RunState.time(workload, device)
    return workload.call, workload.metrics | workload.finish(measurement)


@pytest.mark.parametrize("overrides, field", [
    ({"batch_sizes": (4096,), "rows": 1024}, "batch_sizes"),              # larger than the data
    ({"batch_sizes": (200,)}, "batch_sizes"),                             # 128 does not divide 200
    ({"batch_sizes": (768,), "tuned_virtual_batch_size": 512}, "tuned_virtual_batch_size"),
    ({"batch_sizes": (1,)}, "batch_sizes"),
    ({"epochs": 1}, "epochs"),
    ({"rows": 10}, "rows"),
    ({"cuda_workers": -1}, "cuda_workers"),
])
def test_bad_settings_are_refused_before_any_work(overrides, field):
    with pytest.raises(ConfigError) as error:
        EXP.config("smoke", overrides)
    assert error.value.field == field


def test_a_batch_size_only_the_as_written_chunk_rejects_passes_for_tuned_alone():
    config = EXP.config("smoke", {"batch_sizes": (200,), "variants": ("tuned",), "tuned_virtual_batch_size": 100})
    assert [p.params for p in EXP.points(config, "cpu")] == [{"batch_size": 200}]


def test_points_cover_both_variants_and_every_batch_size_on_cpu_and_cuda_not_mps():
    config = EXP.config("quick")
    for device in ("cpu", "cuda:0"):
        planned = {(p.variant, p.params["batch_size"]) for p in EXP.points(config, device)}
        assert planned == {(v, b) for v in (tabnet.AS_WRITTEN, tabnet.TUNED) for b in config["batch_sizes"]}
    assert EXP.points(config, "mps") == []


def test_fit_options_keep_the_library_defaults_as_written_and_tune_for_the_device():
    config = EXP.config("quick", {"cuda_workers": 3})
    written = tabnet.fit_options(tabnet.AS_WRITTEN, 4096, "cpu", config)
    assert written == {"batch_size": 4096, "virtual_batch_size": 128, "num_workers": 0, "pin_memory": False,
                       "drop_last": True, "compute_importance": True}
    tuned_cpu = tabnet.fit_options(tabnet.TUNED, 512, "cpu", config)
    assert (tuned_cpu["virtual_batch_size"], tuned_cpu["num_workers"]) == (512, 0)
    assert tuned_cpu["compute_importance"] is False
    tuned_gpu = tabnet.fit_options(tabnet.TUNED, 4096, "cuda:0", config)
    assert (tuned_gpu["virtual_batch_size"], tuned_gpu["num_workers"], tuned_gpu["pin_memory"]) == (1024, 3, True)


def test_a_point_is_one_hooked_workload_whose_samples_are_epochs():
    config = EXP.config("smoke")
    workload = EXP.workload(Point("cpu", tabnet.TUNED, {"batch_size": 512}), config, RunState())
    assert (workload.unit, workload.per_call, workload.hooks) == ("epoch", 1, True)
    memory = {k: workload.metrics.pop(k) for k in ("estimated_bytes", "free_bytes")}
    assert workload.metrics == {"rows": config["rows"], "virtual_batch_size": 512, "num_workers": 0,
                                "pin_memory": False, "drop_last": True, "compute_importance": False}
    assert memory["estimated_bytes"] == sum(tabnet.memory_need(config["rows"], tabnet.fit_options(
        tabnet.TUNED, 512, "cpu", config), resident=False))


def test_the_estimates_data_row_is_the_generated_data_and_importance_counts_only_where_computed():
    x, y, _, _ = tabnet.numpy_data(8, 0)
    assert tabnet.DATA_ROW_BYTES == (x.nbytes + y.nbytes) // 8
    config = EXP.config("smoke")
    rows, data = 2**20, (2**20 + tabnet.datasets.VALIDATION_ROWS) * tabnet.DATA_ROW_BYTES
    written, tuned = (tabnet.fit_options(v, 1024, "cuda:0", config) for v in (tabnet.AS_WRITTEN, tabnet.TUNED))
    on_device = 1024 * tabnet.SAMPLE_BYTES + tabnet.WORKSPACE_BYTES
    assert tabnet.memory_need(rows, tuned, resident=False) == (on_device, data + rows * tabnet.FIT_ROW_BYTES)
    assert tabnet.memory_need(rows, written, resident=True) == (
        on_device, rows * (tabnet.FIT_ROW_BYTES + tabnet.IMPORTANCE_ROW_BYTES))


def test_a_fit_that_would_not_fit_is_skipped_before_its_data_is_generated(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", lambda device: 8e9)
    monkeypatch.setattr(tabnet, "numpy_data", lambda rows, seed: pytest.fail("the data was generated"))
    config = EXP.config("smoke", {"rows": 2_000_000, "batch_sizes": (1024,)})
    row = runner.measure_point(EXP, Point("cpu", tabnet.AS_WRITTEN, {"batch_size": 1024}), config)
    assert row["status"] == "skipped" and "memory_fraction" in row["error"]
    assert row["metrics"]["free_bytes"] == 8e9 and row["metrics"]["estimated_bytes"] > 2_000_000 * 3000
    run = RunState()
    with pytest.raises(pytest.fail.Exception, match="the data was generated"):  # tuned needs about 1.5 GB: let through
        EXP.workload(Point("cpu", tabnet.TUNED, {"batch_size": 1024}), config, run)
    assert not run.memo  # nothing made, so nothing counts as already there for the next point


def test_epoch_timer_splits_each_epoch_into_loader_steps_and_evaluation():
    watch = timing.Stopwatch("cpu")
    ticks = iter([0.0, 0.5, 1.0, 1.5, 3.5, 4.0, 6.0, 7.0, 7.5, 10.0])
    watch.read = lambda: next(ticks)
    timer = tabnet.EpochTimer(watch)
    watch.start()                                # 0.0: fit is called
    timer.on_train_begin()                       # 0.5: setup 0.5
    timer.on_epoch_begin(0)                      # 1.0
    for batch in range(2):
        timer.on_batch_begin(batch)              # 1.5, 4.0: loader 0.5 + 0.5
        timer.on_batch_end(batch, {})            # 3.5, 6.0: steps 2.0 + 2.0
    timer.on_epoch_end(0)                        # 7.0: evaluation 1.0
    timer.on_train_end()                         # 7.5
    watch.lap("importance")                      # 10.0: fit returned, importance 2.5
    assert timer.epochs == [{"loader_s": 1.0, "steps_s": 4.0, "eval_s": 1.0, "batches": 2}]
    assert watch.samples == [5.0]                # one epoch: loader wait + steps
    assert (watch.total("setup"), watch.total("importance")) == (0.5, 2.5)


@pytest.mark.full
def test_the_library_calls_our_callback_once_per_epoch_and_batch():
    config = EXP.config("smoke", {"rows": 1024, "epochs": 3})
    fit, metrics = timed_fit("cpu", tabnet.AS_WRITTEN, 256, config)
    assert [e["batches"] for e in fit.epochs] == [4, 4, 4] and metrics["batches_per_epoch"] == 4
    assert metrics["epochs_run"] == len(metrics["epoch_train_s"]) == len(metrics["epoch_eval_s"]) == 3
    assert all(e[k] >= 0 for e in fit.epochs for k in ("loader_s", "steps_s", "eval_s"))
    assert metrics["setup_s"] >= 0 and metrics["importance_s"] >= 0
    assert len(metrics["loss_curve"]) == 3 and metrics["final_train_loss"] == metrics["loss_curve"][-1]
    assert metrics["epoch_train_s"] == [e["loader_s"] + e["steps_s"] for e in fit.epochs]
    epochs = sum(metrics["epoch_train_s"]) + metrics["evaluation_s"]
    parts = metrics["setup_s"] + metrics["importance_s"] + epochs
    assert parts == pytest.approx(metrics["fit_s"], rel=0.05)


@pytest.mark.full
def test_smoke_run_records_both_variants_with_every_part_and_comparable_losses(smoke_rows):
    config = EXP.config("smoke")
    assert len(smoke_rows) == 4 and (smoke_rows["point_status"] == "ok").all()
    assert set(smoke_rows["variant"]) == {tabnet.AS_WRITTEN, tabnet.TUNED}
    assert set(smoke_rows["per_sample"]) == {"one epoch"}
    for _, row in smoke_rows.iterrows():
        assert row["epochs_run"] == len(row["samples_s"]) == len(row["loss_curve"]) == config["epochs"]
        assert row["epoch_train_s"] == row["samples_s"]
        assert row["batches_per_epoch"] == config["rows"] // row["batch_size"]
        assert row["compute_importance"] == (row["variant"] == tabnet.AS_WRITTEN)
        assert all(row[f"{part}_s"] >= 0 for part in tabnet.PARTS)
        assert math.isfinite(row["final_train_loss"]) and row["torch_threads"] == 1
        assert row["projected_10_epochs_s"] > row["train_10_epochs_s"]  # 1,000,000 rows vs 1,024
    losses = smoke_rows.pivot_table(index="batch_size", columns="variant", values="final_train_loss")
    assert (losses[tabnet.AS_WRITTEN] - losses[tabnet.TUNED]).abs().max() < 0.5


@pytest.mark.full
def test_same_seed_same_weights_same_losses():
    config = EXP.config("smoke", {"rows": 512, "epochs": 2})
    first, second = (timed_fit("cpu", tabnet.TUNED, 256, config)[1] for _ in range(2))
    assert first["loss_curve"] == second["loss_curve"]


@pytest.mark.skipif(not CUDA_DEVICES, reason="needs a CUDA device")
@pytest.mark.parametrize("device", CUDA_DEVICES or ["cuda:0"])
def test_cpu_and_gpu_fits_start_alike_and_train_comparably(device):
    config = EXP.config("smoke", {"rows": 1024, "epochs": 2})
    cpu = timed_fit("cpu", tabnet.TUNED, 256, config)[1]
    gpu = timed_fit(device, tabnet.TUNED, 256, config)[1]
    assert gpu["loss_curve"] == pytest.approx(cpu["loss_curve"], abs=0.05)


def _rows(times: dict, **run) -> pd.DataFrame:
    """{(variant, device): {batch_size: seconds per epoch}} as the rows of one run (overridden by `run`)."""
    return hand_rows([{"device": device, "variant": variant, "batch_size": b, "median_s": t, **run}
                      for (variant, device), by_size in times.items() for b, t in by_size.items()], ("batch_size",))


def _published_ratio(batch_size: int) -> float:
    cpu, gpu = (published.entry(f"tabnet-10-epochs.{d}.batch_size{batch_size}")["value"] for d in ("cpu", "gpu"))
    return cpu / gpu


def test_ratios_pair_cpu_and_gpu_of_one_machine_and_configuration_and_the_published_ratios():
    cpu_run = _rows({(tabnet.AS_WRITTEN, "cpu"): {128: 2.0, 4096: 4.0}}, run_id="r-cpu")
    gpu_run = _rows({(tabnet.AS_WRITTEN, "cuda:0"): {128: 2.0, 4096: 2.0}}, run_id="r-gpu")
    other_config = _rows({(tabnet.AS_WRITTEN, "cuda:0"): {128: 0.1}}, run_id="r-other", config_id="c2")
    found = analysis.cpu_over_gpu(pd.concat([cpu_run, gpu_run, other_config]))
    assert found.set_index("batch_size")["speedup"].to_dict() == {128: 1.0, 4096: 2.0}
    assert set(found[["cpu_s", "gpu_s"]].itertuples(index=False, name=None)) == {(2.0, 2.0), (4.0, 2.0)}
    theirs = analysis.published_cpu_over_gpu(published.load("tabnet")).set_index("batch_size")["speedup"]
    assert theirs.to_dict() == pytest.approx({b: _published_ratio(b) for b in (128, 512, 1024, 4096)})


def test_verdicts_come_from_the_records():
    figures = published.load("tabnet")
    empty = results.rows_frame([], "tabnet")
    assert [v.outcome for v in EXP.verdicts(empty, figures)] == [NO_DATA, NO_DATA]
    cpu_only = _rows({(tabnet.AS_WRITTEN, "cpu"): {128: 1.0, 4096: 1.0}})
    assert [v.outcome for v in EXP.verdicts(cpu_only, figures)] == [NEEDS_GPU, NEEDS_GPU]
    like_the_writeup = _rows({(tabnet.AS_WRITTEN, "cpu"): {128: 1.0, 4096: 1.6},
                              (tabnet.AS_WRITTEN, "cuda:0"): {128: 1.0, 4096: 1.0}})
    grows, modest = EXP.verdicts(like_the_writeup, figures)
    assert grows.outcome == REPRODUCED and modest.outcome == REPRODUCED and grows.basis == "measured"
    assert f"4096: {_published_ratio(4096):.2f}x" in grows.evidence  # the write-up's ratio, from published.json
    big_flat_gain = _rows({(tabnet.AS_WRITTEN, "cpu"): {128: 5.0, 4096: 5.0},
                           (tabnet.AS_WRITTEN, "cuda:0"): {128: 1.0, 4096: 1.0},
                           (tabnet.TUNED, "cpu"): {128: 1.0, 4096: 9.0},
                           (tabnet.TUNED, "cuda:0"): {128: 1.0, 4096: 1.0}})
    grows, modest = EXP.verdicts(big_flat_gain, figures)
    assert grows.outcome == NOT_REPRODUCED and modest.outcome == NOT_REPRODUCED and "5.00x" in modest.evidence


def _chart_data(chart) -> list[dict]:
    """Every row the chart's spec carries (Altair keeps the data in `datasets`)."""
    return [row for rows in chart.to_dict()["datasets"].values() for row in rows]


@pytest.mark.full
def test_tables_and_charts_build_from_a_smoke_run(smoke_rows):
    split = analysis.time_split(smoke_rows)
    assert set(split["part"]) == set(tabnet.PARTS) and len(split) == 4 * len(tabnet.PARTS)
    losses = analysis.final_losses(smoke_rows)
    assert {"as written · cpu", "tuned · cpu"} <= set(losses.columns)
    seconds, ratios, where, trained = tabnet_charts.charts(smoke_rows, published.load("tabnet"))
    ours_and_theirs = [*smoke_rows["projected_10_epochs_s"], *published.load("tabnet")["value"]]
    assert sorted(r["projected_10_epochs_s"] for r in _chart_data(seconds)) == sorted(ours_and_theirs)
    assert {r["source"] for r in _chart_data(ratios)} == {"published"}  # no GPU in a CPU run
    assert sorted(r["seconds"] for r in _chart_data(where)) == sorted(split["seconds"])
    assert {r["final_train_loss"] for r in _chart_data(trained)} == set(smoke_rows["final_train_loss"])


def test_a_gain_whose_interval_straddles_its_range_is_too_close_to_call():
    """The best gain 1.30x, at the range's low end, with samples 20% apart: too close; the same medians with tight
    samples decide."""
    def rows(relative: float) -> pd.DataFrame:
        spread = lambda t: [t * (1 + relative * x) for x in (-1, -0.5, 0, 0.5, 1)]
        times = {("cpu", 128): 1.3, ("cpu", 4096): 1.2, ("cuda:0", 128): 1.0, ("cuda:0", 4096): 1.0}
        return hand_rows([{"device": d, "variant": tabnet.AS_WRITTEN, "batch_size": b, "median_s": t,
                           "samples_s": spread(t)} for (d, b), t in times.items()], ("batch_size",))
    figures = published.load("tabnet")
    _, modest = EXP.verdicts(rows(0.2), figures)
    assert modest.outcome == TOO_CLOSE and "straddles the threshold 1.30x" in modest.evidence
    _, modest = EXP.verdicts(rows(0.0), figures)
    assert modest.outcome == REPRODUCED and "1.30x (95% CI 1.30–1.30x)" in modest.interval


def test_the_ratio_table_carries_each_pairs_interval_and_a_clear_gain_is_decided():
    """A 1.6x gain at every batch size with samples 5% apart: its interval lies inside the 1.3-2.0 range, so the
    verdict is decided, and each row of the ratio table shows its own interval."""
    spread = lambda t: [t * (1 + 0.05 * x) for x in (-1, -0.5, 0, 0.5, 1)]
    times = {("cpu", 128): 1.6, ("cpu", 4096): 3.2, ("cuda:0", 128): 1.0, ("cuda:0", 4096): 2.0}
    rows = hand_rows([{"device": d, "variant": tabnet.AS_WRITTEN, "batch_size": b, "median_s": t, "samples_s": spread(t)}
                      for (d, b), t in times.items()], ("batch_size",))
    _, modest = EXP.verdicts(rows, published.load("tabnet"))
    assert modest.outcome == REPRODUCED and modest.interval.startswith("1.60x (95% CI ")
    table = analysis.cpu_over_gpu(rows).set_index("batch_size")
    for size in (128, 4096):
        low, high = (float(x) for x in table.loc[size, "speedup_ci"].rstrip("x").split("–"))
        assert low < 1.6 < high and 1.3 < low and high < 2.0
    shown = next(t for title, t in EXP.tables(rows).items() if title.startswith("GPU speedup per batch size"))
    assert "Speedup, 95% CI" in shown.columns
