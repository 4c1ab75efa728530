"""CUDA graphs for the tuned variants: capture one training step and replay it, right on every GPU of
a multi-GPU machine, checked, and with the eager step as the fallback.

torch.cuda.graph() without `stream=` captures on a stream torch makes once per process on whichever GPU
is current then: a later capture for another GPU records nothing and its replays do nothing. Here every
capture runs inside torch.cuda.device(dev) on a side stream made for that device.

On the stand-in (`devices.STAND_IN`, which builds a GPU's workload on the meta device) nothing is captured:
the step runs eagerly inside a `record_function(REPLAY_RANGE)` range, which the census counts as one
replay whose operations are the graph's nodes. A CUDA graph's replay dispatches no operation for a census
to see, so while one counts (`counted`) a replay runs its step the stand-in's way too."""
from contextlib import contextmanager
from typing import Callable, Iterable

import torch

from core import devices

WARMUP_STEPS = 3  # eager steps on a side stream before capture, as the CUDA graphs notes require
REPLAY_RANGE = "crossover.graph_replay"  # the record_function range of a replay on the stand-in
_counting = False  # a census is counting (counted): replays run their step eagerly in REPLAY_RANGE


class GraphCaptureError(RuntimeError):
    pass


class StartingPoint:
    """Parameters (and an optimiser's state) as they are now, to put back later in place: a captured
    graph keeps reading and writing the same tensors, so training restarts by copying into them, never
    by making new ones. Zeroed optimiser state is a fresh optimiser's (Adam's moments and step)."""

    def __init__(self, params: Iterable[torch.Tensor], optimizer: torch.optim.Optimizer = None):
        self.params = list(params)
        self.values = [p.detach().clone() for p in self.params]
        self.optimizer = optimizer

    @torch.no_grad()
    def restore(self) -> None:
        for param, value in zip(self.params, self.values):
            param.copy_(value)
        for state in (self.optimizer.state.values() if self.optimizer else ()):
            for value in state.values():
                if torch.is_tensor(value):
                    value.zero_()


def capture(step: Callable[[], object], device: str, watched: Iterable[torch.Tensor],
            warmup_steps: int = WARMUP_STEPS) -> Callable[[], None]:
    """Capture `step` (which must read and write only tensors that stay in place) as a CUDA graph on
    `device` and return its replay. The warm-up steps and one checking replay run `step`'s effect
    several times: callers put their state back afterwards. Raises GraphCaptureError when capture
    fails or the replay leaves `watched` (the parameters, say) unchanged."""
    if devices.kind(device) != "cuda":
        raise GraphCaptureError(f"CUDA graphs need a CUDA device, not {device}")
    dev = torch.device(device)
    watched = list(watched)
    try:
        with torch.cuda.device(dev):
            _warm_up(step, dev, warmup_steps)
            graph = _record(step, dev)
        replay = replayer(graph, step, dev)
        _check_replay(replay, watched, device)
    except RuntimeError as e:
        if isinstance(e, GraphCaptureError) or devices.is_out_of_memory(e):
            raise
        raise GraphCaptureError(f"capture on {device} failed: {type(e).__name__}: {e}") from e
    return replay


def replayer(graph: torch.cuda.CUDAGraph, step: Callable[[], object], dev: torch.device) -> Callable[[], None]:
    """The replay of `graph`, captured from `step` on `dev`: while a census counts, `step` itself run the
    stand-in's way, so that the census sees the graph's nodes."""
    counted_step = stand_in_replay(step)

    def replay() -> None:
        with torch.cuda.device(dev):
            if _counting:
                counted_step()
            else:
                graph.replay()
    return replay


@contextmanager
def counted():
    """While a census counts: every replay runs its step eagerly inside REPLAY_RANGE."""
    global _counting
    before, _counting = _counting, True
    try:
        yield
    finally:
        _counting = before


def _warm_up(step: Callable[[], object], dev: torch.device, steps: int) -> None:
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        for _ in range(steps):
            step()
    torch.cuda.current_stream(dev).wait_stream(side)


def _record(step: Callable[[], object], dev: torch.device) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    previous = torch.cuda.current_stream(dev)
    try:
        with torch.cuda.graph(graph, stream=torch.cuda.Stream(dev)):
            step()
    except Exception as e:
        raise GraphCaptureError(f"capture on {dev} failed: {type(e).__name__}: {e}") from e
    finally:
        torch.cuda.set_stream(previous)  # a failed capture leaves its stream current otherwise
    return graph


def _check_replay(replay: Callable[[], None], watched: list[torch.Tensor], device: str) -> None:
    before = [t.detach().clone() for t in watched]
    replay()
    devices.synchronize(device)
    if not any((t != b).any().item() for t, b in zip(watched, before)):
        raise GraphCaptureError(f"the graph captured on {device} changed nothing when replayed")


def replay_or_eager(step: Callable[[], object], device: str, watched: Iterable[torch.Tensor],
                    enabled: bool = True) -> tuple[Callable[[], object], str | None]:
    """The captured step on CUDA (when `enabled`), the step as the stand-in's replay on the stand-in, else
    `step` itself; with the capture error, when capture was tried and failed, for the record."""
    if not enabled:
        return step, None
    if devices.is_stand_in(device):
        return stand_in_replay(step), None
    if devices.kind(device) != "cuda":
        return step, None
    try:
        return capture(step, device, watched), None
    except GraphCaptureError as e:
        return step, str(e)[:300]


def stand_in_replay(step: Callable[[], object]) -> Callable[[], None]:
    """`step` run eagerly inside the replay range: what the census counts as one replay of its graph (on the
    stand-in, and on CUDA while a census counts)."""
    def replay() -> None:
        with torch.profiler.record_function(REPLAY_RANGE):
            step()
    return replay
