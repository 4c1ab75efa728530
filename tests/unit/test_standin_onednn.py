"""nn.LSTM on the stand-in as torch runs it on a CPU with oneDNN: checked against the census of the same module on
the CPU itself, and its FLOPs against counts worked out by hand."""
import pytest
import torch
from torch import nn

from core import census, standin, standin_onednn

pytestmark = pytest.mark.skipif(not standin_onednn.runs_lstm(),
                                reason="this torch runs a CPU LSTM step by step (no oneDNN): nothing to play")
FUSED = ("aten.mkldnn_rnn_layer", "aten.mkldnn_rnn_layer_backward")
STEP_OPS = {"aten.sigmoid_", "aten.tanh", "aten.tanh_", "aten.unsafe_split"}


def calls(module: nn.Module, x: torch.Tensor, train: bool) -> dict[str, int]:
    """Operation -> calls in one forward (with `train` and its backward) of `module` on `x`, on x's device, the
    stand-in playing the CPU."""
    def step():
        if not train:
            with torch.no_grad():
                return module(x)
        module(x)[0].sum().backward()
    with standin.playing_cpu():
        step()
        found = census.of(step, x.device.type).by_op()
    return {name: entry["count"] for name, entry in found.items()}


def on_both(build, shape, train: bool) -> tuple[dict[str, int], dict[str, int]]:
    torch.manual_seed(0)
    cpu = calls(build(), torch.randn(shape, requires_grad=train), train)
    stand_in = calls(build().to("meta"), torch.empty(shape, device="meta", requires_grad=train), train)
    return cpu, stand_in


@pytest.mark.parametrize("build, shape", [
    (lambda: nn.LSTM(8, 16, batch_first=True), (4, 5, 8)),
    (lambda: nn.LSTM(8, 16, num_layers=2, bidirectional=True), (5, 4, 8)),
    (lambda: nn.LSTM(8, 16, num_layers=3, bias=False, batch_first=True), (4, 5, 8)),
])
@pytest.mark.parametrize("train", [False, True])
def test_an_lstm_on_the_stand_in_issues_what_the_cpu_issues(build, shape, train):
    cpu, stand_in = on_both(build, shape, train)
    assert any(name in cpu for name in FUSED)  # the CPU did take oneDNN's path
    assert stand_in == cpu
    assert not STEP_OPS & stand_in.keys()


def test_dropout_between_layers_is_issued_in_training_as_on_the_cpu():
    cpu, stand_in = on_both(lambda: nn.LSTM(8, 16, num_layers=3, dropout=0.5), (5, 4, 8), train=True)
    assert stand_in["aten.mkldnn_rnn_layer"] == 3
    assert stand_in["aten.bernoulli_"] == 2  # a dropout mask after each layer but the last
    assert stand_in == cpu


@pytest.mark.parametrize("build, shape", [
    (lambda: nn.LSTM(8, 16, proj_size=4), (5, 4, 8)),  # torch has no oneDNN path for a projection
    (lambda: nn.GRU(8, 16), (5, 4, 8)),                # nor for a GRU
])
def test_what_the_cpu_runs_step_by_step_stays_step_by_step(build, shape):
    cpu, stand_in = on_both(build, shape, train=False)
    assert not any(name in found for name in FUSED for found in (cpu, stand_in))
    assert STEP_OPS & cpu.keys() and STEP_OPS & stand_in.keys()


def test_a_packed_sequence_keeps_the_step_by_step_operations():
    lstm = nn.LSTM(8, 16, device="meta")
    packed = nn.utils.rnn.PackedSequence(torch.empty(12, 8, device="meta"), torch.tensor([4, 3, 3, 2]))
    with standin.playing_cpu(), torch.no_grad():
        found = census.of(lambda: lstm(packed), "meta").by_op()
    assert not any(name in found for name in FUSED) and STEP_OPS & found.keys()


def test_the_fused_layer_s_flops_are_its_gemms():
    lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True, device="meta")
    x = torch.empty(5, 4, 8, device="meta")  # 5 steps, batch 4
    with standin.playing_cpu():
        lstm(x)[0].sum().backward()  # lazy state first
        found = census.of(lambda: lstm(x)[0].sum().backward(), "meta").by_op()
    # per layer and direction 2 x 5 steps x 4 rows x (input + 16) x 64 gate rows = 2,560 x (input + 16); layer 1's
    # input 8, layer 2's 32 (both directions' outputs): 2 directions x (2,560 x 24 + 2,560 x 48) = 368,640;
    # the backward twice that
    assert found["aten.mkldnn_rnn_layer"]["flops"] == 368_640
    assert found["aten.mkldnn_rnn_layer_backward"]["flops"] == 737_280
