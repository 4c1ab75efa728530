"""nn.RNN, nn.LSTM and nn.GRU on the stand-in as torch runs them on a CPU.

On the meta device torch runs a recurrent layer's generic loop: every step projects its input, then runs the cell.
On a CPU it runs one of two other paths (aten/src/ATen/native/RNN.cpp and mkldnn/RNN.cpp, as their profiles show),
and within `as_cpu()` a recurrent module given a stand-in tensor (not a packed sequence) issues what they issue:
- oneDNN's fused layer, for an LSTM without a projection on float32 input where torch has oneDNN (x86 builds): the
  input made time-first and contiguous, then per layer and direction the layer's state selected and one
  `aten.mkldnn_rnn_layer` call (its gradients one `aten.mkldnn_rnn_layer_backward`), the directions' outputs
  joined, dropout between layers when training, the final states stacked;
- the CPU's loop, for the others (nn.GRU, nn.RNN, an LSTM with a projection or without oneDNN): per layer and
  direction the input's projection for every step at once (one linear over the whole sequence), then each step's
  cell on its slice of it, the steps' outputs stacked.

FLOPs of the fused layer are its GEMMs' (2 per multiply-accumulate): its input's and its hidden state's, every step;
the backward's data and weight GEMMs each do what the forward's do. The element-wise gate work is left out, as the
FLOP counter leaves out a linear layer's bias."""
from contextlib import contextmanager
from typing import Iterator, NamedTuple
from unittest import mock

import torch
from torch.nn.modules import rnn as torch_rnn

from core import devices
from core.measure.kernels import cuda_rnn

aten = torch.ops.aten
ONEDNN_LSTM_KIND = 2  # ideep's rnn_kind for an LSTM: mkldnn_rnn_layer's mode


def runs_lstm() -> bool:
    """Whether torch here runs a CPU LSTM through oneDNN."""
    return torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled


class _CpuVF:
    """torch._VF as torch.nn's recurrent modules call it: for a stand-in input (not packed), the CPU's paths."""

    def __getattr__(self, name: str):
        found = getattr(torch._VF, name)
        if name not in CELLS:
            return found

        def recurrent(input, hx, weights, *args):
            # a packed sequence's call has its batch sizes where has_biases is
            if not devices.holds_stand_in(input) or not isinstance(args[0], bool):
                return found(input, hx, weights, *args)
            if name == "lstm" and _takes_onednn(input, weights, args):
                return _onednn_lstm(input, hx, weights, *args)
            return _cpu_loop(name, input, hx, weights, *args)
        return recurrent


@contextmanager
def as_cpu() -> Iterator[None]:
    """Within it, nn.RNN, nn.LSTM and nn.GRU run stand-in tensors as torch runs them on a CPU."""
    with mock.patch.object(torch_rnn, "_VF", _CpuVF()):
        yield


def _takes_onednn(input, weights, args: tuple) -> bool:
    """Whether torch on a CPU runs this _VF.lstm call (args after the weights) through oneDNN."""
    num_layers, bidirectional = args[1], args[4]  # torch has no oneDNN path for a projection
    return (runs_lstm() and input.dtype == torch.float32
            and cuda_rnn.weights_per_layer(weights, num_layers, bidirectional) not in cuda_rnn.PROJECTED)


def _onednn_lstm(input, hx, weights, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    # torch functions disabled: the census counts these operations as C++'s after the one call from Python
    with torch._C.DisableTorchFunction():
        directions = 2 if bidirectional else 1
        per_layer = cuda_rnn.weights_per_layer(weights, num_layers, bidirectional)

        def fused_layer(index: int, layer_input):
            w_ih, w_hh, *biases = weights[index * per_layer:(index + 1) * per_layer]
            # without biases, C++ passes zeros of the weights' shapes in their place
            biases = biases or [torch.zeros(w.shape, dtype=w.dtype, device=w.device) for w in (w_ih, w_hh)]
            output, h, c, _ = aten.mkldnn_rnn_layer(
                layer_input, w_ih, w_hh, *biases, hx[0][index], hx[1][index], index % directions == 1, [],
                ONEDNN_LSTM_KIND, hx[0].shape[-1], num_layers, has_biases, bidirectional, False, train)
            return output, (h, c)
        time_first = (input.transpose(0, 1) if batch_first else input).contiguous()
        output, finals = _layer_stack(fused_layer, time_first, num_layers, directions, dropout, train)
        output = output.transpose(0, 1) if batch_first else output
        return output, torch.stack([h for h, _ in finals]), torch.stack([c for _, c in finals])


def _layer_stack(run_layer, layer_input, num_layers: int, directions: int, dropout: float, train: bool):
    """Every layer and direction (`run_layer(index, its input)` -> its output and final state), each layer's
    directions' outputs joined, dropout between layers when training: the last layer's output and every final
    state, in order."""
    finals = []
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            output, final = run_layer(layer * directions + direction, layer_input)
            outputs.append(output)
            finals.append(final)
        layer_input = outputs[0] if directions == 1 else torch.cat(outputs, -1)
        if dropout and train and layer < num_layers - 1:
            layer_input = torch.dropout(layer_input, dropout, True)
    return layer_input, finals


class _Params(NamedTuple):
    """One layer and direction's weights, as torch's CellParams holds them (absent ones None)."""
    w_ih: torch.Tensor
    w_hh: torch.Tensor
    b_ih: torch.Tensor | None = None
    b_hh: torch.Tensor | None = None
    w_hr: torch.Tensor | None = None


def _params(weights: list, has_biases: bool) -> _Params:
    """w_ih, w_hh, then b_ih and b_hh with biases, then an LSTM's w_hr with a projection."""
    w_ih, w_hh, *rest = weights
    biases = rest[:2] if has_biases else [None, None]
    return _Params(w_ih, w_hh, *biases, w_hr=rest[-1] if len(weights) in cuda_rnn.PROJECTED else None)


def _gru_cell(step, hidden, p: _Params):
    input_gates = step.unsafe_chunk(3, 1)
    hidden_gates = torch._C._nn.linear(hidden, p.w_hh, p.b_hh).unsafe_chunk(3, 1)
    reset = hidden_gates[0].add_(input_gates[0]).sigmoid_()
    update = hidden_gates[1].add_(input_gates[1]).sigmoid_()
    new = input_gates[2].add(hidden_gates[2].mul_(reset)).tanh_()
    return (hidden - new).mul_(update).add_(new)


def _lstm_cell(step, hidden, p: _Params):
    h, c = hidden
    gates = torch._C._nn.linear(h, p.w_hh, p.b_hh).add_(step).unsafe_chunk(4, 1)
    in_gate, forget_gate, cell_gate, out_gate = (gates[0].sigmoid_(), gates[1].sigmoid_(), gates[2].tanh_(),
                                                 gates[3].sigmoid_())
    c = (forget_gate * c).add_(in_gate * cell_gate)
    h = out_gate * c.tanh()
    return (h if p.w_hr is None else torch.matmul(h, p.w_hr.t())), c


def _simple_cell(nonlinearity):
    return lambda step, hidden, p: nonlinearity(torch._C._nn.linear(hidden, p.w_hh, p.b_hh).add_(step))


CELLS = {"gru": _gru_cell, "lstm": _lstm_cell, "rnn_tanh": _simple_cell(torch.tanh),
         "rnn_relu": _simple_cell(torch.relu)}


def _cpu_loop(name, input, hx, weights, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    with torch._C.DisableTorchFunction():  # as in _onednn_lstm
        directions = 2 if bidirectional else 1
        per_layer = cuda_rnn.weights_per_layer(weights, num_layers, bidirectional)
        states = list(zip(hx[0].unbind(0), hx[1].unbind(0))) if name == "lstm" else list(hx.unbind(0))

        def looped_layer(index: int, layer_input):
            params = _params(weights[index * per_layer:(index + 1) * per_layer], has_biases)
            return _full_layer(CELLS[name], layer_input, states[index], params, index % directions == 1)
        time_first = input.transpose(0, 1) if batch_first else input
        output, finals = _layer_stack(looped_layer, time_first, num_layers, directions, dropout, train)
        if name == "lstm":  # C++ transposes an LSTM's output back, and a GRU's or an RNN's in place
            output = output.transpose(0, 1) if batch_first else output
            return output, torch.stack([h for h, _ in finals]), torch.stack([c for _, c in finals])
        return (output.transpose_(0, 1) if batch_first else output), torch.stack(finals)


def _full_layer(cell, input, state, params: _Params, reverse: bool):
    """One layer and direction: the input's projection for every step at once, then the cell step by step (from
    the last step when `reverse`); the steps' outputs stacked in time order, and the final state."""
    steps = torch._C._nn.linear(input, params.w_ih, params.b_ih).unbind(0)
    outputs = []
    for step in (reversed(steps) if reverse else steps):
        state = cell(step, state, params)
        outputs.append(state[0] if isinstance(state, tuple) else state)
    return torch.stack(outputs[::-1] if reverse else outputs, 0), state


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
