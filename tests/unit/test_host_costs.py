"""benchmarks/host_costs.py's parts that run anywhere: the iris calls it times, its GPU part on a machine without one,
and what the child process that times the CPU step under an OpenMP wait policy prints."""
import subprocess
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


def test_the_copies_go_each_way_at_each_size_and_arrive():
    # on the CPU (pinning needs a CUDA build: devices.pin leaves the host tensors as they are) "there" is host memory
    calls = host_costs.copy_calls("cpu")
    sizes = [f"{4 * n:,} B" for n in host_costs.COPY_ELEMENTS]
    assert list(calls) == [f"{way} {size} pinned" for size in sizes for way in ("h2d", "d2h")]
    for n, size in zip(host_costs.COPY_ELEMENTS, sizes):  # the host's ones go there and come back
        calls[f"h2d {size} pinned"]()
        assert torch.equal(calls[f"d2h {size} pinned"](), torch.ones(n))


def test_without_a_gpu_the_steady_part_has_no_rows():
    assert host_costs.steady_table([]) == []


@pytest.mark.full
def test_the_cpu_step_child_prints_its_median_seconds_and_threads(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["host_costs.py", "--cpu-step"])  # what wait_table's child processes run
    host_costs.main()
    seconds, threads = capsys.readouterr().out.split()
    assert float(seconds) > 0 and int(threads) == torch.get_num_threads()


def test_each_cpu_setting_starts_its_child_with_its_variables_alone(monkeypatch):
    started = []

    def run(command, env, **kwargs):
        started.append(env)
        return subprocess.CompletedProcess(command, 0, stdout=f"0.0005 {env.get('OMP_NUM_THREADS', '2')}\n")
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # this process's own setting does not leak into the children
    rows = host_costs.wait_table({"one thread": {"OMP_NUM_THREADS": "1"}, "default": {}})
    assert [env.get("OMP_NUM_THREADS") for env in started] == ["1", None]
    assert all("OMP_WAIT_POLICY" not in env for env in started)
    assert rows == [{"part": "wait", "setting": "one thread", "threads": 1, "step_us": pytest.approx(500)},
                    {"part": "wait", "setting": "default", "threads": 2, "step_us": pytest.approx(500)}]
