"""`python -m core calibrate`: this machine's constants, measured through core.measure.timing (never a clock read
here) into the profile core.model.profiles stores: the host's per-operation overhead and DataLoader cost, achieved
compute and memory rates on every device, and for every CUDA GPU its launch, kernel, sync, copy and graph
costs. Each probe measures one thing on one device and returns {field: value}.

Within a probe each figure is the best of its samples (as timeit advises): a short block of calls reads the
machine as it is at that moment. The probes then run `passes` times over, tens of seconds apart, and each
figure is the median over passes: a record's time is the median of samples spread over its run, and a
machine (a shared VM above all) can change speed from one few seconds to the next, so the figures the cost
model predicts a median with are medians too. Once the passes are over the figures check themselves
(core.calibration.sanity): one beyond its hardware's specification or far above its siblings is measured again, and
flagged when it stays so; a figure held at a floor or ceiling is listed as such."""
import collections
import functools
import gc
import itertools
import math
import statistics
import sys
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import psutil
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torch.utils.flop_counter import FlopCounterMode
from tqdm import tqdm

from core import devices, versions
from core.measure import census, gc_watch, graphs, timing
from core.model import conv_probes, costmodel, hardware, profiles
from core.calibration import module_probes, op_probes, sanity
from core.calibration.efforts import FULL, QUICK, Effort
from core.store import results
from core.measure.kernels import cpu_attention, cpu_rnn

aten = torch.ops.aten
FLOAT_BYTES = 4
SMALL_COPY_ELEMENTS = 1  # one float32: a copy's latency floor
LOADER_FEATURES = 16
QUEUED_REPLAYS = 20  # one-kernel graph replays queued behind a spin: the host's fixed cost of a replay
LOADER_PASS_BATCHES, LOADER_PASSES = 256, 3  # the DataLoader per batch size: batches per pass (at most), passes
FULL_COLLECTIONS = 5  # gc.collect() calls timed
TRAINING_MLP, TRAINING_BATCH = (16, 32, 1), 64  # the op-overhead probe's training step: Linear, ReLU, Linear
# The nested-op probe: a one-sample GRU's forward and backward over two sequence lengths; its loop over the
# steps issues its operations from C++, and the line between the lengths prices one of them
NESTED_GRU, NESTED_LENGTHS = (1, 4), (4, 32)  # input and hidden features; sequence lengths
TRANSFORMED_MLP = (1, 4, 4)  # the transformed-op probe's Linear-Tanh-Linear, one sample through torch.func.jvp
# A short input per conv probe: a small model's layers cost what such a call costs (a fixed part, forward and
# backward, far above its FLOPs at a larger input's rate), so the sized rates reach down to it. It is a batch, as
# the other inputs are: PyTorch's CPU convolution takes oneDNN for a batch and an im2col path for one sample, and
# oneDNN's fixed part is about four times the other's (a training call on the AMD EPYC: 155 us, and 35 us).
CONV_BATCH = 8
SHORT_CONV_INPUTS = {3: (CONV_BATCH, 4), 4: (CONV_BATCH, 2, 2)}  # by rank: batch, then length or height and width
MAX_BACKWARD_SHARE = 0.95  # of a training call: its forward is never free
OPTIMIZER_PARAMS = (1, 32)  # parameter tensors of the optimiser probe's two steps
OPTIMIZER_PARAM_ELEMENTS = 16
SMALL_ELEMENTWISE = (2**12, 2**16, costmodel.IN_CACHE_ELEMENTS)  # the elementwise probe's sizes below its large tensors
LISTED_OP_ROWS = (128, 4096)  # core.calibration.op_probes' two sizes: one thread's work, and two threads' (ATen's grain: 32,768)
SORT_ROWS, SORT_ELEMENTS = (4, 16, 128, 1024), 2**16  # sort's row lengths, each over the same elements
# the memory-bandwidth probe's copy, by device kind: past a CPU's last-level cache (32 MB here) and an H100's or
# H200's L2 (50 MB), read once and written once
MEMORY_BYTES = {"cpu": 2**26, "cuda": 2**28}
NUMPY_LOADER_BATCH = 256  # the batch of the DataLoader passes over NumPy rows against tensor rows
ATTENTION_BLOCKS_PER_THREAD = 4  # the flash-attention probe's blocks a call per thread: every thread kept busy
LSTM_STEPS = 16  # the fused-LSTM probe's sequence length: its rates are by FLOPs per step
# The narrow-GEMM probe: a batch of rows through a layer of a few outputs (a small model's last layers and their
# gradients), as wide as one vector register of floats and beyond, where a GEMM reaches its FLOP rate.
NARROW_GEMM_LEFT, NARROW_COLUMNS = (4096, 32), (1, 2, 4, 8, 16)
# The GEMM grid's timings: hundreds of shapes, each in fewer and shorter blocks than a lone probe's (its passes'
# median steadies them)
GEMM_REPEATS, GEMM_BLOCK_SHARE = 3, 0.1
# The wide-GEMM probe: nn.Linear's addmm with a weight past the caches (K x N, 8 MB of float32: beyond a core's L2 and
# a VM's share of its L3), at two row counts; a GEMM deeper and wider than the grid streams its weight from memory
WIDE_GEMM_ROWS, WIDE_GEMM_WEIGHT = (16, 256), (1024, 2048)
PROBE_RETRIES = 2  # measurements again of a probe with a figure outside its sane range
RETRY_PAUSE_S = 2.0  # the wait before each: what stalls a probe (a process exiting, a burst of other work) passes
BARE_OPS: dict[str, float] = {}  # per device, in the pass going on
PASS: dict[str, dict] = {}  # each device's figures measured so far in the pass going on
TRAINING_CALLS: dict[tuple[str, str], float] = {}  # a conv probe's training call's work seconds per (device, input)
COUNTED: dict[tuple, dict] = {}  # the listed operations' probes' censuses by (device, probe, size), taken once
MIN_WORK_SHARE = 0.1  # a probe call's work is at least this share of it: a bare op's noise cannot make it vanish
# Every figure held at a floor or ceiling over the calibration's passes and its figures measured again, by (device,
# figure, key): the profile's "floors" (sanity.floors) are those whose stored value is such a bound
FLOORS: dict[tuple, list[dict]] = {}
AT_LEAST_BARE = "at least a bare op (op_overhead_no_grad)"


CALIBRATED_KINDS = ("cpu", "cuda")
# Figures timed per shape, which the report sums up in a line each (the Machines page lists every shape)
GRIDS = {**dict.fromkeys(profiles.GEMM_FIGURES, "the GEMM grid (the Machines page lists every shape)"),
         **dict.fromkeys(profiles.ATTENTION_FIGURES, "the flash-attention grid (the Machines page lists every block)")}


def _seconds(fn: Callable[[], object], device: str, effort: Effort, sync=None) -> float:
    """Best seconds per call of a short call, over blocks of calls (torch.utils.benchmark)."""
    return min(timing.micro(fn, device, repeats=effort.repeats, block_seconds=effort.block_seconds,
                            sync=sync).samples)


def _host_only(device: str) -> None:
    """The sync of a clock that does not wait for the device: it reads the host's own time."""


def _work_seconds(fn: Callable[[], object], device: str, effort: Effort, counted: dict = None) -> float:
    """Seconds of the work in a call of `fn`: on the CPU its time less its operations' dispatch at the bare op
    figure (the cost model counts that as host time), never below MIN_WORK_SHARE of the call; on a GPU
    the whole call, which waits for the device. `counted`: the call's census summary, when already taken."""
    seconds = _seconds(fn, device, effort)
    if devices.kind(device) != "cpu":
        return seconds
    operations = (counted or _counted(fn, device))["operations"]
    return _beyond(seconds, operations * _bare_op_seconds(device, effort))


def _beyond(seconds: float, dispatch: float) -> float:
    """A call's seconds less its operations' dispatch, never below MIN_WORK_SHARE of the call."""
    return max(seconds - dispatch, MIN_WORK_SHARE * seconds)


def _held(device: str, figure: str, raw: float, floor: float = -math.inf, ceiling: float = math.inf,
          key: str = None, why: str = "") -> float:
    """A figure held at a floor (or a ceiling), logged in FLOORS when that changed it (sanity.held)."""
    return sanity.held(FLOORS, device, figure, raw, floor, ceiling, key, why)


def _bare_op_seconds(device: str, effort: Effort) -> float:
    """A bare operation's seconds, timed once per pass (take clears BARE_OPS): a pass's probes subtract one figure."""
    if device not in BARE_OPS:
        a, b = torch.ones(1), torch.ones(1)
        BARE_OPS[device] = _seconds(lambda: torch.add(a, b), device, effort)
    return BARE_OPS[device]


def _flop_rate(fn: Callable[[], object], device: str, effort: Effort) -> float:
    """FLOP/s of `fn`'s work, its FLOPs counted by torch.utils.flop_counter."""
    with torch.no_grad():
        with FlopCounterMode(display=False) as counter:
            fn()
        return counter.get_total_flops() / _work_seconds(fn, device, effort)


# Host probes (the CPU only).

def op_overhead(device: str, effort: Effort) -> dict:
    a, b = (torch.ones(1, requires_grad=True) for _ in range(2))
    with torch.no_grad():
        bare = _seconds(lambda: torch.add(a, b), device, effort)
    python = python_costs(device, effort)
    nested = _held(device, "op_overhead_nested", _nested_op_seconds(bare, device, effort), bare, why=AT_LEAST_BARE)
    return {"op_overhead_autograd": _held(device, "op_overhead_autograd",
                                          _recording_op_seconds(bare, nested, python, device, effort), bare,
                                          why=AT_LEAST_BARE),
            "op_overhead_nested": nested,
            "op_overhead_nested_no_grad": _nested_no_grad_op_seconds(device, effort),
            "op_overhead_transformed": _held(device, "op_overhead_transformed",
                                             _transformed_op_seconds(python, device, effort), bare, why=AT_LEAST_BARE),
            "op_overhead_no_grad": bare, **python}


def _transformed_op_seconds(python: dict, device: str, effort: Effort) -> float:
    """Host seconds per operation under a torch.func transform: a jvp through a one-sample Linear-Tanh-Linear
    (TRANSFORMED_MLP), less its module calls at their figures, over its operations (functorch's work on each,
    and its Python around them)."""
    model = torch.nn.Sequential(torch.nn.Linear(*TRANSFORMED_MLP[:2]), torch.nn.Tanh(),
                                torch.nn.Linear(*TRANSFORMED_MLP[1:]))
    x = torch.rand(1, TRANSFORMED_MLP[0])

    def step():
        torch.func.jvp(model, (x,), (torch.ones_like(x),))
    found = _counted(step, device)
    return (_seconds(step, device, effort) - _module_seconds(found, python)) / found["operations"]


def _nested_no_grad_op_seconds(device: str, effort: Effort) -> float:
    """Host seconds per operation C++ issues outside autograd, its tiny work included: the line through a one-sample
    GRU's forward under no_grad at two sequence lengths (NESTED_LENGTHS), over the operations it adds (its loop's,
    every one issued by C++)."""
    def forward(gru, x):
        with torch.no_grad():
            gru(x)
    (few, few_s), (many, many_s) = [(found["operations"], seconds)
                                    for found, seconds in _gru_lengths(forward, device, effort)]
    return _held(device, "op_overhead_nested_no_grad", (many_s - few_s) / (many - few),
                 profiles.FIELD["op_overhead_nested_no_grad"].low, why="at least the field's sane range")


def _nested_op_seconds(bare: float, device: str, effort: Effort) -> float:
    """Host seconds per autograd-recording operation that C++ issues (census: nested), its backward included: the
    line through a one-sample GRU's forward and backward at two sequence lengths (NESTED_LENGTHS), less the
    other operations it adds at a bare operation's cost, over the nested recording operations it adds."""
    def step(gru, x):
        gru(x)[0].sum().backward()
    points = []
    for found, seconds in _gru_lengths(step, device, effort):
        nested = sum(op["calls"] for op in found["ops"] if op["autograd"] and op["nested"])
        points.append((nested, sum(op["calls"] for op in found["ops"]) - nested, seconds))
    (few, few_other, few_s), (many, many_other, many_s) = points
    return (many_s - few_s - (many_other - few_other) * bare) / (many - few)


def _gru_lengths(run: Callable, device: str, effort: Effort) -> list[tuple[dict, float]]:
    """`run(gru, x)` on a one-sample GRU (NESTED_GRU) at each of NESTED_LENGTHS: its census summary and seconds."""
    gru = torch.nn.GRU(*NESTED_GRU, batch_first=True)
    found = []
    for length in NESTED_LENGTHS:
        x = torch.randn(1, length, NESTED_GRU[0])
        call = functools.partial(run, gru, x)
        found.append((_counted(call, device), _seconds(call, device, effort)))
    return found


def _recording_op_seconds(bare: float, nested: float, python: dict, device: str, effort: Effort) -> float:
    """Host seconds per autograd-recording operation that Python issues, of a small training step (TRAINING_MLP,
    SGD): the step's time less its module calls, its optimiser step, the recording operations C++ issues (at
    `nested`) and its other operations at their figures, over its recording ones that Python issues. What is
    left (building the graph, starting and running backward, zero_grad, the loss's Python) lands on the
    operations a model's forward issues from Python, which is where a census finds it again."""
    step = _training_step(device)
    found = _counted(step, device)
    recording = sum(op["calls"] for op in found["ops"] if op["autograd"])
    issued_nested = sum(op["calls"] for op in found["ops"] if op["autograd"] and op["nested"])
    in_step = sum(op["calls"] for op in found["ops"] if op["phase"] == census.OPTIMIZER)
    (stretch,) = found["stretches"]
    known = ((found["operations"] - recording - in_step) * bare + in_step * python["optimizer_op_overhead"]
             + issued_nested * nested + _module_seconds(found, python)
             + stretch["optimizer_steps"] * python["optimizer_step"])
    seconds = min(timing.micro(step, device, repeats=3 * effort.repeats, block_seconds=3 * effort.block_seconds).samples)
    return (seconds - known) / (recording - issued_nested)


def _training_step(device: str) -> Callable[[], None]:
    """The op-overhead probes' small training step (TRAINING_MLP, batch TRAINING_BATCH, SGD as torch.optim picks it
    for the device), its model and data on `device`."""
    model = torch.nn.Sequential(torch.nn.Linear(TRAINING_MLP[0], TRAINING_MLP[1]), torch.nn.ReLU(),
                                torch.nn.Linear(TRAINING_MLP[1], TRAINING_MLP[2])).to(device)
    x = torch.randn(TRAINING_BATCH, TRAINING_MLP[0], device=device)
    y = torch.randn(TRAINING_BATCH, TRAINING_MLP[2], device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return step


def _module_seconds(found: dict, python: dict) -> float:
    """The module calls of a one-stretch census at the figures python_costs measured."""
    (stretch,) = found["stretches"]
    return costmodel.module_seconds(stretch, python["module_call"], python["module_call_seconds"])


def python_costs(device: str, effort: Effort) -> dict:
    """The host's Python that no operation shows: a module call (a bare one, and each of core.calibration.module_probes'
    layers beyond its operations), and an optimiser step's fixed part and its part per op, from a line through
    two steps of Adam (one tensor at a time) over few and many parameters."""
    identity, x = torch.nn.Identity(), torch.ones(1)
    steps = []
    for count in OPTIMIZER_PARAMS:
        params = [torch.zeros(OPTIMIZER_PARAM_ELEMENTS, requires_grad=True) for _ in range(count)]
        for p in params:
            p.grad = torch.ones_like(p)
        optimizer = torch.optim.Adam(params, foreach=False)
        optimizer.step()
        steps.append((census.of(optimizer.step, device).summary(heap=False)["operations"],
                      _seconds(optimizer.step, device, effort)))
    (few_ops, few_s), (many_ops, many_s) = steps
    per_op = _held(device, "optimizer_op_overhead", (many_s - few_s) / (many_ops - few_ops),
                   _seconds(lambda: torch.add(x, x), device, effort), why="at least an add's time")
    bare_module = _seconds(lambda: identity(x), device, effort)
    return {"module_call": bare_module, "module_call_seconds": module_costs(device, effort, bare_module),
            "optimizer_step": _held(device, "optimizer_step", few_s - few_ops * per_op, 0.0, why="at least 0"),
            "optimizer_op_overhead": per_op}


def module_costs(device: str, effort: Effort, bare_module: float) -> dict:
    """Seconds of each core.calibration.module_probes layer's call beyond the operations it issues (no grad: its Python
    alone), at least a bare module's call (`bare_module`), which every call pays."""
    return {name: module_cost(name, device, effort, bare_module) for name in module_probes.PROBES}


def module_cost(name: str, device: str, effort: Effort, bare_module: float) -> float:
    """module_costs' figure for one layer (`name`, a key of module_probes.PROBES)."""
    module_call, operations = module_probes.PROBES[name]()
    with torch.no_grad():
        seconds = _seconds(module_call, device, effort) - _seconds(operations, device, effort)
    return _held(device, "module_call_seconds", seconds, bare_module, key=name,
                 why="at least a bare module's call (module_call)")


def loader_cost(device: str, effort: Effort) -> dict:
    per_sample = {}
    for field, batch_size, samples in (("loader_batch1_per_sample", 1, effort.loader_samples[0]),
                                       ("loader_batched_per_sample", costmodel.LOADER_BATCH, effort.loader_samples[1])):
        per_sample[field] = min(_loader_passes(batch_size, samples, device, effort.repeats)[0]) / samples
    per_sample["loader_numpy_field_seconds"] = numpy_field_seconds(device, effort)
    by_batch = loader_by_batch(device, effort)
    heap = len(gc.get_objects())  # counted as a census counts them: the passes' garbage not collected yet
    if not any(by_batch[costmodel.COLLECTIONS].values()):
        # passes too short to see one even at the largest batch (a quick calibration's): no figure, rather than 0
        return per_sample | {"loader_per_sample": by_batch["loader_per_sample"]}
    return per_sample | by_batch | {"full_collection_seconds": full_collection_seconds(device),
                                    "collection_heap_objects": heap}


def loader_by_batch(device: str, effort: Effort) -> dict:
    """At each of effort.loader_batches, over up to LOADER_PASS_BATCHES batches (at most effort.loader_rows rows):
    the median pass's seconds per sample (loader_per_sample), the same with the garbage collector's full
    collections taken out (loader_uncollected_per_sample), and those collections per sample over every pass
    (loader_collections_per_sample). A batch's sample tensors live long enough to reach the collector's oldest
    generation, so full collections come more often the larger the batch, and fall in some passes, not others."""
    figures = {"loader_per_sample": {}, "loader_uncollected_per_sample": {}, "loader_collections_per_sample": {}}
    for batch_size in effort.loader_batches:
        samples = min(effort.loader_rows, LOADER_PASS_BATCHES * batch_size)
        passes, collected = _loader_passes(batch_size, samples, device, LOADER_PASSES)
        size = str(batch_size)
        figures["loader_per_sample"][size] = statistics.median(passes) / samples
        figures["loader_uncollected_per_sample"][size] = statistics.median(
            seconds - full.seconds for seconds, full in zip(passes, collected)) / samples
        figures["loader_collections_per_sample"][size] = sum(full.count for full in collected) / (samples * len(passes))
    return figures


def numpy_field_seconds(device: str, effort: Effort) -> float:
    """Seconds a sample's NumPy field adds to a DataLoader sample over a tensor field (at least 0): the default
    collate turns each NumPy row into a tensor (torch.as_tensor: the census's aten.lift_fresh, one per field and
    sample), where a TensorDataset's rows are tensors already. Passes at NUMPY_LOADER_BATCH over the same rows,
    as NumPy arrays (the rows pytorch-tabnet's TorchDataset gives) and as a TensorDataset, two fields each."""
    samples = min(effort.loader_rows, LOADER_PASS_BATCHES * NUMPY_LOADER_BATCH)
    tensors, arrays = (min(_loader_passes(NUMPY_LOADER_BATCH, samples, device, LOADER_PASSES, numpy)[0])
                       for numpy in (False, True))
    return _held(device, "loader_numpy_field_seconds", (arrays - tensors) / (2 * samples), 0.0, why="at least 0")


class _NumpyRows(Dataset):
    """Rows of two NumPy arrays, a row of each per sample."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.x[index], self.y[index]


def _loader_passes(batch_size: int, samples: int, device: str, repeats: int,
                   numpy: bool = False) -> tuple[list[float], list]:
    """Seconds of each of `repeats` passes of a DataLoader over a TensorDataset of `samples` rows (`numpy`: over
    the same rows as NumPy arrays, _NumpyRows), and the full collections in each (gc_watch.Collected)."""
    x, y = torch.randn(samples, LOADER_FEATURES), torch.randn(samples, 1)
    data = _NumpyRows(x.numpy(), y.numpy()) if numpy else TensorDataset(x, y)
    loader = DataLoader(data, batch_size=batch_size)
    collected = []

    def one_pass():
        with gc_watch.full_collections() as full:
            collections.deque(loader, maxlen=0)
        collected.append(full)

    measurement = timing.measure(one_pass, device, repeats=repeats)
    return list(measurement.samples), collected[len(collected) - len(measurement.samples):]  # the warm-up's left out


def full_collection_seconds(device: str) -> float:
    """Seconds of one full garbage collection in this process (gc.collect()), the median of a few: a collection
    walks every object the process holds, so it costs what this process's heap does."""
    return statistics.median(timing.measure(gc.collect, device, repeats=FULL_COLLECTIONS).samples)


# Compute probes (every device).

def matmul_rate(device: str, effort: Effort) -> dict:
    rates = {}
    for n in effort.matmul_sizes[devices.kind(device)]:
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        rates[str(n)] = _flop_rate(lambda: torch.mm(a, b), device, effort)
    return {"matmul_flops": rates}


def narrow_gemm_cost(device: str, effort: Effort) -> dict:
    """Seconds per element of the left operand of a GEMM whose output is N columns wide, per N in NARROW_COLUMNS."""
    rows, inner = NARROW_GEMM_LEFT
    left = torch.randn(rows, inner, device=device)
    per_element = {}
    for columns in NARROW_COLUMNS:
        right = torch.randn(inner, columns, device=device)
        per_element[str(columns)] = _work_seconds(lambda: torch.mm(left, right), device, effort) / (rows * inner)
    return {"narrow_gemm_seconds": per_element}


def gemm_costs(device: str, effort: Effort) -> dict:
    """Seconds beyond its dispatch of a torch.mm(A, B) and of nn.Linear's torch.addmm(bias, A, W.t()) for every
    M x K x N of the effort's grid (A: M x K, B: K x N, W: N x K): one operation each (W.t(), its own operation in a
    census, is taken outside the timed call)."""
    brief = _brief(effort)
    bare = _bare_op_seconds(device, effort)
    plain, linear = {}, {}
    for rows, inner, columns in itertools.product(*effort.gemm_grid):
        a, b = torch.randn(rows, inner, device=device), torch.randn(inner, columns, device=device)
        weight, bias = torch.randn(columns, inner, device=device).t(), torch.randn(columns, device=device)
        shape = f"{rows}x{inner}x{columns}"
        plain[shape] = _beyond(_seconds(lambda: torch.mm(a, b), device, brief), bare)
        linear[shape] = _beyond(_seconds(lambda: torch.addmm(bias, a, weight), device, brief), bare)
    return {"gemm_seconds": plain, "linear_seconds": linear}


def wide_gemm_costs(device: str, effort: Effort) -> dict:
    """Seconds beyond its dispatch of nn.Linear's torch.addmm(bias, A, W.t()) with a weight past the caches
    (WIDE_GEMM_WEIGHT) at each of WIDE_GEMM_ROWS rows: a line through them prices a GEMM deeper and wider than the
    grid (core.model.costmodel._wide_gemm_seconds)."""
    inner, columns = WIDE_GEMM_WEIGHT
    bare = _bare_op_seconds(device, effort)
    weight, bias = torch.randn(columns, inner, device=device).t(), torch.randn(columns, device=device)
    found = {}
    for rows in WIDE_GEMM_ROWS:
        a = torch.randn(rows, inner, device=device)
        found[f"{rows}x{inner}x{columns}"] = _beyond(_seconds(lambda: torch.addmm(bias, a, weight), device,
                                                              _brief(effort)), bare)
    return {"wide_gemm_seconds": found}


def flash_attention_costs(device: str, effort: Effort) -> dict:
    """Seconds per block beyond its dispatch of torch's CPU flash attention and of its backward, for every block
    shape of the effort's grid: a call of one batch whose query splits into blocks of that many rows, against that
    many keys, over enough heads for ATTENTION_BLOCKS_PER_THREAD blocks a thread."""
    brief, (forward, backward) = _brief(effort), ({}, {})
    for rows, columns, head in itertools.product(*effort.attention_grid):
        length = cpu_attention.query_length_for(rows)
        heads = math.ceil(ATTENTION_BLOCKS_PER_THREAD * torch.get_num_threads() * rows / length)
        query = torch.randn(1, heads, length, head, device=device)
        key, value = (torch.randn(1, heads, columns, head, device=device) for _ in range(2))
        out, logsumexp = cpu_attention.FORWARD(query, key, value)
        grad = torch.randn_like(out)
        blocks, shape = heads * length // rows, f"{rows}x{columns}x{head}"
        forward[shape] = _work_seconds(lambda: cpu_attention.FORWARD(query, key, value), device, brief) / blocks
        backward[shape] = _work_seconds(lambda: cpu_attention.BACKWARD(
            grad, query, key, value, out, logsumexp, 0.0, False), device, brief) / blocks
    return {"flash_attention_seconds": forward, "flash_attention_backward_seconds": backward}


def lstm_layer_rates(device: str, effort: Effort) -> dict:
    """oneDNN's fused LSTM layer (aten.mkldnn_rnn_layer, what nn.LSTM runs on a CPU with oneDNN:
    core.measure.kernels.cpu_rnn) and its backward, for each (batch, width) of the effort's over LSTM_STEPS steps, its
    inputs as wide as its hidden state: the GEMM FLOPs of cpu_rnn's formulas per second of work, keyed by the layer's
    GEMM FLOPs per step. oneDNN runs its own GEMMs step by step, at a rate of their own (on the AMD EPYC VM half what
    ATen's GEMMs of the same shapes reach, or less). Empty where torch runs no LSTM through oneDNN: there is no such
    layer to price."""
    brief, forward, backward = _brief(effort), {}, {}
    for batch, width in effort.lstm_shapes if cpu_rnn.runs_lstm() else ():
        x = torch.randn(LSTM_STEPS, batch, width, device=device, requires_grad=True)
        weights = [p.detach().to(device).requires_grad_() for p in torch.nn.LSTM(width, width).parameters()]
        state = torch.zeros(batch, width, device=device)

        def layer(train: bool):
            return aten.mkldnn_rnn_layer(x, *weights, state, state, False, [], cpu_rnn.ONEDNN_LSTM_KIND, width, 1, True,
                                         False, False, train)[0]
        flops = cpu_rnn.forward_flops(x, *weights[:2])
        key = str(flops // LSTM_STEPS)
        with torch.no_grad():
            forward[key] = flops / _work_seconds(lambda: layer(False), device, brief)
        out = layer(True)
        grad = torch.randn_like(out)
        backward[key] = 2 * flops / _work_seconds(lambda: torch.autograd.grad(out, [x, *weights], grad,
                                                                              retain_graph=True), device, brief)
    return {"lstm_layer_flops": forward, "lstm_layer_backward_flops": backward}


def _brief(effort: Effort) -> Effort:
    """The effort of a grid's timings: fewer and shorter blocks than a lone probe's (its passes' median steadies
    them)."""
    return replace(effort, repeats=GEMM_REPEATS, block_seconds=effort.block_seconds * GEMM_BLOCK_SHARE)


def _conv_positions(effort: Effort) -> dict[int, list[tuple[int, ...]]]:
    """The inputs (batch, then length or height and width) a convolution probe is timed on, by the input's rank."""
    return {3: [SHORT_CONV_INPUTS[3], *((CONV_BATCH, length) for length in effort.conv1d_lengths)],
            4: [SHORT_CONV_INPUTS[4], *((CONV_BATCH, side, side) for side in effort.conv2d_sides)]}


def conv_rate(device: str, effort: Effort) -> dict:
    positions = _conv_positions(effort)
    return {field: _conv_rates(profiles.conv_probe(field, device), positions[rank], device, effort)
            for field, rank in (("conv1d_flops", 3), ("conv2d_flops", 4))}


def one_channel_conv_rate(device: str, effort: Effort) -> dict:
    rates = {}
    for rank, inputs in _conv_positions(effort).items():
        rates |= _conv_rates(conv_probes.one_channel(rank, device), inputs, device, effort)
    return {"conv_one_channel_flops": rates}


def conv_backward_share(device: str, effort: Effort) -> dict:
    """The backward's share of a training call of each convolution probe (16 channels and one), keyed by its input:
    1 less its forward's seconds (with autograd recording) over the whole call's."""
    layers = {rank: (profiles.conv_probe(field, device), conv_probes.one_channel(rank, device))
              for field, rank in (("conv1d_flops", 3), ("conv2d_flops", 4))}
    shares = {}
    for rank, inputs in _conv_positions(effort).items():
        for conv, (batch, *sizes) in itertools.product(layers[rank], inputs):
            shape = (batch, conv.in_channels, *sizes)
            x = torch.randn(shape, device=device, requires_grad=True)
            key = conv_probes.input_key(shape)
            forward = _work_seconds(lambda: conv(x), device, effort)
            whole = TRAINING_CALLS.get((device, key)) or _training_seconds(conv, x, device, effort)
            shares[key] = _held(device, "conv_backward_share", 1 - forward / whole, 0.0, MAX_BACKWARD_SHARE, key=key,
                                why="between 0 and MAX_BACKWARD_SHARE: a forward is never free")
    return {"conv_backward_share": shares}


def _conv_rates(conv: torch.nn.Module, inputs: list[tuple[int, ...]], device: str, effort: Effort) -> dict[str, float]:
    """A convolution's training rate (FLOP/s of a forward and backward) on each input, keyed by the input's shape
    ('8x16x256'): its backward is slower per FLOP than its forward, and small ones far below the large ones' rate,
    so the rate a training step sees is measured whole. Each call's seconds are kept for the pass (TRAINING_CALLS:
    the backward's share divides by them)."""
    rates = {}
    for batch, *sizes in inputs:
        shape = (batch, conv.in_channels, *sizes)
        x = torch.randn(shape, device=device, requires_grad=True)
        with FlopCounterMode(display=False) as counter:
            conv(x).sum().backward()
        rates[conv_probes.input_key(shape)] = counter.get_total_flops() / _training_seconds(conv, x, device, effort)
    return rates


def _training_seconds(conv: torch.nn.Module, x: torch.Tensor, device: str, effort: Effort) -> float:
    """The work seconds of one training call (forward and backward) of `conv` on `x`, kept for the pass."""
    seconds = _work_seconds(lambda: conv(x).sum().backward(), device, effort)
    TRAINING_CALLS[(device, conv_probes.input_key(x.shape))] = seconds
    return seconds


def elementwise_rate(device: str, effort: Effort) -> dict:
    largest = effort.large_bytes[devices.kind(device)] // FLOAT_BYTES
    rates = {}
    for elements in (*(n for n in SMALL_ELEMENTWISE if n < largest), largest):
        a, b = (torch.rand(elements, device=device) for _ in range(2))
        rates[str(elements)] = elements / _work_seconds(lambda: torch.add(a, b), device, effort)
    return {"elementwise_rate": rates, "elementwise_flops": rates[str(largest)]}  # one FLOP per output element


def listed_op_costs(device: str, effort: Effort) -> dict:
    """Each of core.calibration.op_probes' operations as a line through its two sizes: a fixed part per call and seconds
    per element written (the census's count), both at least 0."""
    calls, elements, brief = {}, {}, _brief(effort)
    for name, build in op_probes.PROBES.items():
        (few, few_s), (many, many_s) = (_elements_and_seconds(build(rows), device, brief, (name, rows))
                                        for rows in LISTED_OP_ROWS)
        elements[name] = _held(device, "op_element_seconds", (many_s - few_s) / (many - few), 0.0, key=name,
                               why="at least 0")
        calls[name] = _held(device, "op_call_seconds", few_s - few * elements[name], 0.0, key=name, why="at least 0")
    return {"op_call_seconds": calls, "op_element_seconds": elements,
            "sort_row_element_seconds": sort_row_costs(device, effort)}


def sort_row_costs(device: str, effort: Effort) -> dict:
    """Seconds per element written (values and indices) of aten.sort along rows of each of SORT_ROWS' lengths
    (size: the row's length), over SORT_ELEMENTS input elements (its fixed part included): a row's sort costs more per
    element the longer it is, where the listed operations' probe sorts rows of op_probes.FEATURES."""
    costs = {}
    for length in SORT_ROWS:
        x = torch.randn(SORT_ELEMENTS // length, length)
        # keyed apart from the listed operations' sort, whose rows (LISTED_OP_ROWS) share a number with a length
        elements, seconds = _elements_and_seconds(lambda: torch.ops.aten.sort(x, -1), device, effort,
                                                  ("sort_row", length))
        costs[str(length)] = seconds / elements
    return costs


def _elements_and_seconds(fn: Callable[[], object], device: str, effort: Effort, key: tuple) -> tuple[float, float]:
    """The elements a call of `fn` writes and its work seconds; its census is taken in the first pass only (COUNTED,
    by `key`): a probe's operations are the same in every pass."""
    if (device, *key) not in COUNTED:
        COUNTED[(device, *key)] = _counted(fn, device)
    counted = COUNTED[(device, *key)]
    return counted["flops"], _work_seconds(fn, device, effort, counted)


def _counted(fn: Callable[[], object], device: str) -> dict:
    """The census summary of a call of `fn` after a first one (whatever that first call sets up is not counted)."""
    fn()
    return census.of(fn, device).summary(heap=False)


def memory_bandwidth(device: str, effort: Effort) -> dict:
    """Bytes read and written per second by a copy of MEMORY_BYTES, whatever the effort: a quick calibration's large
    tensors fit a cache, whose bandwidth the cost model would take for memory's."""
    elements = MEMORY_BYTES[devices.kind(device)] // FLOAT_BYTES
    src, dst = torch.rand(elements, device=device), torch.empty(elements, device=device)
    seconds = _seconds(lambda: dst.copy_(src), device, effort)
    return {"memory_bandwidth": 2 * elements * FLOAT_BYTES / seconds}  # read once, written once


# GPU probes (each cuda:N).

def launch_and_sync(device: str, effort: Effort) -> dict:
    a, b, out = (torch.ones(1, device=device) for _ in range(3))

    def launch():
        torch.add(a, b, out=out)

    def launch_fresh():  # as a model's ops launch: into a new tensor, the caching allocator's call included
        return a + b

    def launch_and_wait():
        launch()
        devices.synchronize(device)

    def queue():
        for _ in range(effort.queued_kernels):
            launch()

    def enqueue():  # a kernel C++ launches with no operator's dispatch: the spin kernel, spinning for no cycles
        for _ in range(effort.queued_kernels):
            torch.cuda._sleep(0)

    kernel = [devices.queued_seconds(device, queue, effort.queued_kernels).device for _ in range(effort.repeats)]
    enqueued = [devices.queued_seconds(device, enqueue, effort.queued_kernels).host for _ in range(effort.repeats)]
    return {"launch_overhead": _seconds(launch_fresh, device, effort, sync=_host_only),
            "shortest_kernel": min(kernel),
            "kernel_enqueue": min(enqueued),
            "sync_round_trip": _seconds(launch_and_wait, device, effort)}


def copies(device: str, effort: Effort) -> dict:
    measured = {}
    large_elements = effort.large_bytes["cuda"] // FLOAT_BYTES
    for direction in ("h2d", "d2h"):
        for memory in ("pageable", "pinned"):
            small = _copy_seconds(device, effort, SMALL_COPY_ELEMENTS, direction, memory == "pinned")
            large = _copy_seconds(device, effort, large_elements, direction, memory == "pinned")
            measured[f"{direction}_latency_{memory}"] = small
            measured[f"{direction}_bandwidth_{memory}"] = large_elements * FLOAT_BYTES / large
    return measured


def _copy_seconds(device: str, effort: Effort, elements: int, direction: str, pinned: bool) -> float:
    """Seconds per copy of `elements` floats between host and device, each copy waited for."""
    host, gpu = torch.empty(elements), torch.empty(elements, device=device)
    if pinned:
        host = host.pin_memory()
    src, dst = (host, gpu) if direction == "h2d" else (gpu, host)

    def copy():
        dst.copy_(src, non_blocking=pinned)
        devices.synchronize(device)
    return _seconds(copy, device, effort)


def graph_replay(device: str, effort: Effort) -> dict:
    x = torch.zeros(1, device=device)

    def step():
        for _ in range(effort.graph_nodes):
            x.add_(1.0)
    replay, one_node = graphs.capture(step, device, [x]), graphs.capture(lambda: x.add_(1.0), device, [x])

    def replays():
        for _ in range(QUEUED_REPLAYS):
            one_node()
    fixed = [devices.queued_seconds(device, replays, QUEUED_REPLAYS).host for _ in range(effort.repeats)]
    return {"graph_replay_per_node": _seconds(replay, device, effort) / effort.graph_nodes,
            "graph_replay_fixed": min(fixed)}


def training_op_overhead(device: str, effort: Effort) -> dict:
    """The host's cost of each recording operation Python issues in a training step on the GPU: the op-overhead
    probes' training step run there, priced by the cost model at the figures of the pass going on (PASS: the host's
    and this GPU's), solved for the figure (training_figure)."""
    if "op_overhead_autograd" not in PASS.get("cpu", {}) or "launch_overhead" not in PASS.get(device, {}):
        raise RuntimeError(f"{device}: the training step is priced at the host's and the GPU's launch figures of the "
                           f"same pass: calibrate the CPU and this GPU's launches first")
    step = _training_step(device)
    found = _counted(step, device)
    seconds = min(timing.micro(step, device, repeats=3 * effort.repeats, block_seconds=3 * effort.block_seconds).samples)
    launch = PASS[device]["launch_overhead"]
    return {costmodel.TRAINING_OP: _held(device, costmodel.TRAINING_OP, _training_line(seconds, found, PASS["cpu"],
                                                                                      PASS[device]), launch,
                                         why="at least a launch (launch_overhead)")}


def training_figure(seconds: float, found: dict, host: dict, gpu: dict) -> float:
    """The training_op_overhead at which the cost model prices the host's side of a step (its census `found`) at
    `seconds` (the step's time: its kernels are tiny, so the host's side is what it waits for), at least a launch
    (launch_overhead): from there each recording operation Python issues costs the
    figure alone (its launch inside it), so the host's side grows by the recording calls for each second of it."""
    return max(_training_line(seconds, found, host, gpu), gpu["launch_overhead"])


def _training_line(seconds: float, found: dict, host: dict, gpu: dict) -> float:
    """training_figure before it is held at a launch: below one where the step took less than it is priced at then."""
    recording = costmodel.recording_calls(found)
    if not recording:
        raise ValueError("the training step's census has no recording operation on the GPU to price")
    launch = gpu["launch_overhead"]
    at_launch = costmodel.host_seconds(found, hardware.calibrating(host, gpu | {costmodel.TRAINING_OP: launch}))
    return launch + (seconds - at_launch) / recording


@dataclass(frozen=True)
class Probe:
    title: str
    kinds: tuple[str, ...]
    measure: Callable[[str, Effort], dict]


PROBES = (
    Probe("op and Python overhead", profiles.HOST, op_overhead),
    Probe("DataLoader", profiles.HOST, loader_cost),
    Probe("matmul", profiles.EVERY, matmul_rate),
    Probe("convolutions", profiles.EVERY, conv_rate),
    Probe("one-channel convolutions", profiles.HOST, one_channel_conv_rate),
    Probe("convolutions' backward", profiles.HOST, conv_backward_share),
    Probe("elementwise", profiles.EVERY, elementwise_rate),
    Probe("listed operations", profiles.HOST, listed_op_costs),
    Probe("narrow GEMMs", profiles.HOST, narrow_gemm_cost),
    Probe("GEMM shapes", profiles.HOST, gemm_costs),
    Probe("wide GEMMs", profiles.HOST, wide_gemm_costs),
    Probe("flash attention", profiles.HOST, flash_attention_costs),
    Probe("fused LSTM layer", profiles.HOST, lstm_layer_rates),
    Probe("memory bandwidth", profiles.EVERY, memory_bandwidth),
    Probe("launch and sync", profiles.GPU, launch_and_sync),
    Probe("copies", profiles.GPU, copies),
    Probe("CUDA graph", profiles.GPU, graph_replay),
    Probe("training step", profiles.GPU, training_op_overhead),  # last: it prices the step at the pass's figures
)


def devices_to_calibrate(names: list[str] = None) -> list[str]:
    """The CPU (always: its host constants are paid by every run) and the named CUDA GPUs, or every one here."""
    if not names:
        return [d for d in devices.available() if devices.kind(d) in CALIBRATED_KINDS]
    for name in names:
        devices.check(name)
        if devices.kind(name) not in CALIBRATED_KINDS:
            raise devices.DeviceError(f"device: '{name}' cannot be calibrated; calibration measures cpu and cuda:N")
    return list(dict.fromkeys(["cpu", *names]))


def take(names: list[str] = None, quick: bool = False, progress: bool = True) -> dict:
    """Measure the devices (devices_to_calibrate's choice) into a profile, with a tqdm bar when `progress`."""
    names = devices_to_calibrate(names)
    effort = QUICK if quick else FULL
    taken = results.now()
    busy_before, own_before = _busy_cpu_seconds(), _own_cpu_seconds()
    steps = [(device, probe) for device in names for probe in PROBES if devices.kind(device) in probe.kinds]
    passes = [{device: {} for device in names} for _ in range(effort.passes)]
    made = {}  # (device, figure) -> the probe that measures it: what a figure measured again runs
    FLOORS.clear()
    COUNTED.clear()
    watch = timing.Stopwatch("cpu")
    watch.start()
    with tqdm(total=len(steps) * effort.passes, desc="calibrating", unit="probe", disable=not progress,
              file=sys.stderr) as bar:
        for number, measured in enumerate(passes, 1):
            BARE_OPS.clear()
            TRAINING_CALLS.clear()
            PASS.clear()
            PASS.update(measured)  # the same dicts the probes' figures are merged into
            for device, probe in steps:
                bar.set_postfix_str(f"pass {number}/{effort.passes}: {device} {probe.title}")
                found = _measure(probe, device, effort)
                made |= dict.fromkeys(((device, figure) for figure in found), probe)
                measured[device] |= found
                bar.update()
    PASS.clear()
    measured = {device: _medians([found[device] for found in passes]) for device in names}
    fp = devices.fingerprint()
    flags = [{"device": device} | flag for device in names for flag in sanity.check(
        measured[device], sanity.catalogue_entry(fp, device), functools.partial(_retake, device, effort, made, measured))]
    floors = sanity.floors(measured, FLOORS)
    FLOORS.clear()
    seconds = watch.lap("calibration")
    others = (_busy_cpu_seconds() - busy_before) - (_own_cpu_seconds() - own_before)
    return {"schema": profiles.SCHEMA_VERSION, "machine_id": fp["machine_id"], "fingerprint": fp,
            "code_version": versions.code_version(), "taken": taken, "booted": devices.booted(), "seconds": seconds,
            "quick": quick,
            "load_per_core": max(others, 0.0) / (seconds * psutil.cpu_count()), "cpu": measured.pop("cpu"),
            "gpus": measured, "flags": flags, "floors": floors}


def _retake(device: str, effort: Effort, made: dict, measured: dict, figure: str, key: str | None) -> float:
    """One figure measured again, as cheaply as it can be (sanity.check): a layer's module call alone, any other
    figure by the probe that measures it."""
    if figure == "module_call_seconds":
        return module_cost(key, device, effort, measured[device]["module_call"])
    found = made[(device, figure)].measure(device, effort)[figure]
    return found if key is None else found[key]


def _busy_cpu_seconds() -> float:
    """The CPU seconds every logical core has spent busy (a VM's stolen time included: another guest's work)."""
    times = psutil.cpu_times()
    return sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))


def _own_cpu_seconds() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def _measure(probe: Probe, device: str, effort: Effort) -> dict:
    """A probe's figures, measured again (up to PROBE_RETRIES times) while any is outside its sane range: a stall
    of a busy machine, not its speed. What is still out of range after that is left for profiles.save to refuse."""
    found = probe.measure(device, effort)
    for _ in range(PROBE_RETRIES):
        if not profiles.out_of_range(found):
            break
        time.sleep(RETRY_PAUSE_S)
        found = probe.measure(device, effort)
    return found


def _medians(passes: list[dict]) -> dict:
    """Each figure's median over the passes; a sized figure's per size."""
    return {field: (_medians([found[field] for found in passes]) if isinstance(value, dict)
                    else statistics.median(found[field] for found in passes))
            for field, value in passes[0].items()}


def report(profile: dict) -> str:
    """The profile as an aligned text table in display units."""
    table = [(r["device"], r["field"] + (f" @ {r['size']}" if r["size"] else ""), r["value"], r["unit"],
              r["what it is"]) for r in profiles.rows(profile) if r["field"] not in GRIDS]
    table += [("cpu", f"{field} @ {len(grid)} shapes", *profiles.human_range(grid.values(), profiles.FIELD[field].unit),
               what) for field, what in GRIDS.items() if (grid := profile["cpu"].get(field))]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = [f"{device:<{widths[0]}}  {field:<{widths[1]}}  {value:>{widths[2]}} {unit:<{widths[3]}}  {what}"
             for device, field, value, unit, what in table]
    busy = profiles.busy_note(profile)
    return "\n".join(lines + profiles.check_notes(profile) + ([f"note: {busy}"] if busy else []))
