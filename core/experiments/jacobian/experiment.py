"""Experiment 5: the Jacobian of a 1 -> 20 -> 20 -> 400 tanh network with respect to a batch of `val`
scalar inputs. The write-up's torch.autograd.functional.jacobian builds the full val x 400 x val x 1
Jacobian with one backward pass per output element (quadratic in val, all but 1/val of it zeros); the
per-sample methods compute only its diagonal blocks. Every point's memory and time are estimated first
and a point that would not fit the device's free memory or the time budget is skipped with its estimates."""
import os
import platform
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import psutil
import torch
from scipy.optimize import nnls

from core import devices, timing
from core.experiments.base import Experiment, Point, SkipPoint, Variant
from core.models import jacobian as net
from core.params import Param
from core.verdicts import NEEDS_GPU, NO_DATA, NOT_REPRODUCED, REPRODUCED, Verdict

AS_WRITTEN, VECTORIZED, JACREV, JACFWD, TUNED, MOVE = (
    "as written", "vectorized full", "vmap jacrev", "vmap jacfwd", "tuned", "move to device")
FULL_FORMS = (AS_WRITTEN, VECTORIZED)
PER_SAMPLE = (TUNED, JACFWD, JACREV)
ACCELERATORS = ("cuda", "mps")
METHODS = {AS_WRITTEN: net.full_naive, VECTORIZED: net.full_vectorized, JACREV: net.per_sample_jacrev,
           JACFWD: net.per_sample_jacfwd, TUNED: net.forward_pass}
FLOAT = 4                  # bytes per float32
MICRO_BELOW_S = 0.01       # calls estimated shorter than this are timed in blocks (timing.micro)
WRITE_UP_MAX_VAL = 1000    # speedups over the written call are reported up to the write-up's largest val
# glibc's heap keeps about one output-sized block per backward pass of the written call (measured with
# peak RSS here: 0.76-0.84 x (400 val)^2 floats for val 30-100), unless MALLOC_MMAP_THRESHOLD_ makes it
# map such blocks and unmap them when freed; the CUDA caching allocator reuses them.
HEAP_KEEPS_BLOCKS = platform.libc_ver()[0] == "glibc" and "MALLOC_MMAP_THRESHOLD_" not in os.environ


@dataclass(frozen=True)
class Complexity:
    """How a method's memory and time grow with val. `bytes` comes from its largest live tensors (checked
    against peak RSS on a CPU); `terms` are the time model's terms, whose coefficients are fitted to the
    two largest vals timed on the device in the same run, `calibration_vals` before any point is
    measured; `prior` holds rough coefficients for the guess shown before a run only."""
    formula: str
    bytes: Callable[[int, str], float]
    terms: Callable[[int], tuple[float, ...]]
    calibration_vals: tuple[int, int]
    prior: tuple[float, ...]


def _naive_bytes(val: int, kind: str) -> float:
    rows = 2 * FLOAT * net.OUTPUTS * val ** 2 + 300 * net.OUTPUTS * val  # the rows, their stack, a tensor object each
    heap = 0.9 * FLOAT * (net.OUTPUTS * val) ** 2 if kind == "cpu" and HEAP_KEEPS_BLOCKS else 0.0
    return rows + heap


def _linear(val: int) -> tuple[float, float]:
    return 1.0, float(val)


COMPLEXITY = {
    # 400 val backward passes, each a fixed cost plus work over the whole batch; the prior is fitted to
    # the write-up's own CPU figures (11.1 s at val=100, 524 s at 1000).
    AS_WRITTEN: Complexity("a·400val + b·400val²", _naive_bytes,
                           lambda v: (net.OUTPUTS * v, net.OUTPUTS * v * v), (1, 4), (1.63e-4, 1.15e-6)),
    # the (400 val)² identity dominates, plus about 15% for the batched backward pass
    VECTORIZED: Complexity("a + b·val²", lambda v, k: 1.2 * FLOAT * (net.OUTPUTS * v) ** 2,
                           lambda v: (1.0, float(v * v)), (1, 4), (0.01, 8e-4)),
    # jacrev's 400 x 400 basis is materialised per sample under vmap
    JACREV: Complexity("a + b·val", lambda v, k: 1.25 * FLOAT * net.OUTPUTS ** 2 * v, _linear, (10, 100), (5e-3, 1e-3)),
    # forward mode: primal and tangent of every layer (peak RSS 4.3 and 5.3 x 400 floats per sample)
    JACFWD: Complexity("a + b·val", lambda v, k: 5 * FLOAT * net.OUTPUTS * v, _linear, (10, 100), (2e-3, 5e-5)),
    TUNED: Complexity("a + b·val", lambda v, k: 6 * FLOAT * net.OUTPUTS * v, _linear, (10, 100), (1e-3, 2e-5)),
    MOVE: Complexity("a + b·val", lambda v, k: FLOAT * (v + net.PARAMETERS), _linear, (10, 100), (1e-4, 1e-9)),
}


class Jacobian(Experiment):
    name = "jacobian"
    title = "Jacobian: the quadratic call and the per-sample methods"
    order = 50
    source = "004_7173efcd1d1f1b20.txt"
    claim = ("torch.autograd.functional.jacobian of a 1-20-20-400 tanh network on val inputs is slower on the "
             "GPU than on the CPU at val=100 (19.5 s vs 11.1 s) but faster at val=1000 (3 min 12 s vs 8 min "
             "44 s); moving the model and the input to the GPU takes about 2 ms.")
    summary = ("The write-up's network (Linear(1,20), tanh, Linear(20,20), tanh, Linear(20,400)), seeded on the "
               "CPU and moved to each device, and `t = rand(val, 1)`. **as written** is the write-up's "
               "`torch.autograd.functional.jacobian(model, t)`: the full val x 400 x val x 1 Jacobian. "
               "**vectorized full** is the same call with `vectorize=True`. The per-sample methods compute "
               "only the val x 400 x 1 blocks that can be non-zero: **vmap jacrev** and **vmap jacfwd** "
               "(`torch.func`), and **tuned**, one forward-mode pass (`torch.func.jvp` with a ones tangent, "
               "exact because each sample has one input). **move to device** times copying the weights and "
               "the input to a GPU. Every result is compared with the written call's diagonal blocks at the "
               "sizes where that call ran. Before each point its memory and time are estimated from the "
               "method's complexity (time coefficients fitted to timings taken in the same run); a point "
               "over the device's free memory or the time budget is skipped and recorded with its estimates.")
    params = (
        Param("vals", int, (10, 30, 100), "batch sizes for every method, the full Jacobian included", low=1, high=10_000,
              many=True),
        Param("per_sample_vals", int, (1000, 100_000), "further batch sizes for the per-sample methods only",
              low=1, high=100_000_000, many=True),
        Param("budget_s", float, 15.0, "time budget of one point: a point whose one call is estimated longer is "
              "skipped; otherwise as many timed calls (up to repeats) as fit are made", low=0.1, high=36_000.0),
        Param("memory_fraction", float, 0.5, "share of the device's free memory a point may use", low=0.05, high=1.0),
        Param("repeats", int, 3, "timed calls per point (fewer when the budget allows fewer)", low=1, high=50),
        Param("block_seconds", float, 0.05, "length of one timed block of short calls", low=0.001, high=5.0),
        Param("cpu_threads", int, 0, "torch intra-op threads on the CPU (0: torch's default)", low=0, high=1024),
        Param("seed", int, 0, "seed of the weights (the input uses seed + 1)", low=0, high=2**31 - 2),
    )
    presets = {
        "smoke": {"vals": (2, 6), "per_sample_vals": (200,), "budget_s": 5.0, "repeats": 2, "block_seconds": 0.005},
        "quick": {"vals": (10, 30, 100), "per_sample_vals": (1000, 100_000), "budget_s": 15.0,
                  "repeats": 3, "block_seconds": 0.05},
        "paper": {"vals": (10, 20, 50, 100, 200, 500, 1000),
                  "per_sample_vals": (10_000, 100_000, 1_000_000, 10_000_000), "budget_s": 1800.0,
                  "repeats": 3, "block_seconds": 0.1},
    }
    variants = (
        Variant(AS_WRITTEN, "the write-up's call: torch.autograd.functional.jacobian(model, t), the full "
                            "val x 400 x val x 1 Jacobian, one backward pass per output element"),
        Variant(VECTORIZED, "the same call with vectorize=True: the backward passes batched by vmap over a "
                            "(400 val) x (400 val) identity"),
        Variant(JACREV, "per sample: torch.func.vmap(torch.func.jacrev(model)), val x 400 x 1"),
        Variant(JACFWD, "per sample: torch.func.vmap(torch.func.jacfwd(model)), val x 400 x 1"),
        Variant(TUNED, "one forward-mode pass: torch.func.jvp(model, (t,), (ones_like(t),)), val x 400 x 1"),
        Variant(MOVE, "copy the weights and the input from the host to the device", ACCELERATORS),
    )

    def __init__(self):
        self.timings: dict[tuple, list[tuple[int, float]]] = {}  # (device, variant, threads) -> (val, s per call)
        self.references: dict[tuple, torch.Tensor] = {}  # (device, seed, val) -> the written call's blocks, on the CPU

    # -- planning --------------------------------------------------------------------------------------
    def points(self, config: dict, device: str) -> list[Point]:
        chosen = {v.name for v in self.variants_for(config, device)}
        full_vals = sorted(set(config["vals"]))
        all_vals = sorted(set(config["vals"]) | set(config["per_sample_vals"]))
        order = (AS_WRITTEN, VECTORIZED, *PER_SAMPLE, MOVE)  # the written call first: it is the reference
        return [Point(device, name, {"val": v}) for name in order if name in chosen
                for v in (all_vals if name in PER_SAMPLE else full_vals)]

    def estimate(self, point: Point, config: dict) -> dict:
        """Memory and time of one call, and the device's free memory; raises SkipPoint (with them) when
        the call would not fit `memory_fraction` of the free memory or the time budget."""
        complexity, val, device = COMPLEXITY[point.variant], point.params["val"], point.device
        needed, free = complexity.bytes(val, devices.kind(device)), free_bytes(device)
        with _cpu_threads(device, config["cpu_threads"]):
            coefficients, fitted_on = self._fit(point.variant, device, config["seed"])
        estimate = {"estimated_bytes": needed, "free_bytes": free,
                    "estimated_seconds": float(np.dot(coefficients, complexity.terms(val))),
                    "time_model": complexity.formula, "time_coefficients": [float(c) for c in coefficients],
                    "time_fitted_on_vals": fitted_on}
        if needed > config["memory_fraction"] * free:
            raise SkipPoint(f"needs about {needed / 1e9:.3g} GB; {device} has {free / 1e9:.3g} GB free and a "
                            f"point may use {config['memory_fraction']:.0%} of it (memory_fraction)", **estimate)
        if estimate["estimated_seconds"] > config["budget_s"]:
            raise SkipPoint(f"one call would take about {_duration(estimate['estimated_seconds'])}, over the "
                            f"{_duration(config['budget_s'])} budget (budget_s)", **estimate)
        return estimate

    def _fit(self, variant: str, device: str, seed: int) -> tuple[np.ndarray, list[int]]:
        """The time model's coefficients from this run's timings on the device (calibrating first), and
        the vals they were fitted to."""
        seen = self.timings.setdefault((device, variant, torch.get_num_threads()), [])
        if len({v for v, _ in seen}) < 2:
            seen += [(v, self._time_once(variant, device, v, seed)) for v in COMPLEXITY[variant].calibration_vals]
        per_val = pd.DataFrame(seen, columns=["val", "seconds"]).groupby("val")["seconds"].median()
        return extrapolation_fit(variant, per_val)

    def _time_once(self, variant: str, device: str, val: int, seed: int) -> float:
        """The fastest of a few calls: calibrations are short, and a busy machine only ever slows them."""
        call, _ = _workload(variant, device, val, seed)
        return min(timing.measure(call, device, repeats=3, warmup=1).samples)

    def estimate_seconds(self, config: dict, device: str) -> float:
        """The pre-run guess: the prior coefficients, points over the budget or memory counted as skipped."""
        total, free = 0.0, free_bytes(device)
        for point in self.points(config, device):
            complexity, val = COMPLEXITY[point.variant], point.params["val"]
            one = float(np.dot(complexity.prior, complexity.terms(val)))
            if one > config["budget_s"] or complexity.bytes(val, devices.kind(device)) > config["memory_fraction"] * free:
                continue
            total += min(max(one, config["budget_s"]), (config["repeats"] + 1) * max(one, config["block_seconds"]))
        return total + 2.0 * len(self.variants_for(config, device))  # calibration

    # -- measuring -------------------------------------------------------------------------------------
    def measure(self, point: Point, config: dict) -> dict:
        with _cpu_threads(point.device, config["cpu_threads"]):
            return self._measure(point, config)

    def _measure(self, point: Point, config: dict) -> dict:
        val, device = point.params["val"], point.device
        estimate = self.estimate(point, config)
        call, last = _workload(point.variant, device, val, config["seed"])
        if devices.kind(device) == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        m, warmup = self._time(call, device, estimate["estimated_seconds"], config)
        self.timings[(device, point.variant, torch.get_num_threads())].append((val, m.median))
        metrics = {"torch_threads": torch.get_num_threads(), "warmup_calls": warmup, **estimate}
        if devices.kind(device) == "cuda":
            metrics["peak_bytes"] = torch.cuda.max_memory_allocated(device)
        if point.variant != MOVE:
            metrics |= self._check(point, config, last.pop("result"))
        return {"timing": m.to_dict(), "metrics": metrics}

    def _time(self, call, device: str, seconds: float, config: dict) -> tuple[timing.Measurement, int]:
        """Short calls in blocks (the block-sizing call warms up). A long call is first made once: it is
        the warm-up when the budget leaves room for more calls, then as many as fit are timed; when it
        does not, that one call is the measurement (the calibrations at small val warmed the code up)."""
        if seconds < MICRO_BELOW_S:
            return timing.micro(call, device, repeats=config["repeats"], block_seconds=config["block_seconds"]), 1
        first = timing.measure(call, device, repeats=1, warmup=0)
        room = int(config["budget_s"] / max(first.median, 1e-9)) - 1
        if room < 1:
            return first, 0
        return timing.measure(call, device, repeats=min(config["repeats"], room), warmup=0), 1

    def _check(self, point: Point, config: dict, result: torch.Tensor) -> dict:
        """The per-sample Jacobian against the written call's diagonal blocks on the same device."""
        device, val, seed = point.device, point.params["val"], config["seed"]
        blocks = net.diagonal_blocks(result) if point.variant in FULL_FORMS else result
        metrics = {"result_shape": " x ".join(map(str, result.shape)),
                   "result_bytes": result.numel() * result.element_size(),
                   "jacobian_mean_abs": (torch.linalg.vector_norm(blocks, 1) / blocks.numel()).item()}
        if point.variant in FULL_FORMS:
            nonzero = torch.count_nonzero(result).item()
            metrics["nonzero_fraction"] = nonzero / result.numel()
            metrics["off_block_nonzeros"] = nonzero - torch.count_nonzero(blocks).item()
        if point.variant == AS_WRITTEN:
            self.references[(device, seed, val)] = blocks.cpu()
        reference = self._reference(device, val, config)
        metrics["max_abs_diff_vs_naive"] = (None if reference is None
                                            else (blocks - reference.to(device)).abs().max().item())
        return metrics

    def _reference(self, device: str, val: int, config: dict) -> torch.Tensor | None:
        """The written call's blocks at this val: from its own point, else computed now when it fits the
        budget and memory, else None."""
        key = (device, config["seed"], val)
        if key not in self.references:
            try:
                self.estimate(Point(device, AS_WRITTEN, {"val": val}), config)
            except SkipPoint:
                return None
            call, last = _workload(AS_WRITTEN, device, val, config["seed"])
            call()
            self.references[key] = net.diagonal_blocks(last["result"]).cpu()
        return self.references[key]


@contextmanager
def _cpu_threads(device: str, threads: int):
    """Run with `threads` intra-op threads on the CPU (0 leaves torch's setting alone), then restore."""
    before = torch.get_num_threads()
    if threads and devices.kind(device) == "cpu":
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _workload(variant: str, device: str, val: int, seed: int) -> tuple[Callable[[], None], dict]:
    """The call to time, and a dict where it leaves its last result (so the timed calls' own output is
    checked, never an extra call)."""
    last = {}
    if variant == MOVE:
        host = [p.detach() for p in net.build_model(seed).parameters()] + [net.inputs(seed, val)]
        return (lambda: last.update(result=[x.to(device) for x in host])), last
    model, t = net.build_model(seed).to(device), net.inputs(seed, val).to(device)
    method = METHODS[variant]
    return (lambda: last.update(result=method(model, t))), last


def free_bytes(device: str) -> float:
    """Memory a point may still take: free plus cached-but-unused on CUDA; available RAM on the CPU."""
    kind = devices.kind(device)
    if kind == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    if kind == "mps":
        return float(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())
    return float(psutil.virtual_memory().available)


def fit_time_model(terms: list[tuple[float, ...]], seconds: list[float]) -> np.ndarray:
    """Non-negative coefficients of seconds = sum(c_i * term_i), minimising the relative error (terms are
    scaled to comparable size first, since val² and 1 differ by many decades)."""
    a = np.asarray(terms, float) / np.asarray(seconds, float)[:, None]
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    coefficients, _ = nnls(a / scale, np.ones(len(seconds)))
    return coefficients / scale


def extrapolation_fit(variant: str, seconds_per_val: pd.Series) -> tuple[np.ndarray, list[int]]:
    """The time model fitted to the two largest vals timed (seconds indexed by val): the points are
    measured in rising val, so these are the nearest to the next one, and a cost that changes regime
    between small and large val (a thread pool kicking in, say) is followed instead of averaged away."""
    largest = seconds_per_val.sort_index().iloc[-2:]
    terms = COMPLEXITY[variant].terms
    return fit_time_model([terms(int(v)) for v in largest.index], list(largest)), [int(v) for v in largest.index]


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min" if seconds < 7200 else f"{seconds / 3600:.3g} h"


# -- analysis over the records -----------------------------------------------------------------------
MACHINE_KEYS = ["machine_id", "machine", "device"]


def _ok(rows: pd.DataFrame, variants) -> pd.DataFrame:
    if rows.empty or "val" not in rows.columns:
        return pd.DataFrame(columns=[*MACHINE_KEYS, "variant", "val", "median_s"])
    return rows[(rows["point_status"] == "ok") & rows["variant"].isin(variants)]


def naive_times(rows: pd.DataFrame, val: int) -> pd.DataFrame:
    """Per machine and device: the written call's time at `val`, measured (median over runs) or, when not
    measured there, extrapolated from its time model fitted to the two largest vals measured there."""
    out = []
    for (machine_id, machine, device), part in _ok(rows, [AS_WRITTEN]).groupby(MACHINE_KEYS):
        at_val = part[part["val"] == val]["median_s"]
        if len(at_val):
            seconds, basis = float(at_val.median()), "measured"
        elif part["val"].nunique() >= 2:
            coefficients, fitted_on = extrapolation_fit(AS_WRITTEN, part.groupby("val")["median_s"].median())
            seconds = float(np.dot(coefficients, COMPLEXITY[AS_WRITTEN].terms(val)))
            basis = f"extrapolated ({COMPLEXITY[AS_WRITTEN].formula} fitted to val {' and '.join(map(str, fitted_on))})"
        else:
            continue
        out.append({"machine_id": machine_id, "machine": machine, "device": device, "val": val,
                    "naive_s": seconds, "naive_basis": basis})
    return pd.DataFrame(out, columns=[*MACHINE_KEYS, "val", "naive_s", "naive_basis"])


def speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """Per machine, device and val up to the write-up's largest: the written call's time (measured or
    extrapolated) over the fastest per-sample method's."""
    per_sample = _ok(rows, PER_SAMPLE)
    per_sample = per_sample[per_sample["val"] <= WRITE_UP_MAX_VAL]
    best = (per_sample.groupby([*MACHINE_KEYS, "val", "variant"])["median_s"].median().reset_index()
            .sort_values("median_s").groupby([*MACHINE_KEYS, "val"]).head(1)
            .rename(columns={"variant": "best_method", "median_s": "best_s"}))
    columns = [*MACHINE_KEYS, "val", "naive_s", "naive_basis", "best_method", "best_s", "speedup"]
    if best.empty:
        return pd.DataFrame(columns=columns)
    naive = pd.concat([naive_times(rows, int(v)) for v in sorted(best["val"].unique())], ignore_index=True)
    out = naive.merge(best, on=[*MACHINE_KEYS, "val"])
    out["speedup"] = out["naive_s"] / out["best_s"]
    return out.sort_values([*MACHINE_KEYS, "val"])[columns]


def correctness(rows: pd.DataFrame) -> pd.DataFrame:
    """Every measured point's largest difference from the written call's per-sample Jacobian."""
    ok = _ok(rows, METHODS)
    if "max_abs_diff_vs_naive" not in ok.columns:
        return pd.DataFrame(columns=["machine", "device", "variant", "val", "max_abs_diff_vs_naive"])
    checked = ok[ok["max_abs_diff_vs_naive"].notna()]
    extra = [c for c in ("nonzero_fraction", "off_block_nonzeros") if c in checked.columns]
    return checked[["machine", "device", "variant", "val", "max_abs_diff_vs_naive", *extra]].sort_values(
        ["machine", "device", "val", "variant"])


def skipped(rows: pd.DataFrame) -> pd.DataFrame:
    """The points not attempted, with why and the estimates that decided it."""
    columns = ["machine", "device", "variant", "val", "estimated_seconds", "estimated_gb", "free_gb", "reason"]
    if rows.empty or "estimated_bytes" not in rows.columns:
        return pd.DataFrame(columns=columns)
    part = rows[rows["point_status"] == "skipped"]
    return part.assign(estimated_gb=part["estimated_bytes"] / 1e9, free_gb=part["free_bytes"] / 1e9,
                       reason=part["error"])[columns].sort_values(["machine", "device", "variant", "val"])


def _published_wall(published: pd.DataFrame, device: str, val: int) -> float:
    wall = published[(published["figure"] == "jacobian-wall") & (published["device"] == device)
                     & (published["val"] == val)]
    return float(wall["value"].iloc[0])


def _gpu_vs_cpu(rows: pd.DataFrame, published: pd.DataFrame, val: int, gpu_slower: bool) -> Verdict:
    cpu_s, gpu_s = _published_wall(published, "CPU", val), _published_wall(published, "GPU", val)
    claim = (f"At val={val} the written call is {'slower' if gpu_slower else 'faster'} on the GPU than on the "
             f"CPU (published: GPU {_duration(gpu_s)}, CPU {_duration(cpu_s)})")
    times = naive_times(rows, val)
    if times.empty:
        return Verdict(claim, NO_DATA, f"The written call has not been timed at val={val}, nor at two vals to "
                                       "extrapolate from, on any machine yet.")
    cpu = times[times["device"] == "cpu"].set_index("machine_id")
    gpu = times[times["device"].map(devices.kind).isin(ACCELERATORS)]
    if gpu.empty:
        return Verdict(claim, NEEDS_GPU, "No GPU results on any machine yet: run this experiment on a GPU.")
    paired = gpu[gpu["machine_id"].isin(cpu.index)]
    if paired.empty:
        return Verdict(claim, NO_DATA, "No machine has the written call timed on both its CPU and a GPU yet.")
    ratios = paired.apply(lambda r: r["naive_s"] / cpu.loc[r["machine_id"], "naive_s"], axis=1)
    ratio = float(ratios.median())
    reproduced = ratio > 1 if gpu_slower else ratio < 1
    bases = sorted(set(paired["naive_basis"]) | set(cpu.loc[paired["machine_id"], "naive_basis"]))
    return Verdict(claim, REPRODUCED if reproduced else NOT_REPRODUCED,
                   f"GPU time / CPU time = {ratio:.3g} (median over {len(paired)} GPU(s); published "
                   f"{gpu_s / cpu_s:.3g}). Times: {'; '.join(bases)}.")


def _move(rows: pd.DataFrame, published: pd.DataFrame) -> Verdict:
    stated = float(published.loc[published["figure"] == "jacobian-move", "value"].iloc[0])
    claim = f"Moving the model and the input to the GPU takes about {stated * 1e3:g} ms"
    moves = _ok(rows, [MOVE])
    if _ok(rows, METHODS).empty:
        return Verdict(claim, NO_DATA, "No measured results yet.")
    if moves.empty:
        return Verdict(claim, NEEDS_GPU, "No GPU results on any machine yet: run this experiment on a GPU.")
    measured = float(moves["median_s"].median())
    outcome = REPRODUCED if measured <= 2 * stated else NOT_REPRODUCED
    return Verdict(claim, outcome, f"Measured {measured * 1e3:.3g} ms (median over {len(moves)} point(s), every "
                                   f"val); reproduced means at most twice the published figure.")


def verdicts(rows: pd.DataFrame, published: pd.DataFrame) -> list[Verdict]:
    return [_gpu_vs_cpu(rows, published, 100, gpu_slower=True),
            _gpu_vs_cpu(rows, published, 1000, gpu_slower=False),
            _move(rows, published)]


EXPERIMENT = Jacobian()
