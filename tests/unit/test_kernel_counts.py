"""Kernel counts checked against what torch.profiler counted on an NVIDIA H200 (the shipped records of iris and cnn on
cuda:0): the stand-in's rules for cuDNN's GRU (core.measure.kernels.cuda_rnn) and for CUDA's GEMMs, losses and
gradients (core.measure.kernels.cuda_ops), worked out on meta tensors, with no GPU; and the rows frame, which takes the
profiler's count where it exists and keeps the census's beside it. No timing figures."""
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from core.experiments import get
from core.measure import census, standin
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
    """The shipped H200 points where the corrected rules apply: iris as written and its hook check, the GRU as
    written. (A tuned point replays a CUDA graph, which the census counts as its replays, not its kernels; the 1-D and
    2-D CNNs' convolutions are no rule's here.)"""
    return ([pytest.param("iris", row, id=f"iris {row['variant']} {json.dumps(row['params'])}")
             for row in record(IRIS)["rows"] if row["variant"] in ("as written", "hook check")]
            + [pytest.param("cnn", row, id=f"cnn gru batch {row['params']['batch_size']}")
               for row in record(CNN)["rows"] if row["variant"] == "as written" and row["params"]["model"] == "gru"])


@pytest.mark.parametrize("experiment, row", shipped_points())
def test_the_shipped_h200_points_are_within_10_percent_of_the_profiler_after_the_correction(experiment, row, one_thread):
    found = row["census"]
    if experiment == "iris":
        per_unit = found["profiler_kernels"] / row["per_call"]
        assert within(iris_standin(row["params"], row["variant"]), per_unit)
        return
    cnn = get("cnn")
    batch = row["params"]["batch_size"]
    steps = row["params"]["rows"] // batch
    # two steps of the same configuration: the kernels repeat every step
    config = cnn.config("quick", record(CNN)["config"])
    taken = standin.take(cnn, Point("meta", "as written", row["params"] | {"rows": 2 * batch}), config)
    assert within(taken["kernels"] / 2, found["profiler_kernels"] / steps)


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
