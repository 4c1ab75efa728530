"""Kernel counts checked against what torch.profiler counted on an NVIDIA H200 (the shipped records of iris and cnn on
cuda:0): the stand-in's rules for cuDNN's GRU (core.measure.kernels.cuda_rnn) and for CUDA's GEMMs, losses, gradients,
convolutions and fused operations (core.measure.kernels.cuda_ops), worked out on meta tensors, with no GPU; and the rows
frame, which takes the profiler's count where it exists and keeps the census's beside it. No timing figures."""
import json
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from torch import nn

from core.experiments import get
from core.measure import census, standin, timing
from core.measure.experiment import Point
from core.measure.kernels import cuda_ops
from core.store import results

H200 = Path(__file__).resolve().parents[2] / "results" / "intel-r-xeon-r-processor-8e260d9d"
IRIS = H200 / "iris-20261127T071036-86faf3.json"
CNN = H200 / "cnn-20261127T071417-9e258b.json"
TOLERANCE = 0.10  # the issue's: a stand-in rule more than 10% off the profiler's count is corrected
IRIS_EPOCHS = 10  # the stand-in's epochs for an iris point (its kernels repeat every epoch)


def record(path: Path) -> dict:
    return json.loads(path.read_text())


def within(count: float, profiled: float) -> bool:
    return abs(count - profiled) <= TOLERANCE * profiled


@pytest.mark.parametrize("rows, columns, inner, kernels", [
    # iris's five GEMMs an epoch (150 x 4 -> 10 -> 3): 10 kernels on the H200
    (150, 10, 4, 2), (150, 3, 10, 2), (150, 10, 3, 2), (3, 10, 150, 2), (10, 4, 150, 2),
    # the GRU's head at batch 512: 3 kernels (two gemv, one GEMM)
    (512, 1, 64, 1), (512, 64, 1, 1), (1, 64, 512, 1),
    # the 1-D CNN's at batch 16 (one each) and its split-K products at batch 4096 (a reduction each)
    (16, 16, 84, 1), (16, 84, 16, 1), (4096, 16, 84, 1), (16, 84, 4096, 2), (1, 16, 4096, 2)])
def test_a_gemm_launches_the_kernels_cublas_launched_on_the_h200(rows, columns, inner, kernels):
    assert cuda_ops.gemm_kernels(rows, columns, inner, element_size=4) == kernels


def gru_step(batch: int):
    """The cnn experiment's GRU training step (16 features -> 64 hidden over 32 steps, batch_first, a linear head on
    the last state, MSE), on the stand-in."""
    gru, head = nn.GRU(16, 64, batch_first=True, device="meta"), nn.Linear(64, 1, device="meta")
    x, y = torch.empty(batch, 32, 16, device="meta"), torch.empty(batch, 1, device="meta")

    def step():
        _, last = gru(x)
        nn.functional.mse_loss(head(last[-1]), y).backward()
    return step


@pytest.mark.full  # a GRU step's census at two batch sizes: seconds; the shipped points below cover it too
@pytest.mark.parametrize("batch", [64, 512])
def test_the_gru_rule_gives_the_h200s_kernels_per_step(batch):
    with standin.playing_cuda():
        step = gru_step(batch)
        step()
        found = census.of(step, "meta").by_op()
    rows = {r["params"]["batch_size"]: r for r in record(CNN)["rows"]
            if r["variant"] == "as written" and r["params"]["model"] == "gru"}
    row = rows[batch]
    steps = row["params"]["rows"] // batch
    profiled = row["census"]["profiler_kernels"] / steps  # 37 a step, at either batch
    # cuDNN's persistent kernels, 18 a step whatever the 32 steps: 4 forward, 14 backward (the output's gradient
    # undefined here: a zeros_like)
    assert (found["aten._cudnn_rnn"]["kernels"], found["aten._cudnn_rnn_backward"]["kernels"]) == (4, 14)
    # the step's total, less the gradient accumulation that Adam's zero_grad(set_to_none) leaves out of a real step
    step_kernels = sum(e["kernels"] for name, e in found.items() if name != "aten.add_")
    assert within(step_kernels + 7, profiled)  # Adam's 7 foreach kernels, which this step leaves out
    assert not within(row["census"]["kernels"] / steps, profiled)  # the old rule's 149 a step


def test_irises_gemms_and_nll_loss_backward_count_the_kernels_cuda_launches():
    iris = get("iris")
    config = iris.config("quick", {"epochs": IRIS_EPOCHS, "log_every": (1,)})
    found = standin.take(iris, Point("meta", "as written", {"log_every": 1}), config)
    kernels = {}
    for op in found["ops"]:
        if op["kernel"]:
            kernels[op["op"]] = kernels.get(op["op"], 0) + op["calls"] * op.get("kernels", 1) / IRIS_EPOCHS
    # the census had counted one for each (15 an epoch); the H200 launched two: 21 an epoch
    assert (kernels["aten.addmm"], kernels["aten.mm"], kernels["aten.nll_loss_backward"]) == (4, 6, 2)


def iris_standin(point: dict, variant: str) -> float:
    """The stand-in's kernels per unit for a shipped iris point, taken over IRIS_EPOCHS epochs."""
    iris = get("iris")
    log_every = min(point.get("log_every", 1), IRIS_EPOCHS)  # a read every epoch or never, within the epochs
    config = iris.config("quick", {"epochs": IRIS_EPOCHS, "log_every": (log_every,)})
    params = point | {"log_every": log_every} if "log_every" in point else point
    found = standin.take(iris, Point("meta", variant, params), config)
    return found["kernels"] / (IRIS_EPOCHS if variant == "as written" else 1)


def shipped_points() -> list:
    """The shipped H200 points where the corrected rules apply: iris as written and its hook check, and cnn's models as
    written (the GRU, the 1-D CNN, MNIST). (A tuned point replays a CUDA graph, which the census counts as its replays,
    not its kernels.)"""
    return ([pytest.param("iris", row, id=f"iris {row['variant']} {json.dumps(row['params'])}")
             for row in record(IRIS)["rows"] if row["variant"] in ("as written", "hook check")]
            + [pytest.param("cnn", row, id=f"cnn {row['params']['model']} batch {row['params']['batch_size']} "
                                           f"rows {row['params']['rows']}")
               for row in record(CNN)["rows"] if row["variant"] == "as written"])


@contextmanager
def the_h200s_precision(workload):
    """The precision the H200's cnn run had (commit ce96a56, before GPU rows ran in FP32): cuDNN's default, TF32
    allowed. In place of timing.precision, which the stand-in takes its census in."""
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = before


def cnn_standin(row: dict) -> float:
    """The stand-in's kernels per step for a shipped cnn point as written: two steps of the same configuration (the
    kernels repeat every step)."""
    cnn = get("cnn")
    batch = row["params"]["batch_size"]
    config = cnn.config("quick", record(CNN)["config"])
    taken = standin.take(cnn, Point("meta", "as written", row["params"] | {"rows": 2 * batch}), config)
    return taken["kernels"] / 2


def profiled_per_step(row: dict) -> float:
    return row["census"]["profiler_kernels"] / (row["params"]["rows"] // row["params"]["batch_size"])


@pytest.mark.full  # every shipped GPU point's stand-in census
@pytest.mark.parametrize("experiment, row", shipped_points())
def test_the_shipped_h200_points_are_within_10_percent_of_the_profiler_after_the_correction(experiment, row, one_thread,
                                                                                             monkeypatch):
    found = row["census"]
    if experiment == "iris":
        per_unit = found["profiler_kernels"] / row["per_call"]
        assert within(iris_standin(row["params"], row["variant"]), per_unit)
        return
    monkeypatch.setattr(timing, "precision", the_h200s_precision)
    # per step: the 1-D CNN 42 to 44 for the profiler's 42 to 47 (its census had 32, the stand-in 61 to 62), MNIST 55
    # for 56 (36; 45), the GRU 38 for 37
    assert within(cnn_standin(row), profiled_per_step(row))


@pytest.mark.parametrize("model, batch, before, after", [("cnn1d", 16, 61, 42), ("cnn1d", 512, 62, 43),
                                                         ("mnist", 64, 45, 55)])
def test_the_cnns_stand_in_counts_what_the_h200_launched_where_it_was_off_by_more_than_10_percent(
        model, batch, before, after, one_thread, monkeypatch):
    row = next(r for r in record(CNN)["rows"] if r["variant"] == "as written" and r["params"]["model"] == model
               and r["params"]["batch_size"] == batch)
    profiled = profiled_per_step(row)
    monkeypatch.setattr(timing, "precision", the_h200s_precision)
    assert cnn_standin(row) == after and within(after, profiled)
    assert not within(before, profiled) and not within(row["census"]["kernels"] / (row["params"]["rows"] // batch),
                                                       profiled)


def standin_kernels(fn) -> dict:
    """The kernels per operation of `fn` on the stand-in playing CUDA."""
    with standin.playing_cuda():
        return {name: entry["kernels"] for name, entry in census.of(fn, "meta").by_op().items() if entry["kernels"]}


def test_mish_backward_is_the_one_kernel_cuda_runs_not_the_metas_decomposition():
    x = torch.empty(512, 16, 5, device="meta", requires_grad=True)
    found = standin_kernels(lambda: nn.functional.mish(x).sum().backward())
    assert found["aten.mish_backward"] == 1 and "aten.softplus" not in found and "aten.tanh" not in found
    # outside the stand-in's CUDA, meta tensors decompose it as before
    y = torch.empty(4, 8, device="meta", requires_grad=True)
    assert "aten.softplus" in census.of(lambda: nn.functional.mish(y).sum().backward(), "meta").by_op()
    # a graph recorded through the gradient (create_graph) keeps its decomposition, differentiable
    with standin.playing_cuda():
        (grad,) = torch.autograd.grad(nn.functional.mish(y).sum(), y, create_graph=True)
    assert grad.requires_grad and grad.shape == y.shape


def test_dropout_in_training_is_cudas_fused_kernel_each_way():
    x = torch.empty(64, 128, device="meta", requires_grad=True)
    drop = nn.Dropout(0.5)
    found = standin_kernels(lambda: drop(x).sum().backward())
    assert (found["aten.native_dropout"], found["aten.native_dropout_backward"]) == (1, 1)
    assert "aten.bernoulli_" not in found
    drop.eval()
    assert "aten.native_dropout" not in standin_kernels(lambda: drop(x).sum())
    cpu = census.of(lambda: nn.functional.dropout(torch.ones(8, 8), 0.5, True), "cpu").by_op()
    assert "aten.native_dropout" not in cpu  # a CPU's census as before: torch's unfused dropout


@pytest.mark.parametrize("channels, tf32, forward, backward", [
    # the 1-D CNN's second convolution (8 -> 16): cuDNN's kernel and the bias's add; dgrad, wgrad, the bias's sum
    (8, True, 2, 3),
    # MNIST's second (32 -> 64): TF32 tensor cores in NHWC, 3 transposes forward, 3 for dgrad and 2 for wgrad
    (32, True, 5, 8),
    (32, False, 2, 3)])  # in FP32 no tensor cores, no transposes
def test_a_convolution_counts_cudnns_kernels_its_bias_and_its_transposes(channels, tf32, forward, backward,
                                                                          monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", tf32)
    conv = nn.Conv2d(channels, 2 * channels, 3, device="meta")
    x = torch.empty(64, channels, 12, 12, device="meta", requires_grad=True)
    found = standin_kernels(lambda: conv(x).sum().backward())
    assert (found["aten.convolution"], found["aten.convolution_backward"]) == (forward, backward)
    x.requires_grad_(False)  # the first layer's: no input gradient (dgrad), so wgrad and the bias's sum
    assert standin_kernels(lambda: conv(x).sum().backward())["aten.convolution_backward"] == backward - (
        1 + 3 * (tf32 and channels >= 32))


def test_max_pool_backward_zeroes_its_gradient_and_a_bias_cublaslt_cannot_take_is_copied():
    x = torch.empty(64, 8, 16, 16, device="meta", requires_grad=True)
    assert standin_kernels(lambda: nn.functional.max_pool2d(x, 2).sum().backward())[
        "aten.max_pool2d_with_indices_backward"] == 2
    head, layer = nn.Linear(16, 1, device="meta"), nn.Linear(84, 16, device="meta")
    rows = torch.empty(512, 84, device="meta")
    # the 1-D CNN's layer: the bias in cuBLASLt's epilogue; its head's (one column): copied into the output first
    assert standin_kernels(lambda: layer(rows))["aten.addmm"] == 1
    assert standin_kernels(lambda: head(rows[:, :16]))["aten.addmm"] == 2


def test_a_cpus_census_of_the_convolution_and_pool_counts_one_kernel_each():
    conv, x = nn.Conv2d(32, 64, 3), torch.ones(2, 32, 8, 8, requires_grad=True)
    found = census.of(lambda: nn.functional.max_pool2d(conv(x), 2).sum().backward(), "cpu").by_op()
    assert all(found[name]["kernels"] == 1 for name in (
        "aten.convolution", "aten.convolution_backward", "aten.max_pool2d_with_indices_backward"))


def test_where_the_profiler_counted_the_rows_frame_takes_its_count_and_keeps_the_censuss():
    read = results.census_read({"kernels": 9536, "profiler_kernels": 2368, "kernel_difference": -7168})
    assert (read["kernels"], read["kernels_assumed"], read["kernel_difference"]) == (2368, 9536, -7168)
    assert results.census_read({"kernels": 12}) == {"kernels": 12, "kernels_assumed": 12}  # no profile: its own
    assert results.census_read({"skipped": "why"}) == {"skipped": "why"}
    frame = results.rows_frame([record(IRIS)])
    written = frame[frame["variant"] == "as written"].iloc[0]
    assert (written["census_kernels"], written["census_kernels_assumed"], written["census_kernel_difference"]) == (
        42_000, 30_004, 11_996)


def test_a_cpus_census_and_the_stand_in_playing_a_cpu_count_one_kernel_a_gemm():
    a, b = torch.empty(150, 4), torch.empty(4, 10)
    assert census.of(lambda: a @ b, "cpu").summary()["kernels"] == 1
    ma, mb = a.to("meta"), b.to("meta")
    with standin.playing_cpu():
        assert census.of(lambda: ma @ mb, "meta").summary()["kernels"] == 1
    with standin.playing_cuda():
        assert census.of(lambda: ma @ mb, "meta").summary()["kernels"] == 2
