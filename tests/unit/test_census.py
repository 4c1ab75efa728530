import json

import pytest
import torch
from torch import nn

from core import census, timing

FIELDS = {"operations", "kernels", "copies", "h2d_copies", "d2h_copies", "h2d_bytes", "d2h_bytes", "pinned_h2d_bytes",
          "syncs", "flops", "formula_flops", "bytes_moved", "top_by_count", "top_by_flops", "samples", "device",
          "flop_rule"}

# One step of Linear(4, 3) on a batch of 8 with an MSE loss and SGD, the loss read once, as ATen runs it:
# forward t + addmm, mse_loss; backward ones_like (the seed gradient), mse_loss_backward, t + mm + t (the
# weight's gradient), sum + view (the bias's), detach x2 (the gradients stored); SGD add_ x2; item.
TOY_STEP_OPS = {"aten.t": 4, "aten.addmm": 1, "aten.mse_loss": 1, "aten.ones_like": 1, "aten.mse_loss_backward": 1,
                "aten.mm": 1, "aten.sum": 1, "aten.view": 1, "aten.detach": 2, "aten.add_": 2,
                "aten._local_scalar_dense": 1}
TOY_STEP_KERNELS = {"aten.addmm", "aten.mse_loss", "aten.ones_like", "aten.mse_loss_backward", "aten.mm", "aten.sum",
                    "aten.add_"}
# addmm 2*8*4*3 and mm 2*3*8*4 by formula; one per element written: mse_loss 1, ones_like 1,
# mse_loss_backward 24, sum 3, add_ 12 + 3.
TOY_STEP_FLOPS, TOY_STEP_FORMULA_FLOPS = 192 + 192 + 1 + 1 + 24 + 3 + 15, 192 + 192
# float32 bytes read + written: addmm (12 + 128 + 48) + 96, mse_loss 192 + 4, ones_like 0 + 4,
# mse_loss_backward (4 + 96 + 96) + 96, mm (96 + 128) + 48, sum 96 + 12, add_ (48 + 48) + 48 and (12 + 12) + 12.
TOY_STEP_BYTES = 284 + 196 + 4 + 292 + 272 + 108 + 144 + 36


def toy_step(device: str):
    torch.manual_seed(0)
    model = nn.Linear(4, 3).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.ones(8, 4, device=device), torch.zeros(8, 3, device=device)

    def step():
        optimiser.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimiser.step()
        return loss.item()
    return step


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_the_census_of_a_toy_training_step_is_exact(device):
    found = census.of(toy_step(device), device)
    ops = found.by_op()
    assert {name: e["count"] for name, e in ops.items()} == TOY_STEP_OPS
    assert {name for name, e in ops.items() if e["kernels"]} == TOY_STEP_KERNELS
    assert all(ops[view]["kernels"] == 0 for view in ("aten.t", "aten.view", "aten.detach"))
    assert ops["aten._local_scalar_dense"]["syncs"] == 1
    summary = found.summary()
    assert {k: summary[k] for k in ("operations", "kernels", "syncs", "copies", "flops", "formula_flops", "bytes_moved",
                                    "samples", "device")} == {
        "operations": 16, "kernels": 8, "syncs": 1, "copies": 0, "flops": TOY_STEP_FLOPS,
        "formula_flops": TOY_STEP_FORMULA_FLOPS, "bytes_moved": TOY_STEP_BYTES, "samples": 1, "device": device}
    assert summary["top_by_count"][0] == {"op": "aten.t", "count": 4}
    assert summary["top_by_flops"][:2] == [{"op": "aten.addmm", "flops": 192}, {"op": "aten.mm", "flops": 192}]


def test_a_copy_out_of_the_meta_device_is_one_device_to_host_copy_of_its_bytes():
    source = torch.empty(5, 7, dtype=torch.float64, device="meta")
    copies = []
    found = census.of(lambda: copies.append(source.to("cpu")), "meta").summary()
    copied = copies[0]
    assert copied.device.type == "cpu" and copied.shape == (5, 7) and copied.dtype == torch.float64
    assert not copied.any()  # a meta tensor reads as zeros
    assert {k: found[k] for k in ("copies", "d2h_copies", "d2h_bytes", "h2d_copies", "syncs", "kernels")} == {
        "copies": 1, "d2h_copies": 1, "d2h_bytes": 5 * 7 * 8, "h2d_copies": 0, "syncs": 1, "kernels": 0}
    into = torch.ones(5, 7, dtype=torch.float64)
    found = census.of(lambda: into.copy_(source), "meta").summary()
    assert not into.any() and (found["d2h_copies"], found["d2h_bytes"], found["syncs"]) == (1, 280, 1)


def test_a_non_blocking_copy_into_pageable_host_memory_still_syncs():
    source = torch.empty(4, device="meta")
    found = census.of(lambda: source.to("cpu", non_blocking=True), "meta").summary()
    assert (found["d2h_copies"], found["syncs"]) == (1, 1)


def test_a_copy_onto_the_meta_device_is_one_host_to_device_copy():
    source = torch.arange(10, dtype=torch.int32)
    blocking = census.of(lambda: source.to("meta"), "meta").summary()
    fields = ("copies", "h2d_copies", "h2d_bytes", "pinned_h2d_bytes", "d2h_copies", "syncs")
    assert {k: blocking[k] for k in fields} == {
        "copies": 1, "h2d_copies": 1, "h2d_bytes": 40, "pinned_h2d_bytes": 0, "d2h_copies": 0, "syncs": 1}
    non_blocking = census.of(lambda: source.to("meta", non_blocking=True), "meta").summary()
    assert (non_blocking["h2d_bytes"], non_blocking["syncs"]) == (40, 0)


def test_data_reads_on_meta_are_answered_as_zeros_and_counted_as_syncs():
    values = torch.ones(3, 4, device="meta")
    answers = {}

    def unit():
        answers["item"] = values.sum().item()
        answers["nonzero"] = values.nonzero()
        answers["bool"] = bool(values.max())
    found = census.of(unit, "meta").summary()
    assert answers["item"] == 0.0 and answers["nonzero"].shape == (0, 2) and answers["bool"] is False
    assert found["syncs"] == 3


def test_boolean_indexing_syncs_and_integer_indexing_does_not():
    x = torch.arange(6.0)
    positions = torch.tensor([0, 2])
    assert census.of(lambda: x[x > 2]).summary()["syncs"] == 1
    assert census.of(lambda: x[positions]).summary()["syncs"] == 0


def test_only_operations_on_the_units_device_count_as_kernels_and_syncs():
    on_host, on_device = torch.ones(3), torch.ones(3, device="meta")
    found = census.of(lambda: (on_host + 1, on_device + 1, on_host.sum().item()), "meta").summary()
    assert (found["operations"], found["kernels"], found["syncs"]) == (4, 1, 0)


def test_linear_flops_are_two_per_weight_per_row():
    batch, n_in, n_out = 3, 5, 7
    layer, x = nn.Linear(n_in, n_out), torch.ones(batch, n_in)
    with torch.no_grad():
        found = census.of(lambda: layer(x))
    assert found.by_op()["aten.addmm"]["flops"] == 2 * batch * n_in * n_out
    assert found.summary()["formula_flops"] == found.summary()["flops"] == 210


def test_conv1d_flops_match_the_hand_count():
    conv, x = nn.Conv1d(2, 4, kernel_size=3), torch.ones(5, 2, 10)
    with torch.no_grad():
        found = census.of(lambda: conv(x)).summary()
    # 5 rows x 4 output channels x 8 positions (10 - 3 + 1), each 2 channels x 3 taps multiply-adds
    assert found["formula_flops"] == 5 * 4 * 8 * (2 * 3) * 2 == 1920
    assert found["top_by_flops"] == [{"op": "aten.convolution", "flops": 1920}]


def test_the_listener_counts_only_the_laps_each_sample_names_per_sample():
    x = torch.ones(3)

    def call(watch: timing.Stopwatch):
        torch.mul(x, 2)  # before the first lap opens
        watch.start()
        torch.add(x, 1), torch.add(x, 1)
        watch.lap("work")
        torch.sub(x, 1)
        watch.lap("aside")  # a lap no sample names
        watch.close_sample("work")
        torch.add(x, 1), torch.add(x, 1), torch.add(x, 1)
        watch.lap("work")
        watch.close_sample("work")
        torch.div(x, 2)
        watch.lap("tail")  # after the last sample
    found = census.take(timing.Workload(call, unit="step", hooks=True), "cpu")
    assert found["samples"] == 2
    assert (found["operations"], found["kernels"], found["flops"]) == (2.5, 2.5, 7.5)  # 5 adds of 3 elements
    assert found["top_by_count"] == [{"op": "aten.add", "count": 2.5}]


def test_take_on_a_plain_workload_returns_every_field_for_one_call():
    a, b = torch.ones(4, 5), torch.ones(5, 6)
    found = census.take(timing.Workload(lambda: a @ b, unit="product"), "cpu")
    assert set(found) == FIELDS
    assert json.loads(json.dumps(found)) == found
    assert {k: found[k] for k in ("operations", "kernels", "flops", "formula_flops", "bytes_moved", "samples")} == {
        "operations": 1, "kernels": 1, "flops": 2 * 4 * 5 * 6, "formula_flops": 240, "bytes_moved": 80 + 120 + 96,
        "samples": 1}
    assert found["flop_rule"] == census.FLOP_RULE and found["device"] == "cpu"


def test_describe_says_the_counts_in_one_line():
    step = {"operations": 16, "kernels": 8, "syncs": 1, "h2d_bytes": 0, "d2h_bytes": 0}
    assert census.describe(step, "step") == "16 operations, 8 kernels, 1 sync, 0 bytes copied per step"
    fit = {"operations": 7377, "kernels": 1, "syncs": 2.5, "h2d_bytes": 1200, "d2h_bytes": 40}
    assert census.describe(fit, "epoch") == "7,377 operations, 1 kernel, 2.5 syncs, 1.2 kB copied per epoch"
    run = {"operations": 7604, "kernels": 3604, "syncs": 200, "h2d_bytes": 2400, "d2h_bytes": 0}  # one call: 200 epochs
    assert census.describe(run, "epoch", per_call=200) == \
        "38.02 operations, 18.02 kernels, 1 sync, 12 bytes copied per epoch"


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="device: 'gpu0' is not a torch device"):
        census.Census("gpu0")
    with pytest.raises(ValueError, match="samples: the census counted no sample"):
        census.Census().summary()
    with pytest.raises(ValueError, match="samples: 0 is not a whole number"):
        census.of(lambda: None).summary(samples=0)
