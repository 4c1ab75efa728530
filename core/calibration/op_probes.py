"""The ATen operations `python -m core calibrate` times one by one on the CPU, where a small model's time goes
beyond what an add's rate and the per-operation overhead predict: functions such as tanh and mish (tens of
adds per element), normalisation, softmax, sort, concatenation and pooling (several passes, and parallel regions
that cost a fixed few microseconds a call), and dropout's random mask (bernoulli_: a random draw per element).
Each is built on a float32 input of `rows` x FEATURES, the layout of a small model's activations; its cost per
call is read as a line through two sizes (core.calibration.calibrate)."""
from typing import Callable

import torch

FEATURES = 16
aten = torch.ops.aten


def _inputs(rows: int) -> dict:
    x = torch.randn(rows, FEATURES)
    return {"x": x, "g": torch.randn(rows, FEATURES), "w": torch.ones(FEATURES), "b": torch.zeros(FEATURES)}


def _pointwise(name: str) -> Callable[[int], Callable[[], object]]:
    def build(rows):
        x = _inputs(rows)["x"]
        x = x.abs() if name == "log" else x  # log's domain
        op = getattr(aten, name)
        return lambda: op(x)
    return build


def _pointwise_backward(name: str, *extra) -> Callable[[int], Callable[[], object]]:
    """A function's backward: (grad, input, *extra), or elu's (grad, alpha, scale, input_scale, is_result, input)."""
    def build(rows):
        found = _inputs(rows)
        op = getattr(aten, name)
        if name == "elu_backward":
            return lambda: op(found["g"], 1.0, 1.0, 1.0, False, found["x"])
        return lambda: op(found["g"], found["x"], *extra)
    return build


def _batch_norm(rows):
    found = _inputs(rows)
    x, w, b = found["x"], found["w"], found["b"]
    mean, var = torch.zeros(FEATURES), torch.ones(FEATURES)
    return lambda: aten.native_batch_norm(x, w, b, mean, var, True, 0.1, 1e-5)


def _batch_norm_backward(rows):
    found = _inputs(rows)
    x, w, b, g = found["x"], found["w"], found["b"], found["g"]
    mean, var = torch.zeros(FEATURES), torch.ones(FEATURES)
    _, saved_mean, saved_invstd = aten.native_batch_norm(x, w, b, mean, var, True, 0.1, 1e-5)
    return lambda: aten.native_batch_norm_backward(g, x, w, mean, var, saved_mean, saved_invstd, True, 1e-5,
                                                   [True, True, True])


def _layer_norm(rows):
    found = _inputs(rows)
    return lambda: aten.native_layer_norm(found["x"], [FEATURES], found["w"], found["b"], 1e-5)


def _layer_norm_backward(rows):
    found = _inputs(rows)
    x, w, b, g = found["x"], found["w"], found["b"], found["g"]
    _, mean, rstd = aten.native_layer_norm(x, [FEATURES], w, b, 1e-5)
    return lambda: aten.native_layer_norm_backward(g, x, [FEATURES], mean, rstd, w, b, [True, True, True])


def _softmax(name: str):
    def build(rows):
        x = _inputs(rows)["x"]
        op = getattr(aten, name)
        return lambda: op(x, 1, False)
    return build


def _softmax_backward(name: str, forward: str):
    def build(rows):
        found = _inputs(rows)
        y = getattr(aten, forward)(found["x"], 1, False)
        op = getattr(aten, name)
        return lambda: op(found["g"], y, 1, torch.float32)
    return build


def _sort(rows):
    x = _inputs(rows)["x"]
    return lambda: aten.sort(x, -1)


def _cat(rows):
    half = _inputs(rows)["x"][:, :FEATURES // 2].contiguous()
    return lambda: aten.cat([half, half], 1)


def _max(rows):
    x = _inputs(rows)["x"]
    return lambda: aten.max.dim(x, 1)


def _pool_input(rows) -> torch.Tensor:
    return _inputs(rows)["x"].view(rows, FEATURES // 4, 1, 4)  # a Conv1d's (N, C, L) as max_pool1d passes it


def _max_pool(rows):
    x = _pool_input(rows)
    return lambda: aten.max_pool2d_with_indices(x, [1, 2], [1, 2])


def _max_pool_backward(rows):
    x = _pool_input(rows)
    out, indices = aten.max_pool2d_with_indices(x, [1, 2], [1, 2])
    grad = torch.randn_like(out)
    return lambda: aten.max_pool2d_with_indices_backward(grad, x, [1, 2], [1, 2], [0, 0], [1, 1], False, indices)


def _bernoulli(rows):
    x = _inputs(rows)["x"]
    return lambda: aten.bernoulli_(x, 0.5)  # dropout's mask: a random draw per element


# name (core.model.costmodel.op_name: the census's, less "aten." and an in-place "_") -> a builder taking the rows
PROBES = {
    **{name: _pointwise(name) for name in ("tanh", "sigmoid", "exp", "log", "erf", "gelu", "silu", "softplus", "elu",
                                           "mish")},
    "gelu_backward": _pointwise_backward("gelu_backward"), "silu_backward": _pointwise_backward("silu_backward"),
    "mish_backward": _pointwise_backward("mish_backward"),
    "softplus_backward": _pointwise_backward("softplus_backward", 1.0, 20.0),
    "elu_backward": _pointwise_backward("elu_backward"),
    "native_batch_norm": _batch_norm, "native_batch_norm_backward": _batch_norm_backward,
    "native_layer_norm": _layer_norm, "native_layer_norm_backward": _layer_norm_backward,
    "_softmax": _softmax("_softmax"), "_log_softmax": _softmax("_log_softmax"),
    "_softmax_backward_data": _softmax_backward("_softmax_backward_data", "_softmax"),
    "_log_softmax_backward_data": _softmax_backward("_log_softmax_backward_data", "_log_softmax"),
    "sort": _sort, "cat": _cat, "max": _max,
    "max_pool2d_with_indices": _max_pool, "max_pool2d_with_indices_backward": _max_pool_backward,
    "bernoulli": _bernoulli,
}
