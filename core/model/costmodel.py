"""The cost model: the time of one sample of a workload (the unit a record's `median` is in) on a piece of
hardware, predicted from the workload's census (core/measure/census.py: its operations, per call, and the
stretches its syncs cut a sample into) and the hardware's figures (a `core.model.hardware.Target`: a host CPU
and, for a GPU target, the GPU it drives). A GPU is predicted from the stand-in's census (the workload
built for the meta device); a CPU from any census. Figures are read per call: a sized figure at the
operation's FLOPs per call.

The rules it applies, per operation call and per stretch, on a CPU and on a GPU target, are in docs/cost-model.md
("The rules, as the code applies them"): that page and this module change together."""
import math
from dataclasses import dataclass, replace
from functools import lru_cache, partial

import numpy as np

from core.model import conv_probes
from core.measure.kernels import cpu_attention
from core.store import results

PARTS = ("host", "launches", "loading", "compute", "copies", "sync")
PHASES = ("step", "loading", "graph", "optimizer")
TRAINING_OP = "training_op_overhead"  # a GPU's host figure for the operations op_overhead_autograd prices on a CPU
PYTHON_PHASES = ("step", "optimizer")  # where the host runs the unit's Python (not a fetch, not a replay)
DIRECTIONS = ("h2d", "d2h", "d2d")
LOADER_BATCH = 64  # the batch of the host's loader_batched_per_sample figure
COLLECTIONS, HEAP = "loader_collections_per_sample", "collection_heap_objects"
UNCOLLECTED, COLLECTION_SECONDS = "loader_uncollected_per_sample", "full_collection_seconds"
NUMPY_FIELD = "loader_numpy_field_seconds"
CONVERSION = "aten.lift_fresh"  # torch.as_tensor of a NumPy row: what a DataLoader fetch's default collate does
SORT_ROWS = "sort_row_element_seconds"
# calibrate's largest element-wise probe that runs in cache (SMALL_ELEMENTWISE): 12 MB of float32 operands; its larger
# probe streams from memory and faults its pages in
IN_CACHE_ELEMENTS = 2**20
# glibc's largest mmap threshold on 64-bit Linux: a CPU tensor of this size or more (its chunk's header puts a tensor of
# exactly 32 MiB past it) is mapped afresh at every allocation, and each of its pages faults in on its first write (one
# below it is reused from the heap once the threshold has grown to it)
MMAP_THRESHOLD = 32 * 2**20
# A host's figures for its DataLoader's full garbage collections: all or none (they come from one probe)
COLLECTION_FIGURES = (UNCOLLECTED, COLLECTIONS, COLLECTION_SECONDS, HEAP)
ELEMENT_SIZES = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2,
                 "int8": 1, "uint8": 1, "bool": 1}
GEMM_LEFT_OPERAND = {"aten.mm": 0, "aten.bmm": 0, "aten.addmm": 1, "aten.baddbmm": 1}  # where a GEMM's two matrices start
# The host's grid of GEMM times each GEMM is priced by: addmm is what nn.Linear issues (its weight read transposed)
GEMM_GRID = {"aten.mm": "gemm_seconds", "aten.bmm": "gemm_seconds", "aten.addmm": "linear_seconds",
             "aten.baddbmm": "gemm_seconds"}
WIDE_GEMM = "wide_gemm_seconds"  # a host's GEMMs with a weight past the caches, by M x K x N: where the grid ends
ONE_CHANNEL = "conv_one_channel_flops"
BACKWARD_SHARE = "conv_backward_share"
CONV_WEIGHT = {"aten.convolution": 1, "aten.convolution_backward": 2}  # the weight's place among a convolution's inputs
TINY_SECONDS = 1e-12  # a grid figure's floor before its logarithm
ONEDNN_LSTM = ("aten.mkldnn_rnn_layer", "aten.mkldnn_rnn_layer_backward")  # its forward and backward (standin_cpu_rnn)
# A host's rates for them, by the layer's GEMM FLOPs per step (calibrate's fused-LSTM probe)
LSTM_RATES = dict(zip(ONEDNN_LSTM, ("lstm_layer_flops", "lstm_layer_backward_flops")))
# Element-wise work per step, row and hidden unit of an LSTM layer: what ATen's unfused cell writes (the gates' sum 4,
# three sigmoids, two tanh, three products, one sum: 13); its backward taken as twice its forward
LSTM_GATE_ELEMENTS = {"aten.mkldnn_rnn_layer": 13, "aten.mkldnn_rnn_layer_backward": 26}
# torch's CPU flash attention, forward and backward (core.measure.kernels.cpu_attention): the host's figure per block, where
# its query sits among the operands, and the GEMMs of one block (the backward recomputes the scores)
FLASH_ATTENTION = {"aten._scaled_dot_product_flash_attention_for_cpu": ("flash_attention_seconds", 0, 2),
                   "aten._scaled_dot_product_flash_attention_for_cpu_backward": ("flash_attention_backward_seconds", 1, 5)}
MISSING = object()


class PredictionError(ValueError):
    pass


@dataclass(frozen=True)
class Prediction:
    """One sample's predicted seconds on `target` (its title), split into PARTS that sum to `seconds`; on a GPU
    target, `gpu_idle` of those seconds the GPU does no work (its compute and copies are the rest)."""
    seconds: float
    parts: dict[str, float]
    target: str
    notes: tuple[str, ...] = ()
    gpu_idle: float = 0.0

    def to_dict(self) -> dict:
        return {"seconds": self.seconds, "parts": dict(self.parts), "target": self.target, "notes": list(self.notes),
                "gpu_idle": self.gpu_idle}


@dataclass(frozen=True)
class Cost:
    """Seconds of a call or a stretch by where they go: `copies` are non-blocking copies (device time),
    `serial` the blocking ones (after the device's work), `loading` a DataLoader fetch's beyond its per-sample
    figures."""
    host: float = 0.0
    loading: float = 0.0
    launches: float = 0.0
    compute: float = 0.0
    copies: float = 0.0
    serial: float = 0.0
    sync: float = 0.0

    def plus(self, other: "Cost", calls: float) -> "Cost":
        """This cost and `calls` times the other (field by field, written out: a page's predictions call it 100,000
        times)."""
        return Cost(self.host + calls * other.host, self.loading + calls * other.loading,
                    self.launches + calls * other.launches, self.compute + calls * other.compute,
                    self.copies + calls * other.copies, self.serial + calls * other.serial, self.sync + calls * other.sync)


def predict(census: dict, target) -> Prediction:
    """The predicted time of one sample of the census's workload on `target` (a core.model.hardware.Target)."""
    ops, stretches = _checked(census)
    costs = [_call_cost(op, target) for op in ops]
    parts = dict.fromkeys(PARTS, 0.0)
    busy = 0.0  # the GPU's seconds of work: its compute and copies
    collected = _collected_share(census, stretches, target.host)
    for stretch in stretches:
        for part, seconds in _stretch_parts(stretch, ops, costs, target, collected).items():
            parts[part] += seconds * stretch["times"]
        total = _total(stretch, costs)
        busy += (total.compute + total.copies + total.serial) * stretch["times"]
    seconds = sum(parts.values())
    idle = max(seconds - busy, 0.0) if target.gpu is not None else 0.0
    return Prediction(seconds, parts, target.title, _notes(census, ops, target), idle)


def shares_text(parts: dict[str, float], seconds: float) -> str:
    """'host 62%, compute 30%, ...': each part's share of `seconds`, largest first, those under 0.5% left out."""
    shares = sorted(parts.items(), key=lambda item: -item[1])
    return ", ".join(f"{part} {part_s / seconds:.0%}" for part, part_s in shares if seconds and part_s / seconds >= 0.005)


def per_unit(prediction: Prediction, per_call) -> Prediction:
    """The prediction per unit: a sample is one call of `per_call` units (a record's per_call)."""
    if isinstance(per_call, bool) or not isinstance(per_call, (int, float)) or not (
            math.isfinite(per_call) and per_call > 0):
        raise PredictionError(f"per_call: {per_call!r} is not a positive number of units per call")
    return replace(prediction, seconds=results.per_unit(prediction.seconds, per_call),
                   parts={part: results.per_unit(seconds, per_call) for part, seconds in prediction.parts.items()})


def crossover(predicted: list[tuple[float, float, float]]) -> float | None:
    """The smallest swept value from which the GPU's predicted time per unit is below the CPU's at every larger
    value swept (the measured crossovers' rule, core.present.analysis.crossovers), None when it is not at the
    largest. `predicted`: (value, CPU seconds, GPU seconds) per point, in any order."""
    for i, point in enumerate(predicted):
        if not (isinstance(point, (tuple, list)) and len(point) == 3 and all(_is_number(v) for v in point)):
            raise PredictionError(f"predicted[{i}]: {_shown(point)} is not (value, CPU seconds, GPU seconds), "
                                  f"three finite numbers")
    found = None
    for value, cpu, gpu in sorted(predicted, reverse=True):
        if gpu >= cpu:
            break
        found = value
    return found


# -- one call ---------------------------------------------------------------------------------------

def _call_cost(op: dict, target) -> Cost:
    if target.gpu is None:
        return _cpu_call(op, target.host)
    return _gpu_call(op, target.host, target.gpu).plus(_fetch_cost(op, target.host), 1)


def _cpu_call(op: dict, host) -> Cost:
    if op["phase"] == "loading":
        return _fetch_cost(op, host)
    if op["copy"]:
        return Cost()
    works = op["launches"] and (op["kernel"] or op["where"] == "cpu")
    return Cost(host=_overhead(op, host), compute=_host_work(op, host) if works else 0.0)


def _gpu_call(op: dict, host, gpu) -> Cost:
    on_host = 0.0 if op["phase"] in ("loading", "graph") else _overhead(op, host)
    if _training_priced(op) and gpu.has(TRAINING_OP):  # its launch inside it
        on_host = gpu.value(TRAINING_OP)
    direction = op["copy"]["direction"] if op["copy"] else None
    if direction in ("h2d", "d2h"):
        if op["copy"]["pinned"] and not op["sync"]:
            return _queued_copy_cost(op["copy"], gpu, on_host)
        seconds = _transfer_seconds(op["copy"], gpu)
        return Cost(host=on_host, serial=seconds) if op["sync"] else Cost(host=on_host, copies=seconds)
    sync = gpu.value("sync_round_trip") if op["sync"] else 0.0
    if op["kernel"] or direction == "d2d":
        return _kernel_cost(op, gpu, on_host).plus(Cost(host=on_host, sync=sync), 1)
    if op["launches"] and op["where"] == "cpu" and op["phase"] in PYTHON_PHASES:
        on_host += _host_work(op, host)
    return Cost(host=on_host, sync=sync)


def _fetch_cost(op: dict, host) -> Cost:
    """What a DataLoader fetch's operation (phase loading) adds to its per-sample figures: a NumPy row's conversion
    (CONVERSION, not a copy to a device) the host's loader_numpy_field_seconds, where it measured that; nothing
    else. A batch's Python numbers, which the default collate turns into a tensor once per batch, count likewise."""
    converts = op["phase"] == "loading" and op["op"] == CONVERSION and not op["copy"] and host.has(NUMPY_FIELD)
    return Cost(loading=host.value(NUMPY_FIELD)) if converts else Cost()


def _kernel_cost(op: dict, gpu, dispatch: float) -> Cost:
    if op["copy"]:  # between two devices: read and written once each
        op = op | {"flops": 0.0, "formula": False, "bytes": 2 * op["copy"]["bytes"]}
    kernels = op.get("kernels", 1)
    device = max(_work_seconds(op, gpu, None), kernels * gpu.value("shortest_kernel"))
    if op["phase"] == "graph":
        return Cost(compute=device + kernels * gpu.value("graph_replay_per_node"))
    launches = _launch_rest(gpu, dispatch)  # C++ enqueues each further kernel
    if kernels > 1:
        launches += (kernels - 1) * gpu.value("kernel_enqueue")
    return Cost(launches=launches, compute=device)


def _overhead(op: dict, host) -> float:
    if op["phase"] == "optimizer":
        return host.value("optimizer_op_overhead")
    if op.get("transformed"):
        return host.value("op_overhead_transformed")
    if not op["autograd"]:
        return host.value("op_overhead_nested_no_grad" if op.get("nested") else "op_overhead_no_grad")
    return host.value("op_overhead_nested" if op.get("nested") else "op_overhead_autograd")


def _records_from_python(op: dict) -> bool:
    """An operation Python issues that autograd records, outside an optimiser's step and a torch.func transform:
    what op_overhead_autograd prices on a CPU (and training_op_overhead on a GPU that measured it)."""
    return op["phase"] == "step" and op["autograd"] and not op.get("nested") and not op.get("transformed")


def _training_priced(op: dict) -> bool:
    """An operation a GPU's training_op_overhead prices: one _records_from_python names, on the unit's device (not
    the host's CPU tensors)."""
    return _records_from_python(op) and op["where"] != "cpu"


def recording_calls(census: dict) -> float:
    """A sample's calls of the operations a GPU's training_op_overhead prices (_training_priced)."""
    ops, stretches = _checked(census)
    return sum(calls * stretch["times"] for stretch in stretches for index, calls in stretch["ops"]
               if _training_priced(ops[index]))


def host_seconds(census: dict, target) -> float:
    """The host's side of a sample on `target`: every stretch's host, launches and loading, whether or not its
    device's side is the longer."""
    ops, stretches = _checked(census)
    costs = [_call_cost(op, target) for op in ops]
    collected = _collected_share(census, stretches, target.host)
    return sum(stretch["times"] * sum(_host_side(stretch, _total(stretch, costs), target, collected).values())
               for stretch in stretches)


def _python_seconds(stretch: dict, host) -> float:
    """The host's Python in a stretch that no operation shows: its module calls and optimiser steps."""
    return _module_seconds(stretch, host) + stretch["optimizer_steps"] * host.value("optimizer_step")


def _module_seconds(stretch: dict, host) -> float:
    """Each module call at the host's figure for its class (module_call_seconds), or at a bare module's
    (module_call) for a class it did not measure and for calls the census names no class of."""
    return module_seconds(stretch, host.value("module_call"), host.value("module_call_seconds"))


def module_seconds(stretch: dict, bare: float, by_class: dict[str, float]) -> float:
    """A stretch's module calls at `by_class`'s figure for their class, else at `bare` (calls it names no class of
    included)."""
    classes = stretch.get("module_classes", {})
    unnamed = max(stretch["module_calls"] - sum(classes.values()), 0)
    return unnamed * bare + sum(calls * by_class.get(name, bare) for name, calls in classes.items())


def _work_seconds(op: dict, device, elementwise: str | None) -> float:
    """max(flops / rate, bytes / memory_bandwidth) of one call (a GPU kernel's roofline); `elementwise` names the
    rate of a per-element operation (None: its bytes only)."""
    return max(_flops_seconds(op, device, elementwise), _bytes_seconds(op, device))


def _flops_seconds(op: dict, device, elementwise: str | None, in_cache: bool = False) -> float:
    """flops / rate of one call; `in_cache`: a per-element operation's rate at most IN_CACHE_ELEMENTS' (its bytes
    from memory are priced apart)."""
    flops = op["flops"]
    if op["formula"] and "conv" in op["op"]:
        return _conv_seconds(op, device) if flops else 0.0
    rate = "matmul_flops" if op["formula"] else elementwise
    if not (rate and flops):
        return 0.0
    at = min(flops, IN_CACHE_ELEMENTS) if in_cache and rate == elementwise else flops
    return flops / device.value(rate, flops=at)


def _bytes_seconds(op: dict, device) -> float:
    return op["bytes"] / device.value("memory_bandwidth", flops=op["flops"]) if op["bytes"] else 0.0


def _conv_seconds(op: dict, device) -> float:
    """A convolution call's seconds: its FLOPs at _conv_rate; on a host that timed its backward's share of its
    probes' forward and backward (conv_backward_share), its forward's part (a forward call) or its backward's (a
    backward call, in proportion to the gradients it computes) of the forward and backward its forward FLOPs make,
    at _conv_rate, and at least the smallest probe's (a fixed part: oneDNN's)."""
    op = _gradients_counted(op)
    weight = _conv_weight(op)
    found = _backward_share(op, weight, device)
    if found is None:  # a GPU, a host that did not time it, a convolution of a rank it did not
        return op["flops"] / _conv_rate(op["flops"], weight, device)
    forward, share, smallest = found
    at = max(forward, smallest)
    whole = 3 * at / _conv_rate(at, weight, device)
    if op["op"] == "aten.convolution":
        return whole * (1 - share)
    return whole * share * op["flops"] / (2 * forward)


def _gradients_counted(op: dict) -> dict:
    """A convolution_backward with its FLOPs at most its two gradients' (each its forward's FLOPs): a census taken
    before the census divided a grouped convolution's weight gradient by its groups (core.measure.census.
    conv_backward_flops) counted it as torch.utils.flop_counter does, as a dense one's (32 times over for 32 channels)."""
    if op["op"] != "aten.convolution_backward" or len(op.get("shapes") or []) < 3:
        return op
    return op | {"flops": min(op["flops"], 2 * conv_probes.backward_forward_flops(op["shapes"]))}


def _backward_share(op: dict, weight: list[int] | None, device) -> tuple[float, float, float] | None:
    """A convolution call's forward FLOPs and, from the device's conv_backward_share, its backward's share and the
    smallest probe's FLOPs (conv_probes.backward_share); None where the device or the census lacks them."""
    shares = device.value(BACKWARD_SHARE) if weight and device.has(BACKWARD_SHARE) else {}
    if not shares:
        return None
    forward = op["flops"] if op["op"] == "aten.convolution" else conv_probes.backward_forward_flops(op["shapes"])
    found = conv_probes.backward_share(shares, weight, forward) if forward > 0 else None
    return None if found is None else (forward, *found)


def _conv_rate(flops: float, weight: list[int] | None, device) -> float:
    """A convolution call's FLOP/s: conv_flops at its FLOPs; on a host that timed one-channel convolutions
    (conv_one_channel_flops) of its rank, between the two in the logarithms of its weight's input channels, from
    the one-channel rate at 1 to conv_flops' at the 16 of its probes and beyond."""
    rate = _conv_flops(flops, device)
    if weight is None or not device.has(ONE_CHANNEL):  # a GPU's, a host's without it, or not a known conv
        return rate
    few = conv_probes.rates_by_rank(device.value(ONE_CHANNEL)).get(len(weight))
    if not few:  # none timed at its rank (an older profile, a catalogue CPU, a 3-D convolution)
        return rate
    many = conv_probes.channel_share(weight[1])
    return math.exp((1 - many) * math.log(loglog(few, flops)) + many * math.log(rate))


def _conv_flops(flops: float, device) -> float:
    """conv_flops at `flops`; beyond its largest probe, at least the rate of that probe's time plus the further
    FLOPs at matmul_flops' rate for `flops`: a quick calibration's probes, and a GPU's, stop while a convolution is
    still mostly its fixed part, which holding the last probe's rate would carry to any size."""
    rate = device.value("conv_flops", flops=flops)
    figure = device.figures["conv_flops"]
    if not getattr(figure, "sized", False) or flops <= figure.value[-1][0]:
        return rate
    last, last_rate = figure.value[-1]
    seconds = last / last_rate + (flops - last) / device.value("matmul_flops", flops=flops)
    return max(rate, flops / seconds)


def _conv_weight(op: dict) -> list[int] | None:
    """The weight's shape (out channels, in channels per group, kernel...) of aten.convolution (input, weight, ...)
    and aten.convolution_backward (grad_output, input, weight, ...); None for another convolution."""
    position = CONV_WEIGHT.get(op["op"])
    shapes = op.get("shapes") or []
    return shapes[position] if position is not None and len(shapes) > position else None


def _host_work(op: dict, host) -> float:
    """Seconds of one call's work on a CPU. A calibrated one: its time with its operands in cache, plus its bytes read
    and written at memory_bandwidth. Calibrate's probes repeat a call on the same tensors, which stay in cache; in a
    sample the operations between two uses of a tensor have moved it out (tabnet's training step, its operations
    replayed in order, took 1.5 times their sum replayed one by one: the excess its bytes at about the calibrated
    bandwidth). A catalogue CPU's figures are large working sets' (its element-wise rate is its memory bandwidth
    over 12 bytes): the larger of the two, as on a GPU."""
    in_cache, streamed = _in_cache_seconds(op, host), _bytes_seconds(op, host)
    if host.origin != "calibrated":
        return max(in_cache, streamed)
    faults = fault_seconds_per_byte(host)
    return in_cache + streamed + (_written_bytes(op) * faults if faults else 0.0)


def _written_bytes(op: dict) -> float:
    """The bytes of the new tensor an operation writes, where the census tells them and it is MMAP_THRESHOLD or more (0
    otherwise, and for an in-place operation, which writes over a tensor it has): a GEMM's M x N, a per-element
    operation's elements (its FLOPs), at its first operand's element size."""
    if op["op"].endswith("_"):
        return 0.0
    if op["op"] in GEMM_LEFT_OPERAND:
        left, right = _gemm_operands(op, GEMM_LEFT_OPERAND[op["op"]])
        elements = math.prod(left[:-1]) * right[-1]
    else:
        elements = 0.0 if op["formula"] else op["flops"]
    written = elements * _element_size(op)
    return written if written >= MMAP_THRESHOLD else 0.0


def _element_size(op: dict) -> int:
    dtypes = op.get("dtypes") or ["float32"]
    return ELEMENT_SIZES.get(dtypes[0], 4)


def fault_seconds_per_byte(host) -> float:
    """What a CPU pays per byte to fault in a freshly mapped tensor's pages, from its element-wise probe: its largest
    add (64 MiB a tensor in a full calibration) writes a new tensor past MMAP_THRESHOLD each call, so its seconds per
    element beyond the in-cache rate and the 12 bytes streamed are the faults of 4 bytes; 0 where that probe stayed
    under the threshold (a quick calibration's) or the host is not calibrated."""
    figure = host.figures.get("elementwise_rate")
    if host.origin != "calibrated" or not getattr(figure, "sized", False):
        return 0.0
    largest = figure.value[-1][0]
    if 4 * largest < MMAP_THRESHOLD:
        return 0.0
    streamed = 12 / host.value("memory_bandwidth")
    beyond = 1 / figure.value[-1][1] - 1 / host.value("elementwise_rate", flops=min(largest, IN_CACHE_ELEMENTS)) - streamed
    return max(beyond, 0.0) / 4


def _in_cache_seconds(op: dict, host) -> float:
    """A call's work with its operands in cache: a GEMM on a host that timed the GEMM grid its time there; an
    operation the host has timed one by one (core.calibration.op_probes) its line (a fixed part and a part per element written),
    and a narrow GEMM its left operand's elements, if that is more than its FLOPs' time."""
    if op["op"] in GEMM_GRID and host.value(GEMM_GRID[op["op"]]):
        return _gemm_grid_seconds(op, host)
    if op["op"] in ONEDNN_LSTM:
        return _onednn_lstm_seconds(op, host)
    if op["op"] in FLASH_ATTENTION:
        return _flash_attention_seconds(op, host)
    work = _flops_seconds(op, host, "elementwise_rate", in_cache=True)
    if op["formula"]:
        return max(work, _narrow_gemm_seconds(op, host))
    line = _line(op, op_name(op["op"]), host)
    if line is None:
        return work
    fixed, per_element = line
    return max(work, fixed + op["flops"] * per_element)


def _line(op: dict, name: str, host) -> tuple[float, float] | None:
    """(seconds per call, per element written) of an operation the host timed one by one (None: not timed): its
    op_call_seconds and op_element_seconds; a sort's, on a host that timed it by row length
    (sort_row_element_seconds, its fixed part held in its 65,536 elements' seconds), that figure at its input's last
    dimension's length."""
    shapes = op.get("shapes") or []
    if name == "sort" and host.has(SORT_ROWS) and shapes and shapes[0]:
        return 0.0, _at_size(host.value(SORT_ROWS), shapes[0][-1])
    per_element = host.value("op_element_seconds").get(name)
    return None if per_element is None else (host.value("op_call_seconds").get(name, 0.0), per_element)


def _onednn_lstm_seconds(op: dict, host) -> float:
    """oneDNN's fused LSTM layer (its forward or backward) on a CPU, its operands in cache (the layer's own bytes
    stream in once, on top). On a host that timed the layer (LSTM_RATES), its GEMM FLOPs (the census's) at that rate
    for its GEMM FLOPs per step. Else its GEMMs at what ATen's GEMMs of the same shapes cost on the host in cache,
    and its gates' element-wise work at the host's element-wise rate: the forward the input's GEMM for every step at
    once, then the hidden state's step by step; the backward the hidden state's gradient step by step, then the
    input's and both weights' gradients over every step at once (oneDNN's own GEMMs ran at half ATen's rate, or less,
    on the AMD EPYC VM)."""
    input_shape, (gates, inputs), (_, hidden), batch = _lstm_layer_shapes(op)
    steps = math.prod(input_shape) // (batch * inputs)
    rows = steps * batch
    rates = host.value(LSTM_RATES[op["op"]]) if host.has(LSTM_RATES[op["op"]]) else None
    if rates:
        per_step = 2 * batch * (inputs + hidden) * gates
        return op["flops"] / loglog(sorted((float(size), rate) for size, rate in rates.items()), per_step)
    if op["op"] == ONEDNN_LSTM[0]:
        gemms = [(rows, inputs, gates, 1), (batch, hidden, gates, steps)]
    else:
        gemms = [(batch, gates, hidden, steps), (rows, gates, inputs, 1), (gates, rows, inputs, 1),
                 (gates, rows, hidden, 1)]
    per_step = batch * hidden * LSTM_GATE_ELEMENTS[op["op"]]  # each step's gates, at the rate of a call that size
    step_work = per_step / host.value("elementwise_rate", flops=per_step)
    return steps * step_work + sum(times * _in_cache_seconds(_gemm_op(m, k, n), host) for m, k, n, times in gemms)


def _flash_attention_seconds(op: dict, host) -> float:
    """torch's CPU flash attention (its forward or backward): each head's blocks of query rows by key columns at the
    host's time for a block of that shape and head size (its grid, read as a GEMM grid is); on a host that timed
    none, each block's GEMMs at what ATen's GEMMs of their shapes cost there and an exp per score."""
    field, query_at, gemms = FLASH_ATTENTION[op["op"]]
    # batch and heads first, then length and head size
    query, key = _two_operands(op, query_at, 3, 1, "its query's and key's shapes")
    figure = host.value(field)
    block = gemm_grid(field, tuple(sorted(figure.items()))) if figure else partial(_unmeasured_block, gemms, host)
    per_head = sum(count * block((rows, columns, query[-1]))
                   for rows, columns, count in cpu_attention.blocks(query[-2], key[-2]))
    return math.prod(query[:-2]) * per_head


def _unmeasured_block(gemms: int, host, shape: tuple[int, int, int]) -> float:
    rows, columns, head = shape
    exp = host.value("op_element_seconds").get("exp") or 1 / host.value("elementwise_rate")
    return gemms * _in_cache_seconds(_gemm_op(rows, head, columns), host) + rows * columns * exp


def _lstm_layer_shapes(op: dict) -> tuple:
    """A fused LSTM layer's input, input weights, recurrent weights (their shapes) and batch (its initial state's
    rows), from its operands (input, w_ih, w_hh, b_ih, b_hh, hx, ...)."""
    shapes = op.get("shapes")
    if not (isinstance(shapes, list) and len(shapes) >= 6 and all(
            isinstance(shape, list) and len(shape) >= n and all(isinstance(size, int) and size >= 1 for size in shape)
            for shape, n in zip(shapes, (3, 2, 2, 0, 0, 2)))):
        raise PredictionError(f"census: {op['op']}'s shapes: {_shown(shapes)}; expected its input (3 sizes), "
                              f"weights (2 each), biases and initial state (2), every size a whole number >= 1")
    return shapes[0], shapes[1][:2], shapes[2][:2], shapes[5][0]


def _gemm_op(m: int, k: int, n: int) -> dict:
    """An ATen GEMM of M x K by K x N, as a census would count it."""
    return {"op": "aten.mm", "shapes": [[m, k], [k, n]], "formula": True, "flops": 2 * m * k * n,
            "bytes": 4 * (m * k + k * n + m * n)}


def _narrow_gemm_seconds(op: dict, host) -> float:
    """A GEMM's elements of its left operand at the host's cost per element for the widest output it measured
    no wider than this one's (0 when it measured none so narrow, or the operation is no GEMM)."""
    left_at = GEMM_LEFT_OPERAND.get(op["op"])
    per_element = host.value("narrow_gemm_seconds")
    if left_at is None or not per_element:
        return 0.0
    left, right = _gemm_operands(op, left_at)
    widths = [int(width) for width in per_element if int(width) <= right[-1]]
    return math.prod(left) * per_element[str(max(widths))] if widths else 0.0


def _gemm_grid_seconds(op: dict, host) -> float:
    """A GEMM's time on the host's grid of GEMM shapes at its M x K x N, M counting every row of a batch."""
    left, right = _gemm_operands(op, GEMM_LEFT_OPERAND[op["op"]])
    shape = (math.prod(left[:-1]), left[-1], right[-1])
    if not all(shape):
        return 0.0
    field = GEMM_GRID[op["op"]]
    figure = tuple(host.value(field).items())  # as the profile holds it: gemm_grid orders the shapes itself
    seconds = gemm_grid(field, figure)(shape)
    _, depths, widths = _grid_axes(figure)
    if shape[1] <= depths[-1] or shape[2] <= widths[-1]:
        return seconds
    if host.has(WIDE_GEMM) and host.value(WIDE_GEMM):
        return _wide_gemm_seconds(shape, host)
    # Deeper and wider than any shape timed: the corner grown in proportion keeps a narrower product's speed (a
    # quick grid's corner is 16 columns wide), where this one runs about as fast as a square product of its FLOPs
    flops = 2 * math.prod(shape)
    return min(seconds, flops / host.value("matmul_flops", flops=flops))


def _wide_gemm_seconds(shape: tuple[int, int, int], host) -> float:
    """A GEMM deeper and wider than the grid (M x K x N) on a host that timed GEMMs with a weight past the caches
    (WIDE_GEMM): the line through their times in M, per element of their weight, times its own weight's K x N. Such
    a GEMM streams its weight: a fixed part per weight element, whatever the rows (on the AMD EPYC VM, 512 x 4096 took
    3 ms at 16 rows, where the grid's corner grown in proportion ran at its in-cache rate), and a part per row."""
    timed = sorted((_sizes(key), seconds) for key, seconds in host.value(WIDE_GEMM).items())
    (few, k0, n0), few_s = timed[0]
    (many, k1, n1), many_s = timed[-1]
    per_weight = few_s / (k0 * n0), many_s / (k1 * n1)  # seconds per weight element
    slope = max((per_weight[1] - per_weight[0]) / (many - few), 0.0) if many > few else 0.0
    fixed = max(per_weight[0] - slope * few, 0.0)
    return (fixed + slope * shape[0]) * shape[1] * shape[2]


def _sizes(shape: str) -> tuple[int, ...]:
    """A grid figure's shape key ('MxKxN') as its sizes."""
    return tuple(int(size) for size in shape.split("x"))


@lru_cache(maxsize=16)
def _grid_axes(figure: tuple[tuple[str, float], ...]) -> list[list[int]]:
    """The sizes a grid figure's shapes ('MxKxN') take in each of their three dimensions, in order."""
    return [sorted({_sizes(shape)[i] for shape, _ in figure}) for i in range(3)]


@lru_cache(maxsize=16)
def gemm_grid(field: str, figure: tuple[tuple[str, float], ...]):
    """(M, K, N) -> seconds through a grid figure's shapes ('MxKxN': seconds): linear in the logarithms of both
    between the shapes measured (a GEMM's time is near a power of each dimension between two sizes); below the
    smallest size of a dimension, that size's time (a small GEMM's fixed part); more rows or columns than the
    largest, that size's time grown in proportion (a large GEMM's time grows with each of its dimensions); deeper
    than the deepest, the deepest shape's time and, per unit of depth beyond, what the two deepest shapes differ by
    per unit. Growing the deepest shape's time in proportion would grow its fixed part too: a weight gradient's
    depth is the batch (mlp_surface's 40,000 rows: 150 times the grid's deepest), and the MLP's products in both AMD
    VMs' operator tables took 0.77-1.35x what the difference gives, where in proportion gave 1.3-3.0x."""
    problem = not_a_grid([shape for shape, _ in figure])
    if problem:
        raise PredictionError(f"host figure {field}: {problem}")
    times = {_sizes(shape): seconds for shape, seconds in figure}
    axes = _grid_axes(figure)
    cube = np.array([[[times[m, k, n] for n in axes[2]] for k in axes[1]] for m in axes[0]])
    from scipy.interpolate import RegularGridInterpolator  # imported here: 0.7 s of every command's start otherwise
    curve = RegularGridInterpolator([np.log(axis) for axis in axes], np.log(np.maximum(cube, TINY_SECONDS)))
    depths = axes[1]

    def at(inside: list[int]) -> float:
        return float(np.exp(curve(np.log([inside]))[0]))

    @lru_cache(maxsize=4096)  # a model's GEMMs come in few shapes, and one interpolation costs more than the lookup
    def seconds(shape: tuple[int, int, int]) -> float:
        inside = [min(max(size, axis[0]), axis[-1]) for size, axis in zip(shape, axes)]
        time = at(inside)
        if shape[1] > depths[-1] and len(depths) > 1:
            per_depth = (time - at([inside[0], depths[-2], inside[2]])) / (depths[-1] - depths[-2])
            time += (shape[1] - depths[-1]) * max(per_depth, 0.0)
        return time * max(shape[0] / axes[0][-1], 1.0) * max(shape[2] / axes[2][-1], 1.0)
    return seconds


def not_a_grid(shapes: list[str]) -> str | None:
    """What is wrong with GEMM shapes ('MxKxN') that are not every M with every K and N, else None."""
    axes = [{shape.split("x")[i] for shape in shapes} for i in range(3)]
    if len(shapes) == math.prod(map(len, axes)):
        return None
    return f"{len(shapes)} shapes are not a grid (every M with every K and N: {' x '.join(str(len(a)) for a in axes)} shapes)"


def _gemm_operands(op: dict, left_at: int) -> tuple[list[int], list[int]]:
    return _two_operands(op, left_at, 2, 0, "its two matrices' shapes")


def _two_operands(op: dict, at: int, dims: int, smallest: int, what: str) -> tuple[list[int], list[int]]:
    """The shapes of an operation's two operands from position `at`, each of at least `dims` sizes of at least
    `smallest`, or PredictionError saying what was expected (`what`)."""
    shapes = op.get("shapes")
    operands = shapes[at:at + 2] if isinstance(shapes, list) else []
    if len(operands) != 2 or not all(isinstance(shape, list) and len(shape) >= dims and all(
            isinstance(size, int) and not isinstance(size, bool) and size >= smallest for size in shape)
            for shape in operands):
        raise PredictionError(f"census: {op['op']}'s shapes: {_shown(shapes)}; expected {what} (lists of {dims} or "
                              f"more whole numbers >= {smallest}) from position {at}")
    return operands


def op_name(op: str) -> str:
    """A census's operation as the host's op-by-op figures name it (core.calibration.op_probes): 'aten.tanh_' -> 'tanh' (an
    in-place variant costs what its function does)."""
    return op.removeprefix("aten.").removesuffix("_")


def _queued_copy_cost(copy: dict, gpu, dispatch: float) -> Cost:
    """A non-blocking copy from or into pinned memory is queued like a kernel: the host pays its issue as it pays a
    launch, and the GPU its bytes at the bandwidth, at least its shortest kernel. Its latency (calibrate's: each copy
    waited for) is the wait of a copy that syncs; nothing waits for this one."""
    device = max(copy["bytes"] / gpu.value(f"{copy['direction']}_bandwidth_pinned"), gpu.value("shortest_kernel"))
    return Cost(host=dispatch, launches=_launch_rest(gpu, dispatch), copies=device)


def _launch_rest(gpu, dispatch: float) -> float:
    """What issuing one kernel or queued copy adds to the operation's dispatch: launch_overhead is a whole eager op's
    host time on the GPU (what calibrate measures), its dispatch included."""
    return max(0.0, gpu.value("launch_overhead") - dispatch)


def _transfer_seconds(copy: dict, gpu) -> float:
    memory = "pinned" if copy["pinned"] else "pageable"
    direction = copy["direction"]
    return (gpu.value(f"{direction}_latency_{memory}")
            + copy["bytes"] / gpu.value(f"{direction}_bandwidth_{memory}"))


# -- one stretch ------------------------------------------------------------------------------------

def _stretch_parts(stretch: dict, ops: list[dict], costs: list[Cost], target,
                   collected: float | None) -> dict[str, float]:
    """The parts of one occurrence of a stretch (`collected`: see _collected_share): on a CPU everything in turn; on
    a GPU its critical path on two clocks (_two_clocks), then its blocking copies and the sync's round trip, which
    wait for the device to drain."""
    total = _total(stretch, costs)
    host_side = _host_side(stretch, total, target, collected)
    if target.gpu is None:
        return dict.fromkeys(PARTS, 0.0) | host_side | {"compute": total.compute}
    device_side = {"compute": total.compute, "copies": total.copies}
    parts = dict.fromkeys(PARTS, 0.0) | _two_clocks(host_side, device_side, _issued(stretch, ops))
    parts["copies"] += total.serial
    parts["sync"] = total.sync
    return parts


def _two_clocks(host_side: dict[str, float], device_side: dict[str, float], calls: float) -> dict[str, float]:
    """The critical path of a stretch of `calls` the host issues one after another while the device runs their work
    in the order issued: both clocks start together (after a sync); a call's work starts once the host has issued
    it and the device is free. A census counts a stretch's calls, not their order, so they are taken as evenly
    interleaved: each costs the host 1/calls of the host's side and the device 1/calls of the device's. The device
    then ends after the host's last issue and one call's work (a host-bound stretch), or after the first issue and
    every call's work (a device-bound one): max(H + K / calls, K + H / calls)."""
    host, device = sum(host_side.values()), sum(device_side.values())
    if not (calls and device):
        return host_side | dict.fromkeys(device_side, 0.0)
    longer, shorter = (host_side, device_side) if host >= device else (device_side, host_side)
    return longer | {part: seconds / calls for part, seconds in shorter.items()}


def _issued(stretch: dict, ops: list[dict]) -> float:
    """What the host issues in one occurrence of a stretch, one after another: each operation's kernels (one for an
    operation without), and a graph replay's nodes as one (the replay)."""
    return stretch["graph_replays"] + sum(calls * ops[index].get("kernels", 1) for index, calls in stretch["ops"]
                                          if ops[index]["phase"] != "graph")


def _total(stretch: dict, costs: list[Cost]) -> Cost:
    total = Cost()
    for index, calls in stretch["ops"]:
        total = total.plus(costs[index], calls)
    return total


def _host_side(stretch: dict, total: Cost, target, collected: float | None) -> dict[str, float]:
    """One occurrence's host, launches (a GPU's) and loading."""
    host = total.host + _python_seconds(stretch, target.host)
    replays = stretch["graph_replays"]
    launches = total.launches + (replays * target.gpu.value("graph_replay_fixed") if replays and target.gpu else 0.0)
    return {"host": host, "launches": launches,
            "loading": total.loading + _loading_seconds(stretch, target.host, collected)}


def _collected_share(census: dict, stretches: list[dict], host) -> float | None:
    """The share of its DataLoader's full collections on average that a sample's median sees, None where the host
    has no figures for them (its loader_per_sample holds them, spread over every sample). They come every so many
    samples, so a sample sees the whole number of them nearest its average (a half rounds up): one that sets one off
    every third time has none in its median, and one that sets off 2.4 has two. A process holding more objects than
    the calibration's collects as many times less often (and each collection takes as many times longer: the same
    seconds on average)."""
    if not all(host.has(figure) for figure in COLLECTION_FIGURES):
        return None
    heap = census.get("heap_objects") or host.value(HEAP)
    average = sum(stretch["times"] * stretch["loader_samples"] * _collections_at(stretch, host)
                  for stretch in stretches) * host.value(HEAP) / heap
    return math.floor(average + 0.5) / average if average else 0.0


def _collections_at(stretch: dict, host) -> float:
    """Full collections per sample at the stretch's batch size, linear in the batch's logarithm between the batch
    sizes measured (0 where none came)."""
    if not (stretch["loader_batches"] and stretch["loader_samples"]):
        return 0.0
    sizes, rates = zip(*sorted((float(size), rate) for size, rate in host.value(COLLECTIONS).items()))
    batch = stretch["loader_samples"] / stretch["loader_batches"]
    return float(np.interp(np.log(max(batch, sizes[0])), np.log(sizes), rates))


def _loading_seconds(stretch: dict, host, collected: float | None) -> float:
    batches, samples = stretch["loader_batches"], stretch["loader_samples"]
    if not (batches or samples):
        return 0.0
    if collected is not None and batches and samples:
        uncollected = _at_size(host.value(UNCOLLECTED), samples / batches)
        collections = _collections_at(stretch, host) * host.value(COLLECTION_SECONDS)
        return samples * (uncollected + collected * collections)
    by_batch = host.value("loader_per_sample")
    if by_batch and batches and samples:
        return samples * _at_size(by_batch, samples / batches)
    per_batch, per_sample = loader_costs(host)
    return batches * per_batch + samples * per_sample


def _at_size(by_size: dict[str, float], at: float) -> float:
    """A figure keyed by size (a batch, a row's length) at `at`: log-log between the sizes measured, the end one's
    beyond them."""
    return loglog(sorted((float(size), value) for size, value in by_size.items()), at)


def loglog(points, at: float) -> float:
    """The value at `at` on a curve of (size, value) points in increasing size: interpolated log-log, the end
    point's value beyond either end."""
    sizes, values = zip(*points)
    where = np.log(max(at, sizes[0]))  # np.interp clamps at both ends; the max keeps log away from 0
    return float(np.exp(np.interp(where, np.log(sizes), np.log(values))))


def loader_costs(host) -> tuple[float, float]:
    """(seconds per batch, seconds per sample) of a DataLoader on the host, from its two loader figures."""
    return loader_line(host.value("loader_batch1_per_sample"), host.value("loader_batched_per_sample"))


def loader_line(one: float, batched: float) -> tuple[float, float]:
    """(seconds per batch a, seconds per sample c), each at least 0, from the seconds per sample at batch 1 (one = a +
    c) and at LOADER_BATCH (batched = a / LOADER_BATCH + c)."""
    per_sample = max(0.0, (LOADER_BATCH * batched - one) / (LOADER_BATCH - 1))
    return max(0.0, one - per_sample), per_sample


def _notes(census: dict, ops: list[dict], target) -> tuple[str, ...]:
    notes = []
    if target.gpu is not None and census.get("device") == "cpu":
        notes.append("the census was taken on the CPU: it holds none of a GPU's host-device copies (the stand-in's "
                     "census does)")
    if target.gpu is None and any(op["copy"] for op in ops):
        notes.append("the census's host-device copies cost nothing on a CPU, which makes none")
    untimed = sorted({FLASH_ATTENTION[op["op"]][0] for op in ops if op["op"] in FLASH_ATTENTION
                      and target.gpu is None and not target.host.value(FLASH_ATTENTION[op["op"]][0])})
    if untimed:
        notes.append(f"flash attention is priced as its blocks' GEMMs and an exp per score, an estimate: "
                     f"{target.host.title} has no {' or '.join(untimed)} (`python -m core calibrate` times them)")
    return tuple(notes)


# -- the census, checked ----------------------------------------------------------------------------

def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_positive(value) -> bool:
    return _is_number(value) and value > 0


def _is_amount(value) -> bool:
    return _is_number(value) and value >= 0


def _is_flag(value) -> bool:
    return isinstance(value, bool)


def _is_text(value) -> bool:
    return isinstance(value, str) and bool(value)


OP_FIELDS = {"op": (_is_text, "an operation's name"), "where": (_is_text, "a device type"),
             "kernel": (_is_flag, "true or false"), "launches": (_is_flag, "true or false"),
             "flops": (_is_amount, "a number >= 0"), "formula": (_is_flag, "true or false"),
             "bytes": (_is_amount, "a number >= 0"), "autograd": (_is_flag, "true or false"),
             "phase": (lambda v: v in PHASES, f"one of {', '.join(PHASES)}"),
             "copy": (lambda v: v is None or isinstance(v, dict), "null or an object"),
             "sync": (_is_flag, "true or false")}
COPY_FIELDS = {"direction": (lambda v: v in DIRECTIONS, f"one of {', '.join(DIRECTIONS)}"),
               "pinned": (_is_flag, "true or false"), "bytes": (_is_amount, "a number >= 0")}
STRETCH_FIELDS = {"ops": (lambda v: isinstance(v, list), "a list of [operation index, calls]"),
                  "times": (_is_amount, "a number >= 0"), "sync": (_is_flag, "true or false"),
                  "loader_batches": (_is_amount, "a number >= 0"), "loader_samples": (_is_amount, "a number >= 0"),
                  "graph_replays": (_is_amount, "a number >= 0"), "module_calls": (_is_amount, "a number >= 0"),
                  "optimizer_steps": (_is_amount, "a number >= 0")}


def _checked(census) -> tuple[list[dict], list[dict]]:
    """The census's ops and stretches, every field checked; PredictionError names the first bad one."""
    if not isinstance(census, dict):
        raise PredictionError(f"census: a {type(census).__name__}, not a census (an object)")
    for key, what in (("skipped", "the point was skipped"), ("error", "the census failed")):
        if key in census:
            raise PredictionError(f"census: {what} ({_shown(census[key])}): there is nothing to predict from")
    if "ops" not in census or "stretches" not in census:
        raise PredictionError("census: it holds no 'ops' and 'stretches' (taken before the cost model's detail): "
                              "take it again with this version")
    if isinstance(census["stretches"], list) and any(
            isinstance(s, dict) and "module_calls" not in s for s in census["stretches"]):
        raise PredictionError("census: its stretches count no module calls or optimiser steps (taken before the "
                              "cost model counted Python): take it again with this version")
    ops = _entries(census["ops"], "census.ops", OP_FIELDS)
    for i, op in enumerate(ops):
        for flag in ("nested", "transformed"):  # a census taken before it told them apart has neither
            if not _is_flag(op.get(flag, False)):
                raise PredictionError(f"census.ops[{i}].{flag}: {_shown(op[flag])}; expected true or false")
        if not (_is_amount(op.get("kernels", 1)) and op.get("kernels", 1) >= 1):
            raise PredictionError(f"census.ops[{i}].kernels: {_shown(op['kernels'])}; expected a number >= 1 "
                                  f"(the kernels one call launches)")
        if op["copy"] is not None:
            _check_fields(op["copy"], f"census.ops[{i}].copy", COPY_FIELDS)
    stretches = _entries(census["stretches"], "census.stretches", STRETCH_FIELDS)
    for i, stretch in enumerate(stretches):
        _check_refs(stretch["ops"], f"census.stretches[{i}].ops", len(ops))
        classes = stretch.get("module_classes", {})
        if not (isinstance(classes, dict) and all(_is_text(k) and _is_amount(v) for k, v in classes.items())):
            raise PredictionError(f"census.stretches[{i}].module_classes: {_shown(classes)}; expected "
                                  f"{{module class: calls}}, each a number >= 0")
    heap = census.get("heap_objects", 1)  # a census taken before it counted them has none
    if not (_is_amount(heap) and heap >= 1):
        raise PredictionError(f"census.heap_objects: {_shown(heap)}; expected a number >= 1 (the objects the "
                              f"garbage collector tracked in the census's process)")
    return ops, stretches


def _entries(value, where: str, rules: dict) -> list[dict]:
    if not isinstance(value, list):
        raise PredictionError(f"{where}: {_shown(value)} is not a list")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise PredictionError(f"{where}[{i}]: {_shown(entry)} is not an object")
        _check_fields(entry, f"{where}[{i}]", rules)
    return value


def _check_fields(entry: dict, where: str, rules: dict) -> None:
    for key, (ok, allowed) in rules.items():
        value = entry.get(key, MISSING)
        if value is MISSING or not ok(value):
            raise PredictionError(f"{where}.{key}: {_shown(value)}; expected {allowed}")


def _check_refs(refs: list, where: str, count: int) -> None:
    for i, ref in enumerate(refs):
        if not (isinstance(ref, (list, tuple)) and len(ref) == 2 and isinstance(ref[0], int)
                and not isinstance(ref[0], bool) and 0 <= ref[0] < count and _is_amount(ref[1])):
            raise PredictionError(f"{where}[{i}]: {_shown(ref)} is not [operation index, calls]: a whole "
                                  f"number below {count} (the census's ops) and a number >= 0")


def _shown(value) -> str:
    if value is MISSING:
        return "missing"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
