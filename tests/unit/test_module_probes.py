"""The layers calibrate times beyond their operations: each probe's module call and its direct call issue the same
operations (so that their difference is the module's Python alone), and the module is of the class it is named for
(the name a census counts it under)."""
import pytest
import torch

from core.measure import census
from core.calibration import module_probes


def _operations(call) -> list[tuple[str, int]]:
    with torch.no_grad():
        return sorted((op["op"], op["calls"]) for op in census.of(call, "cpu").summary()["ops"])


@pytest.mark.parametrize("name", sorted(module_probes.PROBES))
def test_each_probe_calls_its_class_and_issues_the_operations_its_direct_call_does(name):
    module_call, operations = module_probes.PROBES[name]()
    with torch.no_grad():
        classes = census.of(module_call, "cpu").summary()["stretches"][0]["module_classes"]
    assert name in classes
    assert _operations(module_call) == _operations(operations)
