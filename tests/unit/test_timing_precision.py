"""Points timed until their median is known to a stated precision (issue 45): the rule on chosen samples, and a real
measurement's record of why it stopped. No timing figure is asserted."""
import itertools

from core.measure import timing
from core.measure.timing import MAX_SAMPLES, MIN_SAMPLES, Measurement, until_precise


def test_sampling_stops_once_the_medians_interval_is_narrow_enough():
    samples = [1.0, 1.01, 0.99, 1.0, 1.02]
    stopped = until_precise(samples, lambda: 1.0, precision=0.05, left_s=100.0)
    assert stopped == "within 5%" and len(samples) == 6  # five samples cannot bound a median at 95%; six can
    assert Measurement(tuple(samples)).half_width <= 0.05


def test_noisy_samples_are_taken_up_to_the_cap_when_time_allows():
    noisy = itertools.cycle([0.5, 1.5])
    samples = [next(noisy) for _ in range(MIN_SAMPLES)]
    assert until_precise(samples, lambda: next(noisy), precision=0.05, left_s=1e6) == f"{MAX_SAMPLES} samples"
    assert len(samples) == MAX_SAMPLES


def test_noisy_samples_stop_when_the_budget_would_be_overrun():
    noisy = itertools.cycle([0.5, 1.5])
    samples = [next(noisy) for _ in range(MIN_SAMPLES)]
    assert until_precise(samples, lambda: next(noisy), precision=0.05, left_s=3.0) == "budget"
    assert MIN_SAMPLES < len(samples) < MAX_SAMPLES


def test_without_a_budget_the_extra_samples_take_at_most_twice_the_first_ones():
    samples = [1.0, 2.0, 1.0, 2.0, 1.0]
    until_precise(samples, lambda: 2.0, precision=0.01, left_s=None)
    assert sum(samples[MIN_SAMPLES:]) <= timing.EXTRA_TIME * 7.0


def test_a_measurement_to_a_precision_takes_at_least_five_samples_and_says_why_it_stopped():
    found = timing.measure(lambda: sum(range(100)), "cpu", repeats=2, precision=0.5)
    assert found.n >= MIN_SAMPLES and found.stopped
    assert {"stopped", "half_width"} <= found.to_dict().keys()
    plain = timing.measure(lambda: None, "cpu", repeats=2)
    assert plain.n == 2 and not plain.stopped and "stopped" not in plain.to_dict()
