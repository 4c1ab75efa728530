"""Which runs a page shows by default, and how runs are named (core.store.runs)."""
import pandas as pd

from core.store import results, runs

MACHINES = {"m1": "Intel(R) Xeon(R) Processor (2 threads) / no GPU", "m2": "AMD EPYC 7B13 (8 threads) / NVIDIA T4"}


def frame(*entries: tuple) -> pd.DataFrame:
    """Rows of runs: (run_id, machine_id, preset, status, started hour), two rows per run."""
    rows = [{"run_id": run_id, "experiment": "matmul", "machine_id": m, "machine": MACHINES[m], "preset": preset,
             "status": status, "started": f"2026-01-02T{hour:02d}:00:00+00:00", "points": 2, "device": "cpu"}
            for run_id, m, preset, status, hour in entries]
    return pd.DataFrame(rows + rows)


RUNS = frame(("old-quick", "m1", "quick", "complete", 1), ("quick", "m1", "quick", "complete", 5),
             ("cancelled", "m1", "quick", "cancelled", 9), ("smoke", "m1", "smoke", "complete", 3),
             ("interrupted", "m1", "paper", "partial", 7), ("gpu-quick", "m2", "quick", "complete", 2),
             ("gpu-paper", "m2", "paper", "complete", 4))


def test_the_default_is_the_latest_complete_run_of_each_preset_on_each_machine():
    # newer cancelled and interrupted runs never replace a complete one; a smoke run is a preset of its own
    assert runs.default_runs(RUNS) == ["gpu-quick", "gpu-paper", "smoke", "quick"]  # AMD before Intel, then presets
    assert runs.default_runs(frame(("only", "m1", "quick", "cancelled", 1))) == []
    assert runs.default_runs(pd.DataFrame()) == []


def test_a_machine_whose_cpu_and_gpu_ran_apart_shows_the_latest_run_of_each_device():
    both = frame(("gpu-alone", "m2", "quick", "complete", 1), ("cpu-alone", "m2", "quick", "complete", 2))
    both.loc[both["run_id"] == "gpu-alone", "device"] = "cuda:0"
    assert sorted(runs.default_runs(both)) == ["cpu-alone", "gpu-alone"]
    later = frame(("both-again", "m2", "quick", "complete", 3))
    later.loc[later.index[0], "device"] = "cuda:0"  # one row on each device
    assert runs.default_runs(pd.concat([both, later], ignore_index=True)) == ["both-again"]


def test_a_runs_frame_chooses_per_device_reading_the_devices_from_the_rows_where_a_record_lists_none():
    def record(run_id, hour, devices, listed=True):
        rows = [{"device": d, "variant": "v", "params": {}, "status": "ok"} for d in devices]
        return {"run_id": run_id, "experiment": "matmul", "preset": "quick", "status": "complete", "machine_id": "m2",
                "fingerprint": {"cpu_model": "AMD EPYC 7B13", "cpu_logical_cores": 8},
                "started": f"2026-01-02T{hour:02d}:00:00+00:00", "rows": rows} | ({"devices": devices} if listed else {})

    records = [record("gpu-alone", 1, ["cuda:0"], listed=False), record("cpu-alone", 2, ["cpu"])]
    frame = results.runs_frame(records)
    assert frame["devices"].tolist() == [["cuda:0"], ["cpu"]]
    assert sorted(runs.default_runs(frame)) == ["cpu-alone", "gpu-alone"]
    latest = results.latest_complete(frame, ["machine_id", "preset"])
    assert sorted(zip(latest["device"], latest["run_id"])) == [("cpu", "cpu-alone"), ("cuda:0", "gpu-alone")]
    assert results.latest_complete(frame.iloc[:0], ["machine_id"]).columns.tolist() == ["machine_id", "device",
                                                                                        "run_id"]


def test_select_keeps_the_rows_of_the_runs_picked():
    assert set(runs.select(RUNS, ["smoke", "cancelled"])["run_id"]) == {"smoke", "cancelled"}
    assert len(runs.select(RUNS, ["smoke"])) == 2


def test_runs_are_named_by_preset_start_machine_status_and_points():
    by_id = runs.runs_of(RUNS).set_index("run_id", drop=False)
    start = runs.started_text("2026-01-02T09:00:00+00:00")
    assert runs.label(by_id.loc["cancelled"]) == f"quick · {start} · Intel Xeon · cancelled · 2 points"
    assert runs.short_label(by_id.loc["cancelled"]) == f"quick · {start} · Intel Xeon · cancelled"
    assert runs.short_label(by_id.loc["gpu-quick"]).endswith("AMD EPYC 7B13 / NVIDIA T4")  # complete: no status
    assert runs.label(by_id.loc["interrupted"]).endswith("interrupted · 2 points")  # a record left running
    assert list(runs.labels(RUNS)) == list(runs.runs_of(RUNS)["run_id"])  # newest first
    assert runs.started_text(None) == "start not recorded" and runs.machine_text(None) == "machine not recorded"


def test_a_vm_s_cpu_named_without_a_model_number_keeps_its_design_in_the_short_name():
    assert runs.machine_text("AMD EPYC (cpu family 26, model 2, stepping 1; 2 threads) / no GPU") == \
        "AMD EPYC family 26 model 2"
    assert runs.machine_text("Neoverse (CPU implementer 0x41, CPU part 0xd0c, CPU variant 0x3; 4 threads) / NVIDIA T4") \
        == "Neoverse part 0xd0c / NVIDIA T4"
    assert runs.machine_text("AMD EPYC (2 threads) / no GPU") == "AMD EPYC"  # a record from before the signature


def test_the_caption_says_which_runs_are_shown_machine_by_machine():
    default = runs.shown_text(RUNS, runs.default_runs(RUNS))
    assert default.startswith("Showing the latest complete run of each preset on each machine, one series per run. "
                              f"On {MACHINES['m2']}: quick of ")
    assert f"On {MACHINES['m1']}: smoke of {runs.started_text('2026-01-02T03:00:00+00:00')} (2 points), quick of" in default
    picked = runs.shown_text(RUNS, ["cancelled"])
    assert picked == (f"Showing the run picked. On {MACHINES['m1']}: quick of "
                      f"{runs.started_text('2026-01-02T09:00:00+00:00')} (cancelled, 2 points).")
    assert runs.shown_text(RUNS, []) == "No run is shown: pick at least one."
