"""The operations calibrate times one by one: each probe issues the operation it is named for, as a census
records it, so that the cost model finds its figures under the census's name."""
import pytest

from core.measure import census
from core.calibration import op_probes
from core.model.costmodel import op_name


@pytest.mark.parametrize("name", sorted(op_probes.PROBES))
def test_each_probe_issues_the_operation_it_is_named_for_and_writes_elements(name):
    found = census.of(op_probes.PROBES[name](8), "cpu").summary()
    assert [op_name(op["op"]) for op in found["ops"]] == [name]
    assert found["flops"] > 0  # elements written: the line's x


@pytest.mark.full
def test_a_larger_probe_writes_more_elements():
    for name, build in op_probes.PROBES.items():
        few, many = (census.of(build(rows), "cpu").summary()["flops"] for rows in (8, 64))
        assert many > few, name


@pytest.mark.parametrize("op, name", [("aten.tanh", "tanh"), ("aten.tanh_", "tanh"), ("aten._softmax", "_softmax"),
                                      ("aten.native_batch_norm_backward", "native_batch_norm_backward")])
def test_an_in_place_variant_is_looked_up_as_its_function(op, name):
    assert op_name(op) == name
