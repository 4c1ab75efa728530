"""Recurrent layers on the stand-in as torch runs them on a CPU (oneDNN's LSTM layer, the CPU's loop for the others):
checked against the census of the same module on the CPU itself, and the fused layer's FLOPs against counts worked
out by hand."""
import pytest
import torch
from torch import nn

from core.measure import census, standin
from core.measure.kernels import cpu_rnn

ONEDNN = pytest.mark.skipif(not cpu_rnn.runs_lstm(), reason="this torch has no oneDNN LSTM to play")
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


@ONEDNN
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


@ONEDNN
def test_dropout_between_layers_is_issued_in_training_as_on_the_cpu():
    cpu, stand_in = on_both(lambda: nn.LSTM(8, 16, num_layers=3, dropout=0.5), (5, 4, 8), train=True)
    assert stand_in["aten.mkldnn_rnn_layer"] == 3
    assert stand_in["aten.bernoulli_"] == 2  # a dropout mask after each layer but the last
    assert stand_in == cpu


@pytest.mark.parametrize("build, shape", [
    (lambda: nn.GRU(8, 16, batch_first=True), (4, 5, 8)),
    (lambda: nn.GRU(8, 16, num_layers=2, bidirectional=True, dropout=0.5), (5, 4, 8)),
    (lambda: nn.GRU(8, 16, bias=False), (5, 4, 8)),
    (lambda: nn.RNN(8, 16, num_layers=2, batch_first=True), (4, 5, 8)),
    (lambda: nn.RNN(8, 16, nonlinearity="relu", bidirectional=True), (5, 4, 8)),
    (lambda: nn.LSTM(8, 16, proj_size=4, num_layers=2), (5, 4, 8)),  # torch has no oneDNN path for a projection
    (lambda: nn.LSTM(8, 16, proj_size=4, bias=False, bidirectional=True, batch_first=True), (4, 5, 8)),
])
@pytest.mark.parametrize("train", [False, True])
def test_what_the_cpu_loops_over_runs_its_loop_on_the_stand_in(build, shape, train):
    cpu, stand_in = on_both(build, shape, train)
    assert not any(name in found for name in FUSED for found in (cpu, stand_in))
    assert stand_in == cpu
    assert shapes(build(), torch.randn(shape)) == shapes(build().to("meta"), torch.empty(shape, device="meta"))


def shapes(module: nn.Module, x: torch.Tensor) -> list:
    """The shapes of the output and the final states of one forward, the stand-in playing the CPU."""
    with standin.playing_cpu(), torch.no_grad():
        output, state = module(x)
    return [tuple(t.shape) for t in (output, *(state if isinstance(state, tuple) else (state,)))]


def test_the_cpu_s_loop_projects_every_step_s_input_at_once():
    found = calls(nn.GRU(8, 16).to("meta"), torch.empty(5, 4, 8, device="meta"), train=False)
    # one linear over the 5 steps' inputs and one per step for the hidden state, not two per step
    assert found["aten.addmm"] + found.get("aten.mm", 0) == 1 + 5


def test_a_packed_sequence_keeps_the_step_by_step_operations():
    lstm = nn.LSTM(8, 16, device="meta")
    packed = nn.utils.rnn.PackedSequence(torch.empty(12, 8, device="meta"), torch.tensor([4, 3, 3, 2]))
    with standin.playing_cpu(), torch.no_grad():
        found = census.of(lambda: lstm(packed), "meta").by_op()
    assert not any(name in found for name in FUSED) and STEP_OPS & found.keys()


@ONEDNN
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
