import math

import numpy as np
import pandas as pd
import pytest
import torch

from core import devices, published
from core.measure import graphs, runner
from core.store import results
from core.present.analysis import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, TOO_CLOSE
from core.measure.experiment import Point, RunState, SkipPoint
from core.experiments.mlp_surface import analysis, charts, experiment, model
from core.params import ConfigError
from core.measure.timing import Measurement
from tests.helpers import hand_rows, smoke_rows

EXP = experiment.EXPERIMENT
CELLS = model.SURFACE_GRID**2
CUDA_DEVICES = [d for d in devices.available() if devices.kind(d) == "cuda"]
POINT_PARAMS = ("role", "samples", "epochs")
PAPER = analysis.PAPER_SPEEDUP

pytestmark = pytest.mark.usefixtures("one_thread")  # behaviour, never timings: keep the small trainings quick


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


def test_tuned_loop_on_the_cpu_does_the_same_arithmetic_without_per_step_reads_or_a_graph():
    written = model.Trainer("as written", "cpu", 12, 1, 0.08, 128).train(30)
    tuned_trainer = model.Trainer("tuned", "cpu", 12, 1, 0.08, 128)
    assert not tuned_trainer.cuda_graph and tuned_trainer.graph_error is None
    np.testing.assert_allclose(tuned_trainer.train(30), written, rtol=1e-5)


def test_dataloader_variant_takes_minibatches_and_learns():
    trainer = model.Trainer("with DataLoader", "cpu", 20, 1, 0.08, 128)
    assert trainer.steps_per_epoch == math.ceil(400 / 128)
    curve = trainer.train(20)
    assert len(curve) == 20 and curve[-1] < curve[0]


def test_a_failed_capture_falls_back_to_the_eager_step_and_the_point_records_why(monkeypatch):
    monkeypatch.setattr(graphs, "replay_or_eager", lambda step, device, watched, enabled=True: (step, "no capture"))
    point = Point("cpu", "tuned", {"role": "sweep", "grid": 12, "samples": 144, "epochs": 30})
    row = runner.measure_point(EXP, point, EXP.config("smoke"))
    assert row["status"] == "ok"
    assert row["metrics"]["cuda_graph"] is False and row["metrics"]["cuda_graph_error"] == "no capture"
    written = model.Trainer("as written", "cpu", 12, 1, 0.08, 128).train(30)
    np.testing.assert_allclose(row["metrics"]["loss_curve"], written, rtol=1e-5)


@pytest.mark.skipif(not CUDA_DEVICES, reason="CUDA graph capture needs a CUDA device")
@pytest.mark.parametrize("device", CUDA_DEVICES or ["cuda:0"])
def test_tuned_cuda_graph_matches_the_eager_loop_on_every_cuda_device(device):
    graphed = model.Trainer("tuned", device, 20, 1, 0.08, 128)
    assert graphed.cuda_graph and graphed.graph_error is None
    for param, start in zip(graphed.model.parameters(), graphed.start.values):
        assert torch.equal(param, start)  # the capture's warm-up and checking replay are undone
    eager = model.Trainer("as written", device, 20, 1, 0.08, 128).train(20)
    curve = graphed.train(20)
    np.testing.assert_allclose(curve, eager, rtol=1e-3)
    np.testing.assert_allclose(graphed.train(20), curve, rtol=1e-5)  # every replay restarts from the seeded state


@pytest.mark.skipif(not CUDA_DEVICES, reason="the eager fallback of a CUDA capture needs a CUDA device")
@pytest.mark.parametrize("device", CUDA_DEVICES or ["cuda:0"])
def test_a_capture_that_fails_on_cuda_trains_eagerly_with_the_error_kept(device, monkeypatch):
    def fail(*args, **kwargs):
        raise graphs.GraphCaptureError("refused for the test")
    monkeypatch.setattr(graphs, "capture", fail)
    fallback = model.Trainer("tuned", device, 20, 1, 0.08, 128)
    assert not fallback.cuda_graph and "refused for the test" in fallback.graph_error
    eager = model.Trainer("as written", device, 20, 1, 0.08, 128).train(20)
    np.testing.assert_allclose(fallback.train(20), eager, rtol=1e-3)


@pytest.mark.skipif(not CUDA_DEVICES, reason="comparing devices needs a CUDA device")
@pytest.mark.parametrize("device", CUDA_DEVICES or ["cuda:0"])
def test_cpu_and_cuda_start_alike_and_learn_alike_surfaces(device):
    cpu, gpu = (model.Trainer("as written", d, 20, 1, 0.08, 128) for d in ("cpu", device))
    for pc, pg in zip(cpu.model.parameters(), gpu.model.parameters()):
        assert torch.equal(pc, pg.cpu())
    cpu.train(20)
    gpu.train(20)
    assert np.max(np.abs(np.subtract(cpu.surface(), gpu.surface()))) < 0.05 * np.ptp(model.target_surface())


def test_outcome_keeps_a_subsampled_curve_and_the_surface():
    metrics = experiment.outcome_metrics([float(1000 - i) for i in range(1000)], 0.5, [0.25] * CELLS)
    assert not metrics["diverged"] and metrics["final_mse"] == 0.5
    assert len(metrics["loss_curve"]) == experiment.LOSS_POINTS
    assert metrics["loss_epochs"][0] == 1 and metrics["loss_epochs"][-1] == 1000
    assert metrics["loss_curve"][-1] == 1.0 and len(metrics["surface"]) == CELLS


def test_a_non_finite_loss_is_recorded_as_diverged_without_a_surface():
    metrics = experiment.outcome_metrics([3.0, float("inf"), float("nan")], float("nan"), [0.0] * CELLS)
    assert metrics["diverged"] and metrics["final_mse"] is None and "surface" not in metrics
    assert metrics["loss_curve"] == [3.0, None, None]


def test_one_call_is_one_training_run_of_the_points_epochs():
    config = EXP.config("smoke")
    point = Point("cpu", "as written", {"role": "sweep", "grid": 10, "samples": 100, "epochs": 7})
    work = EXP.workload(point, config, RunState())
    assert (work.unit, work.per_call, work.warmup, work.repeats) == ("epoch", 7, 0, config["repeats"])
    assert work.metrics["cuda_graph"] is False and work.metrics["cuda_graph_error"] is None
    assert "torch_threads" not in work.metrics  # the runner records the threads


def test_the_point_records_the_surface_of_the_last_timed_training():
    config = EXP.config("smoke", {"epochs": 40, "repeats": 2})
    point = Point("cpu", "as written", {"role": "surface", "grid": 20, "samples": 400, "epochs": 40})
    row = runner.measure_point(EXP, point, config)
    metrics = row["metrics"]
    trainer = model.Trainer("as written", "cpu", 20, config["seed"], config["lr"], config["batch_size"])
    trainer.train(40)
    np.testing.assert_allclose(metrics["surface"], trainer.surface(), atol=1e-4)
    assert metrics["final_mse"] == pytest.approx(trainer.final_mse(), rel=1e-5)
    assert row["torch_threads"] == 1 and len(row["samples"]) == config["repeats"] and row["warmup_samples"] == []
    assert (row["unit"], row["per_call"]) == ("epoch", 40)
    assert metrics["seconds_per_epoch"] == pytest.approx(row["median"] / 40)


def test_a_diverging_training_is_measured_and_marked(monkeypatch):
    real = model.grid_data
    monkeypatch.setattr(model, "grid_data", lambda side: (real(side)[0], torch.full((side * side, 1), math.nan))
                        if side != model.SURFACE_GRID else real(side))
    point = Point("cpu", "tuned", {"role": "surface", "grid": 10, "samples": 100, "epochs": 5})
    row = runner.measure_point(EXP, point, EXP.config("smoke"))
    metrics = row["metrics"]
    assert row["status"] == "ok" and metrics["diverged"] and "surface" not in metrics and metrics["final_mse"] is None


class SlowProbe(RunState):
    """A run whose timer says every probed epoch took a second, and keeps what it was asked to time."""
    def __init__(self):
        super().__init__()
        self.timed = []

    def time(self, workload, device):
        self.timed.append(workload)
        return Measurement((1.0, 1.0, 1.0), (1.0,))


def test_a_point_over_the_time_limit_is_skipped_with_the_estimate_of_the_runners_probe():
    config = EXP.config("smoke", {"max_point_seconds": 10.0})
    point = Point("cpu", "as written", {"role": "sweep", "grid": 10, "samples": 100, "epochs": 20})
    run = SlowProbe()
    with pytest.raises(SkipPoint) as skipped:
        EXP.workload(point, config, run)
    probe, = run.timed
    assert (probe.unit, probe.per_call, probe.repeats, probe.warmup) == ("step", 1, 3, 1)  # a full-batch epoch
    assert probe.budget_s == experiment.PROBE_BUDGET_S
    assert "max_point_seconds" in str(skipped.value)
    assert skipped.value.metrics == {"estimated_seconds": 20.0 * config["repeats"], "estimated_seconds_per_epoch": 1.0}


def test_the_dataloader_probe_times_a_few_minibatches_and_scales_them_to_the_epoch():
    config = EXP.config("smoke", {"max_point_seconds": 10.0, "batch_size": 1})
    point = Point("cpu", "with DataLoader", {"role": "sweep", "grid": 10, "samples": 100, "epochs": 20})
    run = SlowProbe()
    with pytest.raises(SkipPoint) as skipped:
        EXP.workload(point, config, run)
    probe, = run.timed
    steps = experiment.PROBE_STEPS
    assert (probe.unit, probe.per_call) == ("step", steps) and steps < 100
    assert skipped.value.metrics["estimated_seconds_per_epoch"] == pytest.approx(100 / steps)


def test_the_probe_trains_only_the_first_minibatches():
    trainer = model.Trainer("with DataLoader", "cpu", 10, 1, 0.08, 1)
    seen = []
    trainer._step = lambda x, y: seen.append(len(x)) or torch.zeros(())
    trainer.train_steps(5)
    assert seen == [1] * 5


@pytest.mark.timeout(60)  # a hang guard: the unbounded probe trained whole epochs of a million minibatches
def test_a_huge_dataloader_point_is_skipped_by_a_bounded_probe():
    config = EXP.config("smoke", {"max_point_seconds": 0.1, "sweep_grids": (1000,), "batch_size": 1,
                                  "variants": ("with DataLoader",)})
    point, = (p for p in EXP.points(config, "cpu") if p.params["role"] == "sweep")
    assert point.params["samples"] == 1_000_000
    row = runner.measure_point(EXP, point, config)
    assert row["status"] == "skipped" and "over max_point_seconds=0.1" in row["error"]
    assert row["metrics"]["estimated_seconds"] > 0.1


def test_a_skipped_point_is_recorded_with_its_estimate():
    config = EXP.config("smoke", {"max_point_seconds": 0.1})
    point = Point("cpu", "as written", {"role": "sweep", "grid": 10, "samples": 100, "epochs": 100_000})
    row = runner.measure_point(EXP, point, config)
    assert row["status"] == "skipped" and "max_point_seconds" in row["error"]
    assert row["metrics"]["estimated_seconds"] > 0.1


@pytest.mark.full
def test_smoke_run_records_surfaces_and_charts_draw_them():
    rows = smoke_rows("mlp_surface", variants=("as written", "tuned"), epochs=30, sweep_grids=(10,))
    assert (rows["point_status"] == "ok").all() and len(rows) == 4
    assert set(rows["per_sample"]) == {"30 epochs", "3 epochs"}
    surface_rows = rows[rows["role"] == "surface"]
    assert surface_rows["surface"].map(len).eq(CELLS).all() and not surface_rows["diverged"].any()
    built = EXP.charts(rows, published.load("mlp_surface"))
    assert len(built) == 6 and all(c.to_dict() for c in built)
    learned = _panel_values(built[0], "as written · cpu")
    stored = surface_rows[surface_rows["variant"] == "as written"]["surface"].iloc[0]
    np.testing.assert_allclose(learned, stored, atol=1e-5)
    np.testing.assert_allclose(_panel_values(built[0], "target"), model.target_surface(), atol=1e-5)
    tables = EXP.tables(rows)
    assert len(next(iter(tables.values()))) == 2  # the final MSE of both surface runs
    assert all(t.empty for t in list(tables.values())[1:])  # no GPU: no difference, no crossover


def _panel_values(chart, starts: str) -> list[float]:
    panel = next(c for c in chart.concat if c.title.startswith(starts))
    return panel.data["z"].tolist()


def _surface(device: str, variant: str, surface, diverged=False, **extra) -> dict:
    return {"device": device, "variant": variant, "role": "surface", "samples": 40_000, "epochs": 2000,
            "surface": surface, "diverged": diverged, "final_mse": None if diverged else 0.1, "loss_epochs": [1, 2],
            "loss_curve": [1.0, 0.5], "median_s": 2.0, "iqr_s": 0.1, "seconds_per_epoch": 0.001, **extra}


def _surface_rows(entries: list[dict]) -> pd.DataFrame:
    return hand_rows(entries, POINT_PARAMS)


def test_a_diverged_run_is_named_but_not_drawn():
    rows = _surface_rows([_surface("cpu", "as written", [0.5] * CELLS),
                          _surface("cpu", "tuned", np.nan, diverged=True, loss_curve=[1.0, None])])
    surfaces = charts.surface_heatmaps(charts.surface_run(rows))
    titles = [c.title for c in surfaces.concat]
    assert len(titles) == 2 and not any(t.startswith("tuned") for t in titles)
    assert "diverged, not plotted: tuned · cpu" in surfaces.title
    assert charts.loss_curves(charts.surface_run(rows)).to_dict()


def _timed(device: str, variant: str, samples: int, per_epoch: float, role: str = "sweep", **run) -> dict:
    return {"device": device, "variant": variant, "role": role, "samples": samples, "epochs": 20,
            "seconds_per_epoch": per_epoch, **run}


def _timed_rows(gpu_per_epoch: dict, cpu_per_epoch: dict, variant="as written", gpu="cuda:0") -> pd.DataFrame:
    return hand_rows([_timed("cpu", variant, n, t) for n, t in cpu_per_epoch.items()]
                     + [_timed(gpu, variant, n, t) for n, t in gpu_per_epoch.items()], POINT_PARAMS)


def test_crossover_is_the_first_swept_size_from_which_the_gpu_always_wins():
    rows = _timed_rows({100: 2.0, 1024: 0.5, 10_000: 2.0, 40_000: 0.1}, {100: 1.0, 1024: 1.0, 10_000: 1.0, 40_000: 1.0})
    found = analysis.crossover_sizes(rows)
    assert found["gpu_faster_from_samples"].tolist() == [40_000] and found["sizes_compared"].tolist() == [4]
    assert analysis.epoch_speedups(rows).set_index("samples")["speedup"][40_000] == pytest.approx(10.0)


def test_verdicts_need_a_gpu_and_then_follow_the_measured_ratios():
    figures = published.load("mlp_surface")
    empty = results.rows_frame([])
    assert {v.outcome for v in EXP.verdicts(empty, figures)} == {NO_DATA}
    cpu_only = hand_rows([_timed("cpu", "as written", 40_000, 0.01, role="surface")], POINT_PARAMS)
    found = EXP.verdicts(cpu_only, figures)
    assert {v.outcome for v in found} == {NEEDS_GPU}
    assert "10.0 ms per epoch" in found[0].evidence and "50 µs" in found[0].evidence
    rows = _timed_rows({100: 2.0, 196: 2.0, 1024: 1.5, 40_000: 0.005}, {100: 1.0, 196: 1.0, 1024: 1.0, 40_000: 1.0})
    paper, small, same, ahead, *_ = EXP.verdicts(rows, figures)
    assert paper.outcome == REPRODUCED and "200.0x" in paper.evidence and paper.basis == "measured"
    assert small.outcome == REPRODUCED and ahead.outcome == REPRODUCED
    assert same.outcome == REPRODUCED
    slow_gpu = _timed_rows({100: 5.0, 40_000: 0.5}, {100: 1.0, 40_000: 1.0})
    paper, small, same, ahead, *_ = EXP.verdicts(slow_gpu, figures)
    assert paper.outcome == NOT_REPRODUCED and "2.0x" in paper.evidence
    assert same.outcome == NOT_REPRODUCED and small.outcome == REPRODUCED


def test_a_sweep_without_the_claimed_sizes_has_no_data_for_them():
    rows = _timed_rows({40_000: 0.005}, {40_000: 1.0})
    small = EXP.verdicts(rows, published.load("mlp_surface"))[1]
    assert small.outcome == NO_DATA and "No swept size from 100 to 200 samples" in small.evidence


def test_the_200x_claim_takes_its_figure_from_published_json():
    stated = published.entry(PAPER)["value"]
    figures = published.load("mlp_surface")
    assert f"{stated:g}x" in EXP.verdicts(results.rows_frame([]), figures)[0].claim
    assert f"{stated:g}x" in EXP.about()["Claim"] and f"{stated:g}x" in EXP.about()["Why"]
    rows = _timed_rows({40_000: 0.5}, {40_000: 1.0})  # a 2x GPU
    assert EXP.verdicts(rows, figures)[0].outcome == NOT_REPRODUCED
    restated = figures.assign(value=2.0)  # a write-up that had claimed 2x: the check follows the figure given
    paper = EXP.verdicts(rows, restated)[0]
    assert paper.outcome == REPRODUCED and "2x faster GPU would have to do a whole training step in 500000 µs" in \
        paper.evidence


@pytest.mark.parametrize("gpu, error, says", [
    ("cuda:0", "capture on cuda:0 failed: RuntimeError: not permitted", "the CUDA graph capture failed"),
    ("mps", None, "no CUDA graph on this device"),
])
def test_tuned_note_says_whether_a_graph_ran_and_why_not(gpu, error, says):
    rows = pd.concat([_timed_rows({40_000: 0.005}, {40_000: 1.0}, gpu=gpu),
                      hand_rows([_timed("cpu", "tuned", 40_000, 1.0, cuda_graph=False, cuda_graph_error=None),
                                 _timed(gpu, "tuned", 40_000, 0.01, cuda_graph=False, cuda_graph_error=error)],
                                POINT_PARAMS)])
    paper = EXP.verdicts(rows, published.load("mlp_surface"))[0]
    assert says in paper.evidence and "100.0x" in paper.evidence


def test_dataloader_verdict_compares_gpu_epochs_at_40000_samples():
    figures = published.load("mlp_surface")
    rows = pd.concat([_timed_rows({40_000: 0.001}, {40_000: 0.01}),
                      _timed_rows({40_000: 0.004}, {40_000: 0.05}, variant="with DataLoader")])
    loader = EXP.verdicts(rows, figures)[4]
    assert loader.outcome == REPRODUCED and "4.0x" in loader.evidence
    written_only = _timed_rows({40_000: 0.001}, {40_000: 0.01})
    loader = EXP.verdicts(written_only, figures)[4]
    assert loader.outcome == NO_DATA and "both variants" in loader.evidence


def test_largest_surface_difference_is_taken_between_the_cpu_and_gpu_of_one_machine_and_configuration():
    base = np.asarray(model.target_surface())
    shifted = base.copy()
    shifted[7] += 0.3
    rows = _surface_rows([_surface("cpu", "as written", list(base)), _surface("cuda:0", "as written", list(shifted)),
                          _surface("cuda:0", "tuned", list(base))])  # no CPU tuned surface: nothing to compare
    diffs = analysis.surface_differences(rows)
    assert len(diffs) == 1 and diffs["max_abs_surface_diff"].iloc[0] == pytest.approx(0.3, abs=1e-9)
    identical = EXP.verdicts(rows, published.load("mlp_surface"))[5]
    assert identical.outcome == REPRODUCED and "0.3000" in identical.evidence
    shifted[7] += 2.0
    rows = _surface_rows([_surface("cpu", "as written", list(base)), _surface("cuda:0", "as written", list(shifted))])
    assert EXP.verdicts(rows, published.load("mlp_surface"))[5].outcome == NOT_REPRODUCED
    difference_chart = charts.difference_heatmaps(charts.surface_run(rows))
    assert any(c.title == "as written: cuda:0 - cpu" for c in difference_chart.concat)


def test_the_cpu_and_gpu_of_one_machine_pair_across_runs_of_one_configuration():
    rows = hand_rows([_timed("cpu", "as written", 40_000, 0.01),
                      _timed("cuda:0", "as written", 40_000, 0.001, run_id="r2", started="2026-01-02T00:00:00+00:00")],
                     POINT_PARAMS)
    paper = EXP.verdicts(rows, published.load("mlp_surface"))[0]
    assert paper.outcome == NOT_REPRODUCED and "10.0x" in paper.evidence


def test_the_latest_complete_run_of_a_point_is_the_one_compared():
    rows = hand_rows([_timed("cpu", "as written", 40_000, 1.0),
                      _timed("cuda:0", "as written", 40_000, 0.5),
                      _timed("cuda:0", "as written", 40_000, 0.005, run_id="r2", started="2026-01-02T00:00:00+00:00")],
                     POINT_PARAMS)
    assert analysis.epoch_speedups(rows)["speedup"].tolist() == [pytest.approx(200.0)]


@pytest.mark.parametrize("apart", [{"machine_id": "m2", "machine": "m2"}, {"config_id": "c2"}])
def test_gpu_rows_of_another_machine_or_configuration_are_not_compared_and_the_verdict_says_what_is_needed(apart):
    rows = hand_rows([_timed("cpu", "as written", 40_000, 0.01), _timed("cuda:0", "as written", 40_000, 0.001, **apart)],
                     POINT_PARAMS)
    assert analysis.epoch_speedups(rows).empty
    paper = EXP.verdicts(rows, published.load("mlp_surface"))[0]
    assert paper.outcome == NO_DATA and "same configuration" in paper.evidence


@pytest.mark.full
def test_the_shipped_records_give_tables_and_charts(shipped_results):
    rows = results.rows_frame(results.load_records(), "mlp_surface")
    assert len(EXP.tables(rows)["Final MSE of the surface runs per device and variant"]) > 0
    assert all(c.to_dict() for c in EXP.charts(rows, published.load("mlp_surface")))


def _sweep_rows(relative: float) -> pd.DataFrame:
    """A sweep where the GPU takes 1.05x the CPU's epoch at every size, its samples `relative` apart."""
    spread = lambda t: [t * (1 + relative * x) for x in (-1, -0.5, 0, 0.5, 1)]
    return hand_rows([{"device": device, "variant": model.AS_WRITTEN, "samples": n, "role": "sweep", "epochs": 3,
                       "median_s": 3 * t, "seconds_per_epoch": t, "samples_s": spread(3 * t)}
                      for device, t in (("cpu", 1.0), ("cuda:0", 1.05)) for n in (100, 200, 1000)],
                     ("samples", "role"))


def test_the_small_sizes_claims_decide_on_intervals_from_the_samples():
    figures = published.load("mlp_surface")
    _, cpu_faster, no_difference, *_ = experiment.EXPERIMENT.verdicts(_sweep_rows(0.3), figures)
    assert cpu_faster.outcome == TOO_CLOSE and "straddles the threshold 1.00x" in cpu_faster.evidence
    assert all("Against the CPU of its machine" in v.evidence for v in (cpu_faster, no_difference))  # both baselines
    assert no_difference.outcome == REPRODUCED and "widest gap either way 1.05x (95% CI" in no_difference.evidence
    _, cpu_faster, *_ = experiment.EXPERIMENT.verdicts(_sweep_rows(0.0), figures)
    assert cpu_faster.outcome == REPRODUCED and cpu_faster.interval.startswith("0.95x (95% CI 0.95–0.95x")


def _paper_size_rows(relative: float) -> pd.DataFrame:
    """At 40,000 samples the GPU 98x faster than the CPU as written (just under half the published 200x, the
    criterion's lower edge) and 150x tuned, every point's samples `relative` apart."""
    spread = lambda t: [t * (1 + relative * x) for x in (-1, -0.5, 0, 0.5, 1)]
    times = {("cpu", model.AS_WRITTEN): 0.98, ("cuda:0", model.AS_WRITTEN): 0.01, ("cpu", model.TUNED): 1.5,
             ("cuda:0", model.TUNED): 0.01}
    return hand_rows([_timed(device, variant, analysis.PAPER_SAMPLES, t, role="surface", median_s=20 * t,
                             samples_s=spread(20 * t)) for (device, variant), t in times.items()], POINT_PARAMS)


@pytest.mark.parametrize("relative, outcome", [(0.3, TOO_CLOSE), (0.0, NOT_REPRODUCED)])
def test_the_paper_speedup_is_decided_on_its_interval(relative, outcome):
    paper = EXP.verdicts(_paper_size_rows(relative), published.load("mlp_surface"))[0]
    assert paper.outcome == outcome and paper.interval.startswith("98.0x (95% CI ")
    assert "; tuned (" in paper.evidence and "150.0x (95% CI" in paper.evidence  # the tuned note has its interval too
    if outcome == TOO_CLOSE:
        assert "straddles the threshold 100.0x" in paper.evidence
