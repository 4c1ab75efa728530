"""Experiment 6: square float32 matrix products with numpy and torch, on the CPU and on a GPU with the
operands resident or copied over (pageable or pinned) and the result copied back every time; plus
host-to-device and device-to-host bandwidth."""
from functools import lru_cache

import numpy as np
import pandas as pd
import torch
from threadpoolctl import threadpool_info

from core import devices, timing
from core.experiments.base import Experiment, Point, Variant
from core.params import Param
from core.verdicts import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, Verdict, within_factor

BASELINE = "numpy"
GPU_PRODUCTS = ("torch resident", "torch copy pageable", "torch copy pinned")
TRANSFERS = ("h2d pageable", "h2d pinned", "d2h pageable", "d2h pinned")
ACCELERATORS = ("cuda", "mps")


class Matmul(Experiment):
    name = "matmul"
    title = "Matrix multiply and transfers"
    order = 60
    source = "002_3344ff0316a6b6cf.txt"
    claim = ("A 200x200 product on the GPU is about 6x faster than numpy, but copying the operands over "
             "and the result back every time makes it about as slow as numpy: the GPU is like a REST "
             "API, the cost is sending data back and forth.")
    summary = ("Square float32 products from 16 to 4096 and beyond: numpy and torch on the CPU; torch on "
               "the GPU with the operands resident, and copying both operands in and the result out "
               "every time from pageable or pinned host memory. Host-to-device and device-to-host "
               "bandwidth separately. Time per product, GFLOP/s, GB/s, and the size at which each GPU "
               "variant overtakes numpy.")
    params = (
        Param("sizes", int, (16, 64, 200), "square matrix sizes", low=1, high=16384, many=True),
        Param("repeats", int, 5, "timed samples per point", low=1, high=100),
        Param("block_seconds", float, 0.05, "length of one timed block of calls", low=0.001, high=5.0),
        Param("seed", int, 0, "seed of the operands", low=0, high=2**31 - 1),
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
        Variant("torch resident", "torch.matmul with both operands already on the device", ACCELERATORS),
        Variant("torch copy pageable", "copy both operands in, multiply, copy the result out (pageable host memory)", ACCELERATORS),
        Variant("torch copy pinned", "the same from pinned host memory with asynchronous copies", ("cuda",)),
        Variant("h2d pageable", "host-to-device copy of one matrix from pageable memory", ACCELERATORS),
        Variant("h2d pinned", "host-to-device copy of one matrix from pinned memory", ("cuda",)),
        Variant("d2h pageable", "device-to-host copy of one matrix into pageable memory", ACCELERATORS),
        Variant("d2h pinned", "device-to-host copy of one matrix into pinned memory", ("cuda",)),
    )

    def points(self, config: dict, device: str) -> list[Point]:
        return [Point(device, v.name, {"size": n})
                for v in self.variants_for(config, device) for n in config["sizes"]]

    def measure(self, point: Point, config: dict) -> dict:
        n = point.params["size"]
        a, b = operands(n, config["seed"])
        fn, nbytes = _workload(point.variant, point.device, a, b)
        m = timing.micro(fn, point.device, repeats=config["repeats"], block_seconds=config["block_seconds"])
        metrics = {"torch_threads": torch.get_num_threads(), "blas_threads": _blas_threads()}
        if point.variant in TRANSFERS:
            metrics["gb_per_s"] = nbytes / m.median / 1e9
        else:
            metrics["gflop_per_s"] = 2 * n**3 / m.median / 1e9
            result = fn()
            metrics["max_rel_diff_vs_numpy"] = _rel_diff(result, a @ b)
        return {"timing": m.to_dict(), "metrics": metrics}

    def estimate_seconds(self, config: dict, device: str) -> float:
        per_point = 3 * config["block_seconds"] * (config["repeats"] + 2)
        cpu_flops = 2 * sum(n**3 for n in config["sizes"]) / 50e9 * (config["repeats"] + 3)
        return sum(per_point * len(config["sizes"]) + (cpu_flops if devices.kind(device) == "cpu" else 0)
                   for _ in self.variants_for(config, device))


@lru_cache(maxsize=4)
def operands(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)


def _workload(variant: str, device: str, a: np.ndarray, b: np.ndarray):
    """The call to time for a variant, and the bytes one call moves across the bus."""
    if variant == BASELINE:
        return (lambda: a @ b), 0
    if variant == "torch cpu":
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        return (lambda: ta @ tb), 0
    pinned = variant.endswith("pinned")
    host_a, host_b = torch.from_numpy(a), torch.from_numpy(b)
    if pinned:
        host_a, host_b = host_a.pin_memory(), host_b.pin_memory()
    dev_a, dev_b = host_a.to(device), host_b.to(device)
    host_out = torch.empty_like(host_a, pin_memory=pinned)
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


def _rel_diff(result, reference: np.ndarray) -> float:
    if isinstance(result, torch.Tensor):
        result = result.cpu().numpy()
    return float(np.abs(result - reference).max() / max(np.abs(reference).max(), 1e-30))


def _blas_threads() -> int | None:
    counts = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
    return max(counts) if counts else None


# -- analysis over the records -------------------------------------------------------------------
def crossovers(rows: pd.DataFrame) -> pd.DataFrame:
    """Per run and GPU variant: the smallest size from which the variant beats numpy at every larger
    measured size (None when it never does)."""
    out = []
    ok = rows[rows["point_status"] == "ok"]
    for (run_id, machine), run in ok.groupby(["run_id", "machine"]):
        base = run[run["variant"] == BASELINE].set_index("size")["median_s"]
        for (variant, device), part in run[run["variant"].isin(GPU_PRODUCTS)].groupby(["variant", "device"]):
            times = part.set_index("size")["median_s"]
            sizes = sorted(set(times.index) & set(base.index))
            wins = [times[s] < base[s] for s in sizes]
            first = next((s for i, s in enumerate(sizes) if all(wins[i:])), None)
            out.append({"run_id": run_id, "machine": machine, "device": device, "variant": variant,
                        "crossover_size": first, "sizes_compared": len(sizes)})
    return pd.DataFrame(out, columns=["run_id", "machine", "device", "variant", "crossover_size", "sizes_compared"])


def speedups_at(rows: pd.DataFrame, size: int = 200) -> pd.DataFrame:
    """numpy time / variant time at one size, per run and variant."""
    ok = rows[(rows["point_status"] == "ok") & (rows["size"] == size)] if len(rows) else rows
    out = []
    for run_id, run in ok.groupby("run_id"):
        base = run[run["variant"] == BASELINE]["median_s"]
        if base.empty:
            continue
        for _, r in run[~run["variant"].isin(TRANSFERS)].iterrows():
            out.append({"run_id": run_id, "machine": r["machine"], "device": r["device"], "variant": r["variant"],
                        "size": size, "speedup_over_numpy": float(base.iloc[0] / r["median_s"])})
    return pd.DataFrame(out, columns=["run_id", "machine", "device", "variant", "size", "speedup_over_numpy"])


def verdicts(rows: pd.DataFrame, published: pd.DataFrame) -> list[Verdict]:
    sp = speedups_at(rows, 200)
    claims = [("torch resident", "A 200x200 product on the GPU (operands resident) is about 6x faster than numpy"),
              ("torch copy pageable", "With copies both ways every time, the GPU is about as slow as numpy")]
    out = []
    for variant, claim in claims:
        stated = published.loc[published["variant"] == variant, "value"].iloc[0]
        mine = sp[sp["variant"] == variant]
        if sp.empty:
            out.append(Verdict(claim, NO_DATA, "No run with numpy at size 200 yet."))
        elif mine.empty:
            out.append(Verdict(claim, NEEDS_GPU, "No GPU results on any machine yet: run this experiment on a GPU."))
        else:
            measured = mine["speedup_over_numpy"].median()
            outcome = REPRODUCED if within_factor(measured, stated) else NOT_REPRODUCED
            out.append(Verdict(claim, outcome, f"Measured {measured:.2f}x numpy's speed at 200x200 (median over "
                                               f"{len(mine)} run(s)); published about {stated:g}x. Reproduced means "
                                               f"within a factor of 2 of the published figure."))
    return out


EXPERIMENT = Matmul()
