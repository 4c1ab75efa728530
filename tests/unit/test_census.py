import contextlib
import gc
import json
import sys

import pytest
import torch
from torch import nn

from core.measure import census, graphs, timing

FIELDS = {"operations", "kernels", "copies", "h2d_copies", "d2h_copies", "h2d_bytes", "d2h_bytes", "pinned_h2d_bytes",
          "syncs", "flops", "formula_flops", "bytes_moved", "top_by_count", "top_by_flops", "samples", "device",
          "flop_rule", "ops", "stretches", "loader", "graph_replays", "heap_objects"}

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


def test_a_non_blocking_copy_out_of_the_stand_in_counts_as_pinned_and_does_not_sync():
    # the code copies non-blocking only into memory it pins (devices.pin), which a CPU build cannot do
    source = torch.empty(4, device="meta")
    found = census.of(lambda: source.to("cpu", non_blocking=True), "meta").summary()
    assert (found["d2h_copies"], found["syncs"]) == (1, 0)
    assert found["ops"][0]["copy"] == {"direction": "d2h", "pinned": True, "bytes": 16}
    blocking = census.of(lambda: source.to("cpu"), "meta").summary()
    assert blocking["syncs"] == 1 and blocking["ops"][0]["copy"]["pinned"] is False


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


@pytest.mark.parametrize("groups", [1, 4, 32])
def test_a_convolution_s_backward_counts_its_two_gradients_each_at_its_forward_s_flops(groups):
    conv, x = nn.Conv2d(32, 32, 3, padding=1, groups=groups), torch.ones(4, 32, 8, 8, requires_grad=True)
    counted = census.of(lambda: conv(x).sum().backward()).by_op()
    forward = counted["aten.convolution"]["flops"]
    assert forward == 4 * 32 * 8 * 8 * (32 // groups) * 9 * 2
    assert counted["aten.convolution_backward"]["flops"] == 2 * forward  # flop_counter's own: 33 x for groups 32
    with torch.no_grad():  # a first layer's backward: the weight's gradient alone
        first = census.of(lambda: torch.ops.aten.convolution_backward(
            torch.ones(4, 32, 8, 8), x.detach(), conv.weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], groups,
            [False, True, False])).by_op()
    assert first["aten.convolution_backward"]["flops"] == forward


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


def test_a_census_counts_the_objects_a_full_collection_walks_in_its_process():
    gc.collect()  # garbage earlier tests left would be freed between the two censuses
    small = census.take(timing.Workload(lambda: torch.ones(2) + 1, unit="add"), "cpu")["heap_objects"]
    held = [[i] for i in range(100_000)]  # tracked by the collector, as a process's long-lived objects are
    larger = census.take(timing.Workload(lambda: torch.ones(2) + 1, unit="add"), "cpu")["heap_objects"]
    assert larger - small > 0.9 * len(held)  # the first census's own garbage may be gone by then


def test_describe_says_the_counts_in_one_line():
    step = {"operations": 16, "kernels": 8, "syncs": 1, "h2d_bytes": 0, "d2h_bytes": 0}
    assert census.describe(step, "step") == "16 operations, 8 kernels, 1 sync, 0 bytes copied per step"
    fit = {"operations": 7377, "kernels": 1, "syncs": 2.5, "h2d_bytes": 1200, "d2h_bytes": 40}
    assert census.describe(fit, "epoch") == "7,377 operations, 1 kernel, 2.5 syncs, 1.2 kB copied per epoch"
    run = {"operations": 7604, "kernels": 3604, "syncs": 200, "h2d_bytes": 2400, "d2h_bytes": 0}  # one call: 200 epochs
    assert census.describe(run, "epoch", per_call=200) == \
        "about 38 operations, about 18 kernels, 1 sync, 12 bytes copied per epoch"  # averages over the 200


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="device: 'gpu0' is not a torch device"):
        census.Census("gpu0")
    with pytest.raises(ValueError, match="samples: the census counted no sample"):
        census.Census().summary()
    with pytest.raises(ValueError, match="samples: 0 is not a whole number"):
        census.of(lambda: None).summary(samples=0)


# -- the detail a cost model reads: ops, stretches, loader, graph replays -------------------------------
def _op(found: dict, name: str, **match) -> dict:
    entries = [o for o in found["ops"] if o["op"] == name and all(o[k] == v for k, v in match.items())]
    assert len(entries) == 1, entries
    return entries[0]


def _stretch_ops(found: dict, stretch: dict) -> list[tuple[str, int]]:
    return [(found["ops"][index]["op"], calls) for index, calls in stretch["ops"]]


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_each_operation_of_a_toy_step_says_what_it_is_per_call(device):
    found = census.of(toy_step(device), device).summary()
    assert sum(o["calls"] for o in found["ops"]) == found["operations"] == 16
    assert _op(found, "aten.addmm") == {
        "op": "aten.addmm", "where": device, "shapes": [[3], [8, 4], [4, 3]], "dtypes": ["float32"] * 3,
        "inputs": 3, "calls": 1, "kernel": True, "launches": True, "flops": 192, "formula": True, "bytes": 284,
        "autograd": True, "phase": "step", "copy": None, "sync": False, "nested": True, "transformed": False}
    backward = _op(found, "aten.mse_loss_backward")  # the engine runs the backward pass with grad mode off
    assert (backward["autograd"], backward["flops"], backward["formula"], backward["bytes"]) == (False, 24, False, 292)
    view = _op(found, "aten.view")
    assert (view["kernel"], view["launches"], view["flops"], view["bytes"]) == (False, False, 0, 0)
    item = _op(found, "aten._local_scalar_dense")
    assert (item["sync"], item["kernel"], item["autograd"]) == (True, False, True)  # loss.item(): loss requires grad
    assert {o["phase"] for o in found["ops"] if o["op"] == "aten.add_"} == {"optimizer"}  # SGD's updates
    assert found["stretches"] == [{"ops": [[i, o["calls"]] for i, o in enumerate(found["ops"])], "times": 1,
                                   "sync": True, "loader_batches": 0, "loader_samples": 0, "graph_replays": 0,
                                   "module_calls": 1, "module_classes": {"Linear": 1}, "optimizer_steps": 1}]
    assert found["loader"] == {"batches": 0, "samples": 0} and found["graph_replays"] == 0


def _issued(found: dict, recording: bool = True) -> dict:
    """Calls per (nested, transformed) among the recording operations (or the others)."""
    counts = {}
    for o in found["ops"]:
        if o["autograd"] == recording:
            key = (o["nested"], o["transformed"])
            counts[key] = counts.get(key, 0) + o["calls"]
    return counts


def test_an_operation_cpp_issues_is_nested_and_one_python_issues_is_not():
    # F.linear is one call into C++, which issues t and then addmm; an operator (x * 2) is a call each time
    linear, x = nn.Linear(4, 3), torch.ones(2, 4)
    found = census.of(lambda: linear(x)).summary()
    assert [(o["op"], o["nested"]) for o in found["ops"]] == [("aten.t", False), ("aten.addmm", True)]
    found = census.of(lambda: [x * 2 for _ in range(3)]).summary()
    assert [(o["op"], o["calls"], o["nested"]) for o in found["ops"]] == [("aten.mul", 3, False)]
    # a GRU's loop over its 5 steps is C++: of its recording operations only the first of each Python call
    # (the module's flatten and its _VF.gru call, and the sum) is Python's
    gru, xs = nn.GRU(2, 3, batch_first=True), torch.ones(1, 5, 2)
    found = census.of(lambda: gru(xs)[0].sum().backward()).summary()
    recording = _issued(found)
    assert recording[(True, False)] > 10 * recording[(False, False)] and (False, True) not in recording
    # backward runs in the engine (C++): every operation it issues after the first is nested
    assert _issued(found, recording=False).get((False, False), 0) <= 3


@pytest.mark.full
def test_operations_under_a_torch_func_transform_are_transformed_not_nested():
    model = nn.Sequential(nn.Linear(1, 4), nn.Tanh(), nn.Linear(4, 4))
    t = torch.ones(3, 1)
    found = census.of(lambda: torch.func.jvp(model, (t,), (torch.ones_like(t),))).summary()
    transformed = [o for o in found["ops"] if o["transformed"]]
    assert transformed and not any(o["nested"] for o in transformed)
    assert {"aten.addmm", "aten.tanh"} <= {o["op"] for o in transformed}  # the model's own operations
    assert not any(o["transformed"] for o in census.of(lambda: model(t)).summary()["ops"])


def test_the_census_leaves_the_profile_function_as_it_found_it():
    def watcher(frame, event, arg):
        pass
    sys.setprofile(watcher)
    try:
        census.of(lambda: torch.ones(2) + 1)
        assert sys.getprofile() is watcher
    finally:
        sys.setprofile(None)
    census.of(lambda: torch.ones(2) + 1)
    assert sys.getprofile() is None


def test_stretches_are_cut_at_every_sync_and_identical_ones_kept_once_with_their_count():
    x = torch.ones(4, device="meta")

    def call():
        for _ in range(3):
            (x * 2).sum().item()  # a stretch of three operations ending with a sync
        x.add_(1)  # the open end of the sample
    found = census.of(call, "meta").summary()
    assert [(_stretch_ops(found, s), s["times"], s["sync"]) for s in found["stretches"]] == [
        ([("aten.mul", 1), ("aten.sum", 1), ("aten._local_scalar_dense", 1)], 3, True),
        ([("aten.add_", 1)], 1, False)]
    assert found["syncs"] == 3


def test_a_stretch_runs_on_across_the_laps_a_sample_names_and_skips_the_others():
    x = torch.ones(3, device="meta")

    def call(watch: timing.Stopwatch):
        for _ in range(2):
            watch.start()
            x.mul(2)
            watch.lap("work")
            x.sum().item()  # a sync in a lap no sample names: it cuts nothing
            watch.lap("aside")
            x.add(1)
            watch.lap("work")
            watch.close_sample("work")
    found = census.take(timing.Workload(call, unit="step", hooks=True), "meta")
    assert found["samples"] == 2 and found["syncs"] == 0
    assert [(_stretch_ops(found, s), s["times"], s["sync"]) for s in found["stretches"]] == [
        ([("aten.mul", 1), ("aten.add", 1)], 1, False)]


def test_a_dataloaders_batches_and_samples_are_counted_in_the_loading_phase():
    rows = torch.utils.data.TensorDataset(torch.ones(10, 3), torch.zeros(10))
    loader = torch.utils.data.DataLoader(rows, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
    weights = torch.ones(3, device="meta")

    def epoch():
        for xb, _ in loader:
            (xb.to("meta") * weights).sum().item()
    found = census.of(epoch, "meta").summary()
    assert found["loader"] == {"batches": 3, "samples": 10}  # 4 + 4 + 2 samples; the ending __next__ is no batch
    stacks = sorted((o["inputs"], o["shapes"], o["calls"]) for o in found["ops"] if o["op"] == "aten.stack")
    assert stacks == [(2, [[]] * 2, 1), (2, [[3]] * 2, 1), (4, [[]] * 4, 2), (4, [[3]] * 4, 2)]  # targets, rows
    assert {o["phase"] for o in found["ops"] if o["op"] in ("aten.select", "aten.stack", "aten.randperm")} == {"loading"}
    assert {o["phase"] for o in found["ops"] if o["op"] in ("aten.mul", "aten.sum")} == {"step"}
    # each batch's stretch ends at its copy to the device; the first also draws the shuffled order
    per_batch = [(s["loader_batches"], s["loader_samples"], s["times"]) for s in found["stretches"] if s["loader_batches"]]
    assert sorted(per_batch) == [(1, 2, 1), (1, 4, 1), (1, 4, 1)]


def test_a_graph_replay_on_the_stand_in_is_counted_with_its_operations_as_the_graphs():
    model = nn.Linear(4, 3).to("meta")
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.ones(8, 4, device="meta")

    def step():
        optimiser.zero_grad(set_to_none=False)
        model(x).sum().backward()
        optimiser.step()
    replay, error = graphs.replay_or_eager(step, "meta", model.parameters())
    assert error is None and replay is not step
    found = census.of(lambda: [replay() for _ in range(2)], "meta").summary()
    assert found["graph_replays"] == 2 and found["syncs"] == 0
    assert {o["phase"] for o in found["ops"]} == {"graph"}
    assert _op(found, "aten.addmm")["calls"] == 2 and _op(found, "aten.addmm")["kernel"]
    assert [(s["graph_replays"], s["times"], s["sync"]) for s in found["stretches"]] == [(2, 1, False)]
    assert [(s["module_calls"], s["optimizer_steps"]) for s in found["stretches"]] == [(0, 0)]  # no Python replays


def test_module_calls_are_counted_through_call_not_forward_and_optimiser_steps_in_their_own_phase():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.ones(2, 4)

    def step(call):
        optimiser.zero_grad()
        call(x).sum().backward()
        optimiser.step()
    for call, modules in ((model, 4), (model.forward, 3)):  # forward() skips the Sequential's own call
        found = census.of(lambda: [step(call) for _ in range(2)]).summary()
        assert [(s["module_calls"], s["optimizer_steps"]) for s in found["stretches"]] == [(2 * modules, 2)]
        assert found["stretches"][0]["module_classes"] == {"Linear": 4, "ReLU": 2} | (
            {"Sequential": 2} if call is model else {})
        assert {o["phase"] for o in found["ops"] if o["op"] == "aten.add_"} == {"optimizer"}
        assert {o["phase"] for o in found["ops"] if o["op"] == "aten.addmm"} == {"step"}
    outside = census.of(lambda: model(x)).summary()  # the hook goes when the census ends
    model(x)
    assert outside["stretches"][0]["module_calls"] == 4
    assert not torch.nn.modules.module._global_forward_pre_hooks


def test_adams_step_counters_are_host_operations_on_the_stand_in_not_syncs():
    # non-fused, non-capturable Adam keeps its step counters on the CPU and reads them with .item()
    model = nn.Linear(4, 3).to("meta")
    optimiser = torch.optim.Adam(model.parameters(), lr=0.1, foreach=False)
    x = torch.ones(8, 4, device="meta")

    def step():
        optimiser.zero_grad()
        model(x).sum().backward()
        optimiser.step()
    step()
    found = census.of(step, "meta").summary()
    reads = [o for o in found["ops"] if o["op"] == "aten._local_scalar_dense"]
    assert reads and all(o["where"] == "cpu" and not o["sync"] and not o["kernel"] for o in reads)
    assert found["syncs"] == 0 and len(found["stretches"]) == 1
    counter = _op(found, "aten.add_", where="cpu")  # step += 1 on the host: it does work there, not on the device
    assert counter["launches"] and not counter["kernel"] and counter["flops"] == 1


def test_operations_that_return_nothing_but_write_their_arguments_are_kernels():
    tensors = [torch.ones(3, device="meta"), torch.ones(5, device="meta")]
    found = census.of(lambda: torch._foreach_add_(tensors, 1.0), "meta").summary()
    assert (found["kernels"], found["flops"]) == (1, 8)


def test_meta_outputs_reused_from_the_cache_have_the_kernels_metadata():
    a = torch.empty(6, 4, device="meta").t()  # strided, not contiguous
    b = torch.empty(4, 1, device="meta", dtype=torch.float64)
    expected = [a + b, a.sum(dim=0), torch.max(a, dim=1)]
    with census.Census("meta"):
        for _ in range(2):  # the second call of each comes from the cache
            found = [a + b, a.sum(dim=0), torch.max(a, dim=1)]
            same = a.mul_(2.5)
    assert same is a
    flat = [found[0], found[1], *found[2]]
    for got, want in zip(flat, [expected[0], expected[1], *expected[2]]):
        assert (got.shape, got.stride(), got.dtype, got.device.type) == (want.shape, want.stride(), want.dtype, "meta")
    assert type(found[2]) is type(expected[2])


class RecordedGraph:
    """What the census sees of a captured CUDA graph: replay() runs its kernels and dispatches no operation."""
    def __init__(self):
        self.replays = 0

    def replay(self):
        self.replays += 1


def test_a_cuda_graphs_replay_is_counted_with_its_steps_operations_while_a_census_counts(monkeypatch):
    monkeypatch.setattr(graphs.torch.cuda, "device", lambda dev: contextlib.nullcontext())  # no GPU here
    model = nn.Linear(4, 3)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.ones(8, 4)

    def step():
        optimiser.zero_grad(set_to_none=False)
        model(x).sum().backward()
        optimiser.step()
    graph = RecordedGraph()
    replay = graphs.replayer(graph, step, torch.device("cuda:0"))
    replay()
    assert graph.replays == 1  # outside a census: the graph itself
    found = census.of(lambda: [replay() for _ in range(2)]).summary()
    assert graph.replays == 1 and found["graph_replays"] == 2
    assert {o["phase"] for o in found["ops"]} == {"graph"} and _op(found, "aten.addmm")["calls"] == 2
    replay()
    assert graph.replays == 2  # the census over: the graph again
