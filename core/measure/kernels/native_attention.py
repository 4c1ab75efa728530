"""nn.TransformerEncoderLayer's and nn.MultiheadAttention's inference fast path on the stand-in, as torch runs it on
a CPU and on CUDA.

In eval mode, without autograd and under the other conditions the two modules' `forward` checks (batch first, an
even number of heads, ...), torch runs an encoder layer as one call, `torch._transformer_encoder_layer_fwd`, and
self-attention as another, `torch._native_multi_head_attention`: native kernels that issue their parts from C++. A
stand-in census never takes that path, for two of those checks: one refuses a tensor argument for which
`torch.overrides.has_torch_function` holds, which it does for every tensor while the census's TorchFunctionMode is
active; the other a device other than cpu, cuda, xpu and the private-use backend, and the stand-in's is meta.

Within `as_native(device)`, a module given a stand-in tensor runs its own checks with both answered as for a CPU or
CUDA tensor (the census's modes set aside, the stand-in's device named as the private-use backend), and the two calls
issue what the native kernels issue (aten/src/ATen/native/transformers/transformer.cpp and attention.cpp; on a CPU as
torch.profiler shows them on this torch), the first as Python's call and the rest as C++'s:
- the encoder layer: self-attention (below), its input added in place, layer_norm, the feed-forward's two GEMMs (the
  first with its ReLU or GELU: `_addmm_activation`, one cuBLASLt kernel on CUDA, an addmm and the activation in place
  on a CPU), the feed-forward's input added in place, layer_norm; with `norm_first`, each layer_norm before its block;
- self-attention, torch's native path: the QKV projection (a GEMM without its bias), `_transform_bias_rescale_qkv`
  (one pass that adds the bias, scales the queries and splits the heads; it has no meta kernel, so it is issued as the
  one add of the bias that writes the same elements), the scores' batched GEMM, their softmax (a masked softmax, which
  has no meta kernel either, as a softmax of the same scores), the context's batched GEMM, the heads merged (a
  contiguous copy) and the output projection (addmm); with `need_weights`, the weights averaged over the heads;
- on CUDA, self-attention with the head width a multiple of 8, no mask and no weights asked for takes SDPA instead:
  the QKV linear with its bias, F.scaled_dot_product_attention, the heads merged (a copy) and the output projection."""
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Iterator
from unittest import mock

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils import backend_registration

from core import devices

aten = torch.ops.aten
SDPA_HEAD_MULTIPLE = 8  # CUDA's native attention takes SDPA for a head width that is a multiple of this
DEVICES = ("cpu", "cuda")


@contextmanager
def as_native(device: str) -> Iterator[None]:
    """Within it, nn.TransformerEncoderLayer and nn.MultiheadAttention take for stand-in tensors the fast path they
    take on `device` ('cpu' or 'cuda'), and it issues what the native kernels issue there."""
    if device not in DEVICES:
        raise ValueError(f"device: {device!r} is not one of {DEVICES}")
    attention = _attention_on(device)
    with ExitStack() as patches:
        for module in (nn.TransformerEncoderLayer, nn.MultiheadAttention):
            patches.enter_context(mock.patch.object(module, "forward", _checked_as_native(module.forward)))
        for name, native in (("_native_multi_head_attention", attention),
                             ("_transformer_encoder_layer_fwd", _encoder_layer(attention, device))):
            patches.enter_context(mock.patch.object(torch, name, _for_stand_in(native, getattr(torch, name))))
        yield


def _checked_as_native(forward):
    """`forward` with the module's fast-path checks answered for a stand-in input as for a CPU or CUDA tensor."""
    def checked(self, first, *args, **kwargs):
        if not devices.holds_stand_in(first):
            return forward(self, first, *args, **kwargs)
        with mock.patch.object(torch.overrides, "has_torch_function", _has_torch_function), \
                mock.patch.object(backend_registration, "_privateuse1_backend_name", devices.STAND_IN):
            return forward(self, first, *args, **kwargs)
    return checked


def _for_stand_in(native, original):
    """`native` for a stand-in input; torch's own call for any other (another thread's real run)."""
    def call(first, *args, **kwargs):
        return (native if devices.holds_stand_in(first) else original)(first, *args, **kwargs)
    return call


_original_has_torch_function = torch.overrides.has_torch_function


def _has_torch_function(args) -> bool:
    """torch's answer with the census's TorchFunctionModes set aside: whether an argument's type overrides
    __torch_function__."""
    with ExitStack() as popped:
        for _ in range(torch._C._len_torch_function_stack()):
            popped.enter_context(torch.overrides._pop_mode_temporarily())
        return _original_has_torch_function(args)


def _attention_on(device: str):
    def attention(query, key, value, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask=None,
                  need_weights=True, average_attn_weights=True, mask_type=None):
        head = embed_dim // num_heads
        if (device == "cuda" and query is key and key is value and head % SDPA_HEAD_MULTIPLE == 0 and mask is None
                and not need_weights):
            return _sdpa_attention(query, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias), None
        return _native_attention(query, key, value, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
                                 need_weights, average_attn_weights)
    return attention


def _native_attention(query, key, value, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
                      need_weights, average_attn_weights):
    batch, length, width = query.shape
    head = width // num_heads
    qkv = _qkv_projection(query, key, value, qkv_weight)  # its first operation Python's call, the rest C++'s
    with torch._C.DisableTorchFunction():
        # _transform_bias_rescale_qkv: [B, T, 3 x D] plus the bias, written as [3, B, heads, T, head]
        split = torch.empty((3, batch, num_heads, length, head), dtype=qkv.dtype, device=qkv.device)
        torch.add(qkv.view(batch, length, 3, num_heads, head).permute(2, 0, 3, 1, 4),
                  qkv_bias.view(3, 1, num_heads, 1, head), out=split)
        q, k, v = split.view(3 * batch, num_heads, length, head).split(batch)
        scores = torch.bmm(q.view(batch * num_heads, length, head), k.view(batch * num_heads, length, head)
                           .transpose(2, 1)).view(batch, num_heads, length, length)
        if mask is not None and mask.dtype != torch.bool:
            mask.to(torch.bool)  # torch's conversion; the masked softmax is priced as the softmax below
        scores = torch._softmax(scores, -1, False)
        context = torch.bmm(scores.view(batch * num_heads, length, length),
                            v.view(batch * num_heads, length, head)).view(batch, num_heads, length, head)
        merged = context.permute(0, 2, 1, 3).contiguous().view(batch * length, width)
        out = torch.addmm(proj_bias, merged, proj_weight.t()).view(batch, length, width)
        weights = scores.sum(1).div_(num_heads) if need_weights and average_attn_weights else (
            scores if need_weights else None)
    return out, weights


def _qkv_projection(query, key, value, qkv_weight):
    """[B, T, 3 x D]: self-attention's one GEMM, else one per projection joined (torch's qkv_projection)."""
    width = query.shape[-1]
    if query is key and key is value:
        return F.linear(query, qkv_weight)
    with torch._C.DisableTorchFunction():
        if key is value:
            q_weight, kv_weight = qkv_weight.split([width, 2 * width])
            return torch.cat([torch.matmul(query, q_weight.t()), torch.matmul(key, kv_weight.t())], 2)
        weights = qkv_weight.chunk(3)
        return torch.cat([torch.matmul(x, w.t()) for x, w in zip((query, key, value), weights)], 2)


def _sdpa_attention(query, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias):
    batch, length, width = query.shape
    qkv = F.linear(query, qkv_weight, qkv_bias)
    with torch._C.DisableTorchFunction():
        q, k, v = (part.view(batch, length, num_heads, width // num_heads).transpose(1, 2)
                   for part in qkv.chunk(3, -1))
        attended = F.scaled_dot_product_attention(q, k, v)
        return F.linear(attended.transpose(1, 2).reshape(batch, length, width), proj_weight, proj_bias)


def _encoder_layer(attention, device: str):
    def layer(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
              norm1_weight, norm1_bias, norm2_weight, norm2_bias, ffn1_weight, ffn1_bias, ffn2_weight, ffn2_bias,
              mask=None, mask_type=None):
        def norm(x, weight, bias):
            return F.layer_norm(x, (embed_dim,), weight, bias, eps)
        x = src
        if norm_first:
            x = norm(x, norm1_weight, norm1_bias)  # Python's call: the rest are C++'s
        with torch._C.DisableTorchFunction() if norm_first else nullcontext():
            x = attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, False,
                          True, mask_type)[0]
        with torch._C.DisableTorchFunction():
            x.add_(src)
            if not norm_first:
                x = norm(x, norm1_weight, norm1_bias)
            before_ffn = x
            if norm_first:
                x = norm(x, norm2_weight, norm2_bias)
            x = _ffn_linear(x, ffn1_weight, ffn1_bias, device, "gelu" if use_gelu else "relu")
            x = _ffn_linear(x, ffn2_weight, ffn2_bias, device, None)
            x.add_(before_ffn)
            if not norm_first:
                x = norm(x, norm2_weight, norm2_bias)
        return x
    return layer


def _ffn_linear(x, weight, bias, device: str, activation: str | None):
    """torch's linear_for_ffn: one GEMM over every row, its activation fused on CUDA (cuBLASLt's epilogue) and in
    place after it on a CPU."""
    batch, length, _ = x.shape
    rows = torch.addmm(bias, x.view(batch * length, x.shape[-1]), weight.t())
    if activation and device == "cpu":
        rows = aten.relu_(rows) if activation == "relu" else aten.gelu_(rows)
    return rows.view(batch, length, -1)
