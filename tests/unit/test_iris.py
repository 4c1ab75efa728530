import pandas as pd
import pytest
import torch

from core import results, runner
from core.charts import iris as iris_charts
from core.experiments import iris
from core.models.iris import Training, thinned
from core.params import ConfigError
from core.results import RecordWriter
from core.verdicts import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED

EXP = iris.EXPERIMENT
INTERVALS = (1, 10, 100, 200, 1000, 2000, iris.NEVER)
EPOCHS = 2000


@pytest.fixture(scope="module")
def one_thread():
    """Tiny operators on a busy 2-core machine are much slower with two intra-op threads; the tests
    check behaviour, so they run single-threaded and leave the setting as they found it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def swept(one_thread, tmp_path_factory) -> pd.DataFrame:
    """One CPU run of every variant over the write-up's intervals, with one timed repeat."""
    folder = tmp_path_factory.mktemp("iris-results")
    config = EXP.config("smoke", {"epochs": EPOCHS, "log_every": INTERVALS, "repeats": 1})
    writer = RecordWriter("iris", "smoke", config, ["cpu"], results_dir=folder)
    assert runner.run(EXP, config, ["cpu"], writer) == "complete"
    return results.rows_frame(results.load_records(folder), "iris")


def test_presets_are_valid_and_smoke_is_small():
    for preset in ("smoke", "quick", "paper"):
        EXP.config(preset)
    assert EXP.config("paper")["epochs"] == 20_000
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


def test_points_cover_every_interval_one_tuned_run_and_four_hook_checks():
    points = EXP.points(EXP.config("quick"), "cpu")
    written = [p.params["log_every"] for p in points if p.variant == iris.AS_WRITTEN]
    assert written == list(INTERVALS)
    assert [p.params for p in points if p.variant == iris.TUNED] == [{"log_every": 1}]
    hooks = {(p.params["call"], p.params["hook"]) for p in points if p.variant == iris.HOOK_CHECK}
    assert hooks == {(c, h) for c in iris.CALLS for h in (False, True)}
    only_tuned = EXP.points(EXP.config("quick", {"variants": (iris.TUNED,)}), "cuda:0")
    assert [p.variant for p in only_tuned] == [iris.TUNED]


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


def test_the_loop_counts_every_read_it_makes(one_thread):
    training = Training("cpu", seed=0, lr=0.01, epochs=30)
    training.as_written(7)
    assert training.reads == 4 and [e for e, _ in training.logged] == [7, 14, 21, 28]
    training.buffered()
    assert training.reads == 1 and len(training.logged) == 30


def test_tuned_learns_the_same_model_as_written_from_the_same_start(swept):
    every = swept[(swept["variant"] == iris.AS_WRITTEN) & (swept["log_every"] == 1)].iloc[0]
    tuned = swept[swept["variant"] == iris.TUNED].iloc[0]
    assert tuned["final_loss"] == pytest.approx(every["final_loss"], rel=1e-6)
    assert tuned["loss_curve"] == pytest.approx(every["loss_curve"], rel=1e-6)
    assert every["loss_curve"][-1] < every["loss_curve"][0]  # it did learn
    same = iris.same_model(swept).iloc[0]
    assert same["tuned_vs_as_written"] < 1e-6 and same["host_syncs_tuned"] == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graph capture needs a CUDA device")
def test_cuda_graph_replay_reaches_the_cpu_loss_with_one_read():
    cpu, gpu = Training("cpu", 0, 0.01, 300), Training("cuda:0", 0, 0.01, 300)
    cpu.as_written(1)
    gpu.capture()
    gpu.graphed()
    assert gpu.reads == 1 and [e for e, _ in gpu.logged] == list(range(1, 301))
    assert [v for _, v in gpu.logged] == pytest.approx([v for _, v in cpu.logged], rel=1e-4)
    assert gpu.evaluate()[0] == pytest.approx(cpu.evaluate()[0], rel=1e-4)


def test_only_model_call_runs_the_forward_hook(swept):
    checks = iris.hook_checks(swept).set_index(["call", "hook"])["hook_calls"]
    assert checks[("model(x)", True)] == iris.CHECK_CALLS
    assert checks[("model.forward(x)", True)] == 0
    assert checks[("model(x)", False)] == 0 and checks[("model.forward(x)", False)] == 0
    assert iris.hook_verdict(swept).outcome == REPRODUCED


def test_cpu_only_records_need_a_gpu_for_the_gpu_claims(swept):
    outcomes = [v.outcome for v in iris.verdicts(swept, results.load_published("iris"))]
    assert outcomes == [NEEDS_GPU, NEEDS_GPU, REPRODUCED]


def _with_fake_gpu(rows: pd.DataFrame, per_epoch_factor: float, every_epoch_factor: float) -> pd.DataFrame:
    """A flat CPU (every interval at its 'never' cost, so the factors alone decide), then the same as a
    GPU on the same machine: slower by one factor, and by another when reading every epoch."""
    cpu = rows.copy()
    trained = cpu["variant"] != iris.HOOK_CHECK
    never = cpu[(cpu["variant"] == iris.AS_WRITTEN) & (cpu["log_every"] == iris.NEVER)]["us_per_epoch"].iloc[0]
    cpu.loc[trained, "us_per_epoch"] = never
    gpu = cpu[trained].copy()
    factor = per_epoch_factor * gpu["log_every"].map(lambda k: every_epoch_factor if k == 1 else 1.0)
    gpu = gpu.assign(device="cuda:0", median_s=gpu["median_s"] * factor, us_per_epoch=gpu["us_per_epoch"] * factor)
    return pd.concat([cpu, gpu], ignore_index=True)


def test_gpu_verdicts_follow_the_records(swept):
    published = results.load_published("iris")
    slow_gpu = iris.verdicts(_with_fake_gpu(swept, 4.0, 1.1), published)
    assert [v.outcome for v in slow_gpu[:2]] == [REPRODUCED, REPRODUCED]
    fast_gpu_costly_reads = iris.verdicts(_with_fake_gpu(swept, 0.25, 3.0), published)
    assert [v.outcome for v in fast_gpu_costly_reads[:2]] == [NOT_REPRODUCED, NOT_REPRODUCED]


def test_analysis_and_charts_on_no_records():
    empty = pd.DataFrame()
    assert [v.outcome for v in iris.verdicts(empty, results.load_published("iris"))] == [NO_DATA] * 3
    assert iris.read_costs(empty).empty and iris.same_model(empty).empty and iris.hook_checks(empty).empty
    assert iris_charts.charts(empty, results.load_published("iris")) == []


def test_charts_show_published_series_beside_ours(swept):
    charts = iris_charts.charts(swept, results.load_published("iris"))
    assert len(charts) == 5
    specs = [str(c.to_dict()) for c in charts]
    assert all("published" in s for s in specs[:2]) and "published" in specs[3]
    assert "model.forward(x)" in specs[4]


def test_read_costs_give_a_per_read_price_and_the_tuned_epoch(swept):
    costs = iris.read_costs(swept).iloc[0]
    assert costs["us_per_epoch_never"] > 0 and costs["us_per_epoch_tuned"] > 0
    assert costs["us_per_read"] is not None and costs["every_vs_never"] > 0


def test_thinned_keeps_the_ends_and_at_most_the_limit():
    logged = [(e, 1.0 / e) for e in range(1, 1001)]
    kept = thinned(logged, 50)
    assert len(kept) == 50 and kept[0] == (1, 1.0) and kept[-1] == (1000, 0.001)
    assert thinned(logged[:10], 50) == logged[:10]
