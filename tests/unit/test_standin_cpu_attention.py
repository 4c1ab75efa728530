"""F.scaled_dot_product_attention on the stand-in as torch runs it on a CPU: the census of a call on the stand-in,
playing the CPU, checked against the census of the same call on the CPU itself; the kernel's blocks worked out by
hand."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils import flop_counter

from core.measure import census, standin
from core.measure.kernels import cpu_attention

FLASH = "aten._scaled_dot_product_flash_attention_for_cpu"


class Attention(nn.Module):
    """A projection, then SDPA of its output with itself (what a small transformer's attention does)."""
    def __init__(self, features: int, mask: str | None = None, causal: bool = False, dropout: float = 0.0):
        super().__init__()
        self.project, self.mask, self.causal, self.dropout = nn.Linear(features, features), mask, causal, dropout

    def forward(self, x):
        x = self.project(x)
        length = x.shape[-2]
        mask = (None if self.mask is None else
                torch.ones(length, length, dtype=torch.bool, device=x.device).tril() if self.mask == "bool" else
                torch.zeros(length, length, device=x.device))
        return F.scaled_dot_product_attention(x, x, x, attn_mask=mask, is_causal=self.causal, dropout_p=self.dropout)


def operations(module: nn.Module, x: torch.Tensor, train: bool) -> dict[tuple, int]:
    """(operation, issued by C++) -> calls in one forward (with `train` and its backward), the stand-in playing the
    CPU."""
    def step():
        if not train:
            with torch.no_grad():
                return module(x)
        module(x).sum().backward()
    with standin.playing_cpu():
        step()
        ops = census.of(step, x.device.type).summary()["ops"]
    found = {}
    for op in ops:
        found[op["op"], op["nested"]] = found.get((op["op"], op["nested"]), 0) + op["calls"]
    return found


@pytest.mark.parametrize("mask, causal, dropout", [(None, False, 0.0), (None, True, 0.0), ("bool", False, 0.0),
                                                   ("float", False, 0.0), (None, False, 0.5)])
@pytest.mark.parametrize("train", [False, True])
def test_the_stand_in_issues_what_a_cpu_issues(mask, causal, dropout, train):
    shape = (2, 3, 40, 8)
    torch.manual_seed(0)
    on_cpu = operations(Attention(8, mask, causal, dropout), torch.randn(shape), train)
    on_stand_in = operations(Attention(8, mask, causal, dropout).to("meta"), torch.empty(shape, device="meta"), train)
    assert on_stand_in == on_cpu
    fused = (FLASH, False) in on_cpu or (FLASH, True) in on_cpu
    assert fused == (dropout == 0.0)  # torch's CPU kernel takes no dropout: the math path does it
    assert ((FLASH + "_backward", True) in on_cpu) == (fused and train)


def test_outside_playing_the_cpu_the_stand_in_takes_the_math_path():
    x = torch.empty(2, 3, 40, 8, device="meta")
    ops = census.of(lambda: F.scaled_dot_product_attention(x, x, x), "meta").by_op()
    assert FLASH not in ops and "aten.bmm" in ops


def test_the_fused_call_counts_sdpa_s_flops():
    query, key = torch.empty(2, 3, 40, 8, device="meta"), torch.empty(2, 3, 70, 8, device="meta")
    with standin.playing_cpu():
        found = census.of(lambda: F.scaled_dot_product_attention(query, key, key), "meta").by_op()
    assert found[FLASH]["flops"] == flop_counter.sdpa_flop_count(query.shape, key.shape, key.shape)
    assert found[FLASH]["flops"] == 2 * 2 * (2 * 3 * 40 * 70 * 8)  # two GEMMs of 40 x 8 by 8 x 70 a head


@pytest.mark.parametrize("queries, keys, blocks", [
    (16, 16, [(16, 16, 1)]),                                    # fewer than one block's rows and keys
    (64, 600, [(32, 512, 2), (32, 88, 2)]),                     # 32 rows below 192 queries; keys 512 at a time
    (200, 100, [(64, 100, 3), (8, 100, 1)]),                    # 64 rows from 192 queries
    (800, 1024, [(256, 512, 6), (32, 512, 2)]),                 # 256 rows from 768
])
def test_a_head_s_blocks_are_the_kernel_s(queries, keys, blocks):
    assert cpu_attention.blocks(queries, keys) == blocks
