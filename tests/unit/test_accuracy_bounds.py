"""What bounds a checked point: the host's share of its predicted time sorts it into a regime, host-bound or
device-bound, and the accuracy is summarised per regime. A point measured by one cold call is marked so."""
import contextlib
import copy
import io

import pandas as pd
import pytest

from core import devices, settings
from core.predict import predictions, uncertainty
from core.store import results
from core.commands.cli import main
from tests.helpers import once, shipped_records


@pytest.fixture(scope="module")
def shipped() -> tuple[pd.DataFrame, str]:
    """The shipped results' accuracy frame and what `python -m core predict --accuracy` prints of them, taken once for
    the session and shared by the workers of `pytest -n` (seconds each)."""
    def take() -> dict:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(settings.RESULTS_ENV, str(settings.APP_ROOT / "results"))
            patch.setenv(settings.READ_ONLY_ENV, "1")  # the shipped folder is read, never written (the error bands)
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                assert main(["predict", "--accuracy"]) == 0
            frame = predictions.accuracy(results.load_records())
        return {"frame": frame.to_dict(orient="split"), "printed": printed.getvalue()}  # json keeps every float's digits
    taken = once("shipped-accuracy", take)
    return pd.DataFrame(**taken["frame"]), taken["printed"]


@pytest.mark.parametrize("share, name", [(1.0, "host-bound"), (0.5, "host-bound"), (0.49, "device-bound"),
                                         (0.0, "device-bound")])
def test_the_host_share_names_the_bound(share, name):
    assert predictions.bound(share) == name


def test_by_bound_summarises_each_regime_present_host_bound_first():
    frame = pd.DataFrame({"bound": ["device-bound", "host-bound", "host-bound", "host-bound"],
                          "ratio": [0.2, 1.0, 1.2, 2.0], "within": [False, True, True, False]})
    table = predictions.by_bound(frame)
    assert table["bound"].tolist() == ["host-bound", "device-bound"]
    host = table.iloc[0]
    assert host["points"] == 3 and host["median_ratio"] == pytest.approx(1.2) and host["worst_ratio"] == 2.0
    # |error| 0, 0.2 and 1.0: median 0.2; the 90th percentile 0.2 + 0.8 x (1.0 - 0.2) = 0.84 (linear between them)
    assert host["median_error"] == pytest.approx(0.2) and host["p90_error"] == pytest.approx(0.84)
    assert host["within_1.25x"] == pytest.approx(2 / 3) and host["within_1.5x"] == pytest.approx(2 / 3)
    assert host["too_fast"] == 0 and table.iloc[1]["too_fast"] == 1  # 0.2: five times too fast
    assert predictions.bound_text(frame) == (
        "host-bound 3 points: median |error| 20%, 90th percentile 84%, 67% within 1.25x, 67% within 1.5x, worst 2.00; "
        "device-bound 1 point: median |error| 80%, 90th percentile 80%, 0% within 1.25x, 0% within 1.5x, worst 0.20")


@pytest.mark.full
def test_an_experiment_pages_check_is_the_full_checks_rows_on_this_cpu_and_every_gpu(shipped, monkeypatch):
    frame, _ = shipped
    here = "amd-epyc-34e468d3"  # a shipped machine stands for this one
    fingerprint = devices.fingerprint()
    monkeypatch.setattr(devices, "fingerprint", lambda: fingerprint | {"machine_id": here})
    monkeypatch.setenv(settings.RESULTS_ENV, str(settings.APP_ROOT / "results"))
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    part = predictions.accuracy(results.load_records(), target_for=predictions.here_and_gpus)
    kinds = frame["device"].map(devices.kind)
    expected = frame[((frame["machine_id"] == here) & (kinds == "cpu")) | (kinds == "cuda")]
    assert (part["machine_id"] == here).any() and (part["device"].map(devices.kind) == "cuda").any()
    assert len(part) < len(frame)  # every other machine's CPU points are left out
    # the same checks (its own CPU is titled as this machine's now: "hardware" differs)
    pd.testing.assert_frame_equal(part.drop(columns="hardware").reset_index(drop=True),
                                  expected.drop(columns="hardware").reset_index(drop=True), check_dtype=False)


@pytest.mark.full
def test_the_shipped_checks_carry_their_host_share_and_bound(shipped):
    frame, _ = shipped
    assert not frame.empty and frame["host_share"].between(0, 1).all()
    assert (frame["bound"] == frame["host_share"].map(predictions.bound)).all()
    iris = frame[(frame["experiment"] == "iris") & (frame["variant"] == "as written")]
    # a 4-10-3 MLP: its step is mostly dispatch and Python (host-bound on the older AMD VM, 77% host on the Zen 5 one)
    assert (iris["bound"] == "host-bound").all()
    matmul = frame[(frame["experiment"] == "matmul") & frame["point"].str.contains("size=2048")]
    assert (matmul["bound"] == "device-bound").any()


@pytest.mark.full
def test_a_profile_older_than_the_figures_calibrate_measures_is_named_with_what_it_lacks(shipped_results, shipped):
    older = predictions.unmeasured_text("intel-r-xeon-r-processor-cbad859e", "cpu")  # calibrated 2026-11-22
    assert older.startswith("Its profile was calibrated before calibrate measured 23 of its figures (")
    assert "gemm_seconds" in older and "loader_per_sample" in older
    # calibrated a day before calibrate timed the convolutions' backward share, the DataLoader's full collections,
    # its NumPy rows and sort by row length (and, as every shipped profile, before it timed wide GEMMs)
    assert predictions.unmeasured_text("amd-epyc-34e468d3", "cpu").startswith(
        "Its profile was calibrated before calibrate measured 10 of its figures (conv_backward_share, "
        "loader_uncollected_per_sample, loader_collections_per_sample, full_collection_seconds, "
        "collection_heap_objects, loader_numpy_field_seconds, sort_row_element_seconds, lstm_layer_flops, "
        "lstm_layer_backward_flops, wide_gemm_seconds)")
    # calibrated a day before calibrate timed oneDNN's fused LSTM layer
    assert predictions.unmeasured_text("amd-epyc-28e20464", "cpu").startswith(
        "Its profile was calibrated before calibrate measured 3 of its figures (lstm_layer_flops, "
        "lstm_layer_backward_flops, wide_gemm_seconds)")
    assert predictions.unmeasured_text("no-such-machine", "cpu") == ""
    _, out = shipped
    # the 2-thread Xeon, the earlier AMD VM, the later one and the first H200 machine's host (its CPU and GPU checks).
    # The second H200 machine's profile is a full one at this version, whose DataLoader passes saw no full garbage
    # collection: the collection figures are missing for that reason, not for its age; a quick profile leaves them out
    # on purpose, and the quick profile's own sentence says so
    assert out.count("Its profile was calibrated before calibrate measured") == 5
    for device in ("cpu", "cuda:0"):
        assert predictions.unmeasured_text("intel-r-xeon-r-processor-8e260d9d", device) == ""
    assert "no figures for the DataLoader's full garbage collections" in predictions.quick_profile_text(
        "intel-r-xeon-r-processor-6c664674", "cpu")


@pytest.mark.full
def test_a_point_measured_by_one_cold_call_says_so_in_the_table_and_the_cli(shipped_results, shipped):
    latest = [record for record, _ in predictions._latest(shipped_records())]
    records = copy.deepcopy([record for record in latest if record["machine_id"] == "amd-epyc-34e468d3"])  # one machine
    rows = [row for record in records for row in record["rows"] if (row.get("census") or {}).get("stretches")]
    for row in rows:
        row["cold"] = False
    rows[0]["cold"] = True
    frame = predictions.accuracy(records)
    assert frame["cold"].tolist() == [True] + [False] * (len(frame) - 1)
    checked, out = shipped
    assert checked["cold"].any()  # the shipped jacobian's vectorized full form at val 100: one call, no warm-up
    assert sum("; one cold call, no warm-up" in line for line in out.splitlines()) == checked["cold"].sum()


@pytest.mark.full
def test_a_quick_profile_is_named_with_the_largest_product_it_timed(shipped_results, shipped):
    quick = predictions.quick_profile_text("intel-r-xeon-r-processor-6c664674", "cuda:0")  # the H200 machine: --quick
    assert quick.startswith("Its profile is a quick calibration") and "On cuda:0 it timed matrix products up to 256x256" \
        in quick and "up to 4096x4096" in quick  # a full calibration times a GPU's larger products than a CPU's
    assert "a larger one at the catalogue's H200 rate for its size (at least that size's rate)" in quick
    cpu = predictions.quick_profile_text("intel-r-xeon-r-processor-6c664674", "cpu")
    assert "up to 256x256" in cpu and "a larger one at that size's rate" in cpu  # no catalogue entry for a CPU
    assert "up to 1024x1024" in predictions.quick_profile_text("intel-r-xeon-r-processor-6c664674", "cpu")
    assert predictions.quick_profile_text("intel-r-xeon-r-processor-6c664674", "cuda:1") == ""  # no such GPU there
    assert predictions.quick_profile_text("amd-epyc-34e468d3", "cpu") == ""  # a full calibration
    assert predictions.quick_profile_text("no-such-machine", "cpu") == ""
    _, out = shipped
    # the first H200 machine's quick profile: its CPU and GPU, each checked (the second H200 machine's is a full one)
    assert out.count("Its profile is a quick calibration") == 2
    assert "NVIDIA H200 cuda:0: checked against" in out


@pytest.mark.full
def test_the_catalogue_predicts_a_measured_gpu_it_lists_driven_by_that_machines_cpu(shipped_results, shipped):
    records = shipped_records()
    checked = predictions.catalogue_accuracy(records)
    assert set(checked["device_name"]) == {"NVIDIA H200"} and set(checked["device"]) == {"cuda:0"}
    assert set(checked["hardware"]) == {f"H200 driven by Intel(R) Xeon(R) Processor (intel-r-xeon-r-processor-{m})"
                                        for m in ("6c664674", "8e260d9d")}
    own, out = shipped
    both = checked.merge(own, on=["run_id", "device", "variant", "point"], suffixes=("", "_own"))
    assert len(both) == len(checked) and (both["measured_s"] == both["measured_s_own"]).all()
    assert (both["predicted_s"] != both["predicted_s_own"]).any()  # the catalogue's figures, not the calibrated ones
    summary = predictions.catalogue_summary(checked)
    assert summary["points"].sum() == len(checked)
    assert ((0 <= summary["share_within"]) & (summary["share_within"] <= summary["share_within_2x"])).all()
    for hardware, part in checked.groupby("hardware"):
        assert f"The catalogue's {hardware}, against that machine's measured GPU: {len(part)} points" in out
    # the speedups of the configurations one run measured on both devices: only 8e260d9d's runs timed its CPU beside
    # the GPU in one variant (6c664674's CPU ran numpy and torch cpu, its GPU other variants)
    paired = uncertainty.paired_speedups(own, checked)
    assert set(paired["machine_id"]) == {"intel-r-xeon-r-processor-8e260d9d"}
    counts = paired["bound"].value_counts()
    assert (f"intel-r-xeon-r-processor-8e260d9d: the GPU speedup over its CPU (the catalogue's GPU over its own "
            f"profile's CPU), predicted against measured, by the GPU point's regime: host-bound "
            f"{counts['host-bound']} points") in out


@pytest.mark.full
@pytest.mark.parametrize("name", ["NVIDIA Unlisted 9000", "Intel Core i9-12900KF"])  # unknown; a catalogue CPU's name
def test_a_gpu_the_catalogue_does_not_list_is_not_checked_against_it(shipped_results, name):
    records = copy.deepcopy([r for r in shipped_records() if r["fingerprint"]["gpus"]])
    assert not predictions.catalogue_accuracy(records).empty  # as measured; then under a name the catalogue lacks
    for record in records:
        for gpu in record["fingerprint"]["gpus"]:
            gpu["name"] = name
    assert predictions.catalogue_accuracy(records).empty


@pytest.mark.full
def test_a_cpu_run_after_a_gpu_run_of_the_same_preset_leaves_the_gpus_points_checked(shipped_results):
    """The H200 machine ran cnn's quick preset on its GPU alone, then on its CPU alone: each is the latest for its
    device."""
    machine = "intel-r-xeon-r-processor-8e260d9d"
    runs = [r for r in shipped_records() if r["machine_id"] == machine and r["experiment"] == "cnn"
            and r["preset"] == "quick"]
    assert sorted(tuple(r["devices"]) for r in runs) == [("cpu",), ("cuda:0",)]
    checked = predictions.accuracy(runs)
    assert set(checked["device"]) == {"cpu", "cuda:0"}
    assert checked.groupby("device")["run_id"].nunique().tolist() == [1, 1]
    newer = max(runs, key=lambda r: r["started"])
    again = copy.deepcopy(newer) | {"run_id": "again", "started": "2099-01-01T00:00:00+00:00"}
    assert set(predictions.accuracy([*runs, again])["run_id"]) == {"again", *(r["run_id"] for r in runs)} - {
        newer["run_id"]}  # a later run of the same device replaces it
    unnamed = [{k: v for k, v in r.items() if k != "devices"} for r in runs]  # a record need not list its devices
    assert predictions.accuracy(unnamed)[["run_id", "device"]].equals(checked[["run_id", "device"]])


@pytest.mark.full
def test_a_gpu_point_whose_census_saw_none_of_its_cuda_graph_is_left_out_and_counted_in_a_note(shipped_results, shipped):
    machine = "intel-r-xeon-r-processor-8e260d9d"  # its runs of 2026-11-27 replayed graphs before the census counted them
    records = copy.deepcopy([r for r in shipped_records() if r["machine_id"] == machine
                             and r["started"] < "2026-11-28"])  # its doctor's runs of 2026-11-29 counted them
    _, out = shipped
    on_gpu = predictions.accuracy(records).query("device == 'cuda:0'")
    assert not on_gpu.empty and (on_gpu["variant"] != "tuned").all()
    text = predictions.graph_blind_text(records, machine, "cuda:0")
    assert text.startswith("12 of its points are left out: each replayed a CUDA graph")
    assert predictions.graph_blind_text(records, machine, "cpu") == ""
    iris = next(r for r in records if r["machine_id"] == machine and r["experiment"] == "iris")
    tuned = next(row for row in iris["rows"] if row["variant"] == "tuned")
    tuned["census"]["graph_replays"] = 1  # as this version's census counts a replay
    assert "tuned" in set(predictions.accuracy(records).query("machine_id == @machine")["variant"])
    assert predictions.graph_blind_text(records, machine, "cuda:0").startswith("11 of its points")
    assert text in out
