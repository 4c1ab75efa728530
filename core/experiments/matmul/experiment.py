"""Square float32 matrix products with numpy and torch, on the CPU and on a GPU with the operands
resident or copied over (pageable or pinned) and the result copied back every time; plus host-to-device
and device-to-host bandwidth."""
from functools import lru_cache

import numpy as np
import torch
from threadpoolctl import threadpool_info

from core import devices
from core.measure import timing
from core.measure.experiment import (LAST_DATA, MEMORY_FRACTION, Point, RunState, Variant, check_memory, data_resident)
from core.present.presented import Presented
from core.params import Param

BASELINE = "numpy"
GPU_PRODUCTS = ("torch resident", "torch copy pageable", "torch copy pinned")
TRANSFERS = ("h2d pageable", "h2d pinned", "d2h pageable", "d2h pinned")
NUMPY_UNTRACED = "numpy's product runs outside PyTorch: no ATen operation to count or profile"
HOST_SLACK_BYTES = 64e6  # BLAS buffers, the timer's objects (9-16 MB beyond the matrices measured at n=4096)


class Matmul(Presented):
    name = "matmul"
    title = "Matrix multiply and transfers"
    order = 60
    metric_units = {"gflop_per_s": "GFLOP/s", "gb_per_s": "GB/s"}
    source = "002_3344ff0316a6b6cf.txt"
    params = (
        Param("sizes", int, (16, 64, 200), "square matrix sizes", low=1, high=16384, many=True),
        Param("repeats", int, 5, "timed samples per point", low=1, high=100),
        Param("block_seconds", float, 0.05, "length of one timed block of calls", low=0.001, high=5.0),
        Param("seed", int, 0, "seed of the operands", low=0, high=2**31 - 1),
        MEMORY_FRACTION,
    )
    presets = {
        "smoke": {"sizes": (16, 64, 200), "repeats": 3, "block_seconds": 0.005},
        "quick": {"sizes": (16, 32, 64, 128, 200, 256, 512, 1024, 2048, 4096), "repeats": 5,
                  "block_seconds": 0.05},
        "paper": {"sizes": (16, 32, 64, 128, 200, 256, 512, 1024, 2048, 4096, 8192), "repeats": 10,
                  "block_seconds": 0.2},
    }
    variants = (
        Variant(BASELINE, "numpy.matmul on the CPU (the write-up's baseline)", ("cpu",)),
        Variant("torch cpu", "torch.matmul on the CPU", ("cpu",)),
        Variant("torch resident", "torch.matmul with both operands already on the device", devices.ACCELERATORS),
        Variant("torch copy pageable", "copy both operands in, multiply, copy the result out (pageable host memory)",
                devices.ACCELERATORS),
        Variant("torch copy pinned", "the same from pinned host memory with asynchronous copies", ("cuda",)),
        Variant("h2d pageable", "host-to-device copy of one matrix from pageable memory", devices.ACCELERATORS),
        Variant("h2d pinned", "host-to-device copy of one matrix from pinned memory", ("cuda",)),
        Variant("d2h pageable", "device-to-host copy of one matrix into pageable memory", devices.ACCELERATORS),
        Variant("d2h pinned", "device-to-host copy of one matrix into pinned memory", ("cuda",)),
    )

    def points(self, config: dict, device: str) -> list[Point]:
        return [Point(device, v.name, {"size": n})
                for v in self.variants_for(config, device) for n in config["sizes"]]

    def workload(self, point: Point, config: dict, run: RunState) -> timing.Workload:
        n = point.params["size"]
        memory = check_memory(point.device, config["memory_fraction"],
                              *memory_need(point.device, n, data_resident(run, (n, config["seed"]))))
        a, b = operands(n, config["seed"])
        run.memo[LAST_DATA] = (n, config["seed"])
        fn, nbytes = call(point.variant, point.device, a, b)
        transfer = point.variant in TRANSFERS

        def finish(m: timing.Measurement) -> dict:
            metrics = {"blas_threads": _blas_threads()}
            if transfer:
                return metrics | {"gb_per_s": nbytes / m.median / 1e9}
            return metrics | {"gflop_per_s": 2 * n**3 / m.median / 1e9,
                              "max_rel_diff_vs_numpy": rel_diff(host_result(fn(), point.device), a @ b)}
        return timing.Workload(fn, unit="copy" if transfer else "product", repeats=config["repeats"],
                               block_seconds=config["block_seconds"], finish=finish, metrics=memory,
                               untraced=NUMPY_UNTRACED if point.variant == BASELINE else None)

    def estimate_seconds(self, config: dict, device: str) -> float:
        per_point = 3 * config["block_seconds"] * (config["repeats"] + 2)
        cpu_flops = 2 * sum(n**3 for n in config["sizes"]) / 50e9 * (config["repeats"] + 3)
        return sum(per_point * len(config["sizes"]) + (cpu_flops if devices.kind(device) == "cpu" else 0)
                   for _ in self.variants_for(config, device))


def memory_need(device: str, n: int, resident: bool) -> tuple[float, float]:
    """(device bytes, host bytes) of a point at its peak, in n x n float32 matrices: the operands on the host
    (none when `resident`: the run's last point made them); on the CPU the product and, while it is checked,
    numpy's reference and two temporaries of their difference (4); on a GPU the resident operands, a copy of
    each and the product there (5), and on the host pinned copies of the operands, the result buffer and the
    check's four (7); and HOST_SLACK_BYTES on the host."""
    matrix = 4.0 * n * n
    on_host = (0.0 if resident else 2 * matrix) + HOST_SLACK_BYTES
    if devices.is_accelerator(device):
        return 5 * matrix, on_host + 7 * matrix
    return 4 * matrix, on_host


@lru_cache(maxsize=4)
def operands(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)


def call(variant: str, device: str, a: np.ndarray, b: np.ndarray):
    """The call to time for a variant, and the bytes one call moves across the bus."""
    if variant == BASELINE:
        return (lambda: a @ b), 0
    if variant == "torch cpu":
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        return (lambda: ta @ tb), 0
    pinned = variant.endswith("pinned")
    host_a, host_b = torch.from_numpy(a), torch.from_numpy(b)
    host_out = torch.empty_like(host_a)
    if pinned:
        host_a, host_b, host_out = (devices.pin(t, device) for t in (host_a, host_b, host_out))
    dev_a, dev_b = host_a.to(device), host_b.to(device)
    nbytes = a.nbytes
    if variant == "torch resident":
        return (lambda: dev_a @ dev_b), 0
    if variant.startswith("torch copy"):
        def copy_multiply_copy():
            c = host_a.to(device, non_blocking=pinned) @ host_b.to(device, non_blocking=pinned)
            return host_out.copy_(c, non_blocking=pinned)
        return copy_multiply_copy, 3 * nbytes
    if variant.startswith("h2d"):
        return (lambda: dev_a.copy_(host_a, non_blocking=pinned)), nbytes
    return (lambda: host_out.copy_(dev_a, non_blocking=pinned)), nbytes


def host_result(result, device: str) -> np.ndarray:
    """A call's result as a numpy array; a non-blocking copy into pinned memory is waited for first."""
    if isinstance(result, torch.Tensor):
        devices.synchronize(device)
        return result.cpu().numpy()
    return result


def rel_diff(result: np.ndarray, reference: np.ndarray) -> float:
    return float(np.abs(result - reference).max() / max(np.abs(reference).max(), 1e-30))


def _blas_threads() -> int | None:
    counts = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
    return max(counts) if counts else None


EXPERIMENT = Matmul()
