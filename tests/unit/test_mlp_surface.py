import math

import numpy as np
import pandas as pd
import pytest
import torch

from core import results, runner
from core.charts import mlp_surface as charts
from core.experiments import mlp_surface
from core.experiments.base import Point, SkipPoint
from core.models import mlp_surface as model
from core.params import ConfigError
from core.results import RecordWriter
from core.verdicts import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED

EXP = mlp_surface.EXPERIMENT
CELLS = model.SURFACE_GRID**2


@pytest.fixture(autouse=True)
def one_thread():
    """The CPU is shared with other test processes; one intra-op thread keeps the small trainings fast
    (these tests check behaviour, never timings)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_peaks_matches_the_formula_at_known_points():
    at = lambda x, y: model.peaks(torch.tensor(x), torch.tensor(y)).item()
    assert at(0.0, 0.0) == pytest.approx(8 / 3 * math.exp(-1), rel=1e-6)  # 0.98101
    assert at(1.0, 0.0) == pytest.approx(8 * math.exp(-1) - math.exp(-4) / 3, rel=1e-6)
    assert at(0.0, -1.0) == pytest.approx(3 - 10 * math.exp(-1) - math.exp(-2) / 3, rel=1e-6)
    assert abs(at(3.0, 3.0)) < 1e-3  # flat far from the peaks


def test_grid_varies_x_fastest_over_minus_3_to_3():
    x, y = model.grid_data(3)
    assert x.tolist() == [[-3, -3], [0, -3], [3, -3], [-3, 0], [0, 0], [3, 0], [-3, 3], [0, 3], [3, 3]]
    assert y[4].item() == pytest.approx(8 / 3 * math.exp(-1), rel=1e-6)
    assert x.dtype == y.dtype == torch.float32 and y.shape == (9, 1)


@pytest.mark.parametrize("field, value", [("grid", 1), ("grid", 5000), ("epochs", 0), ("lr", 0.0), ("lr", 2.0),
                                          ("sweep_grids", ()), ("sweep_grids", (10, 1)), ("batch_size", 0)])
def test_out_of_range_values_name_the_field_and_the_range(field, value):
    with pytest.raises(ConfigError) as caught:
        EXP.config("quick", {field: value})
    assert caught.value.field == field
    assert "allowed" in str(caught.value) or "needs at least one" in str(caught.value)


def test_every_preset_is_valid_and_the_paper_preset_is_the_write_ups_setting():
    paper = EXP.config("paper")
    assert (paper["grid"], paper["epochs"], paper["lr"]) == (200, 2000, 0.08)
    assert min(paper["sweep_grids"]) ** 2 == 100 and max(paper["sweep_grids"]) ** 2 == 1_000_000
    assert EXP.config("smoke") and EXP.config("quick")


def test_points_put_the_surface_runs_first_then_the_sweep():
    config = EXP.config("smoke", {"variants": ("as written", "tuned")})
    points = EXP.points(config, "cpu")
    roles = [p.params["role"] for p in points]
    assert roles == ["surface"] * 2 + ["sweep"] * 2 * len(config["sweep_grids"])
    assert points[0].params == {"role": "surface", "grid": 20, "samples": 400, "epochs": config["epochs"]}
    assert {p.variant for p in points} == {"as written", "tuned"}
    assert EXP.estimate_seconds(config, "cpu") > 0


def test_every_device_starts_from_the_same_seeded_weights():
    a, b, other = model.initial_network(1), model.initial_network(1), model.initial_network(2)
    for pa, pb, po in zip(a.parameters(), b.parameters(), other.parameters()):
        assert torch.equal(pa, pb)
    assert not torch.equal(a[0].weight, other[0].weight)
    assert torch.count_nonzero(a[0].bias) == 0  # Flux's Dense starts with zero biases


def test_training_reduces_the_loss_and_each_call_restarts_from_the_seeded_weights():
    trainer = model.Trainer("as written", "cpu", 20, 1, 0.08, 128)
    first = trainer.train(60)
    again = trainer.train(60)
    assert first == again
    assert first[-1] < first[0] / 2
    target_variance = model.grid_data(20)[1].var().item()
    assert trainer.final_mse() < target_variance / 2


def test_tuned_loop_on_the_cpu_does_the_same_arithmetic_without_per_step_reads():
    written = model.Trainer("as written", "cpu", 12, 1, 0.08, 128).train(30)
    tuned = model.Trainer("tuned", "cpu", 12, 1, 0.08, 128).train(30)
    np.testing.assert_allclose(tuned, written, rtol=1e-5)


def test_dataloader_variant_takes_minibatches_and_learns():
    trainer = model.Trainer("with DataLoader", "cpu", 20, 1, 0.08, 128)
    assert trainer.steps_per_epoch == math.ceil(400 / 128)
    curve = trainer.train(20)
    assert len(curve) == 20 and curve[-1] < curve[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graph capture needs a CUDA device")
def test_tuned_cuda_graph_matches_the_eager_loop_on_cuda():
    graphed = model.Trainer("tuned", "cuda:0", 20, 1, 0.08, 128)
    assert graphed.graph is not None
    eager = model.Trainer("as written", "cuda:0", 20, 1, 0.08, 128).train(20)
    curve = graphed.train(20)
    np.testing.assert_allclose(curve, eager, rtol=1e-3)
    np.testing.assert_allclose(graphed.train(20), curve, rtol=1e-5)  # every replay restarts from the seeded state


@pytest.mark.skipif(not torch.cuda.is_available(), reason="comparing devices needs a CUDA device")
def test_cpu_and_cuda_start_alike_and_learn_alike_surfaces():
    cpu, gpu = (model.Trainer("as written", d, 20, 1, 0.08, 128) for d in ("cpu", "cuda:0"))
    for pc, pg in zip(cpu.model.parameters(), gpu.model.parameters()):
        assert torch.equal(pc, pg.cpu())
    cpu.train(20)
    gpu.train(20)
    assert np.max(np.abs(np.subtract(cpu.surface(), gpu.surface()))) < 0.05 * np.ptp(mlp_surface.target_surface())


def test_outcome_keeps_a_subsampled_curve_and_the_surface():
    metrics = mlp_surface.outcome_metrics([float(1000 - i) for i in range(1000)], 0.5, [0.25] * CELLS)
    assert not metrics["diverged"] and metrics["final_mse"] == 0.5
    assert len(metrics["loss_curve"]) == mlp_surface.LOSS_POINTS
    assert metrics["loss_epochs"][0] == 1 and metrics["loss_epochs"][-1] == 1000
    assert metrics["loss_curve"][-1] == 1.0 and len(metrics["surface"]) == CELLS


def test_a_non_finite_loss_is_recorded_as_diverged_without_a_surface():
    metrics = mlp_surface.outcome_metrics([3.0, float("inf"), float("nan")], float("nan"), [0.0] * CELLS)
    assert metrics["diverged"] and metrics["final_mse"] is None and "surface" not in metrics
    assert metrics["loss_curve"] == [3.0, None, None]


def test_measure_records_the_surface_of_the_trained_model():
    config = EXP.config("smoke", {"epochs": 40})
    point = Point("cpu", "as written", {"role": "surface", "grid": 20, "samples": 400, "epochs": 40})
    measured = EXP.measure(point, config)
    metrics = measured["metrics"]
    trainer = model.Trainer("as written", "cpu", 20, config["seed"], config["lr"], config["batch_size"])
    trainer.train(40)
    np.testing.assert_allclose(metrics["surface"], trainer.surface(), atol=1e-4)
    assert metrics["final_mse"] == pytest.approx(trainer.final_mse(), rel=1e-5)
    assert metrics["torch_threads"] == 1 and len(measured["timing"]["samples"]) == config["repeats"]
    assert metrics["seconds_per_epoch"] == pytest.approx(measured["timing"]["median"] / 40)


def test_a_diverging_training_is_measured_and_marked(monkeypatch):
    real = model.grid_data
    monkeypatch.setattr(model, "grid_data", lambda side: (real(side)[0], torch.full((side * side, 1), math.nan))
                        if side != model.SURFACE_GRID else real(side))
    point = Point("cpu", "tuned", {"role": "surface", "grid": 10, "samples": 100, "epochs": 5})
    metrics = EXP.measure(point, EXP.config("smoke"))["metrics"]
    assert metrics["diverged"] and "surface" not in metrics and metrics["final_mse"] is None


def test_a_point_over_the_time_limit_is_skipped_with_its_estimate():
    config = EXP.config("smoke", {"max_point_seconds": 0.1})
    point = Point("cpu", "as written", {"role": "sweep", "grid": 10, "samples": 100, "epochs": 100_000})
    with pytest.raises(SkipPoint) as skipped:
        EXP.measure(point, config)
    assert "max_point_seconds" in str(skipped.value) and skipped.value.metrics["estimated_seconds"] > 0.1


def test_smoke_run_records_surfaces_and_charts_draw_them(results_dir):
    config = EXP.config("smoke", {"variants": ("as written", "tuned"), "epochs": 30, "sweep_grids": (10,)})
    assert runner.run(EXP, config, ["cpu"], RecordWriter("mlp_surface", "smoke", config, ["cpu"])) == "complete"
    rows = results.rows_frame(results.load_records(), "mlp_surface")
    assert (rows["point_status"] == "ok").all() and len(rows) == 4
    surface_rows = rows[rows["role"] == "surface"]
    assert surface_rows["surface"].map(len).eq(CELLS).all() and not surface_rows["diverged"].any()
    built = charts.charts(rows, results.load_published("mlp_surface"))
    assert len(built) == 6 and all(c.to_dict() for c in built)
    learned = _panel_values(built[0], "as written · cpu")
    stored = surface_rows[surface_rows["variant"] == "as written"]["surface"].iloc[0]
    np.testing.assert_allclose(learned, stored, atol=1e-5)
    np.testing.assert_allclose(_panel_values(built[0], "target"), mlp_surface.target_surface(), atol=1e-5)


def _panel_values(chart, starts: str) -> list[float]:
    panel = next(c for c in chart.concat if c.title.startswith(starts))
    return panel.data["z"].tolist()


def _surface_row(device: str, variant: str, surface, diverged=False, **extra) -> dict:
    return {"run_id": "r1", "machine": "m", "machine_id": "m-1234", "started": "2026-01-01", "device": device,
            "device_name": device.upper(), "variant": variant, "point_status": "ok", "role": "surface",
            "samples": 40_000, "epochs": 2000, "surface": surface, "diverged": diverged,
            "final_mse": None if diverged else 0.1, "loss_epochs": [1, 2], "loss_curve": [1.0, 0.5],
            "median_s": 2.0, "iqr_s": 0.1, "seconds_per_epoch": 0.001, **extra}


def test_a_diverged_run_is_named_but_not_drawn():
    rows = pd.DataFrame([_surface_row("cpu", "as written", [0.5] * CELLS),
                         _surface_row("cpu", "tuned", np.nan, diverged=True, loss_curve=[1.0, None])])
    surfaces = charts.surface_heatmaps(charts.surface_run(rows))
    titles = [c.title for c in surfaces.concat]
    assert len(titles) == 2 and not any(t.startswith("tuned") for t in titles)
    assert "diverged, not plotted: tuned · cpu" in surfaces.title
    assert charts.loss_curves(charts.surface_run(rows)).to_dict()


def _timed(device: str, variant: str, samples: int, per_epoch: float, role: str = "sweep") -> dict:
    return {"run_id": "r1", "machine": "m", "device": device, "device_name": device, "variant": variant,
            "point_status": "ok", "role": role, "samples": samples, "epochs": 20, "seconds_per_epoch": per_epoch}


def _timed_rows(gpu_per_epoch: dict, cpu_per_epoch: dict, variant="as written") -> pd.DataFrame:
    return pd.DataFrame([_timed("cpu", variant, n, t) for n, t in cpu_per_epoch.items()]
                        + [_timed("cuda:0", variant, n, t) for n, t in gpu_per_epoch.items()])


def test_crossover_is_the_first_swept_size_from_which_the_gpu_always_wins():
    rows = _timed_rows({100: 2.0, 1024: 0.5, 10_000: 2.0, 40_000: 0.1}, {100: 1.0, 1024: 1.0, 10_000: 1.0, 40_000: 1.0})
    found = mlp_surface.crossovers(rows)
    assert found["gpu_faster_from_samples"].tolist() == [40_000]
    assert mlp_surface.speedups(rows).set_index("samples")["speedup"][40_000] == pytest.approx(10.0)


def test_verdicts_need_a_gpu_and_then_follow_the_measured_ratios():
    published = results.load_published("mlp_surface")
    assert {v.outcome for v in mlp_surface.verdicts(pd.DataFrame(), published)} == {NO_DATA}
    cpu_only = pd.DataFrame([_timed("cpu", "as written", 40_000, 0.01, role="surface")])
    found = mlp_surface.verdicts(cpu_only, published)
    assert {v.outcome for v in found} == {NEEDS_GPU}
    assert "10.0 ms per epoch" in found[0].evidence and "50 µs" in found[0].evidence
    rows = _timed_rows({100: 2.0, 196: 2.0, 1024: 1.5, 40_000: 0.005}, {100: 1.0, 196: 1.0, 1024: 1.0, 40_000: 1.0})
    paper, small, same, ahead, *_ = mlp_surface.verdicts(rows, published)
    assert paper.outcome == REPRODUCED and "200.0x" in paper.evidence
    assert small.outcome == REPRODUCED and ahead.outcome == REPRODUCED
    assert same.outcome == REPRODUCED
    slow_gpu = _timed_rows({100: 5.0, 40_000: 0.5}, {100: 1.0, 40_000: 1.0})
    paper, small, same, ahead, *_ = mlp_surface.verdicts(slow_gpu, published)
    assert paper.outcome == NOT_REPRODUCED and "2.0x" in paper.evidence
    assert same.outcome == NOT_REPRODUCED and small.outcome == REPRODUCED


def test_dataloader_verdict_compares_gpu_epochs_at_40000_samples():
    published = results.load_published("mlp_surface")
    rows = pd.concat([_timed_rows({40_000: 0.001}, {40_000: 0.01}),
                      _timed_rows({40_000: 0.004}, {40_000: 0.05}, variant="with DataLoader")])
    loader = mlp_surface.verdicts(rows, published)[4]
    assert loader.outcome == REPRODUCED and "4.0x" in loader.evidence


def test_largest_surface_difference_is_taken_between_devices_of_one_run():
    base = np.asarray(mlp_surface.target_surface())
    shifted = base.copy()
    shifted[7] += 0.3
    rows = pd.DataFrame([_surface_row("cpu", "as written", list(base)),
                         _surface_row("cuda:0", "as written", list(shifted)),
                         _surface_row("cuda:0", "tuned", list(base))])  # no CPU tuned surface: nothing to compare
    diffs = mlp_surface.surface_differences(rows)
    assert len(diffs) == 1 and diffs["max_abs_surface_diff"].iloc[0] == pytest.approx(0.3, abs=1e-9)
    identical = mlp_surface.verdicts(rows, results.load_published("mlp_surface"))[5]
    assert identical.outcome == REPRODUCED and "0.3000" in identical.evidence
    shifted[7] += 2.0
    rows = pd.DataFrame([_surface_row("cpu", "as written", list(base)),
                         _surface_row("cuda:0", "as written", list(shifted))])
    assert mlp_surface.verdicts(rows, results.load_published("mlp_surface"))[5].outcome == NOT_REPRODUCED
    difference_chart = charts.difference_heatmaps(charts.surface_run(rows))
    assert any(c.title == "as written: cuda:0 - cpu" for c in difference_chart.concat)


def test_gpu_rows_without_cpu_rows_of_the_same_run_say_how_to_compare():
    rows = pd.DataFrame([_timed("cpu", "as written", 40_000, 0.01), {**_timed("cuda:0", "as written", 40_000, 0.001),
                                                                     "run_id": "r2"}])
    paper = mlp_surface.verdicts(rows, results.load_published("mlp_surface"))[0]
    assert paper.outcome == NO_DATA and "in one run" in paper.evidence
