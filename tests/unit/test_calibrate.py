import copy
import dataclasses
import gc
import itertools
import json
import os

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from core import devices, settings
from core.calibration import calibrate, efforts, module_probes, op_probes
from core.measure import census, gc_watch
from core.measure.kernels import cpu_rnn
from core.model import costmodel, profiles
from core.store import runlock
from core.commands.cli import main


@pytest.mark.full
def test_a_quick_calibration_measures_every_cpu_field_within_its_sane_range(quick_profile):
    cpu = quick_profile["cpu"]
    collection = set(costmodel.COLLECTION_FIGURES)  # all or none: a quick pass is too short to see a collection
    assert set(cpu) - collection == {f.name for f in profiles.fields_for("cpu")} - collection
    assert collection <= set(cpu) or not collection & set(cpu)
    for field in (f for f in profiles.fields_for("cpu") if f.name in cpu):
        values = cpu[field.name].values() if field.sized else [cpu[field.name]]
        for value in values:
            assert field.low <= value <= field.high, (field.name, value, field.unit)
    assert set(cpu["matmul_flops"]) == {str(n) for n in efforts.QUICK.matmul_sizes["cpu"]}
    assert set(cpu["conv2d_flops"]) == {"8x16x2x2", *(f"8x16x{s}x{s}" for s in efforts.QUICK.conv2d_sides)}
    one_channel = {"8x1x4", "8x1x256", "8x1x2x2", *(f"8x1x{s}x{s}" for s in efforts.QUICK.conv2d_sides)}
    assert set(cpu["conv_one_channel_flops"]) == one_channel
    assert set(cpu["conv_backward_share"]) == one_channel | set(cpu["conv1d_flops"]) | set(cpu["conv2d_flops"])
    assert set(cpu["elementwise_rate"]) == {"4096", "65536", "1048576"}  # the largest: QUICK's 4 MiB of float32
    assert cpu["elementwise_flops"] == cpu["elementwise_rate"]["1048576"]
    assert cpu["optimizer_op_overhead"] >= cpu["op_overhead_no_grad"] * 0.5  # at least the bare op when measured
    assert set(cpu["op_call_seconds"]) == set(cpu["op_element_seconds"]) == set(op_probes.PROBES)
    assert set(cpu["narrow_gemm_seconds"]) == {str(n) for n in calibrate.NARROW_COLUMNS}
    assert set(cpu["sort_row_element_seconds"]) == {str(n) for n in calibrate.SORT_ROWS}
    for field in ({"loader_per_sample"} | collection) & set(cpu) - {"full_collection_seconds", "collection_heap_objects"}:
        assert set(cpu[field]) == {str(b) for b in efforts.QUICK.loader_batches}
    assert set(cpu["module_call_seconds"]) == set(module_probes.PROBES)
    grid = {f"{m}x{k}x{n}" for m, k, n in itertools.product(*efforts.QUICK.gemm_grid)}
    assert set(cpu["gemm_seconds"]) == set(cpu["linear_seconds"]) == grid
    inner, columns = calibrate.WIDE_GEMM_WEIGHT
    assert set(cpu["wide_gemm_seconds"]) == {f"{rows}x{inner}x{columns}" for rows in calibrate.WIDE_GEMM_ROWS}
    blocks = {f"{q}x{k}x{d}" for q, k, d in itertools.product(*efforts.QUICK.attention_grid)}
    assert set(cpu["flash_attention_seconds"]) == set(cpu["flash_attention_backward_seconds"]) == blocks
    # keyed by the layer's GEMM FLOPs a step (batch x (inputs + hidden) x 4 hidden x 2), where torch has the layer
    steps = {str(batch * 2 * width * 4 * width * 2) for batch, width in efforts.QUICK.lstm_shapes}
    assert set(cpu["lstm_layer_flops"]) == set(cpu["lstm_layer_backward_flops"]) == (steps if cpu_rnn.runs_lstm()
                                                                                      else set())
    assert quick_profile["gpus"] == {} and quick_profile["quick"] is True
    assert quick_profile["machine_id"] == devices.fingerprint()["machine_id"]
    profiles.validate(quick_profile)


@pytest.mark.full
def test_the_loader_probe_counts_the_full_collections_apart_from_the_loading(monkeypatch):
    class Collecting:
        """A DataLoader whose every pass sets off one full garbage collection."""
        def __init__(self, data, batch_size):
            self.batches = len(data) // batch_size

        def __iter__(self):
            gc.collect()
            return iter(range(self.batches))

    monkeypatch.setattr(calibrate, "DataLoader", Collecting)
    found = calibrate.loader_by_batch("cpu", dataclasses.replace(efforts.QUICK, loader_batches=(64,), loader_rows=640))
    assert found["loader_collections_per_sample"] == {"64": 1 / 640}  # one in each pass of 640 samples
    assert found["loader_uncollected_per_sample"]["64"] < found["loader_per_sample"]["64"]  # each pass less its own


def test_passes_too_short_to_see_a_full_collection_leave_the_collection_figures_out(monkeypatch):
    class Quiet:
        """A DataLoader whose passes set off no full collection."""
        def __init__(self, data, batch_size):
            self.batches = len(data) // batch_size

        def __iter__(self):
            return iter(range(self.batches))

    effort = dataclasses.replace(efforts.QUICK, loader_batches=(64,), loader_rows=640)
    monkeypatch.setattr(calibrate, "DataLoader", Quiet)
    quiet = calibrate.loader_cost("cpu", effort)
    assert "loader_per_sample" in quiet and not set(costmodel.COLLECTION_FIGURES) & set(quiet)


def test_the_numpy_loader_probe_converts_each_field_of_each_sample_as_the_census_counts_it():
    data = calibrate._NumpyRows(np.zeros((8, 16), np.float32), np.zeros((8, 1), np.float32))
    found = census.of(lambda: list(DataLoader(data, batch_size=4)), "cpu").summary()
    fetched = [op["op"] == costmodel.CONVERSION and op["phase"] == "loading" for op in found["ops"]]
    conversions = sum(calls * stretch["times"] for stretch in found["stretches"] for index, calls in stretch["ops"]
                      if fetched[index])
    assert conversions == 2 * 8 and found["loader"] == {"batches": 2, "samples": 8}


@pytest.mark.parametrize("tensors, arrays, per_field", [(1.0, 1.5, 0.5 / 1024), (1.0, 0.9, 0.0)])
def test_a_numpy_field_costs_what_its_passes_take_beyond_a_tensor_field_s_and_never_less_than_nothing(
        monkeypatch, tensors, arrays, per_field):
    def passes(batch_size, samples, device, repeats, numpy=False):
        assert (batch_size, samples) == (calibrate.NUMPY_LOADER_BATCH, 512)
        return [arrays if numpy else tensors, 9.0], []  # the best of the passes counts
    monkeypatch.setattr(calibrate, "_loader_passes", passes)
    effort = dataclasses.replace(efforts.QUICK, loader_rows=512)
    assert calibrate.numpy_field_seconds("cpu", effort) == pytest.approx(per_field)  # two fields of 512 samples


@pytest.mark.parametrize("effort", [efforts.QUICK, efforts.FULL])
def test_memory_bandwidth_is_timed_on_a_copy_past_the_caches_whatever_the_effort(monkeypatch, effort):
    made = []
    rand = torch.rand

    def spy(*size, **kwargs):
        made.append(size)
        return rand(*size, **kwargs)
    monkeypatch.setattr(calibrate.torch, "rand", spy)
    monkeypatch.setattr(calibrate, "_seconds", lambda fn, device, effort: 0.01)
    found = calibrate.memory_bandwidth("cpu", effort)
    assert made == [(calibrate.MEMORY_BYTES["cpu"] // 4,)]  # 64 MiB: a quick effort's large tensors are 4 MiB
    assert found == {"memory_bandwidth": 2 * calibrate.MEMORY_BYTES["cpu"] / 0.01}


@pytest.mark.full
def test_full_collections_are_counted_and_young_ones_are_not():
    with gc_watch.full_collections() as found:
        gc.collect(0)
        gc.collect(1)
    assert found.count == 0 and found.seconds == 0.0
    with gc_watch.full_collections() as found:
        gc.collect()
        gc.collect()
    assert found.count == 2 and found.seconds > 0.0
    assert len([c for c in gc.callbacks if "full_collections" in getattr(c, "__qualname__", "")]) == 0  # removed


def test_a_probe_with_a_figure_outside_its_sane_range_is_measured_again_after_a_pause(monkeypatch):
    pauses = []
    monkeypatch.setattr(calibrate.time, "sleep", pauses.append)
    readings = iter([{"module_call": 5.0, "op_call_seconds": {"tanh": 1e-6}},  # a stalled call: 5 s per module call
                     {"module_call": 1e-6, "op_call_seconds": {"tanh": 0.5}},   # a stalled op
                     {"module_call": 1e-6, "op_call_seconds": {"tanh": 1e-6}}])
    probe = calibrate.Probe("made", profiles.HOST, lambda device, effort: next(readings))
    assert profiles.out_of_range({"module_call": 5.0, "op_call_seconds": {"tanh": 0.5}}) == ["module_call",
                                                                                          "op_call_seconds"]
    assert calibrate._measure(probe, "cpu", efforts.QUICK) == {"module_call": 1e-6, "op_call_seconds": {"tanh": 1e-6}}
    assert pauses == [calibrate.RETRY_PAUSE_S] * 2  # before each measurement again, for the stall to pass
    stuck = calibrate.Probe("stuck", profiles.HOST, lambda device, effort: {"module_call": 5.0})
    assert calibrate._measure(stuck, "cpu", efforts.QUICK) == {"module_call": 5.0}  # left for save to refuse


@pytest.mark.parametrize("field, key, message", [
    ("loader_per_sample", "0", "cpu/loader_per_sample: '0' does not match"),  # a batch of no samples
    ("module_call_seconds", "nn.Linear", "cpu/module_call_seconds: 'nn.Linear' does not match"),
    ("op_element_seconds", "Tanh", "cpu/op_element_seconds: 'Tanh' does not match"),
    ("gemm_seconds", "16x4", "cpu/gemm_seconds: '16x4' does not match"),  # a GEMM's shape is M x K x N
])
@pytest.mark.full
def test_a_profile_keyed_figure_with_a_key_of_the_wrong_kind_is_refused(quick_profile, field, key, message):
    broken = copy.deepcopy(quick_profile)
    broken["cpu"][field][key] = 1e-6
    with pytest.raises(profiles.ProfileError, match=message):
        profiles.validate(broken)


@pytest.mark.full
def test_a_gemm_figure_that_is_not_a_grid_of_shapes_is_refused(quick_profile):
    holed = copy.deepcopy(quick_profile)
    del holed["cpu"]["linear_seconds"]["1024x64x16"]
    with pytest.raises(profiles.ProfileError, match=r"cpu/linear_seconds: 7 shapes are not a grid \(every M with every K "
                                                    r"and N: 2 x 2 x 2 shapes\)"):
        profiles.validate(holed)


def test_every_field_has_a_unit_shown_in_human_units_and_a_probe_that_measures_it():
    for field in profiles.FIELDS:
        assert field.unit in profiles.HUMAN_UNITS and 0 <= field.low < field.high, field.name
    assert profiles.human(3.2e-6, "s/op") == ("3.20", "µs/op")
    assert profiles.human(2.5e11, "FLOP/s") == ("250", "GFLOP/s")
    kinds_probed = {kind for probe in calibrate.PROBES for kind in probe.kinds}
    assert kinds_probed == {kind for field in profiles.FIELDS for kind in field.kinds}


@pytest.mark.full
def test_a_profile_saves_and_loads_back_unchanged(quick_profile, results_dir):
    path = profiles.save(quick_profile)
    mid = quick_profile["machine_id"]
    assert path == results_dir / mid / "calibration" / "profile.json"
    assert profiles.load() == profiles.load(mid) == json.loads(json.dumps(quick_profile))
    assert profiles.all() == {mid: profiles.load(mid)}


@pytest.mark.full
def test_a_profile_is_checked_once_per_version_of_its_file_and_each_reader_gets_its_own_copy(
        quick_profile, results_dir, monkeypatch):
    saved = profiles.save(quick_profile)
    assert saved.is_relative_to(results_dir)
    checked = []
    with monkeypatch.context() as spying:
        spying.setattr(profiles, "validate", lambda profile: checked.append(profile["machine_id"]))
        first = profiles.load()
        first["cpu"]["memory_bandwidth"] = -1.0  # a reader's change reaches no other reader
        assert profiles.load() == json.loads(json.dumps(quick_profile)) and len(checked) == 1
    broken = copy.deepcopy(quick_profile)
    broken["cpu"]["op_overhead_no_grad"] = 50.0
    saved.write_text(json.dumps(broken))  # a new version of the file: checked again
    with pytest.warns(UserWarning, match="op_overhead_no_grad"):
        assert profiles.load() is None


@pytest.mark.full
def test_a_calibration_taken_on_a_busy_machine_says_so(quick_profile):
    assert profiles.busy_note(quick_profile | {"load_per_core": 0.2}) is None
    busy = quick_profile | {"load_per_core": 3.0}
    assert "busy when calibrated (load 3.0 per core)" in profiles.busy_note(busy)
    assert calibrate.report(busy).splitlines()[-1].startswith("note: the machine was busy")


def test_a_machine_without_a_profile_is_told_how_to_take_one(results_dir):
    assert profiles.load() is None and profiles.all() == {}
    assert profiles.missing_message() == ("no calibrated profile for this machine: run `python -m core calibrate` "
                                          "(under a minute)")
    assert "machine elsewhere-1: run `python -m core calibrate` on it" in profiles.missing_message("elsewhere-1")


def _write(results_dir, machine_id: str, profile) -> str:
    path = results_dir / machine_id / "calibration" / "profile.json"
    path.parent.mkdir(parents=True)
    path.write_text(profile if isinstance(profile, str) else json.dumps(profile))
    return str(path)


@pytest.mark.full
def test_malformed_profiles_are_skipped_with_a_warning_naming_the_file(quick_profile, results_dir):
    out_of_range = copy.deepcopy(quick_profile) | {"machine_id": "slow-1"}
    out_of_range["cpu"]["op_overhead_no_grad"] = 50.0
    missing = copy.deepcopy(quick_profile) | {"machine_id": "missing-1"}
    del missing["cpu"]["memory_bandwidth"]
    cases = {_write(results_dir, "slow-1", out_of_range): "cpu/op_overhead_no_grad: 50.0 is greater than",
             _write(results_dir, "missing-1", missing): "'memory_bandwidth' is a required property",
             _write(results_dir, "moved-1", quick_profile): "is not its folder's 'moved-1'",
             _write(results_dir, "nan-1", '{"schema": 1, "seconds": NaN}'): "NaN is not a measured value",
             _write(results_dir, "broken-1", "{not json"): "Expecting property name"}
    _write(results_dir, quick_profile["machine_id"], quick_profile)
    with pytest.warns(UserWarning) as caught:
        found = profiles.all()
    assert list(found) == [quick_profile["machine_id"]]
    messages = [str(w.message) for w in caught]
    for path, reason in cases.items():
        assert any(path in m and reason in m for m in messages), (path, reason, messages)
    with pytest.warns(UserWarning, match="slow-1"):
        assert profiles.load("slow-1") is None


@pytest.mark.full
def test_saving_checks_the_profile_and_read_only_refuses_it(quick_profile, results_dir, monkeypatch):
    bad = copy.deepcopy(quick_profile)
    bad["cpu"]["matmul_flops"] = {}
    with pytest.raises(profiles.ProfileError, match="cpu/matmul_flops: {} should be non-empty"):
        profiles.save(bad)
    without_lstm = copy.deepcopy(quick_profile)  # a machine whose torch runs no fused LSTM layer: nothing to price
    without_lstm["cpu"] |= dict.fromkeys(profiles.EMPTY_WHERE_ABSENT, {})
    profiles.validate(without_lstm)
    with pytest.raises(profiles.ProfileError, match="machine_id: '../outside' does not match"):
        profiles.save(quick_profile | {"machine_id": "../outside"})
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    with pytest.raises(settings.ReadOnlyError, match="calibration refused"):
        profiles.save(quick_profile)
    assert not results_dir.exists()


@pytest.mark.full
def test_cli_calibrate_prints_the_table_and_writes_the_profile(quick_profile, capsys, results_dir, monkeypatch):
    asked = []

    def measured(names, quick):  # the module's calibration, not another one
        asked.append((names, quick))
        return quick_profile
    monkeypatch.setattr(calibrate, "take", measured)
    assert main(["calibrate", "--quick", "--device", "cpu"]) == 0
    assert asked == [(["cpu"], True)]
    out = capsys.readouterr().out
    path = profiles.path()
    assert "calibrated cpu in " in out and str(path) in out
    assert "matmul_flops @ 64" in out and "GFLOP/s" in out and "µs/op" in out and "GB/s" in out
    notes = ["note: the machine was busy", *profiles.check_notes(quick_profile)]  # below the table
    table = [line for line in out.splitlines()[:-1] if not any(line.startswith(note) for note in notes)]
    grids = profiles.GEMM_FIGURES + profiles.ATTENTION_FIGURES
    rows = [row for row in profiles.rows(profiles.load()) if row["field"] not in grids]
    assert len(table) == len(rows) + len(grids)  # a grid: one line per figure, not per shape
    assert "gemm_seconds @ 8 shapes" in table[-4] and "linear_seconds @ 8 shapes" in table[-3] and " to " in table[-3]
    assert "flash_attention_seconds @ 8 shapes" in table[-2] and "µs/block" in table[-1]
    value_ends = {line.index(f"{row['value']} {row['unit']} ") + len(row["value"]) for line, row in zip(table, rows)}
    assert len(value_ends) == 1  # the values line up


@pytest.mark.full
def test_cli_calibrate_writes_the_profile_before_it_prints_the_report(quick_profile, results_dir, monkeypatch):
    def broken(profile):
        raise KeyError("a display fault")
    monkeypatch.setattr(calibrate, "take", lambda names, quick: quick_profile)
    monkeypatch.setattr(calibrate, "report", broken)
    with pytest.raises(KeyError):
        main(["calibrate", "--quick", "--device", "cpu"])
    assert profiles.load()["cpu"] == quick_profile["cpu"]  # the minutes of measuring are kept


@pytest.mark.full
def test_cli_calibrate_with_a_figure_out_of_range_writes_nothing_and_says_to_calibrate_again_idle(
        quick_profile, capsys, results_dir, monkeypatch):
    slow = copy.deepcopy(quick_profile)
    slow["cpu"]["op_overhead_no_grad"] = 1.0  # a second per bare operation: beyond its sane range
    monkeypatch.setattr(calibrate, "take", lambda names, quick: slow)
    assert main(["calibrate", "--quick", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "profile not written: cpu/op_overhead_no_grad" in err and "again when the machine is idle" in err
    assert profiles.load() is None


def test_cli_calibrate_refuses_when_read_only_busy_or_given_a_bad_device(capsys, results_dir, monkeypatch):
    assert main(["calibrate", "--quick", "--device", "cuda:9"]) == 2
    assert "device: 'cuda:9' is not present" in capsys.readouterr().err
    fd = runlock.acquire({"run_id": "r1", "experiment": "matmul", "devices": ["cpu"]})
    try:
        assert main(["calibrate", "--quick"]) == 2
        assert "a run is already going on this machine: matmul on cpu" in capsys.readouterr().err
    finally:
        os.close(fd)
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    assert main(["calibrate", "--quick"]) == 2
    assert "read-only" in capsys.readouterr().err and profiles.load() is None


@pytest.mark.skipif("cuda:0" not in devices.available(), reason="needs a CUDA GPU: the GPU fields measure one")
def test_a_quick_calibration_measures_every_gpu_field_on_every_gpu():
    gpus = [d for d in devices.available() if devices.kind(d) == "cuda"]
    profile = calibrate.take(gpus, quick=True, progress=False)
    assert set(profile["gpus"]) == set(gpus)
    for gpu in gpus:
        assert set(profile["gpus"][gpu]) == {f.name for f in profiles.fields_for("cuda")}
        assert set(profile["gpus"][gpu]["matmul_flops"]) == {str(n) for n in efforts.QUICK.matmul_sizes["cuda"]}
    profiles.validate(profile)


def test_a_gpu_times_larger_matrix_products_than_a_cpu(monkeypatch):
    monkeypatch.setattr(calibrate.torch, "randn", lambda *size, device: torch.empty(0))  # no GPU needed to plan them
    monkeypatch.setattr(calibrate, "_flop_rate", lambda fn, device, effort: 1.0)
    for effort in (efforts.QUICK, efforts.FULL):
        on_gpu = [int(n) for n in calibrate.matmul_rate("cuda:1", effort)["matmul_flops"]]
        on_cpu = [int(n) for n in calibrate.matmul_rate("cpu", effort)["matmul_flops"]]
        assert max(on_gpu) > max(on_cpu) and on_cpu == on_gpu[:len(on_cpu)]


def test_a_pass_times_the_bare_operation_once_and_the_next_pass_again(monkeypatch):
    timed = []
    monkeypatch.setattr(calibrate, "_seconds", lambda fn, device, effort, sync=None: timed.append(device) or 2e-6)
    monkeypatch.setattr(calibrate, "PROBES", [calibrate.Probe("two", ("cpu",), lambda device, effort: {
        "op_overhead_no_grad": calibrate._bare_op_seconds(device, effort),
        "module_call": calibrate._bare_op_seconds(device, effort)})])
    monkeypatch.setattr(calibrate, "QUICK", calibrate.replace(efforts.QUICK, passes=2))
    monkeypatch.setattr(calibrate.versions, "code_version", lambda: {"commit": None, "dirty": False})
    profile = calibrate.take(["cpu"], quick=True, progress=False)
    assert timed == ["cpu", "cpu"]  # one bare-op timing per pass, shared by the pass's probes
    assert profile["cpu"] == {"op_overhead_no_grad": 2e-6, "module_call": 2e-6}


def test_the_sort_by_row_length_probe_counts_its_own_elements_after_the_listed_sort_at_as_many_rows(monkeypatch):
    """The listed operations' sort runs at LISTED_OP_ROWS rows, one of which is also a row length the sort-by-length
    probe times: each probe divides by the elements its own call writes (a shared census once read 35x too slow)."""
    monkeypatch.setattr(calibrate, "_work_seconds", lambda fn, device, effort, counted=None: 1.0)
    monkeypatch.setattr(calibrate, "COUNTED", {})
    assert set(calibrate.LISTED_OP_ROWS) & set(calibrate.SORT_ROWS)  # the case that collided
    costs = calibrate.listed_op_costs("cpu", efforts.QUICK)["sort_row_element_seconds"]
    written = 2 * calibrate.SORT_ELEMENTS  # values and indices, whatever the row length
    assert costs == {str(length): 1.0 / written for length in calibrate.SORT_ROWS}


@pytest.mark.parametrize("busy, own, others", [(30.0, 2.0, 28.0), (1.0, 2.0, 0.0)], ids=["others-busy", "only-itself"])
def test_the_load_a_profile_records_is_the_other_work_while_it_ran(monkeypatch, busy, own, others):
    # the machine's busy CPU seconds and the calibration's own, read as it begins and as it ends
    monkeypatch.setattr(calibrate, "_busy_cpu_seconds", iter([100.0, 100.0 + busy]).__next__)
    monkeypatch.setattr(calibrate, "_own_cpu_seconds", iter([5.0, 5.0 + own]).__next__)
    monkeypatch.setattr(calibrate, "PROBES", [calibrate.Probe("one", ("cpu",), lambda device, effort: {
        "op_overhead_no_grad": 2e-6})])
    monkeypatch.setattr(calibrate.versions, "code_version", lambda: {"commit": None, "dirty": False})
    profile = calibrate.take(["cpu"], quick=True, progress=False)
    assert profile["load_per_core"] == pytest.approx(others / (profile["seconds"] * calibrate.psutil.cpu_count()))


def test_the_cpu_seconds_read_grow_with_work():
    busy, own = calibrate._busy_cpu_seconds(), calibrate._own_cpu_seconds()
    sum(i * i for i in range(3_000_000))
    assert calibrate._own_cpu_seconds() > own and calibrate._busy_cpu_seconds() > busy


@pytest.mark.full
def test_the_backward_share_divides_by_the_training_calls_the_rate_probes_timed_in_the_pass(monkeypatch):
    calibrate.TRAINING_CALLS.clear()
    calibrate.conv_rate("cpu", efforts.QUICK)
    calibrate.one_channel_conv_rate("cpu", efforts.QUICK)
    timed = {key: seconds for (device, key), seconds in calibrate.TRAINING_CALLS.items() if device == "cpu"}
    retimed = []
    monkeypatch.setattr(calibrate, "_training_seconds", lambda *args: retimed.append(args) or 1.0)
    shares = calibrate.conv_backward_share("cpu", efforts.QUICK)["conv_backward_share"]
    assert set(shares) == set(timed) and retimed == []  # every whole call from the pass, none timed again
    calibrate.TRAINING_CALLS.update({("cpu", key): 1e3 for key in timed})  # calls far longer than any forward
    assert set(calibrate.conv_backward_share("cpu", efforts.QUICK)["conv_backward_share"].values()) == {
        calibrate.MAX_BACKWARD_SHARE}
    calibrate.TRAINING_CALLS.clear()  # a probe run alone times its own
    assert len(calibrate.conv_backward_share("cpu", efforts.QUICK)["conv_backward_share"]) == len(retimed) == len(timed)


def test_the_training_figure_is_where_the_model_prices_the_step_at_its_time_and_never_below_a_launch():
    from core.model import costmodel, hardware
    shipped = json.loads((settings.APP_ROOT / "results" / "intel-r-xeon-r-processor-8e260d9d" / "calibration" /
                          "profile.json").read_text())
    host, gpu = shipped["cpu"], shipped["gpus"]["cuda:0"]
    found = calibrate._counted(calibrate._training_step("meta"), "meta")  # on the GPU's stand-in, as a GPU counts it
    assert costmodel.recording_calls(found) > 0

    def priced(figure):
        return costmodel.host_seconds(found, hardware.calibrating(host, gpu | {costmodel.TRAINING_OP: figure}))
    at_launch = priced(gpu["launch_overhead"])
    for seconds in (1.5 * at_launch, 4 * at_launch):
        figure = calibrate.training_figure(seconds, found, host, gpu)
        assert figure > gpu["launch_overhead"] and priced(figure) == pytest.approx(seconds, rel=1e-9)
    assert calibrate.training_figure(0.5 * at_launch, found, host, gpu) == gpu["launch_overhead"]


@pytest.mark.parametrize("measured", [{"cpu": {}, "cuda:0": {"launch_overhead": 9e-6}},
                                      {"cpu": {"op_overhead_autograd": 9e-6}, "cuda:0": {}}], ids=["host", "launch"])
def test_the_training_step_probe_refuses_without_the_pass_s_host_and_launch_figures(monkeypatch, measured):
    monkeypatch.setattr(calibrate, "PASS", measured)
    with pytest.raises(RuntimeError, match="cuda:0: the training step is priced at the host's and the GPU's launch"):
        calibrate.training_op_overhead("cuda:0", efforts.QUICK)


def test_a_step_whose_census_holds_no_recording_operation_on_the_gpu_is_refused():
    x = torch.ones(2, device="meta")
    found = calibrate._counted(lambda: x + 1, "meta")  # an operation, none that autograd records
    with pytest.raises(ValueError, match="no recording operation on the GPU"):
        calibrate.training_figure(1e-3, found, {}, {"launch_overhead": 9e-6})


def test_a_pass_s_probes_read_the_figures_measured_before_them_in_that_pass(monkeypatch):
    seen = []
    monkeypatch.setattr(calibrate, "PROBES", [
        calibrate.Probe("first", ("cpu",), lambda device, effort: {"module_call": 1e-6}),
        calibrate.Probe("second", ("cpu",), lambda device, effort: seen.append(dict(calibrate.PASS[device])) or {
            "op_overhead_no_grad": 2e-6})])
    monkeypatch.setattr(calibrate, "QUICK", calibrate.replace(efforts.QUICK, passes=2))
    monkeypatch.setattr(calibrate.versions, "code_version", lambda: {"commit": None, "dirty": False})
    calibrate.take(["cpu"], quick=True, progress=False)
    assert seen == [{"module_call": 1e-6}, {"module_call": 1e-6}]  # each pass's own, the first probe's alone
    assert calibrate.PASS == {}  # nothing kept once the calibration is over
