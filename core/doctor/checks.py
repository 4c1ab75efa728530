"""The doctor's checks: each says pass, fail or could not run, with what it found or why. A check that needs a CUDA
GPU says it could not run on a machine without one; every GPU of the machine is checked."""
import time
from dataclasses import dataclass
from typing import Callable

import torch

from core import devices
from core.measure import graphs
from core.model import hardware
from core.store import results

PASS, FAIL, COULD_NOT = "pass", "fail", "could not run"
LOSS_TOLERANCE = 1e-4     # relative: FP32 on both sides (TF32 off), the same weights and data
KERNEL_TOLERANCE = 0.10   # the census's kernels against the profiler's
SPEC_MARGIN = 1.05        # a figure measured above its specification by more than this is not believable
SPEC_FLOOR = 0.10         # nor one below a tenth of it
SYNC_RATIO = 2.0          # a synchronised read of a long kernel takes at least this times the unsynchronised one
TRAINING_STEPS = 20


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str

    def text(self) -> str:
        return f"{self.status:>13}  {self.name}: {self.detail}"


def cuda_devices(device_names: list[str]) -> list[str]:
    return [d for d in device_names if devices.kind(d) == "cuda"]


def _no_gpu(name: str) -> Check:
    return Check(name, COULD_NOT, "needs a CUDA GPU; none here")


def same_losses(device_names: list[str], steps: int = TRAINING_STEPS) -> Check:
    """A small MLP trained from the same weights on the same data on the CPU and on each other device reaches the
    same loss (FP32, TF32 off)."""
    name = "the CPU and each GPU reach the same loss from the same weights"
    others = [d for d in device_names if d != "cpu" and devices.kind(d) in ("cuda", "cpu")]
    if not others:
        return _no_gpu(name)
    reference = training_loss("cpu", steps)
    found = {d: training_loss(d, steps) for d in others}
    off = {d: abs(loss - reference) / max(abs(reference), 1e-12) for d, loss in found.items()}
    worst = max(off, key=off.get)
    detail = (f"cpu {reference:.6g}; " + ", ".join(f"{d} {loss:.6g}" for d, loss in found.items())
              + f" after {steps} steps (largest relative difference {off[worst]:.1e}, on {worst})")
    return Check(name, PASS if off[worst] <= LOSS_TOLERANCE else FAIL, detail)


def training_loss(device: str, steps: int) -> float:
    """The loss after `steps` SGD steps of a seeded MLP on seeded data, computed on `device` in FP32."""
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(256, 16, generator=generator), torch.randn(256, 1, generator=generator)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    model, x, y = model.to(device), x.to(device), y.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with _fp32_matmuls():
        for _ in range(steps):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        return torch.nn.functional.mse_loss(model(x), y).item()


class _fp32_matmuls:
    """TF32 off for matrix products and cuDNN while inside, as it was after."""

    def __enter__(self):
        self.before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.before


def graph_replay_moves_weights(device_names: list[str]) -> Check:
    """A training step captured as a CUDA graph changes the weights when replayed, on every GPU."""
    name = "a CUDA graph's replay moves the weights"
    gpus = cuda_devices(device_names)
    if not gpus:
        return _no_gpu(name)
    failed = {}
    for gpu in gpus:
        model = torch.nn.Linear(8, 1).to(gpu)
        x, y = torch.randn(32, 8, device=gpu), torch.randn(32, 1, device=gpu)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def step():
            optimizer.zero_grad(set_to_none=False)
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        try:
            graphs.capture(step, gpu, model.parameters())
        except graphs.GraphCaptureError as e:
            failed[gpu] = str(e)
    if failed:
        return Check(name, FAIL, "; ".join(f"{gpu}: {why}" for gpu, why in failed.items()))
    return Check(name, PASS, f"on {', '.join(gpus)}")


def census_matches_profiler(records: list[dict]) -> Check:
    """Each measured point whose profile counted kernels (a GPU's) has a census within KERNEL_TOLERANCE of it, in each
    experiment's latest complete run on each device: a record keeps the census its run took, by its code's rules."""
    name = f"the census's kernel counts are within {KERNEL_TOLERANCE:.0%} of the profiler's"
    newest = _newest_by_experiment(records)
    older = f" ({len(records) - len(newest)} older run(s) left out: their censuses keep the rules of their code)" \
        if len(newest) < len(records) else ""
    compared = []
    for record in records:
        for row in record["rows"]:
            found = row.get("census") or {}
            if row["device"] in newest.get(record["run_id"], ()) and found.get("profiler_kernels"):
                share = abs(found["kernel_difference"]) / found["profiler_kernels"]
                compared.append((share, record["experiment"], row, found))
    if not compared:
        return Check(name, COULD_NOT, "no point here was profiled with a kernel count (the profiler counts a "
                                      "GPU's kernels, not a CPU's)")
    off = sorted((c for c in compared if c[0] > KERNEL_TOLERANCE), key=lambda c: -c[0])
    if not off:
        return Check(name, PASS, f"{len(compared)} points, the largest difference "
                                 f"{max(c[0] for c in compared):.0%}{older}")
    lines = [f"{experiment} {row['variant']} {row.get('params')} on {row['device']}: census {found['kernels']}, "
             f"profiler {found['profiler_kernels']}{_top_operation(found)}" for _, experiment, row, found in off[:3]]
    return Check(name, FAIL, f"{len(off)} of {len(compared)} points differ{older}: " + "; ".join(lines))


def _newest_by_experiment(records: list[dict]) -> dict[str, set[str]]:
    """Each experiment's latest complete run on each device (results.latest_complete): run id -> its devices."""
    if not records:
        return {}
    latest = results.latest_complete(results.runs_frame(records), ["experiment"])
    return {run_id: set(part["device"]) for run_id, part in latest.groupby("run_id")}


def _top_operation(found: dict) -> str:
    top = found.get("top_by_count") or []
    return f" (the census's most frequent operation: {top[0]['op']})" if top and "op" in top[0] else ""


def synchronised_clock(device_names: list[str]) -> Check:
    """Reading the clock after a long kernel without a synchronise returns before the kernel ends; with one, after:
    timing without it reads the launch, not the work."""
    name = "a synchronised clock read waits for the GPU; an unsynchronised one does not"
    gpus = cuda_devices(device_names)
    if not gpus:
        return _no_gpu(name)
    found, failed = [], []
    for gpu in gpus:
        a = torch.randn(4096, 4096, device=gpu)
        devices.synchronize(gpu)
        loose = _seconds(lambda: a @ a, None)
        tight = _seconds(lambda: a @ a, lambda: devices.synchronize(gpu))
        found.append(f"{gpu}: {loose * 1e6:.0f} µs without, {tight * 1e6:.0f} µs with")
        if tight < SYNC_RATIO * loose:
            failed.append(gpu)
    return Check(name, FAIL if failed else PASS, "; ".join(found))


def _seconds(call: Callable[[], object], sync: Callable[[], None] | None) -> float:
    start = time.perf_counter()
    for _ in range(5):
        call()
    if sync:
        sync()
    return time.perf_counter() - start


def catalogue_in_reason(profile: dict | None) -> Check:
    """Each calibrated GPU's matrix-product rate and memory bandwidth against its model's entry in the catalogue:
    none above its specification (the maker's peak where the entry gives one, else the entry's figure; beyond
    SPEC_MARGIN) nor below SPEC_FLOOR of the entry's figure. A figure the catalogue assumes below the peak (the
    H200's bandwidth: 3.51 of its 4.8 TB/s) is no ceiling."""
    name = "the catalogue's figures for this GPU are within reason of what it measured"
    gpus = list((profile or {}).get("gpus") or {})
    if not gpus:
        return Check(name, COULD_NOT, "no calibrated GPU here" if profile else "no calibration here")
    found, off, compared = [], [], 0
    for gpu in gpus:
        twin = hardware.catalogue_twin(profile, gpu)
        if twin is None:
            found.append(f"{gpu}: the catalogue does not list its model")
            continue
        measured = hardware.from_profile(profile, gpu)
        for field in ("matmul_flops", "memory_bandwidth"):
            if twin.has(field) and measured.has(field):
                ratio, spec = measured.value(field) / twin.value(field), twin.peak.get(field)
                compared += 1
                found.append(f"{gpu} {field}: {ratio:.2f} of {twin.title}'s"
                             + (f", {measured.value(field) / spec:.2f} of its specification" if spec else ""))
                if ratio < SPEC_FLOOR or measured.value(field) / (spec or twin.value(field)) > SPEC_MARGIN:
                    off.append(field)
    return Check(name, (FAIL if off else PASS) if compared else COULD_NOT, "; ".join(found))


def all_checks(device_names: list[str], records: list[dict], profile: dict | None) -> list[Check]:
    """Every check; one that raises is a fail saying what it raised."""
    found = []
    for check, args in ((same_losses, (device_names,)), (graph_replay_moves_weights, (device_names,)),
                        (census_matches_profiler, (records,)), (synchronised_clock, (device_names,)),
                        (catalogue_in_reason, (profile,))):
        try:
            found.append(check(*args))
        except (RuntimeError, ValueError, hardware.HardwareError) as e:
            found.append(Check(check.__name__.replace("_", " "), FAIL, f"{type(e).__name__}: {str(e)[:200]}"))
    return found
