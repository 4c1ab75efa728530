"""Machines side by side: matching points paired, differences named field by field, unlike runs warned of."""
import copy

import pytest

from core import settings
from core.report import compare
from core.store import results
from tests.helpers import shipped_runs

SHIPPED = settings.APP_ROOT / "results"
MACHINE = SHIPPED / shipped_runs("matmul", "iris")[0]  # a machine with both (not every one has: the H200 ran matmul alone)


def shipped(experiment: str) -> dict:
    return results.read_record(next(MACHINE.glob(f"{experiment}-*.json")))


def twin(record: dict, machine_id: str = "laptop-0a1b2c3d", slower: float = 2.0, **changes) -> dict:
    """The record as another machine measured it: another CPU, torch, code and GPU, every time `slower`."""
    other = copy.deepcopy(record)
    other.update(run_id=f"{record['run_id']}-twin", machine_id=machine_id, **changes)
    other["fingerprint"].update(machine_id=machine_id, cpu_model="AMD Ryzen 7 7840U", torch="2.5.1",
                                cpu_signature="vendor_id AuthenticAMD, cpu family 25, model 116, stepping 1",
                                gpus=[{"device": "cuda:0", "name": "NVIDIA RTX 4090", "memory_gib": 24,
                                       "compute_capability": "8.9", "cuda_driver": "550.54"}])
    other["code_version"] = {"commit": "abcdef0123456789", "dirty": False}
    for row in other["rows"]:
        if row.get("median"):
            row["median"] *= slower
    return other


@pytest.fixture
def two_machines():
    matmul = shipped("matmul")
    records = [matmul, twin(matmul)]
    return records, compare.machine_sides(records, [matmul["machine_id"], "laptop-0a1b2c3d"])


def test_matching_points_are_paired_and_their_ratio_is_the_others_time_over_the_baselines(two_machines):
    records, sides = two_machines
    frame = compare.rows(sides, "matmul")
    ratios = compare.ratios(frame, sides[0].label)
    measured_points = sum(1 for row in records[0]["rows"] if row.get("status", "ok") == "ok" and row.get("median"))
    assert len(ratios) == measured_points
    assert ratios["ratio"].round(9).eq(2.0).all()
    assert set(ratios["side"]) == {sides[1].label}


def test_a_point_only_one_side_measured_is_not_paired(two_machines):
    records, _ = two_machines
    records[1]["rows"] = [r for r in records[1]["rows"] if r["variant"] == "numpy"]
    sides = compare.machine_sides(records, [records[0]["machine_id"], records[1]["machine_id"]])
    ratios = compare.ratios(compare.rows(sides, "matmul"), sides[0].label)
    assert len(ratios) and ratios["point"].str.startswith("numpy · CPU · ").all()


def test_differences_name_exactly_the_fields_that_differ(two_machines):
    _, sides = two_machines
    table, same = compare.differences(sides)
    assert table["what"].tolist() == ["CPU", "GPUs", "GPU driver", "torch", "code version"]
    row = table.set_index("what").loc["GPUs"]
    assert row[sides[0].label] == "none" and row[sides[1].label].startswith("NVIDIA RTX 4090")
    assert "python" in same and "OS" in same


def test_unlike_presets_and_configurations_are_warned_of():
    matmul = shipped("matmul")
    paper = twin(matmul, preset="paper")
    sides = compare.machine_sides([matmul, paper], [matmul["machine_id"], paper["machine_id"]])
    [said] = compare.warnings(sides)
    assert said.startswith("matmul: the runs compared used different presets") and ": paper" in said
    other_config = twin(matmul, config=dict(matmul["config"], repeats=matmul["config"].get("repeats", 1) + 7))
    sides = compare.machine_sides([matmul, other_config], [matmul["machine_id"], other_config["machine_id"]])
    [said] = compare.warnings(sides)
    assert "configured differently (repeats differ)" in said
    alike = twin(matmul)
    assert compare.warnings(compare.machine_sides([matmul, alike], [matmul["machine_id"], alike["machine_id"]])) == []


def test_two_runs_of_one_machine_compare_as_sides():
    matmul = shipped("matmul")
    again = dict(copy.deepcopy(matmul), run_id="matmul-again")
    sides = compare.run_sides([matmul, again], [matmul["run_id"], "matmul-again"])
    assert len(sides) == 2 and sides[0].label != sides[1].label
    table, _ = compare.differences(sides)
    assert table.empty
    assert compare.chart(compare.rows(sides, "matmul"), "t").to_dict()["layer"]  # one chart, not a panel per run
