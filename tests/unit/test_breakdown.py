import gzip
import json
import time

import pandas as pd
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from core import devices
from core.measure import breakdown, timing
from core.measure.breakdown import Event

CUDA_DEVICES = [d for d in devices.available() if devices.kind(d) == "cuda"]
NAP_S = 0.02
NAPS = 3


@torch.library.custom_op("crossover_test::nap", mutates_args=())
def nap(x: torch.Tensor) -> torch.Tensor:
    """An operator that stands for a long kernel: it sleeps, then multiplies two 256x256 matrices (an
    operator nested in it). Sleeping keeps a call's wall time steady on a busy shared machine, so the
    tests below check the accounting, not the machine."""
    time.sleep(NAP_S)
    return x @ x


def profiled(workload: timing.Workload, folder, stem: str = "p0") -> dict:
    return breakdown.take(workload, "cpu", timing.run(workload, "cpu").median, folder, stem)


@pytest.fixture(scope="module")
def napping(tmp_path_factory):
    """A compute-heavy call (three operators of a sleep and a 256x256 matmul each), timed over nine calls
    for a steady median, profiled once."""
    a = torch.randn(256, 256)
    workload = timing.Workload(lambda: [nap(a) for _ in range(NAPS)], unit="call", repeats=9, threads=1)
    folder = tmp_path_factory.mktemp("results") / "breakdowns"
    return profiled(workload, folder), folder


@pytest.mark.full
def test_a_compute_heavy_call_is_split_into_parts_that_add_up_to_its_timed_median_or_says_not(napping):
    """Whether the profiled call matches the timed median is the machine's to say (a loaded machine stretches
    either): the test checks the accounting both ways, not the machine."""
    result, _ = napping
    parts = sum(result[f"{part}_s"] for part in breakdown.PARTS if part != "host")
    assert result["tolerance"] == breakdown.TOLERANCE and result["host_s"] >= 0
    assert result["copies_s"] == result["sync_s"] == result["loading_s"] == 0.0
    assert result["kernels"] is None and 1 <= result["samples"] <= breakdown.MAX_CALLS and result["profiled_s"] > 0
    if result["adds_up"]:
        assert parts + result["host_s"] == pytest.approx(result["median_s"], rel=1e-9)
        assert result["compute_s"] > NAPS * NAP_S * 0.9 / (1 + breakdown.TOLERANCE)  # the naps, scaled at most so far
    else:  # parts as profiled, no host made of the gap
        assert result["host_s"] == 0.0 and result["compute_s"] > NAPS * NAP_S * 0.9
        assert (parts > result["median_s"] * (1 + breakdown.TOLERANCE)
                or result["profiled_s"] < result["median_s"] * (1 - breakdown.TOLERANCE))


@pytest.mark.full
def test_the_trace_is_gzipped_chrome_json_and_the_table_a_csv_beside_it(napping):
    result, folder = napping
    assert result["trace"] == "breakdowns/p0.trace.json.gz" and result["table"] == "breakdowns/p0.ops.csv"
    with gzip.open(folder.parent / result["trace"]) as f:
        trace = json.load(f)
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert "crossover_test::nap" in names and any(n.startswith(breakdown.LAP_RANGE) for n in names)
    table = pd.read_csv(folder.parent / result["table"])
    assert tuple(table.columns) == breakdown.TABLE_COLUMNS
    row = table.set_index("name").loc["crossover_test::nap"]
    assert row["calls"] == NAPS * result["samples"]
    assert row["CPU total (s)"] >= row["self CPU (s)"] > NAPS * result["samples"] * NAP_S * 0.9
    assert not table["name"].str.startswith(breakdown.LAP_RANGE).any()  # the lap markers are not operators
    assert sorted(p.name for p in folder.iterdir()) == ["p0.ops.csv", "p0.trace.json.gz"]


@pytest.mark.full
def test_a_call_iterating_a_data_loader_spends_time_loading(tmp_path):
    loader = DataLoader(TensorDataset(torch.randn(256, 8)), batch_size=32)
    model = torch.nn.Linear(8, 8)

    def epoch():
        for (x,) in loader:
            model(x)
    result = profiled(timing.Workload(epoch, unit="epoch", threads=1), tmp_path / "b")
    assert result["loading_s"] > 0 and result["compute_s"] > 0
    table = pd.read_csv(tmp_path / result["table"]).set_index("name")
    assert any(name.startswith(breakdown.LOADER_RANGE) for name in table.index)


def test_a_hooked_call_counts_only_the_laps_that_make_samples(tmp_path):
    a = torch.randn(64, 64)

    def fit(watch: timing.Stopwatch):
        for _ in range(3):
            watch.start()
            torch.mm(a, a)
            watch.lap("a")
            torch.cumsum(a, 0)
            watch.lap("b")
            watch.close_sample("a")
    workload = timing.Workload(fit, unit="epoch", hooks=True, threads=1)
    assert breakdown.window_calls(workload, 1e-6) == 1
    result = profiled(workload, tmp_path / "b")
    assert result["samples"] == 3
    names = set(pd.read_csv(tmp_path / result["table"])["name"])
    assert "aten::mm" in names and "aten::cumsum" not in names


def test_a_hooked_call_that_closes_no_sample_is_an_error(tmp_path):
    def fit(watch):
        watch.start()
        watch.lap("a")
    with pytest.raises(RuntimeError, match="closed no sample"):
        breakdown.take(timing.Workload(fit, unit="epoch", hooks=True), "cpu", 0.01, tmp_path / "b", "p0")


def test_nested_cpu_operators_count_once_and_those_in_a_fetch_or_a_pin_belong_there():
    events = [Event("aten::linear", "cpu_op", start=0, end=4), Event("aten::addmm", "cpu_op", start=1, end=3),
              Event("Optimizer.step#SGD.step", "user_annotation", start=0, end=10),
              Event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation", start=5, end=9),
              Event("aten::stack", "cpu_op", start=6, end=8),
              Event("aten::pin_memory", "cpu_op", start=9, end=9.5), Event("aten::empty", "cpu_op", start=9, end=9.2)]
    parts = breakdown.split(events, [(0.0, 10.0)], accelerator=False)
    assert parts == {"compute": 4, "copies": 0.5, "sync": 0.0, "loading": 4, "kernels": None}


def test_on_a_gpu_device_work_counts_first_and_host_waits_only_while_the_device_is_idle():
    def on_gpu(name, activity, start, end):
        return Event(name, activity, "CUDA", 0, start, end)
    events = [on_gpu("gemm", "kernel", 0, 4), on_gpu("relu", "kernel", 6, 8), on_gpu("add", "kernel", 7, 9),
              on_gpu("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 3, 6),
              on_gpu("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 9, 10),
              on_gpu("Memset (Device)", "gpu_memset", 12.5, 13),
              on_gpu("crossover.lap.3", "gpu_user_annotation", 0, 13),
              Event("cudaLaunchKernel", "cuda_runtime", start=0, end=0.5),
              Event("cudaStreamSynchronize", "cuda_runtime", start=5, end=12),
              Event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation", start=11,
                    end=14)]
    parts = breakdown.split(events, [(0.0, 14.0)], accelerator=True)
    # device busy [0, 10] and [12.5, 13]: kernels, memset and the device-local copy are compute (8.5), the
    # host-device copy only where no kernel runs (2); the loader while the device is idle (2.5); the wait
    # in the sync only outside both (1): together the whole window, once
    assert parts == {"compute": 8.5, "copies": 2, "sync": 1, "loading": 2.5, "kernels": 3}


def test_the_table_gives_a_host_operator_the_device_time_of_what_it_and_its_nested_operators_launched():
    events = [Event("aten::linear", "cpu_op", start=0, end=3, correlation=1),
              Event("aten::addmm", "cpu_op", start=0.5, end=2, correlation=2),
              Event("cudaLaunchKernel", "cuda_runtime", start=1, end=1.5, correlation=90, launcher=2),
              Event("gemm", "kernel", "CUDA", 0, 1.2, 5.2, correlation=90, launcher=2)]
    table = breakdown.operator_table(events).set_index("name")
    assert table.loc["aten::addmm", "self CPU (s)"] == pytest.approx(1.0)  # less the launch nested in it
    assert table.loc["aten::addmm", "self device (s)"] == table.loc["aten::addmm", "device total (s)"] == 4.0
    assert table.loc["aten::linear", "self device (s)"] == 0 and table.loc["aten::linear", "device total (s)"] == 4.0
    assert table.loc["gemm", "device type"] == "CUDA" and table.loc["gemm", "self device (s)"] == 4.0


def test_reconciling_fills_the_median_with_host_time_within_the_tolerance_only():
    under = breakdown.reconcile({"compute": 0.6, "copies": 0.0, "sync": 0.1, "loading": 0.1}, 1.0, 1.2)
    assert under["adds_up"] and under["host_s"] == pytest.approx(0.2) and under["compute_s"] == 0.6
    over = breakdown.reconcile({"compute": 1.05, "copies": 0.0, "sync": 0.0, "loading": 0.0}, 1.0, 1.2)
    assert over["adds_up"] and over["compute_s"] == pytest.approx(1.0) and over["host_s"] == 0.0
    beyond = breakdown.reconcile({"compute": 1.0, "copies": 0.0, "sync": 0.0, "loading": 0.2}, 1.0, 1.3)
    assert not beyond["adds_up"] and beyond["host_s"] == 0.0 and beyond["loading_s"] == 0.2
    # a profiled window far shorter than the median: timing and profile disagree, host would be noise
    faster = breakdown.reconcile({"compute": 0.3, "copies": 0.0, "sync": 0.0, "loading": 0.0}, 1.0, 0.4)
    assert not faster["adds_up"] and faster["host_s"] == 0.0 and faster["compute_s"] == 0.3


def test_the_window_is_a_few_tenths_of_a_second_of_calls():
    plain = timing.Workload(lambda: None, unit="call")
    assert breakdown.window_calls(plain, 10.0) == 1
    assert breakdown.window_calls(plain, 0.1) == 3
    assert breakdown.window_calls(plain, 1e-6) == breakdown.MAX_CALLS


def test_a_call_of_many_operations_is_profiled_fewer_times():
    plain = timing.Workload(lambda: None, unit="call")
    assert breakdown.window_calls(plain, 0.01, operations=breakdown.MAX_OPERATIONS / 4) == 4
    assert breakdown.window_calls(plain, 0.01, operations=breakdown.MAX_OPERATIONS * 3) == 1
    assert breakdown.window_calls(plain, 0.01, operations=10) == breakdown.window_calls(plain, 0.01)


@pytest.mark.parametrize("device, median_s, stem, field", [
    ("mps", 0.1, "p0", "device"), ("tpu", 0.1, "p0", "device"), ("cpu", 0.0, "p0", "median_s"),
    ("cpu", float("nan"), "p0", "median_s"), ("cpu", 0.1, "../p0", "stem"), ("cpu", 0.1, "", "stem")])
def test_bad_input_is_named(tmp_path, device, median_s, stem, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        breakdown.take(timing.Workload(lambda: None, unit="call"), device, median_s, tmp_path, stem)


def test_parts_have_labels_for_the_chart():
    assert set(breakdown.LABELS) == set(breakdown.PARTS) and breakdown.PARTS[-1] == "host"


@pytest.mark.skipif(not CUDA_DEVICES, reason="counting CUDA kernels needs a CUDA GPU; none is present here")
def test_on_a_gpu_the_kernels_per_sample_match_the_traced_kernels(tmp_path):
    device = CUDA_DEVICES[-1]  # the last GPU: the code must not assume cuda:0
    a = torch.randn(256, 256, device=device)
    workload = timing.Workload(lambda: (a @ a).relu_(), unit="call")
    result = breakdown.take(workload, device, timing.run(workload, device).median, tmp_path / "b", "p0")
    assert isinstance(result["kernels"], int) and result["kernels"] >= 2  # the product and the relu
    with gzip.open(tmp_path / result["trace"]) as f:
        kernels = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    assert result["kernels"] * result["samples"] == len(kernels)
    assert result["compute_s"] > 0


class WithoutActivityType:
    """A profile event as a torch release before 2.13 gives it: no activity_type()."""

    def __init__(self, event):
        self._event = event

    def __getattr__(self, name):
        if name == "activity_type":
            raise AttributeError(name)
        return getattr(self._event, name)


def test_without_torchs_activity_type_every_event_gets_the_type_torch_gives_it():
    loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)
    linear = torch.nn.Linear(4, 2)
    with breakdown.profile(activities=[breakdown.ProfilerActivity.CPU], with_stack=False) as prof:
        with breakdown.record_function("crossover.lap.0"):
            for (x,) in loader:
                linear(x).sum().backward()
    events = list(prof.profiler.kineto_results.events())
    kinds = {e.activity_type() for e in events}
    assert {"cpu_op", "user_annotation"} <= kinds
    assert [breakdown.activity(WithoutActivityType(e)) for e in events] == [e.activity_type() for e in events]
