"""The stand-in census: the census of a point a GPU would run, taken with no GPU. The point's workload is built
for the GPU's stand-in (`devices.STAND_IN`, the meta device: it computes nothing and holds no data), so every
operation, kernel, sync and copy the GPU would see is counted on any machine, in about the time the host
takes to issue them. What the cost model (core.model.costmodel) predicts a GPU from.

The stand-in plays a CUDA GPU (`devices.plays`): the experiments plan a GPU's variants, choose fused and
capturable optimisers and CUDA graphs (a replay is the eager step inside `graphs.REPLAY_RANGE`) as they do on
CUDA, torch's optimisers and gradient clipping take their CUDA paths and its recurrent layers cuDNN's
(`playing_cuda`). Operations that need
data read meta tensors as zeros (core.measure.census), so losses and predictions come back as zeros."""
import json
import sys
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Callable, Iterator
from unittest import mock

from torch.optim import optimizer as torch_optimizer
from torch.utils import _foreach_utils

from core import devices
from core.measure import census, timing
from core.measure.kernels import cpu_attention, cpu_rnn, cuda_attention, cuda_ops, cuda_rnn, native_attention
from core.measure.experiment import Experiment, Point, RunState, SkipPoint

# torch's lists of the device types that have foreach, fused and capturable optimiser kernels: its optimisers
# and clip_grad_norm_ choose their path by them (foreach by default on CUDA, a per-tensor loop elsewhere).
DEVICE_LISTS = ((_foreach_utils, "_get_foreach_kernels_supported_devices"),
                (_foreach_utils, "_get_fused_kernels_supported_devices"),
                (torch_optimizer, "_get_capturable_supported_devices"))
FAILURES = (RuntimeError, MemoryError, ValueError, TypeError, NotImplementedError, AssertionError)


def points(experiment: Experiment, config: dict) -> list[Point]:
    """The points a GPU would run, planned on the stand-in."""
    return experiment.points(config, devices.STAND_IN)


def take(experiment: Experiment, point: Point, config: dict) -> dict:
    """The census summary of one sample of `point` (core.measure.census), built on its device (the stand-in for a GPU's
    point): `workload.setup`, one warm-up call unless the call is hooked or prewarmed, then `census.take`.
    `{"skipped": why}` when the experiment skips the point or its work is invisible to PyTorch, `{"error":
    "Type: message"}` when building or running it fails, like the runner's rows."""
    return _census(experiment, point, config)[1]


def entry(experiment: Experiment, point: Point, config: dict) -> dict:
    """A record's stand-in entry: the point's variant, params, unit and per_call (None and 1 when its workload
    could not be built) and its census (`take`)."""
    workload, found = _census(experiment, point, config)
    return {"variant": point.variant, "params": point.params, "unit": workload.unit if workload else None,
            "per_call": workload.per_call if workload else 1, "census": found}


class Censuses:
    """Censuses taken once per (experiment, point, configuration), however many uses share them: `census_of`'s
    (`take` by default, `entry` for a record's entry), on `threads` intra-op threads (None: as they are);
    `progress(point)` is told of each census taken."""

    def __init__(self, census_of: Callable[[Experiment, Point, dict], dict] = None, progress: Callable = None,
                 threads: int | None = None):
        self.take = census_of or take
        self.progress = progress
        self.threads = threads
        self.taken: dict[str, dict] = {}

    def get(self, experiment: Experiment, point: Point, config: dict) -> dict:
        key = json.dumps([experiment.name, point.device, point.variant, point.params, config], sort_keys=True,
                         default=list)
        if key not in self.taken:
            with timing.intra_op_threads(self.threads):
                self.taken[key] = self.take(experiment, point, config)
            if self.progress:
                self.progress(point)
        return self.taken[key]


def _census(experiment: Experiment, point: Point, config: dict) -> tuple[timing.Workload | None, dict]:
    workload = None
    stand_in = devices.is_stand_in(point.device)
    try:
        with ExitStack() as running:
            if stand_in:
                running.enter_context(playing_cuda())
            # Building, setting up and warming up read meta tensors too: a census that counts nothing answers.
            with census.Census(point.device) if stand_in else nullcontext():
                workload = experiment.workload(point, config, RunState())
                if workload.untraced:
                    return workload, {"skipped": workload.untraced}
                if stand_in:  # in the precision a GPU's row runs in (FP32 unless the workload allows TF32), as the
                    running.enter_context(timing.precision(workload))  # cuDNN rules read it (cuda_ops)
                _prepare(workload)
            return workload, census.take(workload, point.device)
    except SkipPoint as skip:
        return workload, {"skipped": str(skip)}
    except FAILURES as e:
        devices.release_cached_memory(point.device)
        return workload, {"error": f"{type(e).__name__}: {e}"}


def _prepare(workload: timing.Workload) -> None:
    with timing.intra_op_threads(workload.threads):
        if workload.setup:
            workload.setup()
        if not (workload.hooks or workload.prewarmed):
            workload.call()  # lazy state (an optimiser's moments, a loader's workers) comes to be


@contextmanager
def playing_cpu() -> Iterator[None]:
    """Within it, nn.RNN, nn.LSTM and nn.GRU (core.measure.kernels.cpu_rnn), F.scaled_dot_product_attention
    (core.measure.kernels.cpu_attention) and the transformer's inference fast path (core.measure.kernels.native_attention)
    run stand-in tensors as torch runs them on a CPU."""
    with cpu_rnn.as_cpu(), cpu_attention.as_cpu(), native_attention.as_native("cpu"):
        yield


@contextmanager
def playing_cuda() -> Iterator[None]:
    """Within it, torch's optimisers and gradient clipping take for stand-in tensors the paths they take on
    CUDA: foreach kernels by default, fused and capturable allowed (each device list gains the stand-in in
    every module that imported it), nn.GRU, nn.LSTM and nn.RNN run as one cuDNN call, and nn.GRUCell and nn.LSTMCell
    as CUDA's fused cells (core.measure.kernels.cuda_rnn), mish_backward and dropout run as CUDA's fused kernels, and
    the census counts the kernels CUDA launches for a GEMM, a loss, a gradient, a convolution or a pool's gradient that
    launches more than one (core.measure.kernels.cuda_ops), F.scaled_dot_product_attention runs CUDA's fused kernels
    (core.measure.kernels.cuda_attention), and nn.TransformerEncoderLayer and nn.MultiheadAttention take CUDA's inference
    fast path (core.measure.kernels.native_attention)."""
    with ExitStack() as patches:
        patches.enter_context(cuda_rnn.as_cudnn())
        patches.enter_context(cuda_attention.as_cuda())
        patches.enter_context(native_attention.as_native("cuda"))
        patches.enter_context(cuda_ops.as_cuda())
        for home, name in DEVICE_LISTS:
            original = getattr(home, name)

            def with_stand_in(*args, _original=original, **kwargs) -> list[str]:
                return [*_original(*args, **kwargs), devices.STAND_IN]
            for module in list(sys.modules.values()):
                if getattr(module, "__dict__", {}).get(name) is original:
                    patches.enter_context(mock.patch.object(module, name, with_stand_in))
        yield
