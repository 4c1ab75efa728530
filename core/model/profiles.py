"""A machine's calibrated profile: the constants `python -m core calibrate` measured (core.calibration.calibrate), the
table of its fields with their units and sane ranges, and where it lives: results/<machine-id>/calibration/
profile.json, a subfolder on purpose (the record loader globs */*.json). Checked against a JSON schema
built from FIELDS on the way in and out.

{"schema": 1, "machine_id", "fingerprint", "code_version", "taken" (UTC ISO), "booted" (when the machine last booted
 before it, UTC ISO: profiles taken before this version have none), "seconds", "quick",
 "load_per_core" (other work's share of each logical core while it ran: the machine's busy CPU time, a VM's
 stolen time included, less the calibration's own, over its seconds and the logical cores; profiles taken before
 this version hold the 1-minute load average per logical core as it began), "cpu": {field: value},
 "gpus": {"cuda:N": {field: value}}, "flags": [...], "floors": [...]}; a sized field's value is {size: value}.
"flags" (core.calibration.sanity): figures that broke a rule (above their hardware's specification, far above their
siblings) when measured and again, which the cost model does not read (`sections`: the catalogue's figure in their
place, or the figure as if never measured); "floors": figures whose value is a floor or ceiling they were held at,
not a measurement. Profiles taken before these checks have neither."""
import copy
import json
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jsonschema
import torch

from core import devices, settings, versions
from core.model import conv_probes, costmodel
from core.store import files

SCHEMA_VERSION = 1
SUBFOLDER = "calibration"
FILE_NAME = "profile.json"
GPU_PATTERN = r"^cuda:[0-9]+$"
MACHINE_ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"  # devices.machine_id's slug and hash: a folder name, never a path
BUSY_LOAD_PER_CORE = 0.5  # other work's share of each logical core above which it skews the figures


@dataclass(frozen=True)
class Field:
    """One measured constant. `kinds`: the device kinds that measure it ('cpu', 'cuda'); `sized`: its value is
    {size: value}, one per size measured; `low`/`high`: the range outside which a value must be a broken
    measurement, not a slow or fast machine."""
    name: str
    unit: str
    description: str
    low: float
    high: float
    kinds: tuple[str, ...]
    sized: bool = False
    required: bool = True  # False: measured only since some shipped profiles were taken (they lack it)


HOST, EVERY, GPU = ("cpu",), ("cpu", "cuda"), ("cuda",)
FIELDS = (
    Field("op_overhead_autograd", "s/op", "host time per autograd-recording op that Python issues, of a small "
          "training step (Linear-ReLU-Linear, batch 64, SGD): the step's time less its module calls, optimiser step, "
          "the recording ops C++ issues (op_overhead_nested) and other ops at their figures, over the recording ops "
          "Python issues (graph building, backward, zero_grad and the loss's Python included)", 1e-8, 1e-2, HOST),
    Field("op_overhead_nested", "s/op", "host time per autograd-recording op that C++ issues (an RNN's loop over "
          "its steps, a composite's parts), its backward included: the line through a one-sample GRU's forward and "
          "backward at two sequence lengths, less its other ops at op_overhead_no_grad, over the recording ops it "
          "adds", 1e-8, 1e-2, HOST, required=False),
    Field("op_overhead_nested_no_grad", "s/op", "host time per op that C++ issues outside autograd (an RNN's loop "
          "in inference, a composite's parts under no_grad), its tiny work included: the line through a one-sample "
          "GRU's forward under no_grad at two sequence lengths, over the ops it adds", 1e-9, 1e-2, HOST,
          required=False),
    Field("op_overhead_transformed", "s/op", "host time per op under a torch.func transform (vmap, jvp, "
          "jacfwd, ...: its interpreter's work on every op, and its Python spread over them): a jvp through a "
          "one-sample Linear-Tanh-Linear (1, 4, 4), less its module calls, over its ops", 1e-8, 1e-2, HOST,
          required=False),
    Field("op_overhead_no_grad", "s/op", "host time of a tiny eager op (add of two 1-element tensors) under no_grad",
          1e-8, 1e-2, HOST),
    Field("module_call", "s/call", "host time of calling an nn.Module beyond its ops (an nn.Identity, which "
          "issues none)", 1e-9, 1e-3, HOST),
    Field("module_call_seconds", "s/call", "host time of calling each of the common layers core.calibration.module_probes lists "
          "(nn.Linear, nn.Conv1d, nn.ReLU, ...: size: its class) beyond its operations: the call, its forward's "
          "Python, its parameters looked up", 1e-9, 1e-3, HOST, sized=True, required=False),
    Field("optimizer_step", "s/step", "host time of an optimiser step beyond its ops (torch.optim.Adam, one "
          "tensor at a time): the fixed part of a line through steps over few and many parameters", 0.0, 1e-1, HOST),
    Field("optimizer_op_overhead", "s/op", "host time per op inside that optimiser step (its Python per "
          "parameter included): the slope of that line", 1e-8, 1e-2, HOST),
    Field("loader_batch1_per_sample", "s/sample", "DataLoader over a TensorDataset, batch_size 1, per sample",
          1e-8, 1e-1, HOST),
    Field("loader_batched_per_sample", "s/sample", "the same DataLoader, batch_size 64, per sample",
          1e-9, 1e-1, HOST),
    Field("loader_per_sample", "s/sample", "the same DataLoader per sample at each batch size (size: batch), over "
          "many batches: the Python garbage collector's share included, which grows with the batch (a batch's "
          "sample tensors live long enough to reach its oldest generation)", 1e-9, 1e-1, HOST, sized=True,
          required=False),
    Field("loader_uncollected_per_sample", "s/sample", "the same, less the garbage collector's full collections "
          "(timed through gc.callbacks): what a pass that sets none off costs", 1e-9, 1e-1, HOST, sized=True,
          required=False),
    Field("loader_collections_per_sample", "1/sample", "the garbage collector's full collections per sample that "
          "DataLoader set off over all its passes at each batch size (0: none in them; none at any batch, as in a "
          "quick calibration's short passes, leaves the four collection figures out)", 0.0, 1.0, HOST, sized=True,
          required=False),
    Field("full_collection_seconds", "s/collection", "one full garbage collection (gc.collect()) in the calibrating process: it "
          "walks every object the process holds", 1e-7, 10.0, HOST, required=False),
    Field("collection_heap_objects", "objects", "the objects the garbage collector tracked in the calibrating "
          "process then: a process holding more collects as many times less often, each time as many times longer",
          1.0, 1e10, HOST, required=False),
    Field("loader_numpy_field_seconds", "s/field", "what a sample's NumPy field adds to a DataLoader sample over a "
          "tensor field: the default collate's torch.as_tensor of each NumPy row (the rows pytorch-tabnet's "
          "TorchDataset gives), from passes at batch 256 over the same rows both ways", 0.0, 1e-3, HOST,
          required=False),
    Field("matmul_flops", "FLOP/s", "torch.mm of two float32 n x n matrices (size: n)", 1e6, 1e17, EVERY,
          sized=True),
    Field("conv1d_flops", "FLOP/s", "Conv1d 16->32 channels, kernel 5, forward and backward (size: input N x C x L)",
          1e6, 1e17, EVERY, sized=True),
    Field("conv2d_flops", "FLOP/s", "Conv2d 16->32 channels, kernel 3x3, forward and backward (size: input N x C x H x W)",
          1e6, 1e17, EVERY, sized=True),
    Field("conv_one_channel_flops", "FLOP/s", "Conv1d and Conv2d with one input channel, 1->32 channels, kernels 5 "
          "and 3x3, forward and backward (size: input N x 1 x L or N x 1 x H x W): a small model's first layer, whose "
          "vector lanes, run across input channels, mostly idle", 1e6, 1e17, HOST, sized=True, required=False),
    Field("conv_backward_share", "share", "the backward's share of each of those convolutions' forward and backward "
          "(size: the probe's input, 16 channels or one): 1 less the forward's seconds over the whole call's",
          0.0, 1.0, HOST, sized=True, required=False),
    Field("elementwise_rate", "elem/s", "output elements per second of a float32 add into a new tensor, as "
          "a model's ops write (size: elements; small ones stay in cache, large ones fault their pages in)",
          1e6, 1e14, EVERY, sized=True),
    Field("elementwise_flops", "FLOP/s", "the largest of those adds at one FLOP per output element (the "
          "census's count), its pages faulted in: no element-wise speed, and the cost model does not read it",
          1e6, 1e14, EVERY),
    Field("memory_bandwidth", "B/s", "bytes read + written per second by a float32 copy_ of 64 MiB (256 MiB on a GPU): "
          "past the caches, at any effort", 1e6, 1e14, EVERY),
    Field("op_call_seconds", "s/call", "fixed seconds per call, beyond its dispatch, of each operation core.calibration.op_probes "
          "lists (its aten name): a line through two sizes of it, where it crosses 0 elements", 0.0, 1e-2, HOST,
          sized=True, required=False),
    Field("op_element_seconds", "s/elem", "seconds per element written of each of those operations: that line's "
          "slope (a function such as tanh costs tens of adds per element)", 0.0, 1e-5, HOST, sized=True,
          required=False),
    Field("sort_row_element_seconds", "s/elem", "seconds per element written (values and indices) of aten.sort "
          "along rows of each length (size: the row's length), over 65,536 input elements, its fixed part included: "
          "the longer the row, the more each element costs (the listed operations' sort probe sorts rows of 16)",
          0.0, 1e-5, HOST, sized=True, required=False),
    Field("narrow_gemm_seconds", "s/elem", "seconds per element of the left operand of a torch.mm whose output is "
          "only a few columns wide (4096 x 32 by 32 x N, size: N columns): so narrow a GEMM runs far below its FLOP "
          "rate, at a cost per element it reads", 0.0, 1e-5, HOST, sized=True, required=False),
    Field("gemm_seconds", "s/call", "seconds of a torch.mm(A, B) of row-major float32 matrices beyond its dispatch, "
          "per shape on a grid (size: M x K x N, A being M x K): a GEMM's kernel depends on its shape, not its FLOPs "
          "alone (a few output columns, or a count of them off the vector width, runs far below the FLOP rate)",
          0.0, 10.0, HOST, sized=True, required=False),
    Field("linear_seconds", "s/call", "the same for nn.Linear's operation, torch.addmm(bias, A, W.t()) (W being N x K, "
          "read transposed), on the same grid", 0.0, 10.0, HOST, sized=True, required=False),
    Field("wide_gemm_seconds", "s/call", "seconds of nn.Linear's torch.addmm(bias, A, W.t()) beyond its dispatch with "
          "a weight past the caches (1024 x 2048, 8 MB of float32), at 16 and 256 rows (size: M x K x N): a GEMM "
          "deeper and wider than the grid streams its weight, a fixed part per weight element and a part per row",
          0.0, 10.0, HOST, sized=True, required=False),
    Field("flash_attention_seconds", "s/block", "seconds per block of torch's CPU flash attention "
          "(aten._scaled_dot_product_flash_attention_for_cpu, what F.scaled_dot_product_attention runs on a CPU) beyond "
          "its dispatch, per block shape on a grid (size: query rows x key columns x head size), timed over enough "
          "heads to keep every thread busy (core.measure.kernels.cpu_attention: how the kernel splits its work)",
          0.0, 10.0, HOST, sized=True, required=False),
    Field("flash_attention_backward_seconds", "s/block", "the same for its backward "
          "(aten._scaled_dot_product_flash_attention_for_cpu_backward), on the same grid", 0.0, 10.0, HOST, sized=True,
          required=False),
    Field("lstm_layer_flops", "FLOP/s", "oneDNN's fused LSTM layer (aten.mkldnn_rnn_layer: what nn.LSTM runs on a "
          "CPU with oneDNN), its GEMMs' FLOPs per second of work over 16 steps, by its GEMM FLOPs per step (size: "
          "batch x (inputs + hidden) x 4 hidden x 2; the probe's inputs as wide as its hidden state)",
          1e6, 1e17, HOST, sized=True, required=False),
    Field("lstm_layer_backward_flops", "FLOP/s", "the same for its backward (aten.mkldnn_rnn_layer_backward: twice "
          "the forward's GEMM FLOPs), by the layer's GEMM FLOPs per step", 1e6, 1e17, HOST, sized=True,
          required=False),
    Field("launch_overhead", "s/op", "host time to launch a tiny kernel (1-element add into a new tensor, not waited for)",
          1e-8, 1e-2, GPU),
    Field("shortest_kernel", "s", "device time of that kernel, run back to back with many", 1e-9, 1e-3, GPU),
    Field("sync_round_trip", "s", "a tiny kernel launched and waited for (synchronize)", 1e-7, 1e-1, GPU),
    Field("h2d_latency_pageable", "s", "one 4-byte copy to the device from pageable memory, waited for",
          1e-7, 1e-1, GPU),
    Field("h2d_latency_pinned", "s", "one 4-byte copy to the device from pinned memory, waited for",
          1e-7, 1e-1, GPU),
    Field("d2h_latency_pageable", "s", "one 4-byte copy to the host into pageable memory, waited for",
          1e-7, 1e-1, GPU),
    Field("d2h_latency_pinned", "s", "one 4-byte copy to the host into pinned memory, waited for",
          1e-7, 1e-1, GPU),
    Field("h2d_bandwidth_pageable", "B/s", "a large copy to the device from pageable memory", 1e6, 1e13, GPU),
    Field("h2d_bandwidth_pinned", "B/s", "a large copy to the device from pinned memory", 1e6, 1e13, GPU),
    Field("d2h_bandwidth_pageable", "B/s", "a large copy to the host into pageable memory", 1e6, 1e13, GPU),
    Field("d2h_bandwidth_pinned", "B/s", "a large copy to the host into pinned memory", 1e6, 1e13, GPU),
    Field("graph_replay_per_node", "s/node", "CUDA-graph replay of captured tiny kernels, per kernel",
          1e-9, 1e-3, GPU),
    Field("graph_replay_fixed", "s", "host time of one CUDA-graph replay (a one-kernel graph, replays queued behind a "
          "spin kernel, not waited for)", 1e-8, 1e-2, GPU, required=False),
    Field("training_op_overhead", "s/op", "host time per autograd-recording op that Python issues, of the "
          "op_overhead_autograd probe's training step run on the GPU: the step's time less what the cost model prices "
          "its other ops, module calls and optimiser step at, over the recording ops Python issues (their launches "
          "included, and what else the step costs the host there: autograd's device thread, the caching "
          "allocator, cuBLAS's host work)",
          1e-8, 1e-2, GPU, required=False),
    Field("kernel_enqueue", "s/kernel", "host time to queue a kernel that C++ launches without an operator's dispatch "
          "(torch.cuda._sleep(0), queued behind a spin kernel): each further kernel of an operation that launches "
          "several (cuDNN's recurrent layers)", 1e-8, 1e-2, GPU, required=False),
)
FIELD = {f.name: f for f in FIELDS}
# Scalar figures an older profile lacks: the figure that stands in for each, and what that assumes
STAND_INS = {"op_overhead_nested": ("op_overhead_autograd", "a recording operation C++ issues costs what a recording "
                                                            "operation Python issues does"),
             "op_overhead_nested_no_grad": ("op_overhead_no_grad", "an operation C++ issues outside autograd costs "
                                                                   "what a bare one Python issues does"),
             "op_overhead_transformed": ("op_overhead_autograd", "an operation under a torch.func transform costs "
                                                                 "what a recording operation Python issues does"),
             "graph_replay_fixed": ("launch_overhead", "one replay's fixed host cost taken as one kernel launch"),
             "kernel_enqueue": ("launch_overhead", "a kernel an operation launches from C++ taken as costing what an "
                                                   "eager operation's launch does")}

# Sized fields keyed by something other than a size: the pattern of their keys.
OP_NAME, COUNT, CLASS_NAME = r"^[a-z_][a-z0-9_]*$", r"^[1-9][0-9]*$", r"^[A-Za-z_][A-Za-z0-9_]*$"
SHAPE = r"^[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*$"  # a GEMM's M x K x N
ONE_CHANNEL_INPUT = r"^[1-9][0-9]*x1(x[1-9][0-9]*){1,2}$"  # a one-channel convolution's input: N x 1 x L or N x 1 x H x W
CONV_INPUT = rf"^[1-9][0-9]*x(1|{conv_probes.CHANNELS})(x[1-9][0-9]*){{1,2}}$"  # a conv probe's input, either channels
KEYS = {"conv_one_channel_flops": ONE_CHANNEL_INPUT, "conv_backward_share": CONV_INPUT, "op_call_seconds": OP_NAME,
        "op_element_seconds": OP_NAME, "narrow_gemm_seconds": COUNT, "loader_per_sample": COUNT,
        "loader_uncollected_per_sample": COUNT, "loader_collections_per_sample": COUNT,
        "sort_row_element_seconds": COUNT,
        "module_call_seconds": CLASS_NAME, "gemm_seconds": SHAPE, "linear_seconds": SHAPE, "wide_gemm_seconds": SHAPE,
        "flash_attention_seconds": SHAPE, "flash_attention_backward_seconds": SHAPE,
        **dict.fromkeys(costmodel.LSTM_RATES.values(), COUNT)}
# Empty where the machine has no such kernel (torch without oneDNN runs no fused LSTM layer): measured, nothing to price
EMPTY_WHERE_ABSENT = tuple(costmodel.LSTM_RATES.values())
OP_FIGURES = ("op_call_seconds", "op_element_seconds")  # keyed by operation: a line per operation, two figures each
GEMM_FIGURES = ("gemm_seconds", "linear_seconds")  # keyed by shape: a grid of hundreds of shapes, two figures each
# keyed by block shape: a grid, forward and backward
ATTENTION_FIGURES = ("flash_attention_seconds", "flash_attention_backward_seconds")
GRID_FIGURES = GEMM_FIGURES + ATTENTION_FIGURES  # every figure timed on a grid of shapes 'AxBxC'
# Each grid as a table: its three sizes' names, and its two figures' columns
GRID_TABLES = {GEMM_FIGURES: (("M", "K", "N"), ("torch.mm (µs)", "nn.Linear's addmm (µs)")),
               ATTENTION_FIGURES: (("query rows", "key columns", "head size"), ("forward (µs)", "backward (µs)"))}

# Shown in one fixed unit each, so that machines compare at a glance: (scale, label).
HUMAN_UNITS = {"s": (1e-6, "µs"), "s/op": (1e-6, "µs/op"), "s/call": (1e-6, "µs/call"), "s/step": (1e-6, "µs/step"), "s/sample": (1e-6, "µs/sample"),
               "s/node": (1e-6, "µs/node"), "s/block": (1e-6, "µs/block"), "s/kernel": (1e-6, "µs/kernel"), "FLOP/s": (1e9, "GFLOP/s"), "elem/s": (1e9, "Gelem/s"), "s/elem": (1e-9, "ns/elem"),
               "B/s": (1e9, "GB/s"), "share": (0.01, "%"),
               "1/sample": (1e-6, "per 1M"), "objects": (1e3, "k objects"), "GiB": (1.0, "GiB"),
               "s/collection": (1e-3, "ms"), "s/field": (1e-6, "µs/field")}


CALIBRATION_TIME = "under a minute"  # a full calibration on a 2-core CPU (this AMD EPYC VM: 42-57 s, the command whole)


class ProfileError(ValueError):
    pass


# calibrate's convolution probes, the layer each times (core.model.conv_probes.layer's)
CONV_PROBES = {"conv1d_flops": conv_probes.MANY_CHANNELS[3], "conv2d_flops": conv_probes.MANY_CHANNELS[4]}


def conv_probe(field: str, device: str) -> torch.nn.Module:
    return conv_probes.layer(CONV_PROBES[field], device)


@lru_cache(maxsize=64)
def conv_call_flops(field: str, size: str) -> float:
    """FLOPs of one forward call of a conv probe on an input shaped `size` ('8x16x256'), counted by
    torch.utils.flop_counter on the meta device."""
    layer_type, (channels, _, _), _ = CONV_PROBES[field]
    dims = 3 if layer_type is torch.nn.Conv1d else 4
    shape = tuple(int(d) for d in size.split("x")) if re.fullmatch(r"[0-9]+(x[0-9]+)+", size) else ()
    if len(shape) != dims or shape[1] != channels or min(shape) < 1:
        raise ProfileError(f"{field}: size '{size[:40]}' is no {dims}-dimensional input with {channels} "
                           f"channels (N x {channels} x ...)")
    return conv_probes.forward_flops(CONV_PROBES[field], shape)


def matmul_rates(section: dict) -> dict[float, float]:
    """A measured section's matmul rates by FLOPs per call (an n x n by n x n product: 2n^3)."""
    return {2.0 * int(n) ** 3: rate for n, rate in section["matmul_flops"].items()}


def conv_rates(section: dict) -> dict[float, float]:
    """A measured section's convolution rates by FLOPs per call, both probes merged (the faster where two share a
    size)."""
    rates = {}
    for field in CONV_PROBES:
        for size, rate in section[field].items():
            flops = conv_call_flops(field, size)
            rates[flops] = max(rate, rates.get(flops, rate))
    return rates


def fields_for(kind: str) -> list[Field]:
    """The fields a device of this kind ('cpu' or 'cuda') measures."""
    return [f for f in FIELDS if kind in f.kinds]


def _value_schema(field: Field) -> dict:
    number = {"type": "number", "minimum": field.low, "maximum": field.high}
    if not field.sized:
        return number
    keys = {"propertyNames": {"pattern": KEYS[field.name]}} if field.name in KEYS else {}
    least = 0 if field.name in EMPTY_WHERE_ABSENT else 1
    return {"type": "object", "minProperties": least, "additionalProperties": number} | keys


def _section_schema(kind: str) -> dict:
    properties = {f.name: _value_schema(f) for f in fields_for(kind)}
    required = [f.name for f in fields_for(kind) if f.required]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


SCHEMA = {
    "type": "object",
    "required": ["schema", "machine_id", "fingerprint", "code_version", "taken", "seconds", "quick",
                 "load_per_core", "cpu", "gpus"],
    "properties": {
        "schema": {"const": SCHEMA_VERSION},
        "machine_id": {"type": "string", "pattern": MACHINE_ID_PATTERN},
        "fingerprint": {"type": "object", "required": ["machine_id", "cpu_model", "gpus"]},
        "code_version": {"type": "object"},
        "taken": {"type": "string", "minLength": 1},
        "booted": {"type": "string", "minLength": 1},
        "seconds": {"type": "number", "minimum": 0},
        "quick": {"type": "boolean"},
        "load_per_core": {"type": "number", "minimum": 0},
        "cpu": _section_schema("cpu"),
        "gpus": {"type": "object", "propertyNames": {"pattern": GPU_PATTERN},
                 "additionalProperties": _section_schema("cuda")},
    },
}
_DEVICE = {"type": "string", "pattern": rf"^cpu$|{GPU_PATTERN}"}
_FIGURE = {"enum": [f.name for f in FIELDS]}
_NUMBER = {"type": "number"}
# A flag holds the value the cost model reads instead, or names a key it can read the figure without
SCHEMA["properties"]["flags"] = {"type": "array", "items": {
    "type": "object", "required": ["device", "figure", "value", "again", "limit", "rule", "why"],
    "properties": {"device": _DEVICE, "figure": _FIGURE, "key": {"type": "string"}, "value": _NUMBER, "again": _NUMBER,
                   "limit": _NUMBER, "rule": {"enum": ["specification", "siblings", "range"]}, "why": {"type": "string"},
                   "instead": {"type": "number", "exclusiveMinimum": 0}},
    "anyOf": [{"required": ["instead"]}, {"required": ["key"]}], "additionalProperties": False}}
SCHEMA["properties"]["floors"] = {"type": "array", "items": {
    "type": "object", "required": ["device", "figure", "raw", "why"],
    "properties": {"device": _DEVICE, "figure": _FIGURE, "key": {"type": "string"}, "floor": _NUMBER,
                   "ceiling": _NUMBER, "raw": _NUMBER, "why": {"type": "string"}},
    "oneOf": [{"required": ["floor"]}, {"required": ["ceiling"]}], "additionalProperties": False}}
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
_FIELD_VALIDATORS = {f.name: jsonschema.Draft202012Validator(_value_schema(f)) for f in FIELDS}


def out_of_range(section: dict) -> list[str]:
    """The fields of a measured section ({field: value}, a sized one {size: value}) with a value outside its sane
    range (its schema's): a broken measurement, such as one a busy machine stalled."""
    return [field for field, value in section.items() if not _FIELD_VALIDATORS[field].is_valid(value)]


def validate(profile: dict) -> None:
    """Raise ProfileError naming the first field that is missing, misplaced or out of its sane range."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(profile))
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "profile"
        raise ProfileError(f"{where}: {error.message}")
    for field in GRID_FIGURES:
        problem = costmodel.not_a_grid(list(profile["cpu"].get(field, {})))
        if problem:
            raise ProfileError(f"cpu/{field}: {problem}")


def path(machine_id: str = None, results_dir: Path = None) -> Path:
    """Where a machine's profile lives (this machine's by default)."""
    folder = results_dir or settings.results_dir()
    return folder / (machine_id or devices.fingerprint()["machine_id"]) / SUBFOLDER / FILE_NAME


def save(profile: dict) -> Path:
    """Check and write a profile atomically over the machine's previous one, after removing the temporary files
    a killed save left; refused when read-only, core.store.files.StoreError (naming the file, its temporary one
    removed) when the disk is full or the folder cannot be written."""
    settings.require_writable("calibration")
    validate(profile)
    target = path(profile["machine_id"])
    files.remove_leftovers(target.parent)
    files.write_atomic(target, profile)
    return target


def load(machine_id: str = None) -> dict | None:
    """A machine's profile (this machine's by default); None when it has none, or (with a warning naming the
    file) when its file is malformed."""
    target = path(machine_id)
    return read(target) if target.exists() else None


def all(results_dir: Path = None) -> dict[str, dict]:  # shadows the builtin inside this module, which does not use it
    """Every readable profile under the results folder, by machine id; malformed files are skipped with a
    warning naming them."""
    found = {}
    for target in sorted((results_dir or settings.results_dir()).glob(f"*/{SUBFOLDER}/{FILE_NAME}")):
        profile = read(target)
        if profile is not None:
            found[profile["machine_id"]] = profile
    return found


def read(target: Path) -> dict | None:
    """The profile in `target`, or None with a warning naming the file and what is wrong with it."""
    try:
        return read_checked(target)
    except ValueError as e:  # ProfileError, JSONDecodeError and UnicodeDecodeError are ValueErrors
        warnings.warn(f"skipping calibration profile {target}: {e}", stacklevel=3)
        return None


# Each version of a profile file is checked once: every prediction of a page resolves its hardware again.
_CHECKED: dict[tuple, dict] = {}


def read_checked(target: Path) -> dict:
    """The profile in `target`, read like a record (a regular file only, never through a link, never blocking on
    a pipe) and checked, its machine id its folder's; ValueError saying what is wrong."""
    text, version = files.read_regular_file(target)
    key = (str(target), version)
    if key not in _CHECKED:
        if len(_CHECKED) >= 64:
            _CHECKED.clear()
        _CHECKED[key] = _checked(text, target.parent.parent.name)
    return copy.deepcopy(_CHECKED[key])


def _checked(text: bytes, folder: str) -> dict:
    profile = json.loads(text, parse_constant=_refuse_constant)
    validate(profile)
    if profile["machine_id"] != folder:
        raise ProfileError(f"machine_id: '{profile['machine_id']}' is not its folder's '{folder}'")
    return profile


def _refuse_constant(name: str):
    raise ProfileError(f"{name} is not a measured value")


def missing_message(machine_id: str = None) -> str:
    """What to tell someone who needs a profile that a machine lacks."""
    if machine_id in (None, devices.fingerprint()["machine_id"]):
        return f"no calibrated profile for this machine: run `python -m core calibrate` ({CALIBRATION_TIME})"
    return f"no calibrated profile for machine {machine_id}: run `python -m core calibrate` on it ({CALIBRATION_TIME})"


def human(value: float, unit: str) -> tuple[str, str]:
    """A value in its field's display unit: (number text, unit label), e.g. (3.2e-6, 's/op') -> ('3.20', 'µs/op')."""
    scale, label = HUMAN_UNITS[unit]
    return _digits(value / scale), label


def human_range(values, unit: str) -> tuple[str, str]:
    """The smallest to the largest of some values in their field's display unit: ('0.16 to 64,432', 'µs/call')."""
    (low, label), (high, _) = human(min(values), unit), human(max(values), unit)
    return f"{low} to {high}", label


def _digits(number: float) -> str:
    return f"{number:,.0f}" if abs(number) >= 100 else f"{number:#.3g}"


def op_rows(profile: dict) -> list[dict]:
    """The CPU's operations timed one by one (OP_FIGURES) as table rows in display units, one per operation: its
    fixed part per call and its time per element written."""
    calls, elements = (profile["cpu"].get(field, {}) for field in OP_FIGURES)
    return [{"operation": name, "per call": " ".join(human(calls[name], "s/call")),
             "per element written": " ".join(human(elements[name], "s/elem"))} for name in calls if name in elements]


def grid_rows(profile: dict, fields: tuple[str, str]) -> list[dict]:
    """The CPU's grid of two figures timed per shape (GRID_TABLES' keys) as table rows, one per shape: its three
    sizes and each figure in microseconds."""
    axes, columns = GRID_TABLES[fields]
    first, second = (profile["cpu"].get(field, {}) for field in fields)
    return [dict(zip(axes, map(int, shape.split("x"))))
            | {columns[0]: first[shape] * 1e6, columns[1]: second.get(shape, float("nan")) * 1e6} for shape in first]


# A field whose calibration changed when another field was first measured: that field, and what the figure
# means in a profile taken before it
EARLIER_MEANINGS = {"op_overhead_autograd": (
    "op_overhead_nested", "host time per autograd-recording op, of a small training step (Linear-ReLU-Linear, batch "
    "64, SGD): the step's time less what the profile's other figures cover, over every recording op, Python's and "
    "C++'s alike (a profile from before op_overhead_nested was measured)")}


def measured(profile: dict) -> dict[str, dict]:
    """Each calibrated device's figures as measured: 'cpu' and every 'cuda:N'."""
    return {"cpu": profile["cpu"], **profile["gpus"]}


def sections(profile: dict) -> dict[str, dict]:
    """Each calibrated device's figures as the cost model reads them: as measured, less what the profile flags (a
    flagged figure's value is the one its flag holds instead; a flagged key without one is left out, and so is a
    figure left with no key), so that it falls back as a profile without that figure does."""
    found = measured(profile)
    for flag in profile.get("flags", ()):
        section = found.get(flag["device"])
        if section is None or flag["figure"] not in section:
            continue
        found[flag["device"]] = section = dict(section)
        figure, key = flag["figure"], flag.get("key")
        if "instead" in flag:
            section[figure] = flag["instead"] if key is None else {**section[figure], key: flag["instead"]}
            continue
        rest = {k: v for k, v in section[figure].items() if k != key} if key is not None else {}
        if rest:
            section[figure] = rest
        else:
            del section[figure]
    return found


def flagged(profile: dict, device: str, figure: str, key: str = None) -> dict | None:
    """The profile's flag on a figure (a key of one), None when it has none."""
    return next((f for f in profile.get("flags", ()) if (f["device"], f["figure"], f.get("key")) == (device, figure, key)),
                None)


def held(profile: dict, device: str, figure: str, key: str = None) -> dict | None:
    """The profile's floor (or ceiling) entry for a figure (a key of one): its value is that bound, not a
    measurement; None when it was measured."""
    return next((f for f in profile.get("floors", ()) if (f["device"], f["figure"], f.get("key")) == (device, figure, key)),
                None)


def _flag_text(flag: dict) -> str:
    unit = FIELD[flag["figure"]].unit
    instead = (f"the cost model reads {' '.join(human(flag['instead'], unit))} (its hardware's catalogue figure) "
               f"instead" if "instead" in flag else "the cost model reads the profile as if it were never measured")
    return (f"flagged, not used: {' '.join(human(flag['value'], unit))}, and {' '.join(human(flag['again'], unit))} "
            f"measured again, {flag['why']} ({' '.join(human(flag['limit'], unit))}); {instead}")


def _held_text(entry: dict) -> str:
    unit, bound = FIELD[entry["figure"]].unit, "floor" if "floor" in entry else "ceiling"
    return (f"a {bound}, not a measurement: held at {' '.join(human(entry[bound], unit))} ({entry['why']}) where "
            f"it measured {' '.join(human(entry['raw'], unit))}")


def check_notes(profile: dict) -> list[str]:
    """A line per flagged figure and per figure held at a floor or ceiling."""
    return [f"{entry['device']} {entry['figure']}{' @ ' + entry['key'] if 'key' in entry else ''}: {text(entry)}"
            for entries, text in ((profile.get("flags", ()), _flag_text), (profile.get("floors", ()), _held_text))
            for entry in entries]


def rows(profile: dict) -> list[dict]:
    """The profile as table rows in display units, one per device, field and size, in FIELDS order: its figures as
    measured, what it is saying so where one is flagged or held at a floor."""
    table = []
    for device, values in measured(profile).items():
        for field in fields_for(devices.kind(device)):
            if field.name not in values:
                continue
            value = values[field.name]
            for size, number in (value.items() if field.sized else [("", value)]):
                shown, unit = human(number, field.unit)
                flag, bound = (find(profile, device, field.name, size or None) for find in (flagged, held))
                checked = "".join(f"; {text(entry)}" for entry, text in ((flag, _flag_text), (bound, _held_text))
                                  if entry)
                table.append({"device": device, "field": field.name, "size": size, "value": shown, "unit": unit,
                              "what it is": _meaning(field, values) + checked})
    return table


def _meaning(field: Field, values: dict) -> str:
    later, earlier = EARLIER_MEANINGS.get(field.name, (None, None))
    return earlier if later and later not in values else field.description


def busy_note(profile: dict) -> str | None:
    """A warning when other work kept the machine busy while it was calibrated, else None."""
    load = profile["load_per_core"]
    if load < BUSY_LOAD_PER_CORE:
        return None
    return (f"the machine was busy when calibrated (load {load:.1f} per core): other work slows and scatters "
            f"these figures; calibrate again when it is idle")


def code_text(profile: dict) -> str:
    """The code version that took a profile, in a few characters: a commit (and whether it was dirty)."""
    return versions.code_text(profile["code_version"])
