"""The doctor: its plan within a budget, its checks' pass, fail and could-not-run, and a second doctor doing only what
the first left."""
import copy
import json
import subprocess
from datetime import datetime

import pytest

from core import devices, experiments, settings
from core.commands.cli import main
from core.doctor import checks, plan as planning, session
from core.model import costmodel, hardware, profiles
from core.params import ConfigError
from core.store import files, results

GPU_MACHINE = "intel-r-xeon-r-processor-8e260d9d"  # a shipped machine whose calibration holds an H200
CUDA = [d for d in devices.available() if devices.kind(d) == "cuda"]
NEEDS_CUDA = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU: this check times and captures on one")


@pytest.mark.parametrize("text, seconds", [("3m", 180), ("90s", 90), ("1.5h", 5400), (" 10m ", 600)])
def test_a_budget_is_a_number_and_a_unit(text, seconds):
    assert planning.parse_budget(text) == seconds


@pytest.mark.parametrize("text, why", [("3", "not a duration"), ("soon", "not a duration"), ("10s", "out of range"),
                                       ("25h", "out of range")])
def test_a_bad_budget_names_the_field_and_what_is_allowed(text, why):
    with pytest.raises(ConfigError, match=f"--budget.*{why}.*allowed"):
        planning.parse_budget(text)


def test_the_cli_refuses_a_bad_budget_in_one_line(capsys):
    assert main(["doctor", "--budget", "tomorrow"]) == 2
    assert capsys.readouterr().err.startswith("error: --budget: 'tomorrow' is not a duration")


def test_a_budget_too_small_for_the_calibration_and_checks_is_said_up_front():
    slow = {"quick": True, "seconds": 200.0}  # this machine's last quick calibration took 200 s
    with pytest.raises(ConfigError, match=r"--budget: 3.0 min cannot hold even the calibration and the checks"):
        planning.make(180, ["cpu"], records=[], profile=slow)


def test_the_plan_calibrates_first_then_the_most_claims_per_second_within_the_budget():
    plan = planning.make(180, ["cpu"], records=[], profile={"quick": True, "seconds": 20.0})
    assert plan.steps[0].kind == "calibrate" and plan.steps[0].quick and plan.steps[0].seconds == 20.0
    assert plan.seconds <= 180
    runs = [s for s in plan.steps if s.kind == "run"]
    rates = [s.claims / s.seconds for s in runs]
    assert runs and all(s.preset in ("smoke", "quick") for s in runs)
    assert {s.experiment for s in runs} | {s.experiment for s in plan.left_out} == set(planning.experiments.registry())
    assert "left for another run" in plan.text() and "the checks" in plan.text()
    assert rates or plan.left_out


def test_a_long_budget_takes_the_full_calibration_and_quick_presets():
    plan = planning.make(6 * 3600, ["cpu"], records=[], profile=None)
    assert not plan.steps[0].quick and not plan.left_out
    assert {s.preset for s in plan.steps if s.kind == "run"} == {"quick"}


def test_a_lent_gpu_s_minutes_take_the_full_calibration_when_it_fits_a_quarter_of_the_budget(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", lambda device: 80 * 2**30)
    names = ["cpu", "cuda:0"]  # never calibrated here: CALIBRATION_GUESS_S a device
    full = planning.CALIBRATION_GUESS_S[False] * len(names)
    at_a_quarter = planning.make(full / planning.FULL_CALIBRATION_SHARE, names, records=[], profile=None)
    assert not at_a_quarter.steps[0].quick and at_a_quarter.steps[0].seconds == full
    shorter = planning.make(full / planning.FULL_CALIBRATION_SHARE - 60, names, records=[], profile=None)
    assert shorter.steps[0].quick and shorter.steps[0].title == "calibrate cpu, cuda:0 (quick)"
    took = {"quick": False, "seconds": 400.0}  # this machine's last full calibration was slow: its time decides
    assert planning.make(1200, names, records=[], profile=took).steps[0].quick


def test_a_gpu_machine_s_plan_measures_every_gpu_beside_its_cpu(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", lambda device: 80 * 2**30)
    names = ["cpu", "cuda:0", "cuda:1"]
    plan = planning.make(3600, names, records=[], profile=None)
    assert plan.steps[0].title == "calibrate cpu, cuda:0, cuda:1"
    assert all(s.title.endswith("on cpu, cuda:0, cuda:1") for s in plan.steps[1:])
    assert plan.fixed_s == planning.CHECKS_S["gpu"] + planning.ANSWER_S


def test_steps_done_before_are_not_planned_again():
    first = planning.make(3600, ["cpu"], records=[], profile=None)
    done = {first.steps[0].key, first.steps[1].key}
    again = planning.make(3600, ["cpu"], done, records=[], profile=None)
    done_first = [first.steps[0].kind, first.steps[1].experiment]  # the calibration, an experiment done at quick
    assert [s.experiment or s.kind for s in again.done] == done_first
    assert not set(done_first) & {s.experiment or s.kind for s in again.steps}


def test_a_step_is_estimated_from_how_long_it_took_here_last_time():
    here = devices.fingerprint()["machine_id"]
    took = {"machine_id": here, "experiment": "matmul", "preset": "smoke", "status": "complete", "devices": ["cpu"],
            "started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:00:42+00:00", "rows": [{}]}
    assert planning.run_step("matmul", "smoke", ["cpu"], [took]).seconds == 42
    lent = took | {"machine_id": "a-lent-h200", "devices": ["cpu", "cuda:0"], "ended": "2026-01-01T00:00:07+00:00"}
    assert planning.run_step("matmul", "smoke", ["cpu"], [took, lent]).seconds == 42  # here, on these devices, first
    assert planning.run_step("matmul", "smoke", ["cpu", "cuda:1"], [took, lent]).seconds == 7  # a CPU and a GPU
    guessed = planning.run_step("matmul", "smoke", ["cpu", "cuda:0", "cuda:1"], [took, lent]).seconds  # two GPUs: none
    assert guessed not in (7, 42)


# -- checks --------------------------------------------------------------------------------------------------------
def test_the_training_loss_is_the_same_from_the_same_seed():
    assert checks.training_loss("cpu", 5) == checks.training_loss("cpu", 5)
    assert checks.training_loss("cpu", 5) > checks.training_loss("cpu", 20)  # it trains


def test_same_losses_needs_a_second_device_and_compares_each_with_the_cpu(monkeypatch):
    assert checks.same_losses(["cpu"]).status == checks.COULD_NOT
    monkeypatch.setattr(devices, "kind", lambda d: "cuda" if d.startswith("cuda") else "cpu")
    losses = {"cpu": 0.5, "cuda:0": 0.5, "cuda:1": 0.5}
    monkeypatch.setattr(checks, "training_loss", lambda device, steps: losses[device])
    assert checks.same_losses(["cpu", "cuda:0", "cuda:1"]).status == checks.PASS
    losses["cuda:1"] = 0.51
    found = checks.same_losses(["cpu", "cuda:0", "cuda:1"])
    assert found.status == checks.FAIL and "on cuda:1" in found.detail


def test_the_cuda_only_checks_say_why_they_could_not_run_here():
    for check in (checks.graph_replay_moves_weights, checks.synchronised_clock):
        found = check(["cpu"])
        assert found.status == checks.COULD_NOT and "needs a CUDA GPU" in found.detail


@NEEDS_CUDA
def test_on_a_gpu_the_replay_moves_weights_and_the_sync_waits():
    assert checks.graph_replay_moves_weights(["cpu", *CUDA]).status == checks.PASS
    assert checks.synchronised_clock(["cpu", *CUDA]).status == checks.PASS
    assert checks.same_losses(["cpu", *CUDA]).status == checks.PASS


def _profiled(census: int, profiler: int, experiment: str = "cnn", started: str = "2026-11-29T10:00:00+00:00") -> dict:
    row = {"device": "cuda:0", "variant": "tuned", "params": {"batch_size": 16}, "status": "ok",
           "census": {"kernels": census, "profiler_kernels": profiler, "kernel_difference": profiler - census,
                      "top_by_count": [{"op": "aten.addmm", "count": 3}]}}
    return {"experiment": experiment, "started": started, "rows": [row], "run_id": f"{experiment}-{started}",
            "machine_id": "m", "fingerprint": {"cpu_model": "CPU", "cpu_logical_cores": 2, "gpus": []},
            "status": "complete", "devices": ["cuda:0"]}


def test_census_against_profiler_passes_within_ten_percent_and_names_the_point_beyond():
    assert checks.census_matches_profiler([]).status == checks.COULD_NOT
    assert checks.census_matches_profiler([_profiled(95, 100)]).status == checks.PASS
    found = checks.census_matches_profiler([_profiled(95, 100), _profiled(149, 37, "iris")])
    assert found.status == checks.FAIL and "1 of 2 points" in found.detail
    assert "census 149, profiler 37" in found.detail and "aten.addmm" in found.detail


def test_census_against_profiler_reads_each_experiments_newest_run():
    """An older run keeps the census its code's rules took (the H200's cnn of 2026-11-27: its GRU at 149 kernels a
    step, the rule since fitted to 37): a newer run of the experiment is the one checked."""
    older, newer = _profiled(149, 37, started="2026-11-27T07:14:17+00:00"), _profiled(36, 37)
    found = checks.census_matches_profiler([older, newer])
    assert found.status == checks.PASS and "1 older run(s) left out" in found.detail
    found = checks.census_matches_profiler([newer | {"started": "2026-11-01T00:00:00+00:00"}, older])
    assert found.status == checks.FAIL and "census 149, profiler 37" in found.detail


def _gpu_profile() -> dict:
    path = settings.APP_ROOT / "results" / GPU_MACHINE / "calibration" / "profile.json"
    return json.loads(path.read_text())


def test_the_catalogue_check_passes_a_measured_h200_and_fails_a_figure_past_its_specification():
    assert checks.catalogue_in_reason(None).status == checks.COULD_NOT
    measured = checks.catalogue_in_reason(_gpu_profile())
    assert measured.status == checks.PASS, measured.detail
    inflated = copy.deepcopy(_gpu_profile())
    inflated["gpus"]["cuda:0"]["memory_bandwidth"] *= 2
    found = checks.catalogue_in_reason(inflated)
    assert found.status == checks.FAIL and "memory_bandwidth" in found.detail


def test_the_catalogue_check_holds_a_gpu_to_its_makers_peak_not_to_a_figure_assumed_below_it():
    """The H200's calibration measured 4,160 GB/s, 1.18 of the catalogue's assumed 3,510 and 0.87 of the maker's
    4,800: a healthy GPU, which the check failed on the lent machine."""
    profile = copy.deepcopy(_gpu_profile())
    peak = hardware.catalogue_twin(profile, "cuda:0").peak["memory_bandwidth"]
    profile["gpus"]["cuda:0"]["memory_bandwidth"] = 0.95 * peak
    found = checks.catalogue_in_reason(profile)
    assert found.status == checks.PASS and "0.95 of its specification" in found.detail
    profile["gpus"]["cuda:0"]["memory_bandwidth"] = 1.1 * peak
    assert checks.catalogue_in_reason(profile).status == checks.FAIL


def test_a_check_that_raises_is_a_fail_saying_what(monkeypatch):
    def broken(names):
        raise RuntimeError("the driver went away")
    monkeypatch.setattr(checks, "same_losses", broken)
    found = checks.all_checks(["cpu"], [], None)
    assert found[0].status == checks.FAIL and "the driver went away" in found[0].detail
    assert len(found) == 5


# -- a doctor, cut and resumed ------------------------------------------------------------------------------------
def _plan(experiment: str, budget_s: float) -> planning.Plan:
    step = planning.Step(f"run-{experiment}-smoke", f"{experiment} (smoke) on cpu", 0.1, "run", experiment, "smoke")
    return planning.Plan(budget_s, ["cpu"], steps=[step], fixed_s=1.0)


@pytest.mark.full
def test_a_doctor_cut_by_its_budget_keeps_its_points_and_the_next_one_does_what_is_left(results_dir, tmp_path):
    bundle = tmp_path / "doctor.tar.gz"
    cut = session.run(_plan("iris", 1.0 + 3.0), bundle, say=lambda line: None)  # three seconds of a half-minute run
    assert cut["steps"]["run-iris-smoke"].startswith("cut by the budget")
    [record] = results.load_records()
    assert record["status"] == "cancelled" and "run-iris-smoke" not in session.done_steps()
    done = session.run(_plan("matmul", 600.0), bundle, say=lambda line: None)
    assert done["steps"]["run-matmul-smoke"].startswith("complete") and set(session.done_steps()) == {"run-matmul-smoke"}
    assert bundle.exists() and done["bundle"] == str(bundle) and len(done["checks"]) == 5
    again = planning.make(3600, ["cpu"], set(session.done_steps()), profile={"quick": True, "seconds": 5.0})
    assert {s.experiment for s in again.done} == {"matmul"} and "iris" in {s.experiment for s in again.steps}


def test_a_calibration_an_earlier_doctor_took_before_the_machine_booted_is_not_done(results_dir):
    before, since = "2026-01-01T00:00:00+00:00", results.now()
    files.write_atomic(session.state_path(), {"steps": {
        "calibrate": {"profile": "p", "finished": before}, "calibrate-quick": {"profile": "p", "finished": since},
        "run-iris-smoke": {"run_id": "r", "finished": before}}})
    assert set(session.done_steps()) == {"calibrate-quick", "run-iris-smoke"}  # a run's points keep across boots


def test_an_interrupted_doctor_says_so_and_writes_the_bundle_of_what_it_has(results_dir, tmp_path, monkeypatch):
    def interrupted(step, names, say, info):
        raise KeyboardInterrupt
    monkeypatch.setattr(session, "_step", interrupted)
    found = session.run(_plan("matmul", 600.0), tmp_path / "b.tar.gz", say=lambda line: None)
    assert found["cut"] == "interrupted" and found["steps"]["run-matmul-smoke"].startswith("interrupted")
    assert not found["checks"]


def test_the_app_starts_the_doctor_with_its_bundle_in_the_machine_folder(results_dir, monkeypatch):
    from core.commands import jobs
    spawned = []

    class Process:
        pid = 4242

        def wait(self):
            return 0

    def spawn(command, run_id, lock_fd, env):
        spawned.append((command, env))
        return Process()
    monkeypatch.setattr(jobs, "_spawn", spawn)
    info = jobs.start_doctor(180.0)
    [(command, _)] = spawned
    assert command[1:6] == ["-m", "core", "doctor", "--budget", "180s"] and command[-1] == str(jobs.doctor_bundle())
    assert jobs.doctor_bundle().parent.name == devices.fingerprint()["machine_id"]
    assert info["experiment"] == jobs.DOCTOR and info["pid"] == 4242


def test_the_cluster_script_is_valid_bash_and_runs_the_doctor_into_bundles():
    script = settings.APP_ROOT / "docs" / "doctor-slurm.sh"
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    text = script.read_text()
    assert "#SBATCH --array" not in text and "sbatch --array" in text  # the array's size is the caller's
    assert "python -m core doctor --budget" in text and "python -m core import bundles/*.tar.gz" in text


def _shipped_profile(machine: str) -> dict:
    return json.loads((settings.APP_ROOT / "results" / machine / "calibration" / "profile.json").read_text())


def test_a_full_profile_of_every_figure_is_kept_and_never_replaced_by_a_quick_one():
    full = _shipped_profile("amd-epyc-28e20464")  # a full calibration measuring every figure calibrate measured then,
    full["cpu"] |= dict.fromkeys(costmodel.LSTM_RATES.values(), {"65536": 4e9})  # and the fused LSTM's since,
    full["cpu"][costmodel.WIDE_GEMM] = {"16x1024x2048": 2e-3, "256x1024x2048": 1.3e-2}  # and the wide GEMMs'
    full["booted"] = devices.booted()  # taken since this machine booted
    plan = planning.make(180, ["cpu"], records=[], profile=full)
    assert [s.kind for s in plan.done] == ["calibrate"] and "calibrate" not in {s.kind for s in plan.steps}
    before = full | {"booted": "2026-01-01T00:00:00+00:00"}  # another boot: a lent GPU's earlier lease
    assert planning.make(180, ["cpu"], records=[], profile=before).steps[0].kind == "calibrate"
    assert planning.make(6 * 3600, ["cpu"], records=[], profile=full | {"quick": True}).steps[0].kind == "calibrate"
    older = _shipped_profile("amd-epyc-34e468d3")  # taken before calibrate measured nine of its figures
    assert planning.make(6 * 3600, ["cpu"], records=[], profile=older).steps[0].kind == "calibrate"


def test_a_step_is_estimated_per_point_it_finished_at_the_points_planned_now():
    here = devices.fingerprint()["machine_id"]
    exp = experiments.get("tabnet")
    planned = len(exp.plan(exp.config("quick"), ["cpu"]))
    cut = {"machine_id": here, "experiment": "tabnet", "preset": "quick", "status": "cancelled", "devices": ["cpu"],
           "started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:00:30+00:00", "planned_points": planned,
           "rows": [{}, {}]}
    assert planning.run_step("tabnet", "quick", ["cpu"], [cut]).seconds == 15 * planned  # 15 s a point
    # another machine's complete run of an earlier plan, each point once where the plan now times it twice
    earlier = cut | {"machine_id": "a-2-core-vm", "status": "complete", "planned_points": planned // 2,
                     "rows": [{}] * (planned // 2)}
    assert planning.run_step("tabnet", "quick", ["cpu"], [earlier]).seconds == pytest.approx(60)


def test_the_quick_steps_come_after_every_smoke_step():
    plan = planning.make(3600, ["cpu"], records=[], profile=None)
    presets = [s.preset for s in plan.steps if s.kind == "run"]
    assert "quick" in presets and presets == sorted(presets, key=lambda p: p == "quick")


# -- this machine's pace -------------------------------------------------------------------------------------------

FAST, SLOW = "amd-epyc-28e20464", "amd-epyc-34e468d3"  # two shipped 2-core VMs: 34e468d3 ran iris 2x as long


def _shipped_run(machine: str, experiment: str) -> dict:
    """That machine's newest shipped quick run of the experiment on its CPU (its points carry their censuses)."""
    paths = (settings.APP_ROOT / "results" / machine).glob(f"{experiment}-*.json")  # its runs alone: quick to read
    found = [r for r in map(json.loads, (p.read_text() for p in paths)) if r["preset"] == "quick"
             and r["devices"] == ["cpu"]]
    return max(found, key=lambda r: r["started"])


def _as_this_machine(machine: str) -> None:
    """A shipped machine's profile saved as this machine's, taken since it booted."""
    profile = _shipped_profile(machine)
    files.write_atomic(profiles.path(), profile | {"machine_id": devices.fingerprint()["machine_id"],
                                                    "booted": devices.booted()})


def test_another_machine_s_run_estimates_a_step_at_this_machine_s_pace(results_dir):
    files.write_atomic(profiles.path(FAST), _shipped_profile(FAST))
    took = _shipped_run(FAST, "iris")
    seconds = (datetime.fromisoformat(took["ended"]) - datetime.fromisoformat(took["started"])).total_seconds()
    seconds *= len(experiments.get("iris").plan(experiments.get("iris").config("quick"), ["cpu"])) / len(took["rows"])
    assert planning.pace(took, ["cpu"]) == 1.0  # this machine not calibrated yet: its pace is unknown
    assert planning.run_step("iris", "quick", ["cpu"], [took]).seconds == pytest.approx(seconds)
    _as_this_machine(FAST)  # the same figures here: the same pace
    assert planning.pace(took, ["cpu"]) == pytest.approx(1.0)
    _as_this_machine(SLOW)  # the model prices iris's points on the slower VM's figures
    slower = planning.pace(took, ["cpu"])
    assert slower > 1.5
    assert planning.run_step("iris", "quick", ["cpu"], [took]).seconds == pytest.approx(seconds * slower)
    here = took | {"machine_id": devices.fingerprint()["machine_id"]}
    assert planning.pace(here, ["cpu"]) == 1.0  # this machine's own run is its pace


def test_once_calibrated_the_doctor_plans_the_rest_again_at_this_machine_s_pace(results_dir, tmp_path, monkeypatch):
    files.write_atomic(profiles.path(FAST), _shipped_profile(FAST))
    for name in ("iris", "matmul"):
        took = _shipped_run(FAST, name)
        files.write_atomic(results_dir / FAST / f"{took['run_id']}.json", took)
    first = planning.make(20 * 60, ["cpu"], records=results.load_records(), profile=None)
    assert first.steps[0].kind == "calibrate"
    started = []

    def step(step, names, say, info):
        if step.kind == "calibrate":
            _as_this_machine(SLOW)
            session._remember(step.key, {"profile": str(profiles.path())})
            return "calibrated"
        started.append(step)
        raise KeyboardInterrupt  # stop before the checks: the plan is what is tested
    monkeypatch.setattr(session, "_step", step)
    made, make = [], planning.make
    monkeypatch.setattr(planning, "make", lambda *args, **kwargs: made.append(make(*args, **kwargs)) or made[-1])
    said = []
    session.run(first, tmp_path / "b.tar.gz", say=said.append)
    [again] = made
    assert any(line.startswith("   planned again at this machine's pace") for line in said)
    assert started == again.steps[:1] and not {"calibrate", "calibrate-quick"} & {s.key for s in again.steps}
    # the faster VM's runs take longer at the slower VM's figures; a step no run estimates keeps its guess
    estimates = {s.key: s.seconds for s in first.steps + first.left_out}
    for key in ("run-iris-quick", "run-matmul-quick"):
        replanned = next(s for s in again.steps + again.left_out if s.key == key)
        assert replanned.seconds > 1.1 * estimates[key]
    guessed = next(s for s in again.steps if s.key == "run-cnn-smoke")
    assert guessed.seconds == pytest.approx(estimates["run-cnn-smoke"])
