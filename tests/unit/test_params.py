import pytest

from core import experiments
from core.params import ConfigError, Param


def test_list_parameters_parse_and_check_each_value():
    sizes = Param("sizes", int, (16,), low=1, high=100, many=True)
    assert sizes.parse("16, 32,64") == (16, 32, 64)
    with pytest.raises(ConfigError, match=r"^sizes: 0 is out of range; allowed: .*int from 1 to 100"):
        sizes.parse("16,0")
    with pytest.raises(ConfigError, match=r"^sizes: 'a' is not"):
        sizes.parse("a")
    with pytest.raises(ConfigError, match="at least one value"):
        sizes.parse("")


def test_scalar_bool_and_choice_parameters():
    assert Param("lr", float, 0.1, low=0, high=1).parse("0.5") == 0.5
    assert Param("fused", bool, False).parse("yes") is True
    with pytest.raises(ConfigError, match=r"^repeats: '2.5' is not int"):
        Param("repeats", int, 1, low=1, high=9).parse("2.5")
    with pytest.raises(ConfigError, match=r"^mode: 'x' is not allowed; allowed: one of a, b"):
        Param("mode", str, "a", choices=("a", "b")).check("x")
    with pytest.raises(ConfigError, match="^flag: "):
        Param("flag", int, 1).check(True)


def test_experiment_config_applies_presets_and_rejects_unknowns():
    exp = experiments.get("matmul")
    assert exp.config("smoke")["sizes"] == exp.presets["smoke"]["sizes"]
    assert exp.config("smoke", {"repeats": 2})["repeats"] == 2
    with pytest.raises(ConfigError, match="^preset: 'huge' is not one of smoke, quick, paper"):
        exp.config("huge")
    with pytest.raises(ConfigError, match="^nonsense: unknown parameter for matmul"):
        exp.config("quick", {"nonsense": 1})
    with pytest.raises(ConfigError, match="^repeats: 0 is out of range"):
        exp.config("quick", {"repeats": 0})
    with pytest.raises(ConfigError, match="^experiment: 'nope' is unknown; known: .*matmul"):
        experiments.get("nope")


def test_every_experiment_declares_the_three_presets_and_valid_defaults():
    for exp in experiments.registry().values():
        assert {"smoke", "quick", "paper"} <= set(exp.presets), exp.name
        for preset in ("smoke", "quick", "paper"):
            exp.config(preset)  # every preset passes its own checks
        about = exp.about()
        assert about["Claim"] and about["Measured"] and about["Why"] and exp.source, exp.name
        assert "{published:" not in " ".join(about.values()), exp.name  # every figure reference resolved
