"""A model described with a form (core.predict.families): each family builds, runs and is counted; every value is
checked against its bounds; a description survives a page's URL; the file `source` writes is the same model and is
predicted the same as the built one."""
import ast

import pytest
import torch

from core.model import hardware
from core.params import ConfigError
from core.predict import families, ownmodel

# A description of each family away from its defaults, in either mode
VARIANTS = {
    "mlp": {"depth": 2, "width": 32, "in_features": 8, "mode": "training"},
    "conv1d": {"kernel": 4, "length": 50, "channels": 8, "batch": 8},
    "conv2d": {"image_size": 12, "in_channels": 1, "kernel": 5, "mode": "training"},
    "recurrent": {"cell": "GRU", "layers": 2, "hidden": 16, "mode": "training"},
    "transformer": {"d_model": 32, "heads": 8, "layers": 1, "batch": 4},
    "embedding": {"vocabulary": 100, "tokens": 5, "depth": 3, "mode": "training"},
}


def _real_input(d: families.Description, batch: int) -> torch.Tensor:
    shape = families.input_of(d).at(batch).shape
    if families.input_of(d).dtype == "int64":
        return torch.randint(d.values["vocabulary"], shape)
    return torch.randn(shape)


def _loaded(d: families.Description, tmp_path) -> torch.nn.Module:
    path = tmp_path / "your_model.py"
    path.write_text(families.source(d))
    return ownmodel.load(f"{path}:build")


def _parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def catalogue_cpu() -> hardware.Target:
    name = next(row["name"] for row in hardware.listing() if row["kind"] == "cpu" and row["origin"] == "catalogue")
    return hardware.resolve(name)


def test_the_fields_are_data_a_page_can_draw_widgets_from():
    for family in families.FAMILIES.values():
        for field in families.COMMON + family.fields:
            assert field.label and field.help
            if field.choices:
                assert field.default in field.choices
            else:
                assert isinstance(field.default, int) and 1 <= field.low <= field.default <= field.high


@pytest.mark.parametrize("mode", families.MODES)
@pytest.mark.parametrize("name", families.FAMILIES)
def test_every_family_builds_runs_and_is_counted_at_its_defaults(name, mode):
    d = families.describe(name, {"mode": mode})
    model = families.build(d)
    with torch.no_grad():
        out = model.eval()(_real_input(d, 2))
    wanted = d.values.get("out_features", d.values.get("classes"))
    assert isinstance(out, torch.Tensor) and out.shape == (2, wanted)
    found = ownmodel.take(families.build(d), families.input_of(d).at(2), d.train, on_gpu=False)
    assert found["ops"]
    assert families.summary(d) == {"text": str(model), "parameters": _parameters(model)}


def test_the_token_family_takes_int64_ids_and_the_others_floats():
    for name in families.FAMILIES:
        given = families.input_of(families.describe(name, {"batch": 7}))
        assert given.shape[0] == 7 and given.dtype == ("int64" if name == "embedding" else "float32")


@pytest.mark.parametrize("family, values, field, allowed", [
    ("mlp", {"depth": 0}, "depth", "a whole number from 1 to 16"),
    ("mlp", {"depth": 17}, "depth", "a whole number from 1 to 16"),
    ("mlp", {"width": 64.0}, "width", "a whole number from 1 to 8,192"),
    ("mlp", {"depth": True}, "depth", "a whole number from 1 to 16"),
    ("mlp", {"batch": "64"}, "batch", "a whole number from 1 to 65,536"),
    ("mlp", {"batch": 65_537}, "batch", "a whole number from 1 to 65,536"),
    ("embedding", {"vocabulary": 1}, "vocabulary", "a whole number from 2 to 1,000,000"),
    ("recurrent", {"cell": "RNN"}, "cell", "one of GRU, LSTM"),
    ("mlp", {"mode": "eval"}, "mode", "one of inference, training"),
    ("transformer", {"d_model": 64, "heads": 5}, "heads", "a whole number from 1 to 64 that divides d_model"),
    ("mlp", {"channels": 3}, "channels", "batch, mode, depth, width, in_features, out_features"),
    ("cnn", {}, "family", "mlp, conv1d, conv2d, recurrent, transformer, embedding"),
    ("conv2d", {"batch": 65_536, "in_channels": 64, "image_size": 1024}, "batch", "17,179,869,184"),
])
def test_a_bad_value_is_refused_naming_its_field_and_what_it_allows(family, values, field, allowed):
    with pytest.raises(ConfigError) as error:
        families.describe(family, values)
    assert error.value.field == field and str(error.value).startswith(f"{field}: ") and allowed in str(error.value)


def test_heads_are_refused_with_the_divisors_of_d_model():
    with pytest.raises(ConfigError, match=r"heads: .*\(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48\)"):
        families.describe("transformer", {"d_model": 96, "heads": 64})


@pytest.mark.parametrize("name", families.FAMILIES)
def test_a_description_round_trips_through_query_parameters(name):
    d = families.describe(name, VARIANTS[name])
    query = families.to_query(d)
    assert all(isinstance(value, str) for value in query.values())
    assert families.from_query(query) == d
    assert families.from_query({key: [value] for key, value in query.items()}) == d  # a list's last value counts
    assert families.from_query({"family": name}) == families.describe(name, {})


def test_a_query_without_a_family_is_the_default_mlp_and_other_families_keys_are_left_alone():
    assert families.from_query({}) == families.describe("mlp", {})
    assert families.from_query({"heads": "3", "depth": " 5 "}) == families.describe("mlp", {"depth": 5})


@pytest.mark.parametrize("query, field", [
    ({"depth": "3.0"}, "depth"),
    ({"depth": "1e3"}, "depth"),
    ({"depth": "-2"}, "depth"),
    ({"batch": "0"}, "batch"),
    ({"mode": "train"}, "mode"),
    ({"family": "rnn"}, "family"),
    ({"family": "recurrent", "cell": "lstm"}, "cell"),
    ({"family": "transformer", "heads": "3"}, "heads"),
])
def test_a_bad_query_value_is_refused_naming_its_field(query, field):
    with pytest.raises(ConfigError) as error:
        families.from_query(query)
    assert error.value.field == field


@pytest.mark.parametrize("name", families.FAMILIES)
def test_the_written_file_builds_the_same_model(name, tmp_path):
    d = families.describe(name, VARIANTS[name])
    text = families.source(d)
    tree = ast.parse(text)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported and all(module.split(".")[0] == "torch" for module in imported)
    assert families.command(d) in ast.get_docstring(tree)
    assert ownmodel.parse_input(families.input_of(d).text) == families.input_of(d)
    built, loaded = families.build(d), _loaded(d, tmp_path)
    assert str(loaded) == str(built) and _parameters(loaded) == _parameters(built)


def test_the_cli_line_says_train_for_a_training_step():
    assert families.command(families.describe("mlp", {"mode": "training"}), "m.py") == \
        "python -m core predict --model m.py:build --input 64x16 --train"
    assert families.command(families.describe("embedding", {})).endswith("--input 64x20:int64")


@pytest.mark.parametrize("name", [n if n == "mlp" else pytest.param(n, marks=pytest.mark.full) for n in families.FAMILIES])
def test_the_built_model_and_its_file_are_predicted_alike(name, tmp_path, catalogue_cpu):
    d = families.describe(name, VARIANTS[name])
    given = families.input_of(d)
    [built] = ownmodel.predict(families.build(d), given, d.train, [catalogue_cpu])
    [loaded] = ownmodel.predict(_loaded(d, tmp_path), given, d.train, [catalogue_cpu])
    assert built["predicted_s"] == loaded["predicted_s"] > 0
    assert built["variant"] == ("training step" if d.train else "forward")
