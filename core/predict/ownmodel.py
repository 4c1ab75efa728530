"""Your own model, predicted: `python -m core predict --model path/to/file.py:build_fn --input 512x84`.
The file is the user's own code, run in the user's own process (the CLI only, never from the browser,
refused on a read-only instance). Its unit is one call: a forward pass for inference (eval mode, no_grad), or with
`train` a training step (train mode: forward, the output's mean as the loss, backward, an Adam step).

Every census here is taken on the meta device, which computes nothing: a batch of a million rows costs
no more to count than a batch of one. On the GPU's stand-in each call first copies its input from pageable
host memory, as a loop over host data does, and runs as on CUDA (core.measure.standin.playing_cuda); on the CPU's the
input is where it is used, and nn.RNN, nn.LSTM and nn.GRU run as torch runs them on a CPU (core.measure.kernels.cpu_rnn)."""
import importlib.util
import math
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import psutil
import torch
from torch.utils import benchmark

from core import devices, settings
from core.measure import census, page_faults, standin
from core.model import costmodel, hardware
from core.predict import predictions, uncertainty
from core.params import ConfigError, clip, shown
from core.present.tables import seconds_text
from core.measure.timing import is_noisy

MAX_DIMS = 8
MAX_ELEMENTS = 2**34  # the census builds the input on the meta device only: this bounds typos (_fits_here the rest)
RUN_BATCH = 2  # the batch of the one real call that checks a model runs before it is predicted (BatchNorm wants 2)
MEASURE_SECONDS = 1.0  # --check: the least time torch.utils.benchmark spends timing blocks of calls
CHECK_MEMORY_SHARE = 0.5  # the most of the free memory a real input may take (the model's activations need more)
FAULTS_WORTH_SAYING = 100  # page faults a call (400 KB mapped afresh) from which --check's report names them
SWEEP = tuple(2**i for i in range(17))  # batch sizes tried for the crossover: 1 .. 65,536
TRAINING_COPIES = 4  # what a training step with Adam holds per trainable parameter: it, its gradient, two moments
GIB = 2**30
# Element types an input may have: float32, or integers for indices (token ids, class labels)
DTYPES = {"float32": torch.float32, "int64": torch.int64, "int32": torch.int32}
DEFAULT_DTYPE = "float32"
HALF = ("float16", "half", "bfloat16")


@dataclass(frozen=True)
class Input:
    """The input of one call: its shape (batch first) and element type."""
    shape: tuple[int, ...]
    dtype: str = DEFAULT_DTYPE

    def at(self, batch: int) -> "Input":
        return replace(self, shape=(batch,) + self.shape[1:])

    @property
    def text(self) -> str:
        shape = "x".join(map(str, self.shape))
        return shape if self.dtype == DEFAULT_DTYPE else f"{shape}:{self.dtype}"


def parse_input(text: str) -> Input:
    """'512x84' -> Input((512, 84)), '32x50:int64' -> Input((32, 50), 'int64'): whole numbers >= 1 joined by x, the
    first the batch size, then optionally the element type (an integer type for indices such as token ids)."""
    shape_text, _, dtype = text.partition(":")
    parts = shape_text.lower().replace("×", "x").split("x")
    if not (1 <= len(parts) <= MAX_DIMS) or not all(SIZE_TEXT.fullmatch(p.strip()) for p in parts):
        raise ConfigError("--input", f"{shown(text)} is not a shape such as 512x84 (1 to {MAX_DIMS} whole numbers "
                                     f"joined by x, the first the batch size; 32x50:int64 for indices)")
    shape = tuple(int(p) for p in parts)
    if min(shape) < 1 or math.prod(shape) > MAX_ELEMENTS:
        raise ConfigError("--input", f"{shown(text)}: every size must be >= 1 and the input at most "
                                     f"{MAX_ELEMENTS:,} elements")
    dtype = dtype.strip().lower() or DEFAULT_DTYPE
    if dtype not in DTYPES:
        why = " (half precision is not modelled: the hardware's figures are float32's)" if dtype in HALF else ""
        raise ConfigError("--input", f"{shown(text)}: the element type {shown(dtype)} is not one of "
                                     f"{', '.join(DTYPES)}{why}")
    return Input(shape, dtype)


SIZE_TEXT = re.compile(r"[0-9]{1,15}")  # ASCII digits, as --set reads an int; past MAX_ELEMENTS long before 15
USERS_ERRORS = (Exception, SystemExit)  # what the user's own code may raise (a sys.exit() included): reported


def load(spec: str) -> torch.nn.Module:
    """Build the model named by 'path/to/file.py:build_fn' (build_fn() returns a torch.nn.Module)."""
    settings.require_writable("running your own model file")
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name.isidentifier():
        raise ConfigError("--model", f"{shown(spec)} is not path/to/file.py:build_fn")
    path = Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        raise ConfigError("--model", f"{clip(path_text)} is not a Python file here")
    module = _import(path)
    build = getattr(module, name, None)
    if not callable(build):
        raise ConfigError("--model", f"{clip(path_text)} has no function {clip(name)}")
    try:
        model = build()
    except USERS_ERRORS as e:
        raise ConfigError("--model", f"{clip(name)}() raised {type(e).__name__}: {clip(str(e), 200)}") from None
    if not isinstance(model, torch.nn.Module):
        raise ConfigError("--model", f"{clip(name)}() returned a value of type {type(model).__name__}, not a "
                                     f"torch.nn.Module")
    return model


def eager(model: torch.nn.Module) -> tuple[torch.nn.Module, bool]:
    """The module a census runs, and whether it came wrapped by torch.compile: the census counts the module's eager
    operations, never the kernels the compiler would fuse."""
    inner = getattr(model, "_orig_mod", None)  # torch.compile's OptimizedModule keeps the module it wraps here
    return (inner, True) if isinstance(inner, torch.nn.Module) else (model, False)


def _import(path: Path):
    name = f"crossover_user_model_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except USERS_ERRORS as e:  # the user's file failed to import
        raise ConfigError("--model", f"{clip(str(path))} failed to import: {type(e).__name__}: "
                                     f"{clip(str(e), 200)}") from None
    return module


def take(model: torch.nn.Module, given: Input, train: bool, on_gpu: bool) -> dict:
    """The census of one call on the meta device: on the GPU's stand-in (`on_gpu`) the input is copied in
    from pageable host memory first."""
    model = eager(model)[0].to(devices.STAND_IN).train(train)  # a forward is inference: no dropout, running stats
    # On the host, one element seen at every index: the copy is counted at its full size, never allocated.
    dtype = DTYPES[given.dtype]
    host_input = (torch.empty(1, dtype=dtype).expand(given.shape) if on_gpu else
                  torch.empty(given.shape, dtype=dtype, device=devices.STAND_IN))
    call = _one_call(model, train, lambda: host_input.to(devices.STAND_IN))
    try:
        # Adam takes its CUDA path on the GPU's stand-in, a recurrent layer the CPU's path on the CPU's
        with standin.playing_cuda() if on_gpu else standin.playing_cpu():
            call()  # lazy modules and the optimiser's state come to be on the first call
            return census.of(call, devices.STAND_IN).summary(heap=False)  # a model's call: no DataLoader
    except USERS_ERRORS as e:
        raise _failed(e, given, train) from None


@dataclass(frozen=True)
class Checked:
    """--check's timing of one call on this machine's CPU, and the page faults a call took (over one more block of
    calls after the timed ones; None where they are not counted): memory mapped afresh at each call, which the
    cost model prices only for a tensor of MMAP_THRESHOLD or more."""
    measurement: benchmark.Measurement
    faults_per_call: float | None


def measure(model: torch.nn.Module, given: Input, train: bool) -> Checked:
    """One call of `model` timed on this machine's CPU at torch's threads (torch.utils.benchmark: blocks of calls
    for at least MEASURE_SECONDS, after a first call), on random floats, or zeros for indices (a valid index into
    any table), and its page faults. `model` must be a build of its own: the census moves the module it counts to
    the stand-in."""
    model = eager(model)[0].train(train)
    _fits_here(given, "--check", "check a smaller batch")
    call = _one_call(model, train, lambda: x)
    try:
        x = _real_input(given, torch.device("cpu"))
        call()
        timer = benchmark.Timer("call()", globals={"call": call}, num_threads=torch.get_num_threads())
        timed = timer.blocked_autorange(min_run_time=MEASURE_SECONDS)
        return Checked(timed, page_faults.per_call(call, timed.number_per_run))
    except MemoryError:
        raise ConfigError("--check", f"timing on input {given.text} ran out of this machine's memory: check a smaller "
                                     f"batch") from None
    except USERS_ERRORS as e:
        raise _failed(e, given, train) from None


def runs(model: torch.nn.Module, given: Input, train: bool) -> None:
    """One call of `model` for real, where its parameters are, at a batch of at most RUN_BATCH: a model that cannot
    take its input (an element type its first layer refuses, say) is refused here, which the meta device that the
    census runs on does not always do."""
    first = next(model.parameters(), None)
    small = given.at(min(given.shape[0], RUN_BATCH))
    _fits_here(small, "--input", f"the one real call that checks the model runs takes it at batch {small.shape[0]}: "
                                 f"try narrower rows")
    x = _real_input(small, first.device if first is not None else torch.device("cpu"))
    call = _one_call(model, train, lambda: x)
    try:
        call()
    except USERS_ERRORS as e:
        raise _failed(e, given, train, small) from None  # the input as given: its batch is seldom what fails


def _fits_here(given: Input, field: str, advice: str) -> None:
    """ConfigError naming `field` when a real input of `given` would take over CHECK_MEMORY_SHARE of the memory this
    machine has free (the model's own tensors need more)."""
    needed, available = math.prod(given.shape) * DTYPES[given.dtype].itemsize, psutil.virtual_memory().available
    if needed > CHECK_MEMORY_SHARE * available:
        raise ConfigError(field, f"an input of {given.text} alone takes {needed / GIB:.1f} GiB, over "
                                 f"{CHECK_MEMORY_SHARE:.0%} of the {available / GIB:.1f} GiB this machine has free: "
                                 f"{advice}")


def _real_input(given: Input, device: torch.device) -> torch.Tensor:
    """Random floats, or zeros for indices (a valid index into any table)."""
    dtype = DTYPES[given.dtype]
    if dtype.is_floating_point:
        return torch.randn(given.shape, device=device)
    return torch.zeros(given.shape, dtype=dtype, device=device)


def _one_call(model: torch.nn.Module, train: bool, fetch) -> Callable[[], object]:
    """One call on the input `fetch()` gives: a forward under no_grad, or a training step (the output's mean as the
    loss, backward, an Adam step)."""
    if train and not any(p.requires_grad for p in model.parameters()):
        raise ConfigError("--train", "the model has no trainable parameters, so a training step has nothing to train: "
                                     "leave out --train to predict a forward")
    optimizer = torch.optim.Adam(model.parameters()) if train else None

    def call():
        x = fetch()
        if optimizer is None:
            with torch.no_grad():
                return model(x)
        loss = _first_tensor(model(x)).float().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return call


def _failed(error: Exception, given: Input, train: bool, ran: Input | None = None) -> ConfigError:
    """`ran`: the smaller input a check ran at, which PyTorch's message names, where it differs from `given`."""
    at = f" (run at {ran.text}, a check that the model runs)" if ran is not None and ran.text != given.text else ""
    return ConfigError("--model", f"one {'training step' if train else 'forward'} on input {given.text}{at} failed: "
                                  f"{type(error).__name__}: {clip(str(error), 200)}{_index_hint(error, given)}")


def _index_hint(error: Exception, given: Input) -> str:
    """A hint when a float input reached an operation that takes indices (nn.Embedding's token ids)."""
    if given.dtype != DEFAULT_DTYPE or "Long" not in str(error):
        return ""
    return f" (a model that takes indices, such as token ids, wants an integer input: --input {given.text}:int64)"


def _first_tensor(output) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if not isinstance(output, (dict, list, tuple)):
        raise TypeError(f"the model's output is a {type(output).__name__}: a training step needs a tensor (or a "
                        f"tuple, list or dict holding one)")
    for item in (output.values() if isinstance(output, dict) else output):
        if isinstance(item, torch.Tensor):
            return item
    raise TypeError("the model's output holds no tensor to train on")


def predict(model: torch.nn.Module, given: Input, train: bool, targets: list) -> list[dict]:
    """Per target (a core.model.hardware.Target): the predicted seconds of one call and its parts; for a GPU, the
    batch size from which it beats the first CPU target (each predicted over SWEEP), or None."""
    runs(model, given, train)
    censuses = {}

    def census_at(batch: int, on_gpu: bool) -> dict:
        if (batch, on_gpu) not in censuses:
            censuses[batch, on_gpu] = take(model, given.at(batch), train, on_gpu)
        return censuses[batch, on_gpu]

    def takes(batch: int) -> bool:
        """Whether the model runs at a batch of the sweep (BatchNorm training on one sample does not); the batch
        asked for has run by then, or its error was the answer."""
        try:
            census_at(batch, False)
        except ConfigError:
            return False
        return True

    def needed(batch: int) -> float:
        return memory_needed(model, census_at(batch, True), train)

    def fits(batch: int, gpu) -> bool:
        return not gpu.has(hardware.MEMORY) or needed(batch) <= gpu.value(hardware.MEMORY) * GIB

    cpu = next((t for t in targets if t.gpu is None), None)
    bands, found = uncertainty.load(), []

    made = [banded(census_at(given.shape[0], target.gpu is not None), target, bands) for target in targets]
    if cpu is not None:
        cpu_prediction, _, cpu_band = made[targets.index(cpu)]
    for target, (prediction, regime, band) in zip(targets, made):
        on_gpu = target.gpu is not None
        entry = {"device": target.name, "hardware": target.title, "variant": "training step" if train else "forward",
                 "params": {"input": given.text}, "predicted_s": prediction.seconds,
                 "likely_s": list(band.range(prediction.seconds)) if band else None, "regime": regime,
                 "parts": prediction.parts, "gpu_idle_s": prediction.gpu_idle, "notes": list(prediction.notes)}
        if on_gpu and cpu is not None:
            entry["speedup"] = uncertainty.speedup((cpu_prediction.seconds, cpu_band), (prediction.seconds, band),
                                                   uncertainty.band_for(bands, uncertainty.SPEEDUP, regime))
        memory = memory_gib(target)
        if memory is not None:
            entry |= {"memory_needed_gib": needed(given.shape[0]) / GIB, "memory_gib": memory,
                      "fits": needed(given.shape[0]) <= memory * GIB}
        if on_gpu and cpu is not None:
            sweep = [(b, costmodel.predict(census_at(b, False), cpu).seconds,
                      costmodel.predict(census_at(b, True), target).seconds) for b in SWEEP
                     if takes(b) and fits(b, target.gpu)]
            entry |= {"crossover_batch": costmodel.crossover(sweep), "crossover_against": cpu.title,
                      "crossover_up_to": max((batch for batch, _, _ in sweep), default=None)}
        found.append(entry)
    return found


def banded(found: dict, target: hardware.Target,
           bands: list) -> tuple[costmodel.Prediction, str, uncertainty.Band | None]:
    """A census predicted on a target, its regime and the error band of its kind and regime (None: no band)."""
    prediction = costmodel.predict(found, target)
    regime = predictions.bound(predictions.host_share(prediction))
    return prediction, regime, uncertainty.band_for(bands, "cpu" if target.gpu is None else "cuda", regime)


def memory_needed(model: torch.nn.Module, found: dict, train: bool) -> float:
    """Bytes a GPU must hold at once for one call, at the least: the model's parameters and buffers (with each
    trainable parameter's gradient and Adam's two moments when training), or the largest tensor an operation takes
    (the input's copy in among them), whichever is more. What the operations write, and what a training step keeps
    for its backward, come on top."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    trained = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad) if train else 0
    state = weights + (TRAINING_COPIES - 1) * trained + sum(b.numel() * b.element_size() for b in model.buffers())
    return max(state, max((_largest_input(op) for op in found["ops"]), default=0))


def memory_gib(target: hardware.Target) -> float | None:
    """The memory one call must fit in: its GPU's; for this machine's CPU, this machine's (psutil's total); None
    where it is not known (a catalogue CPU, another machine's)."""
    if target.gpu is not None:
        return target.gpu.value(hardware.MEMORY) if target.gpu.has(hardware.MEMORY) else None
    return psutil.virtual_memory().total / GIB if target.host.machine == devices.fingerprint()["machine_id"] else None


def _largest_input(op: dict) -> float:
    """The bytes of the largest tensor an operation of the census takes (or of its copy)."""
    inputs = (math.prod(shape) * getattr(torch, dtype).itemsize
              for shape, dtype in zip(op["shapes"], op["dtypes"])
              if isinstance(getattr(torch, dtype, None), torch.dtype))
    return max(*inputs, op["copy"]["bytes"] if op["copy"] else 0, 0)


def beside(found: list[dict], checked: Checked, device: str) -> list[dict]:
    """The report with the measurement (measure's) beside the prediction for `device` (this machine's CPU), with its
    page faults a call and, on a host whose calibration measured what a fault costs, their seconds."""
    measured = checked.measurement
    taken = {"measured_s": measured.median, "measured_iqr_s": measured.iqr, "measured_blocks": len(measured.times),
             "calls_per_block": measured.number_per_run, "threads": measured.num_threads,
             "measured_noisy": is_noisy(measured.iqr, measured.median),
             "measured_page_faults": checked.faults_per_call}
    return [entry | taken | _fault_seconds(entry, checked.faults_per_call) if entry["device"] == device else entry
            for entry in found]


def _fault_seconds(entry: dict, faults: float | None) -> dict:
    per_byte = costmodel.fault_seconds_per_byte(hardware.resolve(entry["device"]).host) if faults else 0.0
    return {"measured_page_fault_s": faults * page_faults.PAGE_BYTES * per_byte} if per_byte else {}


def _measured_text(entry: dict) -> str:
    calls = entry["calls_per_block"]
    noisy = (f"; noisy (IQR {entry['measured_iqr_s'] / entry['measured_s']:.0%} of the median): time it again when "
             f"the machine is idle" if entry["measured_noisy"] else "")
    return (f"measured here {seconds_text(entry['measured_s'])} (median of {entry['measured_blocks']} blocks of {calls} "
            f"call{'s' * (calls != 1)}, IQR {seconds_text(entry['measured_iqr_s'])}, {entry['threads']} threads): "
            f"predicted/measured {entry['predicted_s'] / entry['measured_s']:.2f}{noisy}"
            f"{'; ' + faults if (faults := faults_text(entry)) else ''}")


def faults_text(entry: dict) -> str:
    """'each call took 4,032 page faults (...)' where a check's calls took FAULTS_WORTH_SAYING or more, else ''."""
    faults = entry.get("measured_page_faults")
    if not isinstance(faults, (int, float)) or faults < FAULTS_WORTH_SAYING:
        return ""
    cost = entry.get("measured_page_fault_s")
    of_it = f": about {seconds_text(cost)} of each call at this machine's cost of a fault" if cost else ""
    return (f"each call took {faults:,.0f} page faults (memory the allocator mapped afresh{of_it}, which the "
            f"prediction counts only for tensors of {costmodel.MMAP_THRESHOLD // 2**20} MiB or more)")


def report_text(found: list[dict], spec: str, train: bool, compiled: bool = False) -> str:
    """The report for people: per target its predicted time and parts, and for a GPU its crossover; for a module
    torch.compile wrapped (`compiled`), that it is predicted as its eager operations."""
    what = "one training step (forward, mean loss, backward, Adam)" if train else "one forward (eval, no_grad)"
    measured = any("measured_s" in entry for entry in found)
    how = "predicted, and measured on this machine's CPU" if measured else "predicted (not measured)"
    lines = [f"{clip(spec)}: {what} on input {found[0]['params']['input']}, {how}:"]
    for entry in found:
        parts = costmodel.shares_text(entry["parts"], entry["predicted_s"])
        likely = ", " + uncertainty.range_text(entry.get("likely_s"), entry["predicted_s"])
        idle = f"; the GPU idle {entry['gpu_idle_s'] / entry['predicted_s']:.0%} of it" if entry.get("gpu_idle_s") else ""
        line = (f"  {entry['hardware']}: {seconds_text(entry['predicted_s'])} ({entry['regime']}{likely}; "
                f"{parts}{idle})")
        if "speedup" in entry:
            line += f"; {uncertainty.speedup_text(entry['speedup'])}"
        if "measured_s" in entry:
            line += f"; {_measured_text(entry)}"
        if entry.get("fits") is False:
            line += (f"; would not fit: one call needs at least {entry['memory_needed_gib']:,.4g} GiB on it at once, "
                     f"and it has {entry['memory_gib']:,.4g} GiB")
        if "crossover_batch" in entry:
            batch, up_to, cpu = entry["crossover_batch"], entry["crossover_up_to"], entry["crossover_against"]
            fitting = "at the batches that fit, " if entry.get("fits") is False else ""
            line += (f"; {fitting}predicted faster than {cpu} from batch {batch:,} on" if batch else
                     f"; not predicted faster than {cpu} from any batch on, up to {up_to:,}" if up_to else
                     "; no batch of the crossover sweep fits in its memory")
        lines.append(line)
    if any("crossover_batch" in entry for entry in found):
        lines.append("The GPU's figures include copying the input from pageable host memory each call; the "
                     f"crossover compares one call's predicted times (not their ranges) at each batch size {SWEEP[0]} to "
                     f"{SWEEP[-1]:,} that the model takes and that fits in the GPU's memory.")
    for note in dict.fromkeys(note for entry in found for note in entry.get("notes", ())):
        lines.append(f"Note: {note}.")
    if compiled:
        lines.append("torch.compile wrapped the module: it is predicted as its eager operations (the census does not "
                     "see the kernels the compiler would fuse).")
    return "\n".join(lines)
