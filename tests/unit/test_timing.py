import pytest
import torch

from core import timing
from core.timing import Measurement


class Recorder:
    """A fake device sync and a workload that log, in order, what happened."""
    def __init__(self):
        self.events = []

    def sync(self, device):
        self.events.append("sync")

    def work(self):
        self.events.append("call")


def test_measure_syncs_around_every_timed_call_and_excludes_warmup():
    rec = Recorder()
    m = timing.measure(rec.work, "cpu", repeats=3, warmup=2, sync=rec.sync)
    assert len(m.samples) == 3
    assert rec.events[:2] == ["call", "call"]  # warm-up, untimed
    assert rec.events[2:] == ["sync", "call", "sync"] * 3


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
    steady = Measurement((1.0, 1.01, 0.99, 1.0))
    assert not steady.noisy
    assert steady.to_dict() == {"samples": [1.0, 1.01, 0.99, 1.0], "median": 1.0, "iqr": steady.iqr, "noisy": False}


def test_single_sample_has_no_spread():
    assert Measurement((0.5,)).iqr == 0.0
