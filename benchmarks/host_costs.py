"""What the host pays per operation, by class, where the cost model's figures come from one class alone: the
measurements the next probes of the calibration should be designed from (issue 47's host-bound GPU points, and the
16-thread CPU's host-bound points, both predicted about half their time on the lent H200's machine).

1. On each GPU here: the host's seconds per call of small operations of each class on its tensors, queued behind a
   spin kernel so that no call waits for the device (devices.queued_seconds), with and without autograd recording;
   beside it the same call on the CPU's tensors (its dispatch and work). The calibration measures one class (a
   1-element add: launch_overhead).
2. On the CPU, at torch's default threads and at one: a GEMM's seconds back to back (what the calibration's grid
   times) and with a stretch of single-threaded Python between calls (what a model's step does between its GEMMs),
   less that stretch: the cost of waking the intra-op threads, where there is one.
3. On each GPU, the iris MLP's forward (no autograd) and its training step (cross-entropy, backward, SGD): the host's
   and the device's seconds per call queued (each side alone), and per call back to back as the experiments time
   them (blocks of calls, synchronised at the block's ends). Back to back far above the larger of the two queued
   sides says the host pays more per call while the device runs than while it waits behind a spin: what the model's
   two clocks do not know (on the lent H200: the iris hook check's forward measured 70 us a call back to back in one
   lease, part 1 put its host's queued time at 38 us in another). Beside them, non-blocking copies each way between
   pinned host memory and the GPU, 1 kB to 1 MB: the model issues a queued copy at the host's launch_overhead and
   gives the GPU its bytes over the bandwidth (at least the shortest kernel), neither of which calibrate times for a
   copy (its copy latency waits for each); on the lent H200 such copies took 5 us (d2h) and 7-10 us (h2d) a call back
   to back, where its launch_overhead was 5.9 us.
4. On the CPU, the iris training step in a fresh process at torch's default threads with OpenMP's idle threads left to
   their default, passive (sleeping) and active (spinning), and at one intra-op thread (OMP_NUM_THREADS=1): whether idle
   threads slow a host-bound loop. The model predicts the 16-thread Xeon's host-bound CPU points at about half their
   time, and the mlp_surface points of both Xeons (at 2 threads as at 16) at 0.3-0.66 of it, where the 2-core AMD EPYC
   VMs' are at 0.7-1.2: the number of threads alone cannot be why.

    .venv/bin/python benchmarks/host_costs.py [--json out.json]

Prints one table per part; a part that needs CUDA says it could not run on a machine without it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import devices  # noqa: E402
from core.experiments.iris.model import initial_model, iris_data  # noqa: E402
from core.measure import timing  # noqa: E402

QUEUED_CALLS = 200
COPY_ELEMENTS = (256, 4096, 40_000, 262_144)  # float32: 1 kB, 16 kB, 160 kB (matmul's size 200), 1 MB
GEMM_SIZES = (16, 64, 128, 256)
PAUSE_S = 20e-6  # single-threaded Python between two GEMMs, about a small op's dispatch or two


def operations(device: str, grad: bool) -> dict:
    """Each class's call on `device`: small operands, fresh outputs (the caching allocator in the call)."""
    def t(*shape):
        return torch.randn(*shape, device=device, requires_grad=grad)
    one, a, b, bias = t(1), t(64, 64), t(64, 64), t(64)
    x1, w1 = t(8, 16, 32), t(32, 16, 5)
    x2, w2 = t(8, 16, 8, 8), t(32, 16, 3, 3)
    linear = torch.nn.Linear(64, 64).to(device).requires_grad_(grad)
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3)).to(device)
    mlp.requires_grad_(grad)
    x4 = t(16, 4)
    return {
        "add 1 element": lambda: one + one,
        "relu 64x64": lambda: torch.relu(a),
        "sum 64x64": lambda: a.sum(),
        "t (a view, no kernel)": lambda: a.t(),
        "mm 64x64x64 (cuBLAS)": lambda: a @ b,
        "addmm 64x64x64 (cuBLAS)": lambda: torch.addmm(bias, a, b),
        "F.linear 64->64": lambda: F.linear(a, b, bias),
        "nn.Linear 64->64 (module call)": lambda: linear(a),
        "conv1d 16->32 k5 (cuDNN)": lambda: F.conv1d(x1, w1),
        "conv2d 16->32 k3 (cuDNN)": lambda: F.conv2d(x2, w2),
        "mse_loss 64x64": lambda: F.mse_loss(a, b),
        "iris MLP forward (5 ops, 4 modules)": lambda: mlp(x4),
    }


def host_per_call(fn, device: str) -> float:
    """Seconds of the host per call: queued behind a spin kernel on a GPU, back to back on the CPU; best of five."""
    if devices.kind(device) == "cpu":
        return min(timing.micro(fn, device, repeats=5, block_seconds=0.02).samples)
    return min(q.host for q in queued(fn, device))


def queued(fn, device: str) -> list[devices.Queued]:
    """Five timings of QUEUED_CALLS calls queued behind a spin kernel on a GPU (devices.queued_seconds), after one
    call to set it up."""
    def queue():
        for _ in range(QUEUED_CALLS):
            fn()
    fn(), devices.synchronize(device)
    return [devices.queued_seconds(device, queue, QUEUED_CALLS) for _ in range(5)]


def op_table(gpus: list[str]) -> list[dict]:
    rows = []
    for grad in (False, True):
        for device in ["cpu", *gpus]:
            for name, fn in operations(device, grad).items():
                rows.append({"part": "ops", "device": device, "autograd": grad, "operation": name,
                             "host_us": 1e6 * host_per_call(fn, device)})
    return rows


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def wake_table() -> list[dict]:
    rows = []
    default = torch.get_num_threads()
    for threads in sorted({default, 1}, reverse=True):
        torch.set_num_threads(threads)
        for n in GEMM_SIZES:
            a, b = torch.randn(n, n), torch.randn(n, n)
            back_to_back = host_per_call(lambda: a @ b, "cpu")

            def paused():
                spin(PAUSE_S)
                a @ b
            rows.append({"part": "wake", "threads": threads, "size": n, "back_to_back_us": 1e6 * back_to_back,
                         "after_pause_us": 1e6 * (host_per_call(paused, "cpu") - PAUSE_S)})
    torch.set_num_threads(default)
    return rows


def iris_calls(device: str) -> dict:
    """The iris experiment's MLP and data (core.experiments.iris.model) on `device`: its forward without autograd, and
    its full-batch training step."""
    mlp = initial_model(0).to(device)
    x, y = (t.to(device) for t in iris_data())
    optimizer = torch.optim.SGD(mlp.parameters(), lr=0.01)

    def forward():
        with torch.no_grad():
            return mlp(x)

    def step():
        optimizer.zero_grad()
        F.cross_entropy(mlp(x), y).backward()
        optimizer.step()
    return {"iris forward, no autograd": forward, "iris training step": step}


def copy_calls(device: str) -> dict:
    """Non-blocking copies between pinned host memory (devices.pin) and `device`, each way, at each of COPY_ELEMENTS:
    the matmul experiment's h2d and d2h pinned variants at other sizes."""
    calls = {}
    for n in COPY_ELEMENTS:
        host, back = (devices.pin(torch.ones(n), device) for _ in range(2))
        there = torch.empty(n, device=device)
        calls[f"h2d {4 * n:,} B pinned"] = lambda there=there, host=host: there.copy_(host, non_blocking=True)
        calls[f"d2h {4 * n:,} B pinned"] = lambda there=there, back=back: back.copy_(there, non_blocking=True)
    return calls


def steady_table(gpus: list[str]) -> list[dict]:
    rows = []
    for device in gpus:
        for name, fn in (iris_calls(device) | copy_calls(device)).items():
            alone = queued(fn, device)
            back_to_back = timing.micro(fn, device, repeats=5, block_seconds=0.05).samples
            rows.append({"part": "steady", "device": device, "call": name,
                         "host_queued_us": 1e6 * min(q.host for q in alone),
                         "device_queued_us": 1e6 * min(q.device for q in alone),
                         "back_to_back_us": 1e6 * statistics.median(back_to_back)})
    return rows


def cpu_step_seconds() -> float:
    """The median seconds of the iris training step on the CPU, blocks of calls (what `--cpu-step` prints)."""
    return statistics.median(timing.micro(iris_calls("cpu")["iris training step"], "cpu", repeats=7,
                                          block_seconds=0.05).samples)


SETTING_VARIABLES = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# Part 4's settings: the environment variables each child process starts with (beyond this one's, less
# SETTING_VARIABLES). Not MKL_NUM_THREADS=1 alone: torch 2.13 then takes one intra-op thread too, whatever
# OMP_NUM_THREADS says (measured on the 2-core AMD EPYC VM), so it would repeat OMP_NUM_THREADS=1.
CPU_SETTINGS = {"default": {}, "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
                "OMP_WAIT_POLICY=ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"}, "OMP_NUM_THREADS=1": {"OMP_NUM_THREADS": "1"}}


def wait_table(settings: dict[str, dict] = CPU_SETTINGS) -> list[dict]:
    """Part 4: the CPU step in a process of its own per setting (its environment variables), with the threads torch
    took there."""
    rows = []
    for name, variables in settings.items():
        env = {k: v for k, v in os.environ.items() if k not in SETTING_VARIABLES} | variables
        out = subprocess.run([sys.executable, __file__, "--cpu-step"], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        rows.append({"part": "wait", "setting": name, "threads": int(out[1]), "step_us": 1e6 * float(out[0])})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write every row here")
    parser.add_argument("--cpu-step", action="store_true", help=argparse.SUPPRESS)  # part 4's child process
    args = parser.parse_args()
    if args.cpu_step:
        print(cpu_step_seconds(), torch.get_num_threads())
        return
    gpus = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(len(gpus)))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, GPUs: "
          f"{names or 'none (the GPU columns could not run)'}")
    ops = op_table(gpus)
    print("\nHost µs per call (a GPU's queued behind a spin kernel: its launch, not its kernel)")
    for grad in (False, True):
        print(f"\n  autograd recording: {grad}")
        print("  " + f"{'operation':40s}" + "".join(f"{d:>12s}" for d in ["cpu", *gpus]))
        for name in dict.fromkeys(r["operation"] for r in ops):
            cells = [r["host_us"] for r in ops if r["autograd"] == grad and r["operation"] == name]
            print("  " + f"{name:40s}" + "".join(f"{c:12.2f}" for c in cells))
    wake = wake_table()
    print(f"\nCPU GEMM µs: back to back, and after {PAUSE_S * 1e6:.0f} µs of single-threaded Python (less it)")
    for r in wake:
        print(f"  threads {r['threads']:3d}  n={r['size']:4d}  {r['back_to_back_us']:9.2f}  {r['after_pause_us']:9.2f}")
    steady = steady_table(gpus)
    print("\nµs per call on each GPU: the host's and the device's queued (each alone), and back to back")
    if not gpus:
        print("  no GPU here: this part could not run")
    for r in steady:
        print(f"  {r['device']:8s} {r['call']:28s} host {r['host_queued_us']:8.1f}  device {r['device_queued_us']:8.1f}"
              f"  back to back {r['back_to_back_us']:8.1f}")
    wait = wait_table()
    print("\nThe iris training step on the CPU, µs, in a fresh process per setting (torch's intra-op threads there)")
    for r in wait:
        print(f"  {r['setting']:24s} {r['threads']:3d} threads {r['step_us']:9.1f}")
    if args.json:
        args.json.write_text(json.dumps(ops + wake + steady + wait, indent=1))


if __name__ == "__main__":
    main()
