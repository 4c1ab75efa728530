"""F.scaled_dot_product_attention on the stand-in as torch runs it on a CUDA GPU of compute capability 8.0 or later
(the A100's, the H100's and the H200's; a GPU before it may choose otherwise).

On the meta device torch always takes the math path (a scaled GEMM, a softmax and a GEMM, each an operation, several
kernels on a GPU). On such a CUDA GPU it takes one fused call wherever its own checks allow
(aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, in its default order): flash attention
(`aten._scaled_dot_product_flash_attention`) for float16 and bfloat16 without a mask, head sizes equal and at most
256; else memory-efficient attention (`aten._scaled_dot_product_efficient_attention`), a boolean mask first made
additive, for query and value head sizes multiples of the GEMMs' alignment (4 elements of float32, 8 of a
half-precision type) and query and key head sizes equal; else the math path. Within `as_cuda()` a stand-in call issues
what such a GPU's call issues, the first operation as Python's call and the rest as C++'s; grouped-query attention
(enable_gqa) keeps the math path. Each fused call counts as one kernel, its backward as one; their FLOPs are
torch.utils.flop_counter's. (cuDNN's attention, which torch prefers on compute capability 9.0 and 10.0 with a recent
cuDNN for half-precision inputs, is left out: flash attention stands in for it.)"""
from contextlib import contextmanager
from typing import Iterator
from unittest import mock

import torch
import torch.nn.functional as F

from core import devices
from core.measure.kernels import cpu_attention

aten = torch.ops.aten
FLASH_DTYPES = (torch.float16, torch.bfloat16)
FLASH_LARGEST_HEAD = 256
GEMM_ALIGNMENT_BITS = 128  # memory-efficient attention's head sizes: a multiple of this many bits' elements


@contextmanager
def as_cuda() -> Iterator[None]:
    """Within it, F.scaled_dot_product_attention runs stand-in tensors as torch runs CUDA tensors on an sm80+ GPU."""
    with mock.patch.object(F, "scaled_dot_product_attention", _scaled_dot_product_attention):
        yield


_original = F.scaled_dot_product_attention


def _scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                  enable_gqa=False):
    if devices.holds_stand_in(query) and not enable_gqa:
        if flash_takes(query, key, value, attn_mask):
            return aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, scale=scale)[0]
        if efficient_takes(query, key, value):
            return _efficient(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return _original(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


def flash_takes(query, key, value, attn_mask) -> bool:
    sizes = {query.shape[-1], key.shape[-1], value.shape[-1]}
    return (attn_mask is None and query.dtype in FLASH_DTYPES and len(sizes) == 1
            and max(sizes) <= FLASH_LARGEST_HEAD)


def efficient_takes(query, key, value) -> bool:
    alignment = GEMM_ALIGNMENT_BITS // (8 * query.element_size())
    return (query.shape[-1] == key.shape[-1] and query.shape[-1] % alignment == 0
            and value.shape[-1] % alignment == 0)


def _efficient(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """The operations an efficient-attention call issues: its log-sum-exp kept for a backward that will need it."""
    keeps = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        with torch._C.DisableTorchFunction():
            zero = torch.scalar_tensor(0.0, dtype=query.dtype, device=query.device)
        attn_mask = cpu_attention.additive_mask(attn_mask, zero)
    return aten._scaled_dot_product_efficient_attention(query, key, value, attn_mask, keeps, dropout_p, is_causal,
                                                        scale=scale)[0]
