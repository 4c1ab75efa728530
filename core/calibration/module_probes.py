"""The common layers whose Python calibrate times (core.calibration.calibrate.module_costs): a small model's host time goes
to its modules' calls as well as to its operations, and a layer's call costs more than a bare module's (nn.Identity:
the module_call figure) by its forward's Python and its parameter lookups. Each probe builds the layer on a tiny
input and two calls: the module's, and the operations the module issues, called directly; the difference is the
module's Python, what the cost model adds per call of that class (census's module_classes)."""
from typing import Callable

import torch
from torch import nn

ROWS, FEATURES, CHANNELS, LENGTH = 8, 16, 4, 8

Probe = Callable[[], tuple[Callable[[], object], Callable[[], object]]]


def _linear():
    layer, x = nn.Linear(FEATURES, FEATURES), torch.randn(ROWS, FEATURES)
    weight, bias = layer.weight.detach(), layer.bias.detach()
    return lambda: layer(x), lambda: torch._C._nn.linear(x, weight, bias)


def _conv(layer_type, conv, shape):
    def build():
        layer, x = layer_type(CHANNELS, CHANNELS, 3), torch.randn(shape)
        weight, bias = layer.weight.detach(), layer.bias.detach()
        return lambda: layer(x), lambda: conv(x, weight, bias)
    return build


def _activation(layer_type, function):
    def build():
        layer, x = layer_type(), torch.randn(ROWS, FEATURES)
        return lambda: layer(x), lambda: function(x)
    return build


def _dropout():
    layer, x = nn.Dropout(0.5), torch.randn(ROWS, FEATURES)  # training mode: it draws a mask
    return lambda: layer(x), lambda: torch.dropout(x, 0.5, True)


def _batch_norm():
    layer, x = nn.BatchNorm1d(FEATURES), torch.randn(ROWS, FEATURES)
    weight, bias, mean, var = (t.detach() for t in (layer.weight, layer.bias, layer.running_mean, layer.running_var))
    tracked = layer.num_batches_tracked.clone()

    def ops():
        tracked.add_(1)
        return torch.batch_norm(x, weight, bias, mean, var, True, 0.1, 1e-5, False)
    return lambda: layer(x), ops


def _layer_norm():
    layer, x = nn.LayerNorm(FEATURES), torch.randn(ROWS, FEATURES)
    weight, bias = layer.weight.detach(), layer.bias.detach()
    return lambda: layer(x), lambda: torch.layer_norm(x, (FEATURES,), weight, bias, 1e-5)


def _max_pool():
    layer, x = nn.MaxPool1d(3), torch.randn(ROWS, CHANNELS, LENGTH)
    return lambda: layer(x), lambda: torch.max_pool1d(x, 3)


def _flatten():
    layer, x = nn.Flatten(), torch.randn(ROWS, CHANNELS, LENGTH)
    return lambda: layer(x), lambda: torch.flatten(x, 1)


def _sequential():
    inner, x = nn.Identity(), torch.randn(ROWS, FEATURES)
    layer = nn.Sequential(inner)
    return lambda: layer(x), lambda: inner(x)  # beyond the module it holds (a module call of its own)


PROBES: dict[str, Probe] = {
    "Linear": _linear,
    "Conv1d": _conv(nn.Conv1d, torch.conv1d, (ROWS, CHANNELS, LENGTH)),
    "Conv2d": _conv(nn.Conv2d, torch.conv2d, (ROWS, CHANNELS, LENGTH, LENGTH)),
    "ReLU": _activation(nn.ReLU, torch.relu),
    "Tanh": _activation(nn.Tanh, torch.tanh),
    "Sigmoid": _activation(nn.Sigmoid, torch.sigmoid),
    "GELU": _activation(nn.GELU, torch._C._nn.gelu),
    "Mish": _activation(nn.Mish, torch._C._nn.mish),
    "Dropout": _dropout,
    "BatchNorm1d": _batch_norm,
    "LayerNorm": _layer_norm,
    "MaxPool1d": _max_pool,
    "Flatten": _flatten,
    "Sequential": _sequential,
}
