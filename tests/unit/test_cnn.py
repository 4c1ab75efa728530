import pytest
import torch

from core import cli, results
from core.charts.cnn import charts
from core.experiments.cnn import (AS_WRITTEN, EXPERIMENT, TUNED, crossovers, per_batch, plan, speedups,
                                  variant_gains, verdicts)
from core.models.cnn import (MODELS, TRAINERS, BaseModel, GruRegressor, MnistNet, Tuned, build, sequences,
                             synthetic_images, validation_loss, weights_checksum)
from core.params import ConfigError
from core.results import RecordWriter
from core.runner import run
from core.verdicts import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graph capture needs a CUDA GPU")


pytestmark = pytest.mark.usefixtures("one_thread")


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
    assert not trainer.graphed


def test_tuned_on_the_cpu_uses_the_fused_optimizer_and_no_graph():
    x, y = _learnable("cnn1d")
    trainer = Tuned(build("cnn1d", 0), MODELS["cnn1d"].loss, x, y, 64, "cpu", 0, 1e-3, cuda_graph=True)
    assert trainer.fused and not trainer.graphed and trainer.steps == 4


@needs_cuda
def test_tuned_on_cuda_replays_a_graph_from_the_start_weights_and_learns():
    x, y = _learnable("cnn1d")
    net = build("cnn1d", 0).to("cuda")
    trainer = Tuned(net, MODELS["cnn1d"].loss, x, y, 32, "cuda", 0, 3e-3, cuda_graph=True)
    assert trainer.graphed
    assert weights_checksum(net) == pytest.approx(weights_checksum(build("cnn1d", 0)), rel=1e-6)
    before = validation_loss(net, MODELS["cnn1d"].loss, x, y, "cuda")
    for _ in range(4):
        trainer.epoch()
    assert validation_loss(net, MODELS["cnn1d"].loss, x, y, "cuda") < before


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


# -- a real smoke run -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smoke_rows(tmp_path_factory):
    config = EXPERIMENT.config("smoke")
    writer = RecordWriter("cnn", "smoke", config, ["cpu"], results_dir=tmp_path_factory.mktemp("results"))
    assert run(EXPERIMENT, config, ["cpu"], writer) == "complete"
    return results.rows_frame([writer.record], "cnn")


def test_smoke_run_measures_every_point_with_its_losses(smoke_rows):
    assert (smoke_rows["point_status"] == "ok").all()
    assert set(smoke_rows["model"]) == set(MODELS) and set(smoke_rows["variant"]) == {AS_WRITTEN, TUNED}
    assert (smoke_rows["seconds_10_epochs"] == 10 * smoke_rows["median_s"]).all()
    assert (smoke_rows["step_s"] * smoke_rows["steps_per_epoch"] - smoke_rows["median_s"]).abs().max() < 1e-12
    assert smoke_rows[["train_loss_final", "val_loss_initial", "val_loss_final", "first_epoch_s"]].notna().all().all()
    same_start = smoke_rows.groupby(["model", "batch_size", "rows"])["init_weights_checksum"].nunique()
    assert (same_start == 1).all()


def test_cpu_only_analysis_has_gains_but_no_gpu_figures(smoke_rows):
    assert len(variant_gains(smoke_rows)) == len(smoke_rows) // 2
    assert speedups(smoke_rows).empty and crossovers(smoke_rows).empty
    projected = per_batch(smoke_rows)
    cnn = projected[projected["model"] == "cnn1d"]
    assert (cnn["projected_s_10_epochs"] > 0).all() and projected.loc[projected["model"] == "gru", "projected_s_10_epochs"].isna().all()
    assert {v.outcome for v in verdicts(smoke_rows, results.load_published("cnn"))} == {NEEDS_GPU}


def test_charts_build_from_a_cpu_run(smoke_rows):
    built = charts(smoke_rows, results.load_published("cnn"))
    assert len(built) == 5 and all(isinstance(c.to_dict(), dict) for c in built)


# -- analysis over a GPU machine's records ----------------------------------------------------------
def fake_record(cpu_s: dict, gpu_s: dict, run_id: str = "cnn-fake-gpu") -> dict:
    """A record from an imaginary GPU machine: median epoch seconds per (model, batch, rows) on each
    device, both variants (tuned twice as fast)."""
    rows = []
    for device, table in (("cpu", cpu_s), ("cuda:0", gpu_s)):
        for (model, batch, n), seconds in table.items():
            for variant, factor in ((AS_WRITTEN, 1.0), (TUNED, 0.5)):
                steps = n // batch
                metrics = {"step_s": seconds * factor / steps, "steps_per_epoch": steps,
                           "seconds_10_epochs": 10 * seconds * factor}
                rows.append({"device": device, "variant": variant, "status": "ok", "median": seconds * factor,
                             "iqr": 0.0, "noisy": False, "samples": [seconds * factor],
                             "params": {"model": model, "batch_size": batch, "rows": n}, "metrics": metrics})
    fingerprint = {"cpu_model": "Fake CPU", "cpu_logical_cores": 8, "machine_id": "fake-gpu-machine",
                   "gpus": [{"device": "cuda:0", "name": "Fake GPU"}]}
    return {"schema": results.SCHEMA_VERSION, "run_id": run_id, "experiment": "cnn", "preset": "quick",
            "status": "complete", "machine_id": "fake-gpu-machine", "fingerprint": fingerprint, "rows": rows,
            "started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:01:00+00:00", "planned_points": len(rows)}


BIG = 262144  # above the write-up's "small data" (1e3 to 1e5 rows)
CPU_TIMES = {("cnn1d", 16, BIG): 4.0, ("cnn1d", 512, BIG): 1.0, ("cnn1d", 512, 1024): 0.1,
             ("cnn1d", 512, 4096): 0.3, ("mnist", 64, 2048): 10.0, ("gru", 64, 8192): 50.0}
GPU_TIMES = {("cnn1d", 16, BIG): 3.0, ("cnn1d", 512, BIG): 0.8, ("cnn1d", 512, 1024): 0.2,
             ("cnn1d", 512, 4096): 0.4, ("mnist", 64, 2048): 1.0, ("gru", 64, 8192): 0.5}


def test_gpu_records_give_speedups_crossovers_and_reproduced_verdicts():
    rows = results.rows_frame([fake_record(CPU_TIMES, GPU_TIMES)], "cnn")
    sp = speedups(rows)
    assert len(sp) == 2 * len(CPU_TIMES)
    assert sp.set_index(["variant", "model"]).loc[(AS_WRITTEN, "gru"), "speedup"] == pytest.approx(100)
    cross = crossovers(rows)
    assert list(cross["crossover_rows"]) == [BIG, BIG]  # batch 512 only: batch 16 has one size
    outcomes = [v.outcome for v in verdicts(rows, results.load_published("cnn"))]
    assert outcomes == [REPRODUCED] * 4


def test_verdicts_fail_when_the_gpu_wins_everywhere_by_little():
    gpu = {key: seconds / 1.5 for key, seconds in CPU_TIMES.items()}
    rows = results.rows_frame([fake_record(CPU_TIMES, gpu)], "cnn")
    small, modest, gru, two_d = verdicts(rows, results.load_published("cnn"))
    assert (small.outcome, modest.outcome, gru.outcome, two_d.outcome) == (NOT_REPRODUCED, REPRODUCED,
                                                                           NOT_REPRODUCED, NOT_REPRODUCED)


def test_small_data_verdict_needs_small_points_measured_on_both_devices():
    big_only = {key: seconds for key, seconds in CPU_TIMES.items() if key[2] > 100_000 or key[0] != "cnn1d"}
    rows = results.rows_frame([fake_record(big_only, big_only)], "cnn")
    assert verdicts(rows, results.load_published("cnn"))[0].outcome == NO_DATA


def test_verdicts_without_records_say_no_data():
    empty = results.rows_frame([], "cnn")
    assert {v.outcome for v in verdicts(empty, results.load_published("cnn"))} == {NO_DATA}


def test_charts_show_gpu_and_published_series():
    rows = results.rows_frame([fake_record(CPU_TIMES, GPU_TIMES)], "cnn")
    built = charts(rows, results.load_published("cnn"))
    first = built[0].to_dict()
    values = next(iter(first["datasets"].values()))
    assert {"published · GPU", "published · CPU"} <= {v["series"] for v in values}
    assert any(v["series"].startswith("tuned · cuda:0") for v in values)
