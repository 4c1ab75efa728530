"""The convolutions `python -m core calibrate` times: the 16-channel probes (conv1d_flops, conv2d_flops), and
the same with one input channel (conv_one_channel_flops), a small model's first layer, where a convolution's vector
lanes, run across input channels, mostly idle (3-30x below the 16-channel rate at the same FLOPs on the AMD EPYC);
and of each, the backward's share of its forward and backward (conv_backward_share). The one-channel and share
figures are keyed by the probe's input shape: its rank tells the layer, its channels the probe."""
import math
from functools import lru_cache

import numpy as np
import torch
from torch.utils.flop_counter import conv_flop_count

CHANNELS = 16  # the input channels of core.model.profiles.CONV_PROBES, whose rates conv_flops holds
# A probe is (layer, its in and out channels and kernel, padding); these by the rank of their input
ONE_CHANNEL = {3: (torch.nn.Conv1d, (1, 32, 5), 2), 4: (torch.nn.Conv2d, (1, 32, 3), 1)}
MANY_CHANNELS = {3: (torch.nn.Conv1d, (CHANNELS, 32, 5), 2), 4: (torch.nn.Conv2d, (CHANNELS, 32, 3), 1)}


def layer(probe: tuple, device: str) -> torch.nn.Module:
    layer_type, (channels, out_channels, kernel), padding = probe
    return layer_type(channels, out_channels, kernel, padding=padding, device=device)


def forward_flops(probe: tuple, shape: tuple[int, ...]) -> float:
    """FLOPs of one forward call of a probe's layer on an input of `shape`, by torch.utils.flop_counter's formula for
    a convolution (stride 1: each spatial size grows by twice the padding less the kernel's reach). No layer is
    built: building one imports torch._dynamo, over a second, on the pages that read a profile."""
    _, (_, out_channels, kernel), padding = probe
    spatial = shape[2:]
    weight = [out_channels, shape[1], *(kernel,) * len(spatial)]
    out = [shape[0], out_channels, *(size + 2 * padding - kernel + 1 for size in spatial)]
    return float(conv_flop_count(list(shape), weight, out))


def one_channel(rank: int, device: str) -> torch.nn.Module:
    return layer(ONE_CHANNEL[rank], device)


def input_key(shape) -> str:
    """A probe's input shape as its figures key it: '8x16x256'."""
    return "x".join(map(str, shape))


@lru_cache(maxsize=64)
def call_flops(size: str) -> tuple[int, float]:
    """The rank of a probe's input shaped `size` ('8x1x256', '8x16x16x16') and its FLOPs per call, by the probe its
    channels name (one: ONE_CHANNEL, else MANY_CHANNELS)."""
    shape = tuple(int(d) for d in size.split("x"))
    return len(shape), forward_flops((ONE_CHANNEL if shape[1] == 1 else MANY_CHANNELS)[len(shape)], shape)


def rates_by_rank(figure: dict[str, float]) -> dict[int, tuple[tuple[float, float], ...]]:
    """conv_one_channel_flops' rates by the rank of the probe's input (3: Conv1d, 4: Conv2d), each as (FLOPs per
    call, rate) in increasing FLOPs."""
    rates: dict[int, dict[float, float]] = {}
    for size, rate in figure.items():
        rank, flops = call_flops(size)
        rates.setdefault(rank, {})[flops] = rate
    return {rank: tuple(sorted(found.items())) for rank, found in rates.items()}


def channel_share(channels: int) -> float:
    """Where a convolution of `channels` input channels sits between the one-channel probes (0) and the
    CHANNELS-channel ones (1) and beyond: in the logarithms of the channels."""
    return min(math.log(channels) / math.log(CHANNELS), 1.0)


def backward_forward_flops(shapes: list[list[int]]) -> float:
    """The forward FLOPs of the convolution an aten.convolution_backward call (grad_output, input, weight, ...)
    differentiates."""
    grad_output, x, weight = shapes[:3]
    return float(conv_flop_count(list(x), list(weight), list(grad_output)))


def backward_share(figure: dict[str, float], weight: list[int], flops: float) -> tuple[float, float] | None:
    """For a convolution of this weight (out channels, in channels, kernel...) at `flops` forward FLOPs, from
    conv_backward_share (keyed by probe input): the backward's share of a forward and backward, each probe set's
    (one channel, and CHANNELS) interpolated in the logarithm of the FLOPs (an end's beyond it), and the smallest
    probe's forward FLOPs, both between the sets by channel_share (the FLOPs in their logarithms); None where no
    probe has its rank."""
    points = {}
    for size, share in figure.items():
        rank, at = call_flops(size)
        if rank == len(weight):
            points.setdefault(size.split("x")[1] == "1", []).append((math.log(at), share))
    if not points:
        return None
    sets = {one: sorted(found) for one, found in points.items()}
    shares = {one: float(np.interp(math.log(flops), *zip(*found))) for one, found in sets.items()}
    smallest = {one: found[0][0] for one, found in sets.items()}
    many = channel_share(weight[1])
    def blend(values):
        return (1 - many) * values.get(True, values.get(False)) + many * values.get(False, values.get(True))
    return blend(shares), math.exp(blend(smallest))
