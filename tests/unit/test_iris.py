from pathlib import Path

import pandas as pd
import pytest

from core import devices, published
from core.experiments.iris import analysis, charts, model
from core.experiments.iris import experiment as iris
from core.experiments.iris.model import Training, thinned
from core.measure.experiment import Point, RunState
from core.params import ConfigError
from core.present.analysis import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED
from core.store import results
from tests.helpers import hand_rows, timing_only_rows

EXP = iris.EXPERIMENT
QUICK_INTERVALS = (1, 10, 100, 200, 1000, 2000, iris.NEVER)  # the quick preset's: every interval of the write-up
INTERVALS = (1, 10, 100, 200, iris.NEVER)  # the timed run's: a shorter run, reading as often
EPOCHS = 400
CUDA_DEVICES = [d for d in devices.available() if devices.kind(d) == "cuda"]
FIGURES = published.load("iris")


@pytest.fixture(scope="module")
def swept(one_thread, tmp_path_factory) -> pd.DataFrame:
    """One CPU run of every variant over the write-up's intervals, with one timed repeat."""
    return timing_only_rows("iris", {"epochs": EPOCHS, "log_every": INTERVALS, "repeats": 1},
                            tmp_path_factory.mktemp("iris-results"))


def test_presets_are_valid_and_smoke_is_small():
    for preset in ("smoke", "quick", "paper"):
        EXP.config(preset)
    assert EXP.config("paper")["epochs"] == iris.PAPER_EPOCHS
    assert EXP.estimate_seconds(EXP.config("smoke"), "cpu") < EXP.estimate_seconds(EXP.config("quick"), "cpu")


@pytest.mark.parametrize("overrides, field, words", [
    ({"epochs": 0}, "epochs", "out of range"),
    ({"log_every": (1, -5)}, "log_every", "out of range"),
    ({"log_every": (1, 500)}, "log_every", "more than epochs (200)"),
    ({"log_every": (10, 10)}, "log_every", "twice"),
    ({"lr": 0.0}, "lr", "out of range"),
])
def test_bad_intervals_and_epoch_counts_name_the_field(overrides, field, words):
    with pytest.raises(ConfigError) as caught:
        EXP.config("smoke", overrides)
    assert caught.value.field == field and words in str(caught.value)


def test_intervals_parse_from_text_with_zero_for_never():
    assert EXP.param("log_every").parse("1, 200,0") == (1, 200, 0)
    with pytest.raises(ConfigError, match="log_every"):
        EXP.param("log_every").parse("1,never")


def test_points_cover_every_interval_one_tuned_run_four_hook_checks_and_the_read_cost():
    points = EXP.points(EXP.config("quick"), "cpu")
    written = [p.params["log_every"] for p in points if p.variant == iris.AS_WRITTEN]
    assert written == list(QUICK_INTERVALS)
    assert [p.params for p in points if p.variant == iris.TUNED] == [{"log_every": 1}]
    hooks = {(p.params["call"], p.params["hook"]) for p in points if p.variant == iris.HOOK_CHECK}
    assert hooks == {(c, h) for c in iris.CALLS for h in (False, True)}
    assert [p.params for p in points if p.variant == iris.READ_COST] == [{"block_epochs": 100}]
    only_tuned = EXP.points(EXP.config("quick", {"variants": (iris.TUNED,)}), "cuda:0")
    assert [p.variant for p in only_tuned] == [iris.TUNED]


@pytest.mark.full
def test_a_training_sample_is_one_run_of_the_configured_epochs(swept):
    trained = swept[swept["variant"].isin([iris.AS_WRITTEN, iris.TUNED])]
    assert set(trained["unit"]) == {"epoch"} and set(trained["per_call"]) == {EPOCHS}
    assert set(trained["per_sample"]) == {f"{EPOCHS:,} epochs"}
    assert trained["n"].eq(1).all() and trained["noisy"].isna().all()  # one sample: never called quiet


@pytest.mark.full
def test_the_hook_check_counts_its_calls_before_timing_one_forward_call(one_thread):
    config = EXP.config("smoke")
    workload = EXP.workload(Point("cpu", iris.HOOK_CHECK, {"call": "model(x)", "hook": True}), config, RunState())
    assert workload.metrics == {"hook_calls": iris.CHECK_CALLS, "check_calls": iris.CHECK_CALLS}
    assert workload.unit == "forward call" and workload.per_call == 1
    assert workload.block_seconds == config["block_seconds"]


@pytest.mark.full
def test_each_interval_records_its_number_of_loss_reads_and_syncs(swept):
    written = swept[swept["variant"] == iris.AS_WRITTEN].set_index("log_every")
    assert sorted(written.index) == sorted(INTERVALS)
    for k in INTERVALS:
        expected = EPOCHS // k if k else 0
        assert written.loc[k, "host_syncs"] == expected, k
        assert written.loc[k, "losses_received"] == expected, k
        assert written.loc[k, "loss_curve_epochs"][-1:] == ([EPOCHS] if k else [])
    tuned = swept[swept["variant"] == iris.TUNED].iloc[0]
    assert tuned["host_syncs"] == 1 and tuned["losses_received"] == EPOCHS
    assert not tuned["cuda_graph"]  # no graph on the CPU


def test_the_loop_counts_every_read_it_makes(one_thread):
    training = Training("cpu", seed=0, lr=0.01, epochs=30)
    training.as_written(7)
    assert training.reads == 4 and [e for e, _ in training.logged] == [7, 14, 21, 28]
    training.buffered()
    assert training.reads == 1 and len(training.logged) == 30


def test_the_loss_buffer_has_room_for_the_graph_helpers_extra_steps(one_thread):
    fresh = Training("cpu", seed=0, lr=0.01, epochs=1)
    fresh.buffered()
    stepped = Training("cpu", seed=0, lr=0.01, epochs=1)
    for _ in range(model.CAPTURE_STEPS):  # what core.measure.graphs runs before handing back the replay
        stepped.step_and_record()  # past the one epoch: an index out of the buffer would raise here
    stepped.buffered()  # starts again from the seeded weights and the buffer's first entry
    assert stepped.logged == fresh.logged and len(stepped.logged) == 1


def test_a_failed_capture_falls_back_to_the_eager_step_and_records_why(monkeypatch, one_thread):
    monkeypatch.setattr(model.graphs, "replay_or_eager", lambda step, device, watched, enabled=True: (step, "boom"))
    workload = EXP.workload(Point("cpu", iris.TUNED, {"log_every": 1}), EXP.config("smoke"), RunState())
    assert workload.metrics["cuda_graph"] is False and workload.metrics["cuda_graph_error"] == "boom"
    assert workload.unit == "epoch" and workload.per_call == EXP.config("smoke")["epochs"] and workload.warmup == 1


@pytest.mark.full
def test_tuned_learns_the_same_model_as_written_from_the_same_start(swept):
    every = swept[(swept["variant"] == iris.AS_WRITTEN) & (swept["log_every"] == 1)].iloc[0]
    tuned = swept[swept["variant"] == iris.TUNED].iloc[0]
    assert tuned["final_loss"] == pytest.approx(every["final_loss"], rel=1e-6)
    assert tuned["loss_curve"] == pytest.approx(every["loss_curve"], rel=1e-6)
    assert every["loss_curve"][-1] < every["loss_curve"][0]  # it did learn
    same = analysis.same_model(swept).iloc[0]
    assert same["tuned_vs_as_written"] < 1e-6 and same["host_syncs_tuned"] == 1
    assert same["as_written_vs_cpu"] == 0  # the CPU against itself


@pytest.mark.skipif(not CUDA_DEVICES, reason="CUDA graph capture needs a CUDA device")
@pytest.mark.parametrize("device", CUDA_DEVICES or ["cuda:0"])
def test_cuda_graph_replay_reaches_the_cpu_loss_with_one_read(device):
    cpu, gpu = Training("cpu", 0, 0.01, 300), Training(device, 0, 0.01, 300)
    cpu.as_written(1)
    assert gpu.use_graph() is None and gpu.graphed
    for _ in range(2):  # a second run starts again from the seeded weights
        gpu.buffered()
        assert gpu.reads == 1 and [e for e, _ in gpu.logged] == list(range(1, 301))
        assert [v for _, v in gpu.logged] == pytest.approx([v for _, v in cpu.logged], rel=1e-4)
        assert gpu.evaluate()[0] == pytest.approx(cpu.evaluate()[0], rel=1e-4)


@pytest.mark.full
def test_only_model_call_runs_the_forward_hook(swept):
    checks = analysis.hook_checks(swept).set_index(["call", "hook"])["hook_calls"]
    assert checks[("model(x)", True)] == iris.CHECK_CALLS
    assert checks[("model.forward(x)", True)] == 0
    assert checks[("model(x)", False)] == 0 and checks[("model.forward(x)", False)] == 0
    assert EXP.verdicts(swept, FIGURES)[2].outcome == REPRODUCED


def test_a_hook_seen_through_forward_is_not_reproduced():
    rows = hand_rows([{"device": "cpu", "variant": iris.HOOK_CHECK, "call": call, "hook": True,
                       "hook_calls": 10, "check_calls": 10, "us_per_call": 5.0} for call in iris.CALLS],
                     ("call", "hook"))
    assert EXP.verdicts(rows, FIGURES)[2].outcome == NOT_REPRODUCED


@pytest.mark.full
def test_cpu_only_records_need_a_gpu_for_the_gpu_claims(swept):
    assert [v.outcome for v in EXP.verdicts(swept, FIGURES)] == [NEEDS_GPU, NEEDS_GPU, REPRODUCED]


def _with_fake_gpu(rows: pd.DataFrame, per_epoch_factor: float, every_epoch_factor: float) -> pd.DataFrame:
    """A flat CPU (every interval at its 'never' cost, so the factors alone decide), then the same as a
    GPU on the same machine: slower by one factor, and by another when reading every epoch. Without the read-cost
    blocks: the claims fall back on the as-written runs (the blocks are under test in test_iris_read_cost)."""
    cpu = rows[rows["variant"] != iris.READ_COST].copy()
    trained = cpu["variant"] != iris.HOOK_CHECK
    never = cpu[(cpu["variant"] == iris.AS_WRITTEN) & (cpu["log_every"] == iris.NEVER)]["us_per_epoch"].iloc[0]
    cpu.loc[trained, "us_per_epoch"] = never
    gpu = cpu[trained].copy()
    factor = per_epoch_factor * gpu["log_every"].map(lambda k: every_epoch_factor if k == 1 else 1.0)
    gpu = gpu.assign(device="cuda:0", median_s=gpu["median_s"] * factor, us_per_epoch=gpu["us_per_epoch"] * factor)
    return pd.concat([cpu, gpu], ignore_index=True)


@pytest.mark.full
def test_gpu_verdicts_follow_the_records(swept):
    slow_gpu = EXP.verdicts(_with_fake_gpu(swept, 4.0, 1.1), FIGURES)
    assert [v.outcome for v in slow_gpu[:2]] == [REPRODUCED, REPRODUCED]
    assert "4.40x the CPU's time" in slow_gpu[0].evidence and "1.10x the time of never" in slow_gpu[1].evidence
    fast_gpu_costly_reads = EXP.verdicts(_with_fake_gpu(swept, 0.25, 3.0), FIGURES)
    assert [v.outcome for v in fast_gpu_costly_reads[:2]] == [NOT_REPRODUCED, NOT_REPRODUCED]


def test_the_cpu_and_gpu_are_paired_only_on_one_machine_and_configuration():
    def every_epoch(device, machine_id="m1", config_id="c1", us=100.0):
        return {"device": device, "variant": iris.AS_WRITTEN, "log_every": 1, "machine_id": machine_id,
                "config_id": config_id, "us_per_epoch": us, "seconds_per_20k_epochs": us * 0.02,
                "median_s": us * 1e-3, "host_syncs": 1000}
    other_machine = hand_rows([every_epoch("cpu"), every_epoch("cuda:0", machine_id="m2", us=400.0)], ("log_every",))
    other_config = hand_rows([every_epoch("cpu"), every_epoch("cuda:0", config_id="c2", us=400.0)], ("log_every",))
    same = hand_rows([every_epoch("cpu"), every_epoch("cuda:0", us=400.0)], ("log_every",))
    assert EXP.verdicts(other_machine, FIGURES)[0].outcome == NO_DATA
    assert EXP.verdicts(other_config, FIGURES)[0].outcome == NO_DATA
    verdict = EXP.verdicts(same, FIGURES)[0]
    assert verdict.outcome == REPRODUCED and "4.00x the CPU's time" in verdict.evidence
    assert "CPU (on m1): 100 µs per epoch" in verdict.evidence  # the machine it was, never "here" for any
    two = hand_rows([every_epoch("cpu"), every_epoch("cuda:0", us=400.0),
                     every_epoch("cpu", machine_id="m2", us=300.0) | {"machine": "m2"}], ("log_every",))
    assert "CPU (median over 2 machines): 200 µs per epoch" in EXP.verdicts(two, FIGURES)[0].evidence


@pytest.mark.full
def test_a_repeated_run_does_not_double_the_per_device_tables(swept):
    again = swept.assign(run_id="iris-later", started="2999-01-01T00:00:00+00:00",
                         us_per_epoch=swept["us_per_epoch"] * 2, median_s=swept["median_s"] * 2)
    both = pd.concat([swept, again], ignore_index=True)
    costs, first = analysis.read_costs(both), analysis.read_costs(swept)
    assert len(costs) == 1 and costs["run_id"].iloc[0] == "iris-later"
    assert costs["us_per_epoch_never"].iloc[0] == pytest.approx(2 * first["us_per_epoch_never"].iloc[0])
    assert len(analysis.same_model(both)) == 1 and len(analysis.hook_checks(both)) == 4


@pytest.mark.full
def test_published_figures_come_from_published_json_only(swept):
    total_cpu, total_gpu = published.entry("iris-total.cpu"), published.entry("iris-total.gpu")
    every_2000 = published.entry("iris-log-interval.gpu.log_every2000")
    claim = EXP.about()["Claim"]
    assert published.figure_text("iris-total.cpu") in claim and published.figure_text("iris-total.gpu") in claim
    cpu_wins, logging, _ = EXP.verdicts(_with_fake_gpu(swept, 4.0, 1.1), FIGURES)
    assert f"published {total_gpu['value'] / total_cpu['value']:.2f}x" in cpu_wins.evidence
    assert f"{total_gpu['value'] / every_2000['value']:.2f}x the time of reading every 2,000" in logging.evidence
    package = Path(iris.__file__).parent
    source = " ".join(p.read_text(encoding="utf-8") for p in package.iterdir() if p.suffix in (".py", ".md"))
    typed = [f"{v:g}" for v in FIGURES["value"] if f"{v:g}" in source]
    assert typed == [], f"published figures typed into the package: {typed}"


def test_analysis_and_charts_on_no_records():
    empty = results.rows_frame([])
    assert [v.outcome for v in EXP.verdicts(empty, FIGURES)] == [NO_DATA] * 3
    assert analysis.read_costs(empty).empty and analysis.same_model(empty).empty and analysis.hook_checks(empty).empty
    assert charts.charts(empty, FIGURES) == []


@pytest.mark.full
def test_charts_show_published_series_beside_ours(swept):
    drawn = charts.charts(swept, FIGURES)
    assert len(drawn) == 5
    specs = [str(c.to_dict()) for c in drawn]
    assert all("published" in s for s in specs[:2]) and "published" in specs[3]
    assert "model.forward(x)" in specs[4]


@pytest.mark.full
def test_repeated_runs_are_bars_of_their_own_never_stacked(swept):
    again = swept.assign(run_id="iris-later", started="2999-01-01T00:00:00+00:00",
                         us_per_epoch=swept["us_per_epoch"] * 3)
    spec = charts.per_epoch_cost(analysis.training_rows(pd.concat([swept, again])), FIGURES).to_dict()
    values = next(iter(spec["datasets"].values()))
    ours = [v for v in values if v["bar"] == "CPU · as written, read every epoch" and v["source"] == "measured"]
    every = swept[(swept["variant"] == iris.AS_WRITTEN) & (swept["log_every"] == 1)]["us_per_epoch"].iloc[0]
    assert sorted(v["us_per_epoch"] for v in ours) == pytest.approx([every, 3 * every])
    assert len({v["panel"] for v in ours}) == 2   # one panel per run
    bars = [layer for layer in spec["spec"]["layer"] if layer["mark"]["type"] == "bar"]
    assert bars[0]["encoding"]["x"]["stack"] is None and bars[0]["encoding"]["x"]["scale"]["zero"]


@pytest.mark.full
def test_read_costs_give_a_per_read_price_and_the_tuned_epoch(swept):
    costs = analysis.read_costs(swept).iloc[0]
    assert costs["us_per_epoch_never"] > 0 and costs["us_per_epoch_tuned"] > 0 and costs["every_vs_never"] > 0
    assert pd.isna(costs["us_per_read"]) or costs["us_per_read"] > 0   # a cost, or not resolved: never negative
    assert "not resolved" in costs["read_cost"] or "95% CI" in costs["read_cost"]


def test_thinned_keeps_the_ends_and_at_most_the_limit():
    logged = [(e, 1.0 / e) for e in range(1, 1001)]
    kept = thinned(logged, 50)
    assert len(kept) == 50 and kept[0] == (1, 1.0) and kept[-1] == (1000, 0.001)
    assert thinned(logged[:10], 50) == logged[:10]


def test_the_cost_per_read_in_words_is_never_negative_and_hook_counts_read_as_words():
    from core.experiments.iris import analysis as iris_analysis
    from core.present.stats import Interval
    ratio = Interval(1.1, 1.0, 1.2)
    resolved = iris_analysis.ReadCost(12.34, 10.0, 14.5, True, 8, ratio)
    assert iris_analysis.read_text(resolved) == "12.3 µs per read (95% CI 10.0–14.5)"
    floor = iris_analysis.ReadCost(0.0, 0.0, 3.25, False, 8, ratio)
    assert iris_analysis.read_text(floor) == "below 3.2 µs per read, not resolved"
    assert iris_analysis.read_text(None).startswith("the cost per read not measured")
    assert iris_analysis._times(pd.Series([10, 10, 10])) == "10 times"
    assert iris_analysis._times(pd.Series([1])) == "1 time"
    assert iris_analysis._times(pd.Series([10, 9])) == "10 and 9 times"
