import math

import pytest

from core import experiments
from core.params import MAX_VALUES, ConfigError, Param


def test_list_parameters_parse_and_check_each_value():
    sizes = Param("sizes", int, (16,), low=1, high=100, many=True)
    assert sizes.parse("16, 32,64") == (16, 32, 64)
    with pytest.raises(ConfigError, match=r"^sizes: 0 is out of range; allowed: .*int from 1 to 100"):
        sizes.parse("16,0")
    with pytest.raises(ConfigError, match=r"^sizes: 'a' is not"):
        sizes.parse("a")
    with pytest.raises(ConfigError, match="at least one value"):
        sizes.parse("")
    for typo in ("16,,64", "16,", ",16"):  # a value left out is refused, not read as one point fewer
        with pytest.raises(ConfigError, match=rf"^sizes: '{typo}' has an empty value between commas; allowed: "):
            sizes.parse(typo)


def test_scalar_bool_and_choice_parameters():
    assert Param("lr", float, 0.1, low=0, high=1).parse("0.5") == 0.5
    assert Param("fused", bool, False).parse("yes") is True
    with pytest.raises(ConfigError, match=r"^repeats: '2.5' is not an int written in digits; allowed: int from 1 to 9"):
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


NON_FINITE = (math.nan, math.inf, -math.inf, float("1e309"))


@pytest.mark.parametrize("name", sorted(experiments.registry()))
def test_no_number_parameter_takes_nan_or_inf_through_config(name):
    """Experiment.config is what the page's rerun panel and the background jobs check with."""
    exp = experiments.get(name)
    for p in (p for p in exp.all_params() if p.kind in (int, float)):
        for bad in NON_FINITE:
            with pytest.raises(ConfigError) as caught:
                exp.config("smoke", {p.name: (bad,) if p.many else bad})
            assert caught.value.field == p.name and "; allowed: " in str(caught.value), str(caught.value)


def test_non_finite_text_is_refused_as_typed():
    lr = Param("lr", float, 0.1, low=1e-6, high=1.0)
    for text in ("nan", "NaN", "inf", "-inf", "Infinity", "1e309", "-1e309"):
        with pytest.raises(ConfigError, match=rf"^lr: '{text}' is not a finite number; allowed: float from 1e-06 to 1.0"):
            lr.parse(text)
    assert lr.parse("1e-3") == 0.001


def test_ints_are_written_in_digits():
    seed = Param("seed", int, 0, low=-5, high=10**6)
    assert [seed.parse(t) for t in ("1000", "+7", "-5", " 12 ")] == [1000, 7, -5, 12]
    for text in ("1e3", "3.5", "16.0", "0x10", "1_000", "nan", "inf", "ten"):
        with pytest.raises(ConfigError, match=rf"^seed: '{text}' is not an int written in digits; allowed: int from"):
            seed.parse(text)
    with pytest.raises(ConfigError, match=r"^seed: '9{40}…' is out of range; allowed: int from -5 to 1000000$"):
        seed.parse("9" * 5000)  # more digits than Python converts
    with pytest.raises(ConfigError, match=r"^seed: needs a value; allowed: "):
        seed.parse(" ")


def test_list_values_are_distinct_and_capped():
    sizes = Param("sizes", int, (16,), low=1, high=10**6, many=True)
    allowed = f"allowed: a comma-separated list of at most {MAX_VALUES} different values, each int from 1 to"
    with pytest.raises(ConfigError, match=rf"^sizes: 16 is given twice; {allowed}"):
        sizes.parse("16,64,16")
    with pytest.raises(ConfigError, match="^sizes: 16 is given twice"):
        sizes.check([16, 16])
    assert len(sizes.parse(",".join(map(str, range(1, MAX_VALUES + 1))))) == MAX_VALUES
    with pytest.raises(ConfigError, match=rf"^sizes: 20000 values are more than the {MAX_VALUES} a list may hold; {allowed}"):
        sizes.parse(",".join(map(str, range(1, 20_001))))
    with pytest.raises(ConfigError, match=rf"^sizes: {MAX_VALUES + 1} values are more than"):
        sizes.check(tuple(range(1, MAX_VALUES + 2)))


def test_a_long_bad_value_is_echoed_clipped():
    with pytest.raises(ConfigError) as caught:
        Param("lr", float, 0.1, low=0, high=1).parse("x" * 100_000)
    assert str(caught.value) == "lr: '" + "x" * 40 + "…' is not a number; allowed: float from 0 to 1"
    exp = experiments.get("matmul")
    with pytest.raises(ConfigError) as caught:
        exp.config("quick", {"y" * 100_000: 1})
    assert caught.value.field == "y" * 40 + "…" and len(str(caught.value)) < 200
    with pytest.raises(ConfigError, match=r"^preset: 'zzz.{37}…' is not one of smoke, quick, paper$"):
        exp.config("z" * 100_000)
    with pytest.raises(ConfigError, match=r"^repeats: 'a' is a str, not int; allowed: int from 1 to 100$"):
        exp.config("quick", {"repeats": "a"})
