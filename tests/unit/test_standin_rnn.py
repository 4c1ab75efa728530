"""Recurrent layers on the stand-in run as cuDNN's one call each way, cells as CUDA's fused kernels; elsewhere as they
always did. Expected counts are worked out by hand beside each assertion."""
import pytest
import torch
from torch import nn

from core.measure import census, standin
from core.experiments import get
from core.measure.experiment import Point

STEP_OPS = {"aten.sigmoid", "aten.sigmoid_", "aten.tanh", "aten.tanh_", "aten.unsafe_chunk", "aten.unsafe_split"}


def training_step(module: nn.Module, x: torch.Tensor) -> dict[str, dict]:
    """The census of one forward and backward of `module` on `x` within the stand-in's CUDA play, by operation."""
    def step():
        out = module(x)
        (out[0].sum() + sum(h.sum() for h in out[1:] if isinstance(h, torch.Tensor))).backward()
    with standin.playing_cuda():
        step()  # lazy state first, as a point's warm-up does
        return census.of(step, x.device.type).by_op()


def cudnn_ops(found: dict[str, dict]) -> dict[str, tuple[int, int, int]]:
    return {name: (entry["count"], entry["kernels"], entry["flops"]) for name, entry in found.items()
            if name.startswith("aten._cudnn_rnn")}


def test_a_gru_on_the_stand_in_is_one_cudnn_call_each_way_with_its_steps_kernels_and_gemm_flops():
    gru = nn.GRU(16, 64, batch_first=True, device="meta")
    found = training_step(gru, torch.empty(512, 32, 16, device="meta"))
    # hidden 64: cuDNN's persistent kernels, whatever the steps. forward: the input GEMM, the persistent kernel, the
    # biases' add, and torch's copy of the batch_first input = 4 kernels;
    # FLOPs 2 x 32 steps x 512 rows x (16 + 64) columns x 192 gate rows = 503,316,480
    # backward: 4 for the data, 5 for the weights, the zeroed weight gradients, the batch_first input's copy twice and
    # the output gradient's once = 13 kernels; FLOPs twice the forward's
    assert cudnn_ops(found) == {"aten._cudnn_rnn": (1, 4, 503_316_480),
                                "aten._cudnn_rnn_backward": (1, 13, 1_006_632_960)}
    assert not STEP_OPS & found.keys()  # no step-by-step operations left
    assert all(p.grad is not None and p.grad.shape == p.shape for p in gru.parameters())


def test_a_two_layer_bidirectional_lstm_counts_every_layer_and_direction():
    lstm = nn.LSTM(8, 32, num_layers=2, bidirectional=True, device="meta")
    x = torch.empty(10, 4, 8, device="meta")  # 10 steps, batch 4
    with standin.playing_cuda():
        output, (h, c) = lstm(x)
    assert (output.shape, h.shape, c.shape) == ((10, 4, 64), (4, 4, 32), (4, 4, 32))
    found = training_step(lstm, x)
    # 4 layer-directions x (1 + 2 x 10) = 84 forward kernels, 4 x (2 x 10 + 1 + 3) = 96 backward, + the zeroed
    # weight gradients and a zeros_like for each of the undefined h and c gradients (the step sums the output only) = 99.
    # FLOPs per layer-direction 2 x 10 x 4 x (input + 32) x 128 gate rows = 10,240 x (input + 32), layer 1's input
    # 8, layer 2's 64 (both directions' outputs): (10,240 x 40 + 10,240 x 96) x 2 directions = 2,785,280
    assert cudnn_ops(found) == {"aten._cudnn_rnn": (1, 84, 2_785_280), "aten._cudnn_rnn_backward": (1, 99, 5_570_560)}


@pytest.mark.parametrize("module, forward_kernels, backward_kernels", [
    # 5 steps; every backward zeroes the weight gradients (+1). A GRU of hidden 16 on cuDNN's persistent kernels: a
    # layer's forward 3 (2 without biases), its backward 4 + 5 for the weights
    (nn.GRU(8, 16, num_layers=2, dropout=0.3), 2 * 3 + 1, 2 * 9 + 1 + 1),  # one dropout between the layers, each way
    (nn.GRU(8, 16, bias=False), 2, 9 + 1),
    # else a layer's forward 1 + 2 x 5 = 11 kernels, its backward 2 x 5 + 1 + 3 = 14; a projection: a third GEMM per
    # step each way, and one for its weight: 1 + 3 x 5 = 16, 3 x 5 + 1 + 4 = 20; the LSTMs' undefined h and c
    # gradients (a tuple, which the step does not sum) a zeros_like each
    (nn.LSTM(8, 16, proj_size=4, num_layers=2), 2 * 16, 2 * 20 + 1 + 2),
    (nn.LSTM(8, 16, proj_size=4, bias=False, bidirectional=True), 2 * 16, 2 * 20 + 1 + 2),
    (nn.RNN(8, 16, nonlinearity="relu"), 11, 14 + 1)],
    ids=["gru dropout", "gru no bias", "lstm projection", "lstm projection no bias bidirectional", "rnn relu"])
def test_every_layer_option_runs_as_one_cudnn_call_with_a_gradient_for_each_weight(module, forward_kernels,
                                                                                    backward_kernels):
    module = module.to("meta")
    found = training_step(module, torch.empty(5, 3, 8, device="meta"))
    assert (found["aten._cudnn_rnn"]["count"], found["aten._cudnn_rnn"]["kernels"]) == (1, forward_kernels)
    assert (found["aten._cudnn_rnn_backward"]["count"], found["aten._cudnn_rnn_backward"]["kernels"]) == (
        1, backward_kernels)
    assert all(p.grad is not None and p.grad.shape == p.shape for p in module.parameters())


def test_an_lstms_projection_adds_its_gemm_to_the_flops():
    lstm = nn.LSTM(8, 16, proj_size=4, device="meta")
    found = training_step(lstm, torch.empty(5, 3, 8, device="meta"))
    # 2 x 5 steps x 3 rows x ((8 input + 4 projected) columns x 64 gate rows + 16 x 4 projection) = 24,960; the
    # backward's 20 kernels, the zeroed weight gradients and the undefined h and c gradients' zeros_like = 23
    assert cudnn_ops(found) == {"aten._cudnn_rnn": (1, 16, 24_960), "aten._cudnn_rnn_backward": (1, 23, 49_920)}


def test_a_stack_evaluated_with_dropout_drops_nothing_out():
    gru = nn.GRU(8, 16, num_layers=2, dropout=0.3, device="meta").eval()
    with standin.playing_cuda(), torch.no_grad():
        found = census.of(lambda: gru(torch.empty(5, 3, 8, device="meta")), "meta").by_op()
    assert found["aten._cudnn_rnn"]["kernels"] == 2 * 3  # persistent kernels; no dropout kernel between the layers


def test_without_weight_gradients_the_backward_leaves_out_their_gemms():
    rnn = nn.RNN(4, 8, device="meta").requires_grad_(False)
    x = torch.empty(6, 2, 4, device="meta", requires_grad=True)
    with standin.playing_cuda():
        found = census.of(lambda: rnn(x)[0].sum().backward(), "meta").by_op()
    # forward 1 + 2 x 6 = 13 kernels, 2 x 6 x 2 x (4 + 8) x 8 = 2,304 FLOPs; backward 2 x 6 + 1 = 13 and the unused
    # final state's zeros_like gradient = 14, the same FLOPs
    assert cudnn_ops(found) == {"aten._cudnn_rnn": (1, 13, 2_304), "aten._cudnn_rnn_backward": (1, 14, 2_304)}
    assert x.grad is not None and x.grad.shape == x.shape


def cell_steps(cell: nn.Module, steps: int = 3) -> census.Census:
    """The census of `steps` calls of a cell on the stand-in, each given the last one's state, and a backward."""
    x = torch.empty(4, 8, device="meta")

    def step():
        state = cell(x)
        for _ in range(steps - 1):
            state = cell(x, state)
        (state if isinstance(state, torch.Tensor) else state[0]).sum().backward()
    with standin.playing_cuda():
        step()
        return census.of(step, "meta")


@pytest.mark.parametrize("bias, backward_kernels", [(True, 3), (False, 1)], ids=["bias", "no bias"])
def test_a_gru_cell_on_the_stand_in_is_two_gemms_and_one_fused_kernel_each_way(bias, backward_kernels):
    cell = nn.GRUCell(8, 16, bias=bias, device="meta")
    found = cell_steps(cell).by_op()
    # per call: the input's and the hidden state's GEMMs and the fused cell; backward: the fused kernel and, with
    # biases, a reduction for each; the hidden GEMM's gradients come back as GEMMs too
    assert (found["aten._thnn_fused_gru_cell"]["count"], found["aten._thnn_fused_gru_cell"]["kernels"]) == (3, 3)
    assert found["aten._thnn_fused_gru_cell_backward"]["kernels"] == 3 * backward_kernels
    assert found["aten.mm"]["count"] >= 6 and not STEP_OPS & found.keys()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in cell.parameters())


def test_a_cells_operations_are_cs_after_its_one_call_from_python():
    ops = [(o["op"], o["nested"]) for o in cell_steps(nn.GRUCell(8, 16, device="meta"), steps=1).summary()["ops"]]
    # nn.GRUCell's _VF.gru_cell is the call from Python: its first operation is Python's, the rest C++'s
    assert ops[:5] == [("aten.zeros", False), ("aten.t", False), ("aten.mm", True), ("aten.t", True), ("aten.mm", True)]
    assert ("aten._thnn_fused_gru_cell", True) in ops


def test_an_lstm_cell_on_the_stand_in_is_fused_with_a_reduction_for_its_bias():
    cell = nn.LSTMCell(8, 16, device="meta")
    found = cell_steps(cell).by_op()
    assert found["aten._thnn_fused_lstm_cell"]["count"] == 3
    assert (found["aten._thnn_fused_lstm_cell_backward_impl"]["count"],
            found["aten._thnn_fused_lstm_cell_backward_impl"]["kernels"]) == (3, 6)
    assert not STEP_OPS & found.keys()


def test_on_the_cpu_a_gru_computes_as_it_always_did():
    torch.manual_seed(0)
    gru, x = nn.GRU(3, 5, batch_first=True), torch.randn(2, 4, 3)
    expected = gru(x)[0]
    with standin.playing_cuda():
        found = census.of(lambda: gru(x), "cpu")
        assert torch.equal(gru(x)[0], expected)
    assert "aten._cudnn_rnn" not in found.by_op() and {"aten.sigmoid_", "aten.tanh_"} <= found.by_op().keys()
    cell, h = nn.LSTMCell(3, 5), torch.randn(2, 5)
    expected = cell(x[:, 0], (h, h))
    with standin.playing_cuda():
        assert all(torch.equal(a, b) for a, b in zip(cell(x[:, 0], (h, h)), expected))


def test_outside_the_stand_in_play_a_meta_gru_keeps_its_steps():
    gru = nn.GRU(3, 5, device="meta")
    found = census.of(lambda: gru(torch.empty(4, 2, 3, device="meta")), "meta").by_op()
    assert "aten._cudnn_rnn" not in found and "aten.sigmoid_" in found


def test_the_cnns_gru_point_is_censused_as_cudnn_runs_it(one_thread):
    cnn = get("cnn")
    config = cnn.config("smoke", {"models": ("gru",)})
    found = standin.take(cnn, Point("meta", "as written", {"model": "gru", "batch_size": 64, "rows": 128}), config)
    rnn = [o for o in found["ops"] if o["op"].startswith("aten._cudnn_rnn")]
    assert sorted((o["op"], o["calls"]) for o in rnn) == [("aten._cudnn_rnn", 2), ("aten._cudnn_rnn_backward", 2)]
    assert all(o["kernels"] > 1 and o["formula"] for o in rnn)
    # every other call launches one, but the loss, its gradient, the selected state's gradient and the head's addmm
    # (cuda_ops): two. The head's bias (one output column) is not cuBLASLt's epilogue's: copied into the output, then
    # the GEMV (the 1-D CNN's head launched that copy on the H200; the GRU's profile has it among its 5 copies a step)
    assert {o["op"]: o["kernels"] for o in found["ops"] if o not in rnn and "kernels" in o} == {
        "aten.mse_loss": 2, "aten.mse_loss_backward": 2, "aten.select_backward": 2, "aten.addmm": 2}


@pytest.mark.parametrize("module", [nn.GRU(3, 5), nn.LSTM(3, 5)], ids=["gru", "lstm"])
def test_a_packed_sequence_on_the_stand_in_keeps_its_steps(module):
    packed = nn.utils.rnn.pack_padded_sequence(torch.empty(4, 2, 3, device="meta"), torch.tensor([4, 3]))
    module = module.to("meta")
    with standin.playing_cuda():
        found = census.of(lambda: module(packed), "meta").by_op()
    assert "aten._cudnn_rnn" not in found and "aten.sigmoid_" in found
