import math

import pandas as pd
import pytest
import torch

from core import results, runner
from core.charts import tabnet as tabnet_charts
from core.experiments import tabnet
from core.params import ConfigError
from core.results import RecordWriter
from core.verdicts import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED

EXP = tabnet.EXPERIMENT


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def smoke_rows(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tabnet-results")
    config = EXP.config("smoke")
    assert runner.run(EXP, config, ["cpu"], RecordWriter("tabnet", "smoke", config, ["cpu"], results_dir=folder)) \
        == "complete"
    return results.rows_frame(results.load_records(folder), "tabnet")


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


def test_epoch_timer_splits_each_epoch_into_loader_steps_and_evaluation():
    timer = tabnet.EpochTimer("cpu")
    ticks = iter([0.0, 1.0, 1.5, 3.5, 4.0, 6.0, 7.0, 10.0])
    timer.read = lambda: next(ticks)
    timer.on_train_begin()                       # 0.0
    timer.on_epoch_begin(0)                      # 1.0
    for batch in range(2):
        timer.on_batch_begin(batch)              # 1.5, 4.0: loader 0.5 + 0.5
        timer.on_batch_end(batch, {})            # 3.5, 6.0: steps 2.0 + 2.0
    timer.on_epoch_end(0)                        # 7.0: evaluation 1.0
    timer.on_train_end()                         # 10.0
    assert timer.epochs == [{"loader_s": 1.0, "steps_s": 4.0, "eval_s": 1.0, "batches": 2}]
    assert (timer.train_begin, timer.train_end) == (0.0, 10.0)


def test_the_library_calls_our_callback_once_per_epoch_and_batch():
    config = EXP.config("smoke", {"rows": 1024, "epochs": 3})
    fit = tabnet.fit_and_time("cpu", config, tabnet.fit_options(tabnet.AS_WRITTEN, 256, "cpu", config))
    assert len(fit["epochs"]) == 3 and [e["batches"] for e in fit["epochs"]] == [4, 4, 4]
    assert all(e[k] >= 0 for e in fit["epochs"] for k in ("loader_s", "steps_s", "eval_s"))
    assert fit["setup_s"] >= 0 and fit["importance_s"] >= 0 and len(fit["loss"]) == len(fit["eval_mse"]) == 3
    epochs = sum(e["loader_s"] + e["steps_s"] + e["eval_s"] for e in fit["epochs"])
    parts = fit["setup_s"] + fit["importance_s"] + epochs
    assert parts == pytest.approx(fit["fit_s"], rel=0.05)


def test_smoke_run_records_both_variants_with_every_part_and_comparable_losses(smoke_rows):
    config = EXP.config("smoke")
    assert len(smoke_rows) == 4 and (smoke_rows["point_status"] == "ok").all()
    assert set(smoke_rows["variant"]) == {tabnet.AS_WRITTEN, tabnet.TUNED}
    for _, row in smoke_rows.iterrows():
        assert row["epochs_run"] == len(row["samples_s"]) == len(row["loss_curve"]) == config["epochs"]
        assert row["batches_per_epoch"] == config["rows"] // row["batch_size"]
        assert row["compute_importance"] == (row["variant"] == tabnet.AS_WRITTEN)
        assert all(row[f"{part}_s"] >= 0 for part in tabnet.PARTS)
        assert math.isfinite(row["final_train_loss"]) and row["torch_threads"] == 1
        assert row["projected_10_epochs_s"] > row["train_10_epochs_s"]  # 1,000,000 rows vs 1,024
    losses = smoke_rows.pivot_table(index="batch_size", columns="variant", values="final_train_loss")
    assert (losses[tabnet.AS_WRITTEN] - losses[tabnet.TUNED]).abs().max() < 0.5


def test_same_seed_same_weights_same_losses():
    config = EXP.config("smoke", {"rows": 512, "epochs": 2})
    options = tabnet.fit_options(tabnet.TUNED, 256, "cpu", config)
    assert tabnet.fit_and_time("cpu", config, options)["loss"] == tabnet.fit_and_time("cpu", config, options)["loss"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cpu_and_gpu_fits_start_alike_and_train_comparably():
    config = EXP.config("smoke", {"rows": 1024, "epochs": 2})
    cpu = tabnet.fit_and_time("cpu", config, tabnet.fit_options(tabnet.TUNED, 256, "cpu", config))
    gpu = tabnet.fit_and_time("cuda:0", config, tabnet.fit_options(tabnet.TUNED, 256, "cuda:0", config))
    assert gpu["loss"] == pytest.approx(cpu["loss"], abs=0.05)


def _rows(times: dict) -> pd.DataFrame:
    """{(variant, device): {batch_size: seconds per epoch}} as one run's rows."""
    return pd.DataFrame([{"run_id": "r1", "machine": "m", "machine_id": "m-1", "device": device,
                          "device_name": device, "variant": variant, "batch_size": b, "median_s": t,
                          "point_status": "ok"}
                         for (variant, device), by_size in times.items() for b, t in by_size.items()])


def test_speedups_pair_cpu_and_gpu_of_one_run_and_the_published_ratios():
    rows = _rows({(tabnet.AS_WRITTEN, "cpu"): {128: 2.0, 4096: 4.0},
                  (tabnet.AS_WRITTEN, "cuda:0"): {128: 2.0, 4096: 2.0}})
    found = tabnet.speedups(rows).set_index("batch_size")["speedup"]
    assert found.to_dict() == {128: 1.0, 4096: 2.0}
    theirs = tabnet.published_speedups(results.load_published("tabnet")).set_index("batch_size")["speedup"]
    assert theirs[128] == pytest.approx(1893 / 1947) and theirs[4096] == pytest.approx(405 / 252)


def test_verdicts_come_from_the_records():
    published = results.load_published("tabnet")
    empty = results.rows_frame([], "tabnet")
    assert [v.outcome for v in tabnet.verdicts(empty, published)] == [NO_DATA, NO_DATA]
    cpu_only = _rows({(tabnet.AS_WRITTEN, "cpu"): {128: 1.0, 4096: 1.0}})
    assert [v.outcome for v in tabnet.verdicts(cpu_only, published)] == [NEEDS_GPU, NEEDS_GPU]
    like_the_writeup = _rows({(tabnet.AS_WRITTEN, "cpu"): {128: 1.0, 4096: 1.6},
                              (tabnet.AS_WRITTEN, "cuda:0"): {128: 1.0, 4096: 1.0}})
    assert [v.outcome for v in tabnet.verdicts(like_the_writeup, published)] == [REPRODUCED, REPRODUCED]
    big_flat_gain = _rows({(tabnet.AS_WRITTEN, "cpu"): {128: 5.0, 4096: 5.0},
                           (tabnet.AS_WRITTEN, "cuda:0"): {128: 1.0, 4096: 1.0},
                           (tabnet.TUNED, "cpu"): {128: 1.0, 4096: 9.0},
                           (tabnet.TUNED, "cuda:0"): {128: 1.0, 4096: 1.0}})
    grows, modest = tabnet.verdicts(big_flat_gain, published)
    assert grows.outcome == NOT_REPRODUCED and modest.outcome == NOT_REPRODUCED and "5.00x" in modest.evidence


def test_tables_and_charts_build_from_a_smoke_run(smoke_rows):
    split = tabnet.time_split(smoke_rows)
    assert set(split["part"]) == set(tabnet.PARTS) and len(split) == 4 * len(tabnet.PARTS)
    losses = tabnet.final_losses(smoke_rows)
    assert {"as written · cpu", "tuned · cpu"} <= set(losses.columns)
    built = tabnet_charts.charts(smoke_rows, results.load_published("tabnet"))
    assert len(built) == 4
    for chart in built:
        assert chart.to_dict()["$schema"]
