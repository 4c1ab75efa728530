"""The what-ifs' census rewrites (core.model.whatifs) on hand-made censuses, predicted on test_costmodel's round GPU
figures: every expected time is worked out by hand beside it; mixed precision's GPU figures on the real catalogue."""
import copy as deep

import pytest

from core.model import costmodel, hardware, whatifs
from tests.unit.test_costmodel import US, assert_parts, census, copy, gpu, op, parts, stretch

# The input's 4 MB copy in from pageable memory (blocking), a view, a 1e9-FLOP GEMM, a ReLU moving 8 MB and an
# optimiser kernel moving 4 MB; the copy alone in the first stretch (its sync ends it), the step in the second with
# three module calls and one optimiser step.
H2D = copy()  # aten._to_copy, h2d, pageable, 4e6 bytes, sync
VIEW = op("aten.t", kernel=False, launches=False)
MM = op("aten.mm", formula=True, flops=1e9, bytes=8e6, autograd=True, nested=True,
        shapes=[[1000, 500], [500, 1000]])  # 2 x 1000 x 500 x 1000 = 1e9 FLOPs
RELU = op("aten.relu", flops=1e6, bytes=8e6)
ADAM = op("aten._foreach_add_", phase="optimizer", flops=1e3, bytes=4e6)


def step_census() -> dict:
    step = stretch([(1, 1), (2, 1), (3, 1), (4, 1)], modules=3, steps=1) | {"module_classes": {"Linear": 2, "ReLU": 1}}
    return census([H2D, VIEW, MM, RELU, ADAM], [stretch([(0, 1)], sync=True), step])


# -- a CUDA graph --------------------------------------------------------------------------------------------------

def test_a_graph_replays_the_step_s_kernels_drops_what_launches_nothing_and_keeps_the_copy():
    given = step_census()
    before = deep.deepcopy(given)
    found = whatifs.as_graph(given)
    assert given == before  # the eager census is left as it was
    assert [o["phase"] for o in found["ops"]] == ["step", "step", "graph", "graph", "graph"]  # the copy is no kernel
    assert [s["ops"] for s in found["stretches"]] == [[[0, 1]], [[2, 1], [3, 1], [4, 1]]]  # the view is gone
    assert [s["graph_replays"] for s in found["stretches"]] == [0, 1]  # one replay, in the step's stretch
    for s in found["stretches"]:
        assert (s["module_calls"], s["module_classes"], s["optimizer_steps"]) == (0, {}, 0)


def test_a_graph_s_host_side_is_the_replay_s_fixed_cost_and_the_copy_s_dispatch():
    # the copy's stretch: its dispatch (no grad) 5 us on the host, then 10 us + 4e6 B / 5e9 B/s = 810 us blocking.
    # the replay's: graph_replay_fixed 8 us on the host; on the device each node its work and 1 us per node:
    # the GEMM max(1e9 / 1e13 = 100 us, 8e6 / 1e12 = 8 us) + 1 = 101 us, the ReLU 8e6 / 1e12 = 8 us + 1 = 9 us, the
    # optimiser's 4e6 / 1e12 = 4 us + 1 = 5 us: 115 us, device-bound (one call issued: the replay, 8 us before it)
    found = costmodel.predict(whatifs.as_graph(step_census()), gpu())
    assert_parts(found, parts(host=5 * US, launches=8 * US, copies=810 * US, compute=115 * US))
    assert found.seconds == pytest.approx(938 * US)


def test_each_stretch_holding_graph_nodes_is_a_replay_of_its_own():
    # a sync (an .item()) cutting the step in two: no graph holds a sync, so each half is a graph replayed
    item = op("aten._local_scalar_dense", kernel=False, launches=False, sync=True)
    two = census([op(flops=1), item, op(flops=2)], [stretch([(0, 1), (1, 1)], sync=True), stretch([(2, 1)])])
    found = whatifs.as_graph(two)
    assert [s["graph_replays"] for s in found["stretches"]] == [1, 1]
    assert [s["ops"] for s in found["stretches"]] == [[[0, 1], [1, 1]], [[2, 1]]]  # the sync is kept: it reads


# -- torch.compile's fusion ----------------------------------------------------------------------------------------

def test_fusion_folds_pointwise_ops_and_views_away_and_keeps_gemms_at_a_bare_dispatch():
    given = step_census()
    before = deep.deepcopy(given)
    found = whatifs.fused(given)
    assert given == before
    assert [s["ops"] for s in found["stretches"]] == [[[0, 1]], [[2, 1], [4, 1]]]  # ReLU and view gone
    gemm = found["ops"][2]
    assert gemm["op"] == "aten.mm" and gemm["autograd"] is False and gemm["nested"] is False
    assert found["ops"][4] == ADAM  # the optimiser's kernel is left as it is
    assert [(s["module_calls"], s.get("module_classes", {})) for s in found["stretches"]] == [(0, {}), (1, {})]
    assert found["stretches"][1]["optimizer_steps"] == 1


def test_fusion_predicted_on_a_gpu():
    # the copy's stretch as eager: host 5 us, 810 us blocking. The step: the GEMM 5 us dispatch (no grad, not
    # nested), 4 us launch, 100 us; the optimiser's 7 us, 2 us launch, 4 us; one module call 3 us and the optimiser
    # step 40 us: host 55 us, launches 6 us, device 104 us, device-bound over its 2 calls: host 27.5 us, launches 3 us
    found = costmodel.predict(whatifs.fused(step_census()), gpu())
    assert_parts(found, parts(host=32.5 * US, launches=3 * US, copies=810 * US, compute=104 * US))


def test_is_pointwise_reads_pytorch_s_tag():
    assert whatifs.is_pointwise("aten.relu") is True
    assert whatifs.is_pointwise("aten.mm") is False
    assert whatifs.is_pointwise("aten.no_such_op") is False


# -- pinned memory -------------------------------------------------------------------------------------------------

def pinned_census() -> dict:
    step = stretch([(1, 1)], modules=2) | {"module_classes": {"Linear": 1}}
    return census([H2D, op("aten.mm", formula=True, flops=1e9)], [stretch([(0, 1)], sync=True), step])


def test_a_pinned_copy_is_non_blocking_and_its_stretch_runs_on_into_the_step():
    given = pinned_census()
    before = deep.deepcopy(given)
    found = whatifs.pinned(given)
    assert given == before
    assert found["ops"][0]["copy"] == {"direction": "h2d", "pinned": True, "bytes": 4e6}
    assert found["ops"][0]["sync"] is False
    assert len(found["stretches"]) == len(given["stretches"]) - 1 == 1
    joined = found["stretches"][0]
    assert joined["ops"] == [[0, 1], [1, 1]] and joined["sync"] is False
    assert (joined["module_calls"], joined["module_classes"], joined["times"]) == (2, {"Linear": 1}, 1)


def test_a_pinned_copy_is_priced_at_the_pinned_figures_on_the_device_s_clock():
    # eager: the copy's 5 us dispatch, then 10 us + 4e6 / 5e9 = 810 us blocking; the step: 5 us dispatch and its
    # module calls (a Linear's 4 us, a bare one's 3 us) = 12 us host, 4 us launch, 1e9 / 1e13 = 100 us of GEMM:
    # device-bound, 931 us in all
    eager = costmodel.predict(pinned_census(), gpu())
    assert_parts(eager, parts(host=17 * US, launches=4 * US, copies=810 * US, compute=100 * US))
    # pinned: the copy queued like a kernel, its 4e6 / 2e10 = 200 us on the device and its 5 us dispatch and 4 us
    # launch on the host; one stretch of host 5 + 12 = 17 us and 8 us launches, device 200 + 100 = 300 us:
    # device-bound over its 2 calls: host 8.5 us, launches 4 us
    found = costmodel.predict(whatifs.pinned(pinned_census()), gpu())
    assert_parts(found, parts(host=8.5 * US, launches=4 * US, copies=200 * US, compute=100 * US))
    assert found.gpu_idle == pytest.approx(12.5 * US)  # 312.5 us, the device busy 300 of them


def test_stretches_occurring_unequally_often_are_not_joined():
    unequal = census([H2D, op(flops=1)], [stretch([(0, 1)], sync=True), stretch([(1, 1)], times=2)])
    found = whatifs.pinned(unequal)
    assert [s["ops"] for s in found["stretches"]] == [[[0, 1]], [[1, 1]]]
    assert found["ops"][0]["copy"]["pinned"] is True


# -- mixed precision -----------------------------------------------------------------------------------------------

def test_half_precision_halves_a_gemm_s_bytes_and_adds_its_operands_casts():
    # addmm (nn.Linear) 16 x 8 by 8 x 32 after its bias: 2 x 16 x 8 x 32 = 8,192 FLOPs, 3,712 bytes;
    # mm 32 x 16 by 16 x 8: 8,192 FLOPs, 4 x (512 + 128 + 256) = 3,584 bytes
    addmm = op("aten.addmm", formula=True, flops=8192, bytes=3712, nested=True, shapes=[[32], [16, 8], [8, 32]])
    mm = op("aten.mm", formula=True, flops=8192, bytes=3584, shapes=[[32, 16], [16, 8]])
    relu = op("aten.relu", flops=512, bytes=4096, shapes=[[16, 32]])
    given = census([addmm, relu, mm], [stretch([(0, 3), (1, 3), (2, 1)])])
    before = deep.deepcopy(given)
    found = whatifs.half_precision(given)
    assert given == before
    ops = found["ops"]
    assert [o["bytes"] for o in ops[:3]] == [1856, 4096, 1792]  # the GEMMs' halved, the ReLU's not
    assert len(ops) == 7
    # a cast per operand, 6 bytes an element (read as float32, written as float16): addmm's 16 x 8 = 128 elements
    # (768 bytes) and 8 x 32 = 256 (1,536); mm's 32 x 16 = 512 (3,072) and 16 x 8 = 128 (768)
    for cast, shape, elements in ((ops[3], [16, 8], 128), (ops[4], [8, 32], 256), (ops[5], [32, 16], 512),
                                  (ops[6], [16, 8], 128)):
        assert (cast["op"], cast["kernels"], cast["formula"], cast["kernel"], cast["phase"]) == (
            "aten._to_copy", 1, False, True, "step")
        assert (cast["shapes"], cast["flops"], cast["bytes"], cast["dtypes"]) == (
            [shape], elements, 6 * elements, ["float32"])
    # each cast as often as its GEMM
    assert found["stretches"][0]["ops"] == [[0, 3], [1, 3], [2, 1], [3, 3], [4, 3], [5, 1], [6, 1]]


def test_half_gpu_scales_the_gemm_and_convolution_rates_by_the_float16_peak():
    t4 = hardware.device_named("t4")
    half = whatifs.half_gpu(t4)
    ratio = 65e12 / 8.1e12  # the T4's float16 tensor-core peak over its float32 peak
    for name in ("matmul_flops", "conv_flops"):
        scaled, single = half.figures[name].value, t4.figures[name].value
        assert [flops for flops, _ in scaled] == [flops for flops, _ in single]  # the same sizes
        assert [rate for _, rate in scaled] == pytest.approx([rate * ratio for _, rate in single])
        for flops in (1e3, 1e6, 3e7, 1e9, 1e12):  # below, between and past its sizes
            assert half.value(name, flops) == pytest.approx(t4.value(name, flops) * ratio)
    # at its largest size: 4.2e12 x 65 / 8.1 = 3.37037e13 FLOP/s for products, half that for convolutions
    assert half.value("matmul_flops", 137438953472) == pytest.approx(3.37037037e13)
    assert half.value("conv_flops", 137438953472) == pytest.approx(3.37037037e13 / 2)
    assert half.value("memory_bandwidth") == t4.value("memory_bandwidth")
    assert t4.value("matmul_flops", 137438953472) == pytest.approx(4.2e12)  # the catalogue's own is untouched


def test_a_gpu_without_a_float16_peak_gets_no_half_figures():
    assert whatifs.half_gpu(hardware.device_named("k80")) is None
