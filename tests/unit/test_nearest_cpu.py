"""The CPU that stands in for this machine's while it has no calibrated profile (hardware.nearest_cpu): a calibrated
machine's with the same CPU model, the nearest in design and core count, else the catalogue's entry for that model,
else the catalogue's typical CPU; and resolve's "this" falling back to it, with a note saying so."""
import copy

import pytest

from core import devices, settings
from core.model import hardware, profiles

SHIPPED = profiles.all(settings.APP_ROOT / "results")


def fingerprint(model: str, logical: int = 2, physical: int = 2, signature: str = None, **more) -> dict:
    return {"machine_id": "ours-00000000", "cpu_model": model, "cpu_signature": signature,
            "cpu_logical_cores": logical, "cpu_physical_cores": physical, "torch_threads": physical, "gpus": []} | more


def calibrated(machine_id: str, fp: dict, taken: str = "2026-01-02T03:04:05+00:00", quick: bool = False) -> dict:
    """What nearest_cpu reads of a profile: its machine, fingerprint, when it was taken and whether it was quick."""
    return {"machine_id": machine_id, "fingerprint": dict(fp, machine_id=machine_id), "taken": taken, "quick": quick}


@pytest.mark.parametrize("machine", sorted(SHIPPED))
def test_a_machine_with_a_shipped_profile_s_cpu_gets_that_profile_s_machine_or_one_as_near(machine):
    theirs = SHIPPED[machine]["fingerprint"]
    ours = dict(theirs, machine_id="ours-00000000")
    name, reason = hardware.nearest_cpu(ours, SHIPPED)
    picked = SHIPPED[name]["fingerprint"]
    assert picked["cpu_model"] == theirs["cpu_model"]
    assert name == machine or hardware._nearness(ours, picked) <= hardware._nearness(ours, theirs)  # one as near
    assert reason.startswith(f"{theirs['cpu_model']} ({name}), a calibrated machine with the same CPU model")


def test_the_same_design_then_the_closest_core_count_then_a_full_and_latest_calibration_win():
    ours = fingerprint("Made CPU 9000", logical=8, physical=4, signature="vendor_id Made, cpu family 1, model 2")
    found = {"far-1": calibrated("far-1", fingerprint("Made CPU 9000", logical=32, physical=16)),
             "near-1": calibrated("near-1", fingerprint("Made CPU 9000", logical=8, physical=4)),
             "other-1": calibrated("other-1", fingerprint("Other CPU 1", logical=8, physical=4)),
             "redesign-1": calibrated("redesign-1", fingerprint("Made CPU 9000", logical=8, physical=4,
                                                                signature="vendor_id Made, cpu family 1, model 7"))}
    name, reason = hardware.nearest_cpu(ours, found)  # an unknown design before another design
    assert name == "near-1"
    assert reason == "Made CPU 9000 (near-1), a calibrated machine with the same CPU model and 4 cores, 8 threads"
    found["twin-1"] = calibrated("twin-1", fingerprint("Made CPU 9000", logical=32, physical=16,
                                                       signature=ours["cpu_signature"]))
    name, reason = hardware.nearest_cpu(ours, found)  # the same design first, whatever its cores
    assert name == "twin-1" and "the same CPU model, the same design, and 16 cores, 32 threads (this machine has " \
                                "4 cores, 8 threads)" in reason
    del found["twin-1"], found["near-1"]
    assert hardware.nearest_cpu(ours, found)[0] == "far-1"  # an unknown design before another, whatever its cores
    del found["far-1"]
    name, reason = hardware.nearest_cpu(ours, found)
    assert name == "redesign-1" and "the same CPU model (another design: cpu family 1, model 7) and 4 cores" in reason
    found["far-1"] = calibrated("far-1", fingerprint("Made CPU 9000", logical=32, physical=16))
    found |= {"quick-1": calibrated("quick-1", fingerprint("Made CPU 9000", logical=8, physical=4), quick=True),
              "old-1": calibrated("old-1", fingerprint("Made CPU 9000", logical=8, physical=4)),
              "new-1": calibrated("new-1", fingerprint("Made CPU 9000", logical=8, physical=4),
                                  taken="2026-06-01T00:00:00+00:00")}
    assert hardware.nearest_cpu(ours, found)[0] == "new-1"


def test_a_cpu_the_catalogue_names_gets_its_entry_and_an_unknown_one_the_typical_cpu():
    name, reason = hardware.nearest_cpu(fingerprint("12th Gen Intel(R) Core(TM) i9-12900KF", 24, 16), SHIPPED)
    assert (name, reason) == ("i9-12900kf", "Intel Core i9-12900KF, the catalogue's entry for the same CPU model")
    name, reason = hardware.nearest_cpu(fingerprint("Imaginary CPU 1"), SHIPPED)
    assert name == hardware.TYPICAL_CPU == hardware.resolve(name).host.name
    assert reason == ("a typical desktop CPU (assumed), the catalogue's typical CPU: no calibrated machine and no "
                      "catalogue entry has its CPU model (Imaginary CPU 1)")
    assert hardware.nearest_cpu(fingerprint(""), {"blank-1": calibrated("blank-1", fingerprint(""))})[0] == \
        hardware.TYPICAL_CPU  # a CPU without a model name matches none


def test_this_machine_without_a_profile_is_driven_by_the_nearest_cpu_and_told_once(results_dir):
    twin = copy.deepcopy(next(iter(SHIPPED.values())))  # a calibrated machine with this machine's CPU, cores and all
    twin |= {"machine_id": "twin-1", "fingerprint": dict(devices.fingerprint(), machine_id="twin-1")}
    profiles.save(twin)
    assert hardware.nearest_cpu()[0] == "twin-1"
    said = []
    with hardware.telling_stand_ins(said.append):
        assert hardware.resolve("t4").host.name == "twin-1" and hardware.resolve("this").name == "twin-1"
        assert hardware.resolve("h100-sxm").title == f"H100 SXM driven by {devices.fingerprint()['cpu_model']} (twin-1)"
    assert len(said) == 1  # once, however many targets it drives
    assert said[0].startswith(f"this machine has no calibrated profile, so the figures of its CPU are another CPU's: "
                              f"the nearest one, {devices.fingerprint()['cpu_model']} (twin-1), a calibrated machine "
                              f"with the same CPU model")
    assert said[0].endswith(f"needs its calibration: run `python -m core calibrate` ({profiles.CALIBRATION_TIME})")
    hardware.resolve("t4")
    assert len(said) == 1  # told only inside telling_stand_ins
    profiles.save(dict(twin, machine_id=devices.fingerprint()["machine_id"], fingerprint=devices.fingerprint()))
    with hardware.telling_stand_ins(said.append):  # calibrated: its own CPU, and nothing to tell
        assert hardware.resolve("t4").host.name == hardware.THIS
    assert len(said) == 1
