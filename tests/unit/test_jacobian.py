import pandas as pd
import pytest
import torch

from core import devices, published, versions
from core.present import analysis as shared
from core.store import results
from core.measure import runner, standin
from core.present.analysis import ESTIMATED, NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, TOO_CLOSE
from core.measure.experiment import Point, RunState, SkipPoint
from core.experiments.jacobian import analysis, charts, experiment as jacobian, model as net
from core.params import ConfigError
from core.store.results import RecordWriter
from tests.helpers import hand_rows

EXP = jacobian.EXPERIMENT
SMALL = {"cpu_threads": ("1",)}  # tiny operators crawl with two threads on a busy 2-core machine
CHECKED_VAL = 10            # the full forms run here; the vectorized one is skipped for memory
CUDA_DEVICES = [d for d in devices.available() if devices.kind(d) == "cuda"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> pd.DataFrame:
    """One small CPU run of every method with a free memory that admits the written call at val=10
    but not the vectorized one (whose identity is (400 val)² floats)."""
    heap_kept = jacobian.heap_keeps_blocks("cpu")
    needed = [jacobian.COMPLEXITY[v].bytes(CHECKED_VAL, heap_kept) for v in (jacobian.AS_WRITTEN, jacobian.VECTORIZED)]
    assert needed[0] < needed[1]
    patch = pytest.MonkeyPatch()
    patch.setattr(devices, "free_memory", lambda device: float(sum(needed)))  # with memory_fraction 0.5
    patch.setattr(standin, "points", lambda experiment, config: [])  # the tests read what the CPU measured alone,
    patch.setattr(runner, "INSPECT_LIMIT_S", 0.0)  # without its census or profile (the page's tests read those)
    folder = tmp_path_factory.mktemp("jacobian-results")
    config = EXP.config("smoke", SMALL | {"vals": (2, CHECKED_VAL), "per_sample_vals": (50,), "repeats": 1,
                                          "budget_s": 600.0})
    try:
        writer = RecordWriter("jacobian", "smoke", config, ["cpu"], results_dir=folder)
        assert runner.run(EXP, config, ["cpu"], writer) == "complete"
    finally:
        patch.undo()
    return results.rows_frame(results.load_records(folder), "jacobian")


@pytest.mark.parametrize("method", [m if m == jacobian.TUNED else pytest.param(m, marks=pytest.mark.full)
                                    for m in (jacobian.VECTORIZED, *jacobian.PER_SAMPLE)])
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
    write_up_vals = set(published.load("jacobian")["val"].dropna().astype(int))
    assert write_up_vals and write_up_vals <= set(paper["vals"]) and max(paper["per_sample_vals"]) >= 1_000_000
    assert EXP.estimate_seconds(EXP.config("smoke"), "cpu") < EXP.estimate_seconds(EXP.config("quick"), "cpu")


def test_the_written_call_prior_passes_through_the_write_up_cpu_figures():
    wall = published.load("jacobian")
    cpu = wall[(wall["figure"] == "jacobian-wall") & (wall["device"] == "CPU")]
    complexity = jacobian.COMPLEXITY[jacobian.AS_WRITTEN]
    for val, seconds in zip(cpu["val"], cpu["value"]):
        assert sum(c * t for c, t in zip(complexity.prior_coefficients(), complexity.terms(int(val)))) == pytest.approx(seconds)


def test_the_heap_term_counts_only_without_the_malloc_setting_crossover_gives_its_runs():
    written = jacobian.COMPLEXITY[jacobian.AS_WRITTEN].bytes
    assert written(100, True) > 2 * written(100, False)
    assert jacobian.heap_keeps_blocks("cpu", {}) == versions.GLIBC
    assert not jacobian.heap_keeps_blocks("cpu", versions.run_environment(EXP.malloc_mmap_threshold))
    assert not jacobian.heap_keeps_blocks("cuda:0", {})  # the caching allocator reuses the blocks


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
    assert [p.params["val"] for p in EXP.points(config, "cuda:0") if p.variant == jacobian.MOVE] == [5, 10]


def test_the_estimator_refuses_the_640_gb_vectorized_call_before_allocating_it():
    config = EXP.config("smoke", SMALL | {"memory_fraction": 1.0, "budget_s": 36_000.0})
    with pytest.raises(SkipPoint) as caught:
        EXP.workload(Point("cpu", jacobian.VECTORIZED, {"val": 1000}), config, RunState())
    estimate = caught.value.metrics
    assert estimate["estimated_bytes"] >= 640e9 and "GB" in str(caught.value) and "memory_fraction" in str(caught.value)
    assert estimate["estimated_seconds"] > 0 and estimate["time_fitted_on_vals"] == [1, 4]


@pytest.mark.full
def test_the_time_budget_skips_with_the_quadratic_estimate(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", lambda device: 1e15)
    config = EXP.config("smoke", SMALL | {"budget_s": 0.1})
    run = RunState()
    for val in (1000, 2000):  # the second estimate reuses the run's calibration
        with pytest.raises(SkipPoint, match="budget_s") as caught:
            EXP.estimate(Point("cpu", jacobian.AS_WRITTEN, {"val": val}), config, run)
        a, b = caught.value.metrics["time_coefficients"]
        assert caught.value.metrics["estimated_seconds"] == pytest.approx(a * 400 * val + b * 400 * val**2)
    key = ("calibration", "cpu", jacobian.AS_WRITTEN, torch.get_num_threads())  # a point without threads: the process's
    assert list(run.memo) == [key]
    assert [v for v, _ in run.memo[key]] == [1, 4]


def test_a_run_keeps_its_calibrations_to_itself_and_the_experiment_keeps_nothing(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", lambda device: 1e15)
    config = EXP.config("smoke", SMALL)
    first, second = RunState(), RunState()
    EXP.estimate(Point("cpu", jacobian.TUNED, {"val": 5}), config, first)
    assert first.memo and not second.memo
    EXP.estimate(Point("cpu", jacobian.TUNED, {"val": 5}), config, second)
    assert second.memo.keys() == first.memo.keys()  # the second run calibrated for itself
    assert set(vars(EXP)) == {"_analysis", "_charts", "writeup"}  # its package's parts, bound once; no run's state


def _earlier_row(val: int, median: float, threads: int, status: str = "ok", variant=jacobian.AS_WRITTEN) -> dict:
    return {"device": "cpu", "variant": variant, "params": {"val": val}, "status": status, "median": median,
            "torch_threads": threads}


def test_the_fit_follows_this_runs_earlier_points_with_the_same_threads(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", lambda device: 1e15)
    a, b = 1e-4, 2e-6
    seconds = lambda v: a * 400 * v + b * 400 * v * v
    run = RunState()
    run.rows = [_earlier_row(30, seconds(30), 1), _earlier_row(100, seconds(100), 1),
                _earlier_row(300, 1e3, 2),                          # other threads
                _earlier_row(200, 1e3, 1, status="skipped"),         # not measured
                _earlier_row(400, 1e3, 1, variant=jacobian.TUNED)]  # another method
    config = EXP.config("smoke", SMALL | {"budget_s": 36_000.0})
    point = Point("cpu", jacobian.AS_WRITTEN, {"val": 150}, threads=1, threads_setting="1")
    estimate = EXP.estimate(point, config, run)
    assert estimate["time_fitted_on_vals"] == [30, 100] and not run.memo  # no calibration was needed
    assert estimate["time_coefficients"] == pytest.approx([a, b], rel=1e-6)


def test_the_time_model_fit_recovers_its_coefficients_without_negative_values():
    terms = jacobian.COMPLEXITY[jacobian.AS_WRITTEN].terms
    vals = [1, 4, 10, 30, 100]
    seconds = [2e-4 * 400 * v + 3e-6 * 400 * v * v for v in vals]
    assert jacobian.fit_time_model([terms(v) for v in vals], seconds) == pytest.approx([2e-4, 3e-6], rel=1e-6)
    flat = jacobian.fit_time_model([(1.0, v) for v in vals], [1.0, 0.9, 0.8, 0.7, 0.6])
    assert (flat >= 0).all()


@pytest.mark.full
def test_a_run_records_measured_and_skipped_points_with_their_estimates(swept):
    ok = swept[swept["point_status"] == "ok"]
    assert set(ok["variant"]) == {jacobian.AS_WRITTEN, jacobian.VECTORIZED, *jacobian.PER_SAMPLE}
    assert (ok["torch_threads"] == 1).all() and ok["estimated_seconds"].notna().all()
    assert set(ok["per_sample"]) == {"one Jacobian"}
    assert (ok["warmup_calls"] == 1).all()  # the budget leaves room for a warm-up call everywhere
    skipped = analysis.skipped(swept)
    assert list(zip(skipped["variant"], skipped["val"])) == [(jacobian.VECTORIZED, CHECKED_VAL)]
    assert skipped["estimated_gb"].iloc[0] > 0 and "memory_fraction" in skipped["reason"].iloc[0]


@pytest.mark.full
def test_every_method_matches_the_written_call_in_the_records(swept):
    table = analysis.correctness(swept)
    checked = set(zip(table["variant"], table["val"]))
    assert {(m, v) for m in jacobian.PER_SAMPLE for v in (2, CHECKED_VAL)} <= checked
    assert (table["max_abs_diff_vs_naive"] < 1e-5).all()
    written = table[table["variant"] == jacobian.AS_WRITTEN].set_index("val")
    assert written.loc[CHECKED_VAL, "nonzero_fraction"] == pytest.approx(1 / CHECKED_VAL)
    assert written.loc[CHECKED_VAL, "off_block_nonzeros"] == 0
    beyond = swept[(swept["val"] == 50) & (swept["point_status"] == "ok")]
    assert beyond["max_abs_diff_vs_naive"].isna().all()  # the written call does not fit there


@pytest.mark.full
def test_cpu_only_records_need_a_gpu_for_the_claims(swept):
    figures = published.load("jacobian")
    assert [v.outcome for v in EXP.verdicts(swept, figures)] == [NEEDS_GPU] * 3
    assert all(chart.to_dict() for chart in charts.charts(swept, figures))
    assert set(EXP.tables(swept)) == set(analysis.TABLES)


def test_the_move_code_path_runs_on_any_device():
    config = EXP.config("smoke", SMALL)
    row = runner.measure_point(EXP, Point("cpu", jacobian.MOVE, {"val": 10}), config)
    assert row["status"] == "ok" and row["unit"] == "move" and row["n"] == config["repeats"]
    assert row["metrics"]["estimated_bytes"] > 0 and "max_abs_diff_vs_naive" not in row["metrics"]


@pytest.mark.skipif(not CUDA_DEVICES, reason="the GPU points need a CUDA device")
@pytest.mark.parametrize("device", CUDA_DEVICES or ["cuda:0"])
def test_gpu_points_match_the_written_call_and_record_their_peak_memory(device):
    config = EXP.config("smoke", SMALL)
    run = RunState()
    for variant in (jacobian.AS_WRITTEN, jacobian.TUNED, jacobian.MOVE):
        row = runner.measure_point(EXP, Point(device, variant, {"val": 6}), config, run)
        run.rows.append(row)
        assert row["status"] == "ok" and row["metrics"]["peak_bytes"] > 0
    assert run.rows[1]["metrics"]["max_abs_diff_vs_naive"] < 1e-5


# -- analysis on hand-made rows ----------------------------------------------------------------------------
def _wall(device: str, val: int) -> float:
    return published.entry(f"jacobian-wall.{device}.val{val}")["value"]


def synthetic(cpu: dict[int, float], gpu: dict[int, float], move_s: float = None, **fields) -> pd.DataFrame:
    """The written call's seconds per val on one machine's CPU and GPU, a per-sample method on the CPU."""
    entries = [{"device": device, "variant": jacobian.AS_WRITTEN, "val": val, "median_s": s} | fields
               for device, times in (("cpu", cpu), ("cuda:0", gpu)) for val, s in times.items()]
    entries += [{"device": "cpu", "variant": jacobian.TUNED, "val": val, "median_s": 1e-4} | fields
                for val in (100, 1000)]
    if move_s is not None:
        entries.append({"device": "cuda:0", "variant": jacobian.MOVE, "val": 100, "median_s": move_s} | fields)
    return hand_rows(entries, ("val",))


def test_verdicts_follow_the_records():
    figures = published.load("jacobian")
    move = published.entry("jacobian-move.gpu")["value"]
    cpu, gpu = {v: _wall("cpu", v) for v in (100, 1000)}, {v: _wall("gpu", v) for v in (100, 1000)}
    as_published = EXP.verdicts(synthetic(cpu, gpu, move), figures)
    assert [v.outcome for v in as_published] == [REPRODUCED] * 3
    assert all(v.basis == "measured" for v in as_published)
    reversed_ = EXP.verdicts(synthetic(gpu, cpu, 25 * move), figures)
    assert [v.outcome for v in reversed_] == [NOT_REPRODUCED] * 3
    assert [v.outcome for v in EXP.verdicts(pd.DataFrame(), figures)] == [NO_DATA] * 3


def test_claim_texts_and_the_about_page_take_their_figures_from_published_json():
    texts = [v.claim for v in EXP.verdicts(pd.DataFrame(), published.load("jacobian"))]
    assert f"{_wall('gpu', 100):g} s" in texts[0] and f"{_wall('cpu', 100):g} s" in texts[0]
    assert f"{published.entry('jacobian-move.gpu')['value'] * 1e3:g} ms" in texts[2]
    assert published.figure_text("jacobian-wall.gpu.val1000") in EXP.about()["Claim"]
    assert {"Claim", "Measured", "Why"} <= {k for k, v in EXP.about().items() if v}


def test_a_verdict_on_an_extrapolated_written_call_is_estimated_and_says_from_which_vals():
    a, b = 1e-4, 2e-6
    cpu = {v: a * 400 * v + b * 400 * v * v for v in (10, 30, 100)}
    gpu = {v: 2 * cpu[v] for v in (10, 30, 100)}
    at_100, at_1000, _ = EXP.verdicts(synthetic(cpu, gpu), published.load("jacobian"))
    assert at_100.outcome == REPRODUCED and at_100.basis == "measured"
    assert at_1000.outcome == ESTIMATED and at_1000.basis == "estimated"
    assert "fitted to val 30 and 100" in at_1000.evidence
    assert "if it holds, the claim is not reproduced" in at_1000.evidence


def test_the_gpu_and_cpu_are_paired_by_machine_and_configuration():
    figures = published.load("jacobian")
    cpu = synthetic({100: _wall("cpu", 100)}, {}, config_id="c1")
    gpu = synthetic({}, {100: _wall("gpu", 100)}, config_id="c2")
    assert EXP.verdicts(pd.concat([cpu, gpu]), figures)[0].outcome == NO_DATA
    other_machine = synthetic({}, {100: _wall("gpu", 100)}, machine_id="m2", machine="m2")
    assert EXP.verdicts(pd.concat([cpu, other_machine]), figures)[0].outcome == NO_DATA
    same = pd.concat([cpu, synthetic({}, {100: _wall("gpu", 100)}, config_id="c1")])
    measured = analysis.written_call_pairs(same, 100)
    ratio = float(measured["naive_s"].iloc[0] / measured["cpu_naive_s"].iloc[0])
    shared_speedup = shared.speedups(same[same["variant"] == jacobian.AS_WRITTEN])["speedup"].iloc[0]
    assert ratio == pytest.approx(1 / shared_speedup)  # the shared pairing rule on measured rows


def test_the_latest_complete_run_of_a_point_is_the_one_compared():
    figures = published.load("jacobian")
    old = synthetic({100: _wall("gpu", 100)}, {100: _wall("cpu", 100)}, run_id="r0",
                    started="2025-01-01T00:00:00+00:00")
    new = synthetic({100: _wall("cpu", 100)}, {100: _wall("gpu", 100)})
    assert EXP.verdicts(pd.concat([old, new]), figures)[0].outcome == REPRODUCED


def test_the_written_call_is_extrapolated_to_1000_from_its_quadratic_fit():
    a, b = 1e-4, 2e-6
    cpu = {v: a * 400 * v + b * 400 * v * v for v in (10, 30, 100)}
    times = analysis.naive_times(synthetic(cpu, {}), 1000)
    row = times.set_index("device").loc["cpu"]
    assert row["naive_s"] == pytest.approx(a * 400e3 + b * 400e6, rel=1e-6)
    assert row["naive_basis"].startswith("extrapolated")
    gains = analysis.gains_over_written(synthetic(cpu, {})).set_index("val")
    assert gains.loc[100, "naive_basis"] == "measured"
    assert gains.loc[1000, "gain"] == pytest.approx(row["naive_s"] / 1e-4)
    assert list(gains.index) == [100, 1000]


def _written_call_rows(relative: float) -> pd.DataFrame:
    """The written call timed at val 100 and 1000 on a CPU and a GPU 5% slower, samples `relative` apart."""
    spread = lambda t: [t * (1 + relative * x) for x in (-1, -0.5, 0, 0.5, 1)]
    return hand_rows([{"device": device, "variant": jacobian.AS_WRITTEN, "val": val, "median_s": t * val / 100,
                       "samples_s": spread(t * val / 100)}
                      for device, t in (("cpu", 1.0), ("cuda:0", 1.05)) for val in (100, 1000)], ("val",))


def test_the_written_calls_gpu_over_cpu_is_decided_on_its_interval():
    figures = published.load("jacobian")
    slower, faster, _ = EXP.verdicts(_written_call_rows(0.3), figures)
    assert slower.outcome == faster.outcome == TOO_CLOSE and "straddles the threshold 1" in slower.evidence
    slower, faster, _ = EXP.verdicts(_written_call_rows(0.0), figures)
    assert (slower.outcome, faster.outcome) == (REPRODUCED, NOT_REPRODUCED)
    assert slower.interval.startswith("1.05 (95% CI 1.05–1.05")


def test_a_verdict_extrapolates_the_written_call_at_most_ten_times_past_the_vals_timed():
    """The lent H200's smoke run timed the written call at val 2 and 6; the quadratic fitted to them read 115 min at
    val=1000 on its GPU (the write-up: 3.2). A verdict reaches 10x past the larger val (the quick preset's 100 -> 1,000);
    the gains table still draws its labelled extrapolations."""
    figures = published.load("jacobian")
    a, b = 1e-4, 2e-6
    small = {v: a * 400 * v + b * 400 * v * v for v in (2, 6)}
    rows = synthetic(small, small)
    assert analysis.written_call_pairs(rows, 1000).empty
    assert not analysis.naive_times(rows, 1000).empty  # the same fit, unbounded, for the gains table
    at_1000 = next(v for v in EXP.verdicts(rows, figures) if "val=1000" in v.claim)
    assert at_1000.outcome == NO_DATA and at_1000.finding.startswith("The written call was timed on a CPU and a GPU")
    assert "at most 10x past the larger val timed (val=100 or more here)" in at_1000.finding
    reach = {v: a * 400 * v + b * 400 * v * v for v in (30, 100)}
    assert not analysis.written_call_pairs(synthetic(reach, reach), 1000).empty
