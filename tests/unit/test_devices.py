import pytest
import torch

from core import devices


def test_cpu_is_always_available_and_devices_are_checked():
    assert devices.available()[0] == "cpu"
    assert devices.check("cpu") == "cpu"
    with pytest.raises(devices.DeviceError, match=r"device: 'cuda:7' is not present.*available: cpu"):
        devices.check("cuda:7")


def test_fingerprint_describes_the_machine():
    fp = devices.fingerprint()
    for field in ("cpu_model", "cpu_physical_cores", "cpu_logical_cores", "torch_threads", "memory_gib", "os",
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


def test_device_kinds_and_out_of_memory_detection():
    assert devices.kind("cuda:1") == "cuda" and devices.kind("cpu") == "cpu"
    devices.synchronize("cpu")  # a no-op, must not raise
    assert devices.is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert not devices.is_out_of_memory(RuntimeError("shape mismatch"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU to describe one")
def test_gpu_fingerprint_fields():
    gpu = devices.fingerprint()["gpus"][0]
    assert gpu["device"] == "cuda:0" and gpu["memory_gib"] > 0 and "." in gpu["compute_capability"]
