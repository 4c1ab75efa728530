"""The census of one unit: every ATen operation a unit performs, counted under a `TorchDispatchMode`,
with the FLOP formulas of `torch.utils.flop_counter` where it has one. The counts are what the unit
would do on an accelerator: on the CPU every operation that does work counts as the kernel it would
launch and every data-dependent read as the synchronisation it would force.

The rules, per operation (an `OpKind` holds what its schema and tags say):
- kernel: an operation launches one unless it only makes a view or an alias (`is_view`, the
  `inplace_view` tag), allocates without writing (`empty*`), reads a scalar to the host
  (`_local_scalar_dense`, a copy rather than a kernel), returns no tensor and writes none (metadata), or
  copies between devices (a copy, counted apart). A `_foreach_` operation (`_foreach_add_`, and
  `_fused_adam_`, which write their tensor lists and return nothing) counts as one kernel; cuDNN's recurrent
  layers (`_cudnn_rnn` and its backward, which the stand-in runs for nn.GRU, nn.LSTM and nn.RNN:
  core.measure.kernels.cuda_rnn) as the kernels cuDNN and torch's wrapper launch per call, and their FLOPs are their
  GEMMs'; a fused GRU or LSTM cell's backward as its kernel and a reduction per bias; on CUDA (and the stand-in playing
  it) a GEMM as the one or two kernels cuBLAS launches for its shapes (and a bias copy cuBLASLt's epilogue cannot take),
  a convolution and its backward as cuDNN's kernels with the bias's add or sum and their NHWC transposes, and the
  losses and gradients that fill or reduce inside their kernel as two (core.measure.kernels.cuda_ops, from an H200's
  profiles); oneDNN's fused LSTM layer on a CPU
  (`mkldnn_rnn_layer` and its backward: core.measure.kernels.cpu_rnn) has its GEMMs' FLOPs, and a CPU's flash attention
  (core.measure.kernels.cpu_attention) SDPA's.
- where: an operation counts as a kernel or a sync only when its tensors live on the unit's device. A GPU
  unit's operations on CPU tensors are host work; meta tensors inside a CPU or GPU unit are shape
  inference (forward-mode AD's reference decompositions run on them); both still count as operations.
- synchronisation: reading a value to the host (`.item()`, `bool()`, `equal`: the `data_dependent_output`
  tag), an output whose size depends on the data (the `dynamic_output_shape` tag: `nonzero`,
  `masked_select`, `unique`; indexing only with a boolean mask), and a copy that waits for the device
  (PyTorch's blocking copies synchronise the stream both ways; a non-blocking copy to pageable host
  memory still waits). Printing a tensor disables dispatch modes, so it is not seen.
- FLOPs: the library's formula (matrix products, convolutions, attention; multiplications and additions,
  bias terms not counted) where it has one, else one per element written; none for operations that
  launch no kernel.
- bytes: read, the tensor inputs (a broadcast dimension once; not the arguments an operation only
  overwrites, nor the inputs of `*_like`/`new_*` factories, which give only a shape); written, the
  mutated arguments of an in-place or `out=` operation, else the outputs. Only kernels move bytes;
  copies between devices are counted as copies.

The meta device stands in for an accelerator: with a unit's tensors on `meta` nothing is computed, and
the operations that need data are answered as if every meta tensor held zeros (`.item()` is 0, a copy
to the CPU is zeros, `nonzero` finds nothing), so the unit runs on and its syncs and copies are counted.

Counts are aggregated as they come, per (operation, where, input shapes, dtypes, event, autograd, phase, nested,
transformed);
`Census` is also the `timing.Listener` that decides which operations belong to a sample.

The detail a cost model needs (`Census.summary()`'s "ops", "stretches", "loader", "graph_replays", and
"heap_objects": the objects the garbage collector tracks in the process, which a full collection walks):
- kernels: an entry of "ops" whose calls launch more than one kernel each says how many (`kernels`, per call).
- autograd: grad mode is on and an input requires grad when the operation is called (autograd records it).
- phase, from the `record_function` ranges the mode sees as `profiler._record_function_enter_new` and
  `_record_function_exit` operations (matched by their handle; ranges nest): inside a DataLoader's
  `__next__` range "loading", inside `graphs.REPLAY_RANGE` "graph", inside an optimiser's step range
  (`Optimizer.step#Adam.step`, which torch.optim opens around every step) "optimizer", else "step"; a
  range inside a loading or graph one keeps its phase (a step replayed as a graph runs no Python). A
  `__next__` range in
  which the default collate stacked samples (`aten.stack`) is one loader batch of as many samples as the
  largest list stacked; the `__next__` that ends the iteration stacks nothing, and a loader whose workers
  collate (num_workers > 0) does its loading in other processes, unseen.
- nested: C++ issued the operation without a call from Python in between (the parts of a composite such as
  F.linear's addmm after its t, an RNN's loop over its steps, the backward pass the engine runs); an operation is
  Python's when a call from Python into PyTorch came after the operation before it (a torch function, a Tensor
  method or operator, or any call into C, as torch.func's Python decompositions make). The Python PyTorch runs
  on its way into a dispatch mode is not such a call (DISPATCH_PATH).
- transformed: a torch.func transform (vmap, jvp, grad, jacfwd, jacrev) was active at the last call from Python:
  functorch's interpreter handles each of its operations, whoever issued it.
- Python the operations do not show: each stretch counts the optimiser steps begun in phase "step" and
  the module calls (`nn.Module.__call__`, seen by a global forward pre-hook while the census is active)
  made in phase "step", per module class (`Linear`, `ReLU`, ...); `model.forward(x)` is no module call, the
  submodules it calls are.
- stretches: a sample's operations in order (those of the laps it names, in the order they ran), cut after
  every call that synchronises; identical stretches are kept once with how often they occur."""
import contextlib
import functools
import gc
import inspect
import os
import sys
import types
from dataclasses import dataclass
from typing import Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils import flop_counter
from torch.utils.flop_counter import flop_registry

from core.measure import graphs, timing
from core.measure.kernels import cpu_attention, cpu_rnn, cuda_ops, cuda_rnn

aten = torch.ops.aten
RANGE_ENTER = torch.ops.profiler._record_function_enter_new
RANGE_EXIT = torch.ops.profiler._record_function_exit

FLOP_RULE = ("FLOPs from torch.utils.flop_counter's formulas for matrix products, convolutions and attention "
             "(formula_flops; a grouped convolution's weight gradient divided by its groups), one per element written "
             "for every other operation that launches a kernel, none for views, metadata and copies.")
TOP = 5  # operations listed in top_by_count and top_by_flops
SHOWN_INPUTS = 8  # input shapes and dtypes listed per entry of "ops" (a batch's stack has one input per sample)

IGNORED_NAMESPACES = ("profiler",)  # record_function markers, not operations
# Operations that return tensors yet launch no kernel: allocations, a reshape that is a view in all but its
# schema, pinning host memory, and the scalar read to the host (a copy and a sync, not a kernel); and those
# whose schema says they write a tensor they only annotate.
NO_KERNEL = {aten.empty, aten.empty_like, aten.empty_strided, aten.empty_permuted, aten.new_empty,
                 aten.new_empty_strided, aten._efficientzerotensor, aten.resize_, aten.resize_as_, aten.set_,
                 aten._pin_memory, aten._unsafe_view, aten._local_scalar_dense, aten.record_stream,
                 aten.set_data, aten.retain_grad}
OVERWRITES = {aten.copy_, aten.fill_, aten.zero_}  # in-place operations that do not read what they write
COPIES = {aten._to_copy, aten.copy_, aten._copy_from, aten._copy_from_and_resize, aten.lift_fresh}
H2D, D2H, D2D = "h2d", "d2h", "d2d"
SYNC = "sync"
FRESH, IN_PLACE = "fresh", "in place"
STEP, LOADING, GRAPH, OPTIMIZER = "step", "loading", "graph", "optimizer"  # phases
LOADER_RANGE = ("enumerate(DataLoader)#", ".__next__")  # a DataLoader iterator's __next__: its name's start, end
OPTIMIZER_RANGE = "Optimizer.step#"  # torch.optim's range around a step: its name's start


def _any_bool_index(args, kwargs) -> bool:
    indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
    return any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices)


def _no_output_size(args, kwargs) -> bool:
    return kwargs.get("output_size") is None


def _no_class_count(args, kwargs) -> bool:
    return (args[1] if len(args) > 1 else kwargs.get("num_classes", -1)) == -1


def _always(args, kwargs) -> bool:
    return True


# Operations tagged dynamic_output_shape that synchronise only in some calls, and untagged ones that may.
SYNCS_WHEN = {aten.index: _any_bool_index, aten.index_put: _any_bool_index, aten.index_put_: _any_bool_index,
              aten._index_put_impl_: _any_bool_index, aten.repeat_interleave: _no_output_size,
              aten.one_hot: _no_class_count}


@dataclass(frozen=True, eq=False)
class OpKind:
    """What an ATen overload's schema and tags say about it, worked out once per overload."""
    name: str                    # the overload packet: "aten.mm"
    launches: bool               # does device work when it is not a copy between devices
    formula: Callable | None     # torch.utils.flop_counter's formula
    written: tuple[tuple[int, str], ...]  # (position, name) of the arguments it mutates
    outs: tuple[str, ...]        # out= arguments: written, never read
    reads_written: bool          # an in-place operation reads what it mutates (add_ does, fill_ does not)
    reads_inputs: bool           # False for factories whose tensor argument gives only a shape
    syncs: Callable | None       # (args, kwargs) -> whether this call reads data to the host
    kernels: Callable | None     # (args, kwargs) -> the kernels one call launches, when not one (cuDNN's RNN)
    copies: bool                 # may copy between devices
    shaped: str | None           # on meta tensors its outputs follow from its arguments' metadata alone:
                                 # FRESH (new tensors) or IN_PLACE (the arguments it writes, or nothing)


@flop_counter.shape_wrapper
def conv_backward_flops(grad_out_shape, x_shape, w_shape, bias, stride, padding, dilation, transposed, output_padding,
                        groups, output_mask, out_shape=None, **kwargs) -> int:
    """torch.utils.flop_counter's formula for a convolution's backward, its weight gradient divided by the groups:
    that formula counts a grouped convolution's weight gradient as a dense one's (a depthwise convolution's over 32
    channels 32 times over); its input gradient it counts right."""
    dense = flop_counter.conv_backward_flop.__wrapped__
    fixed = (grad_out_shape, x_shape, w_shape, bias, stride, padding, dilation, transposed, output_padding, groups)
    inputs = dense(*fixed, [output_mask[0], False, False], out_shape)
    weights = dense(*fixed, [False, output_mask[1], False], out_shape)
    return inputs + weights // groups


FORMULAS = {aten.convolution_backward: conv_backward_flops}  # before torch.utils.flop_counter's own


@functools.cache
def op_kind(func) -> OpKind | None:
    """The kind of an OpOverload; None for what is not an operation (profiler markers). Worked out once a process: it
    reads only the overload and this module's tables, and a census of a few calls spent a tenth of its time here."""
    if func.namespace in IGNORED_NAMESPACES:
        return None
    packet = func._overloadpacket
    schema = func._schema
    returns_tensor = any("Tensor" in str(r.type) for r in schema.returns)
    data_read = torch.Tag.data_dependent_output in func.tags
    written = tuple((i, a.name) for i, a in enumerate(schema.arguments) if a.alias_info and a.alias_info.is_write)
    launches = not (func.is_view or torch.Tag.inplace_view in func.tags or packet in NO_KERNEL
                    or (not returns_tensor and not data_read and not written))
    syncs = SYNCS_WHEN.get(packet)
    if syncs is None and (data_read or torch.Tag.dynamic_output_shape in func.tags):
        syncs = _always
    short = packet.__name__
    outs = tuple(a.name for a in schema.arguments if a.is_out)
    formula = (FORMULAS.get(packet) or flop_registry.get(packet) or cuda_rnn.FORMULAS.get(packet)
               or cpu_rnn.FORMULAS.get(packet) or cpu_attention.FORMULAS.get(packet))
    return OpKind(name=str(packet), launches=launches, formula=formula, written=written,
                  outs=outs, reads_written=packet not in OVERWRITES and torch.Tag.nondeterministic_seeded not in func.tags,
                  reads_inputs=not (short.endswith("_like") or short.startswith("new_")),
                  syncs=syncs, kernels=cuda_rnn.KERNELS.get(packet) or cuda_ops.KERNELS.get(packet),
                  copies=packet in COPIES,
                  shaped=_shaped(func, schema, bool(launches and not syncs and not outs and packet not in COPIES)))


def _shaped(func, schema, plain: bool) -> str | None:
    """FRESH for an operation that returns only new tensors, IN_PLACE for one that returns only what it
    writes (or nothing), None for the rest (views, metadata changes, data-dependent outputs, copies)."""
    if not plain or func.is_view or not all("Tensor" in str(r.type) for r in schema.returns):
        return None
    if not schema.returns:
        return IN_PLACE  # it launches, so it writes its arguments
    aliases = [r.alias_info for r in schema.returns]
    if not any(aliases):
        return FRESH
    return IN_PLACE if all(a is not None and a.is_write for a in aliases) else None


def _tensors(values) -> list[torch.Tensor]:
    """The tensors among values, lists of tensors flattened one level."""
    found = []
    for v in values:
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(t for t in v if isinstance(t, torch.Tensor))
    return found


def _shapes(value):
    """`value` with each tensor in it (in lists and tuples too) replaced by its shape, marked as a tensor's."""
    if isinstance(value, torch.Tensor):
        return torch.Tensor, tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return tuple(_shapes(v) for v in value)
    return value


def _argument(args, kwargs, position: int, name: str):
    return args[position] if position < len(args) else kwargs.get(name)


def read_bytes(t: torch.Tensor) -> int:
    """The bytes a kernel reads of a tensor: each element of its storage it spans once, so a broadcast
    (stride 0) dimension counts once."""
    elements = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride or size == 0:
            elements *= size
    return elements * t.element_size()


def _written_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


# -- the meta device as a stand-in accelerator: its tensors read as zeros --------------------------------
NOT_ANSWERED = object()


def _zero_scalar(dtype: torch.dtype):
    if dtype == torch.bool:
        return False
    if dtype.is_complex:
        return 0j
    return 0.0 if dtype.is_floating_point else 0


def _answer_meta(func, args, kwargs):
    """What an operation that needs a meta tensor's data returns, or NOT_ANSWERED to run it as it is."""
    packet = func._overloadpacket
    if packet is aten._local_scalar_dense and args[0].is_meta:
        return _zero_scalar(args[0].dtype)
    if packet is aten._to_copy and args[0].is_meta and torch.device(kwargs.get("device") or "meta").type != "meta":
        return torch.zeros(args[0].shape, dtype=kwargs.get("dtype") or args[0].dtype, device=kwargs["device"])
    if packet is aten.copy_ and args[1].is_meta and not args[0].is_meta:
        return args[0].zero_()
    if packet is aten.nonzero and args[0].is_meta:
        return torch.empty((0, args[0].dim()), dtype=torch.long, device="meta")
    return NOT_ANSWERED


# Meta kernels work out an output's metadata in Python, hundreds of microseconds an operation: an operation
# whose outputs follow from its arguments' metadata alone is worked out once per (overload, arguments'
# metadata); later calls get new empty tensors shaped alike, or the argument they write.
META_SHAPES_LIMIT = 100_000  # entries kept before the cache starts again
_meta_shapes: dict[tuple, object] = {}
NO_KEY = object()  # an argument or output the cache cannot describe
RETURNS_FIRST, RETURNS_NONE = object(), object()  # what an in-place operation returns


def _meta_value(value, in_place: bool):
    """What of an argument decides a meta operation's outputs, or NO_KEY when it cannot be told."""
    if isinstance(value, torch.Tensor):
        if not value.is_meta or value.layout != torch.strided or value.is_conj() or value.is_neg():
            return NO_KEY
        return value.shape, value.stride(), value.dtype
    if isinstance(value, (list, tuple)):
        described = []
        for item in value:
            described.append(_meta_value(item, in_place))
            if described[-1] is NO_KEY:
                return NO_KEY
        return tuple(described)
    if isinstance(value, (float, complex)):  # a value scales data, never shapes; an in-place result is its argument
        return type(value) if in_place else (type(value), value)
    if value is None or isinstance(value, (bool, int, str, torch.dtype, torch.device, torch.layout,
                                           torch.memory_format)):
        return type(value), value
    return NO_KEY


def _shape_of(out):
    """An output's sizes, strides and dtype (nested like the output), or NO_KEY."""
    if out is None:
        return None
    if isinstance(out, torch.Tensor):
        return (out.shape, out.stride(), out.dtype) if out.is_meta and out.layout == torch.strided else NO_KEY
    if isinstance(out, (list, tuple)):
        shapes = tuple(_shape_of(t) for t in out)
        return NO_KEY if any(s is NO_KEY for s in shapes) else (type(out), shapes)
    return NO_KEY


def _like(shape):
    if shape is None:
        return None
    if isinstance(shape[0], type):  # (list or tuple, the shapes of its items)
        return shape[0](_like(s) for s in shape[1])
    size, stride, dtype = shape
    return torch.empty_strided(size, stride, dtype=dtype, device="meta")


def _remembered(kind: OpKind, args, out):
    if kind.shaped is IN_PLACE:
        return RETURNS_FIRST if args and out is args[0] else RETURNS_NONE if out is None else NO_KEY
    return RETURNS_NONE if out is None else _shape_of(out)


def _run_meta(func, kind: OpKind, args, kwargs):
    """Run an operation on meta tensors, its outputs from the cache where it can."""
    described = _meta_value((args, tuple(kwargs.items())), kind.shaped is IN_PLACE)
    if described is NO_KEY:
        return func(*args, **kwargs)
    key = (func, described, torch.get_default_dtype())  # a factory given no dtype makes the default one
    known = _meta_shapes.get(key)
    if known is None:
        out = func(*args, **kwargs)
        if len(_meta_shapes) >= META_SHAPES_LIMIT:
            _meta_shapes.clear()
        _meta_shapes[key] = _remembered(kind, args, out)
        return out
    if known is NO_KEY:
        return func(*args, **kwargs)
    if known is RETURNS_FIRST:
        return args[0]
    return None if known is RETURNS_NONE else _like(known)


def _copy(kind: OpKind, args, kwargs, out) -> tuple[tuple, int] | None:
    """((direction, host memory pinned, synchronises), bytes) of a copy between devices; None for any
    other call."""
    if kind.name == "aten.lift_fresh":  # torch.tensor(data, device=d): filled from pageable host memory
        return ((H2D, False, True), _written_bytes((out,))) if out.device.type != "cpu" else None
    if kind.name == "aten._to_copy":
        source, destination, non_blocking = args[0], out, kwargs.get("non_blocking", False)
    elif kind.name == "aten.copy_":
        source, destination, non_blocking = args[1], args[0], _argument(args, kwargs, 2, "non_blocking")
    else:  # _copy_from(self, dst, non_blocking), _copy_from_and_resize(self, dst)
        source, destination, non_blocking = args[0], args[1], _argument(args, kwargs, 2, "non_blocking")
    if source.device == destination.device:
        return None
    nbytes = _written_bytes((source,))
    # The code copies non-blocking between the host and the stand-in only where it would pin the host side
    # (devices.pin), which a build without CUDA cannot do: such a copy counts as pinned.
    stand_in_pinned = bool(non_blocking) and (source.is_meta or destination.is_meta)
    if source.device.type == "cpu":
        return (H2D, stand_in_pinned or source.is_pinned(), not non_blocking), nbytes
    if destination.device.type == "cpu":
        pinned = stand_in_pinned or destination.is_pinned()
        return (D2H, pinned, not (non_blocking and pinned)), nbytes
    return (D2D, False, False), nbytes


class _Stretch:
    """Operations run one after another with no synchronisation between them: the calls per operation id,
    and the loader batches (with their samples), graph replays, module calls (per module class) and optimiser
    steps among them. `sync`: its last call waits for the device."""
    __slots__ = ("calls", "batches", "samples", "replays", "modules", "steps", "sync")

    def __init__(self):
        self.calls: dict[int, int] = {}
        self.modules: dict[str, int] = {}
        self.batches = self.samples = self.replays = self.steps = 0
        self.sync = False

    def extend(self, other: "_Stretch") -> None:
        for ident, calls in other.calls.items():
            self.calls[ident] = self.calls.get(ident, 0) + calls
        self.batches += other.batches
        self.samples += other.samples
        self.replays += other.replays
        for name, calls in other.modules.items():
            self.modules[name] = self.modules.get(name, 0) + calls
        self.steps += other.steps

    def empty(self) -> bool:
        return not (self.calls or self.batches or self.replays or self.modules or self.steps)

    def key(self, sync: bool) -> tuple:
        """What makes two stretches the same."""
        return (tuple(sorted(self.calls.items())), sync, self.batches, self.samples, self.replays,
                tuple(sorted(self.modules.items())), self.steps)


# Python that PyTorch runs on the way into a Python dispatch mode (for every operation, and the first time an
# operation meets one) and imports it makes then: its calls into C++ issue no operation
DISPATCH_PATH = tuple(os.path.join("torch", *p.split("/")) for p in (
    "_library/", "_compile.py", "_dynamo/eval_frame.py", "utils/_python_dispatch.py")) + ("<frozen importlib",)


C_FUNCTIONS = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
               types.MethodWrapperType, types.GetSetDescriptorType)


class _PythonCalls(TorchFunctionMode):
    """Marks where Python calls into PyTorch: the first operation after such a call is `fresh`; the rest until the
    next were issued by C++ itself (a composite's parts, an RNN's loop over its steps). A call is a torch function
    (a torch.* function, a Tensor method or operator: the mode sees those Python makes) or, inside one, any call
    from Python into C (a `c_call` profile event: the torch calls of a torch function's own Python, such as an
    F.* function's body or torch.func's decompositions, which the mode does not see), outside DISPATCH_PATH (the
    census's own Python, inside its dispatch, runs with no profile function: see Census.__torch_dispatch__).
    The profile function is set only inside a torch function: Python elsewhere (a DataLoader's, a model's) runs at
    its own speed. `transformed`: a torch.func transform was active at the last call."""
    def __init__(self):
        super().__init__()
        self.fresh, self.transformed = True, False
        # code object -> whether it is on DISPATCH_PATH; the census's dispatch setting the profile function aside
        # makes two calls into C itself
        self._on_path: dict = {inspect.unwrap(Census.__torch_dispatch__).__code__: True}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self._called()
        if isinstance(func, C_FUNCTIONS):  # no Python of its own
            return func(*args, **(kwargs or {}))
        before = sys.getprofile()
        sys.setprofile(self._event)
        try:
            return func(*args, **(kwargs or {}))
        finally:
            sys.setprofile(before)

    def _event(self, frame, event, arg) -> None:
        if event != "c_call":
            return
        code = frame.f_code
        on_path = self._on_path.get(code)
        if on_path is None:
            on_path = self._on_path[code] = any(part in code.co_filename for part in DISPATCH_PATH)
        if not on_path:
            self._called()

    def _called(self) -> None:
        self.fresh = True
        self.transformed = torch._C._are_functorch_transforms_active()


_warm = False


def _warm_up() -> None:
    """The first operation a Python dispatch mode meets in a process imports what that path needs; an import's
    Python would read as calls between the parts of the first composite a census counts. One census of an add
    first, once per process."""
    global _warm
    if not _warm:
        _warm = True  # first: the census below enters here again
        with Census("cpu"):
            torch.ones(1).add(1)


class Census(TorchDispatchMode):
    """Counts the operations run while it is active, and is the `timing.Listener` of the calls it watches:
    the operations of a lap (from `start` or the previous lap to `lap(name)`) count when the next sample
    names that lap; the rest (before the first `start`, laps no sample names) do not. `device` is the
    device the unit runs on ('cpu', 'cuda:0', 'meta'): only operations there count as kernels and syncs."""

    def __init__(self, device: str = "cpu"):
        super().__init__()
        try:
            self._device_type = torch.device(device).type
        except (RuntimeError, TypeError):
            raise ValueError(f"device: {device!r} is not a torch device name (such as 'cpu', 'cuda:0', "
                             f"'meta')") from None
        self.device = device
        self._stand_in = self._device_type == "meta"
        self.samples = 0
        # operation id -> [calls, flops, bytes read, bytes written, bytes copied], over the counted samples
        self.total: dict[int, list[int]] = {}
        self.stretches: dict[tuple, int] = {}  # a stretch's key -> occurrences in the counted samples
        # operation id -> (kind, where, shapes, dtypes, event, autograd, phase, nested, transformed)
        self._keys: list[tuple] = []
        self._ids: dict[tuple, int] = {}
        self._pending: list[tuple[str, dict, list[_Stretch]]] = []  # closed laps: name, counts, stretch pieces
        self._lap: dict[int, list[int]] | None = None
        self._pieces: list[_Stretch] = []
        self._piece = _Stretch()
        self._flops: dict[tuple, int] = {}  # a formula's count by its call's shapes and other arguments
        self._ranges: list[tuple[int, str, bool]] = []  # open ranges: handle, the phase outside, a loader batch
        self._phase = STEP
        self._batch: int | None = None  # the samples of the loader batch being fetched: the largest stack
        self._contexts = contextlib.ExitStack()  # the module hook, graphs.counted and the Python calls
        self._calls = _PythonCalls()

    def __enter__(self):
        _warm_up()
        with contextlib.ExitStack() as stack:
            stack.callback(torch.nn.modules.module.register_module_forward_pre_hook(self._module_called).remove)
            stack.enter_context(graphs.counted())  # a CUDA graph's replay dispatches nothing to count
            stack.enter_context(self._calls)
            super().__enter__()
            self._contexts = stack.pop_all()
        return self

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        self._contexts.__exit__(*exc)
        return out

    def _module_called(self, module, args) -> None:
        if self._lap is not None and self._phase is STEP:
            name = type(module).__name__
            self._piece.modules[name] = self._piece.modules.get(name, 0) + 1

    # -- the listener ----------------------------------------------------------------------------
    def start(self) -> None:
        self._lap, self._pieces, self._piece = {}, [], _Stretch()

    def lap(self, name: str) -> None:
        if self._lap is not None:
            self._pieces.append(self._piece)
            self._pending.append((name, self._lap, self._pieces))
        self.start()

    def sample(self, names: tuple[str, ...]) -> None:
        carry = _Stretch()  # a stretch goes on across the laps of the sample until a call synchronises
        for name, counts, pieces in self._pending:
            if name not in names:
                continue
            _merge(self.total, counts)
            for piece in pieces:
                carry.extend(piece)
                if piece.sync:
                    self._count_stretch(carry, True)
                    carry = _Stretch()
        if not carry.empty():
            self._count_stretch(carry, False)
        self._pending.clear()
        self.samples += 1

    def _count_stretch(self, stretch: _Stretch, sync: bool) -> None:
        key = stretch.key(sync)
        self.stretches[key] = self.stretches.get(key, 0) + 1

    # -- the dispatch mode -----------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # the census's own Python is no call into PyTorch, and a profile event for each of its calls would cost
        # more than the operation: its profile function is set aside while it runs (another's, a profiler's, stays)
        hook = sys.getprofile()
        own = hook == self._calls._event
        if own:
            sys.setprofile(None)
        try:
            return self._dispatch(func, args, kwargs or {})
        finally:
            if own:
                sys.setprofile(hook)

    def _dispatch(self, func, args, kwargs):
        kind = op_kind(func)
        out = _answer_meta(func, args, kwargs)
        if out is NOT_ANSWERED:
            out = (_run_meta(func, kind, args, kwargs) if self._stand_in and kind is not None and kind.shaped
                   else func(*args, **kwargs))
        if kind is None:
            self._range(func, args, out)
        elif self._lap is not None:
            self._record(kind, args, kwargs, out)
        return out

    def _range(self, func, args, out) -> None:
        """Follow the record_function ranges (counted or not, so that exits match): the phase of what runs
        inside, the loader batches and the graph replays."""
        packet = func._overloadpacket
        if packet is RANGE_ENTER:
            name = args[0]
            loader = name.startswith(LOADER_RANGE[0]) and name.endswith(LOADER_RANGE[1])
            self._ranges.append((hash(out), self._phase, loader))
            if loader:
                self._phase, self._batch = LOADING, 0
            elif name == graphs.REPLAY_RANGE:
                self._phase = GRAPH
                if self._lap is not None:
                    self._piece.replays += 1
            elif name.startswith(OPTIMIZER_RANGE) and self._phase is STEP:
                self._phase = OPTIMIZER
                if self._lap is not None:
                    self._piece.steps += 1
        elif packet is RANGE_EXIT:
            handle = hash(args[0])
            for depth in range(len(self._ranges) - 1, -1, -1):
                if self._ranges[depth][0] == handle:
                    _, self._phase, loader = self._ranges[depth]
                    del self._ranges[depth:]
                    if loader:
                        self._end_batch()
                    return

    def _end_batch(self) -> None:
        samples, self._batch = self._batch, None
        if samples and self._lap is not None:
            self._piece.batches += 1
            self._piece.samples += samples

    def _record(self, kind: OpKind, args, kwargs, out) -> None:
        inputs = _tensors(args) + _tensors(kwargs.values())
        outputs = _tensors((out,))
        copy = _copy(kind, args, kwargs, out) if kind.copies else None
        event = copy[0] if copy else SYNC if kind.syncs and kind.syncs(args, kwargs) else None
        anchor = outputs or inputs
        where = anchor[0].device.type if anchor else "cpu"
        autograd = torch.is_grad_enabled() and any(t.requires_grad for t in inputs)
        transformed = self._calls.transformed
        nested = not (self._calls.fresh or transformed)
        self._calls.fresh = False
        phase = self._phase
        if phase is LOADING and self._batch is not None and kind.name == "aten.stack":
            self._batch = max(self._batch, len(_argument(args, kwargs, 0, "tensors")))
        key = (kind, where, tuple(t.shape for t in inputs), tuple(t.dtype for t in inputs), event, autograd, phase,
               nested, transformed)
        ident = self._ids.get(key)
        if ident is None:
            ident = self._ids[key] = len(self._keys)
            self._keys.append(key)
        stats = self._lap.get(ident)
        if stats is None:
            stats = self._lap[ident] = [0, 0, 0, 0, 0, 0]  # calls, flops, bytes read, written, copied, kernels
        stats[0] += 1
        piece = self._piece
        piece.calls[ident] = piece.calls.get(ident, 0) + 1
        if copy:
            stats[4] += copy[1]
        elif kind.launches:
            written = (_tensors(_argument(args, kwargs, i, n) for i, n in kind.written) if kind.written
                       else outputs)
            skip = {id(t) for t in _tensors(kwargs.get(n) for n in kind.outs)}
            if not kind.reads_written:
                skip.update(id(t) for t in written)
            read = [t for t in inputs if id(t) not in skip] if kind.reads_inputs else []
            stats[1] += (self._formula_flops(kind, args, kwargs, out) if kind.formula
                         else sum(t.numel() for t in written))
            stats[2] += sum(read_bytes(t) for t in read)
            stats[3] += _written_bytes(written)
            stats[5] += kind.kernels(args, kwargs) if kind.kernels else 1
        if self._syncs(where, event):
            piece.sync = True
            self._pieces.append(piece)
            self._piece = _Stretch()

    def _formula_flops(self, kind: OpKind, args, kwargs, out) -> int:
        """kind.formula's count, once per set of arguments: the formulas read the tensors' shapes and the other
        arguments alone, and flattening a call for one costs more than a small operation does (about 0.2 ms)."""
        try:
            key = (kind, _shapes(args), _shapes(tuple(kwargs.items())), _shapes(out))
            found = self._flops.get(key)
        except TypeError:  # an argument that cannot be a key: counted every time
            return kind.formula(*args, **kwargs, out_val=out)
        if found is None:
            found = self._flops[key] = kind.formula(*args, **kwargs, out_val=out)
        return found

    # -- what it found ---------------------------------------------------------------------------
    def _on_device(self, where: str) -> bool:
        return where == self._device_type

    def _syncs(self, where: str, event) -> bool:
        """Whether a call waits for the device: a data read there, or a blocking copy."""
        if event is None:
            return False
        return self._on_device(where) if event is SYNC else event[2]

    def _launches(self, kind: OpKind, where: str, event) -> bool:
        """Whether a call does work: not a copy between devices (counted as a copy), and not shape inference
        on meta tensors inside a unit on another device."""
        return kind.launches and (event is None or event is SYNC) and (where != "meta" or self._device_type == "meta")

    def operations(self) -> list[dict]:
        """One entry per (operation, where, input shapes, dtypes, event), totals over every counted sample."""
        merged: dict[tuple, list[int]] = {}
        for ident, stats in self.total.items():
            _add(merged, self._keys[ident][:5], stats)
        rows = []
        for (kind, where, shapes, dtypes, event), (calls, flops, read, written, copied, kernels) in merged.items():
            copy = event not in (None, SYNC)
            kernel = kind.launches and not copy and self._on_device(where)
            rows.append({
                "op": kind.name, "where": where, "shapes": [list(s) for s in shapes],
                "dtypes": [str(d).removeprefix("torch.") for d in dtypes], "count": calls,
                "kernels": kernels if kernel else 0, "flops": flops if kernel else 0,
                "flop_rule": ("formula" if kind.formula else "per element") if kernel else "none",
                "bytes_read": read if kernel else 0, "bytes_written": written if kernel else 0,
                "syncs": calls if self._syncs(where, event) else 0,
                "copy": {"direction": event[0], "pinned": event[1], "bytes": copied} if copy else None,
            })
        return rows

    def by_op(self) -> dict[str, dict]:
        """Totals per operation name: count, kernels, flops, syncs, copies."""
        found: dict[str, dict] = {}
        for row in self.operations():
            entry = found.setdefault(row["op"], dict.fromkeys(("count", "kernels", "flops", "syncs", "copies"), 0))
            for field in ("count", "kernels", "flops", "syncs"):
                entry[field] += row[field]
            entry["copies"] += row["count"] if row["copy"] else 0
        return found

    def detail(self, samples: int) -> dict:
        """What a cost model needs, per sample: "ops" (one entry per operation id: its first SHOWN_INPUTS input
        shapes and dtypes, how many tensor inputs, calls per sample; flops, bytes and a copy's bytes per
        call), "stretches" (each with its operations as [index into ops, calls per occurrence] and
        how often it occurs per sample), "loader" (batches and samples) and "graph_replays"."""
        index, ops = {}, []
        for ident, (calls, flops, read, written, copied, kernels) in self.total.items():
            kind, where, shapes, dtypes, event, autograd, phase, nested, transformed = self._keys[ident]
            launches = self._launches(kind, where, event)
            copy = event is not None and event is not SYNC
            index[ident] = len(ops)
            ops.append({
                "op": kind.name, "where": where, "shapes": [list(s) for s in shapes[:SHOWN_INPUTS]],
                "dtypes": [str(d).removeprefix("torch.") for d in dtypes[:SHOWN_INPUTS]], "inputs": len(shapes),
                "calls": per_sample(calls, samples),
                "kernel": launches and self._on_device(where), "launches": launches,
                "flops": per_sample(flops, calls) if launches else 0, "formula": launches and kind.formula is not None,
                "bytes": per_sample(read + written, calls) if launches else 0, "autograd": autograd, "phase": phase,
                "nested": nested, "transformed": transformed,
                "copy": {"direction": event[0], "pinned": event[1], "bytes": per_sample(copied, calls)} if copy else None,
                "sync": self._syncs(where, event),
            } | ({"kernels": per_sample(kernels, calls)} if launches and kernels != calls else {}))
        stretches, batches, loaded, replays = [], 0, 0, 0
        for key, times in self.stretches.items():
            content, sync, stretch_batches, stretch_samples, stretch_replays, modules, steps = key
            stretches.append({"ops": [[index[ident], calls] for ident, calls in content],
                              "times": per_sample(times, samples), "sync": sync, "loader_batches": stretch_batches,
                              "loader_samples": stretch_samples, "graph_replays": stretch_replays,
                              "module_calls": sum(calls for _, calls in modules),
                              "module_classes": dict(modules), "optimizer_steps": steps})
            batches += stretch_batches * times
            loaded += stretch_samples * times
            replays += stretch_replays * times
        return {"ops": ops, "stretches": stretches,
                "loader": {"batches": per_sample(batches, samples), "samples": per_sample(loaded, samples)},
                "graph_replays": per_sample(replays, samples)}

    def summary(self, samples: int | None = None, heap: bool = True) -> dict:
        """The row's census: totals per sample (`samples` defaults to the samples counted), and `detail`; `heap`:
        with the objects a full collection walks (counting them takes tens of milliseconds once torch is imported;
        the cost model reads them for a DataLoader's collections only)."""
        if samples is not None and (not isinstance(samples, int) or samples < 1):
            raise ValueError(f"samples: {samples!r} is not a whole number >= 1")
        samples = samples or self.samples
        if not samples:
            raise ValueError("samples: the census counted no sample (the call closed none); give samples >= 1")
        rows = self.operations()
        h2d = [r for r in rows if r["copy"] and r["copy"]["direction"] == H2D]
        d2h = [r for r in rows if r["copy"] and r["copy"]["direction"] == D2H]
        totals = {
            "operations": _sum(rows, "count"), "kernels": _sum(rows, "kernels"),
            "copies": _sum((r for r in rows if r["copy"]), "count"),
            "h2d_copies": _sum(h2d, "count"), "d2h_copies": _sum(d2h, "count"),
            "h2d_bytes": _copied(h2d), "d2h_bytes": _copied(d2h),
            "pinned_h2d_bytes": _copied(r for r in h2d if r["copy"]["pinned"]), "syncs": _sum(rows, "syncs"),
            "flops": _sum(rows, "flops"),
            "formula_flops": _sum((r for r in rows if r["flop_rule"] == "formula"), "flops"),
            "bytes_moved": _sum(rows, "bytes_read") + _sum(rows, "bytes_written"),
        }
        ops = self.by_op()
        by_count = sorted(ops.items(), key=lambda item: (-item[1]["count"], item[0]))[:TOP]
        by_flops = sorted(((n, e) for n, e in ops.items() if e["flops"]), key=lambda item: (-item[1]["flops"], item[0]))
        return {name: per_sample(value, samples) for name, value in totals.items()} | {
            "top_by_count": [{"op": n, "count": per_sample(e["count"], samples)} for n, e in by_count],
            "top_by_flops": [{"op": n, "flops": per_sample(e["flops"], samples)} for n, e in by_flops[:TOP]],
            "samples": samples, "device": self.device, "flop_rule": FLOP_RULE,
        } | ({"heap_objects": len(gc.get_objects())} if heap else {}) | self.detail(samples)


def _sum(rows, field: str) -> int:
    return sum(r[field] for r in rows)


def _copied(rows) -> int:
    return sum(r["copy"]["bytes"] for r in rows)


def _add(into: dict, key, stats: list[int]) -> None:
    mine = into.get(key)
    if mine is None:
        into[key] = list(stats)
    else:
        for i, value in enumerate(stats):
            mine[i] += value


def _merge(into: dict, counts: dict) -> None:
    for key, stats in counts.items():
        _add(into, key, stats)


def per_sample(total: int, samples: int) -> int | float:
    """A total per sample: an int when it divides exactly, else rounded to 3 decimals."""
    whole, rest = divmod(total, samples)
    return whole if rest == 0 else round(total / samples, 3)


def of(fn: Callable[[], object], device: str = "cpu") -> Census:
    """The census of one call of `fn` (one sample), on `device` (the device its tensors live on)."""
    census = Census(device)
    with census:
        census.start()
        fn()
        census.lap(timing.CALL)
        census.sample((timing.CALL,))
    return census


def take(workload: timing.Workload, device: str) -> dict:
    """The census of a workload that `timing.run` has set up and timed: one more call (a hooked call's
    samples), what its samples time and nothing else, per sample."""
    census = Census(device)
    with census:
        timing.observe(workload, device, census, calls=1)
    return census.summary()


def _count_text(value: int | float, noun: str) -> str:
    """'38 operations'; a count per unit of a sample of several units may be an average: 'about 38 operations'."""
    if value == int(value):
        return f"{int(value):,} {noun}" + ("" if value == 1 else "s")
    return f"about {value:,.0f} {noun}s" if value >= 10 else f"{value:,.2f}".rstrip("0").rstrip(".") + f" {noun}s"


def _bytes_text(n: int | float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return _count_text(n, "byte")


def describe(census: dict, unit: str, per_call: int = 1) -> str:
    """One line for a page, per unit ('16 operations, 8 kernels, 1 sync, 0 bytes copied per step'): a row's
    census is per sample, one call of `per_call` units."""
    def per_unit(value):
        return value if per_call == 1 else value / per_call
    copied = per_unit(census["h2d_bytes"] + census["d2h_bytes"])
    return (f"{_count_text(per_unit(census['operations']), 'operation')}, "
            f"{_count_text(per_unit(census['kernels']), 'kernel')}, {_count_text(per_unit(census['syncs']), 'sync')}, "
            f"{_bytes_text(copied)} copied per {unit}")
