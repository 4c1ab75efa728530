"""nn.LSTM on the stand-in as torch runs it on a CPU: oneDNN's fused layer.

On a CPU whose torch has oneDNN (x86 builds), torch runs an LSTM without a projection, given a float32 tensor
(not a packed sequence), as one `aten.mkldnn_rnn_layer` call per layer and direction, and its gradients as one
`aten.mkldnn_rnn_layer_backward` each; on the meta device the same module would run every time step as several
operations. Within `as_onednn()`, an LSTM given a stand-in tensor issues what torch's C++ issues on the CPU
(aten/src/ATen/native/mkldnn/RNN.cpp, as its profile shows): the input made time-first and contiguous, per layer
and direction the layer's state selected and the fused layer called, the directions' outputs joined, dropout
between layers when training, the final states stacked. nn.GRU and nn.RNN have no oneDNN path in torch: they keep
the meta device's steps, as on the CPU.

FLOPs are the layer's GEMMs' (2 per multiply-accumulate): its input's and its hidden state's, every step; the
backward's data and weight GEMMs each do what the forward's do. The element-wise gate work is left out, as the FLOP
counter leaves out a linear layer's bias."""
from contextlib import contextmanager
from typing import Iterator
from unittest import mock

import torch
from torch.nn.modules import rnn as torch_rnn

from core import devices

aten = torch.ops.aten
ONEDNN_LSTM = 2  # ideep's rnn_kind for an LSTM: mkldnn_rnn_layer's mode
WEIGHTS_PER_LAYER = (2, 4)  # without and with biases; an LSTM with a projection has one more, and no oneDNN path


def runs_lstm() -> bool:
    """Whether torch here runs a CPU LSTM through oneDNN."""
    return torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled


class _OneDnnVF:
    """torch._VF as nn.LSTM calls it: for a stand-in float32 input (not packed) and no projection, oneDNN's layers."""

    def __getattr__(self, name: str):
        found = getattr(torch._VF, name)
        if name != "lstm":
            return found

        def lstm(input, hx, weights, *args):
            if not _takes_onednn(input, weights, args):
                return found(input, hx, weights, *args)
            return _lstm(input, hx, weights, *args)
        return lstm


@contextmanager
def as_onednn() -> Iterator[None]:
    """Within it, nn.LSTM runs stand-in tensors as torch runs them on a CPU with oneDNN."""
    if not runs_lstm():
        yield
        return
    with mock.patch.object(torch_rnn, "_VF", _OneDnnVF()):
        yield


def _takes_onednn(input, weights, args: tuple) -> bool:
    """Whether torch on a CPU would run this _VF.lstm call (args after the weights) through oneDNN."""
    if not devices.is_stand_in(str(input.device)) or input.dtype != torch.float32 or not isinstance(args[0], bool):
        return False  # a packed sequence's call has its batch sizes where has_biases is
    num_layers, bidirectional = args[1], args[4]
    return _per_layer(weights, num_layers, bidirectional) in WEIGHTS_PER_LAYER


def _per_layer(weights, num_layers: int, bidirectional: bool) -> int:
    return len(weights) // (num_layers * (2 if bidirectional else 1))


def _lstm(input, hx, weights, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    # torch functions disabled: the census counts these operations as C++'s after the one call from Python
    with torch._C.DisableTorchFunction():
        directions = 2 if bidirectional else 1
        per_layer = _per_layer(weights, num_layers, bidirectional)
        hidden = hx[0].shape[-1]
        layer_input = (input.transpose(0, 1) if batch_first else input).contiguous()
        hy, cy = [], []
        for layer in range(num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                w_ih, w_hh, *biases = weights[index * per_layer:(index + 1) * per_layer]
                # without biases, C++ passes zeros of the weights' shapes in their place
                biases = biases or [torch.zeros(w.shape, dtype=w.dtype, device=w.device) for w in (w_ih, w_hh)]
                output, h, c, _ = aten.mkldnn_rnn_layer(
                    layer_input, w_ih, w_hh, *biases, hx[0][index], hx[1][index], direction > 0, [], ONEDNN_LSTM,
                    hidden, num_layers, has_biases, bidirectional, False, train)
                outputs.append(output)
                hy.append(h)
                cy.append(c)
            layer_input = outputs[0] if directions == 1 else torch.cat(outputs, -1)
            if dropout and train and layer < num_layers - 1:
                layer_input = torch.dropout(layer_input, dropout, True)
        output = layer_input.transpose(0, 1) if batch_first else layer_input
        return output, torch.stack(hy), torch.stack(cy)


def layer_flops(input, w_ih, w_hh) -> int:
    """One layer and direction's GEMM FLOPs over every step: its input's and its hidden state's."""
    rows = input.numel() // w_ih.shape[1]  # steps x batch
    return 2 * rows * (w_ih.shape[1] + w_hh.shape[1]) * w_ih.shape[0]


def forward_flops(input, w_ih, w_hh, *args, out_val=None, **kwargs) -> int:
    """The GEMM FLOPs of one `aten.mkldnn_rnn_layer` call (torch.utils.flop_counter's formula signature)."""
    return layer_flops(input, w_ih, w_hh)


def backward_flops(input, w_ih, w_hh, *args, out_val=None, **kwargs) -> int:
    """The GEMM FLOPs of one `aten.mkldnn_rnn_layer_backward` call: the forward's for the data, again for the
    weights."""
    return 2 * layer_flops(input, w_ih, w_hh)


FORMULAS = {aten.mkldnn_rnn_layer: forward_flops, aten.mkldnn_rnn_layer_backward: backward_flops}
