"""Operations that launch more than one kernel on CUDA, for the census of a GPU unit (the stand-in's or a real GPU's):
the kernels one call launches, from its arguments' shapes. The census counts one kernel per operation it sees; the
kernels below are issued inside an operation's CUDA implementation, under the dispatch mode, so it cannot see them.

Each rule comes from what torch.profiler counted on an NVIDIA H200 (torch 2.11.0+cu130, float32; the shipped records
results/intel-r-xeon-r-processor-8e260d9d/iris-20261127T071036-86faf3.json and cnn-20261127T071417-9e258b.json, their
operator tables as measured, commit f22d75e):
- a GEMM (`mm`, `addmm`) is one cuBLAS kernel, or two: the iris MLP's five GEMMs per epoch (150 x 4 -> 10 -> 3: the
  forward's (150, 10, 4) and (150, 3, 10) with their biases, the backward's (150, 10, 3), (3, 10, 150) and (10, 4, 150)
  as (rows, columns, inner)) launched 10 kernels, each a GEMM and a second kernel (a split-K reduction, a bias
  epilogue or a beta scaling), as did the CNN's (16, 84, 4096) weight gradient (a split-K GEMM and its reduction)
  and (1, 16, 4096) bias-like product (a dot kernel and its reduction); the GRU's and the 1-D CNN's GEMMs with every
  dimension a multiple of 4, a vector output or a single inner column ((512, 1, 64), (512, 64, 1), (1, 64, 512),
  (16, 84, 16), (4096, 16, 84)) launched one. The rule: two kernels when the output is a matrix (rows and columns
  over 1), the inner dimension is over 1 and a dimension is not a multiple of 16 bytes' elements (cuBLAS's aligned
  single-kernel GEMMs need it), or when the inner dimension is at least SPLIT_K times the larger output dimension
  (cuBLAS splits it and reduces the parts); else one. Other GPUs and libraries may choose otherwise.
- `nll_loss_backward` zeroes its gradient (a fill) before its kernel: 2 (iris: 2,000 `aten::zero_` fills an
  epoch per 2,000 calls);
- `mse_loss` with a reduction writes the squared errors, then reduces them: 2 (the GRU's: an element-wise kernel and a
  mean reduction per call); `mse_loss_backward` fills a zeros_like gradient before its kernel: 2;
- `select_backward` fills a zeros gradient, then copies the selected slice into it: 2 (the GRU's `last[-1]`).
The 1-D CNN's and MNIST's steps (the same cnn record's operator tables, commit f22d75e; the 1-D CNN at batches 16, 512,
1024 and 4096 launched 42, 45, 47 and 46 kernels a step, MNIST at 64 and 512 56, where the census had counted 32 and 36)
give the rest:
- `addmm` copies its bias into the output first (a direct_copy kernel) unless cuBLASLt takes the bias in its epilogue,
  which it does for a 1-D bias of the output's columns, beta 1, a floating dtype and every dimension over 1: the 1-D
  CNN's head (512 x 16 -> 1, bias [1]) launched one direct_copy a step at every batch; MNIST's layers (bias [128] and
  [10]) and iris's none. So +1 kernel on the GEMM's.
- a convolution on cuDNN (`convolution`) runs its kernel, then adds the bias (a CUDAFunctor_add): the 1-D CNN's two
  convolutions and MNIST's two launched 2 adds a step. Its backward (`convolution_backward`) runs one kernel for the
  input's gradient (dgrad), one for the weights' (wgrad) and a reduction for the bias's, each only when its output
  mask asks: the 1-D CNN's 6 a step at batch 16 (2 dgrad, 2 wgrad, and 2 of its 4 sum reductions; its linear layers'
  biases the other 2). Where cuDNN picks its TF32 tensor-core kernels (float32 with cuDNN's TF32 allowed, as the H200's
  run allowed it: cuDNN's default then), it runs them in NHWC: the input and weight are transposed in and the output
  back (nchwToNhwc, nhwcToNchw): +3 forward, +3 for the input's gradient, +2 for the weights': MNIST's second
  convolution (32 -> 64 channels, 3 x 3) launched 6 nchwToNhwc and 2 nhwcToNchw a step, its first (1 channel) and the
  1-D CNN's (1 and 8 channels) none, so TENSOR_CORE_CHANNELS input channels or more. (cuDNN's choices beyond these:
  dgrad_engine's scalePackedTensor at the 1-D CNN's batches 512+ and a split-K reduction or workspace kernel for
  MNIST's wgrad at batch 64, 1 or 2 a step, are left out.)
- `max_pool2d_with_indices_backward` zeroes its gradient (gradInput.zero_(), a fill) before its kernel: 2 (the 1-D
  CNN's and MNIST's one max pool each: a fill a step that no operation of the census accounted for).
Two operations the meta device runs otherwise than CUDA, so that the stand-in counts what CUDA launches, within
`as_cuda()`:
- `mish_backward` has a CUDA kernel but, on meta, only its CompositeImplicitAutograd decomposition (softplus, tanh,
  sigmoid, 4 mul, add, sub_, fill_: 10 operations): within as_cuda() a stand-in call reaches the census as the one
  operation (the 1-D CNN's 3 mish_backward a step on the H200: 3 mish_backward_kernel, where the stand-in had counted
  30).
- `dropout` (nn.Dropout, F.dropout) runs CUDA's fused `native_dropout` (fused_dropout_kernel_vec, and
  native_dropout_backward's masked_scale_kernel: 1 each, MNIST's 2 dropouts a step) where torch takes it, a CUDA tensor
  in training with 0 < p < 1; on meta it takes bernoulli_, div_ and mul (3) instead: within as_cuda() a stand-in
  dropout takes the fused one.
The rules apply to CUDA tensors, and to the stand-in's (meta) within `as_cuda()` (core.measure.standin.playing_cuda): a
CPU's census, or the stand-in playing a CPU, counts one kernel per call as before."""
from contextlib import ExitStack, contextmanager
from typing import Iterator
from unittest import mock

import torch
from torch.nn import functional

aten = torch.ops.aten
ALIGNMENT_BYTES = 16  # cuBLAS's aligned GEMM kernels read operands in 16-byte vectors
SPLIT_K = 16  # an inner dimension this many times the output's larger dimension is split, and the parts reduced
NO_REDUCTION = 0  # torch's Reduction::None
EPILOGUE_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)  # cuBLASLt's bias epilogue's
TENSOR_CORE_CHANNELS = 32  # input channels from which cuDNN ran a float32 convolution on TF32 tensor cores (the H200's)
NHWC_FORWARD, NHWC_INPUT_GRADIENT, NHWC_WEIGHT_GRADIENT = 3, 3, 2  # the transposes around each of those kernels


def gemm_kernels(rows: int, columns: int, inner: int, element_size: int) -> int:
    """The kernels cuBLAS launches for one (rows x inner) @ (inner x columns) product (the H200's choices above)."""
    per_vector = max(1, ALIGNMENT_BYTES // element_size)
    matrix = rows > 1 and columns > 1 and inner > 1
    if matrix and any(d % per_vector for d in (rows, columns, inner)):
        return 2
    return 2 if inner >= SPLIT_K * max(rows, columns) else 1


def _mm_kernels(args, kwargs) -> int:
    a, b = args[0], args[1]
    if a.dim() != 2 or b.dim() != 2:
        return 1
    return gemm_kernels(a.shape[0], b.shape[1], a.shape[1], a.element_size())


def _bias_in_epilogue(bias, a, b, beta) -> bool:
    """Whether cuBLASLt adds an addmm's bias in its GEMM's epilogue (else torch copies it into the output first)."""
    return (bias.dim() == 1 and a.dim() == 2 and b.dim() == 2 and bias.shape[0] == b.shape[1] and beta == 1
            and bias.dtype in EPILOGUE_DTYPES and min(a.shape[0], a.shape[1], b.shape[1]) > 1)


def _addmm_kernels(args, kwargs) -> int:
    bias, a, b = args[0], args[1], args[2]
    beta = args[3] if len(args) > 3 else kwargs.get("beta", 1)
    return _mm_kernels(args[1:], kwargs) + (0 if _bias_in_epilogue(bias, a, b, beta) else 1)


def _tensor_cores(weight, transposed: bool) -> bool:
    """Whether cuDNN runs a convolution on its TF32 tensor-core kernels, in NHWC (the H200's choices above)."""
    channels = weight.shape[0] if transposed else weight.shape[1]
    return (weight.dtype == torch.float32 and torch.backends.cudnn.allow_tf32 and weight.dim() >= 3
            and channels >= TENSOR_CORE_CHANNELS)


def _convolution_kernels(args, kwargs) -> int:
    """convolution(input, weight, bias, stride, padding, dilation, transposed, ...): cuDNN's kernel, the bias's add,
    the NHWC transposes."""
    weight, bias = args[1], args[2] if len(args) > 2 else kwargs.get("bias")
    transposed = bool(args[6]) if len(args) > 6 else bool(kwargs.get("transposed", False))
    return 1 + (bias is not None) + (NHWC_FORWARD if _tensor_cores(weight, transposed) else 0)


def _convolution_backward_kernels(args, kwargs) -> int:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask): dgrad, wgrad and the bias's reduction, as the mask asks, with their NHWC
    transposes."""
    weight = args[2]
    transposed = bool(args[7]) if len(args) > 7 else bool(kwargs.get("transposed", False))
    mask = args[10] if len(args) > 10 else kwargs.get("output_mask", (True, True, True))
    nhwc = _tensor_cores(weight, transposed)
    kernels = ((1 + nhwc * NHWC_INPUT_GRADIENT) * bool(mask[0]) + (1 + nhwc * NHWC_WEIGHT_GRADIENT) * bool(mask[1])
               + bool(mask[2]))
    return max(1, kernels)


def _reduced(position: int):
    """Two kernels (the element-wise work and its reduction or fill) unless the call's reduction is none."""
    def kernels(args, kwargs) -> int:
        reduction = args[position] if len(args) > position else kwargs.get("reduction", 1)
        return 1 if reduction == NO_REDUCTION else 2
    return kernels


def _two(args, kwargs) -> int:
    return 2


_playing = [0]  # how many as_cuda() are open
_below_autograd = torch._C._after_autograd_keyset


def _mish_backward(keyset, grad_output, input):
    """aten::mish_backward for the stand-in's tensors in autograd: below autograd, where the census sees the one
    operation (the meta kernel underneath decomposes it unseen). Where a graph is being recorded through it, its
    decomposition as before."""
    if torch.is_grad_enabled() and (grad_output.requires_grad or input.requires_grad):
        tanh_softplus = torch.tanh(functional.softplus(input))
        return grad_output * (tanh_softplus + input * torch.sigmoid(input) * (1 - tanh_softplus * tanh_softplus))
    return aten.mish_backward.default.redispatch(keyset & _below_autograd, grad_output, input)


def _dropout(input, p, train):
    """torch._VF.dropout as on CUDA: CUDA's fused native_dropout for a stand-in tensor where torch fuses it."""
    if train and 0 < p < 1 and input.device.type == "meta" and input.numel() > 0:
        return torch.native_dropout(input, p, train)[0]
    return torch._VF.dropout(input, p, train)


class _CudaVF:
    """torch._VF as torch.nn.functional calls it, its dropout CUDA's."""

    def __getattr__(self, name: str):
        return _dropout if name == "dropout" else getattr(torch._VF, name)


@contextmanager
def as_cuda() -> Iterator[None]:
    """Within it, the stand-in's (meta) tensors count the kernels CUDA launches, and run mish_backward and dropout
    as CUDA's fused kernels."""
    with ExitStack() as outermost:
        if not _playing[0]:
            library = torch.library.Library("aten", "IMPL")
            outermost.callback(library._destroy)
            library.impl("mish_backward", _mish_backward, "AutogradMeta", with_keyset=True)
            outermost.enter_context(mock.patch.object(functional, "_VF", _CudaVF()))
        _playing[0] += 1
        try:
            yield
        finally:
            _playing[0] -= 1


def _on_cuda(rule):
    """`rule` for a call whose first tensor is on CUDA, or on the stand-in within as_cuda(); else one kernel."""
    def kernels(args, kwargs) -> int:
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        kind = first.device.type if first is not None else None
        return rule(args, kwargs) if kind == "cuda" or (kind == "meta" and _playing[0]) else 1
    return kernels


KERNELS = {packet: _on_cuda(rule) for packet, rule in (
    (aten.mm, _mm_kernels), (aten.addmm, _addmm_kernels), (aten.nll_loss_backward, _two),
    (aten.mse_loss, _reduced(2)), (aten.mse_loss_backward, _two), (aten.select_backward, _two),
    (aten.convolution, _convolution_kernels), (aten.convolution_backward, _convolution_backward_kernels),
    (aten.max_pool2d_with_indices_backward, _two))}
"""By overload packet: (args, kwargs) -> the kernels one call launches on CUDA."""
