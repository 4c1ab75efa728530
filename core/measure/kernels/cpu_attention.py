"""F.scaled_dot_product_attention on the stand-in as torch runs it on a CPU, and how that kernel splits its work.

On the meta device torch always takes the math path (a scaled GEMM, a softmax and a GEMM, each an operation); on a
CPU it takes, wherever torch's own choice (`torch._fused_sdp_choice`) allows (float inputs, no dropout, a contiguous
last dimension), one fused call: `aten._scaled_dot_product_flash_attention_for_cpu`, a boolean mask first made
additive (aten/src/ATen/native/transformers/attention.cpp). Within `as_cpu()` a stand-in call issues what a CPU
call issues, choosing as torch would for CPU tensors of the same shapes and strides.

The kernel (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp) works in blocks of query rows by key columns: per
batch and head, `query_split` rows (fewer for the last) against at most KEY_SPLIT keys at a time, each block two
small GEMMs and an exp per score (the backward five GEMMs), the blocks spread over the threads. Its FLOPs are
torch.utils.flop_counter's for SDPA (the CPU's op is not in its registry); a causal call is counted and priced
as a full one (it skips the key blocks past the diagonal only beyond KEY_SPLIT keys)."""
import math
from contextlib import contextmanager
from typing import Iterator
from unittest import mock

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend
from torch.utils import flop_counter
from torch.utils._python_dispatch import _disable_current_modes

from core import devices

aten = torch.ops.aten
FORWARD = aten._scaled_dot_product_flash_attention_for_cpu
BACKWARD = aten._scaled_dot_product_flash_attention_for_cpu_backward
KEY_SPLIT = 512
QUERY_SPLITS = ((768, 256), (192, 64), (0, 32))  # from this many queries on, blocks of this many rows
FLASH = int(SDPBackend.FLASH_ATTENTION)  # torch._fused_sdp_choice's answer for this kernel


def query_split(query_length: int) -> int:
    """The query rows of one of the kernel's blocks, by the query's length (its last block may have fewer)."""
    return next(rows for shortest, rows in QUERY_SPLITS if query_length >= shortest)


def blocks(query_length: int, key_length: int) -> list[tuple[int, int, int]]:
    """One head's blocks as (query rows, key columns, how many blocks that size)."""
    counts = {}
    for rows in _splits(query_length, query_split(query_length)):
        for columns in _splits(key_length, KEY_SPLIT):
            counts[rows, columns] = counts.get((rows, columns), 0) + 1
    return [(rows, columns, count) for (rows, columns), count in counts.items()]


def _splits(length: int, size: int) -> list[int]:
    whole, rest = divmod(length, size)
    return [size] * whole + ([rest] if rest else [])


def query_length_for(rows: int) -> int:
    """The shortest query whose blocks all have `rows` rows (a probe's, core.calibration.calibrate): 32, 64 or 256 rows."""
    lengths = {split: max(shortest, split) for shortest, split in QUERY_SPLITS}
    if rows not in lengths:
        raise ValueError(f"rows: {rows} is not one of the kernel's block heights {sorted(lengths)}")
    return lengths[rows]


@contextmanager
def as_cpu() -> Iterator[None]:
    """Within it, F.scaled_dot_product_attention runs stand-in tensors as torch runs CPU tensors."""
    with mock.patch.object(F, "scaled_dot_product_attention", _scaled_dot_product_attention):
        yield


_original = F.scaled_dot_product_attention


def _scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                  enable_gqa=False):
    if (devices.holds_stand_in(query) and not enable_gqa
            and _cpu_choice(query, key, value, attn_mask, dropout_p, is_causal, scale) == FLASH):
        return _flash(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return _original(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


def _cpu_choice(query, key, value, attn_mask, dropout_p, is_causal, scale) -> int:
    """torch's choice of kernel for CPU tensors shaped and strided as these, out of the census's sight."""
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        mask = _cpu_like(attn_mask) if isinstance(attn_mask, torch.Tensor) else attn_mask
        return torch._fused_sdp_choice(_cpu_like(query), _cpu_like(key), _cpu_like(value), mask, dropout_p,
                                       is_causal, scale=scale)


def _cpu_like(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor of t's shape, dtype and last stride that holds one row (the choice reads no data)."""
    last = t.stride(-1) if t.dim() else 1
    row = torch.zeros(max(t.shape[-1] * last, 1) if t.dim() else 1, dtype=t.dtype)
    return row.as_strided(t.shape, (0,) * (t.dim() - 1) + ((last,) if t.dim() else ()))


def _flash(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """The operations a CPU call issues: the first as Python's call, the rest as C++'s."""
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return FORWARD(query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]
    zero = torch.scalar_tensor(0.0, dtype=query.dtype, device=query.device)
    with torch._C.DisableTorchFunction():
        return FORWARD(query, key, value, dropout_p, is_causal, attn_mask=additive_mask(attn_mask, zero),
                       scale=scale)[0]


def additive_mask(attn_mask: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """A boolean mask as torch's fused kernels take it (0 where attended, -inf elsewhere, in `zero`'s dtype), its
    operations C++'s."""
    with torch._C.DisableTorchFunction():
        masked = torch.scalar_tensor(-math.inf, dtype=zero.dtype, device=zero.device)
        return torch.where(attn_mask, zero, masked)


def forward_flops(query, key, value, *args, out_val=None, **kwargs) -> int:
    """The FLOPs of one forward call (torch.utils.flop_counter's formula signature)."""
    return flop_counter.sdpa_flop_count(query.shape, key.shape, value.shape)


def backward_flops(grad_out, query, key, value, *args, out_val=None, **kwargs) -> int:
    return flop_counter.sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape)


FORMULAS = {FORWARD: forward_flops, BACKWARD: backward_flops}
