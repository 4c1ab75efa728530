"""benchmarks/host_costs.py's parts that run anywhere: the iris calls it times, its GPU part on a machine without one,
and the child process that times the CPU step under an OpenMP wait policy."""
import pytest
import torch

from benchmarks import host_costs


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
def test_a_wait_policy_is_timed_in_a_process_of_its_own():
    [row] = host_costs.wait_table(("PASSIVE",))  # OpenMP reads it at the process's start: a child process per policy
    assert row["omp_wait_policy"] == "PASSIVE" and row["step_us"] > 0
