import numpy as np
import pandas as pd
import pytest
import torch

from core import results, runner
from core.charts import jacobian as jacobian_charts
from core.experiments import jacobian
from core.experiments.base import Point, SkipPoint
from core.models import jacobian as net
from core.params import ConfigError
from core.results import RecordWriter
from core.verdicts import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED

EXP = jacobian.EXPERIMENT
SMALL = {"cpu_threads": 1}  # tiny operators crawl with two threads on a busy 2-core machine
CHECKED_VAL = 10            # the full forms run here; the vectorized one is skipped for memory


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> pd.DataFrame:
    """One small CPU run of every method with a free memory that admits the written call at val=10
    but not the vectorized one (whose identity is (400 val)² floats)."""
    needed = [jacobian.COMPLEXITY[v].bytes(CHECKED_VAL, "cpu") for v in (jacobian.AS_WRITTEN, jacobian.VECTORIZED)]
    assert needed[0] < needed[1]
    patch = pytest.MonkeyPatch()
    patch.setattr(jacobian, "free_bytes", lambda device: float(sum(needed)))  # with memory_fraction 0.5
    folder = tmp_path_factory.mktemp("jacobian-results")
    config = EXP.config("smoke", SMALL | {"vals": (2, CHECKED_VAL), "per_sample_vals": (50,), "repeats": 1,
                                          "budget_s": 600.0})
    try:
        writer = RecordWriter("jacobian", "smoke", config, ["cpu"], results_dir=folder)
        assert runner.run(jacobian.Jacobian(), config, ["cpu"], writer) == "complete"
    finally:
        patch.undo()
    return results.rows_frame(results.load_records(folder), "jacobian")


@pytest.mark.parametrize("method", [jacobian.VECTORIZED, *jacobian.PER_SAMPLE])
def test_every_method_agrees_with_the_written_call(method):
    model, t = net.build_model(0), net.inputs(0, 5)
    full = net.full_naive(model, t)
    assert full.shape == (5, net.OUTPUTS, 5, 1)
    blocks = net.diagonal_blocks(full)
    off_block = full.clone()
    for i in range(5):
        off_block[i, :, i] = 0
    assert torch.count_nonzero(off_block) == 0 and torch.count_nonzero(blocks) > 0
    result = jacobian.METHODS[method](model, t)
    per_sample = net.diagonal_blocks(result) if method in jacobian.FULL_FORMS else result
    assert per_sample.shape == (5, net.OUTPUTS, 1)
    assert (per_sample - blocks).abs().max() < 1e-5


def test_presets_are_valid_and_the_paper_one_has_the_write_up_points():
    for preset in ("smoke", "quick", "paper"):
        EXP.config(preset)
    paper = EXP.config("paper")
    assert {100, 1000} <= set(paper["vals"]) and max(paper["per_sample_vals"]) >= 1_000_000
    assert EXP.estimate_seconds(EXP.config("smoke"), "cpu") < EXP.estimate_seconds(EXP.config("quick"), "cpu")


@pytest.mark.parametrize("overrides, field, words", [
    ({"vals": (0,)}, "vals", "out of range"),
    ({"vals": (10, 20_000)}, "vals", "out of range"),
    ({"per_sample_vals": (10**9,)}, "per_sample_vals", "out of range"),
    ({"variants": ("as written", "finite differences")}, "variants", "not allowed"),
    ({"memory_fraction": 0.0}, "memory_fraction", "out of range"),
    ({"method": "jvp"}, "method", "unknown parameter"),
])
def test_bad_values_and_unknown_methods_name_the_field(overrides, field, words):
    with pytest.raises(ConfigError) as caught:
        EXP.config("smoke", overrides)
    assert caught.value.field == field and words in str(caught.value)


def test_vals_parse_from_text():
    assert EXP.param("vals").parse("10, 100,1000") == (10, 100, 1000)
    with pytest.raises(ConfigError, match="vals"):
        EXP.param("vals").parse("10,ten")


def test_points_put_the_written_call_first_and_sweep_per_sample_methods_further():
    config = EXP.config("smoke", {"vals": (10, 5), "per_sample_vals": (1000,)})
    points = EXP.points(config, "cpu")
    assert points[0] == Point("cpu", jacobian.AS_WRITTEN, {"val": 5})
    vals = lambda name: [p.params["val"] for p in points if p.variant == name]
    assert vals(jacobian.AS_WRITTEN) == vals(jacobian.VECTORIZED) == [5, 10]
    assert vals(jacobian.TUNED) == vals(jacobian.JACREV) == [5, 10, 1000]
    assert not vals(jacobian.MOVE)  # a host-to-device copy needs a device


def test_the_estimator_refuses_the_640_gb_vectorized_call_before_allocating_it():
    config = EXP.config("smoke", SMALL | {"memory_fraction": 1.0, "budget_s": 36_000.0})
    with pytest.raises(SkipPoint) as caught:
        jacobian.Jacobian().estimate(Point("cpu", jacobian.VECTORIZED, {"val": 1000}), config)
    estimate = caught.value.metrics
    assert estimate["estimated_bytes"] >= 640e9 and "GB" in str(caught.value) and "memory_fraction" in str(caught.value)
    assert estimate["estimated_seconds"] > 0 and estimate["time_fitted_on_vals"] == [1, 4]


def test_the_time_budget_skips_with_the_quadratic_estimate(monkeypatch):
    monkeypatch.setattr(jacobian, "free_bytes", lambda device: 1e15)
    exp = jacobian.Jacobian()
    config = EXP.config("smoke", SMALL | {"budget_s": 0.1})
    with pytest.raises(SkipPoint, match="budget_s") as caught:
        exp.estimate(Point("cpu", jacobian.AS_WRITTEN, {"val": 1000}), config)
    a, b = caught.value.metrics["time_coefficients"]
    assert caught.value.metrics["estimated_seconds"] == pytest.approx(a * 400 * 1000 + b * 400 * 1000**2)
    assert len(exp.timings[("cpu", jacobian.AS_WRITTEN, 1)]) == 2  # calibrated at two small vals, once


def test_the_time_model_fit_recovers_its_coefficients_without_negative_values():
    terms = jacobian.COMPLEXITY[jacobian.AS_WRITTEN].terms
    vals = [1, 4, 10, 30, 100]
    seconds = [2e-4 * 400 * v + 3e-6 * 400 * v * v for v in vals]
    assert jacobian.fit_time_model([terms(v) for v in vals], seconds) == pytest.approx([2e-4, 3e-6], rel=1e-6)
    flat = jacobian.fit_time_model([(1.0, v) for v in vals], [1.0, 0.9, 0.8, 0.7, 0.6])
    assert (flat >= 0).all()


def test_a_run_records_measured_and_skipped_points_with_their_estimates(swept):
    ok = swept[swept["point_status"] == "ok"]
    assert set(ok["variant"]) == {jacobian.AS_WRITTEN, jacobian.VECTORIZED, *jacobian.PER_SAMPLE}
    assert (ok["torch_threads"] == 1).all() and ok["estimated_seconds"].notna().all()
    skipped = jacobian.skipped(swept)
    assert list(zip(skipped["variant"], skipped["val"])) == [(jacobian.VECTORIZED, CHECKED_VAL)]
    assert skipped["estimated_gb"].iloc[0] > 0 and "memory_fraction" in skipped["reason"].iloc[0]


def test_every_method_matches_the_written_call_in_the_records(swept):
    table = jacobian.correctness(swept)
    checked = set(zip(table["variant"], table["val"]))
    assert {(m, v) for m in jacobian.PER_SAMPLE for v in (2, CHECKED_VAL)} <= checked
    assert (table["max_abs_diff_vs_naive"] < 1e-5).all()
    written = table[table["variant"] == jacobian.AS_WRITTEN].set_index("val")
    assert written.loc[CHECKED_VAL, "nonzero_fraction"] == pytest.approx(1 / CHECKED_VAL)
    assert written.loc[CHECKED_VAL, "off_block_nonzeros"] == 0
    beyond = swept[(swept["val"] == 50) & (swept["point_status"] == "ok")]
    assert beyond["max_abs_diff_vs_naive"].isna().all()  # the written call does not fit there


def test_cpu_only_records_need_a_gpu_for_the_claims(swept):
    found = jacobian.verdicts(swept, results.load_published("jacobian"))
    assert [v.outcome for v in found] == [NEEDS_GPU] * 3
    assert all(chart.to_dict() for chart in jacobian_charts.charts(swept, results.load_published("jacobian")))


def test_the_move_code_path_runs_on_any_device():
    config = EXP.config("smoke", SMALL)
    out = jacobian.Jacobian().measure(Point("cpu", jacobian.MOVE, {"val": 10}), config)
    assert out["timing"]["median"] > 0 and out["metrics"]["estimated_bytes"] > 0


def synthetic(cpu: dict[int, float], gpu: dict[int, float], move_s: float = None) -> pd.DataFrame:
    """Records as rows_frame lays them out: the written call's seconds per val on one machine."""
    rows = [{"machine_id": "m1", "machine": "box", "device": device, "variant": jacobian.AS_WRITTEN,
             "point_status": "ok", "val": val, "median_s": s}
            for device, times in (("cpu", cpu), ("cuda:0", gpu)) for val, s in times.items()]
    rows += [{"machine_id": "m1", "machine": "box", "device": "cpu", "variant": jacobian.TUNED, "point_status": "ok",
              "val": val, "median_s": 1e-4} for val in (100, 1000)]
    if move_s is not None:
        rows.append({"machine_id": "m1", "machine": "box", "device": "cuda:0", "variant": jacobian.MOVE,
                     "point_status": "ok", "val": 100, "median_s": move_s})
    return pd.DataFrame(rows)


def test_verdicts_follow_the_records():
    published = results.load_published("jacobian")
    as_published = jacobian.verdicts(synthetic({100: 11.1, 1000: 524.0}, {100: 19.5, 1000: 192.0}, 0.002), published)
    assert [v.outcome for v in as_published] == [REPRODUCED] * 3
    reversed_ = jacobian.verdicts(synthetic({100: 19.5, 1000: 192.0}, {100: 11.1, 1000: 524.0}, 0.05), published)
    assert [v.outcome for v in reversed_] == [NOT_REPRODUCED] * 3
    assert [v.outcome for v in jacobian.verdicts(pd.DataFrame(), published)] == [NO_DATA] * 3


def test_the_written_call_is_extrapolated_to_1000_from_its_quadratic_fit():
    a, b = 1e-4, 2e-6
    cpu = {v: a * 400 * v + b * 400 * v * v for v in (10, 30, 100)}
    times = jacobian.naive_times(synthetic(cpu, {}), 1000)
    row = times.set_index("device").loc["cpu"]
    assert row["naive_s"] == pytest.approx(a * 400e3 + b * 400e6, rel=1e-6)
    assert row["naive_basis"].startswith("extrapolated")
    speed = jacobian.speedups(synthetic(cpu, {})).set_index("val")
    assert speed.loc[100, "naive_basis"] == "measured"
    assert speed.loc[1000, "speedup"] == pytest.approx(row["naive_s"] / 1e-4)
    assert np.isfinite(speed["speedup"]).all()
