import pytest
import torch

from core.measure import page_faults, timing
from core.store import results
from core.measure.timing import Measurement, Workload


class Recorder:
    """A fake device sync and a workload that log, in order, what happened."""
    def __init__(self):
        self.events = []

    def sync(self, device):
        self.events.append("sync")

    def work(self):
        self.events.append("call")


def test_measure_syncs_around_every_timed_call_and_keeps_the_warmup_apart():
    rec = Recorder()
    m = timing.measure(rec.work, "cpu", repeats=3, warmup=2, sync=rec.sync)
    assert m.n == 3 and len(m.warmup) == 2 and not m.cold
    assert rec.events == ["sync", "call", "sync"] * 5  # every call, warm-up included, between two syncs


def test_micro_uses_the_device_sync_and_returns_the_requested_samples():
    rec = Recorder()
    m = timing.micro(rec.work, "cpu", repeats=4, block_seconds=0.001, sync=rec.sync)
    assert len(m.samples) == 4
    assert rec.events.count("sync") >= 2 * (4 + 1)
    assert all(s > 0 for s in m.samples)


def test_micro_runs_with_the_threads_torch_really_uses():
    seen = []
    timing.micro(lambda: seen.append(torch.get_num_threads()), "cpu", repeats=2, block_seconds=0.001)
    assert set(seen) == {torch.get_num_threads()}


def test_statistics_on_known_samples():
    m = Measurement((1.0, 2.0, 3.0, 4.0, 100.0))
    assert m.median == 3.0
    assert m.iqr == pytest.approx(2.0)
    assert m.noisy
    steady = Measurement((1.0, 1.01, 0.99, 1.0), warmup=(3.0,))
    assert steady.noisy is False
    assert steady.to_dict() == {"samples": [1.0, 1.01, 0.99, 1.0], "median": 1.0, "iqr": steady.iqr, "noisy": False,
                                "n": 4, "warmup_samples": [3.0], "cold": False}


def test_one_sample_has_no_spread_and_is_never_called_quiet():
    single = Measurement((0.5,))
    assert single.iqr is None and single.noisy is None and single.to_dict()["n"] == 1


class Clock:
    """A fake clock whose calls take `seconds` each (advanced by the work, read by the sync)."""
    def __init__(self, seconds):
        self.now, self.seconds, self.calls = 0.0, seconds, 0

    def work(self):
        self.calls += 1
        self.now += self.seconds


def _run_on(clock, monkeypatch, workload):
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock.now)
    return timing.run(workload, "cpu")


def test_a_budget_cuts_repeats_of_long_calls(monkeypatch):
    clock = Clock(4.0)
    m = _run_on(clock, monkeypatch, Workload(lambda: clock.work(), unit="call", repeats=10, warmup=1, budget_s=20))
    assert m.warmup == (4.0,) and m.samples == (4.0,) * 4 and not m.cold  # 4 + 4 x 4 = 20: a fifth would overrun
    assert clock.calls == 5


def test_a_warmup_that_leaves_no_room_is_the_measurement_itself(monkeypatch):
    clock = Clock(15.0)
    m = _run_on(clock, monkeypatch, Workload(lambda: clock.work(), unit="call", repeats=5, warmup=1, budget_s=20))
    assert m.samples == (15.0,) and m.cold and m.warmup == () and clock.calls == 1


def test_run_sets_up_then_times_with_the_workload_threads():
    seen, order = [], []
    workload = Workload(lambda: seen.append(torch.get_num_threads()), unit="call", repeats=2, warmup=0, threads=1,
                        setup=lambda: order.append("setup"))
    before = torch.get_num_threads()
    m = timing.run(workload, "cpu")
    assert m.n == 2 and order == ["setup"] and set(seen) == {1}
    assert torch.get_num_threads() == before


def test_hooked_workloads_take_their_samples_from_the_stopwatch_laps():
    def fit(watch):
        watch.start()
        for _ in range(3):
            watch.lap("loader")
            watch.lap("steps")
            watch.lap("evaluation")
            watch.close_sample("loader", "steps")
    m = timing.run(Workload(fit, unit="epoch", hooks=True), "cpu")
    assert m.n == 3 and all(s >= 0 for s in m.samples)
    with pytest.raises(RuntimeError, match="closed no sample"):
        timing.run(Workload(lambda watch: None, unit="epoch", hooks=True), "cpu")


def test_stopwatch_samples_add_only_the_named_laps():
    ticks = iter([0.0, 1.0, 3.0, 6.0])
    watch = timing.Stopwatch("cpu", sync=lambda d: None)
    watch.read = lambda: next(ticks)
    watch.start()
    watch.lap("loader")   # 1 s
    watch.lap("steps")    # 2 s
    watch.lap("eval")     # 3 s
    assert watch.close_sample("loader", "steps") == 3.0 and watch.total("eval") == 3.0


def test_call_text_says_what_one_sample_is():
    assert results.call_text("epoch", 1) == "one epoch"
    assert results.call_text("epoch", 2000) == "2,000 epochs"
    assert results.call_text("forward call", 3) == "3 x (forward call)"


def test_a_call_warmed_up_by_the_experiment_is_not_cold():
    m = timing.run(Workload(lambda: None, unit="call", repeats=2, warmup=0, prewarmed=True), "cpu")
    assert m.warmup == () and not m.cold
    assert timing.run(Workload(lambda: None, unit="call", repeats=2, warmup=0), "cpu").cold


def test_page_faults_count_the_pages_a_call_maps_afresh():
    pytest.importorskip("resource", reason="Windows has no getrusage: its page faults go uncounted")
    mapped = 64 * 2**20  # past glibc's largest mmap threshold: a new tensor this large is mapped afresh at each call
    huge_page = 2 * 2**20  # where the kernel backs it with transparent huge pages, one fault each
    assert page_faults.per_call(lambda: torch.ones(mapped // 4), 3) >= mapped / huge_page
    kept = torch.ones(16)
    assert page_faults.per_call(lambda: kept.add(1), 100) < 1  # a small tensor reuses the heap's pages
