import copy
import json

import pytest

from core import devices, published
from core.model import hardware, profiles

GPUS = ("k80", "t4", "v100", "rtx-3080-ti", "a100-40gb-pcie", "a100-80gb-sxm", "l4", "rtx-4090", "h100-pcie", "h100-sxm",
        "h200")
CPUS = ("i9-12900kf", "macbook-2018", "typical-cpu")


def shipped() -> dict:
    return json.loads(hardware.CATALOGUE_PATH.read_text(encoding="utf-8"))


def entry(document: dict, name: str) -> dict:
    return next(e for e in document["hardware"] if e["name"] == name)


def made_profile(machine_id: str, gpus: tuple[str, ...] = ()) -> dict:
    """A valid profile by hand, with round numbers to follow through the conversion."""
    cpu = {"op_overhead_autograd": 4e-6, "op_overhead_nested": 2e-6, "op_overhead_nested_no_grad": 1e-6,
           "op_overhead_transformed": 7e-6,
           "op_overhead_no_grad": 3e-6, "module_call": 1e-6, "optimizer_step": 4e-5,
           "optimizer_op_overhead": 5e-6, "loader_batch1_per_sample": 30e-6,
           "loader_batched_per_sample": 5e-6, "matmul_flops": {"64": 4e10, "256": 1.5e11},
           "conv1d_flops": {"8x16x256": 3e10}, "conv2d_flops": {"8x16x16x16": 5e10},
           "conv_one_channel_flops": {"8x1x256": 3e9, "8x1x16x16": 5e9},
           "conv_backward_share": {"8x16x256": 0.7, "8x1x256": 0.8},
           "elementwise_rate": {"4096": 1e9, "1048576": 2e9}, "elementwise_flops": 2e9, "memory_bandwidth": 1.6e10,
           "op_call_seconds": {"tanh": 2e-6, "sort": 0.0}, "op_element_seconds": {"tanh": 1e-9, "sort": 3e-9},
           "narrow_gemm_seconds": {"2": 5e-10, "16": 2e-10}, "loader_per_sample": {"1": 30e-6, "64": 5e-6},
           "module_call_seconds": {"Linear": 3e-6, "ReLU": 1e-6},
           "gemm_seconds": {"16x4x2": 2e-6, "1024x4x2": 9e-6}, "linear_seconds": {"16x4x2": 3e-6, "1024x4x2": 1e-5},
           "flash_attention_seconds": {"32x32x8": 3e-6, "32x512x8": 2e-5},
           "flash_attention_backward_seconds": {"32x32x8": 8e-6, "32x512x8": 6e-5}}
    gpu = {"matmul_flops": {"64": 1e11, "1024": 1e13}, "conv1d_flops": {"8x16x256": 1e12},
           "conv2d_flops": {"8x16x16x16": 2e12}, "elementwise_rate": {"1048576": 1e11}, "elementwise_flops": 1e11,
           "memory_bandwidth": 1e12, "launch_overhead": 6e-6, "shortest_kernel": 2e-6, "sync_round_trip": 1e-5,
           "h2d_latency_pageable": 1e-5, "h2d_latency_pinned": 9e-6, "d2h_latency_pageable": 1.1e-5,
           "d2h_latency_pinned": 1e-5, "h2d_bandwidth_pageable": 6e9, "h2d_bandwidth_pinned": 1.2e10,
           "d2h_bandwidth_pageable": 5e9, "d2h_bandwidth_pinned": 1.3e10, "graph_replay_per_node": 6e-7}
    fingerprint = {"machine_id": machine_id, "cpu_model": "Made CPU 9000",
                   "gpus": [{"device": device, "name": f"Made GPU {device[-1]}"} for device in gpus]}
    return {"schema": 1, "machine_id": machine_id, "fingerprint": fingerprint, "code_version": {"package": "test"},
            "taken": "2026-01-02T03:04:05+00:00", "seconds": 1.0, "quick": True, "load_per_core": 0.1,
            "cpu": cpu, "gpus": {device: dict(gpu) for device in gpus}}


@pytest.fixture
def this_profile(results_dir) -> dict:
    profile = made_profile(devices.fingerprint()["machine_id"], gpus=("cuda:0",))
    profiles.save(profile)
    return profile


# The catalogue.

def test_the_shipped_catalogue_validates_and_every_entry_has_every_figure_of_its_kind():
    book = hardware.load()
    assert set(GPUS + CPUS) == set(book.devices)
    for device in book.devices.values():
        assert set(device.figures) == set(hardware.FIELDS[device.kind]), device.name
        for name, figure in device.figures.items():
            if figure.keyed:  # an op's fixed part or time per element: 0 where it has none
                assert all(v >= 0 for v in figure.value.values()), device.name
                # a catalogue CPU has no GEMM grid, one-channel convolutions, backward shares nor flash-attention
                # blocks: what the model does instead (GEMMs cost their FLOPs, convolutions conv_flops, attention its
                # GEMMs) is an
                # assumption, said so
                instead = (hardware.GEMM_BY_FLOPS if name in hardware.GEMM_GRIDS else
                           "costs conv_flops' rate" if name == "conv_one_channel_flops" else
                           "each cost their FLOPs at conv_flops' rate" if name == "conv_backward_share" else
                           "its GEMMs at what GEMMs of their shapes cost" if name in profiles.ATTENTION_FIGURES
                           else None)
                assert figure.value or (instead and figure.assumption and instead in figure.note), (device.name, name)
                continue
            points = figure.value if figure.sized else ((1.0, figure.value),)
            assert all(size > 0 and rate > 0 for size, rate in points), device.name


def test_every_figure_names_a_known_source_or_is_an_assumption_with_a_note():
    document = shipped()
    for e in document["hardware"]:
        for field, figure in e["figures"].items():
            assert figure.get("source") in document["sources"] or figure["assumption"], (e["name"], field)
            assert figure["note"].strip(), (e["name"], field)


def test_catalogue_devices_cite_their_sources_in_words():
    t4 = hardware.load().devices["t4"]
    bandwidth = t4.figures["memory_bandwidth"]
    assert not bandwidth.assumption and "chsasank/device-benchmarks" in bandwidth.citation
    assert "github.com" in bandwidth.citation
    assert "launch_overhead" in t4.assumptions and "memory_bandwidth" not in t4.assumptions


def test_every_published_writeup_has_its_hardware_and_only_unnamed_hardware_is_assumed():
    stated = {}
    for figure in json.loads(published.PUBLISHED_FILE.read_text(encoding="utf-8"))["figures"]:
        stated.setdefault(figure["source"], set()).add("not stated" not in figure["hardware"])
    assert set(stated) == set(shipped()["writeups"])
    for source, named in stated.items():
        target, note = hardware.writeup_target(source)
        assert target.host.kind == "cpu" and target.gpu.kind == "gpu" and note
        assert shipped()["writeups"][source]["assumed"] == (not any(named)), source
    assert hardware.writeup_target("003_f091c9a0e5f7d524.txt")[0].title == "RTX 3080 Ti driven by Intel Core i9-12900KF"
    assert hardware.writeup_target("002_3344ff0316a6b6cf.txt")[0].gpu.name == "k80"


def test_an_unknown_writeup_is_refused_naming_the_known_ones():
    with pytest.raises(hardware.HardwareError, match="source: no write-up 'nope.txt'; known: 000_"):
        hardware.writeup_target("nope.txt")


def _without_source(document):
    figure = entry(document, "t4")["figures"]["memory_bandwidth"]
    del figure["source"]


def _negative(document):
    entry(document, "t4")["figures"]["launch_overhead"]["value"] = -1e-6


def _negative_size(document):
    entry(document, "t4")["figures"]["matmul_flops"]["value"]["524288"] = -5.0


def typed(document, name: str, field: str, value) -> None:
    """The figure typed in as `value` instead of derived from the reference machines."""
    figure = entry(document, name)["figures"][field]
    figure.pop("derive", None), figure.pop("machine", None)
    figure["value"] = value


def _negative_op_time(document):
    typed(document, "typical-cpu", "op_element_seconds", {"tanh": -1e-9})


def _size_for_an_op(document):
    typed(document, "typical-cpu", "op_call_seconds", {"4096": 1e-6})


def _an_op_for_a_width(document):
    typed(document, "typical-cpu", "narrow_gemm_seconds", {"tanh": 1e-9})


def _an_unknown_rule(document):
    entry(document, "typical-cpu")["figures"]["module_call"]["derive"] = "guess"


def _derived_and_typed(document):
    entry(document, "typical-cpu")["figures"]["module_call"]["value"] = 1e-6


def _derived_as_a_measurement(document):
    entry(document, "typical-cpu")["figures"]["module_call"]["assumption"] = False


def _sized_figure_keyed_by_an_op(document):
    entry(document, "t4")["figures"]["matmul_flops"]["value"]["tanh"] = 1e12


def _missing_field(document):
    del entry(document, "t4")["figures"]["conv_flops"]


def _unknown_source(document):
    entry(document, "t4")["figures"]["memory_bandwidth"]["source"] = "hearsay"


def _assumption_without_note(document):
    entry(document, "i9-12900kf")["figures"]["memory_bandwidth"]["note"] = ""


def _stray_field(document):
    entry(document, "i9-12900kf")["figures"]["launch_overhead"] = {"value": 1e-6, "assumption": True, "note": "x"}


def _duplicate_alias(document):
    entry(document, "l4")["aliases"].append("Tesla T4")


def _cpu_as_a_writeup_gpu(document):
    document["writeups"]["003_f091c9a0e5f7d524.txt"]["gpu"] = "typical-cpu"


@pytest.mark.parametrize("breaking, message", [
    (_without_source, "hardware['t4'].figures.memory_bandwidth: 'source' is a required property"),
    (_negative, "hardware['t4'].figures.launch_overhead.value: -1e-06 is less than or equal to the minimum of 0"),
    (_negative_size, "hardware['t4'].figures.matmul_flops.value.524288: -5.0 is less than or equal"),
    (_negative_op_time, "hardware['typical-cpu'].figures.op_element_seconds.value.tanh: -1e-09 is less than the "
                        "minimum of 0"),
    (_size_for_an_op, "hardware['typical-cpu'].figures.op_call_seconds.value: '4096' does not match"),
    (_an_op_for_a_width, "hardware['typical-cpu'].figures.narrow_gemm_seconds.value: 'tanh' does not match"),
    (_an_unknown_rule, "hardware['typical-cpu'].figures.module_call.derive: 'guess' is not one of ['reference', "
                       "'bare_op_ratio', 'loader_growth', 'matmul_ratio']"),
    (_derived_and_typed, "hardware['typical-cpu'].figures.module_call: a figure is typed in ('value') or derived "
                         "('derive'), not both"),
    (_derived_as_a_measurement, "hardware['typical-cpu'].figures.module_call.assumption: a figure derived from the "
                                "reference machines is an assumption (true)"),
    (_sized_figure_keyed_by_an_op, "hardware['t4'].figures.matmul_flops.value: 'tanh' does not match"),
    (_missing_field, "hardware['t4'].figures: 'conv_flops' is a required property"),
    (_unknown_source, "hardware['t4'].figures.memory_bandwidth.source: 'hearsay' is not one of"),
    (_assumption_without_note, "hardware['i9-12900kf'].figures.memory_bandwidth.note: '' should be non-empty"),
    (_stray_field, "hardware['i9-12900kf'].figures: 'launch_overhead' is not one of"),
    (_duplicate_alias, "hardware['l4']: 'tesla t4' is already a name of 't4'"),
    (_cpu_as_a_writeup_gpu, "writeups['003_f091c9a0e5f7d524.txt'].gpu: 'typical-cpu' is no gpu of the catalogue"),
])
def test_a_broken_catalogue_is_refused_naming_the_field(breaking, message):
    document = copy.deepcopy(shipped())
    breaking(document)
    with pytest.raises(hardware.HardwareError) as refused:
        hardware.validate(document)
    assert str(refused.value).startswith(message)


def test_a_catalogue_file_that_is_not_json_is_refused_naming_it(tmp_path):
    broken = tmp_path / "hardware.json"
    broken.write_text("{not json")
    with pytest.raises(hardware.HardwareError, match=f"catalogue {broken}"):
        hardware.load(broken)


# Sized figures.

def test_a_sized_value_is_exact_at_its_points_log_log_between_them_and_clamped_at_its_ends():
    figure = hardware.Figure(((1e3, 1e9), (1e6, 1e12), (1e9, 2e12)), "s", False, "n")
    assert figure.at(1e3) == pytest.approx(1e9) and figure.at(1e6) == pytest.approx(1e12)
    assert figure.at(10 ** 4.5) == pytest.approx(10 ** 10.5)  # halfway in log FLOPs: halfway in log rate
    assert figure.at(1.0) == pytest.approx(1e9) and figure.at(0.0) == pytest.approx(1e9)
    assert figure.at(1e15) == pytest.approx(2e12)
    assert figure.at() == 2e12  # no size given: the largest size's
    assert hardware.Figure(5e-6, "s", False, "n").at(1e9) == 5e-6


def test_a_device_gives_its_figures_and_refuses_a_field_of_another_kind():
    h100 = hardware.load().devices["h100-sxm"]
    assert h100.value("matmul_flops", flops=2 * 4096 ** 3) == pytest.approx(51.88e12, rel=0.01)
    assert h100.value("matmul_flops", flops=2 * 64 ** 3) < h100.value("matmul_flops", flops=2 * 1024 ** 3)
    with pytest.raises(hardware.HardwareError, match="field: 'op_overhead_autograd' is not a gpu figure; gpu figures: "
                                                     "matmul_flops, conv_flops"):
        h100.value("op_overhead_autograd")


# Calibrated profiles.

def test_a_calibrated_cpu_converts_sizes_to_flops_per_call_and_merges_the_convolutions(this_profile):
    cpu = hardware.from_profile(this_profile, "cpu")
    assert (cpu.name, cpu.title, cpu.kind, cpu.origin) == ("this", "this machine's CPU", "cpu", "calibrated")
    assert set(cpu.figures) == set(hardware.FIELDS["cpu"]) and cpu.assumptions == []
    assert cpu.figures["matmul_flops"].value == ((2 * 64 ** 3, 4e10), (2 * 256 ** 3, 1.5e11))
    conv1d = 2 * 8 * 32 * 256 * 16 * 5  # batch x out channels x output length x in channels x kernel, two FLOPs each
    conv2d = 2 * 8 * 32 * 16 * 16 * 16 * 3 * 3
    assert cpu.figures["conv_flops"].value == ((conv1d, 3e10), (conv2d, 5e10))
    machine = this_profile["machine_id"]
    assert cpu.figures["op_overhead_autograd"].source == f"calibrated on {machine} 2026-01-02"
    assert cpu.value("memory_bandwidth") == 1.6e10
    assert cpu.figures["elementwise_rate"].value == ((4096.0, 1e9), (1048576.0, 2e9))  # elements: one FLOP each
    assert cpu.value("elementwise_rate", flops=64) == pytest.approx(1e9) and cpu.value("elementwise_rate", flops=2**24) == pytest.approx(2e9)


def test_a_calibrated_cpu_keeps_its_ops_timed_one_by_one_keyed_by_op(this_profile):
    cpu = hardware.from_profile(this_profile, "cpu")
    assert cpu.figures["op_call_seconds"].keyed and not cpu.figures["op_call_seconds"].sized
    assert cpu.value("op_call_seconds") == {"tanh": 2e-6, "sort": 0.0}
    assert cpu.value("op_element_seconds") == {"tanh": 1e-9, "sort": 3e-9}
    assert cpu.value("narrow_gemm_seconds") == {"2": 5e-10, "16": 2e-10}  # keyed by output columns, not by FLOPs
    assert cpu.value("loader_per_sample") == {"1": 30e-6, "64": 5e-6}  # keyed by batch size
    assert cpu.value("conv_one_channel_flops") == {"8x1x256": 3e9, "8x1x16x16": 5e9}  # keyed by probe input
    assert cpu.value("conv_backward_share") == {"8x16x256": 0.7, "8x1x256": 0.8}


def test_a_profile_calibrated_before_the_ops_were_timed_one_by_one_still_loads_and_says_so(results_dir):
    older = made_profile("older-machine")
    for field in ("op_call_seconds", "op_element_seconds", "narrow_gemm_seconds", "loader_per_sample",
                  "module_call_seconds", "conv_one_channel_flops", "conv_backward_share", "op_overhead_nested",
                  "op_overhead_nested_no_grad", "op_overhead_transformed", "flash_attention_seconds",
                  "flash_attention_backward_seconds"):
        del older["cpu"][field]
    cpu = hardware.from_profile(older, "cpu")
    assert sorted(cpu.assumptions) == ["conv_backward_share", "conv_one_channel_flops",
                                       "flash_attention_backward_seconds", "flash_attention_seconds",
                                       "loader_per_sample", "module_call_seconds", "narrow_gemm_seconds",
                                       "op_call_seconds", "op_element_seconds",
                                       "op_overhead_nested", "op_overhead_nested_no_grad", "op_overhead_transformed"]
    # every recording operation, C++'s and a transform's too, at the one figure the profile has
    assert cpu.value("op_overhead_nested") == cpu.value("op_overhead_transformed") == 4e-6
    assert "a recording operation C++ issues costs what" in cpu.figures["op_overhead_nested"].note
    # and every other one, C++'s too, at the bare op's
    assert cpu.value("op_overhead_nested_no_grad") == cpu.value("op_overhead_no_grad") == 3e-6
    assert "an operation C++ issues outside autograd costs what" in cpu.figures["op_overhead_nested_no_grad"].note
    assert "an operation under a torch.func transform costs" in cpu.figures["op_overhead_transformed"].note
    assert "a convolution with few input channels costs conv_flops' rate" in cpu.figures["conv_one_channel_flops"].note
    assert "forward and backward call each cost their FLOPs" in cpu.figures["conv_backward_share"].note
    assert cpu.value("op_element_seconds") == cpu.value("narrow_gemm_seconds") == {}
    assert "these operations cost an add's time" in cpu.figures["op_call_seconds"].note
    assert "a narrow GEMM costs its FLOPs' time" in cpu.figures["narrow_gemm_seconds"].note
    assert cpu.value("flash_attention_seconds") == {}
    assert "its GEMMs at what GEMMs of their shapes cost" in cpu.figures["flash_attention_backward_seconds"].note
    # the Machines page's table says what its op_overhead_autograd meant then: every recording op, not Python's
    meaning = {row["field"]: row["what it is"] for row in profiles.rows(older)}
    assert "over every recording op, Python's and C++'s alike" in meaning["op_overhead_autograd"]
    assert "over every recording op" not in {row["field"]: row["what it is"]
                                             for row in profiles.rows(made_profile("newer"))}["op_overhead_autograd"]


def test_a_gpu_calibrated_before_its_replay_and_enqueue_costs_were_measured_takes_them_from_its_launch(this_profile):
    gpu = hardware.from_profile(this_profile, "cuda:0")
    assert (gpu.name, gpu.title, gpu.kind) == ("this:cuda:0", "Made GPU 0 (this machine's cuda:0)", "gpu")
    assert set(gpu.figures) == set(hardware.FIELDS["gpu"]) - {"memory_gib"}  # its fingerprint names no memory
    for field in ("graph_replay_fixed", "kernel_enqueue"):
        figure = gpu.figures[field]
        assert figure.value == 6e-6 and figure.assumption and "launch_overhead" in figure.note
    assert gpu.assumptions == ["graph_replay_fixed", "kernel_enqueue"]


def test_a_gpu_that_measured_its_replay_and_enqueue_costs_uses_them(results_dir):
    profile = made_profile("newer-gpu", gpus=("cuda:1",))
    profile["gpus"]["cuda:1"] |= {"graph_replay_fixed": 4e-6, "kernel_enqueue": 2.5e-6}
    gpu = hardware.from_profile(profile, "cuda:1")
    assert (gpu.value("graph_replay_fixed"), gpu.value("kernel_enqueue")) == (4e-6, 2.5e-6)
    assert gpu.assumptions == [] and gpu.figures["kernel_enqueue"].source == "calibrated on newer-gpu 2026-01-02"
    profile["gpus"]["cuda:1"]["kernel_enqueue"] = 1.0  # a second per kernel: a broken measurement
    with pytest.raises(hardware.HardwareError, match="kernel_enqueue"):
        hardware.from_profile(profile, "cuda:1")


def test_a_calibrated_gpu_the_catalogue_lists_takes_its_matmul_rate_past_its_largest_probe_from_the_catalogue():
    profile = made_profile("t4-machine", gpus=("cuda:0", "cuda:1"))
    profile["fingerprint"]["gpus"][0]["name"] = "Tesla T4"  # an alias of the catalogue's T4; cuda:1 is unknown
    for gpu in profile["gpus"].values():
        gpu["matmul_flops"] = {"64": 1e10, "1024": 1e12}  # still mostly its launch at its largest probe
    listed, unknown = (hardware.from_profile(profile, device) for device in ("cuda:0", "cuda:1"))
    t4 = hardware.catalogue().devices["t4"].figures["matmul_flops"]
    largest = 2 * 1024**3  # the profile's largest probe: 1024x1024 at 1e12 FLOP/s
    at = [listed.value("matmul_flops", flops=largest), unknown.value("matmul_flops", flops=largest)]
    assert at == pytest.approx([1e12, 1e12])
    beyond = [(flops, rate) for flops, rate in t4.value if flops > largest]
    assert beyond and all(rate > 1e12 for _, rate in beyond)
    assert [listed.value("matmul_flops", flops=flops) for flops, _ in beyond] == pytest.approx([r for _, r in beyond])
    assert unknown.value("matmul_flops", flops=beyond[-1][0]) == pytest.approx(1e12)  # no entry: the probe's rate
    assert listed.value("matmul_flops") == 1e12  # its own largest figure, as --on list shows it: the measured one
    assert "past its largest probe" in listed.figures["matmul_flops"].note and "T4" in listed.figures["matmul_flops"].note
    assert hardware.catalogue_twin(profile, "cuda:0").name == "t4" and hardware.catalogue_twin(profile, "cpu") is None


def test_a_gpu_s_memory_is_the_catalogue_s_or_what_pytorch_reported_on_its_machine():
    catalogue = hardware.catalogue().devices
    assert all(d.has("memory_gib") for d in catalogue.values() if d.kind == "gpu")
    assert catalogue["t4"].value("memory_gib") == 16 and catalogue["h200"].value("memory_gib") == 141
    profile = made_profile("roomy-gpu", gpus=("cuda:0", "cuda:1"))
    profile["fingerprint"]["gpus"][1]["memory_gib"] = 23.6
    assert not hardware.from_profile(profile, "cuda:0").has("memory_gib")  # a fingerprint without it
    profile["fingerprint"]["gpus"][0]["memory_gib"] = None  # or with nothing in it
    assert not hardware.from_profile(profile, "cuda:0").has("memory_gib")
    second = hardware.from_profile(profile, "cuda:1")
    assert second.value("memory_gib") == 23.6 and "PyTorch reports" in second.figures["memory_gib"].note


def test_a_cpu_s_loader_sort_lstm_and_wide_gemm_refinements_are_a_calibration_s_alone_and_only_where_measured(this_profile):
    collecting = {"loader_uncollected_per_sample": {"64": 2e-6, "1024": 2.2e-6},
                  "loader_collections_per_sample": {"64": 0.0, "1024": 1.5e-5}, "full_collection_seconds": 0.12,
                  "collection_heap_objects": 240_000, "loader_numpy_field_seconds": 4e-7,
                  "sort_row_element_seconds": {"16": 3e-9, "128": 7e-9},
                  "lstm_layer_flops": {"65536": 4e9, "1048576": 3e10},
                  "lstm_layer_backward_flops": {"65536": 3e9, "1048576": 3e10},
                  "wide_gemm_seconds": {"16x1024x2048": 3e-3, "256x1024x2048": 2e-2}}
    assert not any(d.has(field) for d in hardware.catalogue().devices.values() for field in collecting)
    older = made_profile("older-cpu")
    assert not any(hardware.from_profile(older, "cpu").has(field) for field in collecting)
    assert hardware.unmeasured(hardware.from_profile(older, "cpu")) == list(collecting)
    profile = made_profile("collecting-cpu")
    profile["cpu"] |= collecting
    cpu = hardware.from_profile(profile, "cpu")
    assert {field: cpu.value(field) for field in collecting} == collecting and cpu.assumptions == []
    assert hardware.unmeasured(cpu) == []


def test_a_gpu_s_training_step_figure_is_a_calibration_s_alone_and_only_where_measured(this_profile):
    assert not hardware.from_profile(this_profile, "cuda:0").has("training_op_overhead")  # an older profile
    assert not any(d.has("training_op_overhead") for d in hardware.catalogue().devices.values())
    profile = made_profile("trained-gpu", gpus=("cuda:0",))
    profile["gpus"]["cuda:0"]["training_op_overhead"] = 40e-6
    gpu = hardware.from_profile(profile, "cuda:0")
    assert gpu.has("training_op_overhead") and gpu.value("training_op_overhead") == 40e-6
    assert "training_op_overhead" not in gpu.assumptions
    profiles.save(profile)
    assert hardware.resolve("trained-gpu:cuda:0", host="trained-gpu").gpu.has("training_op_overhead")
    assert not hardware.resolve("trained-gpu:cuda:0").gpu.has("training_op_overhead")  # this CPU drives it: not its
    during = hardware.calibrating(profile["cpu"], profile["gpus"]["cuda:0"])  # a pass's figures, as a probe reads them
    assert during.host.value("op_overhead_no_grad") == profile["cpu"]["op_overhead_no_grad"]
    assert during.gpu.value("training_op_overhead") == 40e-6 and during.gpu.kind == "gpu"


def test_another_machines_profile_is_named_by_its_id(results_dir):
    other = hardware.from_profile(made_profile("elsewhere-1", gpus=("cuda:1",)), "cuda:1")
    assert (other.name, other.title) == ("elsewhere-1:cuda:1", "Made GPU 1 (cuda:1 of elsewhere-1)")
    cpu = hardware.from_profile(made_profile("elsewhere-1"), "cpu")
    assert (cpu.name, cpu.title) == ("elsewhere-1", "Made CPU 9000 (elsewhere-1)")


def test_a_profile_without_the_device_or_out_of_range_is_refused(results_dir):
    with pytest.raises(hardware.HardwareError, match="device: machine elsewhere-1 has no calibrated 'cuda:3'; "
                                                     "it has: cpu, cuda:0"):
        hardware.from_profile(made_profile("elsewhere-1", gpus=("cuda:0",)), "cuda:3")
    broken = made_profile("elsewhere-1")
    broken["cpu"]["memory_bandwidth"] = -1.0
    with pytest.raises(hardware.HardwareError, match="profile: cpu/memory_bandwidth"):
        hardware.from_profile(broken, "cpu")
    odd = made_profile("elsewhere-1")
    odd["cpu"]["conv1d_flops"] = {"8x3x256": 1e9}
    with pytest.raises(hardware.HardwareError, match="conv1d_flops: size '8x3x256' is no 3-dimensional input with 16"):
        hardware.from_profile(odd, "cpu")


# Names.

def test_this_machine_without_a_profile_is_told_to_calibrate_and_its_cpu_has_a_stand_in(results_dir):
    with pytest.raises(hardware.HardwareError, match="no calibrated profile for this machine: run `python -m core "
                                                     "calibrate`"):
        hardware.resolve("this:cuda:0")  # no GPU stands in for this machine's own
    said = []
    with hardware.telling_stand_ins(said.append):  # the nearest CPU stands in for its CPU (tests/unit/test_nearest_cpu.py)
        assert hardware.resolve("t4").host.name == hardware.resolve("this").name == hardware.nearest_cpu()[0]
    assert len(said) == 1 and "python -m core calibrate" in said[0]


def test_each_name_form_resolves(this_profile):
    machine = this_profile["machine_id"]
    assert hardware.resolve("this") == hardware.resolve(" THIS ") == hardware.resolve(machine)
    assert hardware.resolve("this").gpu is None
    own = hardware.resolve("This:CUDA:0")
    assert own.gpu.name == "this:cuda:0" and own.host.name == "this"
    assert hardware.resolve(f"{machine}:cuda:0") == own
    for spelling in ("rtx-3080-ti", "RTX 3080 Ti", "NVIDIA GeForce RTX 3080 Ti", "rtx_3080_ti"):
        assert hardware.resolve(spelling).gpu.name == "rtx-3080-ti", spelling
    assert hardware.resolve("Tesla T4").gpu.name == "t4"
    typical = hardware.resolve("typical-cpu")
    assert typical.gpu is None and typical.host.name == "typical-cpu" and typical.name == "typical-cpu"
    profiles.save(made_profile("elsewhere-1", gpus=("cuda:1",)))
    assert hardware.resolve("elsewhere-1").host.title == "Made CPU 9000 (elsewhere-1)"
    driven = hardware.resolve("elsewhere-1:cuda:1", host="elsewhere-1")
    assert driven.title == "Made GPU 1 (cuda:1 of elsewhere-1) driven by Made CPU 9000 (elsewhere-1)"


def test_titles_say_what_drives_what(this_profile):
    assert hardware.resolve("rtx-3080-ti").title == "RTX 3080 Ti driven by this machine's CPU"
    assert hardware.resolve("this").title == "this machine's CPU"
    assert hardware.resolve("h100-sxm", host="i9-12900kf").title == "H100 SXM driven by Intel Core i9-12900KF"
    target = hardware.resolve("h100-sxm", host="i9-12900kf")
    assert target.name == "h100-sxm"


def test_bad_names_are_refused_naming_what_is_known(this_profile):
    with pytest.raises(hardware.HardwareError, match="hardware: unknown hardware 'nope'; known: this, this:cuda:0, "
                                                     r".*k80, t4"):
        hardware.resolve("nope")
    with pytest.raises(hardware.HardwareError, match="host: 'v100' is a GPU; a host is a CPU: this, .*typical-cpu"):
        hardware.resolve("t4", host="v100")
    with pytest.raises(hardware.HardwareError, match="host: unknown hardware"):
        hardware.resolve("t4", host="nope")
    with pytest.raises(hardware.HardwareError, match="no calibrated profile for machine far-away-2: run"):
        hardware.resolve("far-away-2:cuda:0")
    with pytest.raises(hardware.HardwareError, match="device: this machine has no calibrated 'cuda:7'; it has: "
                                                     "cpu, cuda:0"):
        hardware.resolve("this:cuda:7")
    with pytest.raises(hardware.HardwareError, match="'../../etc:' is no machine id"):
        hardware.resolve("../../etc::cuda:0")
    for long in ("x" * 500, "x" * 500 + ":cuda:0"):
        with pytest.raises(hardware.HardwareError) as refused:
            hardware.resolve(long)
        assert len(str(refused.value)) < 700


def test_a_target_is_a_cpu_driving_a_gpu():
    book = hardware.load()
    with pytest.raises(hardware.HardwareError, match="host: 't4' is a gpu; a host is a CPU"):
        hardware.Target(book.devices["t4"], book.devices["v100"])
    with pytest.raises(hardware.HardwareError, match="gpu: 'typical-cpu' is a cpu, not a GPU"):
        hardware.Target(book.devices["i9-12900kf"], book.devices["typical-cpu"])


# The listing.

def test_the_listing_shows_calibrated_devices_first_then_the_catalogue(this_profile):
    profiles.save(made_profile("elsewhere-1"))
    rows = hardware.listing()
    names = [row["name"] for row in rows]
    assert names[:3] == ["this", "this:cuda:0", "elsewhere-1"] and names[3:] == list(hardware.load().devices)
    for row in rows:
        assert set(row) == {"name", "title", "kind", "origin", "key figures", "assumptions"}
        assert hardware.resolve(row["name"]).name == row["name"]
    by_name = {row["name"]: row for row in rows}
    assert by_name["this"]["key figures"] == "op 3.00 µs/op, matmul 150 GFLOP/s, bandwidth 16.0 GB/s"
    assert by_name["this:cuda:0"]["assumptions"] == 2 and by_name["this"]["origin"] == "calibrated"
    k80 = by_name["k80"]
    assert k80["origin"] == "catalogue" and k80["assumptions"] == len(hardware.load().devices["k80"].assumptions)
    assert k80["key figures"].startswith("matmul 2,500 GFLOP/s, bandwidth 160 GB/s, launch 7.00 µs/op")
    # its memory last: what it holds, beside what it moves; a calibrated GPU whose fingerprint lacks it, without
    held = profiles.human(hardware.load().devices["k80"].value("memory_gib"), "GiB")
    assert k80["key figures"].endswith(f", memory {held[0]} {held[1]}")
    assert "memory" not in by_name["this:cuda:0"]["key figures"].replace("memory_", "")


def test_the_listing_skips_a_profile_it_cannot_read_with_a_warning(results_dir):
    odd = made_profile("elsewhere-1")
    odd["cpu"]["conv2d_flops"] = {"8x16x16": 1e9}
    profiles.save(odd)
    with pytest.warns(UserWarning, match="skipping the calibration profile of elsewhere-1: conv2d_flops"):
        rows = hardware.listing()
    assert "elsewhere-1" not in [row["name"] for row in rows]
