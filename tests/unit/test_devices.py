import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from core import devices
from core.measure import runner, timing
from core.measure.experiment import Experiment, Point, RunState, SkipPoint, Variant, check_memory


def test_cpu_is_always_available_and_devices_are_checked():
    assert devices.available()[0] == "cpu"
    assert devices.check("cpu") == "cpu"
    with pytest.raises(devices.DeviceError, match=r"device: 'cuda:7' is not present.*available: cpu"):
        devices.check("cuda:7")


def test_fingerprint_describes_the_machine():
    devices.fingerprint.cache_clear()  # taken afresh: an earlier test may have held fewer threads when it was first
    fp = devices.fingerprint()
    for field in ("cpu_model", "cpu_signature", "cpu_physical_cores", "cpu_logical_cores", "torch_threads", "memory_gib", "os",
                  "python", "torch", "numpy", "cuda", "cudnn", "gpus", "machine_id"):
        assert field in fp
    assert fp["torch"] == torch.__version__
    assert fp["torch_threads"] == torch.get_num_threads()
    assert fp["cpu_logical_cores"] >= 1 and fp["memory_gib"] > 0
    assert len(fp["gpus"]) == torch.cuda.device_count()


def test_machine_id_is_stable_and_follows_the_hardware_not_the_software():
    fp = dict(devices.fingerprint())
    assert devices.machine_id(fp) == fp["machine_id"]
    assert devices.machine_id(fp | {"torch": "0.0.1", "torch_threads": 99}) == fp["machine_id"]
    assert devices.machine_id(fp | {"cpu_model": "Another CPU"}) != fp["machine_id"]
    assert devices.machine_id(fp | {"gpus": [{"name": "H100"}]}) != fp["machine_id"]


SHIPPED = Path(__file__).resolve().parents[2] / "results"
X86_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
stepping\t: 1

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 0
"""
ARM_CPUINFO = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n"


def test_the_cpu_signature_is_the_first_cpu_s_design_from_cpuinfo():
    assert devices.cpu_signature(X86_CPUINFO) == "vendor_id AuthenticAMD, cpu family 26, model 2, stepping 1"
    assert devices.cpu_signature(ARM_CPUINFO) == "CPU implementer 0x41, CPU part 0xd0c, CPU variant 0x3"
    assert devices.cpu_signature("") is None  # no /proc/cpuinfo: not Linux


def test_two_vms_that_name_the_same_cpu_differ_by_its_signature():
    fp = dict(devices.fingerprint())
    zen5 = fp | {"cpu_model": "AMD EPYC", "cpu_signature": "vendor_id AuthenticAMD, cpu family 26, model 2, stepping 1"}
    zen4 = zen5 | {"cpu_signature": "vendor_id AuthenticAMD, cpu family 25, model 17, stepping 0"}
    assert devices.machine_id(zen5) != devices.machine_id(zen4)
    assert devices.label(zen5) == f"AMD EPYC (cpu family 26, model 2, stepping 1; {fp['cpu_logical_cores']} threads) / " + (
        ", ".join(g["name"] for g in fp["gpus"]) or "no GPU")
    named = zen5 | {"cpu_model": "AMD EPYC 9B45 128-Core Processor"}  # a model number says it already
    assert "family" not in devices.label(named) and "family 26" in devices.cpu_text(named)


def test_a_fingerprint_taken_before_the_signature_keeps_its_machine_id():
    before = [json.loads(path.read_text())["fingerprint"] for path in SHIPPED.glob("*/calibration/profile.json")]
    before = [fp for fp in before if "cpu_signature" not in fp]
    assert before, "the shipped results hold a profile taken before the signature"
    for fp in before:
        assert devices.machine_id(fp) == fp["machine_id"]
        assert devices.label(fp) == f"{fp['cpu_model']} ({fp['cpu_logical_cores']} threads) / " + (
            ", ".join(g["name"] for g in fp["gpus"]) or "no GPU")


def test_device_kinds_and_out_of_memory_detection():
    assert devices.kind("cuda:1") == "cuda" and devices.kind("cpu") == "cpu"
    devices.synchronize("cpu")  # a no-op, must not raise
    assert devices.is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert not devices.is_out_of_memory(RuntimeError("shape mismatch"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU to describe one")
def test_gpu_fingerprint_fields():
    gpu = devices.fingerprint()["gpus"][0]
    assert gpu["device"] == "cuda:0" and gpu["memory_gib"] > 0 and "." in gpu["compute_capability"]


# -- allocation failures and the shared memory guard ----------------------------------------------
CPU_ALLOCATOR_FAILURE = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                         "you tried to allocate 1125899906842624 bytes. Error code 12 (Cannot allocate memory)")


def test_cpu_allocation_failures_are_out_of_memory():
    assert devices.is_out_of_memory(RuntimeError(CPU_ALLOCATOR_FAILURE))
    assert devices.is_out_of_memory(MemoryError())
    with pytest.raises(RuntimeError) as torch_failure:
        torch.empty(2**50, dtype=torch.uint8)  # a petabyte: more than any address space holds
    with pytest.raises(MemoryError) as numpy_failure:
        np.empty(2**50, dtype=np.uint8)
    assert devices.is_out_of_memory(torch_failure.value) and devices.is_out_of_memory(numpy_failure.value)
    assert not devices.is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


class FailingAllocation(Experiment):
    """One point whose call (or whose building) fails as a CPU allocation does."""
    name = "failing"
    variants = (Variant("call", "the timed call fails"), Variant("build", "building the workload fails"))

    def workload(self, point: Point, config: dict, run: RunState) -> timing.Workload:
        if point.variant == "build":
            np.empty(2**50, dtype=np.uint8)

        def call():
            raise RuntimeError(CPU_ALLOCATOR_FAILURE)
        return timing.Workload(call, unit="call", repeats=1, warmup=0)


@pytest.mark.parametrize("variant, error", [("call", "RuntimeError: [enforce fail at alloc_cpu.cpp"),
                                            ("build", "MemoryError: Unable to allocate")])
def test_the_runner_records_a_failed_cpu_allocation_as_oom(variant, error):
    row = runner.measure_point(FailingAllocation(), Point("cpu", variant), {})
    assert row["status"] == "oom" and row["error"].startswith(error)


def _free(**by_device):
    return lambda device: by_device[device]


def test_the_memory_guard_passes_a_point_that_fits_and_records_the_estimate(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", _free(cpu=10e9))
    assert check_memory("cpu", 0.5, 3e9, host_bytes=2e9) == {"estimated_bytes": 5e9, "free_bytes": 10e9}


def test_the_memory_guard_skips_a_cpu_point_over_the_fraction_with_its_estimate(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", _free(cpu=10e9))
    with pytest.raises(SkipPoint) as skipped:
        check_memory("cpu", 0.5, 3e9, host_bytes=2.5e9, recorded={"estimated_seconds": 1.0})
    assert skipped.value.metrics == {"estimated_bytes": 5.5e9, "free_bytes": 10e9, "estimated_seconds": 1.0}
    assert str(skipped.value) == ("needs about 5.5 GB; cpu has 10 GB free and a point may use 50% of it "
                                  "(memory_fraction)")


@pytest.mark.parametrize("device_bytes, host_bytes, says", [(5e9, 1e9, "needs about 5 GB; cuda:1 has 8 GB free"),
                                                           (1e9, 6e9, "needs about 6 GB of host memory; cpu has 10")])
def test_on_a_gpu_the_device_and_the_host_are_each_checked(monkeypatch, device_bytes, host_bytes, says):
    monkeypatch.setattr(devices, "free_memory", _free(cpu=10e9, **{"cuda:1": 8e9}))
    with pytest.raises(SkipPoint, match=says) as skipped:
        check_memory("cuda:1", 0.5, device_bytes, host_bytes=host_bytes)
    assert skipped.value.metrics == {"estimated_bytes": device_bytes, "free_bytes": 8e9,
                                     "estimated_host_bytes": host_bytes, "free_host_bytes": 10e9}
    assert check_memory("cuda:1", 0.5, 1e9) == {"estimated_bytes": 1e9, "free_bytes": 8e9}  # nothing on the host


def test_the_stand_in_plays_a_cuda_gpu():
    assert devices.STAND_IN == "meta" and devices.is_stand_in("meta") and not devices.is_stand_in("cpu")
    assert devices.plays("meta") == "cuda" and devices.plays("cuda:1") == "cuda" and devices.plays("cpu") == "cpu"
    assert devices.is_accelerator("meta") and not devices.is_accelerator("cpu")
    assert devices.free_memory("meta") == math.inf  # it allocates nothing: no point is skipped for memory
    host = torch.ones(3)
    assert devices.pin(host, "meta") is host and devices.pin(host, "cpu") is host
    assert devices.generator("meta", 3).device.type == "cpu"
    assert torch.equal(torch.randperm(5, generator=devices.generator("meta", 3)),
                       torch.randperm(5, generator=torch.Generator().manual_seed(3)))
