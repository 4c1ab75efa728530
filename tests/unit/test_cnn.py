import dataclasses

import pandas as pd
import pytest
import torch

from core import devices, published, settings
from core.commands import cli
from core.measure import graphs, runner
from core.store import results
from core.datasets import VALIDATION_ROWS
from core.present.analysis import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED
from core.experiments.cnn import analysis, charts, experiment, model as cnn_model
from core.experiments.cnn.experiment import AS_WRITTEN, EXPERIMENT, TUNED, plan
from core.experiments.cnn.model import (MODELS, TRAINERS, BaseModel, GruRegressor, MnistNet, Tuned, build,
                                        sequences, synthetic_images, validation_loss, weights_checksum)
from core.measure.experiment import Point, RunState
from core.params import ConfigError
from tests import helpers
from tests.helpers import hand_rows, shipped_records

CUDA_DEVICES = [d for d in devices.available() if devices.kind(d) == "cuda"]
needs_cuda = pytest.mark.skipif(not CUDA_DEVICES, reason="CUDA graph capture needs a CUDA GPU")
PARAMS = ("model", "batch_size", "rows")

pytestmark = pytest.mark.usefixtures("one_thread")


def verdicts(rows: pd.DataFrame) -> list:
    return EXPERIMENT.verdicts(rows, published.load("cnn"))


# -- models and data ------------------------------------------------------------------------------
@pytest.mark.parametrize("model, shape, out", [(BaseModel, (5, 84), (5, 1)), (MnistNet, (5, 1, 28, 28), (5, 10)),
                                               (GruRegressor, (5, 32, 16), (5, 1))])
def test_models_map_a_batch_to_the_expected_shape(model, shape, out):
    assert model()(torch.randn(shape)).shape == out


def test_mnist_network_returns_log_probabilities():
    probabilities = MnistNet().eval()(torch.randn(3, 1, 28, 28)).exp().sum(dim=1)
    assert torch.allclose(probabilities, torch.ones(3), atol=1e-5)


def test_contrast_data_has_the_stated_shapes_and_is_seeded():
    x, y, vx, vy = synthetic_images(64, 0)
    assert x.shape == (64, 1, 28, 28) and y.shape == (64,) and y.dtype == torch.long and vx.shape[1:] == x.shape[1:]
    x, y, vx, vy = sequences(32, 0)
    assert x.shape == (32, 32, 16) and y.shape == (32, 1) and len(vx) == len(vy)
    assert torch.equal(sequences(32, 0)[0], sequences.__wrapped__(32, 0)[0])
    assert not torch.equal(sequences.__wrapped__(32, 1)[0], x)


def test_seeded_build_gives_identical_weights_per_seed():
    assert weights_checksum(build("cnn1d", 3)) == weights_checksum(build("cnn1d", 3))
    assert weights_checksum(build("cnn1d", 3)) != weights_checksum(build("cnn1d", 4))


def _learnable(model: str):
    if model == "cnn1d":
        x = torch.randn(256, 84, generator=torch.Generator().manual_seed(1))
        return x, x[:, :1] - x[:, 1:2]
    return MODELS[model].data(128, 0)[:2]


@pytest.mark.full
@pytest.mark.parametrize("variant", [AS_WRITTEN, TUNED])
@pytest.mark.parametrize("model", list(MODELS))
def test_both_variants_reduce_the_loss_from_the_same_starting_weights(model, variant):
    x, y = _learnable(model)
    net = build(model, 0)
    assert weights_checksum(net) == weights_checksum(build(model, 0))
    loss = MODELS[model].loss
    before = validation_loss(net, loss, x, y, "cpu")
    trainer = TRAINERS[variant](net, loss, x, y, 32, "cpu", 0, 3e-3)
    for _ in range(4):
        trainer.epoch()
    assert validation_loss(net, loss, x, y, "cpu") < before
    assert isinstance(trainer.train_loss(), float) and trainer.train_loss() < before * 2
    assert not trainer.graphed and trainer.graph_error is None


def test_tuned_on_the_cpu_uses_the_fused_optimizer_and_no_graph():
    x, y = _learnable("cnn1d")
    trainer = Tuned(build("cnn1d", 0), MODELS["cnn1d"].loss, x, y, 64, "cpu", 0, 1e-3, cuda_graph=True)
    assert trainer.fused and not trainer.graphed and trainer.graph_error is None and trainer.steps == 4


def _failing_capture(step, device, watched, enabled=True):
    """What core.measure.graphs does when capture fails after its warm-up steps: the eager step, and why."""
    for _ in range(graphs.WARMUP_STEPS + 1):
        step()
    return step, "capture on cuda:0 failed: RuntimeError: simulated"


def test_a_failed_capture_falls_back_to_the_eager_step_from_the_start_weights(monkeypatch):
    monkeypatch.setattr(cnn_model.graphs, "replay_or_eager", _failing_capture)
    x, y = _learnable("cnn1d")
    net = build("cnn1d", 0)
    trainer = Tuned(net, MODELS["cnn1d"].loss, x, y, 32, "cpu", 0, 3e-3, cuda_graph=True)
    assert not trainer.graphed and trainer.graph_error.endswith("simulated")
    assert weights_checksum(net) == weights_checksum(build("cnn1d", 0))  # the warm-up steps were undone
    assert all(not torch.is_tensor(v) or not v.any() for s in trainer.optimizer.state.values() for v in s.values())
    before = validation_loss(net, MODELS["cnn1d"].loss, x, y, "cpu")
    for _ in range(4):
        trainer.epoch()
    assert validation_loss(net, MODELS["cnn1d"].loss, x, y, "cpu") < before


def _replaying_capture(step, device, watched, enabled=True):
    """A stand-in for a captured graph on the CPU: warm-up steps and a checking replay, then a replay
    that re-runs the captured step, which reads its batch from the static index tensor."""
    for _ in range(graphs.WARMUP_STEPS + 2):
        step()
    return (lambda: step()), None


def test_the_replayed_step_trains_each_batch_from_the_start_weights_as_the_eager_one(monkeypatch):
    x, y = _learnable("cnn1d")
    eager = Tuned(build("cnn1d", 0), MODELS["cnn1d"].loss, x, y, 32, "cpu", 0, 3e-3)
    monkeypatch.setattr(cnn_model.graphs, "replay_or_eager", _replaying_capture)
    replayed = Tuned(build("cnn1d", 0), MODELS["cnn1d"].loss, x, y, 32, "cpu", 0, 3e-3)
    assert replayed.graphed and not eager.graphed
    for trainer in (eager, replayed):
        for _ in range(2):
            trainer.epoch()
    assert replayed.train_loss() == pytest.approx(eager.train_loss(), rel=1e-5)
    assert weights_checksum(replayed.model) == pytest.approx(weights_checksum(eager.model), rel=1e-5)


def test_the_workload_records_the_capture_error(monkeypatch):
    monkeypatch.setattr(cnn_model.graphs, "replay_or_eager", _failing_capture)
    config = EXPERIMENT.config("smoke", {"models": ("cnn1d",)})
    point = Point("cpu", TUNED, {"model": "cnn1d", "batch_size": 64, "rows": 128})
    work = EXPERIMENT.workload(point, config, RunState())
    assert (work.unit, work.per_call, work.warmup, work.repeats) == ("epoch", 1, 1, config["epochs"])
    assert work.metrics["cuda_graph"] is False and work.metrics["cuda_graph_error"].endswith("simulated")
    assert work.metrics["init_weights_checksum"] == weights_checksum(build("cnn1d", config["seed"]))


@needs_cuda
@pytest.mark.parametrize("device", CUDA_DEVICES or ["cuda:0"])
def test_tuned_on_cuda_replays_a_graph_from_the_start_weights_and_learns(device):
    x, y = _learnable("cnn1d")
    net = build("cnn1d", 0).to(device)
    trainer = Tuned(net, MODELS["cnn1d"].loss, x, y, 32, device, 0, 3e-3, cuda_graph=True)
    assert trainer.graphed and trainer.graph_error is None
    assert weights_checksum(net) == pytest.approx(weights_checksum(build("cnn1d", 0)), rel=1e-6)
    before = validation_loss(net, MODELS["cnn1d"].loss, x, y, device)
    for _ in range(4):
        trainer.epoch()
    assert validation_loss(net, MODELS["cnn1d"].loss, x, y, device) < before
    assert 0 < trainer.train_loss() < before * 2


# -- configuration ----------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["smoke", "quick", "paper"])
def test_presets_are_valid(preset):
    assert plan(EXPERIMENT.config(preset))


@pytest.mark.parametrize("overrides, field", [
    ({"rows": 512, "batch_sizes": (1024,)}, "batch_sizes"),          # batch larger than the data
    ({"rows": 1000, "batch_sizes": (512,)}, "rows"),                  # rows not a multiple of the batch
    ({"size_rows": (1000,), "size_batches": (64,)}, "size_rows"),
    ({"mnist_rows": 100, "contrast_batch_sizes": (64,)}, "mnist_rows"),
    ({"rows": 0}, "rows"), ({"batch_sizes": (-16,)}, "batch_sizes"), ({"epochs": 0}, "epochs"),
    ({"models": ("resnet",)}, "models"), ({"gru_rows": -1}, "gru_rows"),
])
def test_bad_sizes_are_config_errors_naming_the_field(overrides, field):
    with pytest.raises(ConfigError) as raised:
        EXPERIMENT.config("smoke", overrides)
    assert raised.value.field == field


def test_sizes_of_models_not_run_are_not_checked():
    config = EXPERIMENT.config("smoke", {"models": ("gru",), "rows": 1000})
    assert {p["model"] for p in plan(config)} == {"gru"}


def test_plan_covers_both_sweeps_without_duplicates():
    config = EXPERIMENT.config("quick", {"models": ("cnn1d",)})
    planned = plan(config)
    keys = [(p["batch_size"], p["rows"]) for p in planned]
    assert len(keys) == len(set(keys))
    assert {(b, config["rows"]) for b in config["batch_sizes"]} <= set(keys)
    assert {(b, n) for b in config["size_batches"] for n in config["size_rows"]} <= set(keys)
    assert len(EXPERIMENT.points(config, "cpu")) == 2 * len(planned)
    assert EXPERIMENT.estimate_seconds(config, "cpu") > 0


@pytest.mark.parametrize("args", [["--device", "cuda:9"], ["--set", "batch_sizes=0"], ["--set", "rows=1000"]])
def test_cli_refuses_bad_requests_before_any_work(args, results_dir, capsys):
    assert cli.main(["run", "cnn", "--preset", "smoke", *args]) == 2
    assert "error:" in capsys.readouterr().err
    assert not list(results_dir.glob("*/*.json"))


# -- the memory guard ------------------------------------------------------------------------------
@pytest.mark.parametrize("model", list(MODELS))
def test_the_estimates_row_bytes_are_those_of_the_generated_data(model):
    x, y, _, _ = MODELS[model].data(8, 0)
    assert MODELS[model].row_bytes == (x.nbytes + y.nbytes) // 8


def test_the_estimate_counts_data_once_order_and_the_tuned_copy_on_a_gpu_where_they_live():
    rows, batch, weights = 2**20, 512, 1000
    spec = MODELS["cnn1d"]
    data = (rows + VALIDATION_ROWS) * spec.row_bytes
    training = 16 * weights + 512 * (spec.sample_bytes + spec.row_bytes) + experiment.WORKSPACE_BYTES
    need = lambda variant, device, resident=False: experiment.memory_need(variant, "cnn1d", rows, batch, device,
                                                                          weights, resident)
    assert need(AS_WRITTEN, "cpu") == (training, data + 48 * rows)
    assert need(TUNED, "cpu") == (training + 8 * rows, data)
    assert need(TUNED, "cuda:0") == (training + 8 * rows + rows * spec.row_bytes, data)
    assert need(TUNED, "cpu", resident=True) == (training + 8 * rows, 0)
    mnist = experiment.memory_need(TUNED, "mnist", 64, 32, "cpu", weights, False)[1]
    assert mnist == 3 * (64 + VALIDATION_ROWS) * MODELS["mnist"].row_bytes  # drawing holds three copies


def test_a_point_reusing_the_last_points_data_does_not_count_it_again():
    config = EXPERIMENT.config("smoke", {"models": ("cnn1d",)})
    run = RunState()
    point = lambda variant, rows: Point("cpu", variant, {"model": "cnn1d", "batch_size": 64, "rows": rows})
    first, again, other = (EXPERIMENT.workload(point(variant, rows), config, run).metrics["estimated_bytes"]
                           for variant, rows in ((AS_WRITTEN, 128), (TUNED, 128), (TUNED, 256)))
    row_bytes = MODELS["cnn1d"].row_bytes
    assert first - again == (128 + VALIDATION_ROWS) * row_bytes + (48 - 8) * 128  # the data, the order's list
    assert other - again == (256 + VALIDATION_ROWS) * row_bytes + 8 * 128  # new data, a longer order


def test_a_point_that_would_not_fit_is_skipped_before_its_data_is_generated(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", lambda device: 8e9)
    monkeypatch.setitem(MODELS, "cnn1d", dataclasses.replace(MODELS["cnn1d"], data=lambda rows, seed: pytest.fail(
        "the data was generated")))
    config = EXPERIMENT.config("smoke", {"models": ("cnn1d",)})
    point = Point("cpu", AS_WRITTEN, {"model": "cnn1d", "batch_size": 4096, "rows": 2**24})
    row = runner.measure_point(EXPERIMENT, point, config)
    assert row["status"] == "skipped" and "memory_fraction" in row["error"]
    assert row["metrics"]["free_bytes"] == 8e9 and row["metrics"]["estimated_bytes"] > 2**24 * MODELS["cnn1d"].row_bytes
    with pytest.raises(pytest.fail.Exception, match="the data was generated"):  # all of the free memory: let through
        EXPERIMENT.workload(point, EXPERIMENT.config("smoke", {"models": ("cnn1d",), "memory_fraction": 1.0}),
                            RunState())


# -- a real smoke run -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smoke_record(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(settings.RESULTS_ENV, str(tmp_path_factory.mktemp("results")))
        record = helpers.smoke_record("cnn")
    assert record["status"] == "complete"
    return record


@pytest.fixture(scope="module")
def smoke_rows(smoke_record):
    return results.rows_frame([smoke_record], "cnn")


@pytest.mark.full
def test_the_warm_up_epoch_is_timed_apart_as_the_first_epoch(smoke_record):
    for row in smoke_record["rows"]:
        assert len(row["warmup_samples"]) == 1 and not row["cold"]
        assert row["metrics"]["first_epoch_s"] == row["warmup_samples"][0]


@pytest.mark.full
def test_smoke_run_measures_every_point_with_its_losses(smoke_rows):
    epochs = EXPERIMENT.config("smoke")["epochs"]
    assert (smoke_rows["point_status"] == "ok").all()
    assert set(smoke_rows["model"]) == set(MODELS) and set(smoke_rows["variant"]) == {AS_WRITTEN, TUNED}
    assert set(smoke_rows["per_sample"]) == {"one epoch"} and (smoke_rows["n"] == epochs).all()
    assert (smoke_rows["seconds_10_epochs"] == 10 * smoke_rows["median_s"]).all()
    assert (smoke_rows["step_s"] * smoke_rows["steps_per_epoch"] - smoke_rows["median_s"]).abs().max() < 1e-12
    assert smoke_rows[["train_loss_final", "val_loss_initial", "val_loss_final", "first_epoch_s"]].notna().all().all()
    assert not smoke_rows["cuda_graph"].any() and smoke_rows["cuda_graph_error"].isna().all()
    same_start = smoke_rows.groupby(["model", "batch_size", "rows"])["init_weights_checksum"].nunique()
    assert (same_start == 1).all()


@pytest.mark.full
def test_cpu_only_analysis_has_gains_but_no_gpu_figures(smoke_rows):
    gains = analysis.variant_gains(smoke_rows)
    assert len(gains) == len(smoke_rows) // 2 and (gains["tuned_speedup"] > 0).all()
    assert analysis.speedup_table(smoke_rows).empty and analysis.data_size_crossovers(smoke_rows).empty
    projected = analysis.per_batch(smoke_rows)
    cnn = projected[projected["model"] == "cnn1d"]
    assert (cnn["projected_s_10_epochs"] > 0).all() and projected.loc[projected["model"] == "gru", "projected_s_10_epochs"].isna().all()
    assert {v.outcome for v in verdicts(smoke_rows)} == {NEEDS_GPU}


def _chart_data(chart, field: str) -> list[dict]:
    """The records of a chart's data that have `field` (a layered chart's rule has none)."""
    return [v for values in chart.to_dict()["datasets"].values() for v in values if field in v]


def _chart_values(chart, field: str) -> set:
    return {v[field] for v in _chart_data(chart, field)}


@pytest.mark.full
def test_charts_from_a_cpu_run_show_its_series_beside_the_published_ones(smoke_rows):
    ten_epochs, by_batch, data_size, step_time, by_model = charts.charts(smoke_rows, published.load("cnn"))
    drawn = {(v["source"], v["variant"], v["device"]) for v in _chart_data(ten_epochs, "source")}
    assert {("published", AS_WRITTEN, "GPU"), ("published", AS_WRITTEN, "CPU"), ("measured", AS_WRITTEN, "CPU")} <= drawn
    assert _chart_values(by_batch, "source") == {"published"}  # no GPU: only the write-up's dots
    swept = _chart_values(data_size, "rows")
    assert set(EXPERIMENT.config("smoke")["size_rows"]) <= swept
    assert _chart_values(step_time, "model") == set(MODELS)
    assert _chart_values(by_model, "label") == set(charts.MODEL_LABELS.values())


# -- analysis over a GPU machine's rows -------------------------------------------------------------
def gpu_machine(cpu_s: dict, gpu_s: dict) -> pd.DataFrame:
    """Rows from an imaginary GPU machine: median epoch seconds per (model, batch, rows) on each
    device, both variants (tuned twice as fast)."""
    entries = []
    for device, table in (("cpu", cpu_s), ("cuda:0", gpu_s)):
        for (model, batch, n), seconds in table.items():
            for variant, factor in ((AS_WRITTEN, 1.0), (TUNED, 0.5)):
                steps = n // batch
                entries.append({"device": device, "variant": variant, "model": model, "batch_size": batch,
                                "rows": n, "median_s": seconds * factor, "step_s": seconds * factor / steps,
                                "steps_per_epoch": steps, "seconds_10_epochs": 10 * seconds * factor})
    return hand_rows(entries, PARAMS)


BIG = 262144  # above the write-up's "small data" (1e3 to 1e5 rows)
CPU_TIMES = {("cnn1d", 16, BIG): 4.0, ("cnn1d", 512, BIG): 1.0, ("cnn1d", 512, 1024): 0.1,
             ("cnn1d", 512, 4096): 0.3, ("mnist", 64, 2048): 10.0, ("gru", 64, 8192): 50.0}
GPU_TIMES = {("cnn1d", 16, BIG): 3.0, ("cnn1d", 512, BIG): 0.8, ("cnn1d", 512, 1024): 0.2,
             ("cnn1d", 512, 4096): 0.4, ("mnist", 64, 2048): 1.0, ("gru", 64, 8192): 0.5}


def test_gpu_rows_give_speedups_crossovers_and_reproduced_verdicts():
    rows = gpu_machine(CPU_TIMES, GPU_TIMES)
    sp = analysis.speedup_table(rows)
    assert len(sp) == 2 * len(CPU_TIMES)
    assert sp.set_index(["variant", "model"]).loc[(AS_WRITTEN, "gru"), "speedup"] == pytest.approx(100)
    cross = analysis.data_size_crossovers(rows)
    assert list(cross["crossover_rows"]) == [BIG, BIG]  # batch 512 only: batch 16 has one size
    assert list(cross["rows_compared"]) == ["1,024 to 262,144 (3 sizes)"] * 2
    found = verdicts(rows)
    assert [v.outcome for v in found] == [REPRODUCED] * 4
    assert all(v.basis == "measured" for v in found)


def test_tuned_gain_is_as_written_over_tuned_on_the_same_device():
    gains = analysis.variant_gains(gpu_machine(CPU_TIMES, GPU_TIMES))
    assert len(gains) == 2 * len(CPU_TIMES) and gains["tuned_speedup"].tolist() == pytest.approx([2.0] * len(gains))


def test_verdicts_fail_when_the_gpu_wins_everywhere_by_little():
    gpu = {key: seconds / 1.5 for key, seconds in CPU_TIMES.items()}
    small, modest, gru, two_d = verdicts(gpu_machine(CPU_TIMES, gpu))
    assert (small.outcome, modest.outcome, gru.outcome, two_d.outcome) == (NOT_REPRODUCED, REPRODUCED,
                                                                           NOT_REPRODUCED, NOT_REPRODUCED)
    assert "1.50x at batch 16" in modest.evidence and "1.5x" in gru.evidence


def test_claims_quote_the_published_figures_from_published_json():
    gru_gain = published.entry("gru-gain.gpu.gru")["value"]
    batch16 = published.load("cnn").set_index("id").loc["cnn-10-epochs.cpu.batch_size16", "value"]
    gru = verdicts(gpu_machine(CPU_TIMES, GPU_TIMES))[2]
    assert f"about {gru_gain:g}x" in gru.claim and f"published about {gru_gain:g}x" in gru.evidence
    assert f"{batch16:g} s" in EXPERIMENT.about()["Claim"] and f"{gru_gain:g}x" in EXPERIMENT.about()["Claim"]


def test_small_data_verdict_needs_small_points_measured_on_both_devices():
    big_only = {key: seconds for key, seconds in CPU_TIMES.items() if key[2] > 100_000 or key[0] != "cnn1d"}
    small = verdicts(gpu_machine(big_only, big_only))[0]
    assert small.outcome == NO_DATA and "at most 100,000 rows" in small.evidence


def test_a_model_never_run_is_no_data_with_the_way_to_run_it():
    cnn_only = {key: seconds for key, seconds in CPU_TIMES.items() if key[0] == "cnn1d"}
    small, modest, gru, two_d = verdicts(gpu_machine(cnn_only, cnn_only))
    assert (small.outcome, modest.outcome) == (NOT_REPRODUCED, NOT_REPRODUCED)  # speedup 1: neither claim holds
    assert gru.outcome == NO_DATA and "models=gru" in gru.evidence
    assert two_d.outcome == NO_DATA and "models=cnn1d,mnist" in two_d.evidence


def test_pairs_are_only_made_within_one_configuration():
    rows = gpu_machine(CPU_TIMES, GPU_TIMES)
    rows.loc[rows["device"] == "cpu", "config_id"] = "another"
    assert analysis.speedup_table(rows).empty
    assert {v.outcome for v in verdicts(rows)} == {NO_DATA}


def test_verdicts_without_records_say_no_data():
    empty = results.rows_frame([], "cnn")
    assert {v.outcome for v in verdicts(empty)} == {NO_DATA}
    assert all(table.empty for table in EXPERIMENT.tables(empty).values())


@pytest.mark.full
def test_charts_show_gpu_and_published_series():
    ten_epochs, by_batch, *_ = charts.charts(gpu_machine(CPU_TIMES, GPU_TIMES), published.load("cnn"))
    drawn = {(v["source"], v["variant"], v["device"]) for v in _chart_data(ten_epochs, "source")}
    assert {("published", AS_WRITTEN, "GPU"), ("published", AS_WRITTEN, "CPU"), ("measured", TUNED, "GPU")} <= drawn
    dots = {(v["variant"] if v["source"] == "measured" else "published", v["batch_size"])
            for v in _chart_data(by_batch, "ratio")}
    assert {(AS_WRITTEN, 16), (TUNED, 512), ("published", 4096)} <= dots


@pytest.mark.full
def test_a_gpu_run_apart_from_its_machines_cpu_run_has_its_speedups_drawn(shipped_results):
    """The H200 machine ran cnn's quick preset on its GPU alone, then on its CPU alone: each GPU point over the CPU
    run's point (its doctor's smoke run, on both devices, is left out here)."""
    machine = "intel-r-xeon-r-processor-8e260d9d"
    rows = results.rows_frame(shipped_records(), "cnn")
    rows = rows[(rows["machine_id"] == machine) & (rows["preset"] == "quick")]
    gpu_run = rows.loc[rows["device"] == "cuda:0", "run_id"].unique()
    cpu_run = rows.loc[rows["device"] == "cpu", "run_id"].unique()
    assert len(gpu_run) == len(cpu_run) == 1 and gpu_run[0] != cpu_run[0]
    found = charts.speedups(rows)
    assert len(found) and set(found["run_id"]) == set(gpu_run)
    one = found.iloc[0]
    cpu = rows[(rows["device"] == "cpu") & (rows["variant"] == one["variant"]) & (rows["point"] == one["point"])]
    assert one["ratio"] == pytest.approx(cpu["median_s"].iloc[0] / one["median_s"])
