"""Measured figures in about.md (core.present.prose): which rows fill a placeholder, how it reads, what happens
when nothing matches or a placeholder is wrong; and every about.md's prose is held to the rule that a
figure is measured, published, or sourced."""
import re
import sys
from pathlib import Path

import pytest

from core import experiments
from core.present import prose
from core.present.presented import parse_about
from tests.helpers import hand_rows

NAMES = ("cnn", "tabnet", "mlp_surface", "iris", "jacobian", "matmul")
CENSUS = {"census_operations": 38, "census_kernels": 18, "census_syncs": 1, "census_copies": 0,
          "census_h2d_bytes": 0, "census_d2h_bytes": 0, "census_flops": 55_400, "census_bytes_moved": 9_000}
TIMES = {"time_compute_s": 0.25, "time_copies_s": 0.0, "time_sync_s": 0.0, "time_loading_s": 0.0,
         "time_host_s": 0.75, "time_profiled_s": 1.0, "breakdown_adds_up": True}


def row(**given) -> dict:
    return {"device": "cpu", "variant": "as written", "batch_size": 512, "unit": "epoch", "per_call": 1,
            "median_s": 1.0, **CENSUS, **TIMES, **given}


def rows(*entries):
    return hand_rows(list(entries), ("batch_size",))


def fill(text, data, this_machine=None, points=None):
    return prose.fill(text, data, "iris", points, this_machine)


# -- which rows ---------------------------------------------------------------------------------------------
def test_a_placeholder_states_the_figure_of_its_variant_device_and_parameters():
    data = rows(row(census_operations=38), row(variant="tuned", census_operations=40),
                row(device="cuda:0", census_operations=41), row(batch_size=4096, census_operations=90))
    assert fill("{measured:census_operations|variant=as written|device=cpu|batch_size=512}", data).startswith(
        "38 operations per epoch\n")
    assert fill("{measured:census_operations|variant=tuned|device=cpu}", data).startswith("40 operations per epoch")
    assert fill("{measured:census_operations|variant=as written|device=cuda}", data).startswith("41 operations")
    assert fill("{measured:census_operations|device=gpu}", data).startswith("41 operations")
    assert fill("{measured:census_operations|device=cpu|batch_size=4096}", data).startswith("90 operations")


def test_figures_are_per_unit_and_the_line_under_the_text_says_how_and_where():
    data = rows(row(per_call=200, census_operations=7_604, census_syncs=200, median_s=2.0,
                    device_name="Intel Xeon", preset="smoke"))
    text = fill("It is {measured:census_operations|device=cpu}, {measured:census_syncs|device=cpu} and "
                "{measured:median_s|device=cpu}.", data)
    assert text.startswith("It is 38 operations per epoch, 1 host sync per epoch and 10 ms per epoch.")
    assert "cpu (Intel Xeon) of m1, run `r1` (smoke preset)" in text
    assert "per-epoch figures are one sample (200 epochs) divided by 200" in text


def test_per_a_column_states_a_figure_per_step():
    data = rows(row(census_operations=320, census_kernels=160, steps_per_epoch=8))
    text = fill("{measured:census_operations|per=steps_per_epoch}", data)
    assert text.startswith("40 operations per step") and "divided by the steps per epoch" in text


def test_this_machine_first_else_the_machine_that_measured_last():
    data = rows(row(census_operations=38, machine_id="here", machine="this box"),
                row(census_operations=50, machine_id="away", machine="that box", run_id="r2",
                    started="2026-02-01T00:00:00+00:00"))
    assert fill("{measured:census_operations}", data, this_machine="here").startswith("38 operations")
    assert "of this machine" in fill("{measured:census_operations}", data, this_machine="here")
    later = fill("{measured:census_operations}", data, this_machine="elsewhere")
    assert later.startswith("50 operations") and "of that box, run `r2`" in later


def test_of_a_machine_the_configuration_run_last():
    data = rows(row(census_operations=38, config_id="quick"),
                row(census_operations=39, config_id="smoke", run_id="r2", started="2026-02-01T00:00:00+00:00"),
                row(census_operations=99, config_id="paper", run_id="r3", status="partial",
                    started="2026-03-01T00:00:00+00:00"))
    assert fill("{measured:census_operations}", data).startswith("39 operations")  # a partial run never counts


def test_rows_that_differ_give_a_range_naming_what_differs():
    data = rows(row(census_operations=38), row(batch_size=4096, census_operations=90))
    assert fill("{measured:census_operations}", data).startswith("38 to 90 operations per epoch, depending on batch_size")
    assert fill("{measured:census_kernels}", data).startswith("18 kernels per epoch\n")  # same figure: no range
    listed = rows(row(census_top_by_count=[{"op": "aten.mm", "count": 2}]),
                  row(batch_size=4096, census_top_by_count=[{"op": "aten.mm", "count": 9}]))
    assert fill("{measured:top}", listed).startswith("`aten.mm` (2) per epoch (at batch_size=512)")  # run order


def test_the_census_at_once_shares_of_the_breakdown_and_the_top_operations():
    data = rows(row(census_copies=2, census_h2d_bytes=4_096, census_d2h_bytes=4,
                    census_top_by_count=[{"op": "aten.t", "count": 9}, {"op": "aten.mm", "count": 6},
                                         {"op": "aten.relu", "count": 3}, {"op": "aten.add_", "count": 1}]))
    assert fill("{measured:census}", data).startswith(
        "38 operations, 18 kernels, 1 host sync and 2 copies (4.1 kB to the device, 4 B to the host) per epoch")
    assert fill("{measured:share:host} {measured:share:compute}", data).startswith("75% 25%")
    assert fill("{measured:top}", data).startswith("`aten.t` (9), `aten.mm` (6), `aten.relu` (3) per epoch")
    assert fill("{measured:census_flops} {measured:census_bytes_moved}", data).startswith(
        "55.4 kFLOP per epoch 9 kB read and written per epoch")


def test_a_breakdown_that_does_not_add_up_is_left_out_and_said_so():
    text = fill("{measured:share:host}", rows(row(breakdown_adds_up=False)))
    assert text.startswith(prose.NOT_MEASURED) and "did not add up to the median was left out" in text
    assert fill("{measured:census_operations}", rows(row(breakdown_adds_up=False))).startswith("38 operations")


def test_nothing_measured_reads_so_with_the_command_that_measures_it():
    for data in (None, rows(row()).iloc[0:0], rows(row(census_operations=None)), rows(row(point_status="skipped"))):
        text = fill("It is {measured:census_operations|device=cpu}.", data)
        assert text.startswith("It is *not measured yet*.")
        assert "`python -m core run iris --preset quick`" in text and "GPU" not in text
    gpu = fill("{measured:census_operations|device=cuda}", rows(row()))
    assert gpu.startswith("*not measured yet*") and "GPU figures on a machine with a GPU" in gpu
    assert "Figures above" not in gpu


def test_text_without_placeholders_is_left_as_it_is():
    assert fill("Because.", rows(row())) == "Because."


# -- placeholders that can never be filled ------------------------------------------------------------------
@pytest.mark.parametrize("placeholder, says", [
    ("{measured:census_ops}", "unknown field 'census_ops'"),
    ("{measured:median_s|variant}", "'variant' is not key=value"),
    ("{measured:median_s|device=tpu}", "device=tpu is not a device"),
    ("{measured:median_s|per=rows}", "per=rows is not allowed"),
    ("{measured:median_s|variant=a|variant=b}", "'variant' is given twice"),
    ("{measured:median_s|variant=as writen}", "no variant 'as writen'"),
    ("{measured:median_s|batch=3}", "'batch' is not a parameter of any point"),
    ("{measured:median_s|variant=hook check|log_every=1}", "no planned point"),
    ("{measured:median_s|variant=tuned|log_every=7}", "no planned point"),
    ("{measured:median_s", "unclosed placeholder"),
])
def test_a_bad_placeholder_fails_when_the_text_loads_naming_it(placeholder, says):
    iris = experiments.get("iris")
    text = f"## Claim\n\nc\n\n## Measured\n\nm\n\n## Why\n\nIt is {placeholder}.\n"
    with pytest.raises(prose.PlaceholderError) as failed:
        parse_about(text, None, iris)
    assert says in str(failed.value) and "about.md of iris" in str(failed.value)
    if placeholder.endswith("}"):
        assert placeholder in str(failed.value)


def test_a_placeholder_may_name_a_device_kind_its_variant_runs_on():
    matmul = experiments.get("matmul")
    text = "## Claim\n\nc\n\n## Measured\n\nm\n\n## Why\n\n{measured:gb_per_s|variant=h2d pinned|device=%s}\n"
    assert "not measured yet" in parse_about(text % "cuda:1", None, matmul)["Why"]
    with pytest.raises(prose.PlaceholderError, match="no planned point"):
        parse_about(text % "cpu", None, matmul)  # pinned copies run on CUDA only


def test_experiment_about_fills_from_its_rows():
    iris = experiments.get("iris")
    data = hand_rows([row(variant="as written", log_every=1, per_call=200, census_operations=7_600,
                          census_kernels=3_600, census_syncs=200, census_flops=11_080_000)], ("log_every",))
    why = iris.about(data)["Why"]
    assert "38 operations, 18 kernels, 1 host sync and 0 copies per epoch" in why
    assert "not measured yet" in iris.about()["Why"] and iris.about()["Claim"] == iris.claim


# -- every about.md ------------------------------------------------------------------------------------------
def why_text(name: str) -> str:
    about = Path(sys.modules[type(experiments.get(name)).__module__].__file__).with_name("about.md")
    text = open(about, encoding="utf-8").read()
    return text[text.index("## Why"):text.index("## Notes") if "## Notes" in text else None]


@pytest.mark.parametrize("name", NAMES)
def test_every_why_refers_to_measured_figures_that_can_be_filled(name):
    assert len(prose.PLACEHOLDER.findall(why_text(name))) >= 3
    about = experiments.get(name).about()  # checks every placeholder against the experiment's planned points
    assert "{measured" not in " ".join(about.values())


# A number with a unit of time, rate, size or FLOPs, a percentage or a ratio ("1.8x").
FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:\s?(?:µs|us|ms|ns|s|[kMGT]?B/s|[kMGTP]?FLOP/s|[kMGT]?B|"
                    r"[kMGTP]?FLOP|%)|x)(?![\w/])")
SOURCE = re.compile(r"\([^()]*[A-Za-z][^()]*\s[^()]*\)")   # a parenthesis of words, such as (NVIDIA, Guide)


def unsourced(text: str) -> list[str]:
    """Figures stated outside a placeholder with no source in parentheses later in the same sentence."""
    text = re.sub(r"\{(measured|published):[^{}]*\}", "FIGURE", text)
    found = []
    for match in FIGURE.finditer(text):
        end = re.compile(r"\.(\s|$)").search(text, match.end())
        rest = text[match.end():end.start() if end else len(text)]
        if not SOURCE.search(rest):
            found.append(match.group(0))
    return found


def test_the_source_rule_finds_a_bare_figure_and_accepts_a_sourced_one():
    assert unsourced("A launch costs about 5 µs on any GPU.") == ["5 µs"]
    assert unsourced("Copies ran at 12 GB/s, and 1.8x slower. Then 40% more.") == ["12 GB/s", "1.8x", "40%"]
    assert unsourced("A link peaks at 16 GB/s (NVIDIA, CUDA C++ Best Practices Guide).") == []
    assert unsourced("It is {measured:median_s|device=cpu} and {published:iris-total.cpu}.") == []
    assert unsourced("A 200 x 200 matrix, 2n³ operations on batches of 4096 rows.") == []


@pytest.mark.parametrize("name", NAMES)
def test_no_why_states_an_unsourced_figure(name):
    assert unsourced(why_text(name)) == []
