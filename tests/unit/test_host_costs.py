"""benchmarks/host_costs.py's parts that run anywhere: the iris calls it times, its GPU part on a machine without one,
and what the child process that times the CPU step under an OpenMP wait policy prints."""
import sys

import pytest
import torch

from benchmarks import host_costs


@pytest.mark.full
def test_the_iris_training_step_trains_and_the_forward_records_nothing():
    calls = host_costs.iris_calls("cpu")
    forward, step = calls["iris forward, no autograd"], calls["iris training step"]
    before = forward()
    assert not before.requires_grad and torch.equal(forward(), before)
    for _ in range(5):
        step()
    assert not torch.allclose(forward(), before)


def test_without_a_gpu_the_steady_part_has_no_rows():
    assert host_costs.steady_table([]) == []


@pytest.mark.full
def test_the_cpu_step_child_prints_its_median_seconds(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["host_costs.py", "--cpu-step"])  # what wait_table's child processes run
    host_costs.main()
    assert float(capsys.readouterr().out) > 0
