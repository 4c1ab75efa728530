"""A calibration checks itself (core.calibration.sanity): a figure beyond its hardware's specification or far above
its siblings is measured again and, where it stays so, flagged and left unread by the cost model; a figure held at a
floor is stored as one. Fake probes throughout: no figure here is timed."""
import pytest

from core import devices
from core.calibration import calibrate, efforts, sanity
from core.model import costmodel, hardware, profiles
from tests.unit.test_hardware import made_profile

I9 = "12th Gen Intel(R) Core(TM) i9-12900KF"  # a CPU the catalogue lists (i9-12900kf), its peak in core/model/hardware.json
RELU, TANH, STALLED = 1.5e-6, 1.2e-6, 615e-6
FAMILY = {"ReLU": RELU, "Tanh": TANH, "Sigmoid": 1.2e-6, "GELU": 1.7e-6, "Mish": 1.5e-6}


@pytest.fixture
def calibrating(monkeypatch):
    """calibrate.take over fake CPU probes (each a list of the values it returns, one per call), on a CPU named
    `cpu_model`: returns (take, calls) where calls counts each probe's measurements."""
    calls = {}
    monkeypatch.setattr(calibrate.versions, "code_version", lambda: {"commit": None, "dirty": False})

    def take(probes: dict, cpu_model: str = "Made CPU 9000") -> dict:
        fingerprint = devices.fingerprint() | {"cpu_model": cpu_model}
        monkeypatch.setattr(calibrate.devices, "fingerprint", lambda: fingerprint)

        def fake(title, readings):
            calls[title] = 0

            def measure(device, effort):
                calls[title] += 1
                return readings[min(calls[title], len(readings)) - 1]()
            return calibrate.Probe(title, profiles.HOST, measure)
        monkeypatch.setattr(calibrate, "PROBES", [fake(title, readings) for title, readings in probes.items()])
        return calibrate.take(["cpu"], quick=True, progress=False)
    return take, calls


def _reading(**figures):
    return lambda: figures


def test_a_figure_above_its_hardware_s_specification_is_measured_again_flagged_and_not_read(calibrating):
    take, calls = calibrating
    peak = hardware.catalogue().devices["i9-12900kf"].peak["memory_bandwidth"]
    profile = take({"memory bandwidth": [_reading(memory_bandwidth=1.2 * peak), _reading(memory_bandwidth=1.1 * peak)],
                    "op overhead": [_reading(op_overhead_no_grad=2e-6)]}, cpu_model=I9)
    assert calls == {"memory bandwidth": 2, "op overhead": 1}  # the offending probe again, nothing else
    catalogue = hardware.catalogue().devices["i9-12900kf"].value("memory_bandwidth")
    (flag,) = profile["flags"]
    assert flag == {"device": "cpu", "figure": "memory_bandwidth", "value": 1.2 * peak, "again": 1.1 * peak,
                    "limit": peak, "rule": "specification", "why": flag["why"], "instead": catalogue}
    assert "specification" in flag["why"] and profile["cpu"]["memory_bandwidth"] == 1.2 * peak  # kept as measured
    flagged = made_profile("m1") | {"flags": profile["flags"]}
    flagged["cpu"]["memory_bandwidth"] = 1.2 * peak
    profiles.validate(flagged)
    assert hardware.from_profile(flagged, "cpu").value("memory_bandwidth") == catalogue  # the model reads this
    assert "flagged, not used" in profiles.check_notes(flagged)[0]


def test_a_figure_back_within_its_specification_when_measured_again_is_kept_unflagged(calibrating):
    take, calls = calibrating
    peak = hardware.catalogue().devices["i9-12900kf"].peak["memory_bandwidth"]
    profile = take({"memory bandwidth": [_reading(memory_bandwidth=1.2 * peak), _reading(memory_bandwidth=0.5 * peak)]},
                   cpu_model=I9)
    assert calls == {"memory bandwidth": 2} and profile["flags"] == []
    assert profile["cpu"]["memory_bandwidth"] == 0.5 * peak  # the stall's figure replaced


@pytest.mark.parametrize("again, flagged", [(600e-6, True), (1.3e-6, False)], ids=["persists", "passes"])
def test_a_module_call_far_above_its_siblings_is_measured_again_alone_and_flagged_when_it_stays(
        calibrating, monkeypatch, again, flagged):
    take, calls = calibrating
    retaken = []
    monkeypatch.setattr(calibrate, "module_cost", lambda name, device, effort, bare: retaken.append(name) or again)
    profile = take({"python": [_reading(module_call=1e-6, module_call_seconds=FAMILY | {"Tanh": STALLED})]})
    assert retaken == ["Tanh"] and calls == {"python": 1}  # that layer's call alone, not its probe
    if not flagged:
        assert profile["flags"] == [] and profile["cpu"]["module_call_seconds"]["Tanh"] == again
        return
    (flag,) = profile["flags"]
    assert (flag["figure"], flag["key"], flag["value"], flag["again"], flag["rule"]) == (
        "module_call_seconds", "Tanh", STALLED, again, "siblings")
    assert flag["limit"] == pytest.approx(sanity.SIBLING_RATIO * 1.5e-6) and "instead" not in flag
    made = made_profile("m1") | {"flags": profile["flags"]}
    made["cpu"]["module_call_seconds"] = profile["cpu"]["module_call_seconds"]
    profiles.validate(made)
    host = hardware.from_profile(made, "cpu")
    assert set(host.value("module_call_seconds")) == set(FAMILY) - {"Tanh"}  # as if never measured:
    tanh_call = {"module_calls": 1, "module_classes": {"Tanh": 1}}  # a bare module's call instead
    assert costmodel.module_seconds(tanh_call, host.value("module_call"), host.value("module_call_seconds")) == \
        made["cpu"]["module_call"]
    assert "Tanh" in made["cpu"]["module_call_seconds"]  # the profile keeps what it measured


def test_a_figure_held_at_a_floor_is_stored_as_a_floor_not_a_measurement(calibrating, monkeypatch):
    take, _ = calibrating
    # a NumPy field's passes faster than a tensor field's (noise): the difference is clipped at 0
    monkeypatch.setattr(calibrate, "_loader_passes",
                        lambda batch_size, samples, device, repeats, numpy=False: ([0.9 if numpy else 1.0], []))
    # a layer's call timed below the operations it issues: held at a bare module's call
    monkeypatch.setattr(calibrate, "_seconds", lambda fn, device, effort, sync=None: 1e-6)
    effort = efforts.QUICK
    profile = take({"loader": [lambda: {"loader_numpy_field_seconds": calibrate.numpy_field_seconds("cpu", effort),
                                        "loader_batch1_per_sample": 3e-5}],
                    "modules": [lambda: {"module_call": 2e-6, "module_call_seconds": {
                        "ReLU": calibrate.module_cost("ReLU", "cpu", effort, 2e-6)}}]})
    samples = min(effort.loader_rows, calibrate.LOADER_PASS_BATCHES * calibrate.NUMPY_LOADER_BATCH)
    assert profile["floors"] == [
        {"device": "cpu", "figure": "loader_numpy_field_seconds", "floor": 0.0,
         "raw": pytest.approx(-0.1 / (2 * samples)), "why": "at least 0"},
        {"device": "cpu", "figure": "module_call_seconds", "key": "ReLU", "floor": 2e-6, "raw": 0.0,
         "why": "at least a bare module's call (module_call)"}]
    assert profiles.held(profile, "cpu", "module_call_seconds", "ReLU")["floor"] == 2e-6
    assert profiles.held(profile, "cpu", "loader_batch1_per_sample") is None  # measured, not held
    made = made_profile("m1") | {"floors": profile["floors"]}
    profiles.validate(made)
    meaning = {(row["field"], row["size"]): row["what it is"] for row in profiles.rows(made)}
    assert "a floor, not a measurement" in meaning[("module_call_seconds", "ReLU")]
    assert "a floor" not in meaning[("module_call_seconds", "Linear")]


def test_a_floor_is_listed_only_where_the_stored_median_is_the_floor():
    log = {}
    held = [sanity.held(log, "cpu", "op_call_seconds", raw, 0.0, key="sort", why="at least 0") for raw in
            (-1e-7, -2e-7, 3e-7)]  # three passes: two clipped at 0, so their median is the floor
    assert held == [0.0, 0.0, 3e-7] and sanity.floors({"cpu": {"op_call_seconds": {"sort": 0.0}}}, log) == [
        {"device": "cpu", "figure": "op_call_seconds", "key": "sort", "floor": 0.0, "raw": -1e-7, "why": "at least 0"}]
    assert sanity.floors({"cpu": {"op_call_seconds": {"sort": 3e-7}}}, log) == []  # a measured median: no floor


def test_a_flag_that_neither_stands_in_for_its_figure_nor_names_a_key_is_refused():
    made = made_profile("m1") | {"flags": [{"device": "cpu", "figure": "memory_bandwidth", "value": 1e12,
                                            "again": 1e12, "limit": 8e10, "rule": "specification", "why": "above"}]}
    with pytest.raises(profiles.ProfileError, match="flags/0"):
        profiles.validate(made)


def test_a_module_call_above_its_sane_range_after_every_retry_is_flagged_and_left_out_so_the_profile_saves(
        calibrating, monkeypatch, results_dir):
    """A layer's call stalled past its field's range (3.3 ms, a busy 2-core VM's): the probe is measured again, the
    layer alone once more; it stays, so it is flagged and left out, and the rest of the calibration is kept."""
    take, calls = calibrating
    monkeypatch.setattr(calibrate, "RETRY_PAUSE_S", 0.0)
    monkeypatch.setattr(calibrate, "module_cost", lambda name, device, effort, bare: 3.4e-3)
    profile = take({"python": [_reading(module_call=1e-6, module_call_seconds=FAMILY | {"Conv1d": 3.3e-3})]})
    assert calls == {"python": 1 + calibrate.PROBE_RETRIES}
    (flag,) = profile["flags"]
    assert (flag["figure"], flag["key"], flag["value"], flag["again"], flag["rule"], flag["limit"]) == (
        "module_call_seconds", "Conv1d", 3.3e-3, 3.4e-3, "range", profiles.FIELD["module_call_seconds"].high)
    assert profile["cpu"]["module_call_seconds"] == FAMILY  # the siblings kept, the stalled one left out
    saved = made_profile(profile["machine_id"]) | {"flags": profile["flags"]}
    saved["cpu"]["module_call_seconds"] = profile["cpu"]["module_call_seconds"]
    profiles.save(saved)
    assert "Conv1d" in profiles.check_notes(profiles.load(profile["machine_id"]))[0]
