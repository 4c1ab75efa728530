"""F.scaled_dot_product_attention on the stand-in playing a CUDA GPU (core.measure.kernels.cuda_attention): which of
torch's kernels a call takes, by its element type, head sizes and mask, as sdp_utils.cpp chooses on an sm80+ GPU."""
import pytest
import torch
import torch.nn.functional as F
from torch.utils import flop_counter

from core.measure import census, standin
from core.measure.kernels import cuda_attention

FLASH, EFFICIENT = "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_efficient_attention"


def operations(query, key, value, train: bool = False, playing=standin.playing_cuda, **kwargs) -> dict:
    """The census's operations (name -> its entry) of one call, and of its backward when `train`."""
    def step():
        if not train:
            with torch.no_grad():
                return F.scaled_dot_product_attention(query, key, value, **kwargs)
        F.scaled_dot_product_attention(query, key, value, **kwargs).sum().backward()
    with playing():
        step()
        return census.of(step, "meta").by_op()


def tensors(shape, dtype=torch.float32, train=False, value_head=None):
    query, key = (torch.empty(shape, dtype=dtype, device="meta", requires_grad=train) for _ in range(2))
    value = torch.empty(shape[:-1] + (value_head or shape[-1],), dtype=dtype, device="meta", requires_grad=train)
    return query, key, value


@pytest.mark.parametrize("dtype, head, mask, taken", [
    (torch.float32, 16, None, EFFICIENT),       # float32: never flash
    (torch.float32, 6, None, None),             # 6 is no multiple of 4 float32 elements: the math path
    (torch.float16, 64, None, FLASH),
    (torch.bfloat16, 6, None, FLASH),           # flash pads any head size up to 256
    (torch.float16, 64, "float", EFFICIENT),    # flash takes no mask
    (torch.float16, 12, "float", None),         # nor does efficient attention a head of 12 half-precision elements
    (torch.float32, 8, "bool", EFFICIENT),
])
def test_a_call_takes_the_kernel_a_cuda_gpu_would(dtype, head, mask, taken):
    query, key, value = tensors((2, 3, 40, head), dtype)
    masks = {None: None, "float": torch.empty(40, 40, dtype=dtype, device="meta"),
             "bool": torch.empty(40, 40, dtype=torch.bool, device="meta")}
    found = operations(query, key, value, attn_mask=masks[mask])
    fused = {FLASH, EFFICIENT} & set(found)
    assert fused == ({taken} if taken else set())
    assert ("aten.bmm" in found) == (taken is None)  # the math path's GEMMs
    assert ("aten.where" in found) == (mask == "bool" and taken is not None)  # made additive first


def test_a_training_call_runs_the_fused_backward_and_keeps_its_log_sum_exp():
    query, key, value = tensors((2, 3, 40, 16), train=True)
    found = operations(query, key, value, train=True)
    assert found[EFFICIENT]["count"] == found[EFFICIENT + "_backward"]["count"] == 1
    assert found[EFFICIENT]["flops"] == flop_counter.sdpa_flop_count(query.shape, key.shape, value.shape)


def test_grouped_query_attention_an_unaligned_value_head_and_the_cpu_keep_the_math_path():
    query, key, value = tensors((2, 4, 40, 16))
    assert EFFICIENT not in operations(query, key[:, :2], value[:, :2], enable_gqa=True)
    assert EFFICIENT not in operations(*tensors((2, 3, 40, 16), value_head=6))
    assert EFFICIENT not in operations(query, key, value, playing=standin.playing_cpu)


def test_a_real_tensors_call_inside_it_is_torch_s_own():
    torch.manual_seed(0)
    query = torch.randn(2, 3, 10, 8)
    expected = F.scaled_dot_product_attention(query, query, query)
    with cuda_attention.as_cuda():
        torch.testing.assert_close(F.scaled_dot_product_attention(query, query, query), expected)
