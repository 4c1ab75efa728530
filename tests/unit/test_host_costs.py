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
def test_the_cpu_step_child_prints_its_median_seconds_and_threads(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["host_costs.py", "--cpu-step"])  # what wait_table's child processes run
    host_costs.main()
    seconds, threads = capsys.readouterr().out.split()
    assert float(seconds) > 0 and int(threads) == torch.get_num_threads()


@pytest.mark.full
def test_each_cpu_setting_runs_in_a_process_started_with_it(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # this process's own setting does not leak into the children
    rows = host_costs.wait_table({"one thread": {"OMP_NUM_THREADS": "1"}, "default": {}})
    assert [r["setting"] for r in rows] == ["one thread", "default"] and all(r["step_us"] > 0 for r in rows)
    assert rows[0]["threads"] == 1 and rows[1]["threads"] >= 1
