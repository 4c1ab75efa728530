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
The rules apply to CUDA tensors, and to the stand-in's (meta) within `as_cuda()` (core.measure.standin.playing_cuda): a
CPU's census, or the stand-in playing a CPU, counts one kernel per call as before."""
from contextlib import contextmanager
from typing import Iterator

import torch

aten = torch.ops.aten
ALIGNMENT_BYTES = 16  # cuBLAS's aligned GEMM kernels read operands in 16-byte vectors
SPLIT_K = 16  # an inner dimension this many times the output's larger dimension is split, and the parts reduced
NO_REDUCTION = 0  # torch's Reduction::None


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


def _addmm_kernels(args, kwargs) -> int:
    return _mm_kernels(args[1:], kwargs)


def _reduced(position: int):
    """Two kernels (the element-wise work and its reduction or fill) unless the call's reduction is none."""
    def kernels(args, kwargs) -> int:
        reduction = args[position] if len(args) > position else kwargs.get("reduction", 1)
        return 1 if reduction == NO_REDUCTION else 2
    return kernels


def _two(args, kwargs) -> int:
    return 2


_playing = [0]  # how many as_cuda() are open


@contextmanager
def as_cuda() -> Iterator[None]:
    """Within it, the stand-in's (meta) tensors count the kernels CUDA launches."""
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
    (aten.mse_loss, _reduced(2)), (aten.mse_loss_backward, _two), (aten.select_backward, _two))}
"""By overload packet: (args, kwargs) -> the kernels one call launches on CUDA."""
