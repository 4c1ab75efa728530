"""Predictions in the app: the sidebar's GPU picker, an experiment page's predicted section and the
Predictions page, on a smoke matmul run (with its stand-in censuses) and a quick calibration of this machine."""
import copy
import json
import shutil

import pandas as pd
import pytest

from core import devices, experiments, settings
from core.model import hardware, profiles
from core.predict import predictions, writeups
from core.store import results
from tests.helpers import render, smoke_record

SECTION = "What a GPU would do (predicted)"
HEADINGS = ["How close the model comes where we measured", "The write-ups' figures, predicted", "Will a GPU help?"]


@pytest.fixture(scope="module")
def made(tmp_path_factory, quick_profile):
    """One smoke matmul run (sizes 8 and 32: the stand-in points included) and the session's quick calibration of
    this machine, taken once and copied into each test's results folder."""
    folder = tmp_path_factory.mktemp("made")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(settings.RESULTS_ENV, str(folder))
        smoke_record("matmul", sizes=(8, 32))
        profiles.save(copy.deepcopy(quick_profile))
    return folder


def copy_in(made, results_dir, profile=True, standin=True):
    shutil.copytree(made, results_dir, ignore=None if profile else shutil.ignore_patterns("calibration"))
    if not standin:
        for path in results_dir.glob("*/*.json"):
            record = json.loads(path.read_text())
            path.write_text(json.dumps(record | {"standin": []}))


def chart_specs(at) -> list[str]:
    return [chart.proto.spec for chart in at.get("vega_lite_chart")]


@pytest.mark.full
def test_the_experiment_page_draws_the_predicted_gpu_beside_the_measured_cpu(made, results_dir):
    copy_in(made, results_dir)
    at = render("pages/matmul.py")
    assert not at.exception
    assert SECTION in [s.value for s in at.subheader]
    rtx = hardware.writeup_target(experiments.get("matmul").source)[0]
    label = f"predicted on {rtx.gpu.title} driven by this machine's CPU, not measured"
    drawn = [spec for spec in chart_specs(at) if label in spec]
    assert drawn and "measured on this machine's CPU" in drawn[0] and '"strokeDash"' in drawn[0]
    caption = " ".join(c.value for c in at.caption)
    assert "not measured" in caption and "The model on this machine: checked against" in caption
    assert "against the GPUs that measured" not in caption  # no GPU point in this folder
    table = next(d.value for d in at.dataframe if "predicted GPU s/unit" in d.value.columns)
    resident = table[table["variant"] == "torch resident"]
    assert set(resident["point"]) == {"size=8", "size=32"}
    assert (resident["predicted GPU s/unit"] > 0).all() and (resident["measured CPU s/unit"] > 0).all()
    assert set(resident["CPU variant"]) <= {"numpy", "torch cpu"}  # the GPU-only variant against the fastest CPU one
    copies = table[table["variant"] == "h2d pinned"]  # a copy: no CPU variant times one, so nothing to set against
    assert (copies["predicted GPU s/unit"] > 0).all() and copies["measured CPU s/unit"].isna().all()
    assert (resident["predicted speedup"] == resident["measured CPU s/unit"] / resident["predicted GPU s/unit"]).all()
    assert resident["predicted parts"].str.contains("%").all()


@pytest.mark.full
def test_without_stand_in_censuses_the_section_says_to_rerun(made, results_dir):
    copy_in(made, results_dir, standin=False)
    at = render("pages/matmul.py")
    assert not at.exception and SECTION in [s.value for s in at.subheader]
    assert any("No stand-in census" in i.value and "python -m core run matmul" in i.value for i in at.info)


@pytest.mark.full
@pytest.mark.parametrize("read_only", [False, True])
def test_the_predictions_page_says_how_to_predict_your_own_model(made, results_dir, monkeypatch, read_only):
    if read_only:
        monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    copy_in(made, results_dir, standin=False)  # shown even before any run has stand-in censuses
    at = render("pages/predictions.py")
    assert not at.exception
    [own] = [c.value for c in at.caption if c.value.startswith("Your own model:")]
    assert "python -m core predict --model path/to/file.py:build_fn --input 512x84 [--train] [--check]" in own
    assert ("install Crossover on a machine of your own" in own) == read_only


@pytest.mark.full
def test_without_a_profile_the_section_and_the_sidebar_say_how_to_calibrate(made, results_dir):
    copy_in(made, results_dir, profile=False)
    at = render("pages/matmul.py")
    assert not at.exception
    assert any("python -m core calibrate" in i.value for i in at.info)
    at = render("streamlit_app.py")
    assert not at.exception
    assert any("python -m core calibrate" in c.value for c in at.sidebar.caption)


@pytest.mark.full
def test_the_sidebar_picks_the_write_up_gpu_on_its_page_and_keeps_a_readers_pick(made, results_dir):
    copy_in(made, results_dir)
    at = render("streamlit_app.py")
    picker = at.sidebar.selectbox(key="predict-on-widget")
    assert picker.label == "Predict on" and picker.value == "a100-40gb-pcie"  # the catalogue's first by title
    assert any("driven by each run's own CPU where its machine is calibrated, else by this machine's CPU" in c.value
               for c in at.sidebar.caption)
    at.switch_page("pages/cnn.py").run()
    cnn_gpu = hardware.writeup_target(experiments.get("cnn").source)[0].gpu.name
    assert at.sidebar.selectbox(key="predict-on-widget").value == cnn_gpu
    at.sidebar.selectbox(key="predict-on-widget").set_value("t4").run()
    at.switch_page("pages/matmul.py").run()
    assert not at.exception
    assert at.sidebar.selectbox(key="predict-on-widget").value == "t4"
    assert any("predicted on T4 driven by this machine's CPU, not measured" in spec for spec in chart_specs(at))


@pytest.mark.full
def test_the_predictions_page_checks_the_model_and_answers_will_a_gpu_help(made, results_dir):
    copy_in(made, results_dir)
    at = render("pages/predictions.py")
    assert not at.exception
    assert [h.value for h in at.header] == HEADINGS
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["points"] == "2"  # torch cpu at sizes 8 and 32 (numpy is untraced: no census)
    assert "median predicted / measured" in metrics and "within 1.5x" in metrics
    bounds = next(d.value for d in at.dataframe if "bound" in d.value.columns and "points" in d.value.columns)
    assert bounds["points"].sum() == 2 and set(bounds["bound"]) <= {name for _, name in predictions.BOUNDS}
    assert any("(this machine)" in m.value for m in at.markdown)
    assert any("python -m core predict --writeups" in i.value for i in at.info)
    specs = chart_specs(at)
    assert any("band within 1.5x" in spec for spec in specs)
    gpus = next(d.value for d in at.dataframe if "median_speedup" in d.value.columns)
    assert {"T4", "RTX 3080 Ti", "H100 SXM"} <= set(gpus["gpu"]) and (gpus["median_speedup"] > 0).all()
    crossing = next(d.value for d in at.dataframe if "size compared" in d.value.columns)
    assert (crossing["size compared"] == "8 to 32").all() and {"T4", "H100 SXM"} <= set(crossing.columns)
    assert crossing["T4"].isin(["8", "32", "never"]).all()
    assert gpus["host_bound"].between(0, 100).all()  # the share of each GPU's points that are host-bound, in percent
    # the chart draws a few GPUs, each its own colour: the sidebar's, the least and the most faster; a reader picks
    drawn = at.multiselect(key="help-gpus-matmul").value
    assert 1 <= len(drawn) <= 3 and all(any(f"{g} (predicted, not measured)" in s for s in specs) for g in drawn)
    assert not any(f"{g} (predicted, not measured)" in s for s in specs for g in set(gpus["gpu"]) - set(drawn))
    at.multiselect(key="help-gpus-matmul").set_value(["T4"]).run()
    assert any("T4 (predicted, not measured)" in spec for spec in chart_specs(at))
    at.multiselect(key="help-gpus-matmul").set_value([]).run()
    assert not at.exception and any("Pick a GPU to draw" in i.value for i in at.info)
    assert "The catalogue, against a GPU that measured" not in [s.value for s in at.subheader]  # no GPU measured here


@pytest.mark.full
def test_the_predictions_page_says_how_far_a_machines_measurements_repeat(made, results_dir):
    copy_in(made, results_dir)
    at = render("pages/predictions.py")
    assert not any("How far its own measurements repeat" in c.value for c in at.caption)  # one run: nothing to repeat
    [path] = results_dir.glob("*/matmul-*.json")
    again = json.loads(path.read_text())
    measured = [row for row in again["rows"] if row.get("median")]
    for row in measured:  # a second run: every point 1.2x slower, but the first 2x
        row["median"] *= 2.0 if row is measured[0] else 1.2
    again |= {"run_id": "matmul-20990101T000000-abcdef", "started": "2099-01-01T00:00:00+00:00"}
    (path.parent / f"{again['run_id']}.json").write_text(json.dumps(again))
    at = render("pages/predictions.py")
    assert not at.exception
    n = len(measured)
    assert any(f"How far its own measurements repeat: two runs of the same configuration agree within 1.5x on "
               f"{(n - 1) / n:.0%} of {n} points, within 1.25x on {(n - 1) / n:.0%} (worst 2.00x apart)" in c.value for c in at.caption)
    checked = next(d.value for d in at.dataframe if "runs_apart" in d.value.columns)
    assert len(checked) == 2 and set(checked["runs_apart"].round(6)) <= {1.2, 2.0}  # the torch points: both measured twice
    assert (checked["measured_s"] / checked["measured_before_s"]).round(6).tolist() == checked["runs_apart"].round(6).tolist()


@pytest.mark.full
def test_the_predictions_page_names_what_an_older_profile_lacks(made, results_dir):
    copy_in(made, results_dir)
    at = render("pages/predictions.py")
    assert not any("Its profile was calibrated before" in c.value for c in at.caption)  # this version's calibration
    [path] = results_dir.glob("*/calibration/profile.json")
    older = json.loads(path.read_text())
    for field in profiles.GEMM_FIGURES:  # as a profile taken before calibrate timed the GEMM grid
        del older["cpu"][field]
    path.write_text(json.dumps(older))
    at = render("pages/predictions.py")
    assert not at.exception
    assert any("Its profile was calibrated before calibrate measured 2 of its figures (gemm_seconds, linear_seconds)"
               in c.value for c in at.caption)


@pytest.mark.full
def test_the_predictions_page_shows_a_saved_write_up_validation(made, results_dir):
    copy_in(made, results_dir)
    entry = next(e for e in writeups.figures() if e["device"] == "GPU" and e["unit"] == "s")
    row = dict.fromkeys(writeups.COLUMNS) | {
        "id": entry["id"], "experiment": "cnn", "quantity": "10 epochs", "device": "GPU", "target": "RTX 3080 Ti",
        "assumed": True, "assumption": "no GPU named", "published": 10.0, "predicted": 12.0, "unit": "s",
        "ratio": 1.2, "within_2x": True, "how": "x 10 epochs", "method": "a wall clock around CUDA start-up"}
    writeups.save(pd.DataFrame([row]))
    at = render("pages/predictions.py")
    assert not at.exception
    table = next(d.value for d in at.dataframe if "within_2x" in d.value.columns)
    assert list(table["id"]) == [entry["id"]] and table["method"].iloc[0] == "a wall clock around CUDA start-up"
    assert {m.label: m.value for m in at.metric}["GPU figures predicted"] == "1"


@pytest.mark.full
def test_another_machines_write_up_validation_stands_in_and_is_named(made, results_dir):
    copy_in(made, results_dir)
    entry = next(e for e in writeups.figures() if e["device"] == "GPU" and e["unit"] == "s")
    row = dict.fromkeys(writeups.COLUMNS) | {"id": entry["id"], "device": "GPU", "published": 10.0, "predicted": 12.0,
                                             "ratio": 1.2, "within_2x": True}
    writeups.save(pd.DataFrame([row]))
    saved = json.loads(writeups.path().read_text()) | {"machine_id": "other-machine-0000"}
    writeups.path().unlink()
    elsewhere = results_dir / "other-machine-0000" / writeups.SUBFOLDER / writeups.FILE_NAME
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text(json.dumps(saved))
    at = render("pages/predictions.py")
    assert not at.exception
    table = next(d.value for d in at.dataframe if "within_2x" in d.value.columns)
    assert list(table["id"]) == [entry["id"]]
    assert any("computed on other-machine-0000" in c.value for c in at.caption)
    assert not any("Not computed" in i.value for i in at.info)


@pytest.mark.full
def test_a_broken_write_up_validation_is_named_not_a_traceback(made, results_dir):
    copy_in(made, results_dir)
    writeups.path().parent.mkdir(parents=True)
    writeups.path().write_text("{not json")
    at = render("pages/predictions.py")
    assert not at.exception
    assert any("writeups.json" in w.value for w in at.warning)
    assert any("Not computed on this machine yet" in i.value for i in at.info)


H200_HOST = "intel-r-xeon-r-processor-6c664674"  # the shipped H200 machine: a quick matmul run and a quick calibration


@pytest.mark.full
def test_a_gpu_machines_points_are_checked_apart_from_its_cpus_with_its_quick_profile_named(results_dir):
    shutil.copytree(settings.APP_ROOT / "results" / H200_HOST, results_dir / H200_HOST)
    at = render("pages/predictions.py")
    assert not at.exception
    lines = [m.value for m in at.markdown]
    assert any(line.startswith("cpu: Intel(R) Xeon(R)") for line in lines)
    assert any(line.startswith("cuda:0: NVIDIA H200") for line in lines)
    points = [int(m.value) for m in at.metric if m.label == "points"]
    checked = predictions.accuracy(results.load_records())
    assert points == [(checked["device"] == "cpu").sum(), (checked["device"] == "cuda:0").sum()] and min(points) > 0
    assert any("Its profile is a quick calibration" in c.value and "up to 256x256" in c.value for c in at.caption)


@pytest.mark.full
def test_the_catalogue_entry_of_a_measured_gpu_is_checked_against_it_on_the_page(results_dir):
    shutil.copytree(settings.APP_ROOT / "results" / H200_HOST, results_dir / H200_HOST)
    at = render("pages/predictions.py")
    assert not at.exception
    assert "The catalogue, against a GPU that measured" in [s.value for s in at.subheader]
    table = next(d.value for d in at.dataframe if "share_within_2x" in d.value.columns)
    expected = predictions.catalogue_summary(predictions.catalogue_accuracy(results.load_records()))
    assert table["hardware"].tolist() == expected["hardware"].tolist() and table["hardware"].str.startswith("H200").all()
    assert table["points"].tolist() == expected["points"].tolist()
    assert table["machine_id"].tolist() == [H200_HOST]  # the id two machines' alike titles are told apart by


@pytest.mark.full
def test_a_predicted_gpu_quotes_the_models_check_against_the_gpus_that_measured(made, results_dir):
    copy_in(made, results_dir)
    gpu_host = "intel-r-xeon-r-processor-8e260d9d"  # the shipped H200 machine with iris and cnn runs on its GPU
    shutil.copytree(settings.APP_ROOT / "results" / gpu_host, results_dir / gpu_host)
    at = render("pages/matmul.py")
    assert not at.exception
    caption = " ".join(c.value for c in at.caption)
    checked = predictions.accuracy(results.load_records())
    on_gpu = predictions.bound_text(checked[checked["device"] == "cuda:0"])
    assert on_gpu.startswith("host-bound")
    assert f"against the GPUs that measured (NVIDIA H200), by what bounds a point: {on_gpu}" in caption


@pytest.mark.full
def test_the_predicted_section_prefers_a_run_that_took_every_stand_in_census(shipped_results):
    """On a machine with no run of its own, the H200 machine's cnn CPU run is the latest, but it stopped in its
    stand-in censuses (12 of 22): an earlier run that took them all serves first."""
    from ui import predicted
    records = [r for r in results.load_records(shipped_results) if r["experiment"] == "cnn"]
    cut = next(r for r in records if r["machine_id"] == "intel-r-xeon-r-processor-8e260d9d" and r["standin"])
    assert not results.has_every_standin(cut) and len(cut["standin"]) == 12  # a record from before standins_planned
    ordered = predicted.standin_runs(records, "cnn")
    here = [r for r in ordered if r["machine_id"] == devices.fingerprint()["machine_id"]]
    elsewhere = ordered[len(here):]
    assert elsewhere[-1] is cut and all(results.has_every_standin(r) for r in elsewhere[:-1])
    assert [r["started"] for r in elsewhere[:-1]] == sorted((r["started"] for r in elsewhere[:-1]), reverse=True)


@pytest.mark.full
def test_a_run_of_another_calibrated_machine_sets_its_measured_cpu_against_gpus_driven_by_that_cpu(shipped_results):
    from ui import predicted
    records = results.load_records(shipped_results)
    elsewhere = next(r for r in records if r["machine_id"] == "intel-r-xeon-r-processor-8e260d9d" and r["standin"])
    assert predictions.driver(elsewhere) == "intel-r-xeon-r-processor-8e260d9d"
    assert "intel-r-xeon-r-processor-8e260d9d" in predicted.driver_title(elsewhere)
    uncalibrated = dict(elsewhere, machine_id="no-profile-here")
    assert predictions.driver(uncalibrated) == "this"


@pytest.mark.full
def test_the_pages_predicted_rows_drive_each_runs_gpu_with_that_runs_own_cpu(shipped_results):
    """An experiment page's predicted GPU rows, which its verdicts set against each run's measured CPU: each run's
    GPU driven by its own machine's CPU. Driven by this machine's instead, iris's host-bound GPU came out faster
    than a slower machine's CPU and slower than a faster one's, and the verdict took their median."""
    here = devices.fingerprint()["machine_id"]
    records = [r for r in results.load_records(shipped_results) if r["machine_id"] != here and r.get("standin")]
    rows = predictions.driven_rows(records, "iris", "rtx-3080-ti")
    machines = {r["run_id"]: r["machine_id"] for r in records if r["experiment"] == "iris"}
    assert len(set(machines.values())) >= 2 and set(rows["run_id"]) == set(machines)
    for run_id, hosts in rows.groupby("run_id")["hardware"].unique().items():
        assert len(hosts) == 1 and hosts[0].startswith("RTX 3080 Ti driven by") and machines[run_id] in hosts[0]


def test_a_rows_label_names_only_the_swept_parameters_it_has():
    from ui import predicted
    frame = pd.DataFrame({"call": ["model(x)", None], "hook": [True, None], "size": [2.0, 3.0]})
    assert predicted.line_text(frame, ["call", "hook", "size"]).tolist() == ["call=model(x) hook=True size=2", "size=3"]
