"""The zoo of held-out models (tests/zoo/models.py): each loads as `predict --model` loads a user's file, and the cost
model predicts it, as a forward and as a training step, on a catalogue CPU. No timing is asserted here:
benchmarks/zoo_accuracy.py times the zoo beside its predictions."""
import math

import pytest

from core.model import hardware
from core.predict import ownmodel
from tests.zoo.models import FAMILIES, ZOO

MODELS = "tests/zoo/models.py"
NEEDED_FAMILIES = {"conv", "recurrent", "attention", "embedding", "normalisation", "tiny", "wide"}


@pytest.fixture(scope="module")
def catalogue_cpu() -> hardware.Target:
    name = next(row["name"] for row in hardware.listing() if row["kind"] == "cpu" and row["origin"] == "catalogue")
    return hardware.resolve(name)


@pytest.mark.parametrize("train", [False, True], ids=["forward", "train"])
@pytest.mark.parametrize("name, build, shape", ZOO, ids=[build for _, build, _ in ZOO])
def test_every_zoo_model_is_predicted(name, build, shape, train, catalogue_cpu):
    model, given = ownmodel.load(f"{MODELS}:{build}"), ownmodel.parse_input(shape)
    [entry] = ownmodel.predict(model, given, train, [catalogue_cpu])
    assert entry["device"] == catalogue_cpu.name
    assert entry["variant"] == ("training step" if train else "forward")
    assert entry["params"] == {"input": given.text}
    assert math.isfinite(entry["predicted_s"]) and entry["predicted_s"] > 0


def test_the_zoo_covers_every_family():
    names = [name for name, _, _ in ZOO]
    assert len(set(names)) == len(names) >= 8
    assert len({build for _, build, _ in ZOO}) == len(ZOO)
    assert set(FAMILIES) == set(names)
    assert NEEDED_FAMILIES <= {family for families in FAMILIES.values() for family in families}


def test_every_zoo_input_is_one_predict_takes():
    for _, _, shape in ZOO:
        assert ownmodel.parse_input(shape).text == shape
    assert {ownmodel.parse_input(shape).dtype for _, _, shape in ZOO} == {"float32", "int64"}
