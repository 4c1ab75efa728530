"""nn.RNN, nn.LSTM and nn.GRU on the stand-in as cuDNN runs them on CUDA, and nn.GRUCell and nn.LSTMCell as
torch's CUDA kernels do.

On CUDA, torch runs a recurrent layer stack as one cuDNN call (`aten._cudnn_rnn`, and `_cudnn_rnn_backward` for
its gradients), while on the meta device it would run the layer's steps as separate operations, several per
step, each with its own dispatch and launch. Within `as_cudnn()`, a recurrent module given stand-in tensors calls
`_cudnn_rnn` instead, so the census counts what CUDA would run. A GRU or LSTM cell on CUDA is two GEMMs (its
input's and its hidden state's, `matmul` with the weight transposed) and one fused element-wise kernel
(`_thnn_fused_gru_cell`, `_thnn_fused_lstm_cell`; their backward, one kernel and a reduction per bias), all issued
by C++ from one Python call: within `as_cudnn()` a cell given stand-in tensors runs them so.

What one call does on the GPU, per layer and direction.
- A GRU of hidden size up to PERSISTENT_HIDDEN runs on cuDNN's block-persistent kernels, a fixed number per call
  whatever its steps. An NVIDIA H200 (torch 2.11.0+cu130, cuDNN 9; the shipped record
  results/intel-r-xeon-r-processor-8e260d9d/cnn-20261127T071417-9e258b.json, the GRU of 16 features -> 64 hidden over
  32 steps, batch_first, at batches 64 and 512, its operator tables as measured, commit f22d75e) counted 37 kernels a
  training step where this module had assumed 65 + 68 for the cuDNN calls alone (149 a step with the rest). Of the 37,
  19 are the step's other operations (the head's 3 GEMMs, the loss and its gradient 2 each, the selected state's
  gradient 2, ones_like, h0's zeros, the bias gradient's sum, Adam's 7 foreach kernels); the cuDNN calls' 18 are, in
  the forward, the input GEMM of every step, RNN_blockPersist_fp_GRU and persistRNN_addBias (the biases; none without
  them): 3; in the backward, GRU_elementWise_bp1, RNN_blockPersist_bp_GRU_FMA, GRU_elementWise_bp2 and the input
  gradient's GEMM (4), and for the weights three GEMMs and two split-K reductions (cublasLt splitKreduce_kernel): 5.
- Any other layer (an LSTM, an RNN, a GRU of a larger hidden size: not measured) as cuDNN's standard algorithm, as
  Appleyard, Kocisky and Blunsom describe cuDNN 5's in "Optimizing Performance of Recurrent Neural Networks on GPUs"
  (arXiv:1604.01946): forward, one GEMM for every step's input projections, then per step the recurrent GEMM of all
  gates and one kernel fusing the element-wise work: 1 + 2 x steps kernels; backward, per step one fused element-wise
  kernel and one recurrent GEMM, one GEMM for every step's input gradients, and, when the weights need gradients, one
  GEMM each for the input and the recurrent weights and one reduction for the biases: 2 x steps + 1 (+ 3) kernels.
  An LSTM with a projection (proj_size) projects each step's hidden state before the next step's recurrent GEMM: one
  more GEMM per step each way, and one more for its weight's gradient. How cuDNN splits these into kernels is an
  assumption.
- Either way, per call: a stack trained with dropout drops out each layer's output before the next layer (as
  cudnnRNNForward does): one kernel per layer after the first, each way; and torch's wrapper (aten/src/ATen/native/
  cudnn/RNN.cpp) launches its own: a batch_first input is transposed and made contiguous (a copy) in the forward and
  in the backward, again for the weights' gradients, and so is the output's gradient; the weights' gradient buffer is
  zeroed (cuDNN accumulates into it); an output or final state whose gradient is undefined gets a zeros_like (a fill).
  The H200's 18 hold 4 such copies and 2 fills (the buffer; the unused output's gradient).
FLOPs are the GEMMs' (2 per multiply-accumulate); the element-wise work is left out, as the FLOP counter leaves out
a linear layer's bias. The backward's data and weight GEMMs each do what the forward's do. Packed sequences keep
the meta device's step-by-step operations."""
from contextlib import contextmanager
from typing import Iterator, NamedTuple
from unittest import mock

import torch
from torch.nn.modules import rnn as torch_rnn

from core import devices

aten = torch.ops.aten
MODES = {"rnn_relu": 0, "rnn_tanh": 1, "lstm": 2, "gru": 3}  # cuDNN's modes, by the torch._VF function
CELLS = ("gru_cell", "lstm_cell")  # the torch._VF cells CUDA fuses (an RNN cell it runs as on any device)
GATES = {0: 1, 1: 1, 2: 4, 3: 3}  # per mode
PROJECTED = (3, 5)  # weights per layer of an LSTM with a projection (w_ih, w_hh, w_hr; with biases between)
WEIGHT_GRADIENT_KERNELS = 3  # input weights' GEMM, recurrent weights' GEMM, the biases' reduction
# cuDNN's block-persistent GRU (the H200's figures above): the largest hidden size measured on it, and its kernels per
# layer and direction
PERSISTENT_HIDDEN = 64
PERSISTENT_FORWARD = 2  # the input GEMM and RNN_blockPersist_fp_GRU; persistRNN_addBias too with biases
PERSISTENT_BACKWARD = 4  # GRU_elementWise_bp1, RNN_blockPersist_bp_GRU_FMA, GRU_elementWise_bp2, the input gradient's GEMM
PERSISTENT_WEIGHT_GRADIENT = 5  # three GEMMs and two split-K reductions


class _CudnnVF:
    """torch._VF as torch.nn's recurrent modules call it: for a stand-in input, a layer stack takes cuDNN's one call
    and a GRU or LSTM cell CUDA's fused one."""

    def __getattr__(self, name: str):
        found = getattr(torch._VF, name)
        mode = MODES.get(name)
        if name in CELLS:
            return lambda input, *args: (_fused_cell(name, input, *args) if devices.holds_stand_in(input)
                                         else found(input, *args))
        if mode is None:
            return found

        def recurrent(input, *args):
            # a packed sequence's call has its batch sizes first, so its weights where has_biases is
            if not devices.holds_stand_in(input) or not isinstance(args[2], bool):
                return found(input, *args)
            return _cudnn_rnn(mode, input, *args)
        return recurrent


@contextmanager
def as_cudnn() -> Iterator[None]:
    """Within it, nn.RNN, nn.LSTM and nn.GRU run stand-in tensors as one cuDNN call each, nn.GRUCell and nn.LSTMCell
    as CUDA's fused cells."""
    with mock.patch.object(torch_rnn, "_VF", _CudnnVF()):
        yield


_weight_buffers: dict[tuple, torch.Tensor] = {}


def _weight_buffer(weights: list[torch.Tensor]) -> torch.Tensor:
    """The one buffer cuDNN holds a module's weights in (nn.RNNBase flattens them into it on CUDA): made once per
    size, on the stand-in, where it holds nothing."""
    key = (sum(w.numel() for w in weights), weights[0].dtype)
    if key not in _weight_buffers:
        _weight_buffers[key] = torch.empty(key[0], dtype=key[1], device=weights[0].device)
    return _weight_buffers[key]


def _cudnn_rnn(mode: int, input, hx, weights, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    h, c = (hx[0], hx[1]) if mode == MODES["lstm"] else (hx, None)
    per_layer = weights_per_layer(weights, num_layers, bidirectional)
    gates = GATES[mode]
    hidden = weights[1].shape[0] // gates  # the recurrent weight: (gates x hidden, output size)
    projection = weights[per_layer - 1].shape[0] if per_layer in PROJECTED else 0  # an LSTM's w_hr
    output, hy, cy, _, _ = torch._cudnn_rnn(
        input, weights, per_layer, _weight_buffer(weights), h, c, mode, hidden, projection, num_layers, batch_first,
        dropout, train, bidirectional, [], None)
    return (output, hy, cy) if mode == MODES["lstm"] else (output, hy)


def _fused_cell(name: str, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    # torch functions disabled: the census then counts these operations as C++'s after the one call from Python
    # (nn.GRUCell's _VF.gru_cell), as on CUDA, where aten::gru_cell issues them
    with torch._C.DisableTorchFunction():
        h = hx if name == "gru_cell" else hx[0]
        input_gates, hidden_gates = torch.matmul(input, w_ih.t()), torch.matmul(h, w_hh.t())
        if name == "gru_cell":
            return aten._thnn_fused_gru_cell(input_gates, hidden_gates, h, b_ih, b_hh)[0]
        hy, cy, _ = aten._thnn_fused_lstm_cell(input_gates, hidden_gates, hx[1], b_ih, b_hh)
        return hy, cy


def weights_per_layer(weights, num_layers: int, bidirectional: bool) -> int:
    """How many of a recurrent module's flat weights each layer and direction holds: 2 or 4 (with biases), 3 or 5 for
    an LSTM with a projection (PROJECTED)."""
    return len(weights) // (num_layers * (2 if bidirectional else 1))


class Layer(NamedTuple):
    """One layer and direction of a call: `columns` the input and recurrent GEMMs' shared dimension per step (input
    size + recurrent input size), `rows` their gates x hidden, `projected` the projection's weight elements (0 without
    one)."""
    steps: int
    batch: int
    columns: int
    rows: int
    projected: int

    def flops(self) -> int:
        return 2 * self.steps * self.batch * (self.columns * self.rows + self.projected)

    def per_step_gemms(self) -> int:
        return 1 + bool(self.projected)


def _layers(input, weights, weight_stride0: int, batch_first: bool) -> Iterator[Layer]:
    """Each layer and direction of a call. A layer's weights: w_ih (gates x hidden, input), w_hh (gates x hidden,
    output), then biases and an LSTM's w_hr (output, hidden) last."""
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    projection = weight_stride0 in PROJECTED
    for start in range(0, len(weights), weight_stride0):
        w_ih, w_hh = weights[start], weights[start + 1]
        projected = weights[start + weight_stride0 - 1].numel() if projection else 0
        yield Layer(steps, batch, w_ih.shape[1] + w_hh.shape[1], w_ih.shape[0], projected)


def _dropouts(num_layers: int, dropout: float, train: bool) -> int:
    """The dropout kernels between a stack's layers, each way: one per layer after the first when training with
    dropout."""
    return (num_layers - 1) if train and dropout > 0 else 0


def forward_flops(input, weights, weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size, num_layers,
                  batch_first, dropout, train, bidirectional, *args, out_val=None, **kwargs) -> int:
    """The GEMM FLOPs of one `aten._cudnn_rnn` call (torch.utils.flop_counter's formula signature)."""
    return sum(layer.flops() for layer in _layers(input, weights, weight_stride0, batch_first))


def persistent(mode: int, hidden_size: int, proj_size: int) -> bool:
    """Whether cuDNN runs the call on its block-persistent kernels (a GRU of hidden size up to PERSISTENT_HIDDEN)."""
    return mode == MODES["gru"] and hidden_size <= PERSISTENT_HIDDEN and not proj_size


def _biased(weight_stride0: int) -> bool:
    return weight_stride0 in (4, 5)  # w_ih, w_hh, b_ih, b_hh (and an LSTM's w_hr)


def forward_kernels(args, kwargs) -> int:
    """The kernels one `aten._cudnn_rnn` call launches: per layer and direction 2 or 3 on the persistent kernels, else
    1 + (2 or 3) x steps; the dropouts between its layers; a batch_first input's copy."""
    input, weights, weight_stride0, mode, hidden_size, proj_size, num_layers, batch_first, dropout, train = (
        args[i] for i in (0, 1, 2, 6, 7, 8, 9, 10, 11, 12))
    if persistent(mode, hidden_size, proj_size):
        per_layer = lambda layer: PERSISTENT_FORWARD + _biased(weight_stride0)
    else:
        per_layer = lambda layer: 1 + (1 + layer.per_step_gemms()) * layer.steps
    return _dropouts(num_layers, dropout, train) + bool(batch_first) + sum(
        map(per_layer, _layers(input, weights, weight_stride0, batch_first)))


def backward_flops(input, weights, weight_stride0, weight_buf, hx, cx, output, grad_output, grad_hy, grad_cy, mode,
                   hidden_size, proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes,
                   dropout_state, reserve, output_mask, *args, out_val=None, **kwargs) -> int:
    """The GEMM FLOPs of one `aten._cudnn_rnn_backward` call: the forward's for the data, again for the weights."""
    data = forward_flops(input, weights, weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size, num_layers,
                         batch_first, dropout, train, bidirectional)
    return data * (2 if output_mask[3] else 1)


def backward_kernels(args, kwargs) -> int:
    """The kernels one `aten._cudnn_rnn_backward` call launches: per layer and direction 4 on the persistent kernels
    (5 more when the weights need gradients), else (2 or 3) x steps + 1 (3 or 4 more); the dropouts between its
    layers; torch's copies of a batch_first input (twice with the weights' gradients) and of its output's gradient,
    the zeroed weight gradients and a zeros_like for each gradient that is undefined."""
    (input, weights, weight_stride0, cx, grad_output, grad_hy, grad_cy, mode, hidden_size, proj_size, num_layers,
     batch_first, dropout, train, output_mask) = (args[i] for i in (0, 1, 2, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 21))
    weighted = bool(output_mask[3])
    if persistent(mode, hidden_size, proj_size):
        per_layer = lambda layer: PERSISTENT_BACKWARD + (PERSISTENT_WEIGHT_GRADIENT if weighted else 0)
    else:
        per_layer = lambda layer: ((1 + layer.per_step_gemms()) * layer.steps + 1
                                   + (WEIGHT_GRADIENT_KERNELS + bool(layer.projected) if weighted else 0))
    wrapper = ((2 + weighted if batch_first else 0) + weighted + (grad_output is None) + (grad_hy is None)
               + (cx is not None and grad_cy is None))
    return _dropouts(num_layers, dropout, train) + wrapper + sum(
        map(per_layer, _layers(input, weights, weight_stride0, batch_first)))


def _backward_shapes(input, weights, weight_stride0, weight_buf, hx, cx, *args):
    """`aten._cudnn_rnn_backward` on the meta device, which torch gives no kernel for: its gradients' shapes (input,
    hx, cx, each weight), those output_mask leaves out undefined or empty."""
    output_mask = args[15]
    return (torch.empty_like(input) if output_mask[0] else None,
            torch.empty_like(hx) if output_mask[1] else None,
            torch.empty_like(cx) if cx is not None and output_mask[2] else None,
            [torch.empty_like(w) for w in weights] if output_mask[3] else [])


GRU_WORKSPACE = 5  # hidden-sized blocks CUDA's fused GRU cell keeps per row for its backward


def _gru_cell_shapes(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """`aten._thnn_fused_gru_cell` on the meta device: the new hidden state and the workspace."""
    return torch.empty_like(hx), hx.new_empty((hx.shape[0], hx.shape[1] * GRU_WORKSPACE))


def _gru_cell_backward_shapes(grad_hy, workspace, has_bias):
    """`aten._thnn_fused_gru_cell_backward` on the meta device: the gradients of both gates, of hx and of the
    biases (empty without them)."""
    rows, hidden = grad_hy.shape
    gates = grad_hy.new_empty((rows, 3 * hidden))
    bias = grad_hy.new_empty((3 * hidden,) if has_bias else (0,))
    return gates, torch.empty_like(gates), torch.empty_like(grad_hy), bias, torch.empty_like(bias)


def _cell_backward_kernels(bias_reductions: int):
    """A fused cell's backward on CUDA: its kernel, and with biases a reduction for each of their gradients (the
    GRU cell's two, the LSTM cell's one); has_bias is the call's last argument."""
    return lambda args, kwargs: 1 + bias_reductions * bool(args[-1])


_meta_kernels = torch.library.Library("aten", "IMPL")
_meta_kernels.impl("_cudnn_rnn_backward", _backward_shapes, "Meta")
_meta_kernels.impl("_thnn_fused_gru_cell", _gru_cell_shapes, "Meta")
_meta_kernels.impl("_thnn_fused_gru_cell_backward", _gru_cell_backward_shapes, "Meta")


FORMULAS = {aten._cudnn_rnn: forward_flops, aten._cudnn_rnn_backward: backward_flops}
KERNELS = {aten._cudnn_rnn: forward_kernels, aten._cudnn_rnn_backward: backward_kernels,
           aten._thnn_fused_gru_cell_backward: _cell_backward_kernels(2),
           aten._thnn_fused_lstm_cell_backward_impl: _cell_backward_kernels(1)}
