"""Device discovery, synchronisation and the machine fingerprint (in the spirit of MLPerf's
system description)."""
import hashlib
import json
import math
import platform
import re
import time
from datetime import datetime, timezone
from functools import lru_cache
from typing import Callable, NamedTuple

import numpy as np
import psutil
import torch


def available() -> list[str]:
    """Every device this machine can run on: 'cpu', each 'cuda:N', and 'mps' when present."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        found.append("mps")
    return found


def kind(device: str) -> str:
    """'cpu', 'cuda', 'mps' or 'meta' for a device name such as 'cuda:1'."""
    return torch.device(device).type


ACCELERATORS = ("cuda", "mps")
# The GPU's stand-in: a workload built for a CUDA GPU on the meta device, which computes nothing and holds no
# data, so that its census (what the cost model predicts a GPU from) can be taken on any machine.
STAND_IN = "meta"


def is_stand_in(device: str) -> bool:
    return kind(device) == STAND_IN


def holds_stand_in(value) -> bool:
    """Whether `value` is a tensor on the stand-in device: what a stand-in kernel (core.measure.kernels) takes over."""
    return isinstance(value, torch.Tensor) and is_stand_in(str(value.device))


def plays(device: str) -> str:
    """The kind of device a workload is built for: 'cuda' on the stand-in, else the device's kind. The test
    to use wherever the code chooses what to do by kind (variants, CUDA graphs, fused optimisers)."""
    return "cuda" if is_stand_in(device) else kind(device)


def is_accelerator(device: str) -> bool:
    """True for a GPU of any kind ('cuda:N', 'mps') and its stand-in; False for the CPU. The one test of "is
    this a GPU"."""
    return plays(device) in ACCELERATORS


def pin(tensor: torch.Tensor, device: str) -> torch.Tensor:
    """`tensor` in pinned host memory, for asynchronous copies to `device`: pinned for a real accelerator; the
    tensor itself on the stand-in (pinning needs a CUDA build; the census counts a non-blocking copy between
    the host and the stand-in as pinned) and on the CPU (nothing to copy to)."""
    return tensor.pin_memory() if is_accelerator(device) and not is_stand_in(device) else tensor


def generator(device: str, seed: int) -> torch.Generator:
    """A seeded generator for random draws on `device`: the device's own, or on the stand-in a CPU one (torch
    makes no meta generator, and meta tensors take one from the CPU: nothing is drawn)."""
    return torch.Generator(device="cpu" if is_stand_in(device) else device).manual_seed(seed)


class DeviceError(ValueError):
    pass


def check(device: str) -> str:
    """Return the device name if it is present here, else raise naming the ones that are."""
    present = available()
    if device not in present:
        raise DeviceError(f"device: '{device}' is not present on this machine; available: {', '.join(present)}")
    return device


def synchronize(device: str) -> None:
    """Wait for all queued work on the device; a no-op on the CPU."""
    k = kind(device)
    if k == "cuda":
        torch.cuda.synchronize(device)
    elif k == "mps":
        torch.mps.synchronize()


HOLD_CYCLES_PER_KERNEL = 50_000  # GPU clock cycles of spin per queued kernel: well over a launch's host time


class Queued(NamedTuple):
    """Seconds per launch of a burst that queues behind a spin kernel: `host` to queue it, `device` to run it."""
    host: float
    device: float


def queued_seconds(device: str, launch: Callable[[], None], kernels: int) -> Queued:
    """Per kernel when `launch` queues `kernels` kernels on a CUDA device: the host's seconds to queue them, and the
    device's to run them back to back. A spin kernel holds the stream while the host queues them, so no launch
    waits for the device, the host's launch time leaves no gaps between them, and CUDA events time them on the
    device. If the spin ends before the host has queued them all, it tries again with a spin twice as long."""
    dev = torch.device(device)
    cycles = HOLD_CYCLES_PER_KERNEL * kernels
    with torch.cuda.device(dev):
        for _ in range(4):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(cycles)
            begin.record()
            started = time.perf_counter()
            launch()
            host = time.perf_counter() - started
            end.record()
            held = not begin.query()  # the spin still ran when the last kernel was queued
            end.synchronize()
            if held:
                return Queued(host / kernels, begin.elapsed_time(end) / 1e3 / kernels)
            cycles *= 2
    raise RuntimeError(f"{device}: the host could not queue {kernels} kernels within a {cycles // 2:,}-cycle spin")


# How an allocation failure reads: CUDA and MPS ("... out of memory"), torch's CPU allocator ("[enforce fail at
# alloc_cpu.cpp] ... DefaultCPUAllocator: can't allocate memory" or "... not enough memory").
OUT_OF_MEMORY_TEXTS = ("out of memory", "can't allocate memory", "defaultcpuallocator: not enough memory")


def is_out_of_memory(error: BaseException) -> bool:
    """Whether an error is a failed allocation on any device (MemoryError covers numpy's)."""
    text = str(error).lower()
    return isinstance(error, (torch.OutOfMemoryError, MemoryError)) or any(t in text for t in OUT_OF_MEMORY_TEXTS)


def release_cached_memory(device: str) -> None:
    """Give the caching allocator's unused blocks back (after an out-of-memory point, say)."""
    if kind(device) == "cuda":
        with torch.cuda.device(device):
            torch.cuda.empty_cache()


def free_memory(device: str) -> float:
    """Bytes a workload may still take: free plus cached-but-unused on CUDA; available RAM on the CPU;
    unbounded on the stand-in, which allocates nothing."""
    k = kind(device)
    if k == STAND_IN:
        return math.inf
    if k == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    if k == "mps":
        return float(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())
    return float(psutil.virtual_memory().available)


def reset_peak_memory(device: str) -> None:
    if kind(device) == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: str) -> int | None:
    """The most bytes the device's allocator held since the last reset; None where torch does not track it."""
    return torch.cuda.max_memory_allocated(device) if kind(device) == "cuda" else None


# /proc/cpuinfo's fields that tell one CPU design from another where a VM names only its family ("AMD EPYC"):
# x86's vendor, family, model and stepping; an ARM core's implementer, part and variant
SIGNATURE_FIELDS = ("vendor_id", "cpu family", "model", "stepping", "CPU implementer", "CPU part", "CPU variant")


def _cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def _cpu_model(cpuinfo: str) -> str:
    match = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    return match.group(1).strip() if match else platform.processor() or platform.machine()


def cpu_signature(cpuinfo: str) -> str | None:
    """The first CPU's SIGNATURE_FIELDS in /proc/cpuinfo's text ("vendor_id AuthenticAMD, cpu family 26, model 2,
    stepping 1"); None where it has none (not Linux)."""
    first = cpuinfo.strip().split("\n\n")[0]
    found = {key.strip(): value.strip() for key, value in re.findall(r"^([^:\n]+):[ \t]*(.*)$", first, re.M)}
    parts = [f"{field} {found[field]}" for field in SIGNATURE_FIELDS if found.get(field)]
    return ", ".join(parts) or None


def _gpus() -> list[dict]:
    if not torch.cuda.is_available():
        return []
    driver = None
    try:
        raw = torch._C._cuda_getDriverVersion()  # e.g. 12040 -> "12.4"
        driver = f"{raw // 1000}.{raw % 1000 // 10}"
    except (AttributeError, RuntimeError):
        pass
    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gpus.append({"device": f"cuda:{i}", "name": p.name, "memory_gib": round(p.total_memory / 2**30, 1),
                     "compute_capability": f"{p.major}.{p.minor}", "cuda_driver": driver})
    return gpus


def booted() -> str:
    """When this machine (a VM: this lease of it) last booted, UTC ISO to the second: a calibration is of the boot it
    was taken in, as two leases of one machine id can differ 1.5-3x per host operation."""
    return datetime.fromtimestamp(psutil.boot_time(), timezone.utc).isoformat(timespec="seconds")


def this_boot(when: str | None) -> bool:
    """Whether `booted()` as read then (None: never read) is this boot's: within a minute of it, as the boot time some
    systems derive from their clocks moves by a second or so."""
    try:
        return abs((datetime.fromisoformat(when) - datetime.fromisoformat(booted())).total_seconds()) <= 60
    except (TypeError, ValueError):
        return False


@lru_cache(maxsize=1)
def fingerprint() -> dict:
    """What the machine is and what software it runs; stable across runs on the same machine."""
    cpuinfo = _cpuinfo()
    fp = {
        "cpu_model": _cpu_model(cpuinfo),
        "cpu_signature": cpu_signature(cpuinfo),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
        "gpus": _gpus(),
        "mps": "mps" in available(),
    }
    fp["machine_id"] = machine_id(fp)
    return fp


def machine_id(fp: dict) -> str:
    """A readable, stable id: the CPU model's slug plus a hash of the hardware (not the software). The CPU's
    signature counts where the fingerprint has one: two VMs that both say "AMD EPYC" may run different designs
    at different speeds (a fingerprint taken before it was recorded hashes as it did then)."""
    hardware = {k: fp[k] for k in ("cpu_model", "cpu_logical_cores", "memory_gib", "os")}
    hardware["os"] = platform.system()
    hardware["gpus"] = [g["name"] for g in fp["gpus"]]
    if fp.get("cpu_signature"):
        hardware["cpu_signature"] = fp["cpu_signature"]
    digest = hashlib.sha256(json.dumps(hardware, sort_keys=True).encode()).hexdigest()[:8]
    slug = re.sub(r"[^a-z0-9]+", "-", fp["cpu_model"].lower()).strip("-")[:28].strip("-")
    return f"{slug or 'machine'}-{digest}"


def cpu_text(fp: dict) -> str:
    """The CPU's model name, with its signature where the fingerprint has one."""
    return f"{fp['cpu_model']} ({fp['cpu_signature']})" if fp.get("cpu_signature") else fp["cpu_model"]


def label(fp: dict) -> str:
    """One line naming the machine, for legends and tooltips; a CPU named without a model number (a VM's "AMD
    EPYC") with its signature, less the vendor its name gives."""
    gpus = ", ".join(g["name"] for g in fp.get("gpus", [])) or "no GPU"
    signature = fp.get("cpu_signature")
    named = not signature or re.search(r"\d", fp["cpu_model"])
    design = "" if named else re.sub(r"^vendor_id [^,]*, ", "", signature) + "; "
    return f"{fp['cpu_model']} ({design}{fp['cpu_logical_cores']} threads) / {gpus}"
