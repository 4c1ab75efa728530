"""Experiment 5: the Jacobian of a 1 -> 20 -> 20 -> 400 tanh network with respect to a batch of `val`
scalar inputs. The write-up's torch.autograd.functional.jacobian builds the full val x 400 x val x 1
Jacobian with one backward pass per output element (quadratic in val, all but 1/val of it zeros); the
per-sample methods compute only its diagonal blocks. Every point's memory and time are estimated first
and a point that would not fit the device's free memory or the time budget is skipped with its estimates."""
import functools
import os
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
import pandas as pd
import torch

from core import devices, published, versions
from core.measure import timing
from core.measure.experiment import MEMORY_FRACTION, Point, RunState, SkipPoint, Variant, check_memory
from core.present.presented import Presented
from core.experiments.jacobian import model as net
from core.params import Param

AS_WRITTEN, VECTORIZED, JACREV, JACFWD, TUNED, MOVE = (
    "as written", "vectorized full", "vmap jacrev", "vmap jacfwd", "tuned", "move to device")
FULL_FORMS = (AS_WRITTEN, VECTORIZED)
PER_SAMPLE = (TUNED, JACFWD, JACREV)
METHODS = {AS_WRITTEN: net.full_naive, VECTORIZED: net.full_vectorized, JACREV: net.per_sample_jacrev,
           JACFWD: net.per_sample_jacfwd, TUNED: net.forward_pass}
JACOBIAN, MOVE_UNIT = "Jacobian", "move"   # what one timed call is: one Jacobian, or one move to the device
FLOAT = 4                  # bytes per float32
MICRO_BELOW_S = 0.01       # calls estimated shorter than this are timed in blocks (torch.utils.benchmark)
# glibc's heap keeps about one output-sized block per backward pass of the written call (measured with
# peak RSS here: 0.76-0.84 x (400 val)^2 floats for val 30-100), unless MALLOC_MMAP_THRESHOLD_ makes it
# map such blocks and unmap them when freed; the CUDA caching allocator reuses them. Crossover starts this
# experiment's runs (app or CLI) with it (`malloc_mmap_threshold`); glibc reads it once, at process start.
def heap_keeps_blocks(device: str, env: Mapping[str, str] = os.environ) -> bool:
    """Whether a process with this environment keeps the written call's freed blocks on this device."""
    return versions.GLIBC and devices.kind(device) == "cpu" and versions.MALLOC_ENV not in env


@dataclass(frozen=True)
class Complexity:
    """How a method's memory and time grow with val. `bytes(val, heap_keeps_blocks)` comes from its
    largest live tensors (checked against peak RSS on a CPU); `terms` are the time model's terms, whose
    coefficients are fitted to the two largest vals timed on the device in the same run,
    `calibration_vals` before any point is measured; `prior` holds rough coefficients for the guess
    shown before a run only (or the function that works them out, when they are used)."""
    formula: str
    bytes: Callable[[int, bool], float]
    terms: Callable[[int], tuple[float, ...]]
    calibration_vals: tuple[int, int]
    prior: tuple[float, ...] | Callable[[], tuple[float, ...]]

    def prior_coefficients(self) -> tuple[float, ...]:
        return self.prior() if callable(self.prior) else self.prior


def fit_time_model(terms: list[tuple[float, ...]], seconds: list[float]) -> np.ndarray:
    """Non-negative coefficients of seconds = sum(c_i * term_i), minimising the relative error (terms are
    scaled to comparable size first, since val² and 1 differ by many decades)."""
    a = np.asarray(terms, float) / np.asarray(seconds, float)[:, None]
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    from scipy.optimize import nnls  # imported here: 0.9 s of every start otherwise
    coefficients, _ = nnls(a / scale, np.ones(len(seconds)))
    return coefficients / scale


def _naive_bytes(val: int, heap_kept: bool) -> float:
    rows = 2 * FLOAT * net.OUTPUTS * val ** 2 + 300 * net.OUTPUTS * val  # the rows, their stack, a tensor object each
    heap = 0.9 * FLOAT * (net.OUTPUTS * val) ** 2 if heap_kept else 0.0
    return rows + heap


def _naive_terms(val: int) -> tuple[float, float]:
    return float(net.OUTPUTS * val), float(net.OUTPUTS * val * val)


def _linear(val: int) -> tuple[float, float]:
    return 1.0, float(val)


@functools.cache
def _fitted_to_write_up_cpu(terms: Callable[[int], tuple[float, ...]]) -> tuple[float, ...]:
    """The time model through the write-up's own CPU wall times of the written call."""
    wall = published.load("jacobian")
    cpu = wall[(wall["figure"] == "jacobian-wall") & (wall["device"] == "CPU")]
    return tuple(float(c) for c in fit_time_model([terms(int(v)) for v in cpu["val"]], list(cpu["value"])))


COMPLEXITY = {
    # 400 val backward passes, each a fixed cost plus work over the whole batch; the prior is fitted to
    # the write-up's own CPU figures.
    AS_WRITTEN: Complexity("a·400val + b·400val²", _naive_bytes, _naive_terms, (1, 4),
                           functools.partial(_fitted_to_write_up_cpu, _naive_terms)),
    # the (400 val)² identity dominates, plus about 15% for the batched backward pass
    VECTORIZED: Complexity("a + b·val²", lambda v, _: 1.2 * FLOAT * (net.OUTPUTS * v) ** 2,
                           lambda v: (1.0, float(v * v)), (1, 4), (0.01, 8e-4)),
    # jacrev's 400 x 400 basis is materialised per sample under vmap
    JACREV: Complexity("a + b·val", lambda v, _: 1.25 * FLOAT * net.OUTPUTS ** 2 * v, _linear, (10, 100),
                       (5e-3, 1e-3)),
    # forward mode: primal and tangent of every layer (peak RSS 4.3 and 5.3 x 400 floats per sample)
    JACFWD: Complexity("a + b·val", lambda v, _: 5 * FLOAT * net.OUTPUTS * v, _linear, (10, 100), (2e-3, 5e-5)),
    TUNED: Complexity("a + b·val", lambda v, _: 6 * FLOAT * net.OUTPUTS * v, _linear, (10, 100), (1e-3, 2e-5)),
    MOVE: Complexity("a + b·val", lambda v, _: FLOAT * (v + net.PARAMETERS), _linear, (10, 100), (1e-4, 1e-9)),
}


class Jacobian(Presented):
    """Keeps no state: calibrations and reference results live in the run's RunState."""
    malloc_mmap_threshold = 65536  # resident memory grows 1.7 GB at val=60 without it, 58 MB with it
    name = "jacobian"
    title = "Jacobian: the quadratic call and the per-sample methods"
    order = 50
    source = "004_7173efcd1d1f1b20.txt"
    params = (
        Param("vals", int, (10, 30, 100), "batch sizes for every method, the full Jacobian included", low=1, high=10_000,
              many=True),
        Param("per_sample_vals", int, (1000, 100_000), "further batch sizes for the per-sample methods only",
              low=1, high=100_000_000, many=True),
        Param("budget_s", float, 15.0, "time budget of one point: a point whose one call is estimated longer is "
              "skipped; otherwise as many timed calls (up to repeats) as fit are made", low=0.1, high=36_000.0),
        MEMORY_FRACTION,
        Param("repeats", int, 3, "timed calls per point (fewer when the budget allows fewer)", low=1, high=50),
        Param("block_seconds", float, 0.05, "length of one timed block of short calls", low=0.001, high=5.0),
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
        Variant(MOVE, "copy the weights and the input from the host to the device", devices.ACCELERATORS),
    )

    # -- planning --------------------------------------------------------------------------------------
    def points(self, config: dict, device: str) -> list[Point]:
        chosen = {v.name for v in self.variants_for(config, device)}
        full_vals = sorted(set(config["vals"]))
        all_vals = sorted(set(config["vals"]) | set(config["per_sample_vals"]))
        order = (AS_WRITTEN, VECTORIZED, *PER_SAMPLE, MOVE)  # the written call first: it is the reference
        return [Point(device, name, {"val": v}) for name in order if name in chosen
                for v in (all_vals if name in PER_SAMPLE else full_vals)]

    def estimate(self, point: Point, config: dict, run: RunState) -> dict:
        """Memory and time of one call, and the device's free memory; raises SkipPoint (with them) when
        the call would not fit `memory_fraction` of the free memory or the time budget."""
        complexity, val, device = COMPLEXITY[point.variant], point.params["val"], point.device
        # a stand-in's census takes the pre-run guess: meta tensors time nothing, and timing them under the census
        # cost seconds a point
        coefficients, fitted_on = ((np.array(complexity.prior_coefficients()), []) if devices.is_stand_in(device)
                                   else self._fit(point.variant, device, config, run, point.threads))
        timing_estimate = {"estimated_seconds": float(np.dot(coefficients, complexity.terms(val))),
                           "time_model": complexity.formula, "time_coefficients": [float(c) for c in coefficients],
                           "time_fitted_on_vals": fitted_on}
        estimate = check_memory(device, config["memory_fraction"], complexity.bytes(val, heap_keeps_blocks(device)),
                                recorded=timing_estimate) | timing_estimate
        if estimate["estimated_seconds"] > config["budget_s"]:
            raise SkipPoint(f"one call would take about {duration(estimate['estimated_seconds'])}, over the "
                            f"{duration(config['budget_s'])} budget (budget_s)", **estimate)
        return estimate

    def _fit(self, variant: str, device: str, config: dict, run: RunState,
             threads: int | None) -> tuple[np.ndarray, list[int]]:
        """The time model's coefficients from this run's timings of the variant on the device with the
        same threads (calibrating first, once per run), and the vals they were fitted to."""
        used = threads or torch.get_num_threads()
        key = ("calibration", device, variant, used)
        seen = earlier_medians(run.rows, device, variant, used) + run.memo.get(key, [])
        if len({v for v, _ in seen}) < 2:
            run.memo[key] = [(v, _calibrate(run, variant, device, v, config["seed"], threads))
                             for v in COMPLEXITY[variant].calibration_vals]
            seen += run.memo[key]
        per_val = pd.DataFrame(seen, columns=["val", "seconds"]).groupby("val")["seconds"].median()
        return extrapolation_fit(variant, per_val)

    def estimate_seconds(self, config: dict, device: str) -> float:
        """The pre-run guess: the prior coefficients, points over the budget or memory counted as skipped,
        for a run started by Crossover (its environment, not this process's)."""
        total, free = 0.0, devices.free_memory(device)
        heap_kept = heap_keeps_blocks(device, versions.run_environment(self.malloc_mmap_threshold))
        for point in self.points(config, device):
            complexity, val = COMPLEXITY[point.variant], point.params["val"]
            one = float(np.dot(complexity.prior_coefficients(), complexity.terms(val)))
            if one > config["budget_s"] or complexity.bytes(val, heap_kept) > config["memory_fraction"] * free:
                continue
            total += min(max(one, config["budget_s"]), (config["repeats"] + 1) * max(one, config["block_seconds"]))
        return total + 2.0 * len(self.variants_for(config, device))  # calibration

    # -- the work of a point ---------------------------------------------------------------------------
    def workload(self, point: Point, config: dict, run: RunState) -> timing.Workload:
        """Short calls are timed in blocks; a long one gets one warm-up call and as many timed calls as
        the budget leaves room for, or, when the warm-up leaves none, that one call is the measurement
        (cold: the calibrations at small val warmed the code up)."""
        device = point.device
        estimate = self.estimate(point, config, run)
        call, last = method_call(point.variant, device, point.params["val"], config["seed"])
        short = estimate["estimated_seconds"] < MICRO_BELOW_S

        def finish(m: timing.Measurement) -> dict:
            metrics = {"warmup_calls": len(m.warmup)}
            peak = devices.peak_memory(device)
            if peak is not None:
                metrics["peak_bytes"] = peak
            if point.variant != MOVE:
                metrics |= self._check(point, config, run, last.pop("result"))
            return metrics
        return timing.Workload(call, unit=unit(point.variant), repeats=config["repeats"], warmup=1,
                               setup=lambda: devices.reset_peak_memory(device),
                               block_seconds=config["block_seconds"] if short else None,
                               budget_s=None if short else config["budget_s"],
                               threads=point.threads, finish=finish, metrics=estimate)

    def _check(self, point: Point, config: dict, run: RunState, result: torch.Tensor) -> dict:
        """The per-sample Jacobian against the written call's diagonal blocks on the same device."""
        device, val = point.device, point.params["val"]
        blocks = net.diagonal_blocks(result) if point.variant in FULL_FORMS else result
        metrics = {"result_shape": " x ".join(map(str, result.shape)),
                   "result_bytes": result.numel() * result.element_size(),
                   "jacobian_mean_abs": (torch.linalg.vector_norm(blocks, 1) / blocks.numel()).item()}
        if point.variant in FULL_FORMS:
            nonzero = torch.count_nonzero(result).item()
            metrics["nonzero_fraction"] = nonzero / result.numel()
            metrics["off_block_nonzeros"] = nonzero - torch.count_nonzero(blocks).item()
        if point.variant == AS_WRITTEN:
            run.memo[_reference_key(device, val, config)] = blocks.cpu()
        reference = self._reference(device, val, config, run)
        metrics["max_abs_diff_vs_naive"] = (None if reference is None
                                            else (blocks - reference.to(device)).abs().max().item())
        return metrics

    def _reference(self, device: str, val: int, config: dict, run: RunState) -> torch.Tensor | None:
        """The written call's blocks at this val: from its own point, else computed now when it fits the
        budget and memory, else None."""
        key = _reference_key(device, val, config)
        if key not in run.memo:
            try:
                self.estimate(Point(device, AS_WRITTEN, {"val": val}), config, run)
            except SkipPoint:
                return None
            call, last = method_call(AS_WRITTEN, device, val, config["seed"])
            call()
            run.memo[key] = net.diagonal_blocks(last["result"]).cpu()
        return run.memo[key]


def unit(variant: str) -> str:
    return MOVE_UNIT if variant == MOVE else JACOBIAN


def _reference_key(device: str, val: int, config: dict) -> tuple:
    return "reference", device, config["seed"], val


def earlier_medians(rows: list[dict], device: str, variant: str, threads: int) -> list[tuple[int, float]]:
    """(val, seconds per call) of the points of this run measured so far on the device with these threads."""
    return [(row["params"]["val"], row["median"]) for row in rows
            if row["status"] == "ok" and row["device"] == device and row["variant"] == variant
            and row.get("torch_threads") == threads]


def _calibrate(run: RunState, variant: str, device: str, val: int, seed: int, threads: int | None) -> float:
    """The fastest of a few calls: calibrations are short, and a busy machine only ever slows them."""
    call, _ = method_call(variant, device, val, seed)
    return min(run.time(timing.Workload(call, unit(variant), repeats=3, warmup=1, threads=threads), device).samples)


def method_call(variant: str, device: str, val: int, seed: int) -> tuple[Callable[[], None], dict]:
    """The call to time, and a dict where it leaves its last result (so the timed calls' own output is
    checked, never an extra call)."""
    last = {}
    if variant == MOVE:
        host = [p.detach() for p in net.build_model(seed).parameters()] + [net.inputs(seed, val)]
        return (lambda: last.update(result=[x.to(device) for x in host])), last
    model, t = net.build_model(seed).to(device), net.inputs(seed, val).to(device)
    method = METHODS[variant]
    return (lambda: last.update(result=method(model, t))), last


def extrapolation_fit(variant: str, seconds_per_val: pd.Series) -> tuple[np.ndarray, list[int]]:
    """The time model fitted to the two largest vals timed (seconds indexed by val): the points are
    measured in rising val, so these are the nearest to the next one, and a cost that changes regime
    between small and large val (a thread pool kicking in, say) is followed instead of averaged away."""
    largest = seconds_per_val.sort_index().iloc[-2:]
    terms = COMPLEXITY[variant].terms
    return fit_time_model([terms(int(v)) for v in largest.index], list(largest)), [int(v) for v in largest.index]


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min" if seconds < 7200 else f"{seconds / 3600:.3g} h"


EXPERIMENT = Jacobian()
