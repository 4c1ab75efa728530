"""How far a machine's own measurements repeat: the latest two runs of one configuration, point by point."""
import json

import pandas as pd
import pytest

from core import devices, settings
from core.predict import predictions
from core.commands.cli import main


def run(started: str, medians: dict, config=None, status="complete", machine="box-1", one_thread: dict = None) -> dict:
    """A run's rows: `medians` at torch's default threads (rows of older runs, which did not record the setting), and
    `one_thread`'s at one intra-op thread, as a quick run times a CPU point at both."""
    rows = [{"device": "cpu", "variant": "as written", "params": {"size": size}, "status": "ok", "median": median}
            for size, median in medians.items()]
    rows += [{"device": "cpu", "variant": "as written", "params": {"size": size}, "status": "ok", "median": median,
              "threads_setting": "1"} for size, median in (one_thread or {}).items()]
    return {"run_id": f"{machine} {started}", "machine_id": machine, "experiment": "matmul", "config": config or {"sizes": [8, 16, 32]},
            "started": started, "status": status, "rows": rows}


def test_the_latest_two_runs_of_a_configuration_are_compared_point_by_point():
    records = [run("2026-01-03", {8: 2.5, 16: 1.6}),           # newest: size 8 within 1.25x, size 16 1.6x apart
               run("2026-01-01", {8: 1.0, 16: 1.0, 32: 1.0}),  # oldest: not among the latest two for size 8
               run("2026-01-02", {8: 2.0}),
               run("2026-01-04", {8: 9.0}, status="failed"),   # an incomplete run is no measurement to repeat
               run("2026-01-05", {8: 9.0}, config={"sizes": [8]}),  # another configuration measured it otherwise
               run("2026-01-06", {8: 9.0}, machine="box-2")]   # another machine's
    frame = predictions.repeatability(records).set_index("point")
    assert sorted(frame.index) == ["size=16", "size=8"]  # size 32: measured once
    assert frame.loc["size=8", ["older_s", "newer_s"]].tolist() == [2.0, 2.5]
    assert frame.loc["size=8", "ratio"] == pytest.approx(1.25) and frame.loc["size=8", "within"]
    assert frame.loc["size=16", "ratio"] == pytest.approx(1.6) and not frame.loc["size=16", "within"]
    assert predictions.repeatability_text(frame) == ("two runs of the same configuration agree within 1.5x on 50% "
                                                     "of 2 points, within 1.25x on 50% (worst 1.60x apart)")
    assert predictions.repeatability_text(predictions.repeatability(records[:1])) == ""  # one run: nothing to compare


def test_a_point_timed_at_two_thread_settings_repeats_only_against_itself_at_its_setting():
    one_run = run("2026-01-01", {8: 2.0}, one_thread={8: 3.0})
    assert predictions.repeatability([one_run]).empty  # two settings of one run: two configurations, no repeat
    later = run("2026-01-02", {8: 2.2}, one_thread={8: 6.0})
    frame = predictions.repeatability([one_run, later]).set_index("threads_setting")
    assert frame.loc["default", ["older_s", "newer_s"]].tolist() == [2.0, 2.2]
    assert frame.loc["1", ["older_s", "newer_s"]].tolist() == [3.0, 6.0]
    accuracy = pd.DataFrame({"run_id": later["run_id"], "device": "cpu", "variant": "as written", "point": "size=8",
                             "threads_setting": ["default"], "ratio": [1.0]})
    found = predictions.with_repeats(accuracy, predictions.repeatability([one_run, later]))
    assert len(found) == 1 and found["measured_before_s"].tolist() == [2.0]  # its own setting's, once


def test_how_far_runs_repeat_is_given_at_each_limit_the_accuracy_gives():
    frame = pd.DataFrame({"ratio": [1.1, 1 / 1.4, 2.0]})
    assert predictions.repeatability_text(frame) == ("two runs of the same configuration agree within 1.5x on 67% of 3 "
                                                     "points, within 1.25x on 33% (worst 2.00x apart)")


def test_a_checked_point_carries_what_the_run_before_measured_where_one_did():
    records = [run("2026-01-01", {8: 2.0, 16: 1.0}), run("2026-01-02", {8: 3.0}), run("2026-01-03", {8: 9.0}, machine="box-2")]
    accuracy = pd.DataFrame({"run_id": [records[1]["run_id"], records[0]["run_id"], records[2]["run_id"]],
                             "device": "cpu", "variant": "as written", "point": ["size=8", "size=16", "size=8"],
                             "threads_setting": "default", "ratio": [1.1, 0.9, 1.0]})
    found = predictions.with_repeats(accuracy, predictions.repeatability(records))
    assert found[["measured_before_s", "runs_apart"]].iloc[0].tolist() == [2.0, 1.5]  # the 01-02 run, after the 01-01
    assert found[["measured_before_s", "runs_apart"]].iloc[1:].isna().all().all()  # measured once, on either machine
    assert found["ratio"].tolist() == [1.1, 0.9, 1.0] and len(found) == 3


@pytest.mark.full
def test_predict_accuracy_says_how_far_the_shipped_measurements_repeat(shipped_results, capsys, monkeypatch):
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")  # the shipped folder is read, never written (the error bands)
    assert main(["predict", "--accuracy"]) == 0
    out = capsys.readouterr().out
    assert "within 1.5x" in out and "by regime: host-bound " in out and "not saved: this instance is read-only" in out
    assert "how far its measurements repeat: two runs of the same configuration agree within 1.5x on " in out
    assert "; the run before measured " in out  # the shipped AMD EPYC runs measured their points twice
    # each machine's check opens with its id, this machine's marked (the two AMD VMs' CPUs read alike)
    here = devices.fingerprint()["machine_id"]
    headings = [line.split(": ")[0] for line in out.splitlines() if ": checked against " in line]
    shipped = {path.name for path in shipped_results.iterdir() if path.is_dir()}
    assert headings and {heading.removesuffix(" (this machine)") for heading in headings} <= shipped
    assert all((heading.endswith(" (this machine)")) == heading.startswith(here) for heading in headings)
    assert main(["predict", "--accuracy", "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert {"run_id", "measured_before_s", "runs_apart"} <= set(checked[0])
    by = {row["predicted_with"] for row in checked}
    assert by == {"its machine's profile", "the catalogue"}  # the H200 machines' GPUs, by the catalogue's H200 too
    assert all(row["hardware"].startswith("H200 driven by") for row in checked if row["predicted_with"] == "the catalogue")
