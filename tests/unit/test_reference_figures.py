"""Catalogue figures derived from the reference machines' calibrations (core.model.reference_figures): each rule by hand,
the shipped catalogue's figures equal to what the shipped profiles hold, and clear errors when a rule cannot apply."""
import json
import math

import pytest

from core import settings
from core.model import costmodel, hardware, profiles, reference_figures
from tests.unit.test_hardware import made_profile

US = 1e-6


def reference(results_dir, machine_id: str, taken: str, without=(), **cpu) -> dict:
    profile = made_profile(machine_id) | {"taken": taken}
    profile["cpu"] |= cpu
    for field in without:  # a figure calibrate did not measure yet when this reference was calibrated
        del profile["cpu"][field]
    profiles.validate(profile)
    target = profiles.path(machine_id, results_dir)
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(profile))
    return profile


def catalogue(figures: dict, references=("ref-old", "ref-new")) -> dict:
    return {"references": list(references), "hardware": [{"name": "made-cpu", "kind": "cpu", "figures": figures}]}


def derived(spec: str, note: str = "assumed", **extra) -> dict:
    return {"derive": spec, "assumption": True, "note": note} | extra


@pytest.fixture
def two_references(tmp_path):
    # old: bare op 2 us, module call 1 us (ratio 0.5); new: bare 1 us, module call 2 us (ratio 2): geometric mean 1
    reference(tmp_path, "ref-old", "2026-01-01T00:00:00+00:00", ("loader_per_sample",), op_overhead_no_grad=2 * US,
              module_call=1 * US, op_element_seconds={"tanh": 1e-9})
    reference(tmp_path, "ref-new", "2026-02-01T00:00:00+00:00", op_overhead_no_grad=1 * US, module_call=2 * US,
              op_element_seconds={"tanh": 3e-9}, loader_per_sample={"1": 20 * US, "64": 4 * US, "1024": 8 * US})
    return tmp_path


def test_each_rule_by_hand(two_references):
    figures = {"op_overhead_no_grad": {"value": 5 * US, "assumption": True, "note": "typed"},
               # a = 62 us a batch, c = 2 us a sample: L1 = 64 us, L64 = 62 / 64 + 2 = 2.96875 us
               "loader_batch1_per_sample": {"value": 64 * US, "assumption": True, "note": "typed"},
               "loader_batched_per_sample": {"value": 2.96875 * US, "assumption": True, "note": "typed"},
               "module_call": derived("bare_op_ratio", "per call"),
               "op_element_seconds": derived("reference"),
               "loader_per_sample": derived("loader_growth")}
    document = catalogue(figures)
    reference_figures.resolve(document, two_references)
    found = document["hardware"][0]["figures"]
    assert found["module_call"]["value"] == pytest.approx(5 * US)  # 5 us x sqrt(0.5 x 2)
    assert found["module_call"]["note"].startswith("per call: this CPU's bare op (5 us, op_overhead_no_grad) times 1,")
    assert found["op_element_seconds"]["value"] == {"tanh": 3e-9}  # the newest reference's
    assert "ref-new" in found["op_element_seconds"]["note"] and "2026-02-01 00:00 UTC" in found["op_element_seconds"]["note"]
    # up to 64 this CPU's own line (a / b + c); above, its 64 figure x the newest reference's growth (8 / 4)
    assert found["loader_per_sample"]["value"] == pytest.approx({"1": 64 * US, "64": 2.96875 * US, "1024": 5.9375 * US})
    assert "1,024: 2.00x" in found["loader_per_sample"]["note"]
    for field in ("module_call", "op_element_seconds", "loader_per_sample"):
        assert found[field]["source"] == reference_figures.SOURCE and found[field]["assumption"] is True


def test_a_keyed_figure_is_scaled_key_by_key_over_the_references_that_measured_the_key(tmp_path):
    reference(tmp_path, "ref-old", "2026-01-01T00:00:00+00:00", op_overhead_no_grad=2 * US,
              module_call_seconds={"Linear": 4 * US})  # ratio 2
    reference(tmp_path, "ref-new", "2026-02-01T00:00:00+00:00", op_overhead_no_grad=1 * US,
              module_call_seconds={"Linear": 8 * US, "ReLU": 3 * US})  # ratios 8 and 3
    document = catalogue({"op_overhead_no_grad": {"value": 5 * US, "assumption": True, "note": "typed"},
                          "module_call_seconds": derived("bare_op_ratio")})
    reference_figures.resolve(document, tmp_path)
    # Linear: 5 us x sqrt(2 x 8) = 20 us; ReLU, measured by the newer reference only: 5 us x 3 = 15 us
    assert document["hardware"][0]["figures"]["module_call_seconds"]["value"] == pytest.approx(
        {"Linear": 20 * US, "ReLU": 15 * US})


def test_a_figure_no_reference_has_measured_is_its_stand_in_s_and_says_so(tmp_path):
    # both references calibrated before op_overhead_nested_no_grad was measured: its stand-in, the bare op, has the
    # ratio 1 to itself on each, so this CPU's figure is its own bare op
    for machine_id, taken in (("ref-old", "2026-01-01T00:00:00+00:00"), ("ref-new", "2026-02-01T00:00:00+00:00")):
        reference(tmp_path, machine_id, taken, ("op_overhead_nested_no_grad",))
    figures = {"op_overhead_no_grad": {"value": 5 * US, "assumption": True, "note": "typed"},
               "op_overhead_nested_no_grad": derived("bare_op_ratio", "per op C++ issues")}
    document = catalogue(figures)
    reference_figures.resolve(document, tmp_path)
    found = document["hardware"][0]["figures"]["op_overhead_nested_no_grad"]
    assert found["value"] == pytest.approx(5 * US) and found["assumption"]
    assert found["note"].startswith("per op C++ issues: this CPU's bare op (5 us, op_overhead_no_grad) times 1,")
    assert found["note"].endswith("no reference machine has measured op_overhead_nested_no_grad yet, so an operation "
                                  "C++ issues outside autograd costs what a bare one Python issues does")


def test_a_reference_named_for_a_figure_is_the_one_copied(two_references):
    document = catalogue({"op_element_seconds": derived("reference", machine="ref-old")})
    reference_figures.resolve(document, two_references)
    assert document["hardware"][0]["figures"]["op_element_seconds"]["value"] == {"tanh": 1e-9}


# The conv probes' FLOPs per call (2 x batch x out channels x output positions x in channels x kernel)
CONV1D_FLOPS, CONV2D_FLOPS = 2 * 8 * 32 * 256 * 16 * 5, 2 * 8 * 32 * 16 * 16 * 16 * 3 * 3


def test_a_cpus_convolution_rate_is_its_matmul_rate_at_the_references_ratio(tmp_path):
    flat = {"64": 1e11, "1024": 1e11}  # a matmul rate the same at every size: ratios read off by hand
    reference(tmp_path, "ref-old", "2026-01-01T00:00:00+00:00", matmul_flops=flat,  # ratios 0.25 and 0.5
              conv1d_flops={"8x16x256": 2.5e10}, conv2d_flops={"8x16x16x16": 5e10})
    reference(tmp_path, "ref-new", "2026-02-01T00:00:00+00:00", matmul_flops={k: 2 * v for k, v in flat.items()},
              conv1d_flops={"8x16x256": 1e11}, conv2d_flops={"8x16x16x16": 2e11})  # ratios 0.5 and 1
    document = catalogue({"matmul_flops": {"value": {"1000": 4e11, "1e12": 4e11}, "assumption": True, "note": "typed"},
                          "conv_flops": derived("matmul_ratio", "no conv measured")})
    reference_figures.resolve(document, tmp_path)
    found = document["hardware"][0]["figures"]["conv_flops"]
    # 4e11 x the geometric mean of the two references' ratios: sqrt(0.25 x 0.5) and sqrt(0.5 x 1)
    # and beyond the largest probe, at this CPU's own matmul size, at the largest probe's ratio
    assert found["value"] == pytest.approx({str(CONV1D_FLOPS): 4e11 * math.sqrt(0.125), str(CONV2D_FLOPS): 4e11 * math.sqrt(0.5),
                                            "1000000000000": 4e11 * math.sqrt(0.5)})
    assert found["note"].startswith("no conv measured: at each FLOPs per call a reference machine's convolution probes")
    assert "(ref-old), calibrated 2026-01-01 00:00 UTC: 0.25 at 1e+07, 0.5 at 1.9e+07" in found["note"]
    assert hardware._value("conv_flops", found["value"])[0] == (CONV1D_FLOPS, pytest.approx(4e11 * math.sqrt(0.125)))


OWN_LOADER = {"loader_batch1_per_sample": {"value": 64 * US, "assumption": True, "note": "typed"},
              "loader_batched_per_sample": {"value": 2.96875 * US, "assumption": True, "note": "typed"}}


@pytest.mark.parametrize("figures, references, message", [
    ({"module_call": derived("bare_op_ratio")}, ("ref-old", "gone-machine"),
     "references: the profile of 'gone-machine' ("),
    ({"module_call": derived("bare_op_ratio")}, ("ref-old",),
     "hardware['made-cpu'].figures.module_call: the rule needs this CPU's own op_overhead_no_grad"),
    ({"op_call_seconds": derived("reference", machine="elsewhere")}, ("ref-old", "ref-new"),
     "hardware['made-cpu'].figures.op_call_seconds.machine: 'elsewhere' is not one of the references"),
    ({"matmul_flops": derived("reference")}, ("ref-old",),
     "hardware['made-cpu'].figures.matmul_flops.derive: the rule 'reference' derives a CPU's loader_batch1"),
    ({"conv_flops": derived("matmul_ratio")}, ("ref-old",),
     "hardware['made-cpu'].figures.conv_flops: the rule needs this CPU's own matmul_flops"),
    ({"loader_per_sample": derived("loader_growth"), **OWN_LOADER}, ("ref-old",),
     "hardware['made-cpu'].figures.loader_per_sample: no reference machine's profile has loader_per_sample; "
     "references: ref-old"),
])
def test_a_rule_that_cannot_apply_names_the_figure_and_why(two_references, figures, references, message):
    with pytest.raises(reference_figures.DerivationError) as refused:
        reference_figures.resolve(catalogue(figures, references), two_references)
    assert str(refused.value).startswith(message)


def test_a_reference_figure_of_zero_cannot_make_a_ratio_and_says_so(tmp_path):
    reference(tmp_path, "ref-old", "2026-01-01T00:00:00+00:00", optimizer_step=0.0)
    document = catalogue({"op_overhead_no_grad": {"value": 5 * US, "assumption": True, "note": "typed"},
                          "optimizer_step": derived("bare_op_ratio")}, ("ref-old",))
    with pytest.raises(reference_figures.DerivationError, match=r"figures.optimizer_step: .*\(ref-old\)'s "
                                                                r"optimizer_step is 0; a ratio to its bare op needs"):
        reference_figures.resolve(document, tmp_path)


def test_a_rule_on_a_gpu_is_refused(two_references):
    document = {"references": ["ref-new"], "hardware": [
        {"name": "made-gpu", "kind": "gpu", "figures": {"module_call": derived("bare_op_ratio")}}]}
    with pytest.raises(reference_figures.DerivationError, match="derives a CPU's .*, not a gpu's module_call"):
        reference_figures.resolve(document, two_references)


def test_a_catalogue_whose_reference_is_missing_is_refused_by_load(tmp_path, monkeypatch):
    document = json.loads(hardware.CATALOGUE_PATH.read_text(encoding="utf-8"))
    document["references"].append("missing-machine")
    path = tmp_path / "hardware.json"
    path.write_text(json.dumps(document))
    with pytest.raises(hardware.HardwareError, match=r"references: the profile of 'missing-machine' \("):
        hardware.load(path)


def conv_over_matmul(profile: dict, flops: float) -> float:
    return profiles.conv_rates(profile["cpu"])[flops] / costmodel.loglog(sorted(profiles.matmul_rates(profile["cpu"]).items()), flops)


def test_the_shipped_catalogue_derives_its_figures_from_the_shipped_reference_profiles():
    document = json.loads(hardware.CATALOGUE_PATH.read_text(encoding="utf-8"))
    shipped = {mid: json.loads(profiles.path(mid, settings.APP_ROOT / "results").read_text()) for mid in document["references"]}
    newest = max(shipped.values(), key=lambda p: p["taken"])
    loaded = hardware.load()
    for entry in document["hardware"]:
        device = loaded.devices[entry["name"]]
        for field, spec in entry["figures"].items():
            if "derive" not in spec:
                continue
            assert field in device.assumptions and device.figures[field].source == reference_figures.SOURCE
            if spec["derive"] == "reference":
                source = shipped[spec["machine"]] if "machine" in spec else newest
                assert device.value(field) == pytest.approx(source["cpu"][field]), (entry["name"], field)
            if spec["derive"] == "loader_growth":  # above 64, this CPU's batch-64 figure x the reference's growth
                grown = newest["cpu"][field]
                for size, seconds in device.value(field).items():
                    if int(size) > 64:
                        assert seconds == pytest.approx(device.value("loader_batched_per_sample") * grown[size]
                                                        / grown["64"]), (entry["name"], size)
            if spec["derive"] == "matmul_ratio":  # at sizes every reference measured: this CPU's matmul rate x
                every = set.intersection(*(set(profiles.conv_rates(p["cpu"])) for p in shipped.values()))  # their ratio
                assert every, "the references share no convolution probe size"
                for flops, rate in device.figures[field].value:
                    if flops in every:
                        ratios = [conv_over_matmul(p, flops) for p in shipped.values()]
                        assert rate == pytest.approx(device.value("matmul_flops", flops=flops)
                                                     * math.prod(ratios) ** (1 / len(ratios))), (entry["name"], flops)
            if spec["derive"] == "bare_op_ratio":  # the references' own ratios' geometric mean x this CPU's bare op
                value = device.value(field)
                # a figure no reference has measured yet: its stand-in's, as a profile lacking it has it
                measured = field if any(field in p["cpu"] for p in shipped.values()) else profiles.STAND_INS[field][0]
                for key, figure in (value.items() if isinstance(value, dict) else [(None, value)]):
                    needs = reference_figures.NEEDS.get(measured, (measured,))
                    ratios = [(p["cpu"][measured] if key is None else p["cpu"][measured][key])
                              / p["cpu"]["op_overhead_no_grad"] for p in shipped.values()
                              if all(f in p["cpu"] for f in needs) and (key is None or key in p["cpu"][measured])]
                    ratio = figure / device.value("op_overhead_no_grad")
                    assert math.isclose(ratio, math.prod(ratios) ** (1 / len(ratios))), (entry["name"], field, key)
