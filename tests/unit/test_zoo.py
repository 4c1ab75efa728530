"""The zoo of held-out models (tests/zoo/models.py): each loads as `predict --model` loads a user's file, and the cost
model predicts it, as a forward and as a training step, on a catalogue CPU. No timing is asserted here:
benchmarks/zoo_accuracy.py times the zoo beside its predictions."""
import math

import pandas as pd
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


def test_the_benchmark_says_how_far_two_runs_measurements_agree():
    from benchmarks import zoo_accuracy
    point = {"machine_id": "m", "unit": "forward", "input": "4x8"}
    earlier = pd.DataFrame([point | {"model": name, "measured_s": 1.0} for name in ("a", "b", "c", "unmeasured")])
    later = pd.DataFrame([point | {"model": "a", "measured_s": 1.0}, point | {"model": "b", "measured_s": 1.3},
                          point | {"model": "c", "measured_s": 0.5}, point | {"model": "new", "measured_s": 1.0},
                          point | {"model": "unmeasured", "measured_s": None}])
    assert zoo_accuracy.repeatability(later, earlier) == (
        "how far the measurements repeat against the earlier run: two runs of the same configuration agree within "
        "1.5x on 67% of 3 points, within 1.25x on 33% (worst 2.00x apart)")
    assert zoo_accuracy.repeatability(later[later["model"] == "new"], earlier) == ""


def test_the_benchmark_keeps_the_rows_it_measured_when_it_is_stopped(tmp_path, monkeypatch):
    """A lent GPU's machine stopped the zoo after 20 of its 28 rows and its --json, written only at the end, was
    lost: each row is saved as it comes."""
    from benchmarks import zoo_accuracy
    calls = []

    def run_one(build, shape, train, cpu_only):
        calls.append(build)
        if len(calls) > 2:
            raise KeyboardInterrupt
        return {"error": "not measured in this test"}
    monkeypatch.setattr(zoo_accuracy, "run_one", run_one)
    monkeypatch.setattr(zoo_accuracy.profiles, "load", lambda machine_id: {"machine_id": machine_id})
    out = tmp_path / "zoo.json"
    monkeypatch.setattr("sys.argv", ["zoo_accuracy.py", "--json", str(out)])
    with pytest.raises(KeyboardInterrupt):
        zoo_accuracy.main()
    saved = pd.read_json(out, orient="records")
    assert len(saved) == 2 and list(saved["unit"]) == ["forward", "train"]
    assert set(saved["error"]) == {"not measured in this test"}
