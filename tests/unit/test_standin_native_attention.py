"""The transformer's inference fast path on the stand-in (core.measure.kernels.native_attention): the GEMMs the
stand-in's census counts, playing a CPU, checked against those torch.profiler sees a CPU run in the same call; the
path taken where torch takes it, and only there."""
import pytest
import torch
from torch import nn
from torch.profiler import profile

from core.measure import census, standin
from core.measure.kernels import native_attention

GEMMS = {"mm", "bmm", "addmm", "_addmm_activation"}  # the profiler's names; _addmm_activation is an addmm on a CPU


class SelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, need_weights: bool, padded: bool = False):
        super().__init__()
        self.attend, self.need_weights = nn.MultiheadAttention(width, heads, batch_first=True), need_weights
        self.padded = padded

    def forward(self, x):
        # the last key of every row padding, when padded
        mask = torch.arange(x.shape[1], device=x.device).expand(x.shape[:2]) == x.shape[1] - 1 if self.padded else None
        out, weights = self.attend(x, x, x, key_padding_mask=mask, need_weights=self.need_weights)
        return out if weights is None else out + weights.sum()


MODELS = {
    "encoder layer": lambda: nn.TransformerEncoderLayer(32, 4, dim_feedforward=48, dropout=0.0, batch_first=True),
    "encoder layer, GELU, norm first": lambda: nn.TransformerEncoderLayer(
        32, 2, dim_feedforward=40, dropout=0.0, activation="gelu", norm_first=True, batch_first=True),
    "self-attention": lambda: SelfAttention(16, 2, need_weights=False),
    "self-attention with its weights": lambda: SelfAttention(16, 4, need_weights=True),
    "self-attention with a padding mask": lambda: SelfAttention(16, 2, need_weights=False, padded=True),
}


def census_of(model: nn.Module, x: torch.Tensor, playing) -> dict:
    model = model.to("meta").eval()
    x = x.to("meta")

    def call():
        with torch.no_grad():
            model(x)
    with playing():
        call()
        return census.of(call, "meta").summary()


def stand_in_gemms(summary: dict) -> list[tuple]:
    return sorted((op["op"].removeprefix("aten."), *matrices(op["shapes"]))
                  for op in summary["ops"] for _ in range(op["calls"]) if op["op"].removeprefix("aten.") in GEMMS)


def matrices(shapes: list) -> list[tuple]:
    """A GEMM's two operands (after addmm's bias; before bmm's out= argument)."""
    return [tuple(shape) for shape in shapes if len(shape) >= 2][:2]


def cpu_gemms(model: nn.Module, x: torch.Tensor) -> list[tuple]:
    """The GEMMs of one call on the CPU, as torch.profiler records them (those inside another GEMM left out)."""
    model = model.eval()
    with torch.no_grad():
        model(x)
        with profile(record_shapes=True) as run:
            model(x)
    found = []
    for event in run.events():
        name = event.name.removeprefix("aten::")
        parent = event.cpu_parent.name.removeprefix("aten::") if event.cpu_parent else None
        if name in GEMMS and parent not in GEMMS:
            found.append(("addmm" if name == "_addmm_activation" else name, *matrices(event.input_shapes)))
    return sorted(found)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_playing_a_cpu_the_stand_in_counts_the_gemms_the_cpu_runs(name):
    torch.manual_seed(0)
    x = torch.randn(3, 10, 32 if "encoder" in name else 16)
    summary = census_of(MODELS[name](), x, standin.playing_cpu)
    assert stand_in_gemms(summary) == cpu_gemms(MODELS[name](), x)


def test_the_fast_path_is_one_call_from_python_and_no_module_calls():
    x = torch.randn(3, 10, 32)
    summary = census_of(MODELS["encoder layer"](), x, standin.playing_cpu)
    ops = {op["op"]: op for op in summary["ops"]}
    assert "aten._scaled_dot_product_flash_attention_for_cpu" not in ops  # the module's own attention is not run
    assert sum(op["calls"] for op in summary["ops"] if not op["nested"]) == 1  # the call's first operation alone
    assert ops["aten.native_layer_norm"]["nested"] and ops["aten._softmax"]["nested"]
    assert [stretch["module_calls"] for stretch in summary["stretches"]] == [1]  # the layer's, none of its parts'


def test_outside_playing_a_device_or_in_training_the_stand_in_takes_the_modules_python_path():
    x = torch.randn(3, 10, 32)
    outside = census_of(MODELS["encoder layer"](), x, lambda: torch.no_grad())
    assert "aten._softmax" not in {op["op"] for op in outside["ops"]}
    assert outside["stretches"][0]["module_calls"] > 1

    model = MODELS["encoder layer"]().to("meta").train()
    x = x.to("meta")
    with standin.playing_cpu():
        model(x).sum().backward()
        trained = census.of(lambda: model(x).sum().backward(), "meta").summary()
    assert "aten._softmax" not in {op["op"] for op in trained["ops"]}


@pytest.mark.parametrize("need_weights, sdpa", [(False, True), (True, False)])
def test_on_cuda_self_attention_without_weights_takes_sdpa(need_weights, sdpa):
    summary = census_of(SelfAttention(16, 2, need_weights), torch.randn(3, 10, 16), standin.playing_cuda)
    gemms = stand_in_gemms(summary)
    # SDPA's QKV projection carries its bias (an addmm); the native path's is an mm, the bias added after
    assert (("addmm", (30, 16), (16, 48)) in gemms) == sdpa
    assert (("mm", (30, 16), (16, 48)) in gemms) == (not sdpa)


def test_a_device_it_cannot_play_is_refused():
    with pytest.raises(ValueError, match="device: 'mps' is not one of"):
        with native_attention.as_native("mps"):
            pass


def test_a_real_tensors_call_inside_it_is_torch_s_own():
    """Another thread's real run while a census plays a device: the native call computes as torch's does."""
    torch.manual_seed(0)
    layer, x = MODELS["encoder layer"]().eval(), torch.randn(3, 10, 32)
    with torch.no_grad():
        expected = layer(x)
        with native_attention.as_native("cpu"):
            found = layer(x)
    torch.testing.assert_close(found, expected)
