"""The cost model on hand-made censuses and round figures: every expected time is worked out by hand here
(the arithmetic beside it), never by asking the model twice."""
import dataclasses
from dataclasses import dataclass, field

import pytest

from core.model import costmodel, hardware
from core.model.costmodel import PARTS, PredictionError, crossover, per_unit, predict

US = 1e-6
CPU_FIGURES = {
    "op_overhead_autograd": 10 * US, "op_overhead_no_grad": 5 * US,
    "op_overhead_nested": 2 * US, "op_overhead_nested_no_grad": 1 * US, "op_overhead_transformed": 6 * US,
    "module_call": 3 * US, "optimizer_step": 40 * US, "optimizer_op_overhead": 7 * US,
    "module_call_seconds": {"Linear": 4 * US, "Conv1d": 9 * US},  # beyond their ops; other classes: module_call
    # a = 62 us per batch, c = 2 us per sample: L1 = a + c = 64 us, L64 = a / 64 + c = 0.96875 + 2 us
    "loader_batch1_per_sample": 64 * US, "loader_batched_per_sample": 2.96875 * US,
    "loader_per_sample": {},  # no DataLoader per batch size measured: the line through the two figures above
    "matmul_flops": 1e11, "conv_flops": 5e10, "elementwise_rate": 1e9, "memory_bandwidth": 1e10,
    # the ops timed one by one: tanh 3 us a call + 20 ns per element written, sort its 50 ns per element alone
    "op_call_seconds": {"tanh": 3 * US, "sort": 0.0}, "op_element_seconds": {"tanh": 20e-9, "sort": 50e-9},
    "narrow_gemm_seconds": {},  # no narrow GEMM measured: every GEMM at its FLOP rate (the cases below give some)
    "gemm_seconds": {}, "linear_seconds": {},  # no GEMM grid timed: as above (the cases below give one)
    "conv_one_channel_flops": {},  # no one-channel convolution timed: conv_flops (a case below gives some)
    # no flash-attention blocks timed: each block's GEMMs and exps (a case below gives a grid)
    "flash_attention_seconds": {}, "flash_attention_backward_seconds": {},
    # no fused LSTM layer timed (torch without oneDNN): its GEMMs on the grid (a case below gives rates)
    "lstm_layer_flops": {}, "lstm_layer_backward_flops": {},
}
GPU_FIGURES = {
    "matmul_flops": 1e13, "conv_flops": 5e12, "memory_bandwidth": 1e12, "launch_overhead": 9 * US,  # an eager op launching: 5 us dispatch (no grad) + 4 us launch
    "shortest_kernel": 2 * US, "sync_round_trip": 20 * US,
    "h2d_latency_pageable": 10 * US, "h2d_latency_pinned": 5 * US, "d2h_latency_pageable": 12 * US,
    "d2h_latency_pinned": 6 * US, "h2d_bandwidth_pageable": 5e9, "h2d_bandwidth_pinned": 2e10,
    "d2h_bandwidth_pageable": 4e9, "d2h_bandwidth_pinned": 1.6e10,
    "graph_replay_fixed": 8 * US, "graph_replay_per_node": 1 * US, "kernel_enqueue": 3 * US,
}


@dataclass
class Device:
    """A device with fixed figures; a figure given as a function is sized (read at the FLOPs per call).
    `asked` notes each sized read's (field, flops)."""
    kind: str
    title: str
    figures: dict
    asked: list = field(default_factory=list)
    origin: str = "calibrated"

    def has(self, name: str) -> bool:
        return name in self.figures

    def value(self, name: str, flops: float | None = None) -> float:
        figure = self.figures[name]
        if callable(figure):
            self.asked.append((name, flops))
            return figure(flops)
        return figure


@dataclass
class Target:
    host: Device
    gpu: Device | None
    title: str


def cpu(**figures) -> Target:
    return Target(Device("cpu", "test CPU", CPU_FIGURES | figures), None, "test CPU")


def gpu(host_figures=None, **figures) -> Target:
    return Target(Device("cpu", "test CPU", CPU_FIGURES | (host_figures or {})),
                  Device("gpu", "test GPU", GPU_FIGURES | figures),
                  "test GPU driven by test CPU")


def op(name="aten.add", **fields) -> dict:
    """A kernel of the unit's device (the stand-in's meta), no grad, no work unless given."""
    return {"op": name, "where": "meta", "kernel": True, "launches": True, "flops": 0, "formula": False,
            "bytes": 0, "autograd": False, "phase": "step", "copy": None, "sync": False} | fields


TINY_ADD = op(flops=1, bytes=12)  # 1 element written, three 4-byte tensors
ITEM = op("aten._local_scalar_dense", kernel=False, launches=False, sync=True)
BIG_MUL = op("aten.mul", flops=2.5e7, bytes=1e8)  # 25 M elements written; 100 MB moved


def copy(direction="h2d", pinned=False, nbytes=4e6, sync=True) -> dict:
    return op("aten._to_copy", kernel=False, sync=sync,
              copy={"direction": direction, "pinned": pinned, "bytes": nbytes})


def stretch(refs, times=1, sync=False, batches=0, samples=0, replays=0, modules=0, steps=0) -> dict:
    return {"ops": [list(r) for r in refs], "times": times, "sync": sync, "loader_batches": batches,
            "loader_samples": samples, "graph_replays": replays, "module_calls": modules, "optimizer_steps": steps}


def census(ops, stretches, device="meta") -> dict:
    return {"ops": ops, "stretches": stretches, "device": device}


def parts(**seconds) -> dict:
    return dict.fromkeys(PARTS, 0.0) | seconds


def assert_parts(prediction, expected: dict) -> None:
    assert prediction.parts.keys() == expected.keys()
    for part, seconds in expected.items():
        assert prediction.parts[part] == pytest.approx(seconds, rel=1e-9, abs=1e-15), part
    assert prediction.seconds == pytest.approx(sum(expected.values()), rel=1e-9)


def test_a_launch_bound_toy_takes_its_host_side():
    # 100 calls of a tiny add: host 100 x (5 us overhead + 4 us launch) = 900 us; device 100 x 2 us
    # (shortest kernel; 12 B / 1e12 B/s is less) = 200 us: host-bound, 900 us, and the last add's 2 us after the
    # last launch: 902 us, of which the GPU works 200 us and waits 702 us.
    found = predict(census([TINY_ADD], [stretch([(0, 100)])]), gpu())
    assert_parts(found, parts(host=500 * US, launches=400 * US, compute=2 * US))
    assert found.seconds == pytest.approx(902 * US) and found.target == "test GPU driven by test CPU"
    assert found.gpu_idle == pytest.approx(702 * US)


def test_module_calls_and_optimiser_steps_cost_their_python_on_the_host():
    # A step of 2 module calls and 1 optimiser step whose 4 ops (tiny adds) run inside it, 10 times.
    # CPU: host per occurrence 2 x 3 us + 40 us + 4 x 7 us = 74 us; compute 4 x (1 element / 1e9 = 1 ns in cache,
    # plus 12 B / 1e10 = 1.2 ns from memory) = 8.8 ns; x 10.
    inside = op(phase="optimizer", flops=1, bytes=12)
    found = predict(census([inside], [stretch([(0, 4)], times=10, modules=2, steps=1)]), cpu())
    assert_parts(found, parts(host=740 * US, compute=88e-9))
    # GPU: host 46 us + 4 x 7 us = 74 us; launches 4 x max(0, 9 - 7) = 8 us; device 4 x 2 us: host-bound, and the
    # last op's 2 us after it; x 10.
    assert_parts(predict(census([inside], [stretch([(0, 4)], times=10, modules=2, steps=1)]), gpu()),
                 parts(host=740 * US, launches=80 * US, compute=20 * US))


def test_module_calls_cost_their_class_s_figure_and_a_bare_module_s_for_a_class_not_measured():
    # 3 Linear x 4 us + 1 Conv1d x 9 us + 2 ReLU (not measured) x 3 us = 27 us; module_calls (6) is not read
    classes = stretch([], modules=6) | {"module_classes": {"Linear": 3, "Conv1d": 1, "ReLU": 2}}
    assert_parts(predict(census([], [classes], device="cpu"), cpu()), parts(host=27 * US))
    # a census taken before classes were counted: every call a bare module's, 6 x 3 us; calls it names no class
    # of likewise: 1 Linear x 4 us + 5 x 3 us
    assert_parts(predict(census([], [stretch([], modules=6)], device="cpu"), cpu()), parts(host=18 * US))
    some = stretch([], modules=6) | {"module_classes": {"Linear": 1}}
    assert_parts(predict(census([], [some], device="cpu"), cpu()), parts(host=19 * US))


def test_a_compute_bound_matmul_takes_its_device_side():
    # 2 x 4096^3 = 137,438,953,472 FLOPs / 1e13 FLOP/s = 13.7438953472 ms; bytes 3 x 4096^2 x 4 = 201,326,592
    # / 1e12 = 0.2 ms; host 5 + 4 = 9 us: device-bound, after the host has issued it (the GPU idles those 9 us).
    mm = op("aten.mm", formula=True, flops=2 * 4096**3, bytes=3 * 4096**2 * 4)
    found = predict(census([mm], [stretch([(0, 1)])]), gpu())
    assert_parts(found, parts(compute=13.7438953472e-3, host=5 * US, launches=4 * US))
    assert found.gpu_idle == pytest.approx(9 * US)


def test_a_convolution_runs_at_the_convolution_rate_and_autograd_costs_more_overhead():
    # 1e9 FLOPs / 5e12 = 200 us on the device; host 10 us (autograd) and no launch beyond it (an eager op
    # that launches takes 9 us in all, less than this op's overhead), then its 200 us.
    conv = op("aten.convolution", formula=True, flops=1e9, autograd=True)
    assert_parts(predict(census([conv], [stretch([(0, 1)])]), gpu()), parts(host=10 * US, compute=200 * US))
    # On the CPU: 10 us + 1e9 / 5e10 = 20 ms.
    assert_parts(predict(census([conv], [stretch([(0, 1)])]), cpu()), parts(host=10 * US, compute=20e-3))


def test_a_recording_op_costs_by_who_issued_it_python_cpp_or_a_torch_func_transform():
    # 4 recording adds per sample, each 1 element written at 1e9/s = 1 ns, plus 12 B / 1e10 = 1.2 ns: 2.2 ns:
    # Python issued: 10 us; C++ issued (nested): 2 us; under a transform, recording or not: 6 us
    cases = {(): 10 * US, ("nested",): 2 * US, ("transformed",): 6 * US, ("nested", "transformed"): 6 * US}
    for flags, overhead in cases.items():
        add = op(where="cpu", flops=1, bytes=12, autograd=True, **dict.fromkeys(flags, True))
        assert_parts(predict(census([add], [stretch([(0, 4)])], device="cpu"), cpu()),
                     parts(host=4 * overhead, compute=4 * 2.2e-9))
    # no grad: Python's bare op 5 us, C++'s 1 us; a transformed one still costs the transform's figure
    bare, nested = op(where="cpu"), op(where="cpu", nested=True)
    assert_parts(predict(census([bare], [stretch([(0, 1)])], device="cpu"), cpu()), parts(host=5 * US))
    assert_parts(predict(census([nested], [stretch([(0, 1)])], device="cpu"), cpu()), parts(host=1 * US))
    under = op(where="cpu", transformed=True)
    assert_parts(predict(census([under], [stretch([(0, 1)])], device="cpu"), cpu()), parts(host=6 * US))
    # on a GPU the host side is the same: 2 us dispatch, and the launch 9 - 2 = 7 us beyond it; then its 2 us kernel
    nested_kernel = op(autograd=True, nested=True)
    assert_parts(predict(census([nested_kernel], [stretch([(0, 1)])]), gpu()),
                 parts(host=2 * US, launches=7 * US, compute=2 * US))


def test_a_gpu_that_measured_a_training_step_prices_python_s_recording_ops_at_its_figure_launch_included():
    # training_op_overhead 30 us: a recording add Python issues costs the host 30 us and no launch beyond it (30 > 9);
    # a recording one C++ issues, one in the optimiser's step and one under a transform keep the host's rules; each
    # host-bound, so the last kernel's 2 us come after it
    trained = gpu(training_op_overhead=30 * US)
    python_add, nested_add = op(autograd=True), op(autograd=True, nested=True)
    last = 2 * US
    assert_parts(predict(census([python_add], [stretch([(0, 2)])]), trained), parts(host=60 * US, compute=last))
    # without the figure: the host's 10 us each, its launch (9 us) inside it
    assert_parts(predict(census([python_add], [stretch([(0, 2)])]), gpu()), parts(host=20 * US, compute=last))
    assert_parts(predict(census([nested_add], [stretch([(0, 1)])]), trained),
                 parts(host=2 * US, launches=7 * US, compute=last))
    in_step = op(autograd=True, phase="optimizer")
    assert_parts(predict(census([in_step], [stretch([(0, 1)])]), trained),
                 parts(host=7 * US, launches=2 * US, compute=last))
    transformed = op(autograd=True, transformed=True)
    assert_parts(predict(census([transformed], [stretch([(0, 1)])]), trained),
                 parts(host=6 * US, launches=3 * US, compute=last))
    on_host = op(where="cpu", kernel=False, autograd=True)  # on the host's CPU tensors: the host's 10 us
    assert_parts(predict(census([on_host], [stretch([(0, 1)])]), trained), parts(host=10 * US))


def test_the_host_side_and_the_recording_calls_of_a_census_are_counted_whether_or_not_the_device_is_longer():
    # 3 recording adds Python issues (30 us each on the trained GPU), two 25 M-element muls (100 us each on the device)
    # and a recording op on the host's CPU tensors (the host's 10 us): the host's side is 90 us + 2 x (5 us + 4 us
    # launch) + 10 us = 118 us, a device-bound stretch of 3 x 2 us + 2 x 100 us = 206 us; twice
    from core.model.costmodel import host_seconds, recording_calls
    on_host = op(where="cpu", kernel=False, autograd=True)  # not the GPU's: not among the recording calls
    found = census([op(autograd=True), BIG_MUL, on_host], [stretch([(0, 3), (1, 2), (2, 1)], times=2)])
    trained = gpu(training_op_overhead=30 * US)
    assert host_seconds(found, trained) == pytest.approx(2 * 118 * US)
    assert predict(found, trained).parts["compute"] == pytest.approx(2 * 206 * US)
    assert recording_calls(found) == 6


# Conv1d probes with one input channel: 8 x 1 x 16 is 2 x 8 x 32 x 16 x 5 = 40,960 FLOPs a call, 8 x 1 x 256
# 655,360; the one Conv2d probe, 8 x 1 x 16 x 16, 2 x 8 x 32 x 256 x 9 = 1,179,648
ONE_CHANNEL = {"8x1x16": 5e8, "8x1x256": 5e9, "8x1x16x16": 2e9}


def conv_call(name, weight, flops, inputs=None) -> dict:
    shapes = {"aten.convolution": [inputs or [8, weight[1], 256], weight, [weight[0]]],
              "aten.convolution_backward": [[8, weight[0], 256], inputs or [8, weight[1], 256], weight]}[name]
    return op(name, where="cpu", formula=True, flops=flops, shapes=shapes)


@pytest.mark.parametrize("name", ["aten.convolution", "aten.convolution_backward"])
def test_a_convolution_with_few_input_channels_runs_between_the_one_channel_rate_and_the_conv_rate(name):
    host = cpu(conv_one_channel_flops=ONE_CHANNEL)
    at = 655360  # the 8 x 1 x 256 probe's FLOPs: 5e9 there, conv_flops 5e10 at any size
    def compute(channels):
        conv = conv_call(name, [32, channels, 5], at)
        return predict(census([conv], [stretch([(0, 1)])], device="cpu"), host).parts["compute"]
    assert compute(1) == pytest.approx(at / 5e9)
    assert compute(4) == pytest.approx(at / (5e9 * 5e10) ** 0.5)  # log 4 is half way to log 16
    assert compute(16) == compute(64) == pytest.approx(at / 5e10)
    # between the probes' sizes, log-log: 4 x 40,960 FLOPs is half way from 40,960 to 655,360 in logs, so the
    # rate is half way from 5e8 to 5e9: 5e8 x 10^(1/2)
    conv = conv_call(name, [32, 1, 5], 4 * 40960)
    assert predict(census([conv], [stretch([(0, 1)])], device="cpu"), host).parts["compute"] == pytest.approx(
        4 * 40960 / (5e8 * 10 ** 0.5))


# The 8 x 16 x 256 probe's forward (Conv1d 16 -> 32, kernel 5): 2 x 8 x 32 x 256 x 16 x 5 = 10,485,760 FLOPs; its
# forward and backward at conv_flops (5e10): 3 x 10,485,760 / 5e10 = 629.1456 us, a quarter of it the forward's
SHARED = {"8x16x256": 0.75}
PROBE_FLOPS, PROBE_WHOLE = 10485760, 3 * 10485760 / 5e10


def test_a_convolution_is_split_by_the_hosts_backward_share_and_costs_at_least_its_smallest_probe():
    def compute(conv, **figures):
        return predict(census([conv], [stretch([(0, 1)])], device="cpu"), cpu(**figures)).parts["compute"]
    weight = [32, 16, 5]
    forward = conv_call("aten.convolution", weight, PROBE_FLOPS, inputs=[8, 16, 256])
    both = conv_call("aten.convolution_backward", weight, 2 * PROBE_FLOPS, inputs=[8, 16, 256])
    weight_only = both | {"flops": PROBE_FLOPS}  # a first layer's: no input gradient, half the backward's FLOPs
    assert compute(forward, conv_backward_share=SHARED) == pytest.approx(0.25 * PROBE_WHOLE)
    assert compute(both, conv_backward_share=SHARED) == pytest.approx(0.75 * PROBE_WHOLE)
    assert compute(weight_only, conv_backward_share=SHARED) == pytest.approx(0.75 * PROBE_WHOLE / 2)
    # a sixteenth of the probe's length: a sixteenth of its FLOPs, but the probe's fixed part
    short = conv_call("aten.convolution", weight, PROBE_FLOPS / 16, inputs=[8, 16, 16])
    assert compute(short, conv_backward_share=SHARED) == pytest.approx(0.25 * PROBE_WHOLE)
    # without the figure, or for a rank it has no probe of: each call its own FLOPs at conv_flops, as before
    assert compute(forward) == pytest.approx(PROBE_FLOPS / 5e10)
    assert compute(both) == pytest.approx(2 * PROBE_FLOPS / 5e10)
    conv2d = conv_call("aten.convolution", [32, 16, 3, 3], 1e6, inputs=[8, 16, 16, 16])
    assert compute(conv2d, conv_backward_share=SHARED) == pytest.approx(1e6 / 5e10)


def test_a_one_channel_convolution_costs_the_conv_rate_where_its_rank_or_the_figure_is_missing():
    conv2d = conv_call("aten.convolution", [32, 1, 3, 3], 1179648, inputs=[8, 1, 16, 16])
    conv3d = conv_call("aten.convolution", [32, 1, 3, 3, 3], 1179648, inputs=[8, 1, 16, 16, 16])
    def compute(conv, figure):
        return predict(census([conv], [stretch([(0, 1)])], device="cpu"),
                       cpu(conv_one_channel_flops=figure)).parts["compute"]
    assert compute(conv2d, ONE_CHANNEL) == pytest.approx(1179648 / 2e9)   # its rank's probe
    assert compute(conv3d, ONE_CHANNEL) == pytest.approx(1179648 / 5e10)  # no 3-D probe: conv_flops
    assert compute(conv2d, {}) == pytest.approx(1179648 / 5e10)           # an older profile: conv_flops
    on_gpu = predict(census([conv2d | {"where": "meta", "flops": 1e9}], [stretch([(0, 1)])]),
                     gpu({"conv_one_channel_flops": ONE_CHANNEL}))
    assert on_gpu.parts["compute"] == pytest.approx(1e9 / 5e12)  # a GPU's conv_flops, whatever its host timed


def test_a_pageable_copy_is_serial_after_the_stretch():
    # The copy alone: host 5 us overhead; then 10 us latency + 4e6 B / 5e9 B/s (800 us) = 810 us.
    alone = predict(census([copy()], [stretch([(0, 1)], sync=True)]), gpu())
    assert_parts(alone, parts(host=5 * US, copies=810 * US))
    # After a 100 us kernel (1e8 B / 1e12): host 9 + 5 = 14 us < 100 us, so 100 us after one of the two calls' host
    # (7 us: host 5, launches 2), then the copy: 917 us.
    after = predict(census([BIG_MUL, copy()], [stretch([(0, 1), (1, 1)], sync=True)]), gpu())
    assert_parts(after, parts(host=5 * US, launches=2 * US, compute=100 * US, copies=810 * US))


def test_a_pinned_non_blocking_copy_is_queued_like_a_kernel():
    # Its bytes on the device, 4e6 / 2e10 = 200 us (no latency: nothing waits for it), beside the 100 us kernel:
    # device side 300 us; the host issues each call as it launches a kernel, 5 us dispatch + 4 us launch: host side
    # 18 us. Device-bound, after one of the two calls' host (host 5, launches 4): 309 us.
    pinned = copy(pinned=True, sync=False)
    found = predict(census([BIG_MUL, pinned], [stretch([(0, 1), (1, 1)])]), gpu())
    assert_parts(found, parts(host=5 * US, launches=4 * US, compute=100 * US, copies=200 * US))


def test_a_small_queued_copy_takes_the_device_at_least_its_shortest_kernel():
    # 1 kB / 2e10 = 0.05 us, below the 2 us shortest kernel; the host's 5 + 4 us first: 11 us
    found = predict(census([copy(pinned=True, sync=False, nbytes=1e3)], [stretch([(0, 1)])]), gpu())
    assert_parts(found, parts(host=5 * US, launches=4 * US, copies=2 * US))


def test_a_non_blocking_copy_from_pageable_memory_keeps_its_latency_on_the_device():
    # CUDA stages pageable memory: 10 us + 4e6 / 5e9 = 810 us, after the host's 5 us dispatch
    found = predict(census([copy(sync=False)], [stretch([(0, 1)])]), gpu())
    assert_parts(found, parts(host=5 * US, copies=810 * US))


def test_a_d2h_copy_uses_its_own_figures():
    # 12 us + 8e6 / 4e9 (2 ms) pageable; 6 us + 8e6 / 1.6e10 (500 us) pinned, waited for as well.
    for pinned, seconds in ((False, 2012 * US), (True, 506 * US)):
        found = predict(census([copy("d2h", pinned, 8e6)], [stretch([(0, 1)], sync=True)]), gpu())
        assert_parts(found, parts(host=5 * US, copies=seconds))


def test_a_copy_between_two_devices_costs_a_kernel_reading_and_writing_its_bytes():
    # 2 x 1e8 B / 1e12 = 200 us on the device, after the host's 5 us and 4 us launch.
    found = predict(census([copy("d2d", nbytes=1e8, sync=False)], [stretch([(0, 1)])]), gpu())
    assert_parts(found, parts(host=5 * US, launches=4 * US, compute=200 * US))


def test_a_sync_splits_a_stretch():
    ops = [TINY_ADD, ITEM, BIG_MUL]
    # Split: ten adds and an .item(), 11 calls: host 10 x 9 + 5 = 95 us, then the last of 11 calls' share of the
    # device's 10 x 2 = 20 us, + 20 us round trip; then the mul: its host 9 us, then its 100 us. 244.8 us in all.
    split = predict(census(ops, [stretch([(0, 10), (1, 1)], sync=True), stretch([(2, 1)])]), gpu())
    assert_parts(split, parts(host=60 * US, launches=44 * US, compute=(20 / 11 + 100) * US, sync=20 * US))
    # No sync: one stretch of 11 calls, host 10 x 9 + 9 = 99 us (55 + 44), device 20 + 100 = 120 us: 120 us after
    # one call's share of the host (5 us host, 4 us launches).
    whole = predict(census(ops, [stretch([(0, 10), (2, 1)])]), gpu())
    assert_parts(whole, parts(host=5 * US, launches=4 * US, compute=120 * US))


def test_a_kernel_that_syncs_costs_a_round_trip_too():
    # nonzero: host 5 + 4 us = 9 us, then its 2 us kernel, then 20 us round trip.
    nonzero = op("aten.nonzero", flops=1, sync=True)
    assert_parts(predict(census([nonzero], [stretch([(0, 1)], sync=True)]), gpu()),
                 parts(host=5 * US, launches=4 * US, compute=2 * US, sync=20 * US))


def test_a_graph_replay_costs_a_fixed_host_part_and_each_node_on_the_device():
    node = TINY_ADD | {"phase": "graph"}
    # 50 nodes: host 8 us (the replay, one issue; no overhead nor launch per node), then the device's 50 x (2 + 1)
    # = 150 us.
    many = predict(census([node], [stretch([(0, 50)], replays=1)]), gpu())
    assert_parts(many, parts(launches=8 * US, compute=150 * US))
    # 1 node: the 8 us replay, then its 3 us.
    one = predict(census([node], [stretch([(0, 1)], replays=1)]), gpu())
    assert_parts(one, parts(launches=8 * US, compute=3 * US))


def test_an_operation_launching_several_kernels_costs_each_launch_and_at_least_each_shortest_kernel():
    # cuDNN's GRU forward over 32 steps: 65 kernels, 1e9 GEMM FLOPs. Host 5 us (no grad); launches: the first
    # 9 - 5 = 4 us, the 64 others enqueued at 3 us each, 196 us in all; device max(1e9 / 1e13 = 100 us,
    # 65 x 2 us = 130 us) = 130 us < 201 us: host-bound, and the last of its 65 kernels' share (2 us) after it.
    rnn = op("aten._cudnn_rnn", formula=True, flops=1e9, bytes=4e6, kernels=65)
    assert_parts(predict(census([rnn], [stretch([(0, 1)])]), gpu()),
                 parts(host=5 * US, launches=196 * US, compute=2 * US))
    # 1e10 FLOPs: device 1 ms > 201 us of host: device-bound, after the first of its 65 launches' share of the host
    heavy = rnn | {"flops": 1e10}
    assert_parts(predict(census([heavy], [stretch([(0, 1)])]), gpu()),
                 parts(host=5 / 65 * US, launches=196 / 65 * US, compute=1e-3))
    # replayed in a graph: 65 nodes x 1 us on top of its 130 us, after the 8 us replay
    graphed = rnn | {"phase": "graph"}
    assert_parts(predict(census([graphed], [stretch([(0, 1)], replays=1)]), gpu()),
                 parts(launches=8 * US, compute=195 * US))
    # without the field, one kernel: launches 9 - 5 = 4 us, then the device's max(100 us, 2 us)
    single = {k: v for k, v in rnn.items() if k != "kernels"}
    assert_parts(predict(census([single], [stretch([(0, 1)])]), gpu()),
                 parts(host=5 * US, launches=4 * US, compute=100 * US))


@pytest.mark.parametrize("target", [gpu(), cpu()], ids=["gpu", "cpu"])
def test_loading_costs_the_two_loader_figures_and_not_its_operations(target):
    # a = 62 us, c = 2 us: 2 batches of 64 samples = 2 x 62 + 128 x 2 = 380 us. The collate's stack (on the
    # host, phase loading) is in the figures already.
    stack = op("aten.stack", where="cpu", kernel=False, flops=1e6, bytes=8e6, phase="loading")
    found = predict(census([stack], [stretch([(0, 2)], batches=2, samples=128)]), target)
    assert_parts(found, parts(loading=380 * US))


@pytest.mark.parametrize("batches, samples, per_sample", [
    (2, 128, 3 * US),    # batch 64, a size measured: 3 us a sample
    (1, 256, 4.5 * US),  # batch 256, halfway (in log) from 64 to 1024: the geometric mean of 3 and 6.75 us
    (1, 4096, 6.75 * US),  # beyond the largest batch measured: its figure
    (4, 4, 20 * US),     # batch 1, the smallest
])
def test_a_host_measured_per_batch_size_costs_each_sample_at_the_stretch_s_batch(batches, samples, per_sample):
    by_batch = {"1": 20 * US, "64": 3 * US, "1024": 6.75 * US}
    found = predict(census([], [stretch([], batches=batches, samples=samples)]), cpu(loader_per_sample=by_batch))
    assert_parts(found, parts(loading=samples * per_sample))


# A host that timed its DataLoader's full garbage collections apart: 2 us a sample without them at any batch; one
# collection every 100,000 samples at batch 1024 (none at 64), each 0.1 s, in a process of 200,000 objects.
COLLECTING = {"loader_uncollected_per_sample": {"64": 2 * US, "1024": 2 * US},
              "loader_collections_per_sample": {"64": 0.0, "1024": 1e-5}, "full_collection_seconds": 0.1,
              "collection_heap_objects": 200_000}


@pytest.mark.parametrize("samples, times, heap, collections", [
    (40_000, 1, None, 0),   # 0.4 on average: a sample's median sees none
    (60_000, 1, None, 1),   # 0.6: its median sees one
    (30_000, 8, None, 2),   # a stretch 8 times a sample: 2.4 on average, so two
    (60_000, 1, 400_000, 0),  # twice the calibration's objects: half as often, 0.3, so none
    (60_000, 1, 100_000, 1),  # half of them: 1.2 on average, so one (each then as short: 0.05 s)
])
def test_a_sample_s_median_sees_the_whole_number_of_full_collections_nearest_its_average(samples, times, heap,
                                                                                      collections):
    counted = census([], [stretch([], times=times, batches=samples // 1024, samples=samples)])
    if heap:
        counted["heap_objects"] = heap
    seconds = 0.1 * (heap or 200_000) / 200_000  # the calibration's 0.1 s scaled to the census's objects
    found = predict(counted, cpu(**COLLECTING))
    assert_parts(found, parts(loading=times * samples * 2 * US + collections * seconds))


def test_a_fetch_s_numpy_rows_cost_their_conversions_on_top_of_the_loader_figures_where_measured():
    # a batch of 4 samples of two NumPy fields: 8 conversions (aten.lift_fresh) and two stacks in the fetch; the
    # loader line 62 us a batch + 4 x 2 us = 70 us, each conversion 0.5 us more: 74 us, on a CPU and on a GPU's host
    convert, stack = op("aten.lift_fresh", where="cpu", phase="loading", kernel=False, launches=False), op(
        "aten.stack", where="cpu", phase="loading", kernel=False, flops=64, bytes=512)
    fetch = census([convert, stack], [stretch([(0, 8), (1, 2)], batches=1, samples=4)], device="cpu")
    numpy = {"loader_numpy_field_seconds": 0.5 * US}
    assert_parts(predict(fetch, cpu(**numpy)), parts(loading=74 * US))
    assert_parts(predict(fetch | {"device": "cuda:0"}, gpu(numpy)), parts(loading=74 * US))
    assert_parts(predict(fetch, cpu()), parts(loading=70 * US))  # a host that did not measure it: as before
    outside = census([op("aten.lift_fresh", where="cpu", kernel=False, launches=False)], [stretch([(0, 8)])])
    assert predict(outside | {"device": "cpu"}, cpu(**numpy)).parts["loading"] == 0.0  # not a fetch's: its overhead


@pytest.mark.parametrize("shapes, per_element", [
    ([[1000, 64]], 4e-9),   # rows of 64: halfway (in log) from 16 to 256, the geometric mean of 2 and 8 ns
    ([[10, 4096]], 8e-9),   # longer than any row timed: the longest's
    ([[12]], 2e-9),         # a 1-D input: one row of its length, shorter than any timed: the shortest's
    (None, 50e-9),          # no shapes in the census: op_element_seconds' figure
])
def test_a_sort_costs_its_elements_at_the_host_s_figure_for_its_row_length(shapes, per_element):
    sort = op("aten.sort", where="cpu", flops=128_000, **({"shapes": shapes} if shapes else {}))
    calls = {"tanh": 3 * US, "sort": 4 * US}  # sort's fixed part: the row figure holds its own
    found = predict(census([sort], [stretch([(0, 1)])], device="cpu"),
                    cpu(sort_row_element_seconds={"16": 2e-9, "256": 8e-9}, op_call_seconds=calls))
    assert found.parts["compute"] == pytest.approx(128_000 * per_element + (4 * US if shapes is None else 0.0))
    # a host that did not time sort by row length: its line, 4 us + 50 ns per element, whatever the row
    assert predict(census([sort], [stretch([(0, 1)])], device="cpu"), cpu(op_call_seconds=calls)).parts[
        "compute"] == pytest.approx(4 * US + 128_000 * 50e-9)


@pytest.mark.parametrize("missing", sorted(COLLECTING))
def test_a_host_without_every_collection_figure_prices_its_loader_as_before(missing):
    by_batch = {"64": 3 * US, "1024": 5 * US}  # loader_per_sample: the collections spread over every sample
    host = {field: value for field, value in COLLECTING.items() if field != missing} | {"loader_per_sample": by_batch}
    found = predict(census([], [stretch([], batches=100, samples=102_400)]), cpu(**host))
    assert_parts(found, parts(loading=102_400 * 5 * US))


def test_a_loader_below_the_batch_that_sets_collections_off_costs_its_samples_alone():
    found = predict(census([], [stretch([], times=1000, batches=16, samples=1024)]), cpu(**COLLECTING))
    assert_parts(found, parts(loading=1000 * 1024 * 2 * US))  # batch 64: no collection in 1,024,000 samples


@pytest.mark.parametrize("heap", [0, -5, "many", True])
def test_a_census_s_object_count_must_be_a_number_of_objects(heap):
    counted = census([], [stretch([], batches=1, samples=64)]) | {"heap_objects": heap}
    with pytest.raises(PredictionError, match="census.heap_objects: .* expected a number >= 1"):
        predict(counted, cpu(**COLLECTING))


@pytest.mark.parametrize("batch1, batched, seconds", [
    (1 * US, 2 * US, 127 / 63 * US),  # c = (64 x 2 - 1) / 63 = 127/63 us; a = 1 - 127/63 < 0, so 0
    (64 * US, 0.5 * US, 64 * US),  # c = (32 - 64) / 63 < 0, so 0; a = 64 us
])
def test_the_loader_costs_are_never_negative(batch1, batched, seconds):
    target = gpu({"loader_batch1_per_sample": batch1, "loader_batched_per_sample": batched})
    found = predict(census([], [stretch([], batches=1, samples=1)]), target)
    assert_parts(found, parts(loading=seconds))


def test_a_cpu_target_adds_everything_up():
    ops = [TINY_ADD, ITEM, BIG_MUL, copy()]
    shape = census(ops, [stretch([(0, 10), (1, 1)], sync=True), stretch([(2, 1), (3, 1)], sync=True)])
    found = predict(shape, cpu())
    # Overheads: 12 ops x 5 us = 60 us (the copy makes none on a CPU). Compute, each op's elements in cache plus its
    # bytes from memory: 10 adds x (1 / 1e9 + 12 / 1e10) = 10 x 2.2 ns = 22 ns; the mul 2.5e7 / 1e9 = 25 ms plus
    # 1e8 / 1e10 = 10 ms.
    assert_parts(found, parts(host=60 * US, compute=35e-3 + 22e-9))
    assert found.target == "test CPU"
    assert found.notes == ("the census's host-device copies cost nothing on a CPU, which makes none",)


def test_a_gpu_units_host_side_work_costs_host_compute_and_shape_inference_none():
    # On the host: 5 us + 1e9 / 1e11 = 10 ms. Shape inference (meta, not the unit's device): 5 us only.
    host_mm = op("aten.mm", where="cpu", kernel=False, formula=True, flops=1e9)
    inferred = op("aten.mul", where="meta", kernel=False, flops=1e6, bytes=1e7)
    found = predict(census([host_mm, inferred], [stretch([(0, 1), (1, 1)])], device="cuda:0"), gpu())
    assert_parts(found, parts(host=10e-3 + 10 * US))
    # On a CPU likewise: the host's mm 5 us + 10 ms (compute), the shape inference 5 us.
    found = predict(census([host_mm, inferred], [stretch([(0, 1), (1, 1)])], device="cpu"), cpu())
    assert_parts(found, parts(host=10 * US, compute=10e-3))
    # its bytes stream in on top, on either: 1e8 B at 1e10 B/s = 10 ms more
    moving = host_mm | {"bytes": 1e8}
    found = predict(census([moving, inferred], [stretch([(0, 1), (1, 1)])], device="cuda:0"), gpu())
    assert_parts(found, parts(host=20e-3 + 10 * US))


def test_an_op_timed_one_by_one_costs_its_line_where_that_is_more_than_its_elements_and_its_bytes_on_top():
    # in cache, then each op's bytes from memory at 1e10 B/s
    tanh = op("aten.tanh", where="cpu", flops=1000, bytes=8000)      # line 3 us + 1000 x 20 ns = 23 us, + 0.8 us
    in_place = op("aten.tanh_", where="cpu", flops=1000, bytes=8000)  # an in-place variant: the same 23.8 us
    sort = op("aten.sort", where="cpu", flops=10, bytes=1e6)          # line 0.5 us, + 1e6 / 1e10 = 100 us
    add = op("aten.add", where="cpu", flops=1000, bytes=12000)        # not listed: 1000 / 1e9 = 1 us, + 1.2 us
    found = predict(census([tanh, in_place, sort, add], [stretch([(0, 1), (1, 1), (2, 1), (3, 1)])], device="cpu"),
                    cpu())
    # 4 ops x 5 us of overhead; 23.8 + 23.8 + 100.5 + 2.2 us of work
    assert_parts(found, parts(host=20 * US, compute=150.3 * US))


def test_a_large_element_wise_op_costs_its_elements_at_the_in_cache_rate_and_its_bytes_from_memory():
    # the rate 1e10 elements/s up to 2**20 elements a call, 1e8 beyond (a probe that streams and faults its pages):
    # an add of 2**22 elements costs them at 2**20's rate, 0.4194304 ms, and its 12 B each at 1e10 B/s, 5.0331648 ms
    target = cpu(elementwise_rate=lambda flops: 1e10 if flops <= 2**20 else 1e8)
    add = op("aten.add", where="cpu", flops=2**22, bytes=12 * 2**22)
    found = predict(census([add], [stretch([(0, 1)])], device="cpu"), target)
    assert found.parts["compute"] == pytest.approx(0.4194304e-3 + 5.0331648e-3)
    assert ("elementwise_rate", 2**20) in target.host.asked


def test_a_catalogue_cpu_costs_the_larger_of_an_op_s_elements_and_its_bytes():
    # its figures are large working sets' (the element-wise rate is its bandwidth over 12 bytes): 1,000 elements at
    # 1e9/s = 1 us against 12,000 B at 1e10 B/s = 1.2 us; a calibrated host pays both, 2.2 us
    add = op("aten.add", where="cpu", flops=1000, bytes=12000)
    catalogue = Target(Device("cpu", "test CPU", CPU_FIGURES, origin="catalogue"), None, "test CPU")
    assert predict(census([add], [stretch([(0, 1)])], device="cpu"), catalogue).parts["compute"] == pytest.approx(
        1.2 * US)
    assert predict(census([add], [stretch([(0, 1)])], device="cpu"), cpu()).parts["compute"] == pytest.approx(2.2 * US)


def test_a_host_without_those_figures_costs_every_op_at_the_add_rate():
    tanh = op("aten.tanh", where="cpu", flops=1000, bytes=8000)  # 1000 / 1e9 = 1 us, + 8000 / 1e10 = 0.8 us
    found = predict(census([tanh], [stretch([(0, 1)])], device="cpu"),
                    cpu(op_call_seconds={}, op_element_seconds={}))
    assert_parts(found, parts(host=5 * US, compute=1.8 * US))


NARROW = {"2": 1e-9, "16": 0.2e-9}  # seconds per element of the left operand, outputs 2-15 and 16+ columns wide


def gemm(name, shapes, flops) -> dict:
    return op(name, where="cpu", formula=True, flops=flops, shapes=shapes)


def test_a_gemm_with_a_narrow_output_costs_its_left_operands_elements_where_that_is_more_than_its_flops():
    narrow = gemm("aten.addmm", [[5], [1000, 32], [32, 5]], 320_000)  # 32,000 x 1 ns = 32 us > 320,000 / 1e11 = 3.2 us
    batched = gemm("aten.bmm", [[3, 1000, 32], [3, 32, 5]], 960_000)   # 96,000 x 1 ns = 96 us > 9.6 us
    wide = gemm("aten.mm", [[1000, 32], [32, 64]], 4_096_000)        # 32,000 x 0.2 ns = 6.4 us < 40.96 us
    column = gemm("aten.mm", [[1000, 32], [32, 1]], 64_000)          # no width measured at or below 1: 0.64 us
    found = predict(census([narrow, batched, wide, column], [stretch([(0, 1), (1, 1), (2, 1), (3, 1)])],
                           device="cpu"), cpu(narrow_gemm_seconds=NARROW))
    assert_parts(found, parts(host=20 * US, compute=(32 + 96 + 40.96 + 0.64) * US))


# A 2 x 2 x 2 grid of GEMM times: M 10 or 1000, K 4 or 64, N 2 or 32; each time is 1 us x (M / 10) x (N / 2) x
# (K / 4), and nn.Linear's addmm 1 us more
GRID = {f"{m}x{k}x{n}": 1 * US * (m / 10) * (n / 2) * (k / 4) for m in (10, 1000) for k in (4, 64) for n in (2, 32)}
LINEAR_GRID = {shape: seconds + 1 * US for shape, seconds in GRID.items()}


def test_a_gemm_on_a_host_that_timed_a_grid_of_shapes_costs_the_grids_time_at_its_shape():
    on_grid = gemm("aten.mm", [[1000, 4], [4, 32]], 256_000)             # 1 us x 100 x 16 = 1,600 us, not its FLOPs' 2.56 us
    between = gemm("aten.mm", [[100, 16], [16, 8]], 25_600)             # M, K and N halfway in logs: 1 us x 10 x 4 x 4 = 160 us
    linear = gemm("aten.addmm", [[2], [10, 64], [64, 2]], 2_560)         # the Linear grid: 16 + 1 = 17 us
    batched = gemm("aten.bmm", [[10, 10, 4], [10, 4, 2]], 1_600)        # 10 x 10 = 100 rows: 1 us x 10 = 10 us
    based = gemm("aten.baddbmm", [[10, 10, 2], [10, 10, 4], [10, 4, 2]], 1_600)  # its matrices after the base: 10 us
    found = predict(census([on_grid, between, linear, batched, based], [stretch([(i, 1) for i in range(5)])],
                           device="cpu"), cpu(gemm_seconds=GRID, linear_seconds=LINEAR_GRID, narrow_gemm_seconds=NARROW))
    assert found.parts["compute"] == pytest.approx((1600 + 160 + 17 + 10 + 10) * US)


def test_a_gemm_beyond_the_grid_grows_in_proportion_and_below_it_costs_the_smallest_shapes_time():
    beyond = gemm("aten.mm", [[4000, 256], [256, 32]], 65_536_000)  # (1000, 64, 32) = 25,600 us, x 4 (M) x 4 (K)
    wider = gemm("aten.mm", [[2000, 4], [4, 64]], 1_024_000)         # (1000, 4, 32) = 1,600 us, x 2 (M) x 2 (N)
    below = gemm("aten.mm", [[1, 1], [1, 1]], 2)                     # (10, 4, 2): 1 us
    empty = gemm("aten.mm", [[0, 4], [4, 2]], 0)                     # no rows: nothing to do
    found = predict(census([beyond, wider, below, empty], [stretch([(i, 1) for i in range(4)])], device="cpu"),
                    cpu(gemm_seconds=GRID, linear_seconds=LINEAR_GRID))
    assert found.parts["compute"] == pytest.approx((25_600 * 16 + 1_600 * 4 + 1) * US)


def test_a_gemm_deeper_than_the_grid_adds_the_two_deepest_shapes_difference_per_unit_of_depth():
    # each time 10 us fixed plus 1 us per unit of depth: K 4 -> 14 us, K 64 -> 74 us; 60 us over 60 units
    fixed = {f"{m}x{k}x{n}": (10 + k) * US for m in (10, 1000) for k in (4, 64) for n in (2, 32)}
    deep = gemm("aten.mm", [[10, 40_000], [40_000, 2]], 1_600_000)  # 74 us + (40,000 - 64) x 1 us = 40,010 us
    deep_and_long = gemm("aten.mm", [[2000, 6_400], [6_400, 2]], 51_200_000)  # (74 + 6,336) us, x 2 (M beyond 1000)
    found = predict(census([deep, deep_and_long], [stretch([(0, 1), (1, 1)])], device="cpu"),
                    cpu(gemm_seconds=fixed, linear_seconds=fixed))
    # in proportion from K 64 it would be 74 us x 625 = 46,250 us: the fixed 10 us counted 625 times
    assert found.parts["compute"] == pytest.approx((40_010 + 2 * 6_410) * US)


@pytest.mark.parametrize("matmul_flops, expected_us", [
    (1e11, 163.84),    # its 16,384,000 FLOPs at 1e11 per second: far below the corner's 102,400 us
    (1e8, 102_400)])   # at 1e8 per second 163,840 us: the corner (1000, 64, 32) x 2 (K) x 2 (N) is less
def test_a_gemm_deeper_and_wider_than_the_grid_costs_at_most_its_flops_at_the_matmul_rate(matmul_flops, expected_us):
    square = gemm("aten.mm", [[1000, 128], [128, 64]], 16_384_000)
    found = predict(census([square], [stretch([(0, 1)])], device="cpu"),
                    cpu(gemm_seconds=GRID, linear_seconds=LINEAR_GRID, matmul_flops=matmul_flops))
    assert found.parts["compute"] == pytest.approx(expected_us * US)


def test_a_gemm_deeper_and_wider_than_the_grid_on_a_host_that_timed_wide_gemms_costs_their_line_per_weight_element():
    # over a 100 x 200 weight, 1,000 us at 10 rows and 2,800 us at 100: per weight element 0.05 us and 0.14 us, the
    # line 0.04 us + 0.001 us a row
    wide = {"10x100x200": 1_000 * US, "100x100x200": 2_800 * US}
    square = gemm("aten.mm", [[1000, 128], [128, 64]], 16_384_000)         # (0.04 + 1.0) us x 128 x 64 = 8,519.68 us
    linear = gemm("aten.addmm", [[64], [50, 400], [400, 64]], 2_560_000)  # (0.04 + 0.05) us x 400 x 64 = 2,304 us
    within = gemm("aten.mm", [[1000, 64], [64, 32]], 4_096_000)           # on the grid (N 32): 25,600 us
    # at 1e14 FLOP/s the square would be 0.16 us: the rule without the wide GEMMs (the test above)
    found = predict(census([square, linear, within], [stretch([(0, 1), (1, 1), (2, 1)])], device="cpu"),
                    cpu(gemm_seconds=GRID, linear_seconds=LINEAR_GRID, wide_gemm_seconds=wide, matmul_flops=1e14))
    assert found.parts["compute"] == pytest.approx((8_519.68 + 2_304 + 25_600) * US)


def test_a_gemm_grid_missing_a_shape_is_refused_by_name():
    holed = {shape: seconds for shape, seconds in GRID.items() if shape != "1000x64x32"}
    with pytest.raises(PredictionError, match=r"host figure gemm_seconds: 7 shapes are not a grid .*2 x 2 x 2 shapes"):
        predict(census([gemm("aten.mm", [[10, 4], [4, 2]], 160)], [stretch([(0, 1)])], device="cpu"),
                cpu(gemm_seconds=holed))


def test_a_gemm_without_its_matrices_shapes_is_refused_by_name():
    broken = gemm("aten.addmm", [[5], [1000, 32]], 320_000)  # the right matrix is missing
    with pytest.raises(PredictionError, match=r"aten.addmm's shapes: .* expected its two matrices' shapes"):
        predict(census([broken], [stretch([(0, 1)])], device="cpu"), cpu(narrow_gemm_seconds=NARROW))


# oneDNN's fused LSTM layer: 100 steps, batch 10, input 4, hidden 8 (32 gate rows); time-first input, its weights,
# biases and initial state
LSTM_SHAPES = [[100, 10, 4], [32, 4], [32, 8], [32], [32], [10, 8], [10, 8]]


def test_onednn_s_lstm_layer_costs_its_gemms_on_the_grid_and_its_gates_at_the_element_wise_rate():
    forward = gemm("aten.mkldnn_rnn_layer", LSTM_SHAPES, 0)
    backward = gemm("aten.mkldnn_rnn_layer_backward", LSTM_SHAPES + [[100, 10, 8]], 0)
    # the element-wise rate 1e9 for calls of up to 10,000 elements, 1e8 for larger ones
    found = predict(census([forward, backward], [stretch([(0, 1), (1, 1)])], device="cpu"),
                    cpu(gemm_seconds=GRID, linear_seconds=LINEAR_GRID,
                        elementwise_rate=lambda flops: 1e9 if flops <= 10_000 else 1e8))
    # forward: the input's GEMM over all 1,000 rows (1000 x 4 x 32: 1 us x 100 x 16 = 1,600 us), then 100 steps of
    # the hidden state's (10 x 8 x 32: 1 us x 2 (K) x 16 = 32 us): 4,800 us; gates 10 x 8 x 13 = 1,040 elements a
    # step at 1e9 per second, 100 steps: 104 us. 4,904 us.
    # backward: 100 steps of the hidden state's gradient (10 x 32 x 8: 1 us x 8 (K) x 4 (N) = 32 us), the input's
    # (1000 x 32 x 4: 100 x 8 x 2 = 1,600 us), the weights' (32 x 1000 x 4: 3.2 x 250 (K beyond 64, in proportion)
    # x 2 = 1,600 us; 32 x 1000 x 8: 3.2 x 250 x 4 = 3,200 us): 9,600 us; gates twice the forward's (2,080 elements a
    # step, still at 1e9): 208 us. 9,808 us.
    assert_parts(found, parts(host=10 * US, compute=(4_904 + 9_808) * US))


def test_on_a_host_that_timed_the_fused_lstm_layer_its_flops_go_at_that_rate_for_their_flops_per_step():
    # 2 x 10 x (4 + 8) x 32 = 7,680 GEMM FLOPs a step, 768,000 over 100 steps (the backward twice that). The rates,
    # 1e8 FLOP/s at 1,000 FLOPs a step and 1e10 at 100,000, are in proportion to the size in logs: 7.68e8 at 7,680.
    forward = gemm("aten.mkldnn_rnn_layer", LSTM_SHAPES, 768_000)
    backward = gemm("aten.mkldnn_rnn_layer_backward", LSTM_SHAPES + [[100, 10, 8]], 1_536_000)
    rates = {"1000": 1e8, "100000": 1e10}
    found = predict(census([forward, backward], [stretch([(0, 1), (1, 1)])], device="cpu"),
                    cpu(gemm_seconds=GRID, linear_seconds=LINEAR_GRID, lstm_layer_flops=rates,
                        lstm_layer_backward_flops=rates))
    # 1 ms and 2 ms, the grid and the element-wise rate unread
    assert_parts(found, parts(host=10 * US, compute=3_000 * US))


def test_a_fused_lstm_layer_without_its_shapes_is_refused_by_name():
    broken = gemm("aten.mkldnn_rnn_layer", LSTM_SHAPES[:3], 0)  # no initial state
    with pytest.raises(PredictionError, match=r"aten.mkldnn_rnn_layer's shapes: .* expected its input"):
        predict(census([broken], [stretch([(0, 1)])], device="cpu"), cpu(gemm_seconds=GRID, linear_seconds=LINEAR_GRID))

# torch's CPU flash attention: seconds per block of 32 or 256 query rows by 32 or 512 keys at head size 8 or 128, in
# proportion to each (1 us for the smallest); the backward three times the forward
BLOCKS = {f"{q}x{k}x{d}": 1 * US * (q / 32) * (k / 32) * (d / 8) for q in (32, 256) for k in (32, 512) for d in (8, 128)}
BACKWARD_BLOCKS = {shape: 3 * seconds for shape, seconds in BLOCKS.items()}
FLASH = "aten._scaled_dot_product_flash_attention_for_cpu"


def test_flash_attention_costs_each_head_s_blocks_at_the_host_s_time_for_their_shape():
    # 2 x 3 heads; 64 queries split in blocks of 32 rows, 600 keys in 512 and 88: per head two blocks of 32 x 512
    # (1 us x 16 = 16 us) and two of 32 x 88 (between 32 and 512 keys in logs, in proportion: 2.75 us): 37.5 us,
    # 225 us in all; the backward (its query after the output's gradient) three times that
    query, key = [2, 3, 64, 8], [2, 3, 600, 8]
    forward = gemm(FLASH, [query, key, key], 0)
    backward = gemm(FLASH + "_backward", [query, query, key, key, query, [2, 3, 64]], 0)
    found = predict(census([forward, backward], [stretch([(0, 1), (1, 1)])], device="cpu"),
                    cpu(flash_attention_seconds=BLOCKS, flash_attention_backward_seconds=BACKWARD_BLOCKS))
    assert found.parts["compute"] == pytest.approx((225 + 675) * US)
    assert found.notes == ()


def test_flash_attention_on_a_host_that_timed_no_blocks_costs_each_block_s_gemms_and_an_exp_per_score():
    # one head of 32 queries and keys, head size 8: one block. Its two GEMMs (32 x 8 by 8 x 32) in cache each take
    # their 16,384 FLOPs at 1e11 (0.16384 us); 1,024 scores at the add's rate (no exp timed): 1.024 us.
    # 2 x 0.16384 + 1.024 = 1.35168 us (the operation's own bytes, none here, stream in on top)
    shape = [1, 1, 32, 8]
    found = predict(census([gemm(FLASH, [shape, shape, shape], 0)], [stretch([(0, 1)])], device="cpu"), cpu())
    assert found.parts["compute"] == pytest.approx(1.35168 * US)
    assert found.notes == ("flash attention is priced as its blocks' GEMMs and an exp per score, an estimate: test CPU "
                           "has no flash_attention_seconds (`python -m core calibrate` times them)",)


def test_flash_attention_without_its_query_and_key_shapes_is_refused_by_name():
    broken = gemm(FLASH, [[32, 8]], 0)
    with pytest.raises(PredictionError, match=r"flash_attention_for_cpu's shapes: .* expected its query's and key's"):
        predict(census([broken], [stretch([(0, 1)])], device="cpu"), cpu(flash_attention_seconds=BLOCKS))


def test_sized_figures_are_read_at_the_operations_flops_per_call():
    # 1e12 FLOP/s below 1e9 FLOPs per call, 1e13 from there: 1e8 / 1e12 = 100 us and 1e10 / 1e13 = 1 ms, after one
    # of the two calls' host (5 us host, 4 us launch).
    target = gpu(matmul_flops=lambda flops: 1e12 if flops < 1e9 else 1e13)
    small, large = (op("aten.mm", formula=True, flops=f) for f in (1e8, 1e10))
    found = predict(census([small, large], [stretch([(0, 1), (1, 1)])]), target)
    assert_parts(found, parts(host=5 * US, launches=4 * US, compute=1100 * US))
    assert sorted(target.gpu.asked) == [("matmul_flops", 1e8), ("matmul_flops", 1e10)]


def test_merged_stretches_count_their_times():
    # One occurrence: an add and an .item(): the host's 9 + 5 = 14 us, then one of the two calls' share of the
    # device's 2 us, + 20 us = 35 us; 2,000 times = 70 ms.
    ops = [TINY_ADD, ITEM]
    merged = predict(census(ops, [stretch([(0, 1), (1, 1)], times=2000, sync=True)]), gpu())
    assert_parts(merged, parts(host=2000 * 10 * US, launches=2000 * 4 * US, compute=2000 * 1 * US,
                               sync=2000 * 20 * US))
    # Three adds per occurrence, 0.5 occurrences per sample: 0.5 x (3 x 9 us + 2 us) = 14.5 us.
    half = predict(census([TINY_ADD], [stretch([(0, 3)], times=0.5)]), gpu())
    assert half.seconds == pytest.approx(14.5 * US)


def test_the_parts_sum_to_the_seconds_and_the_dict_holds_them():
    ops = [TINY_ADD, ITEM, BIG_MUL, copy(), copy(pinned=True, sync=False), TINY_ADD | {"phase": "graph"}]
    shape = census(ops, [stretch([(0, 30), (1, 1)], sync=True, batches=1, samples=64),
                         stretch([(2, 2), (4, 1), (3, 1)], times=3, sync=True), stretch([(5, 7)], replays=1)])
    for target in (gpu(), cpu()):
        found = predict(shape, target)
        assert tuple(found.parts) == PARTS and found.seconds > 0
        assert sum(found.parts.values()) == pytest.approx(found.seconds, rel=1e-12)
        assert found.to_dict() == {"seconds": found.seconds, "parts": found.parts, "target": target.title,
                                   "notes": list(found.notes), "gpu_idle": found.gpu_idle}
        assert 0 < found.gpu_idle < found.seconds if target.gpu else found.gpu_idle == 0


def test_per_unit_divides_seconds_and_parts():
    found = per_unit(predict(census([TINY_ADD], [stretch([(0, 100)])]), gpu()), 4)
    # 902 us per sample of 4 units: 225.5 us; host 500 / 4 = 125 us, launches 400 / 4 = 100 us, compute 2 / 4.
    assert_parts(found, parts(host=125 * US, launches=100 * US, compute=0.5 * US))
    for bad in (0, -1, True, "4", float("nan")):
        with pytest.raises(PredictionError, match="per_call"):
            per_unit(found, bad)


def test_a_gpu_prediction_from_a_cpu_census_says_what_it_lacks():
    found = predict(census([TINY_ADD], [stretch([(0, 1)])], device="cpu"), gpu())
    assert found.notes and "taken on the CPU" in found.notes[0]
    assert predict(census([TINY_ADD], [stretch([(0, 1)])]), gpu()).notes == ()


def test_crossover_is_the_smallest_value_from_which_the_gpu_stays_faster():
    points = [(64, 1.0, 0.5), (1, 1.0, 2.0), (16, 1.0, 0.9), (4, 1.0, 1.0), (256, 1.0, 0.1)]
    assert crossover(points) == 16  # at 4 they tie: not below
    # faster at 2, slower at 4, faster again from 8: the GPU wins from 8 on, not from 2
    assert crossover([(1, 1.0, 2.0), (2, 1.0, 0.5), (4, 1.0, 1.5), (8, 1.0, 0.5), (16, 1.0, 0.2)]) == 8
    assert crossover([(1, 1.0, 0.5), (2, 1.0, 2.0)]) is None  # slower at the largest batch swept
    assert crossover([(1, 1.0, 2.0), (2, 1.0, 1.5)]) is None
    assert crossover([]) is None
    for bad in ([(1, 1.0)], [(1, "1", 2.0)], [(1, 1.0, float("inf"))], [None]):
        with pytest.raises(PredictionError, match=r"predicted\[0\]"):
            crossover(bad)


@pytest.mark.parametrize("bad, message", [
    ({"skipped": "needs a CUDA GPU"}, r"census: the point was skipped \('needs a CUDA GPU'\)"),
    ({"error": "RuntimeError: boom"}, "census: the census failed"),
    ({"operations": 3, "kernels": 2}, "holds no 'ops' and 'stretches'.*take it again with this version"),
    ([], "census: a list, not a census"),
    (census({}, []), r"census.ops: \{\} is not a list"),
    (census([op(phase="warmup")], []),
     r"census.ops\[0\].phase: 'warmup'; expected one of step, loading, graph, optimizer"),
    (census([op(flops=-1)], []), r"census.ops\[0\].flops: -1; expected a number >= 0"),
    (census([op(nested="yes")], []), r"census.ops\[0\].nested: 'yes'; expected true or false"),
    (census([op(transformed=1)], []), r"census.ops\[0\].transformed: 1; expected true or false"),
    (census([op(kernels=0)], []), r"census.ops\[0\].kernels: 0; expected a number >= 1"),
    (census([op(kernels="65")], []), r"census.ops\[0\].kernels: '65'; expected a number >= 1"),
    (census([{"op": "aten.add"}], []), r"census.ops\[0\].where: missing"),
    (census([copy("up")], []), r"census.ops\[0\].copy.direction: 'up'; expected one of h2d, d2h, d2d"),
    (census([TINY_ADD], [stretch([(1, 1)])]), r"census.stretches\[0\].ops\[0\]: \[1, 1\] is not .* below 1"),
    (census([TINY_ADD], [stretch([(0, 1)], times=float("nan"))]), r"census.stretches\[0\].times: nan"),
    (census([TINY_ADD], [stretch([(0, 1)]) | {"graph_replays": None}]), r"census.stretches\[0\].graph_replays"),
    (census([TINY_ADD], [{k: v for k, v in stretch([(0, 1)]).items() if k not in ("module_calls", "optimizer_steps")}]),
     "stretches count no module calls or optimiser steps.*take it again with this version"),
    (census([TINY_ADD], [stretch([(0, 1)], steps=-1)]), r"census.stretches\[0\].optimizer_steps: -1"),
    (census([TINY_ADD], [stretch([(0, 1)]) | {"module_classes": {"Linear": -1}}]),
     r"census.stretches\[0\].module_classes: \{'Linear': -1\}; expected \{module class: calls\}"),
])
def test_a_census_the_model_cannot_read_is_refused_naming_why(bad, message):
    with pytest.raises(PredictionError, match=message):
        predict(bad, gpu())
    assert issubclass(PredictionError, ValueError)



def test_a_convolution_beyond_the_largest_probe_adds_its_further_flops_at_the_matrix_product_rate():
    # conv probes to 1e7 FLOPs (1e11 FLOP/s there: 100 us, mostly a GPU's fixed part); products at 1e13 FLOP/s
    def sized(*points):
        return hardware.Figure(tuple(points), None, False, "")
    figures = {name: hardware.Figure(value, None, False, "") for name, value in GPU_FIGURES.items()}
    device = hardware.Device("gpu", "test GPU", "gpu", "calibrated", figures | {
        "conv_flops": sized((1e5, 1e9), (1e7, 1e11)), "matmul_flops": sized((1e6, 1e11), (1e9, 1e13))})
    host = Device("cpu", "test CPU", CPU_FIGURES)
    def compute(flops):
        conv = op("aten.convolution", formula=True, flops=flops)
        return predict(census([conv], [stretch([(0, 1)])]), Target(host, device, "test")).parts["compute"]
    assert compute(1e7) == pytest.approx(100 * US)  # at the largest probe: its rate
    assert compute(1e10) == pytest.approx(100 * US + (1e10 - 1e7) / 1e13)  # 1.0999 ms, not 100 ms
    # never slower than the last probe's rate held: a CPU whose products run slower than its convolutions
    slow_products = hardware.Device("cpu", "test CPU", "cpu", "calibrated", {
        name: hardware.Figure(value, None, False, "") for name, value in CPU_FIGURES.items()} | {
        "conv_flops": sized((1e5, 1e9), (1e7, 1e11)), "matmul_flops": sized((1e6, 1e10), (1e9, 5e10))})
    conv = op("aten.convolution", where="cpu", formula=True, flops=1e10)
    found = predict(census([conv], [stretch([(0, 1)])], device="cpu"), Target(slow_products, None, "test"))
    assert found.parts["compute"] == pytest.approx(1e10 / 1e11)


def _real_cpu(elementwise_rate) -> hardware.Target:
    """A calibrated CPU of CPU_FIGURES as core.model.hardware holds one: its element-wise rate sized."""
    figures = {name: hardware.Figure(value, "test", False, "") for name, value in CPU_FIGURES.items()}
    figures["elementwise_rate"] = hardware.Figure(elementwise_rate, "test", False, "")
    return hardware.Target(hardware.Device("test-cpu", "test CPU", "cpu", "calibrated", figures))


# The element-wise probe: 1e9 elements/s in cache (2**20 elements); its largest add, 2**24 elements (64 MiB a tensor,
# past the 32 MiB threshold), at 2.5e8/s: 4 ns an element, of which 1 ns in cache and 12 B / 1e10 B/s = 1.2 ns
# streamed, so 1.8 ns faulting 4 bytes in: 0.45 ns a byte.
FAULTING = ((2.0**20, 1e9), (2.0**24, 2.5e8))


def test_a_new_tensor_past_the_mmap_threshold_faults_its_pages_in_at_the_hosts_rate():
    # 2**24 elements written (64 MiB, new): 2**24 x 1 ns in cache + 1.2e8 B / 1e10 + 2**26 B x 0.45 ns
    big = op("aten.mul", where="cpu", flops=2**24, bytes=1.2e8, dtypes=["float32", "float32"])
    found = predict(census([big], [stretch([(0, 1)])], device="cpu"), _real_cpu(FAULTING))
    assert_parts(found, parts(host=5 * US, compute=2**24 * 1e-9 + 1.2e-2 + 2**26 * 0.45e-9))
    # exactly 32 MiB (2**23 elements: 32 x 16 x 128 x 128 floats): glibc maps it afresh too (its chunk's header puts
    # it past the threshold)
    exact = big | {"flops": 2**23, "bytes": 6e7}
    found = predict(census([exact], [stretch([(0, 1)])], device="cpu"), _real_cpu(FAULTING))
    assert found.parts["compute"] == pytest.approx(2**23 * 1e-9 + 6e-3 + 2**25 * 0.45e-9)
    # in place (mul_), or 8 MiB (under the threshold): no faults
    for small in (big | {"op": "aten.mul_"}, big | {"flops": 2**21, "bytes": 1.5e7}):
        found = predict(census([small], [stretch([(0, 1)])], device="cpu"), _real_cpu(FAULTING))
        assert found.parts["compute"] == pytest.approx(small["flops"] * 1e-9 + small["bytes"] / 1e10)


def test_a_host_whose_largest_element_wise_probe_stayed_under_the_threshold_prices_no_faults():
    # a quick calibration's largest add: 2**20 elements (4 MiB)
    big = op("aten.mul", where="cpu", flops=2**24, bytes=1.2e8)
    found = predict(census([big], [stretch([(0, 1)])], device="cpu"), _real_cpu(((2.0**12, 2e9), (2.0**20, 1e9))))
    assert found.parts["compute"] == pytest.approx(2**24 * 1e-9 + 1.2e-2)


def test_a_grouped_convolution_s_backward_costs_at_most_its_two_gradients_whatever_the_census_counted():
    # A depthwise Conv1d (32 channels, groups 32, kernel 3) on 8 x 32 x 256: its forward 2 x 8 x 32 x 256 x 1 x 3 =
    # 393,216 FLOPs; torch.utils.flop_counter counts its backward as a dense convolution's, 32 x 2 x 393,216. Its two
    # gradients cost its forward's FLOPs each: 786,432 FLOPs at conv_flops (5e10), and the census's count where less.
    weight, inputs = [32, 1, 3], [8, 32, 256]
    counted = conv_call("aten.convolution_backward", weight, 32 * 2 * 393216, inputs=inputs)
    found = predict(census([counted], [stretch([(0, 1)])], device="cpu"), cpu())
    assert found.parts["compute"] == pytest.approx(2 * 393216 / 5e10)
    weight_only = counted | {"flops": 393216}  # a first layer's backward: no input gradient
    found = predict(census([weight_only], [stretch([(0, 1)])], device="cpu"), cpu())
    assert found.parts["compute"] == pytest.approx(393216 / 5e10)


def test_a_cost_plus_calls_of_another_adds_every_field():
    names = [f.name for f in dataclasses.fields(costmodel.Cost)]
    one = costmodel.Cost(*range(1, len(names) + 1))
    added = one.plus(costmodel.Cost(*[10.0] * len(names)), 3)
    assert [getattr(added, name) for name in names] == [getattr(one, name) + 30.0 for name in names]
