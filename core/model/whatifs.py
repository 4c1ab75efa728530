"""What an expert's fixes would change on a GPU, as the cost model sees them: each fix is a rewrite of the eager
step's census (taken on the GPU's stand-in, core.predict.ownmodel.take), and mixed precision of the GPU's figures too.
Each is a model of the fix, named as such, never a measurement:

- a CUDA graph: the step captured once and replayed: its kernels run as one replay's nodes (one replay between two
  syncs, which no graph can hold), with no dispatch or launch of their own; the Python around them (module calls, the optimiser's loop) and the operations that launch
  nothing do not run; the input's copy into the graph's static input stays.
- torch.compile's fusion (Crossover's model of Inductor): every pointwise operation (PyTorch's own `pointwise` tag:
  activations, adds, scales) folds into a neighbouring kernel, with no dispatch, launch or memory round trip of its
  own; views and the other operations that launch nothing are traced away; the modules' Python runs as one compiled
  call; the kernels left (GEMMs, convolutions, reductions, the optimiser's) are issued from the compiled graph, which
  records one autograd node for all of them, so each costs a bare operation's dispatch.
- pinned memory: the input's host-to-device copy from pinned memory, non-blocking, so the step's work queues behind
  it without the host waiting.
- mixed precision (torch.autocast to float16): each GEMM and convolution runs at the GPU's float16 tensor-core peak
  over its float32 peak times its float32 rate, reading and writing half the bytes, after casting its two operands
  (two more kernels, each with its dispatch); a GPU without a float16 peak in the catalogue is not predicted.
- a larger batch is the same step at a larger batch (core.predict.yourmodel), per sample."""
import copy
import math
from dataclasses import replace
from functools import lru_cache

import torch

from core.model import costmodel, hardware

GRAPH, FUSION, PINNED, HALF = "CUDA graph", "torch.compile (fusion model)", "pinned memory", "mixed precision"
HALF_PEAK = "matmul_flops_half"  # a catalogue GPU's peak: float16 tensor-core FLOP/s, FP32 accumulate, dense
HALF_SCALED = ("matmul_flops", "conv_flops")
CAST = "aten._to_copy"


def as_graph(census: dict) -> dict:
    """The step captured as one CUDA graph and replayed (the module docstring's model)."""
    found = copy.deepcopy(census)
    ops = found["ops"]
    for op in ops:
        if op["kernel"] and not op["copy"] and op["phase"] in ("step", "optimizer"):
            op["phase"] = "graph"
    for stretch in found["stretches"]:
        stretch["ops"] = [[i, calls] for i, calls in stretch["ops"] if _kept_in_graph(ops[i])]
        stretch["graph_replays"] = int(any(ops[i]["phase"] == "graph" for i, _ in stretch["ops"]))
        stretch.update(module_calls=0, module_classes={}, optimizer_steps=0)
    return found


def _kept_in_graph(op: dict) -> bool:
    """What a replay still runs: the graph's nodes, and the copies and reads outside it."""
    return op["phase"] in ("graph", "loading") or bool(op["copy"]) or op["sync"]


def fused(census: dict) -> dict:
    """The step as torch.compile's fusion would run it (the module docstring's model)."""
    found = copy.deepcopy(census)
    ops = found["ops"]
    for op in ops:
        if op["phase"] == "step" and op["kernel"] and not op["copy"]:
            op["autograd"], op["nested"] = False, False
    for stretch in found["stretches"]:
        stretch["ops"] = [[i, calls] for i, calls in stretch["ops"] if not _fused_away(ops[i])]
        if stretch["module_calls"]:
            stretch.update(module_calls=1, module_classes={})
    return found


def _fused_away(op: dict) -> bool:
    if op["phase"] != "step" or op["copy"] or op["sync"]:
        return False
    return not op["launches"] or not op["kernel"] or is_pointwise(op["op"])


@lru_cache(maxsize=None)
def is_pointwise(name: str) -> bool:
    """Whether PyTorch tags an operation (a census's 'aten.relu') pointwise, in any of its overloads."""
    packet = getattr(torch.ops.aten, name.removeprefix("aten."), None)
    if packet is None:
        return False
    return any(torch.Tag.pointwise in getattr(packet, overload).tags for overload in packet.overloads())


def pinned(census: dict) -> dict:
    """The input's host-to-device copies from pinned memory, non-blocking; a stretch that only a blocking copy ended
    runs on into the next."""
    found = copy.deepcopy(census)
    for op in found["ops"]:
        if op["copy"] and op["copy"]["direction"] == "h2d":
            op["copy"]["pinned"], op["sync"] = True, False
    found["stretches"] = _joined(found["stretches"], found["ops"])
    return found


def _joined(stretches: list[dict], ops: list[dict]) -> list[dict]:
    """Stretches no longer ended by a sync (none of their operations syncs) joined to the next, where both occur
    as often."""
    joined = []
    for stretch in stretches:
        last = joined[-1] if joined else None
        if last is not None and not any(ops[i]["sync"] for i, _ in last["ops"]) and last["times"] == stretch["times"]:
            merged = copy.deepcopy(stretch)
            merged["ops"] = last["ops"] + stretch["ops"]
            for key in ("loader_batches", "loader_samples", "graph_replays", "module_calls", "optimizer_steps"):
                merged[key] = last[key] + stretch[key]
            merged["module_classes"] = _summed(last.get("module_classes", {}), stretch.get("module_classes", {}))
            joined[-1] = merged
        else:
            joined.append(copy.deepcopy(stretch))
    for stretch in joined:
        stretch["sync"] = any(ops[i]["sync"] for i, _ in stretch["ops"])
    return joined


def _summed(a: dict, b: dict) -> dict:
    return {key: a.get(key, 0) + b.get(key, 0) for key in a.keys() | b.keys()}


def half_precision(census: dict) -> dict:
    """The step under torch.autocast(float16): each GEMM and convolution moves half its bytes, after a cast of each of
    its two operands (an operation of its own, dispatched and launched, reading its operand in float32 and writing it
    in float16: 6 bytes an element)."""
    found = copy.deepcopy(census)
    ops, casts = found["ops"], {}
    for i, op in enumerate(list(ops)):
        if op["kernel"] and op["formula"] and op["phase"] == "step":
            op["bytes"] /= 2
            at = costmodel.GEMM_LEFT_OPERAND.get(op["op"], 0)  # the two operands (after addmm's bias)
            casts[i] = [len(ops) + k for k in range(2)]
            ops += [{**op, "op": CAST, "formula": False, "flops": math.prod(shape), "bytes": 6 * math.prod(shape),
                     "kernels": 1, "shapes": [shape], "dtypes": ["float32"]} for shape in op["shapes"][at:at + 2]]
    for stretch in found["stretches"]:
        stretch["ops"] += [[cast, calls] for i, calls in stretch["ops"] if i in casts for cast in casts[i]]
    return found


def half_gpu(gpu: hardware.Device) -> hardware.Device | None:
    """The GPU's figures under autocast: its GEMM and convolution rates times its float16 tensor-core peak over its
    float32 peak; None where the catalogue gives no float16 peak for it."""
    half, single = gpu.peak.get(HALF_PEAK), gpu.peak.get("matmul_flops")
    if not (half and single):
        return None
    ratio = half / single
    figures = dict(gpu.figures)
    for name in HALF_SCALED:
        figure = figures[name]
        value = tuple((flops, rate * ratio) for flops, rate in figure.value) if figure.sized else figure.value * ratio
        figures[name] = replace(figure, value=value, beyond=tuple((f, r * ratio) for f, r in figure.beyond),
                                note=f"{figure.note}; times {ratio:.3g} under autocast (float16 peak over float32 peak)")
    return replace(gpu, figures=figures)
