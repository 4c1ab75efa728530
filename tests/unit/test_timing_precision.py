"""Points timed until their median is known to a stated precision, and several points' samples taken in turn
(issue 45): the rules on chosen samples, and real measurements' records of why they stopped. No timing figure is
asserted."""
import itertools

import torch

from core.measure import timing
from core.measure.timing import MAX_SAMPLES, MIN_SAMPLES, Sampler, Workload


def sampled(times, precision: float = 0.05, budget_s: float = None, repeats: int = 2) -> Sampler:
    """A sampler whose calls 'take' the given times, one after another (a fake clock: no timing here)."""
    times = iter(times)
    sampler = Sampler(Workload(lambda: None, "call", repeats=repeats, warmup=0, budget_s=budget_s,
                               precision=precision), "cpu")
    sampler._call = lambda: next(times)
    sampler.warm, sampler.cold, sampler.spent = (), False, 0.0
    while sampler.wanted():
        sampler.take()
    return sampler


def test_sampling_stops_once_the_medians_interval_is_narrow_enough():
    found = sampled(itertools.cycle([1.0, 1.01, 0.99, 1.0, 1.02, 1.0]))
    assert found.stopped == "within 5%" and len(found.samples) == 6  # five samples cannot bound a median at 95%
    assert found.measurement().half_width <= 0.05


def test_noisy_samples_are_taken_up_to_the_cap_when_time_allows():
    found = sampled(itertools.cycle([0.5, 1.5]), budget_s=1e6)
    assert found.stopped == f"{MAX_SAMPLES} samples" and len(found.samples) == MAX_SAMPLES


def test_noisy_samples_stop_when_the_budget_would_be_overrun():
    found = sampled(itertools.cycle([0.5, 1.5]), budget_s=8.0)
    assert found.stopped == "budget" and MIN_SAMPLES < len(found.samples) < MAX_SAMPLES
    assert sum(found.samples) <= 8.0


def test_without_a_budget_the_extra_samples_take_at_most_twice_the_first_ones():
    found = sampled(itertools.cycle([1.0, 2.0]), precision=0.01)
    first = sum(found.samples[:MIN_SAMPLES])
    assert found.stopped == "budget" and sum(found.samples[MIN_SAMPLES:]) <= timing.EXTRA_TIME * first


def test_without_a_precision_the_repeats_alone_are_taken():
    found = sampled(itertools.cycle([0.5, 1.5]), precision=None, repeats=3)
    assert len(found.samples) == 3 and found.stopped == ""


def test_a_measurement_to_a_precision_takes_at_least_five_samples_and_says_why_it_stopped():
    found = timing.measure(lambda: sum(range(100)), "cpu", repeats=2, precision=0.5)
    assert found.n >= MIN_SAMPLES and found.stopped
    assert {"stopped", "half_width"} <= found.to_dict().keys()
    plain = timing.measure(lambda: None, "cpu", repeats=2)
    assert plain.n == 2 and not plain.stopped and "stopped" not in plain.to_dict()


def test_interleaved_samplers_take_their_samples_in_turn_each_at_its_own_threads():
    """Two settings of one call (one thread, two threads) alternate sample by sample: a drift falls on both."""
    seen = []
    call = lambda: seen.append(torch.get_num_threads())
    samplers = [Sampler.of(Workload(call, "call", repeats=4, warmup=1, threads=t), "cpu") for t in (1, 2)]
    seen.clear()  # the warm-ups
    timing.interleaved(samplers, failed=lambda sampler, error: None)
    assert seen == [1, 2] * 4
    assert [s.measurement().n for s in samplers] == [4, 4]


def test_a_sampler_that_fails_is_dropped_and_the_others_go_on():
    def broken():
        raise RuntimeError("device error")
    good = Sampler.of(Workload(lambda: None, "call", repeats=3, warmup=0), "cpu")
    bad = Sampler.of(Workload(broken, "call", repeats=3, warmup=0), "cpu")
    failures = []
    timing.interleaved([bad, good], failed=lambda sampler, error: failures.append((sampler, str(error))))
    assert failures == [(bad, "device error")] and good.measurement().n == 3


def test_the_runner_takes_a_configurations_points_in_turn_and_records_each_setting():
    from core.measure import runner
    from core.measure.experiment import Experiment, Point, SkipPoint

    seen = []

    class Alternating(Experiment):
        name = "alternating"

        def workload(self, point, config, run):
            if point.params.get("skip"):
                raise SkipPoint("not here")
            return Workload(lambda: seen.append(torch.get_num_threads()), "call", repeats=3, warmup=0)

    points = [(Point("cpu", "v", {}), "a"), (Point("cpu", "v", {}, threads=1, threads_setting="1"), "b"),
              (Point("cpu", "v", {"skip": True}), "c")]
    rows = runner.measure_together(Alternating(), points, {"precision": 0.0})
    default = torch.get_num_threads()
    assert seen == [default, 1] * 3
    assert [(r["status"], r["threads_setting"], r.get("torch_threads")) for r in rows] == [
        ("ok", "default", default), ("ok", "1", 1), ("skipped", "default", None)]
    groups = runner.configurations([p for p, _ in points])
    assert [[i for i, _ in g] for g in groups] == [[1, 2], [3]]
